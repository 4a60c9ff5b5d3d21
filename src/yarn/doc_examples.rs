//! The response examples of Hadoop's ResourceManagerRest.md (2.x and 3.x, see
//! testdata/README.md for their sources), read the way the client reads responses, with
//! the values the document prints.

use super::dto::*;
use super::tolerant::{Parsed, decode};
use crate::resources::Resource;

fn read<T: serde::de::DeserializeOwned + Default>(name: &str, json: &str) -> T {
    let p: Parsed<T> = decode(json.as_bytes(), name).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(p.warnings.is_empty(), "{name}: {:?}", p.warnings);
    p.value
}

macro_rules! fixture {
    ($version:literal, $file:literal) => {
        read(
            concat!($version, "/", $file),
            include_str!(concat!("testdata/", $version, "/", $file)),
        )
    };
}

fn leaves(q: &QueueInfo, out: &mut Vec<String>) {
    if q.is_leaf() {
        out.push(q.queue_name.clone());
    }
    for c in q.children() {
        leaves(c, out);
    }
}

mod hadoop_2 {
    use super::*;

    #[test]
    fn cluster_info_without_ha_fields() {
        let r: ClusterInfoResponse = fixture!("hadoop-2", "cluster-info.json");
        let i = r.cluster_info;
        assert_eq!(i.id, 1324053971963);
        assert_eq!(i.started_on, 1324053971963);
        assert_eq!(i.state, "STARTED");
        assert_eq!(i.ha_state, "");
        assert_eq!(i.resource_manager_version, "0.23.1-SNAPSHOT");
        assert_eq!(i.hadoop_version_built_on, "Tue Dec 13 22:12:26 CST 2011");
    }

    #[test]
    fn cluster_metrics() {
        let r: ClusterMetricsResponse = fixture!("hadoop-2", "cluster-metrics.json");
        let m = r.cluster_metrics;
        assert_eq!((m.available_mb, m.total_mb), (17408, 17408));
        assert_eq!(m.available_virtual_cores, 7);
        assert_eq!(m.allocated_virtual_cores, 1);
        assert_eq!(m.total_virtual_cores, 8);
        assert_eq!((m.total_nodes, m.active_nodes), (1, 1));
    }

    #[test]
    fn capacity_scheduler_tree() {
        let r: SchedulerResponse = fixture!("hadoop-2", "scheduler-capacity.json");
        let root = r.scheduler.scheduler_info;
        assert_eq!(root.kind.as_deref(), Some(CAPACITY_SCHEDULER_TYPE));
        assert_eq!((root.queue_name.as_str(), root.capacity), ("root", 100.0));
        assert!(!root.is_leaf());
        let mut l = Vec::new();
        leaves(&root, &mut l);
        assert_eq!(l, ["a1a", "a1b", "a2", "b1", "b2", "b3"]);

        let a = &root.children()[0];
        assert_eq!(
            (a.queue_name.as_str(), a.capacity, a.max_capacity),
            ("a", 10.5, 50.0)
        );
        assert!(!a.is_leaf() && a.kind.is_none());
        let a1 = &a.children()[0];
        assert_eq!(a1.capacity, 30.000002);
        assert_eq!(a1.absolute_capacity, 3.15);
        let a1a = &a1.children()[0];
        assert_eq!(a1a.absolute_capacity, 2.6775);
        assert_eq!(a1a.max_applications, Some(267));
        assert_eq!(a1a.user_limit_factor, Some(1.0));
        assert_eq!(a1a.used_resources, "<memory:0, vCores:0>");
        assert_eq!(a1a.users, None);

        let b = &root.children()[1];
        assert_eq!(b.num_applications, 2);
        let b1 = &b.children()[0];
        assert_eq!(b1.num_active_applications, Some(1));
        assert_eq!(b1.num_pending_applications, Some(1));
        assert_eq!(b1.max_applications_per_user, Some(537000));
        let users = &b1.users.as_ref().unwrap().user;
        assert_eq!(users[0].username, "user2");
        assert_eq!(users[0].num_pending_applications, 1);
        assert_eq!(users[1].username, "user1");
        assert_eq!(users[1].num_active_applications, 1);
        assert_eq!(b.children()[2].capacity, 0.5);
        assert_eq!(b.children()[2].absolute_capacity, 0.4475);
    }

