//! `/metrics`: the hub's counters in the Prometheus text format (0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::hub::{Histogram, Metrics, QueueStatus, StatusReport};
use crate::cluster::ContainerState;

const MIB: f64 = 1024.0 * 1024.0;

/// Nodes given series of their own: the ones holding the most. A cluster of thousands of
/// nodes would otherwise multiply the series by its size.
pub const MAX_NODE_SERIES: usize = 100;

/// Renders the counters, plus the gauges of the latest status (as
/// [`super::hub::Hub::full_status`] serves it, with the leases).
pub fn render(m: &Metrics, status: &StatusReport) -> String {
    let mut out = String::with_capacity(4096);
    header(
        &mut out,
        "preemptor_build_info",
        "gauge",
        "Always 1; the version of the running controller as a label.",
    );
    let _ = writeln!(
        out,
        "preemptor_build_info{{version=\"{}\"}} 1",
        label(env!("CARGO_PKG_VERSION"))
    );
    by_policy_and_action(
        &mut out,
        "preemptor_preemptions_total",
        "Actions carried out, by policy and action.",
        &m.actions,
    );
    by_policy_and_action(
        &mut out,
        "preemptor_preemption_failures_total",
        "Actions that failed (retried next tick), by policy and action.",
        &m.failures,
    );
    scalar(
        &mut out,
        "preemptor_reclaimed_memory_byte_seconds_total",
        "counter",
        "Memory held back from long jobs, integrated over time (byte*s).",
        m.reclaimed_mb_seconds * MIB,
    );
    scalar(
        &mut out,
        "preemptor_reclaimed_vcore_seconds_total",
        "counter",
        "Vcores held back from long jobs, integrated over time (vcore*s).",
        m.reclaimed_vcore_seconds,
    );
    histogram(
        &mut out,
        "preemptor_short_job_wait_seconds",
        "Time a short application waited for its first container.",
        &m.short_wait_seconds,
    );
    histogram(
        &mut out,
        "preemptor_tick_duration_seconds",
        "Duration of one observe-decide-act tick.",
        &m.tick_seconds,
    );
    scalar(
        &mut out,
        "preemptor_ticks_total",
        "counter",
        "Ticks run.",
        m.ticks as f64,
    );
    scalar(
        &mut out,
        "preemptor_rm_errors_total",
        "counter",
        "Failed polls of the ResourceManager.",
        m.rm_errors as f64,
    );
    scalar(
        &mut out,
        "preemptor_containers_suspended",
        "gauge",
        "Containers suspended now.",
        status.suspended as f64,
    );
    scalar(
        &mut out,
        "preemptor_containers_shrunk",
        "gauge",
        "Containers shrunk now.",
        status.shrunk as f64,
    );
    scalar(
        &mut out,
        "preemptor_reclaimed_memory_bytes",
        "gauge",
        "Memory held back from long jobs now.",
        status.reclaimed.memory_mb as f64 * MIB,
    );
    scalar(
        &mut out,
        "preemptor_reclaimed_vcores",
        "gauge",
        "Vcores held back from long jobs now.",
        f64::from(status.reclaimed.vcores),
    );
    scalar(
        &mut out,
        "preemptor_rm_reachable",
        "gauge",
        "1 when the last ResourceManager poll answered.",
        if status.rm_reachable { 1.0 } else { 0.0 },
    );
    let oldest = status
        .nodes
        .iter()
        .flat_map(|n| &n.containers)
        .filter_map(|c| c.held_since_ms)
        .min()
        .map_or(0.0, |t| status.at_ms.saturating_sub(t) as f64 / 1000.0);
    scalar(
        &mut out,
        "preemptor_held_oldest_seconds",
        "gauge",
        "How long the longest-held suspended or shrunk container has been held (0: none).",
        oldest,
    );
    let failing = status
        .nodes
        .iter()
        .filter_map(|n| Some((n.agent.as_ref()?, n.lease.as_ref()?)))
        .filter(|(_, l)| l.error.is_some())
        .map(|(a, _)| a)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    scalar(
        &mut out,
        "preemptor_agent_leases_failing",
        "gauge",
        "Agents whose latest lease renewal failed: they resume everything when it runs out.",
        failing as f64,
    );
    queues(&mut out, status);
    nodes(&mut out, status);
    out
}

/// A per-queue gauge: name, help, and its value for a queue.
type QueueGauge = (&'static str, &'static str, fn(&QueueStatus) -> f64);

