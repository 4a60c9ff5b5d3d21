//! `/metrics`: the hub's counters and the gauges of the latest status, in the OpenMetrics
//! 1.0 text exposition, encoded by `prometheus-client`.
//!
//! Nothing here keeps state: a [`Collector`] reads the hub when a scrape encodes it (the
//! counters it keeps, [`Metrics`], and the latest status with the leases), so the hub stays
//! the only copy and the gauges are those of the status `/api/v1/status` serves.

use std::fmt;
use std::iter::once;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, NoLabelSet, text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::hub::{Histogram, Hub, Metrics, QueueStatus, StatusReport};
pub use crate::agent::metrics::CONTENT_TYPE;
use crate::cluster::ContainerState;

const MIB: u64 = 1024 * 1024;

/// Nodes given series of their own: the ones holding the most. A cluster of thousands of
/// nodes would otherwise multiply the series by its size.
pub const MAX_NODE_SERIES: usize = 100;

/// Reads the hub at encode time: what `/metrics` serves.
#[derive(Clone)]
pub struct HubCollector(pub Hub);

impl fmt::Debug for HubCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HubCollector")
    }
}

impl Collector for HubCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        encode(encoder, &self.0.metrics(), &self.0.full_status())
    }
}

/// Given counters and status, for [`render`].
#[derive(Debug)]
struct Snapshot {
    metrics: Metrics,
    status: StatusReport,
}

impl Collector for Snapshot {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        encode(encoder, &self.metrics, &self.status)
    }
}

/// The exposition of the hub as it is now.
pub fn render_hub(hub: &Hub) -> String {
    exposition(HubCollector(hub.clone()))
}

/// The exposition of given counters and status (as [`Hub::full_status`] serves it, with
/// the leases).
pub fn render(m: &Metrics, status: &StatusReport) -> String {
    exposition(Snapshot {
        metrics: m.clone(),
        status: status.clone(),
    })
}

fn exposition(collector: impl Collector) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    let mut out = String::with_capacity(8192);
    // Writing to a String does not fail, nor does anything `encode` below asks of the
    // encoder; should it, the scrape still ends in `# EOF` and fails to parse.
    if text::encode(&mut out, &registry).is_err() {
        tracing::error!("encoding the controller's metrics failed");
        out.push_str("# EOF\n");
    }
    out
}

fn encode(mut e: DescriptorEncoder, m: &Metrics, status: &StatusReport) -> fmt::Result {
    labelled_gauge(
        &mut e,
        "preemptor_build_info",
        "Always 1; the version of the running controller as a label.",
        [([("version", env!("CARGO_PKG_VERSION"))], 1u64)],
    )?;
    by_policy_and_action(
        &mut e,
        "preemptor_preemptions_total",
        "Actions carried out, by policy and action.",
        &m.actions,
    )?;
    by_policy_and_action(
        &mut e,
        "preemptor_preemption_failures_total",
        "Actions that failed (retried next tick), by policy and action.",
        &m.failures,
    )?;
    counter(
        &mut e,
        "preemptor_reclaimed_memory_byte_seconds_total",
        "Memory held back from long jobs, integrated over time (byte*s).",
        m.reclaimed_mb_seconds * MIB as f64,
    )?;
    counter(
        &mut e,
        "preemptor_reclaimed_vcore_seconds_total",
        "Vcores held back from long jobs, integrated over time (vcore*s).",
        m.reclaimed_vcore_seconds,
    )?;
    histogram(
        &mut e,
        "preemptor_short_job_wait_seconds",
        "Time a short application waited for its first container.",
        &m.short_wait_seconds,
    )?;
    histogram(
        &mut e,
        "preemptor_tick_duration_seconds",
        "Duration of one observe-decide-act tick.",
        &m.tick_seconds,
    )?;
    counter(&mut e, "preemptor_ticks_total", "Ticks run.", m.ticks)?;
    counter(
        &mut e,
        "preemptor_rm_errors_total",
        "Failed polls of the ResourceManager.",
        m.rm_errors,
    )?;
    gauge(
        &mut e,
        "preemptor_containers_suspended",
        "Containers suspended now.",
        status.suspended,
    )?;
    gauge(
        &mut e,
        "preemptor_containers_shrunk",
        "Containers shrunk now.",
        status.shrunk,
    )?;
    gauge(
        &mut e,
        "preemptor_reclaimed_memory_bytes",
        "Memory held back from long jobs now.",
        status.reclaimed.memory_mb * MIB,
    )?;
    gauge(
        &mut e,
        "preemptor_reclaimed_vcores",
        "Vcores held back from long jobs now.",
        status.reclaimed.vcores,
    )?;
    gauge(
        &mut e,
        "preemptor_rm_reachable",
        "1 when the last ResourceManager poll answered.",
        u32::from(status.rm_reachable),
    )?;
    let oldest = status
        .nodes
        .iter()
        .flat_map(|n| &n.containers)
        .filter_map(|c| c.held_since_ms)
        .min()
        .map_or(0.0, |t| status.at_ms.saturating_sub(t) as f64 / 1000.0);
    gauge(
        &mut e,
        "preemptor_held_oldest_seconds",
        "How long the longest-held suspended or shrunk container has been held (0: none).",
        oldest,
    )?;
    let failing = status
        .nodes
        .iter()
        .filter_map(|n| Some((n.agent.as_ref()?, n.lease.as_ref()?)))
        .filter(|(_, l)| l.error.is_some())
        .map(|(a, _)| a)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    gauge(
        &mut e,
        "preemptor_agent_leases_failing",
        "Agents whose latest lease renewal failed: they resume everything when it runs out.",
        failing,
    )?;
    queues(&mut e, status)?;
    nodes(&mut e, status)
}