    #[test]
    fn applications_with_2x_field_names() {
        let r: AppsResponse = fixture!("hadoop-2", "apps.json");
        let apps = r.into_list();
        assert_eq!(apps.len(), 2);
        let wc = &apps[0];
        assert_eq!(wc.id, "application_1326815542473_0001");
        assert_eq!(
            (wc.name.as_str(), wc.user.as_str()),
            ("word count", "user1")
        );
        assert_eq!(wc.state, YarnApplicationState::Finished);
        assert_eq!(wc.final_status, FinalApplicationStatus::Succeeded);
        assert_eq!(wc.application_type, "MAPREDUCE");
        assert_eq!(wc.cluster_id, 1326815542473);
        assert_eq!(wc.elapsed_time, 25196);
        assert_eq!((wc.memory_seconds, wc.vcore_seconds), (151730, 103));
        assert!(!wc.unmanaged_application, "\"false\" as a string");
        assert_eq!(wc.priority, 0, "read from applicationPriority");
        assert_eq!(wc.resource_requests, None);
        let sleep = &apps[1];
        assert_eq!(sleep.tags().collect::<Vec<_>>(), ["tag1"]);
        assert_eq!(sleep.running_containers, 1);
        assert_eq!(sleep.memory_seconds, 640064);
    }

    #[test]
    fn application() {
        let r: AppResponse = fixture!("hadoop-2", "app.json");
        let a = r.app;
        assert_eq!(a.id, "application_1326821518301_0005");
        assert_eq!(
            (a.queue.as_str(), a.application_type.as_str()),
            ("a1", "Yarn")
        );
        assert_eq!(
            (a.started_time, a.finished_time),
            (1326824544552, 1326824991300)
        );
        assert_eq!(a.elapsed_time, 446748);
        assert_eq!(a.progress, 100.0);
    }

    #[test]
    fn attempts() {
        let r: AppAttemptsResponse = fixture!("hadoop-2", "appattempts.json");
        let a = &r.app_attempts.app_attempt[0];
        assert_eq!(a.id, 1);
        assert_eq!(a.node_id, "host.domain.com:8041");
        assert_eq!(a.container_id, "container_1326821518301_0005_01_000001");
        assert_eq!(a.start_time, 1326381444693);
        assert_eq!(a.app_attempt_state, "");
    }

    #[test]
    fn nodes() {
        let r: NodesResponse = fixture!("hadoop-2", "nodes.json");
        let n = r.into_list();
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].id.as_str(), n[1].id.as_str()), ("h2:1235", "h1:1234"));
        assert_eq!(n[0].rack, "/default-rack");
        assert_eq!(n[0].state, "NEW");
        assert_eq!(n[0].node_http_address, "h2:2");
        assert_eq!(n[0].avail_memory_mb, 8192);
        assert_eq!(n[0].available_virtual_cores, 8);
        assert_eq!(n[1].last_health_update, 1324056895092);
        let r: NodeResponse = fixture!("hadoop-2", "node.json");
        assert_eq!(r.node.avail_memory_mb, 5120);
        assert_eq!(r.node.health_report, "Healthy");
    }
}

mod hadoop_3 {
    use super::*;

    #[test]
    fn cluster_info_with_ha_state() {
        let r: ClusterInfoResponse = fixture!("hadoop-3", "cluster-info.json");
        let i = r.cluster_info;
        assert_eq!(i.id, 1324053971963);
        assert_eq!(i.ha_state, "ACTIVE");
        assert_eq!(
            i.rm_state_store_name,
            "org.apache.hadoop.yarn.server.resourcemanager.recovery.NullRMStateStore"
        );
        assert_eq!(i.hadoop_version, "3.0.0-SNAPSHOT");
        assert_eq!(
            i.ha_zoo_keeper_connection_state,
            "ResourceManager HA is not enabled."
        );
    }

    #[test]
    fn cluster_metrics() {
        let r: ClusterMetricsResponse = fixture!("hadoop-3", "cluster-metrics.json");
        let m = r.cluster_metrics;
        assert_eq!(m.total_mb, 17408);
        assert_eq!((m.decommissioning_nodes, m.shutdown_nodes), (0, 0));
        assert_eq!(m.active_nodes, 1);
    }

