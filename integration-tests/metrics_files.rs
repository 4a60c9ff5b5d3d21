//! The Grafana dashboard (`deploy/grafana/preemptor.json`) and the alerting rules
//! (`deploy/prometheus/alerts.yml`) use only metrics the binaries export: the controller's
//! and the agent's `/metrics`, rendered by the functions those routes call. The rule file
//! is read with PyYAML, as Prometheus's loader would read YAML, not by pattern.

use std::collections::BTreeSet;
use std::path::Path;

use preemptor::controller::hub::{Metrics, StatusReport};
use serde_json::Value;

use crate::common::python;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Families announced by `# TYPE` in both binaries' exposition.
fn exported() -> BTreeSet<String> {
    let controller =
        preemptor::controller::metrics::render(&Metrics::default(), &StatusReport::default());
    let agent = preemptor::agent::metrics::Metrics::new().render();
    [controller, agent]
        .iter()
        .flat_map(|text| text.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// `preemptor_*` names in a PromQL expression.
fn names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("preemptor_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// The family a sample name belongs to: a histogram's `_bucket`, `_sum` and `_count`
/// are its own.
fn family<'a>(name: &'a str, exported: &BTreeSet<String>) -> Option<&'a str> {
    if exported.contains(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|s| name.strip_suffix(s))
        .find(|base| exported.contains(*base))
}

#[test]
fn the_dashboard_uses_only_exported_metrics() {
    let exported = exported();
    let path = root().join("deploy/grafana/preemptor.json");
    let text = std::fs::read_to_string(&path).expect("the dashboard");
    let dash: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "{} panels", panels.len());
    let mut used = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap_or("?");
        assert_eq!(
            p["datasource"]["uid"], "${DS_PROMETHEUS}",
            "{title}: the data source is picked on import"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} has no query");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            let found = names(expr);
            assert!(
                !found.is_empty(),
                "{title}: {expr} uses no Preemptor metric"
            );
            for n in found {
                assert!(
                    family(&n, &exported).is_some(),
                    "{title}: {n} is not exported (exported: {exported:?})"
                );
                used.insert(n);
            }
        }
    }
    // What the issue asked the dashboard to show.
    for must in [
        "preemptor_queue_used_memory_bytes",
        "preemptor_queue_guaranteed_memory_bytes",
        "preemptor_containers_suspended",
        "preemptor_containers_shrunk",
        "preemptor_reclaimed_memory_bytes",
        "preemptor_short_job_wait_seconds_bucket",
        "preemptor_tick_duration_seconds_bucket",
        "preemptor_agent_action_duration_seconds_bucket",
        "preemptor_preemption_failures_total",
    ] {
        assert!(used.contains(must), "the dashboard does not show {must}");
    }
}

#[test]
fn the_alerting_rules_parse_and_use_only_exported_metrics() {
    let exported = exported();
    let path = root().join("deploy/prometheus/alerts.yml");
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)",
        ])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("running {} for PyYAML: {e}", python()));
    assert!(
        out.status.success(),
        "PyYAML could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let rules: Value = serde_json::from_slice(&out.stdout).expect("JSON from PyYAML");
    let groups = rules["groups"].as_array().expect("groups");
    let mut alerts = BTreeSet::new();
    for g in groups {
        assert!(g["name"].is_string(), "{g}");
        for r in g["rules"].as_array().expect("rules") {
            let alert = r["alert"].as_str().expect("every rule is an alert");
            let expr = r["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{alert}: expr"));
            assert!(
                r["annotations"]["summary"].is_string(),
                "{alert} has no summary"
            );
            assert!(r["labels"]["severity"].is_string(), "{alert}: severity");
            let found = names(expr);
            assert!(!found.is_empty(), "{alert}: {expr}");
            for n in found {
                assert!(
                    family(&n, &exported).is_some(),
                    "{alert}: {n} is not exported (exported: {exported:?})"
                );
            }
            alerts.insert(alert.to_string());
        }
    }
    for must in [
        "PreemptorContainerHeldTooLong",
        "PreemptorActionsFailing",
        "PreemptorLeaseAtRisk",
        "PreemptorResourceManagerUnreachable",
    ] {
        assert!(alerts.contains(must), "no {must} alert");
    }
}

#[test]
fn names_are_found_in_promql() {
    assert_eq!(
        names(
            "histogram_quantile(0.95, sum by (le) (rate(preemptor_tick_duration_seconds_bucket[5m]))) + preemptor_x"
        ),
        ["preemptor_tick_duration_seconds_bucket", "preemptor_x"]
    );
}