/// A per-queue gauge: name, help, and its value for a queue.
type QueueGauge = (&'static str, &'static str, fn(&QueueStatus) -> u64);

/// Per leaf and parent queue: used, guaranteed and pending, in bytes and vcores.
fn queues(e: &mut DescriptorEncoder, status: &StatusReport) -> fmt::Result {
    let families: [QueueGauge; 6] = [
        (
            "preemptor_queue_used_memory_bytes",
            "Memory the queue's containers hold.",
            |q| q.used.memory_mb * MIB,
        ),
        (
            "preemptor_queue_guaranteed_memory_bytes",
            "The queue's guaranteed memory.",
            |q| q.guaranteed.memory_mb * MIB,
        ),
        (
            "preemptor_queue_pending_memory_bytes",
            "Memory the queue's applications ask for.",
            |q| q.pending.memory_mb * MIB,
        ),
        (
            "preemptor_queue_used_vcores",
            "Vcores the queue's containers hold.",
            |q| u64::from(q.used.vcores),
        ),
        (
            "preemptor_queue_guaranteed_vcores",
            "The queue's guaranteed vcores.",
            |q| u64::from(q.guaranteed.vcores),
        ),
        (
            "preemptor_queue_pending_vcores",
            "Vcores the queue's applications ask for.",
            |q| u64::from(q.pending.vcores),
        ),
    ];
    for (name, help, value) in families {
        labelled_gauge(
            e,
            name,
            help,
            status
                .queues
                .iter()
                .map(|q| ([("queue", q.path.as_str())], value(q))),
        )?;
    }
    Ok(())
}

/// Nodes that hold something (containers held, or capacity raised for them), the
/// [`MAX_NODE_SERIES`] holding the most; how many more there were.
fn nodes(e: &mut DescriptorEncoder, status: &StatusReport) -> fmt::Result {
    let mut rows: Vec<(&str, usize, u64)> = status
        .nodes
        .iter()
        .map(|n| {
            let held = n
                .containers
                .iter()
                .filter(|c| matches!(c.state, ContainerState::Suspended | ContainerState::Shrunk))
                .count();
            let raised = n.advertised.memory_mb.saturating_sub(n.capacity.memory_mb) * MIB;
            (n.id.as_str(), held, raised)
        })
        .filter(|&(_, held, raised)| held > 0 || raised > 0)
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(b.0)));
    let omitted = rows.len().saturating_sub(MAX_NODE_SERIES);
    rows.truncate(MAX_NODE_SERIES);
    labelled_gauge(
        e,
        "preemptor_node_held_containers",
        "Suspended and shrunk containers on the node (nodes holding something only).",
        rows.iter().map(|&(node, held, _)| ([("node", node)], held)),
    )?;
    labelled_gauge(
        e,
        "preemptor_node_raised_memory_bytes",
        "Memory the node advertises to the RM above its physical capacity.",
        rows.iter()
            .map(|&(node, _, raised)| ([("node", node)], raised)),
    )?;
    gauge(
        e,
        "preemptor_node_series_omitted",
        "Nodes holding something that were left out of the per-node series.",
        omitted,
    )
}

/// A counter family: `sample` is the sample's name, the family's plus `_total`.
fn counter(
    e: &mut DescriptorEncoder,
    sample: &str,
    help: &str,
    value: impl EncodeCounterValue,
) -> fmt::Result {
    e.encode_descriptor(family_of(sample), help, None, MetricType::Counter)?
        .encode_counter::<NoLabelSet, _, u64>(&value, None)
}

fn gauge(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: impl EncodeGaugeValue,
) -> fmt::Result {
    e.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&value)
}

/// A gauge family with a series per label set (none: only its description).
fn labelled_gauge<L: EncodeLabelSet, V: EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut family = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        family.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

