//! The agent's metrics: prometheus-client's counters, gauges and histograms, one family
//! per name below, in one registry; `/metrics` encodes it as OpenMetrics 1.0 text.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// What `/metrics` answers with (the controller's too): prometheus-client encodes
/// OpenMetrics 1.0, ending in `# EOF`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

struct Description {
    name: &'static str,
    kind: Kind,
    help: &'static str,
}

/// Sample names, as exported: a counter's ends in `_total` (its family's name does not).
pub const ACTIONS: &str = "preemptor_agent_actions_total";
pub const ACTION_SECONDS: &str = "preemptor_agent_action_duration_seconds";
pub const LIMIT_WRITES: &str = "preemptor_agent_limit_writes_total";
pub const LIMIT_WRITE_SECONDS: &str = "preemptor_agent_limit_write_duration_seconds";
pub const THROTTLE_WAIT_SECONDS: &str = "preemptor_agent_throttle_wait_seconds";
pub const MEMORY_BUSY_RETRIES: &str = "preemptor_agent_memory_busy_retries_total";
pub const SWAP_DETECTIONS: &str = "preemptor_agent_swap_detections_total";
pub const LEASE_RENEWALS: &str = "preemptor_agent_lease_renewals_total";
pub const LEASE_EXPIRIES: &str = "preemptor_agent_lease_expiries_total";
pub const LEASE_LIVE: &str = "preemptor_agent_lease_live";
pub const DOCKER_EVENTS: &str = "preemptor_agent_docker_events_total";
pub const REFUSED: &str = "preemptor_agent_refused_total";
pub const TRACKED: &str = "preemptor_agent_tracked_containers";
pub const STORE_WRITES: &str = "preemptor_agent_store_writes_total";
pub const STORE_WRITE_SECONDS: &str = "preemptor_agent_store_write_duration_seconds";
pub const HTTP_REQUESTS: &str = "preemptor_agent_http_requests_total";
pub const BUILD_INFO: &str = "preemptor_build_info";

const FAMILIES: &[Description] = &[
    Description {
        name: BUILD_INFO,
        kind: Kind::Gauge,
        help: "Always 1; the version of the running agent as a label.",
    },
    Description {
        name: ACTIONS,
        kind: Kind::Counter,
        help: "Actions handled, by action and outcome.",
    },
    Description {
        name: ACTION_SECONDS,
        kind: Kind::Histogram,
        help: "Time from receiving an action to its result.",
    },
    Description {
        name: LIMIT_WRITES,
        kind: Kind::Counter,
        help: "Limit writes by path (docker or direct), file and outcome.",
    },
    Description {
        name: LIMIT_WRITE_SECONDS,
        kind: Kind::Histogram,
        help: "Duration of limit writes, by path.",
    },
    Description {
        name: THROTTLE_WAIT_SECONDS,
        kind: Kind::Histogram,
        help: "Time from a CPU throttle write until cpu.stat showed it.",
    },
    Description {
        name: MEMORY_BUSY_RETRIES,
        kind: Kind::Counter,
        help: "Memory limit writes refused with EBUSY and retried.",
    },
    Description {
        name: SWAP_DETECTIONS,
        kind: Kind::Counter,
        help: "Shrunk containers found swapping and frozen.",
    },
    Description {
        name: LEASE_RENEWALS,
        kind: Kind::Counter,
        help: "Lease renewals accepted.",
    },
    Description {
        name: LEASE_EXPIRIES,
        kind: Kind::Counter,
        help: "Times the lease expired with containers changed.",
    },
    Description {
        name: LEASE_LIVE,
        kind: Kind::Gauge,
        help: "1 while a controller holds a live lease.",
    },
    Description {
        name: DOCKER_EVENTS,
        kind: Kind::Counter,
        help: "Docker events seen for YARN containers, by kind.",
    },
    Description {
        name: REFUSED,
        kind: Kind::Counter,
        help: "Requests naming a container that is not a YARN container.",
    },
    Description {
        name: TRACKED,
        kind: Kind::Gauge,
        help: "Containers whose limits the agent changed, by state.",
    },
    Description {
        name: STORE_WRITES,
        kind: Kind::Counter,
        help: "State store writes, by outcome.",
    },
    Description {
        name: STORE_WRITE_SECONDS,
        kind: Kind::Histogram,
        help: "Duration of state store writes (write, fsync, rename).",
    },
    Description {
        name: HTTP_REQUESTS,
        kind: Kind::Counter,
        help: "HTTP requests, by status code.",
    },
];

