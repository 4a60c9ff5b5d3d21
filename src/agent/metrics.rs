//! The agent's metrics, rendered by hand in the Prometheus text format (0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
}

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

const FAMILIES: &[Family] = &[
    Family {
        name: BUILD_INFO,
        kind: Kind::Gauge,
        help: "Always 1; the version of the running agent as a label.",
    },
    Family {
        name: ACTIONS,
        kind: Kind::Counter,
        help: "Actions handled, by action and outcome.",
    },
    Family {
        name: ACTION_SECONDS,
        kind: Kind::Histogram,
        help: "Time from receiving an action to its result.",
    },
    Family {
        name: LIMIT_WRITES,
        kind: Kind::Counter,
        help: "Limit writes by path (docker or direct), file and outcome.",
    },
    Family {
        name: LIMIT_WRITE_SECONDS,
        kind: Kind::Histogram,
        help: "Duration of limit writes, by path.",
    },
    Family {
        name: THROTTLE_WAIT_SECONDS,
        kind: Kind::Histogram,
        help: "Time from a CPU throttle write until cpu.stat showed it.",
    },
    Family {
        name: MEMORY_BUSY_RETRIES,
        kind: Kind::Counter,
        help: "Memory limit writes refused with EBUSY and retried.",
    },
    Family {
        name: SWAP_DETECTIONS,
        kind: Kind::Counter,
        help: "Shrunk containers found swapping and frozen.",
    },
    Family {
        name: LEASE_RENEWALS,
        kind: Kind::Counter,
        help: "Lease renewals accepted.",
    },
    Family {
        name: LEASE_EXPIRIES,
        kind: Kind::Counter,
        help: "Times the lease expired with containers changed.",
    },
    Family {
        name: LEASE_LIVE,
        kind: Kind::Gauge,
        help: "1 while a controller holds a live lease.",
    },
    Family {
        name: DOCKER_EVENTS,
        kind: Kind::Counter,
        help: "Docker events seen for YARN containers, by kind.",
    },
    Family {
        name: REFUSED,
        kind: Kind::Counter,
        help: "Requests naming a container that is not a YARN container.",
    },
    Family {
        name: TRACKED,
        kind: Kind::Gauge,
        help: "Containers whose limits the agent changed, by state.",
    },
    Family {
        name: STORE_WRITES,
        kind: Kind::Counter,
        help: "State store writes, by outcome.",
    },
    Family {
        name: STORE_WRITE_SECONDS,
        kind: Kind::Histogram,
        help: "Duration of state store writes (write, fsync, rename).",
    },
    Family {
        name: HTTP_REQUESTS,
        kind: Kind::Counter,
        help: "HTTP requests, by status code.",
    },
];

const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Registry {
    values: BTreeMap<(&'static str, String), f64>,
    histograms: BTreeMap<(&'static str, String), Histogram>,
}

/// All of the agent's metrics. One instance per agent, shared by reference.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Registry>,
}

fn label_string(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let mut s = String::from("{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"");
        for c in v.chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '"' => s.push_str("\\\""),
                '\n' => s.push_str("\\n"),
                c => s.push(c),
            }
        }
        s.push('"');
    }
    s.push('}');
    s
}