/// Per leaf and parent queue: used, guaranteed and pending, in bytes and vcores.
fn queues(out: &mut String, status: &StatusReport) {
    let families: [QueueGauge; 6] = [
        (
            "preemptor_queue_used_memory_bytes",
            "Memory the queue's containers hold.",
            |q| q.used.memory_mb as f64 * MIB,
        ),
        (
            "preemptor_queue_guaranteed_memory_bytes",
            "The queue's guaranteed memory.",
            |q| q.guaranteed.memory_mb as f64 * MIB,
        ),
        (
            "preemptor_queue_pending_memory_bytes",
            "Memory the queue's applications ask for.",
            |q| q.pending.memory_mb as f64 * MIB,
        ),
        (
            "preemptor_queue_used_vcores",
            "Vcores the queue's containers hold.",
            |q| f64::from(q.used.vcores),
        ),
        (
            "preemptor_queue_guaranteed_vcores",
            "The queue's guaranteed vcores.",
            |q| f64::from(q.guaranteed.vcores),
        ),
        (
            "preemptor_queue_pending_vcores",
            "Vcores the queue's applications ask for.",
            |q| f64::from(q.pending.vcores),
        ),
    ];
    for (name, help, value) in families {
        header(out, name, "gauge", help);
        for q in &status.queues {
            let _ = writeln!(
                out,
                "{name}{{queue=\"{}\"}} {}",
                label(&q.path),
                number(value(q))
            );
        }
    }
}

/// Nodes that hold something (containers held, or capacity raised for them), the
/// [`MAX_NODE_SERIES`] holding the most; how many more there were.
fn nodes(out: &mut String, status: &StatusReport) {
    let mut rows: Vec<(&str, usize, f64)> = status
        .nodes
        .iter()
        .map(|n| {
            let held = n
                .containers
                .iter()
                .filter(|c| matches!(c.state, ContainerState::Suspended | ContainerState::Shrunk))
                .count();
            let raised = n.advertised.memory_mb.saturating_sub(n.capacity.memory_mb) as f64 * MIB;
            (n.id.as_str(), held, raised)
        })
        .filter(|&(_, held, raised)| held > 0 || raised > 0.0)
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.total_cmp(&a.2)).then(a.0.cmp(b.0)));
    let omitted = rows.len().saturating_sub(MAX_NODE_SERIES);
    rows.truncate(MAX_NODE_SERIES);
    header(
        out,
        "preemptor_node_held_containers",
        "gauge",
        "Suspended and shrunk containers on the node (nodes holding something only).",
    );
    for (node, held, _) in &rows {
        let _ = writeln!(
            out,
            "preemptor_node_held_containers{{node=\"{}\"}} {held}",
            label(node)
        );
    }
    header(
        out,
        "preemptor_node_raised_memory_bytes",
        "gauge",
        "Memory the node advertises to the RM above its physical capacity.",
    );
    for (node, _, raised) in &rows {
        let _ = writeln!(
            out,
            "preemptor_node_raised_memory_bytes{{node=\"{}\"}} {}",
            label(node),
            number(*raised)
        );
    }
    scalar(
        out,
        "preemptor_node_series_omitted",
        "gauge",
        "Nodes holding something that were left out of the per-node series.",
        omitted as f64,
    );
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn scalar(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {}", number(value));
}