    #[test]
    fn capacity_scheduler_with_partitions() {
        let r: SchedulerResponse = fixture!("hadoop-3", "scheduler-capacity.json");
        let root = r.scheduler.scheduler_info;
        assert_eq!(root.kind.as_deref(), Some(CAPACITY_SCHEDULER_TYPE));
        assert_eq!(
            (root.queue_path.as_str(), root.queue_type.as_str()),
            ("root", "parent")
        );
        assert_eq!(root.ordering_policy_info, "utilization");
        let root_part = &root.capacities.queue_capacities_by_partition[0];
        assert_eq!(
            root_part.effective_min_resource.to_resource(),
            Resource::new(32768, 32)
        );
        let health = root.health.as_ref().unwrap();
        assert_eq!(health.lastrun, 0);
        assert_eq!(health.operations_info.len(), 4);
        assert_eq!(health.operations_info[0].operation, "last-allocation");
        assert_eq!(health.operations_info[0].node_id, "N/A");
        assert_eq!(health.last_run_details[0].operation, "releases");
        assert_eq!(
            root.maximum_allocation.to_resource(),
            Resource::new(8192, 4)
        );

        let q = root.children();
        let paths: Vec<&str> = q.iter().map(|q| q.queue_path.as_str()).collect();
        assert_eq!(paths, ["root.a", "root.b", "root.c"]);
        assert!(q.iter().all(QueueInfo::is_leaf));
        let guaranteed: f64 = q.iter().map(|q| q.absolute_capacity).sum();
        assert_eq!(guaranteed, 100.0);

        let a = &q[0];
        assert_eq!((a.capacity, a.max_capacity), (12.5, 50.0));
        assert_eq!((a.weight, a.normalized_weight), (-1.0, 0.0));
        assert_eq!(a.max_parallel_apps, 2147483647);
        assert_eq!(a.node_labels, ["*"]);
        assert_eq!(
            (a.mode.as_str(), a.queue_type.as_str()),
            ("percentage", "leaf")
        );
        assert_eq!(a.creation_method, "static");
        assert_eq!(a.max_applications, Some(1250));
        assert_eq!(a.configured_max_a_m_resource_limit, Some(0.1));
        assert_eq!(a.preemption_disabled, Some(true));
        assert_eq!(a.users.as_ref().map(|u| u.user.len()), Some(0));
        assert_eq!(
            a.am_resource_limit.unwrap().to_resource(),
            Resource::new(2048, 1)
        );
        let part = &a.capacities.queue_capacities_by_partition[0];
        assert_eq!(part.partition_name, "");
        assert_eq!(
            (part.absolute_capacity, part.absolute_max_capacity),
            (12.5, 50.0)
        );
        assert_eq!(part.max_am_limit_percentage, 10.0);
        assert_eq!(
            part.effective_min_resource.to_resource(),
            Resource::new(4096, 4)
        );
        assert_eq!(
            part.effective_max_resource.to_resource(),
            Resource::new(16384, 16)
        );
        assert_eq!(
            part.configured_min_resource.to_resource(),
            Resource::new(0, 0)
        );
        let usage = &a.resources.resource_usages_by_partition[0];
        assert_eq!(usage.pending.to_resource(), Resource::new(0, 0));
        assert_eq!(usage.am_limit.to_resource(), Resource::new(2048, 1));
        assert_eq!(
            a.min_effective_capacity.to_resource(),
            Resource::new(4096, 4)
        );

        let c = &q[2];
        assert_eq!(c.capacity, 37.5);
        assert_eq!(c.max_applications, Some(3750));
        assert_eq!(
            c.max_effective_capacity.to_resource(),
            Resource::new(32768, 32)
        );
    }

