//! Answers of a real Hadoop 3.5.0 ResourceManager and one of its NodeManagers, captured
//! in JSON and in XML (`testdata/hadoop-3.5.0`, see `testdata/README.md`; the cluster's
//! state is in `testdata/hadoop-3.5.0/CAPTURED`). Each pair must read without schema
//! warnings, as the same DTO in both formats, with the values the cluster held.

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::dto::*;
use super::tolerant::decode;
use super::xml;
use crate::resources::Resource;

/// The JSON and the XML of one answer, read as the client reads them.
fn both<T: DeserializeOwned + Default>(name: &str, json: &str, xml_text: &str) -> (T, T) {
    let j = decode::<T>(json.as_bytes(), name).unwrap_or_else(|e| panic!("{name}.json: {e}"));
    assert!(j.warnings.is_empty(), "{name}.json: {:?}", j.warnings);
    let x =
        xml::decode::<T>(xml_text.as_bytes(), name).unwrap_or_else(|e| panic!("{name}.xml: {e}"));
    assert!(x.warnings.is_empty(), "{name}.xml: {:?}", x.warnings);
    (j.value, x.value)
}

/// Equal but for what XML cannot carry (see [`xml::comparable`]), and for the members
/// named in `moving`: a clock or a gauge that moved between the two captures.
fn same<T: Serialize>(name: &str, from_json: &T, from_xml: &T, moving: &[&str]) {
    let mut differ = Vec::new();
    diff(
        &xml::comparable(from_json),
        &xml::comparable(from_xml),
        String::new(),
        &mut differ,
    );
    differ.retain(|path| !moving.iter().any(|m| path.rsplit('.').next() == Some(m)));
    assert!(
        differ.is_empty(),
        "{name}: JSON and XML differ at {differ:?}"
    );
}

/// The paths (`apps.app[0].elapsedTime`) at which `a` and `b` differ.
fn diff(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (l, r) = (x.get(k), y.get(k));
                diff(
                    l.unwrap_or(&Value::Null),
                    r.unwrap_or(&Value::Null),
                    join(k),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                diff(l, r, format!("{at}[{i}]"), out);
            }
        }
        _ if a != b => out.push(at),
        _ => {}
    }
}

macro_rules! real {
    ($t:ty, $stem:literal) => {
        both::<$t>(
            $stem,
            include_str!(concat!("testdata/hadoop-3.5.0/", $stem, ".json")),
            include_str!(concat!("testdata/hadoop-3.5.0/", $stem, ".xml")),
        )
    };
}

/// Reads a pair, checks that both formats agree, and gives the JSON's reading.
macro_rules! agreed {
    ($t:ty, $stem:literal) => {{ agreed!($t, $stem, []) }};
    ($t:ty, $stem:literal, $moving:expr) => {{
        let (j, x) = real!($t, $stem);
        same($stem, &j, &x, &$moving);
        j
    }};
}

const CLUSTER: i64 = 1795927542334;
const RUNNING_APP: &str = "application_1795927542334_0002";
const FINISHED_APP: &str = "application_1795927542334_0001";
const AM_CONTAINER: &str = "container_1795927542334_0002_01_000001";
/// A node's CPU use, sampled anew for each capture.
const CPU_GAUGES: [&str; 2] = ["nodeCPUUsage", "containersCPUUsage"];

#[test]
fn cluster_info() {
    let i = agreed!(ClusterInfoResponse, "cluster-info").cluster_info;
    assert_eq!((i.id, i.started_on), (CLUSTER, CLUSTER));
    assert_eq!(
        (i.state.as_str(), i.ha_state.as_str()),
        ("STARTED", "ACTIVE")
    );
    assert_eq!(i.resource_manager_version, "3.5.0");
    assert_eq!(i.hadoop_version, "3.5.0");
    assert!(i.rm_state_store_name.ends_with("NullRMStateStore"));
}

