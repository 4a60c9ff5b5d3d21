//! The emulator's REST answers against a real Hadoop 3.5.0 RM's, field by field: the
//! names and JSON types of every endpoint Preemptor reads, compared with the responses
//! captured from a real cluster (`src/yarn/testdata/hadoop-3.5.0/`,
//! `deploy/hadoop/capture-fixtures.sh`). The differences that remain are listed here and
//! in docs/emulator.md; a new one fails the test.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, RuntimeChoice};
use preemptor::resources::Resource;
use serde_json::Value;

use crate::emulator_support::{get_json, submit, wait_running};

/// Differences from the real RM the emulator keeps, as `<endpoint> <kind> <path>`.
/// docs/emulator.md ("Known differences") explains each group.
const KNOWN: &[&str] = &[
    "app extra .app.appNodeLabelExpression",
    "app missing .app.masterNodeId",
    "app missing .app.resourceInfo",
    "app missing .app.resourceSecondsMap",
    "app missing .app.timeouts",
    "appattempt-containers extra .containers",
    "appattempt-containers missing .container",
    "appattempts missing .appAttempts.appAttempt[].exportPorts",
    "appattempts missing .appAttempts.appAttempt[].nodesBlacklistedBySystem",
    "apps extra .apps.app[].appNodeLabelExpression",
    "apps missing .apps.app[].masterNodeId",
    "apps missing .apps.app[].resourceInfo",
    "apps missing .apps.app[].resourceSecondsMap",
    "apps missing .apps.app[].timeouts",
    "cluster-metrics missing .clusterMetrics.containerAssignedPerSecond",
    "cluster-metrics missing .clusterMetrics.crossPartitionMetricsAvailable",
    "cluster-metrics missing .clusterMetrics.rmEventQueueSize",
    "cluster-metrics missing .clusterMetrics.rmSchedulerBusyPercent",
    "cluster-metrics missing .clusterMetrics.schedulerEventQueueSize",
    "cluster-metrics missing .clusterMetrics.totalAllocatedContainersAcrossPartition",
    "cluster-metrics missing .clusterMetrics.totalClusterResourcesAcrossPartition",
    "cluster-metrics missing .clusterMetrics.totalReservedResourcesAcrossPartition",
    "cluster-metrics missing .clusterMetrics.totalUsedResourcesAcrossPartition",
    "cluster-metrics missing .clusterMetrics.utilizedMB",
    "cluster-metrics missing .clusterMetrics.utilizedMBPercent",
    "cluster-metrics missing .clusterMetrics.utilizedVirtualCores",
    "cluster-metrics missing .clusterMetrics.utilizedVirtualCoresPercent",
    "nm-info missing .nodeInfo.resourceTypes",
    "node extra .node.nodeLabels",
    "node missing .node.allocationTags",
    "node missing .node.availableResource.resourceInformations",
    "node missing .node.cpuUtilization",
    "node missing .node.memUtilization",
    "node missing .node.nodeAttributesInfo",
    "node missing .node.numQueuedContainers",
    "node missing .node.numRunningOpportContainers",
    "node missing .node.totalResource.resourceInformations",
    "node missing .node.usedMemoryOpportGB",
    "node missing .node.usedResource.resourceInformations",
    "node missing .node.usedVirtualCoresOpport",
    "node-resource-response missing .resourceInfo.resourceInformations",
    "nodes extra .nodes.node[].nodeLabels",
    "nodes missing .nodes.node[].allocationTags",
    "nodes missing .nodes.node[].availableResource.resourceInformations",
    "nodes missing .nodes.node[].cpuUtilization",
    "nodes missing .nodes.node[].memUtilization",
    "nodes missing .nodes.node[].nodeAttributesInfo",
    "nodes missing .nodes.node[].numQueuedContainers",
    "nodes missing .nodes.node[].numRunningOpportContainers",
    "nodes missing .nodes.node[].totalResource.resourceInformations",
    "nodes missing .nodes.node[].usedMemoryOpportGB",
    "nodes missing .nodes.node[].usedResource.resourceInformations",
    "nodes missing .nodes.node[].usedVirtualCoresOpport",
    "scheduler-capacity extra .scheduler.schedulerInfo.absoluteCapacity",
    "scheduler-capacity extra .scheduler.schedulerInfo.absoluteMaxCapacity",
    "scheduler-capacity extra .scheduler.schedulerInfo.absoluteUsedCapacity",
    "scheduler-capacity extra .scheduler.schedulerInfo.allocatedContainers",
    "scheduler-capacity extra .scheduler.schedulerInfo.maxEffectiveCapacity",
    "scheduler-capacity extra .scheduler.schedulerInfo.minEffectiveCapacity",
    "scheduler-capacity extra .scheduler.schedulerInfo.nodeLabels",
    "scheduler-capacity extra .scheduler.schedulerInfo.numApplications",
    "scheduler-capacity extra .scheduler.schedulerInfo.pendingContainers",
    "scheduler-capacity extra .scheduler.schedulerInfo.queues.queue[].maxActiveApplications",
    "scheduler-capacity extra .scheduler.schedulerInfo.queues.queue[].maxActiveApplicationsPerUser",
    "scheduler-capacity extra .scheduler.schedulerInfo.queues.queue[].usedResources",
    "scheduler-capacity extra .scheduler.schedulerInfo.reservedContainers",
    "scheduler-capacity extra .scheduler.schedulerInfo.resources",
    "scheduler-capacity extra .scheduler.schedulerInfo.resourcesUsed",
    "scheduler-capacity extra .scheduler.schedulerInfo.state",
    "scheduler-capacity extra .scheduler.schedulerInfo.usedResources",
    "scheduler-capacity missing .scheduler.schedulerInfo.autoCreationEligibility",
    "scheduler-capacity missing .scheduler.schedulerInfo.autoQueueLeafTemplateProperties",
    "scheduler-capacity missing .scheduler.schedulerInfo.autoQueueParentTemplateProperties",
    "scheduler-capacity missing .scheduler.schedulerInfo.autoQueueTemplateProperties",
    "scheduler-capacity missing .scheduler.schedulerInfo.capacities.queueCapacitiesByPartition[].configuredMaxResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.capacities.queueCapacitiesByPartition[].configuredMinResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.capacities.queueCapacitiesByPartition[].effectiveMaxResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.capacities.queueCapacitiesByPartition[].effectiveMinResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.capacities.queueCapacitiesByPartition[].queueCapacityVectorInfo",
    "scheduler-capacity missing .scheduler.schedulerInfo.health.lastRunDetails[].resources.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.maximumAllocation.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queueAcls",
    "scheduler-capacity missing .scheduler.schedulerInfo.queueCapacityVectorInfo",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].AMResourceLimit.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].autoCreateChildQueueEnabled",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].autoCreationEligibility",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].autoQueueLeafTemplateProperties",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].autoQueueParentTemplateProperties",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].autoQueueTemplateProperties",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].capacities.queueCapacitiesByPartition[].configuredMaxResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].capacities.queueCapacitiesByPartition[].configuredMinResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].capacities.queueCapacitiesByPartition[].effectiveMaxResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].capacities.queueCapacitiesByPartition[].effectiveMinResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].capacities.queueCapacitiesByPartition[].queueCapacityVectorInfo",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].defaultApplicationLifetime",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].hideReservationQueues",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].isAutoCreatedLeafQueue",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].leafQueueTemplate",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].maxApplicationLifetime",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].maxEffectiveCapacity.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].maximumAllocation.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].minEffectiveCapacity.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].queueAcls",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resources.resourceUsagesByPartition[].amLimit.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resources.resourceUsagesByPartition[].amUsed.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resources.resourceUsagesByPartition[].pending.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resources.resourceUsagesByPartition[].reserved.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resources.resourceUsagesByPartition[].used.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resources.resourceUsagesByPartition[].userAmLimit.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].resourcesUsed.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].usedAMResource.resourceInformations",
    "scheduler-capacity missing .scheduler.schedulerInfo.queues.queue[].userAMResourceLimit",
];