    #[test]
    fn applications_with_resource_requests() {
        let r: AppsResponse = fixture!("hadoop-3", "apps.json");
        let apps = r.into_list();
        assert_eq!(apps.len(), 2);
        let wc = &apps[0];
        assert_eq!(wc.id, "application_1476912658570_0002");
        assert_eq!(wc.application_type, "MAPREDUCE");
        assert_eq!(wc.priority, -1);
        assert_eq!(wc.diagnostics, "...");
        assert_eq!(wc.log_aggregation_status, "DISABLED");
        assert_eq!((wc.memory_seconds, wc.vcore_seconds), (206464, 201));
        let rr = wc.resource_requests.as_ref().unwrap();
        assert_eq!(rr.len(), 3);
        assert_eq!(rr[0].resource_name, "*");
        assert_eq!(rr[0].priority, 0);
        assert_eq!(rr[0].capability.to_resource(), Resource::new(4096, 1));
        assert!(rr[0].relax_locality);
        assert_eq!(
            (rr[1].priority, rr[1].resource_name.as_str()),
            (20, "host1.domain.com")
        );
        assert_eq!(
            apps[1].resource_requests.as_ref().unwrap()[2].resource_name,
            "host4.domain.com"
        );
    }

    #[test]
    fn finished_application_prints_minus_one() {
        let r: AppResponse = fixture!("hadoop-3", "app.json");
        let a = r.app;
        assert_eq!(
            (a.allocated_mb, a.allocated_vcores, a.running_containers),
            (-1, -1, -1)
        );
        assert_eq!(a.application_type, "YARN");
        assert_eq!(
            a.am_container_logs,
            "http://host.domain.com:8042/node/containerlogs/container_1476912658570_0002_02_000001/dr.who"
        );
        assert_eq!(a.finished_time, 1476913761898);
    }

    #[test]
    fn attempts_with_state() {
        let r: AppAttemptsResponse = fixture!("hadoop-3", "appattempts.json");
        let a = &r.app_attempts.app_attempt[0];
        assert_eq!((a.id, a.app_attempt_state.as_str()), (1, "RUNNING"));
        assert_eq!(a.node_http_address, "host.domain.com:8042");
    }

    #[test]
    fn attempt_containers_with_numbers_as_strings() {
        let r: AttemptContainersResponse = fixture!("hadoop-3", "appattempt-containers.json");
        let c = &r.into_list()[0];
        assert_eq!(c.container_id, "container_1531404209605_0008_01_000001");
        assert_eq!((c.allocated_mb, c.allocated_vcores), (1536, 1));
        assert_eq!(c.assigned_node_id, "host.domain.com:37814");
        assert_eq!(
            (c.started_time, c.finished_time, c.elapsed_time),
            (1531405909444, 0, 4112)
        );
        assert_eq!(c.container_state, "RUNNING");
        assert_eq!(c.node_http_address, "http://host.domain.com:8042");
        assert_eq!(c.allocated_resources[0].key, "memory-mb");
        assert_eq!(c.allocated_resources[0].value, "1536");
    }

    #[test]
    fn nodes_with_utilisation_and_total_resource() {
        let r: NodesResponse = fixture!("hadoop-3", "nodes.json");
        let n = r.into_list();
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].id, "host.domain.com:54158");
        assert_eq!(n[0].version, "3.0.0-alpha2-SNAPSHOT");
        assert_eq!(n[0].resource_utilization.node_physical_memory_mb, 1027);
        assert_eq!(
            n[0].resource_utilization.node_cpu_usage,
            0.016661113128066063
        );
        let r: NodeResponse = fixture!("hadoop-3", "node.json");
        assert_eq!(r.node.total_resource.to_resource(), Resource::new(2048, 5));
        assert_eq!(r.node.resource_utilization.node_virtual_memory_mb, 968);
        assert_eq!(r.node.last_health_update, 1476916746399);
    }

    #[test]
    fn node_resource_update_bodies() {
        let ours = serde_json::to_value(ResourceOptionInfo {
            resource: ResourceInfo::from(Resource::new(1024, 3)),
            over_commit_timeout: -1,
        })
        .unwrap();
        let documented: serde_json::Value =
            serde_json::from_str(include_str!("testdata/hadoop-3/node-resource-request.json"))
                .unwrap();
        assert_eq!(ours, documented);
        let r: ResourceInfoResponse = fixture!("hadoop-3", "node-resource-response.json");
        assert_eq!(r.resource_info.to_resource(), Resource::new(8192, 5));
    }
}
