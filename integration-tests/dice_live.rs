//! Dice live on the emulator: its short partition is the node label `short`, which the
//! controller adds when the short queue can use it and removes on shutdown; a node joins
//! it once short work comes, and a long container left there is suspended for a short
//! job waiting in the label; without the queue's label keys it says which are missing,
//! once, and changes no partition.
//! The same on the real RM: `hadoop_real::dice_makes_its_node_label_...`.

use std::sync::Arc;
use std::time::Duration;

use preemptor::cluster::PolicyKind;
use preemptor::config::LoadedConfig;
use preemptor::controller::agents::Actuator;
use preemptor::controller::controller::{
    ControllerConfig, ControllerHandle, ShutdownReport, start,
};
use preemptor::controller::hub::ControllerEvent;
use preemptor::demo::simulated::{SimulatedActuator, SimulatedAgents};
use preemptor::emulator::queues::QueueSetup;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;
use serde_json::Value;
use tokio::sync::broadcast::error::TryRecvError;

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

/// A one-task TPC-H query in queue `short`, submitted as a YarnClient would: it takes
/// the queue's default label.
async fn submit_short(rm: &str) -> String {
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"tpch","tasks":1,"memoryMb":1024,"vcores":1,"simulatedDurationMs":60000}"#,
    )
    .expect("spec");
    submit(rm, "tpch-q1", "short", &spec, Resource::new(1024, 1)).await
}

/// Waits up to `secs` for `app`'s AM; the node it runs on, and the labelled node.
async fn am_and_short_node(h: &EmulatorHandle, app: &str, secs: u64) -> (usize, Option<usize>) {
    let am = |s: &preemptor::emulator::state::RmState| {
        s.containers
            .values()
            .find(|c| c.id.application().to_string() == app && c.is_am())
            .map(|c| c.node)
    };
    wait_until(h, "the short AM placed", secs, |s| am(s).is_some()).await;
    h.inspect(|s| {
        let short = s.nodes.iter().position(|n| n.label == "short");
        (am(s).expect("placed"), short)
    })
}

/// `actuator`: the emulator's simulated containers, acted on in process; without it
/// no agent answers and partitions go to the RM alone.
async fn dice_controller(
    conf: LoadedConfig,
    rm: &str,
    state: &std::path::Path,
    actuator: Option<Arc<dyn Actuator>>,
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
    cc.actuator = actuator;
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
    let controller = dice_controller(conf, &rm, state.path(), None).await;

    // The label comes first; a node joins the partition only once short work comes.
    for _ in 0..100 {
        if !label_names(&labels_of(&rm).await).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let labels = labels_of(&rm).await;
    assert_eq!(label_names(&labels), ["short"], "{labels}");
    assert!(state.path().join("short-label-added").exists());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        h.inspect(|s| s.nodes.iter().all(|n| n.label.is_empty())),
        "no node is labelled before a short job comes"
    );

    // Submitted as a YarnClient would, the short job takes the queue's default label.
    let app = submit_short(&rm).await;
    wait_until(&h, "one node in the short partition", 20, |s| {
        s.nodes.iter().filter(|n| n.label == "short").count() == 1
    })
    .await;
    let (am_node, short_node) = am_and_short_node(&h, &app, 20).await;
    assert_eq!(
        Some(am_node),
        short_node,
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
    let controller = dice_controller(conf, &rm, state.path(), None).await;
    let mut events = controller.hub().subscribe();
    // Short work: the partition's floor would take a node now, were the keys set.
    submit_short(&rm).await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dice_suspends_a_long_container_left_in_the_label_for_a_waiting_short_job() {
    let mut conf = preemptor::config::load_embedded_default().expect("shipped configuration");
    let d = &mut conf.settings.policy.dice;
    // Windows of 2 s in which a 1 s mean wait is the most: one request per window.
    d.window_ms = 2000;
    d.max_task_waiting_ms = 1000;
    conf.settings.policy.total_preemption_per_round = 1.0;
    let h = emulator(&conf, true).await;
    let rm = h.rm_url().to_string();
    let runtime = h.simulated_runtime().expect("simulated containers");
    let agents: Arc<dyn Actuator> = Arc::new(SimulatedAgents(SimulatedActuator::new(runtime)));
    let state = tempfile::tempdir().expect("state dir");
    let controller = dice_controller(conf, &rm, state.path(), Some(agents)).await;
    let mut events = controller.hub().subscribe();

    // A long job takes every vcore and megabyte of both nodes, for longer than the test,
    // in containers twice the short job's: one suspended frees room for its AM.
    let long = WorkloadSpec::parse(
        r#"{"kernel":"wordcount","tasks":7,"memoryMb":2048,"vcores":2,"simulatedDurationMs":600000}"#,
    )
    .expect("spec");
    let long_app = submit(&rm, "wordcount", "long", &long, Resource::new(2048, 2)).await;
    wait_until(&h, "the long job on all 16 vcores", 20, |s| {
        s.containers
            .values()
            .filter(|c| c.id.application().to_string() == long_app)
            .count()
            == 8
    })
    .await;

    let short_app = submit_short(&rm).await;
    let (am_node, short_node) = am_and_short_node(&h, &short_app, 30).await;
    let long_there = h.inspect(|s| {
        s.containers
            .values()
            .filter(|c| c.id.application().to_string() == long_app && Some(c.node) == short_node)
            .count()
    });
    assert!(short_node.is_some(), "a node joined the short partition");
    assert_eq!(
        Some(am_node),
        short_node,
        "the short AM is not on the labelled node"
    );
    // Every long container there still lives: the room came from a suspension.
    assert_eq!(long_there, 4, "long containers on the short node");

    let mut suspended = Vec::new();
    loop {
        match events.try_recv() {
            Ok(ControllerEvent::Action(a)) if a.action == "suspend" => suspended.push(a),
            Ok(_) | Err(TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    assert!(!suspended.is_empty(), "no suspension was recorded");
    let node_name = h.inspect(|s| short_node.map(|i| s.nodes[i].id.to_string()));
    for a in &suspended {
        assert_eq!(a.policy, "dice", "{a:?}");
        assert_eq!(a.application.as_deref(), Some(long_app.as_str()), "{a:?}");
        assert_eq!(a.node, node_name, "suspended off the short node: {a:?}");
    }

    let report = controller.shutdown(false).await.expect("shutdown");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(label_names(&labels_of(&rm).await).is_empty());
    h.shutdown().await.expect("emulator stops");
}