fn real(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/yarn/testdata/hadoop-3.5.0")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every difference in names and types between `real` and `emulated` under `path`.
/// Arrays are compared through their elements' union of fields.
fn compare(endpoint: &str, path: &str, real: &Value, emulated: &Value, out: &mut BTreeSet<String>) {
    match (real, emulated) {
        (Value::Object(r), Value::Object(e)) => {
            for (k, rv) in r {
                let p = format!("{path}.{k}");
                match e.get(k) {
                    Some(ev) => compare(endpoint, &p, rv, ev, out),
                    None => {
                        out.insert(format!("{endpoint} missing {p}"));
                    }
                }
            }
            for k in e.keys().filter(|k| !r.contains_key(*k)) {
                out.insert(format!("{endpoint} extra {path}.{k}"));
            }
        }
        (Value::Array(r), Value::Array(e)) => {
            let p = format!("{path}[]");
            let merge = |items: &[Value]| {
                let mut m = serde_json::Map::new();
                for item in items {
                    if let Value::Object(o) = item {
                        for (k, v) in o {
                            m.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
                m
            };
            match (r.first(), e.first()) {
                (Some(Value::Object(_)), Some(Value::Object(_))) => compare(
                    endpoint,
                    &p,
                    &Value::Object(merge(r)),
                    &Value::Object(merge(e)),
                    out,
                ),
                (Some(rv), Some(ev)) => compare(endpoint, &p, rv, ev, out),
                _ => {}
            }
        }
        // An empty or absent value on either side says nothing about the other's type.
        (Value::Null, _) | (_, Value::Null) => {}
        (r, e) if kind(r) != kind(e) => {
            out.insert(format!(
                "{endpoint} type {path}: real {}, emulator {}",
                kind(r),
                kind(e)
            ));
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emulator_answers_with_the_real_rms_names_and_types() {
    let mut config = EmulatorConfig::local(1, Resource::new(8192, 8), RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    let h = Emulator::start(config).await.expect("emulator starts");
    let rm = h.rm_url().to_string();
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","50"],"tasks":2,"memoryMb":1024,"vcores":1,"simulatedDurationMs":600000}"#,
    )
    .expect("spec");
    let app = submit(&rm, "fidelity", "long", &spec, Resource::new(1024, 1)).await;
    wait_running(&h, &app).await;
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    // Let the tasks be allocated and started.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let attempts = get_json(&http, &format!("{rm}/ws/v1/cluster/apps/{app}/appattempts")).await;
    let attempt = attempts["appAttempts"]["appAttempt"][0]["appAttemptId"]
        .as_str()
        .expect("an attempt id")
        .to_string();
    let nodes = get_json(&http, &format!("{rm}/ws/v1/cluster/nodes")).await;
    let node = nodes["nodes"]["node"][0]["id"]
        .as_str()
        .expect("a node id")
        .to_string();
    let nm = h.nodes()[0].url.clone();

    let pairs = [
        ("cluster-info.json", format!("{rm}/ws/v1/cluster/info")),
        (
            "cluster-metrics.json",
            format!("{rm}/ws/v1/cluster/metrics"),
        ),
        (
            "scheduler-capacity.json",
            format!("{rm}/ws/v1/cluster/scheduler"),
        ),
        ("apps.json", format!("{rm}/ws/v1/cluster/apps")),
        ("app.json", format!("{rm}/ws/v1/cluster/apps/{app}")),
        (
            "appattempts.json",
            format!("{rm}/ws/v1/cluster/apps/{app}/appattempts"),
        ),
        (
            "appattempt-containers.json",
            format!("{rm}/ws/v1/cluster/apps/{app}/appattempts/{attempt}/containers"),
        ),
        ("nodes.json", format!("{rm}/ws/v1/cluster/nodes")),
        ("node.json", format!("{rm}/ws/v1/cluster/nodes/{node}")),
        ("nm-info.json", format!("{nm}/ws/v1/node/info")),
        ("nm-containers.json", format!("{nm}/ws/v1/node/containers")),
    ];
    let mut found = BTreeSet::new();
    for (fixture, url) in &pairs {
        let emulated = get_json(&http, url).await;
        let endpoint = fixture.trim_end_matches(".json");
        compare(endpoint, "", &real(fixture), &emulated, &mut found);
    }
    // The node resource update's answer.
    let body = real("node-resource-request.json");
    let resp = http
        .post(format!("{rm}/ws/v1/cluster/nodes/{node}/resource"))
        .json(&body)
        .send()
        .await
        .expect("node resource update");
    assert!(resp.status().is_success(), "{}", resp.status());
    let emulated: Value = resp.json().await.expect("JSON answer");
    compare(
        "node-resource-response",
        "",
        &real("node-resource-response.json"),
        &emulated,
        &mut found,
    );
    h.shutdown().await.expect("emulator stops");

    let known: BTreeSet<String> = KNOWN.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&found).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "differences from the real RM not in KNOWN:\n{}\nKNOWN entries no longer found:\n{}",
        new.iter()
            .map(|s| format!("  \"{s}\","))
            .collect::<Vec<_>>()
            .join("\n"),
        gone.iter()
            .map(|s| format!("  \"{s}\","))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}
