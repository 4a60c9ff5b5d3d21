//! Dice live on the emulator: its short partition is the node label `short`, which the
//! controller adds when the short queue can use it and removes on shutdown; without the
//! queue's label keys it says which are missing, once, and changes no partition.
//! The same on the real RM: `hadoop_real::dice_makes_its_node_label_...`.

use std::time::Duration;

use preemptor::cluster::PolicyKind;
use preemptor::config::LoadedConfig;
use preemptor::controller::controller::{
    ControllerConfig, ControllerHandle, ShutdownReport, start,
};
use preemptor::controller::hub::ControllerEvent;
use preemptor::emulator::queues::QueueSetup;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;
use serde_json::Value;

use crate::emulator_support::{get_json, submit, wait_until};

async fn labels_of(rm: &str) -> Value {
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    get_json(&http, &format!("{rm}/ws/v1/cluster/get-node-labels")).await
}

const NODE: Resource = Resource::new(8192, 8);

async fn emulator(conf: &LoadedConfig, label_keys: bool) -> EmulatorHandle {
    let mut config = EmulatorConfig::local(2, NODE, RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    let queues = QueueSetup::from_config(&conf.queues, NODE.scale(2.0));
    config.queues = Some(if label_keys {
        queues.with_short_partition("root.short", "short")
    } else {
        queues
    });
    Emulator::start(config).await.expect("emulator starts")
}

async fn dice_controller(
    conf: LoadedConfig,
    rm: &str,
    state: &std::path::Path,
) -> ControllerHandle {
    let mut cc = ControllerConfig::from_loaded(conf, None, "agent-token".into(), b"t".to_vec());
    let s = &mut cc.settings;
    s.rm.addresses = vec![rm.to_string()];
    s.policy.kind = PolicyKind::Dice;
    s.policy.monitoring_interval_ms = 500;
    s.controller.state_dir = state.to_path_buf();
    // No agent: partitions go to the RM alone.
    s.agent.port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    cc.api_listen = None;
    cc.proxy_listen = None;
    start(cc).await.expect("controller starts")
}

/// No agent runs, so listing them fails at shutdown; nothing about partitions or
/// labels may.
pub fn assert_no_partition_failures(report: &ShutdownReport) {
    let failed: Vec<&String> = report
        .failed
        .iter()
        .filter(|f| f.contains("label") || f.contains("partition"))
        .collect();
    assert!(failed.is_empty(), "{:?}", report.failed);
}

fn label_names(labels: &Value) -> Vec<String> {
    let list = &labels["nodeLabelInfo"];
    let items = match list {
        Value::Array(a) => a.clone(),
        Value::Object(_) => vec![list.clone()],
        _ => Vec::new(),
    };
    items
        .iter()
        .filter_map(|l| l["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dice_labels_a_node_for_the_short_queue_and_removes_the_label_on_shutdown() {
    let conf = preemptor::config::load_embedded_default().expect("shipped configuration");
    let h = emulator(&conf, true).await;
    let rm = h.rm_url().to_string();
    let state = tempfile::tempdir().expect("state dir");
    let controller = dice_controller(conf, &rm, state.path()).await;

    wait_until(&h, "one node in the short partition", 20, |s| {
        s.nodes.iter().filter(|n| n.label == "short").count() == 1
    })
    .await;
    let labels = labels_of(&rm).await;
    assert_eq!(label_names(&labels), ["short"], "{labels}");
    assert!(state.path().join("short-label-added").exists());

    // Submitted as a YarnClient would, the short job takes the queue's default label.
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"tpch","tasks":1,"memoryMb":1024,"vcores":1,"simulatedDurationMs":60000}"#,
    )
    .expect("spec");
    let app = submit(&rm, "tpch-q1", "short", &spec, Resource::new(1024, 1)).await;
    let short_node = h.inspect(|s| s.nodes.iter().position(|n| n.label == "short"));
    wait_until(&h, "the short AM placed", 20, |s| {
        s.containers
            .values()
            .any(|c| c.id.application().to_string() == app && c.is_am())
    })
    .await;
    let am_node = h.inspect(|s| {
        s.containers
            .values()
            .find(|c| c.id.application().to_string() == app && c.is_am())
            .map(|c| c.node)
    });
    assert_eq!(
        am_node, short_node,
        "the short AM is not on the labelled node"
    );

    let report = controller.shutdown(false).await.expect("shutdown");
    assert_no_partition_failures(&report);
    let labels = labels_of(&rm).await;
    assert!(label_names(&labels).is_empty(), "{labels}");
    assert!(h.inspect(|s| s.nodes.iter().all(|n| n.label.is_empty())));
    assert!(!state.path().join("short-label-added").exists());
    h.shutdown().await.expect("emulator stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dice_without_the_queue_label_keys_says_which_once_and_changes_no_partition() {
    let conf = preemptor::config::load_embedded_default().expect("shipped configuration");
    let h = emulator(&conf, false).await;
    let rm = h.rm_url().to_string();
    let state = tempfile::tempdir().expect("state dir");
    let controller = dice_controller(conf, &rm, state.path()).await;
    let mut events = controller.hub().subscribe();

    let mut warnings = Vec::new();
    let mut partitions = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(e)) = tokio::time::timeout_at(until, events.recv()).await {
        match e {
            ControllerEvent::Warning { message, .. } if message.contains("node label") => {
                warnings.push(message)
            }
            ControllerEvent::Action(a) if a.action == "set-node-partition" => partitions.push(a),
            _ => {}
        }
    }
    assert_eq!(
        warnings.len(),
        1,
        "one warning over ten ticks: {warnings:?}"
    );
    for key in [
        "yarn.scheduler.capacity.root.short.accessible-node-labels.short.capacity=100",
        "yarn.scheduler.capacity.root.short.default-node-label-expression=short",
    ] {
        assert!(warnings[0].contains(key), "{key} missing: {}", warnings[0]);
    }
    assert!(partitions.is_empty(), "{partitions:?}");
    let labels = labels_of(&rm).await;
    assert!(
        label_names(&labels).is_empty(),
        "no label is added: {labels}"
    );
    controller.shutdown(false).await.expect("shutdown");
    assert!(!state.path().join("short-label-added").exists());
    h.shutdown().await.expect("emulator stops");
}