#[test]
fn cluster_metrics() {
    let m = agreed!(ClusterMetricsResponse, "cluster-metrics").cluster_metrics;
    assert_eq!(
        (m.apps_submitted, m.apps_completed, m.apps_running),
        (2, 1, 1)
    );
    assert_eq!(
        (m.allocated_mb, m.pending_mb, m.total_mb),
        (4352, 2560, 8192)
    );
    assert_eq!(m.available_mb, 3840);
    assert_eq!((m.allocated_virtual_cores, m.pending_virtual_cores), (8, 5));
    assert_eq!(m.total_virtual_cores, 8);
    assert_eq!((m.containers_allocated, m.containers_pending), (8, 5));
    assert_eq!((m.total_nodes, m.active_nodes, m.lost_nodes), (2, 2, 0));
}

#[test]
fn capacity_scheduler_with_two_leaf_queues() {
    let root = agreed!(SchedulerResponse, "scheduler-capacity")
        .scheduler
        .scheduler_info;
    assert_eq!(root.kind.as_deref(), Some(CAPACITY_SCHEDULER_TYPE));
    assert_eq!((root.queue_name.as_str(), root.capacity), ("root", 100.0));
    assert!(!root.is_leaf());
    let health = root.health.as_ref().expect("health");
    assert_eq!(health.lastrun, 1795927604277);
    let release = &health.operations_info[1];
    assert_eq!(release.operation, "last-release");
    assert_eq!(release.queue, "root.short");

    let q = root.children();
    let names: Vec<(&str, &str)> = q
        .iter()
        .map(|q| (q.queue_name.as_str(), q.queue_path.as_str()))
        .collect();
    assert_eq!(names, [("short", "root.short"), ("long", "root.long")]);
    assert!(q.iter().all(|q| q.is_leaf()));
    assert!(q.iter().all(|q| q.kind.as_deref() == Some(LEAF_QUEUE_TYPE)));

    let (short, long) = (&q[0], &q[1]);
    assert_eq!((short.capacity, short.absolute_capacity), (95.0, 95.0));
    assert_eq!(short.num_containers, Some(0));
    assert!(short.users.as_ref().is_none_or(|u| u.user.is_empty()));

    assert_eq!((long.capacity, long.max_capacity), (5.0, 100.0));
    assert_eq!(
        (long.used_capacity, long.absolute_used_capacity),
        (800.0, 100.0)
    );
    assert_eq!(long.num_containers, Some(8));
    assert_eq!(long.pending_containers, 5);
    assert_eq!(long.resources_used.to_resource(), Resource::new(4352, 8));
    assert_eq!(long.user_limit_factor, Some(20.0));
    assert_eq!(long.preemption_disabled, Some(true));
    let users = &long.users.as_ref().expect("users").user;
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].username, "root");
    assert_eq!(
        users[0].resources_used.to_resource(),
        Resource::new(4352, 8)
    );
    let partition = &long.capacities.queue_capacities_by_partition[0];
    assert_eq!(
        (partition.partition_name.as_str(), partition.capacity),
        ("", 5.0)
    );
    let usage = &long.resources.resource_usages_by_partition[0];
    assert_eq!(usage.used.to_resource(), Resource::new(4352, 8));
    assert_eq!(usage.am_used.to_resource(), Resource::new(768, 1));
}