fn by_policy_and_action(
    e: &mut DescriptorEncoder,
    sample: &str,
    help: &str,
    values: &std::collections::BTreeMap<(String, String), u64>,
) -> fmt::Result {
    let mut family = e.encode_descriptor(family_of(sample), help, None, MetricType::Counter)?;
    for ((policy, action), n) in values {
        let labels = [("policy", policy.as_str()), ("action", action.as_str())];
        family
            .encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(n, None)?;
    }
    Ok(())
}

/// The hub's histogram keeps a count per bucket, the last one `+Inf`'s; the encoder sums
/// them into the cumulative `_bucket` series.
fn histogram(e: &mut DescriptorEncoder, name: &str, help: &str, h: &Histogram) -> fmt::Result {
    let buckets: Vec<(f64, u64)> = h
        .bounds
        .iter()
        .copied()
        .chain(once(f64::INFINITY))
        .zip(h.counts.iter().copied())
        .collect();
    e.encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)
}

/// prometheus-client names a counter family without `_total` and adds it to the sample.
fn family_of(sample: &str) -> &str {
    debug_assert!(sample.ends_with("_total"), "{sample}");
    sample.strip_suffix("_total").unwrap_or(sample)
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
            // OpenMetrics names the counter family without `_total`; the samples keep it.
            "# TYPE preemptor_preemptions counter",
            "preemptor_preemptions_total{policy=\"graceful\",action=\"shrink\"} 3",
            "preemptor_preemption_failures_total{policy=\"kill\",action=\"kill\\\"x\"} 1",
            "preemptor_reclaimed_memory_byte_seconds_total 2148007936.0",
            "# TYPE preemptor_short_job_wait_seconds histogram",
            "preemptor_short_job_wait_seconds_bucket{le=\"0.1\"} 0",
            "preemptor_short_job_wait_seconds_bucket{le=\"0.25\"} 1",
            "preemptor_short_job_wait_seconds_bucket{le=\"10.0\"} 2",
            "preemptor_short_job_wait_seconds_bucket{le=\"300.0\"} 2",
            "preemptor_short_job_wait_seconds_bucket{le=\"+Inf\"} 3",
            "preemptor_short_job_wait_seconds_sum 1007.2",
            "preemptor_short_job_wait_seconds_count 3",
            "preemptor_tick_duration_seconds_count 0",
            "preemptor_tick_duration_seconds_bucket{le=\"0.001\"} 0",
            "preemptor_ticks_total 5",
            "preemptor_rm_errors_total 0",
            "preemptor_containers_suspended 2",
            "preemptor_rm_reachable 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(
            text.lines().any(|l| l
                == format!(
                    "preemptor_build_info{{version=\"{}\"}} 1",
                    env!("CARGO_PKG_VERSION")
                )),
            "{text}"
        );
        assert_eq!(text.lines().last(), Some("# EOF"), "{text}");
        // Every sample belongs to the family announced last before it.
        let mut family = "";
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap_or("");
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap_or("");
                let suffix = name.strip_prefix(family).unwrap_or_else(|| panic!("{l}"));
                assert!(
                    ["", "_total", "_bucket", "_sum", "_count"].contains(&suffix),
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
                path: "root.short\\\"x\n".into(),
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
            // Backslash, double quote and newline are escaped in label values.
            "preemptor_queue_used_memory_bytes{queue=\"root.short\\\\\\\"x\\n\"} 1073741824",
            "preemptor_queue_guaranteed_vcores{queue=\"root.short\\\\\\\"x\\n\"} 4",
            "preemptor_queue_pending_memory_bytes{queue=\"root.short\\\\\\\"x\\n\"} 2147483648",
            "preemptor_node_held_containers{node=\"nm0:8042\"} 1",
            "preemptor_node_raised_memory_bytes{node=\"nm0:8042\"} 2013265920",
            "preemptor_node_series_omitted 5",
            // Held since 100 s, observed at 160 s.
            "preemptor_held_oldest_seconds 60.0",
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

    #[test]
    fn the_hub_is_read_when_the_scrape_encodes() {
        use crate::controller::hub::Outcome;
        use crate::controller::hub::sample_record;
        let hub = Hub::new();
        let before = render_hub(&hub);
        assert!(
            before.contains("\npreemptor_containers_suspended 0\n"),
            "{before}"
        );
        hub.record_action(sample_record(Outcome::Applied));
        hub.count_rm_error();
        hub.set_status(StatusReport {
            suspended: 3,
            ..StatusReport::default()
        });
        let text = render_hub(&hub);
        for line in [
            "preemptor_preemptions_total{policy=\"graceful\",action=\"shrink\"} 1",
            "preemptor_rm_errors_total 1",
            "preemptor_containers_suspended 3",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert_eq!(text, render(&hub.metrics(), &hub.full_status()));
    }
}