fn fmt_value(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics::default();
        m.set(BUILD_INFO, &[("version", env!("CARGO_PKG_VERSION"))], 1.0);
        m
    }

    fn with<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        // A panic elsewhere while holding the lock must not silence metrics for good.
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    pub fn inc(&self, name: &'static str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1.0);
    }

    pub fn add(&self, name: &'static str, labels: &[(&str, &str)], by: f64) {
        let key = (name, label_string(labels));
        self.with(|r| *r.values.entry(key).or_insert(0.0) += by);
    }

    pub fn set(&self, name: &'static str, labels: &[(&str, &str)], value: f64) {
        let key = (name, label_string(labels));
        self.with(|r| {
            r.values.insert(key, value);
        });
    }

    pub fn observe(&self, name: &'static str, labels: &[(&str, &str)], d: Duration) {
        let secs = d.as_secs_f64();
        let key = (name, label_string(labels));
        self.with(|r| {
            let h = r.histograms.entry(key).or_default();
            for (i, b) in BUCKETS.iter().enumerate() {
                if secs <= *b {
                    h.counts[i] += 1;
                }
            }
            h.count += 1;
            h.sum += secs;
        });
    }

    /// The value of a counter or gauge series (0 when never set); for tests and health.
    pub fn value(&self, name: &'static str, labels: &[(&str, &str)]) -> f64 {
        let key = (name, label_string(labels));
        self.with(|r| r.values.get(&key).copied().unwrap_or(0.0))
    }

    pub fn render(&self) -> String {
        let (values, histograms) = self.with(|r| (r.values.clone(), r.histograms.clone()));
        let mut out = String::new();
        for fam in FAMILIES {
            let kind = match fam.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let _ = writeln!(out, "# HELP {} {}", fam.name, fam.help);
            let _ = writeln!(out, "# TYPE {} {kind}", fam.name);
            if fam.kind == Kind::Histogram {
                for ((_, labels), h) in histograms.iter().filter(|((n, _), _)| *n == fam.name) {
                    render_histogram(&mut out, fam.name, labels, h);
                }
            } else {
                for ((_, labels), v) in values.iter().filter(|((n, _), _)| *n == fam.name) {
                    let _ = writeln!(out, "{}{labels} {}", fam.name, fmt_value(*v));
                }
            }
        }
        out
    }
}

fn render_histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let inner = labels.trim_start_matches('{').trim_end_matches('}');
    let with_le = |le: &str| {
        if inner.is_empty() {
            format!("{{le=\"{le}\"}}")
        } else {
            format!("{{{inner},le=\"{le}\"}}")
        }
    };
    for (i, b) in BUCKETS.iter().enumerate() {
        let _ = writeln!(
            out,
            "{name}_bucket{} {}",
            with_le(&b.to_string()),
            h.counts[i]
        );
    }
    let _ = writeln!(out, "{name}_bucket{} {}", with_le("+Inf"), h.count);
    let _ = writeln!(out, "{name}_sum{labels} {}", h.sum);
    let _ = writeln!(out, "{name}_count{labels} {}", h.count);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families_in_text_format() {
        let m = Metrics::new();
        m.inc(ACTIONS, &[("action", "suspend"), ("outcome", "ok")]);
        m.inc(ACTIONS, &[("action", "suspend"), ("outcome", "ok")]);
        m.set(LEASE_LIVE, &[], 1.0);
        m.observe(
            ACTION_SECONDS,
            &[("action", "suspend")],
            Duration::from_millis(30),
        );
        m.inc(REFUSED, &[("reason", "a \"quoted\"\nname")]);
        let text = m.render();
        assert!(text.contains("# TYPE preemptor_agent_actions_total counter\n"));
        assert!(
            text.contains("preemptor_agent_actions_total{action=\"suspend\",outcome=\"ok\"} 2\n")
        );
        assert!(text.contains("preemptor_agent_lease_live 1\n"));
        assert!(text.contains(&format!(
            "preemptor_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )));
        assert!(text.contains(
            "preemptor_agent_action_duration_seconds_bucket{action=\"suspend\",le=\"0.05\"} 1\n"
        ));
        assert!(text.contains(
            "preemptor_agent_action_duration_seconds_bucket{action=\"suspend\",le=\"0.025\"} 0\n"
        ));
        assert!(
            text.contains("preemptor_agent_action_duration_seconds_count{action=\"suspend\"} 1\n")
        );
        assert!(text.contains("reason=\"a \\\"quoted\\\"\\nname\""));
        assert_eq!(
            m.value(ACTIONS, &[("action", "suspend"), ("outcome", "ok")]),
            2.0
        );
        // Every sample line belongs to a family declared just above it.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let base = name
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(
                FAMILIES.iter().any(|f| f.name == base || f.name == name),
                "{line}"
            );
        }
    }
}