#[test]
fn applications_running_and_finished() {
    let apps = agreed!(AppsResponse, "apps", ["elapsedTime"]).into_list();
    let ids: Vec<&str> = apps.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, [RUNNING_APP, FINISHED_APP]);
    let running = &apps[0];
    assert_eq!(running.state, YarnApplicationState::Running);
    assert_eq!(running.queue, "root.long");
    assert_eq!(running.application_type, "MAPREDUCE");
    assert_eq!((running.allocated_mb, running.allocated_vcores), (4352, 8));
    assert_eq!(running.running_containers, 8);
    assert!(running.am_container_logs.contains(AM_CONTAINER));
    let requests = running.resource_requests.as_deref().expect("requests");
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.priority, r.num_containers), (20, 5));
    assert_eq!(r.resource_name, "*");
    assert_eq!(r.capability.to_resource(), Resource::new(512, 1));
    assert_eq!(r.execution_type_request.execution_type, "GUARANTEED");
    assert!(r.relax_locality);

    let finished = &apps[1];
    assert_eq!(finished.state, YarnApplicationState::Finished);
    assert_eq!(finished.final_status, FinalApplicationStatus::Succeeded);
    assert_eq!(finished.queue, "root.short");
    assert_eq!(finished.allocated_mb, -1);
}

#[test]
fn application_and_finished_application() {
    let app = agreed!(AppResponse, "app", ["elapsedTime"]).app;
    assert_eq!(app.id, RUNNING_APP);
    assert_eq!(
        (app.name.as_str(), app.user.as_str()),
        ("Sleep job", "root")
    );
    assert_eq!(app.state, YarnApplicationState::Running);
    assert_eq!(app.progress, 5.0);

    let done = agreed!(AppResponse, "app-finished").app;
    assert_eq!(done.id, FINISHED_APP);
    assert_eq!(done.name, "QuasiMonteCarlo");
    assert_eq!(done.final_status, FinalApplicationStatus::Succeeded);
    assert_eq!(
        (done.finished_time, done.elapsed_time),
        (1795927586980, 27192)
    );
    assert_eq!((done.memory_seconds, done.vcore_seconds), (35630, 52));
    assert_eq!((done.allocated_mb, done.running_containers), (-1, -1));
}

#[test]
fn attempts() {
    let a = agreed!(AppAttemptsResponse, "appattempts")
        .app_attempts
        .app_attempt;
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].id, 1);
    assert_eq!(a[0].app_attempt_id, "appattempt_1795927542334_0002_000001");
    assert_eq!(a[0].app_attempt_state, "RUNNING");
    assert_eq!(a[0].container_id, AM_CONTAINER);
    assert_eq!(a[0].node_id, "localhost:24330");
    assert_eq!(a[0].blacklisted_nodes, "");
}

#[test]
fn attempt_containers_rootless_json_and_rooted_xml() {
    let (j, x) = real!(AttemptContainersResponse, "appattempt-containers");
    // Hadoop 3.5 drops the `containers` root from the JSON only.
    assert!(j.containers.is_none() && x.container.is_empty());
    let (j, x) = (j.into_list(), x.into_list());
    same("appattempt-containers", &j, &x, &["elapsedTime"]);
    assert_eq!(j.len(), 8);
    let am = j
        .iter()
        .find(|c| c.container_id == AM_CONTAINER)
        .expect("the AM");
    assert_eq!((am.allocated_mb, am.allocated_vcores), (768, 1));
    assert_eq!(am.priority, 0);
    assert_eq!(
        (am.node_id.as_str(), am.assigned_node_id.as_str()),
        ("localhost:24330", "localhost:24330")
    );
    assert_eq!(am.container_state, "RUNNING");
    assert_eq!(am.node_http_address, "http://localhost:24331");
    let resources: Vec<(&str, &str)> = am
        .allocated_resources
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    assert_eq!(resources, [("memory-mb", "768"), ("vcores", "1")]);
    let total: i64 = j.iter().map(|c| c.allocated_mb).sum();
    assert_eq!(total, 4352, "the running application's allocatedMB");
    let on_24334 = j.iter().filter(|c| c.node_id == "localhost:24334").count();
    assert_eq!(on_24334, 4);
}

