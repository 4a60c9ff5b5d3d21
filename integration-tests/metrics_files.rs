//! The Grafana dashboard (`deploy/grafana/preemptor.json`) and the alerting rules
//! (`deploy/prometheus/alerts.yml`) use only metrics the binaries export: the controller's
//! and the agent's `/metrics`, rendered by the functions those routes call. The rule file
//! is read with PyYAML, as Prometheus's loader would read YAML, not by pattern; both
//! expositions are parsed with the Prometheus project's Python client (its OpenMetrics
//! parser), as a scraper would parse them.

use std::collections::BTreeSet;
use std::path::Path;

use preemptor::controller::hub::{Metrics, StatusReport};
use serde_json::Value;

use crate::common::python;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Families announced by `# TYPE` in both binaries' exposition, as PromQL names them:
/// OpenMetrics names a counter family without the `_total` its samples carry.
fn exported() -> BTreeSet<String> {
    let controller =
        preemptor::controller::metrics::render(&Metrics::default(), &StatusReport::default());
    let agent = preemptor::agent::metrics::Metrics::new().render();
    [controller, agent]
        .iter()
        .flat_map(|text| text.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| match kind {
            "counter" => format!("{name}_total"),
            _ => name.to_string(),
        })
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

/// Counters, histograms and gauges of queues and nodes with values in them, as a busy
/// controller and agent would have.
fn busy() -> (String, String) {
    use preemptor::cluster::{ContainerState, Partition};
    use preemptor::controller::hub::{ContainerRow, LeaseRow, NodeStatus, QueueStatus};
    use preemptor::resources::{Limits, Resource};
    let mut m = Metrics::default();
    m.actions.insert(("graceful".into(), "shrink".into()), 3);
    m.actions.insert(("graceful".into(), "suspend".into()), 2);
    m.failures.insert(("kill".into(), "kill\"x".into()), 1);
    m.reclaimed_mb_seconds = 2048.5;
    m.reclaimed_vcore_seconds = 19.8;
    for wait in [0.2, 7.0, 1000.0] {
        m.short_wait_seconds.observe(wait);
    }
    m.tick_seconds.observe(0.004);
    m.ticks = 5;
    m.rm_errors = 1;
    let node = |i: u64, state: ContainerState, raised: u64, failing: bool| NodeStatus {
        id: format!("nm{i}:8042"),
        capacity: Resource::new(4096, 4),
        advertised: Resource::new(4096 + raised, 4),
        partition: Partition::General,
        agent: Some(format!("https://nm{i}:8049")),
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
            state,
            held_since_ms: (state != ContainerState::Running).then_some(100_000 + i * 1000),
        }],
    };
    let queue = |path: &str, used: u64, pending: u64| QueueStatus {
        path: path.into(),
        used: Resource::new(used, 1),
        guaranteed: Resource::new(8192, 4),
        pending: Resource::new(pending, 2),
        ..QueueStatus::default()
    };
    let status = StatusReport {
        at_ms: 160_000,
        rm_reachable: true,
        queues: vec![queue("root.short", 1024, 2048), queue("root.long", 6144, 0)],
        nodes: vec![
            node(1, ContainerState::Suspended, 0, false),
            node(2, ContainerState::Shrunk, 1920, true),
            node(3, ContainerState::Running, 0, false),
        ],
        suspended: 1,
        shrunk: 1,
        reclaimed: Resource::new(3072, 1),
        ..StatusReport::default()
    };
    let controller = preemptor::controller::metrics::render(&m, &status);

    use preemptor::agent::metrics as am;
    let agent = am::Metrics::new();
    for _ in 0..2 {
        agent.inc(am::ACTIONS, &[("action", "suspend"), ("outcome", "ok")]);
    }
    agent.inc(am::ACTIONS, &[("action", "resume"), ("outcome", "failed")]);
    agent.observe(
        am::ACTION_SECONDS,
        &[("action", "suspend")],
        std::time::Duration::from_millis(30),
    );
    agent.observe(
        am::LIMIT_WRITE_SECONDS,
        &[("path", "direct")],
        std::time::Duration::from_secs(20),
    );
    for _ in 0..4 {
        agent.inc(am::HTTP_REQUESTS, &[("status", "401")]);
    }
    agent.inc(am::REFUSED, &[]);
    agent.set(am::LEASE_LIVE, &[], 1.0);
    agent.set(am::TRACKED, &[("state", "shrunk")], 2.0);
    (controller, agent.render())
}

