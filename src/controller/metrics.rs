//! `/metrics`: the hub's counters in the Prometheus text format (0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::hub::{Histogram, Metrics, StatusReport};

/// Renders the counters, plus the gauges of the latest status.
pub fn render(m: &Metrics, status: &StatusReport) -> String {
    let mut out = String::with_capacity(4096);
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
        "preemptor_reclaimed_memory_mb_seconds_total",
        "counter",
        "Memory held back from long jobs, integrated over time (MB*s).",
        m.reclaimed_mb_seconds,
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
        "preemptor_reclaimed_memory_mb",
        "gauge",
        "Memory held back from long jobs now (MB).",
        status.reclaimed.memory_mb as f64,
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
    out
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
            "preemptor_reclaimed_memory_mb_seconds_total 2048.5",
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
}