#[test]
fn nodes_and_one_node() {
    let nodes = agreed!(NodesResponse, "nodes", CPU_GAUGES).into_list();
    let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["localhost:24334", "localhost:24330"]);
    let n = &nodes[0];
    assert_eq!(
        (n.state.as_str(), n.rack.as_str()),
        ("RUNNING", "/default-rack")
    );
    assert_eq!(n.node_http_address, "localhost:24335");
    assert_eq!(n.total_resource.to_resource(), Resource::new(4096, 4));
    assert_eq!(n.used_resource.to_resource(), Resource::new(2048, 4));
    assert_eq!(n.available_resource.to_resource(), Resource::new(2048, 0));
    assert_eq!((n.used_memory_mb, n.avail_memory_mb), (2048, 2048));
    assert_eq!(n.num_containers, 4);
    assert_eq!(n.resource_utilization.node_physical_memory_mb, 6754);
    assert_eq!(nodes[1].used_resource.to_resource(), Resource::new(2304, 4));

    let node = agreed!(NodeResponse, "node", CPU_GAUGES).node;
    assert_eq!(node.id, "localhost:24334");
    assert_eq!(node.total_resource.to_resource(), Resource::new(4096, 4));
    let raised = agreed!(NodeResponse, "node-raised", CPU_GAUGES).node;
    assert_eq!(raised.id, "localhost:24334");
    assert_eq!(raised.total_resource.to_resource(), Resource::new(4096, 6));
}

#[test]
fn node_resource_update_request_and_response() {
    // The two requests differ: the JSON one raised the node to 6 vcores, the XML one
    // restored it to 4.
    let (j, x) = real!(ResourceOptionInfo, "node-resource-request");
    assert_eq!(j.resource.to_resource(), Resource::new(4096, 6));
    assert_eq!(x.resource.to_resource(), Resource::new(4096, 4));
    assert_eq!((j.over_commit_timeout, x.over_commit_timeout), (-1, -1));

    let r = agreed!(ResourceInfoResponse, "node-resource-response").resource_info;
    assert_eq!(r.to_resource(), Resource::new(4096, 4));
}

#[test]
fn no_node_labels() {
    let labels = agreed!(NodeLabelsInfo, "node-labels");
    assert!(labels.node_label_info.is_empty());
    let map = agreed!(NodeToLabelsInfo, "node-to-labels");
    assert!(map.node_to_labels.entry.is_empty());
}

#[test]
fn remote_exception() {
    let e = agreed!(RemoteExceptionResponse, "error-app-not-found").remote_exception;
    assert_eq!(e.exception, "NotFoundException");
    assert_eq!(e.message, "app with id: application_0_0000 not found");
    assert_eq!(
        e.java_class_name,
        "org.apache.hadoop.yarn.webapp.NotFoundException"
    );
}

#[test]
fn node_manager_info_and_containers() {
    let i = agreed!(NmNodeInfoResponse, "nm-info").node_info;
    assert_eq!(i.id, "localhost:24330");
    assert_eq!(
        (
            i.total_pmem_allocated_containers_mb,
            i.total_vmem_allocated_containers_mb
        ),
        (4096, 8601)
    );
    assert_eq!(i.total_v_cores_allocated_containers, 4);
    assert!(i.pmem_check_enabled && !i.vmem_check_enabled);
    assert!(i.node_healthy);
    assert_eq!(i.node_manager_version, "3.5.0");
    assert_eq!(i.nm_startup_time, 1795927543629);

    let c = agreed!(NmContainersResponse, "nm-containers").into_list();
    assert_eq!(c.len(), 4);
    let am = &c[0];
    assert_eq!(am.id, AM_CONTAINER);
    assert_eq!((am.state.as_str(), am.exit_code), ("RUNNING", -1000));
    assert_eq!(
        (am.total_memory_needed_mb, am.total_v_cores_needed),
        (768, 1)
    );
    assert_eq!(am.execution_type, "GUARANTEED");
    assert_eq!(am.node_id, "localhost:24330");
    assert_eq!(am.container_log_files.len(), 7);
    assert!(am.container_log_files.iter().any(|f| f == "syslog"));
}