/// One sample of a family the Python parser returned: its value.
fn sample(families: &Value, family: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let f = &families[family];
    let want: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    f["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("no family {family}: {families}"))
        .iter()
        .find(|s| s[0] == name && s[1].as_object() == Some(&want))
        .and_then(|s| s[2].as_f64())
        .unwrap_or_else(|| panic!("no {name}{labels:?} in {f}"))
}

#[test]
fn both_expositions_parse_with_the_prometheus_python_client() {
    let (controller, agent) = busy();
    let dir = tempfile::tempdir().unwrap();
    let paths = [("controller", &controller), ("agent", &agent)].map(|(name, text)| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    });
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out.append({
        fam.name: {
            "type": fam.type,
            "help": fam.documentation,
            "samples": [[s.name, s.labels, s.value] for s in fam.samples],
        }
        for fam in text_string_to_metric_families(text)
    })
json.dump(out, sys.stdout)
"#;
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .args(&paths)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'prometheus_client'"),
        "prometheus-client is not installed for {}: bash .ci/run installs it in .venv and \
         sets PYTHON",
        python()
    );
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejected an exposition: {stderr}\n--- controller\n{controller}\
         \n--- agent\n{agent}"
    );
    let parsed: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON from Python");
    let [c, a] = &parsed[..] else {
        panic!("{parsed:?}")
    };

    // Every family announced is one the parser returned.
    for (text, families) in [(&controller, c), (&agent, a)] {
        let announced = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(families.as_object().unwrap().len(), announced, "{families}");
    }

    assert_eq!(c["preemptor_preemptions"]["type"], "counter");
    assert_eq!(
        c["preemptor_preemptions"]["help"],
        "Actions carried out, by policy and action."
    );
    let by = |policy, action| [("policy", policy), ("action", action)];
    let actions = "preemptor_preemptions_total";
    assert_eq!(
        sample(
            c,
            "preemptor_preemptions",
            actions,
            &by("graceful", "shrink")
        ),
        3.0
    );
    assert_eq!(
        sample(
            c,
            "preemptor_preemptions",
            actions,
            &by("graceful", "suspend")
        ),
        2.0
    );
    // The label value's quote came through the escaping intact.
    let failures = "preemptor_preemption_failures";
    let failed = sample(
        c,
        failures,
        "preemptor_preemption_failures_total",
        &by("kill", "kill\"x"),
    );
    assert_eq!(failed, 1.0);
    assert_eq!(
        sample(c, "preemptor_ticks", "preemptor_ticks_total", &[]),
        5.0
    );
    assert_eq!(
        sample(
            c,
            "preemptor_reclaimed_memory_byte_seconds",
            "preemptor_reclaimed_memory_byte_seconds_total",
            &[]
        ),
        2048.5 * 1024.0 * 1024.0
    );
    let wait = "preemptor_short_job_wait_seconds";
    assert_eq!(c[wait]["type"], "histogram");
    let bucket = format!("{wait}_bucket");
    assert_eq!(sample(c, wait, &bucket, &[("le", "0.25")]), 1.0);
    assert_eq!(sample(c, wait, &bucket, &[("le", "300.0")]), 2.0);
    assert_eq!(sample(c, wait, &bucket, &[("le", "+Inf")]), 3.0);
    assert_eq!(sample(c, wait, &format!("{wait}_count"), &[]), 3.0);
    assert!((sample(c, wait, &format!("{wait}_sum"), &[]) - 1007.2).abs() < 1e-9);
    let used = "preemptor_queue_used_memory_bytes";
    assert_eq!(c[used]["type"], "gauge");
    assert_eq!(
        sample(c, used, used, &[("queue", "root.short")]),
        1024.0 * 1048576.0
    );
    assert_eq!(
        sample(c, used, used, &[("queue", "root.long")]),
        6144.0 * 1048576.0
    );
    let held = "preemptor_node_held_containers";
    assert_eq!(sample(c, held, held, &[("node", "nm1:8042")]), 1.0);
    assert_eq!(
        c[held]["samples"].as_array().unwrap().len(),
        2,
        "nm3 holds nothing"
    );
    let raised = "preemptor_node_raised_memory_bytes";
    assert_eq!(
        sample(c, raised, raised, &[("node", "nm2:8042")]),
        1920.0 * 1048576.0
    );
    assert_eq!(
        sample(
            c,
            "preemptor_held_oldest_seconds",
            "preemptor_held_oldest_seconds",
            &[]
        ),
        59.0
    );
    let failing = "preemptor_agent_leases_failing";
    assert_eq!(sample(c, failing, failing, &[]), 1.0);
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(
        sample(c, "preemptor_build_info", "preemptor_build_info", &version),
        1.0
    );

    assert_eq!(a["preemptor_agent_actions"]["type"], "counter");
    let ok = [("action", "suspend"), ("outcome", "ok")];
    assert_eq!(
        sample(
            a,
            "preemptor_agent_actions",
            "preemptor_agent_actions_total",
            &ok
        ),
        2.0
    );
    let requests = "preemptor_agent_http_requests";
    let unauthorized = [("status", "401")];
    assert_eq!(
        sample(
            a,
            requests,
            "preemptor_agent_http_requests_total",
            &unauthorized
        ),
        4.0
    );
    assert_eq!(
        sample(
            a,
            "preemptor_agent_refused",
            "preemptor_agent_refused_total",
            &[]
        ),
        1.0
    );
    let took = "preemptor_agent_action_duration_seconds";
    assert_eq!(a[took]["type"], "histogram");
    let suspend = |le| [("action", "suspend"), ("le", le)];
    assert_eq!(
        sample(a, took, &format!("{took}_bucket"), &suspend("0.025")),
        0.0
    );
    assert_eq!(
        sample(a, took, &format!("{took}_bucket"), &suspend("0.05")),
        1.0
    );
    let writes = "preemptor_agent_limit_write_duration_seconds";
    let direct = |le| [("path", "direct"), ("le", le)];
    assert_eq!(
        sample(a, writes, &format!("{writes}_bucket"), &direct("10.0")),
        0.0
    );
    assert_eq!(
        sample(a, writes, &format!("{writes}_bucket"), &direct("+Inf")),
        1.0
    );
    assert_eq!(
        sample(
            a,
            "preemptor_agent_lease_live",
            "preemptor_agent_lease_live",
            &[]
        ),
        1.0
    );
    // Families without a series yet are parsed too, empty.
    assert_eq!(
        a["preemptor_agent_swap_detections"]["samples"],
        serde_json::json!([])
    );
    assert_eq!(
        sample(a, "preemptor_build_info", "preemptor_build_info", &version),
        1.0
    );
}