fn by_policy_and_action(
    out: &mut String,
    name: &str,
    help: &str,
    values: &BTreeMap<(String, String), u64>,
) {
    header(out, name, "counter", help);
    for ((policy, action), n) in values {
        let _ = writeln!(
            out,
            "{name}{{policy=\"{}\",action=\"{}\"}} {n}",
            label(policy),
            label(action)
        );
    }
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    header(out, name, "histogram", help);
    let mut cumulative = 0u64;
    for (i, bound) in h.bounds.iter().enumerate() {
        cumulative += h.counts.get(i).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"{}\"}} {cumulative}",
            number(*bound)
        );
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", number(h.sum));
    let _ = writeln!(out, "{name}_count {}", h.count);
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// Label values escape backslash, double quote and newline.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_counters_and_cumulative_buckets() {
        let mut m = Metrics::default();
        m.actions.insert(("graceful".into(), "shrink".into()), 3);
        m.failures.insert(("kill".into(), "kill\"x".into()), 1);
        m.reclaimed_mb_seconds = 2048.5;
        m.short_wait_seconds.observe(0.2);
        m.short_wait_seconds.observe(7.0);
        m.short_wait_seconds.observe(1000.0);
        m.ticks = 5;
        let status = StatusReport {
            suspended: 2,
            ..StatusReport::default()
        };
        let text = render(&m, &status);
        for line in [
            "# TYPE preemptor_preemptions_total counter",
            "preemptor_preemptions_total{policy=\"graceful\",action=\"shrink\"} 3",
            "preemptor_preemption_failures_total{policy=\"kill\",action=\"kill\\\"x\"} 1",
            "preemptor_reclaimed_memory_byte_seconds_total 2148007936",
            "preemptor_short_job_wait_seconds_bucket{le=\"0.1\"} 0",
            "preemptor_short_job_wait_seconds_bucket{le=\"0.25\"} 1",
            "preemptor_short_job_wait_seconds_bucket{le=\"10\"} 2",
            "preemptor_short_job_wait_seconds_bucket{le=\"300\"} 2",
            "preemptor_short_job_wait_seconds_bucket{le=\"+Inf\"} 3",
            "preemptor_short_job_wait_seconds_sum 1007.2",
            "preemptor_short_job_wait_seconds_count 3",
            "preemptor_tick_duration_seconds_count 0",
            "preemptor_ticks_total 5",
            "preemptor_containers_suspended 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(
            text.lines()
                .any(|l| l.starts_with("preemptor_build_info{version=\"") && l.ends_with("} 1")),
            "{text}"
        );
        // Every sample belongs to a family announced before it.
        let mut announced = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                announced.push(rest.split(' ').next().unwrap_or("").to_string());
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap_or("");
                assert!(
                    announced.iter().any(|f| name.starts_with(f.as_str())),
                    "{l}"
                );
            }
        }
    }

    #[test]
    fn queues_nodes_holding_and_leases_have_their_gauges() {
        use crate::cluster::Partition;
        use crate::controller::hub::{ContainerRow, LeaseRow, NodeStatus, QueueStatus};
        use crate::resources::{Limits, Resource};
        let node = |i: usize, held: bool, failing: bool| NodeStatus {
            id: format!("nm{i}:8042"),
            capacity: Resource::new(4096, 4),
            advertised: Resource::new(if held { 6016 } else { 4096 }, 4),
            partition: Partition::General,
            agent: Some(format!("http://nm{i}:8049")),
            agent_reachable: true,
            lease: Some(LeaseRow {
                error: failing.then(|| "refused".to_string()),
                ..LeaseRow::default()
            }),
            containers: vec![ContainerRow {
                id: format!("container_1_0001_01_{i:06}"),
                application: "application_1_0001".into(),
                queue: "root.long".into(),
                allocated: Resource::new(2048, 1),
                current: Limits::new(64, 10),
                state: if held {
                    ContainerState::Suspended
                } else {
                    ContainerState::Running
                },
                held_since_ms: held.then_some(100_000 + i as u64 * 1000),
            }],
        };
        let mut nodes: Vec<NodeStatus> = (0..MAX_NODE_SERIES + 5)
            .map(|i| node(i, true, false))
            .collect();
        nodes.push(node(999, false, true));
        let status = StatusReport {
            at_ms: 160_000,
            queues: vec![QueueStatus {
                path: "root.short".into(),
                used: Resource::new(1024, 1),
                guaranteed: Resource::new(8192, 4),
                pending: Resource::new(2048, 2),
                ..QueueStatus::default()
            }],
            nodes,
            ..StatusReport::default()
        };
        let text = render(&Metrics::default(), &status);
        for line in [
            "preemptor_queue_used_memory_bytes{queue=\"root.short\"} 1073741824",
            "preemptor_queue_guaranteed_vcores{queue=\"root.short\"} 4",
            "preemptor_queue_pending_memory_bytes{queue=\"root.short\"} 2147483648",
            "preemptor_node_held_containers{node=\"nm0:8042\"} 1",
            "preemptor_node_raised_memory_bytes{node=\"nm0:8042\"} 2013265920",
            "preemptor_node_series_omitted 5",
            // Held since 100 s, observed at 160 s.
            "preemptor_held_oldest_seconds 60",
            "preemptor_agent_leases_failing 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        let per_node = text
            .lines()
            .filter(|l| l.starts_with("preemptor_node_held_containers{"))
            .count();
        assert_eq!(per_node, MAX_NODE_SERIES);
        // A node holding nothing has no series.
        assert!(!text.contains("nm999:8042"), "{text}");
    }
}
