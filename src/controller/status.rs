//! `preemptor status`: what a running controller holds right now, read from its API.

use std::fmt::Write as _;
use std::io::{self, Write as _};

use super::hub::{ContainerRow, LeaseRow, NodeStatus, StatusReport};
use super::log::utc_millis;
use super::logs::Format;
use super::ops::{ControllerTarget, OpsError};
use crate::text::table;

#[derive(Debug, clap::Args)]
#[command(
    long_about = "Prints what a running controller holds right now, from its API \
(/api/v1/status): the containers it has suspended or shrunk and since when, each node's \
advertised capacity against its physical one, the agents' leases, the last tick, an \
operator's hold-off and the containers an operator exempted (`preemptor resume`). Nothing is \
changed.\n\n\
The controller's address and token come from --controller and --token-file, else from \
preemptor-site.xml in --conf-dir (yarn.preemptor.controller.listen and .token-file).\n\n\
Exit status: 0 when the controller answered, 1 otherwise.",
    after_help = "Example:\n  preemptor status --controller http://rm-host:8090 --token-file /etc/preemptor/controller.token"
)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: ControllerTarget,
    /// `text`: tables for a person. `json`: the API's answer as it is.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub async fn status(args: StatusArgs) -> Result<(), OpsError> {
    let c = args.target.connect()?;
    let report = c.client.status().await.map_err(|e| c.explain(e))?;
    let out = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report)
                .map_err(|e| OpsError::Output(io::Error::other(e)))?;
            s.push('\n');
            s
        }
        Format::Text => render(&report, &c.url),
    };
    io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(OpsError::Output)
}

/// The report as text: a header, then the queues, the nodes and the held containers.
pub fn render(s: &StatusReport, controller: &str) -> String {
    let mut out = String::new();
    let mode = if s.observe_only {
        "observe-only"
    } else {
        "acting"
    };
    let rm = if s.rm_reachable {
        "reachable"
    } else {
        "UNREACHABLE"
    };
    let _ = writeln!(
        out,
        "controller {controller}: policy {} ({mode}), RM {} {rm}, observed {}",
        s.policy,
        if s.rm.is_empty() { "-" } else { &s.rm },
        utc_millis(s.at_ms)
    );
    match &s.last_tick {
        Some(t) => {
            let _ = writeln!(
                out,
                "last tick: {} ({}), {:.1} ms, {} action(s) sent, {} failed, {} late",
                utc_millis(t.at_ms),
                t.trigger,
                t.duration_ms,
                t.actions,
                t.failed,
                t.late
            );
        }
        None => out.push_str("last tick: none yet\n"),
    }
    let _ = writeln!(
        out,
        "held: {} suspended, {} shrunk, {} reclaimed from long jobs",
        s.suspended, s.shrunk, s.reclaimed
    );
    if let Some(h) = &s.hold_off {
        let left = h.until_ms.saturating_sub(s.at_ms);
        let _ = writeln!(
            out,
            "hold-off: nothing new is taken until {} ({} left then), set by `preemptor {}`",
            utc_millis(h.until_ms),
            seconds(left),
            h.by
        );
    }
    if !s.exempt.is_empty() {
        let _ = writeln!(
            out,
            "exempt (resumed by an operator, never taken again): {}",
            s.exempt.join(" ")
        );
    }

    out.push('\n');
    let mut rows = vec![row(["QUEUE", "USED", "GUARANTEED", "PENDING"])];
    for q in &s.queues {
        rows.push(row([
            q.path.clone(),
            q.used.to_string(),
            q.guaranteed.to_string(),
            q.pending.to_string(),
        ]));
    }
    out.push_str(&table(&rows));

    out.push('\n');
    let mut rows = vec![row(["NODE", "ADVERTISED", "PHYSICAL", "AGENT", "LEASE"])];
    for n in &s.nodes {
        let advertised = if n.advertised == n.capacity {
            n.advertised.to_string()
        } else {
            format!("{} (raised)", n.advertised)
        };
        rows.push(row([
            n.id.clone(),
            advertised,
            n.capacity.to_string(),
            agent(n),
            lease(n.lease.as_ref(), s.at_ms),
        ]));
    }
    out.push_str(&table(&rows));

    out.push('\n');
    let held: Vec<(&NodeStatus, &ContainerRow)> = s
        .nodes
        .iter()
        .flat_map(|n| n.containers.iter().map(move |c| (n, c)))
        .filter(|(_, c)| c.held_since_ms.is_some())
        .collect();
    if held.is_empty() {
        out.push_str("no container is suspended or shrunk\n");
    } else {
        let mut rows = vec![row([
            "CONTAINER",
            "STATE",
            "SINCE",
            "NODE",
            "QUEUE",
            "ALLOCATED",
            "NOW",
        ])];
        for (n, c) in held {
            rows.push(row([
                c.id.clone(),
                format!("{:?}", c.state).to_lowercase(),
                c.held_since_ms.map_or("-".into(), |t| when(t, s.at_ms)),
                n.id.clone(),
                c.queue.clone(),
                c.allocated.to_string(),
                c.current.to_string(),
            ]));
        }
        out.push_str(&table(&rows));
    }
    out
}