/// Upper bounds of every histogram's buckets (`+Inf` added), in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A series' labels, in the order given.
type Labels = Vec<(String, String)>;

fn labels(labels: &[(&str, &str)]) -> Labels {
    labels
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn new_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// A family that is described (`# HELP`, `# TYPE`) even before its first series, as
/// Prometheus's metadata and the dashboard check (`integration-tests/metrics_files.rs`)
/// expect; prometheus-client leaves an empty family out.
#[derive(Debug)]
struct Described<M>(M);

impl<M: EncodeMetric> EncodeMetric for Described<M> {
    fn encode(&self, encoder: MetricEncoder) -> fmt::Result {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

/// All of the agent's metrics. One instance per agent, shared by reference.
pub struct Metrics {
    registry: Registry,
    counters: HashMap<&'static str, Family<Labels, Counter>>,
    /// Integer gauges: the agent's are counts and flags.
    gauges: HashMap<&'static str, Family<Labels, Gauge>>,
    histograms: HashMap<&'static str, Family<Labels, Histogram>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            counters: HashMap::new(),
            gauges: HashMap::new(),
            histograms: HashMap::new(),
        };
        for f in FAMILIES {
            // The registry appends a full stop to the help.
            let help = f.help.trim_end_matches('.');
            match f.kind {
                Kind::Counter => {
                    let family = Family::default();
                    let name = f.name.strip_suffix("_total").unwrap_or(f.name);
                    m.registry.register(name, help, Described(family.clone()));
                    m.counters.insert(f.name, family);
                }
                Kind::Gauge => {
                    let family = Family::default();
                    m.registry.register(f.name, help, Described(family.clone()));
                    m.gauges.insert(f.name, family);
                }
                Kind::Histogram => {
                    let family = Family::new_with_constructor(new_histogram as fn() -> Histogram);
                    m.registry.register(f.name, help, Described(family.clone()));
                    m.histograms.insert(f.name, family);
                }
            }
        }
        m.set(BUILD_INFO, &[("version", env!("CARGO_PKG_VERSION"))], 1.0);
        m
    }

    pub fn inc(&self, name: &'static str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1);
    }

    pub fn add(&self, name: &'static str, labels: &[(&str, &str)], by: u64) {
        let family = self.counters.get(name);
        debug_assert!(family.is_some(), "{name} is not a counter of the agent's");
        if let Some(f) = family {
            f.get_or_create(&self::labels(labels)).inc_by(by);
        }
    }

    /// Sets a gauge, rounded to an integer.
    pub fn set(&self, name: &'static str, labels: &[(&str, &str)], value: f64) {
        let family = self.gauges.get(name);
        debug_assert!(family.is_some(), "{name} is not a gauge of the agent's");
        if let Some(f) = family {
            f.get_or_create(&self::labels(labels))
                .set(value.round() as i64);
        }
    }

    pub fn observe(&self, name: &'static str, labels: &[(&str, &str)], d: Duration) {
        let family = self.histograms.get(name);
        debug_assert!(family.is_some(), "{name} is not a histogram of the agent's");
        if let Some(f) = family {
            f.get_or_create(&self::labels(labels))
                .observe(d.as_secs_f64());
        }
    }

    /// The value of a counter or gauge series (0 when never set); for tests and health.
    pub fn value(&self, name: &'static str, labels: &[(&str, &str)]) -> f64 {
        let key = self::labels(labels);
        let counter = || Some(self.counters.get(name)?.get(&key)?.get() as f64);
        let gauge = || Some(self.gauges.get(name)?.get(&key)?.get() as f64);
        counter().or_else(gauge).unwrap_or(0.0)
    }

    /// The OpenMetrics text exposition, `# EOF` last.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8192);
        // Writing to a String does not fail, nor do prometheus-client's own metrics.
        if text::encode(&mut out, &self.registry).is_err() {
            tracing::error!("encoding the agent's metrics failed");
            out.push_str("# EOF\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families_in_openmetrics_text() {
        let m = Metrics::new();
        m.inc(ACTIONS, &[("action", "suspend"), ("outcome", "ok")]);
        m.inc(ACTIONS, &[("action", "suspend"), ("outcome", "ok")]);
        m.set(LEASE_LIVE, &[], 1.0);
        m.set(TRACKED, &[("state", "suspended")], 3.0);
        m.observe(
            ACTION_SECONDS,
            &[("action", "suspend")],
            Duration::from_millis(30),
        );
        m.observe(STORE_WRITE_SECONDS, &[], Duration::from_secs(60));
        m.inc(REFUSED, &[("reason", "a \\ \"quoted\"\nname")]);
        let text = m.render();
        for line in [
            // The counter family is named without `_total`; its samples keep it.
            "# TYPE preemptor_agent_actions counter",
            "# HELP preemptor_agent_actions Actions handled, by action and outcome.",
            "preemptor_agent_actions_total{action=\"suspend\",outcome=\"ok\"} 2",
            "preemptor_agent_lease_live 1",
            "preemptor_agent_tracked_containers{state=\"suspended\"} 3",
            "# TYPE preemptor_agent_action_duration_seconds histogram",
            // The bucket's bound comes first, then the series' labels.
            "preemptor_agent_action_duration_seconds_bucket{le=\"0.05\",action=\"suspend\"} 1",
            "preemptor_agent_action_duration_seconds_bucket{le=\"0.025\",action=\"suspend\"} 0",
            "preemptor_agent_action_duration_seconds_bucket{le=\"0.0005\",action=\"suspend\"} 0",
            "preemptor_agent_action_duration_seconds_bucket{le=\"+Inf\",action=\"suspend\"} 1",
            "preemptor_agent_action_duration_seconds_count{action=\"suspend\"} 1",
            "preemptor_agent_action_duration_seconds_sum{action=\"suspend\"} 0.03",
            // Above the last bound: in +Inf only.
            "preemptor_agent_store_write_duration_seconds_bucket{le=\"10.0\"} 0",
            "preemptor_agent_store_write_duration_seconds_bucket{le=\"+Inf\"} 1",
            "preemptor_agent_store_write_duration_seconds_sum 60.0",
            // Backslash, double quote and newline are escaped.
            "preemptor_agent_refused_total{reason=\"a \\\\ \\\"quoted\\\"\\nname\"} 1",
            // Families without a series yet are described all the same.
            "# TYPE preemptor_agent_lease_renewals counter",
            "# TYPE preemptor_agent_throttle_wait_seconds histogram",
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
        assert_eq!(
            m.value(ACTIONS, &[("action", "suspend"), ("outcome", "ok")]),
            2.0
        );
        assert_eq!(m.value(LEASE_LIVE, &[]), 1.0);
        assert_eq!(m.value(ACTIONS, &[("action", "resume")]), 0.0);
        // Reading a value does not make a series.
        assert!(!m.render().contains("\"resume\""));
        // Every family is described once, and every sample line belongs to the family
        // described just above it.
        let described: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert_eq!(described.len(), FAMILIES.len(), "{text}");
        let mut family = "";
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap();
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                let suffix = name
                    .strip_prefix(family)
                    .unwrap_or_else(|| panic!("{line}"));
                assert!(
                    ["", "_total", "_bucket", "_sum", "_count"].contains(&suffix),
                    "{line}"
                );
                assert!(
                    FAMILIES.iter().any(|f| f.name.starts_with(family)),
                    "{line}"
                );
            }
        }
    }
}