fn row<const N: usize>(cells: [impl Into<String>; N]) -> Vec<String> {
    cells.into_iter().map(Into::into).collect()
}

fn agent(n: &NodeStatus) -> String {
    match (&n.agent, n.agent_reachable) {
        (None, _) => "-".into(),
        (Some(a), true) => a.clone(),
        (Some(a), false) => format!("{a} (unreachable)"),
    }
}

fn lease(l: Option<&LeaseRow>, now_ms: u64) -> String {
    let Some(l) = l else {
        return "-".into();
    };
    let mut text = match (&l.holder, l.renewed_at_ms, l.remaining_ms) {
        (holder, Some(at), Some(left)) => format!(
            "held by {}, renewed {}, {} left then",
            holder.as_deref().unwrap_or("nobody"),
            ago(at, now_ms),
            seconds(left)
        ),
        _ => "never renewed".into(),
    };
    if let Some(e) = &l.error {
        let _ = write!(text, "; last renewal FAILED: {e}");
    }
    text
}

/// `2026-11-29T13:45:01.123Z (3.1 s ago)`, relative to the report's own time.
fn when(at_ms: u64, now_ms: u64) -> String {
    format!("{} ({})", utc_millis(at_ms), ago(at_ms, now_ms))
}

fn ago(at_ms: u64, now_ms: u64) -> String {
    match now_ms.checked_sub(at_ms) {
        Some(0) | None => "now".into(),
        Some(d) => format!("{} ago", seconds(d)),
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ContainerState, Partition};
    use crate::controller::hub::{QueueStatus, TickSummary};
    use crate::resources::{Limits, Resource};

    fn report() -> StatusReport {
        let container = |id: &str, held: Option<u64>, state| ContainerRow {
            id: id.into(),
            application: "application_1_0001".into(),
            queue: "root.long".into(),
            allocated: Resource::new(4096, 2),
            current: if held.is_some() {
                Limits::new(64, 10)
            } else {
                Limits::new(4096, 2000)
            },
            state,
            held_since_ms: held,
        };
        StatusReport {
            at_ms: 1_795_277_610_000,
            policy: "immediate".into(),
            rm: "http://rm:8088".into(),
            rm_reachable: true,
            queues: vec![QueueStatus {
                path: "root.short".into(),
                guaranteed: Resource::new(8192, 4),
                used: Resource::new(1024, 1),
                pending: Resource::new(2048, 2),
                ..QueueStatus::default()
            }],
            nodes: vec![NodeStatus {
                id: "nm1:8042".into(),
                capacity: Resource::new(16384, 8),
                advertised: Resource::new(20416, 9),
                partition: Partition::General,
                agent: Some("http://nm1:8049".into()),
                agent_reachable: true,
                lease: Some(LeaseRow {
                    holder: Some("controller@rm".into()),
                    renewed_at_ms: Some(1_795_277_608_000),
                    remaining_ms: Some(30_000),
                    error: None,
                }),
                containers: vec![
                    container(
                        "container_1_0001_01_000002",
                        Some(1_795_277_607_123),
                        ContainerState::Suspended,
                    ),
                    container("container_1_0001_01_000003", None, ContainerState::Running),
                ],
            }],
            suspended: 1,
            reclaimed: Resource::new(4032, 1),
            last_tick: Some(TickSummary {
                at_ms: 1_795_277_609_500,
                trigger: "timer".into(),
                duration_ms: 12.25,
                actions: 2,
                failed: 0,
                late: 1,
            }),
            ..StatusReport::default()
        }
    }

    #[test]
    fn text_shows_held_containers_since_when_nodes_leases_and_the_last_tick() {
        let text = render(&report(), "http://127.0.0.1:8090");
        assert!(
            text.contains("policy immediate (acting), RM http://rm:8088 reachable"),
            "{text}"
        );
        assert!(
            text.contains("last tick: 2026-11-21T16:13:29.500Z (timer), 12.2 ms, 2 action(s) sent, 0 failed, 1 late"),
            "{text}"
        );
        assert!(text.contains("held: 1 suspended, 0 shrunk"), "{text}");
        // The held container with its time, and not the running one.
        let held = text
            .lines()
            .find(|l| l.starts_with("container_1_0001_01_000002"))
            .expect(&text);
        assert!(held.contains("suspended"), "{held}");
        assert!(
            held.contains("2026-11-21T16:13:27.123Z (2.9 s ago)"),
            "{held}"
        );
        assert!(
            held.contains("<4096 MB, 2 vcores>  <64 MB, 0.010 vcores>"),
            "{held}"
        );
        assert!(!text.contains("container_1_0001_01_000003"), "{text}");
        assert!(!text.contains("hold-off"), "{text}");
        assert!(!text.contains("exempt"), "{text}");
        let node = text
            .lines()
            .find(|l| l.starts_with("nm1:8042"))
            .expect(&text);
        assert!(node.contains("<20416 MB, 9 vcores> (raised)"), "{node}");
        assert!(node.contains("<16384 MB, 8 vcores>"), "{node}");
        assert!(
            node.contains("held by controller@rm, renewed 2.0 s ago, 30.0 s left then"),
            "{node}"
        );
    }

    #[test]
    fn text_says_what_is_missing_or_failing() {
        let mut r = report();
        r.last_tick = None;
        r.rm_reachable = false;
        r.nodes[0].agent_reachable = false;
        r.nodes[0].advertised = r.nodes[0].capacity;
        if let Some(l) = &mut r.nodes[0].lease {
            l.error = Some("connection refused".into());
        }
        for c in &mut r.nodes[0].containers {
            c.held_since_ms = None;
        }
        let text = render(&r, "http://c:8090");
        assert!(text.contains("RM http://rm:8088 UNREACHABLE"), "{text}");
        assert!(text.contains("last tick: none yet"), "{text}");
        assert!(text.contains("http://nm1:8049 (unreachable)"), "{text}");
        assert!(
            text.contains("last renewal FAILED: connection refused"),
            "{text}"
        );
        assert!(!text.contains("(raised)"), "{text}");
        assert!(
            text.contains("no container is suspended or shrunk"),
            "{text}"
        );
    }

    #[test]
    fn text_shows_an_operators_hold_off_and_exempt_containers() {
        let mut r = report();
        r.hold_off = Some(crate::controller::hub::HoldOff {
            until_ms: r.at_ms + 240_000,
            by: "resume --all".into(),
        });
        r.exempt = vec!["container_1_0001_01_000004".into()];
        let text = render(&r, "http://c:8090");
        assert!(
            text.contains("hold-off: nothing new is taken until 2026-11-21T16:17:30.000Z (240.0 s left then), set by `preemptor resume --all`"),
            "{text}"
        );
        assert!(
            text.contains(
                "exempt (resumed by an operator, never taken again): container_1_0001_01_000004"
            ),
            "{text}"
        );
    }
}
