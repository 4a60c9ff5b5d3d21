//! The RM and NM REST objects, built from [`RmState`] (and, for a NodeManager process,
//! from its own container table through [`NmNode`] and [`NmContainer`]).

use crate::cluster::{ApplicationId, ContainerId, NodeId};
use crate::config::queues::NodeLabels;
use crate::resources::Resource;
use crate::yarn::dto::*;

use super::queues::{DEFAULT_PARTITION, SchedQueue};
use super::runtime::RuntimeKind;
use super::state::{RmApp, RmContainer, RmContainerState, RmError, RmState, exit};

/// The Hadoop version whose REST API the emulator serves.
pub const HADOOP_VERSION: &str = "3.3.6";
/// How long a NodeManager keeps reporting a finished container
/// (yarn.nodemanager.duration-to-track-stopped-containers).
const TRACK_STOPPED_MS: u64 = 600_000;
const MAX_APPLICATIONS: f64 = 10_000.0;
const MAX_AM_RESOURCE_PERCENT: f64 = 0.1;

/// The `/apps` query filters.
#[derive(Clone, Debug, Default)]
pub struct AppsFilter {
    pub states: Option<Vec<YarnApplicationState>>,
    pub final_status: Option<FinalApplicationStatus>,
    pub user: Option<String>,
    pub queue: Option<String>,
    pub limit: Option<usize>,
    pub started_begin: Option<u64>,
    pub started_end: Option<u64>,
    pub finished_begin: Option<u64>,
    pub finished_end: Option<u64>,
    pub application_types: Vec<String>,
    /// Lower-case; an app matches when it has any of them.
    pub application_tags: Vec<String>,
    pub name: Option<String>,
    pub deselect_resource_requests: bool,
}

impl AppsFilter {
    fn matches(&self, app: &RmApp) -> bool {
        if let Some(states) = &self.states
            && !states.contains(&app.state)
        {
            return false;
        }
        if self.final_status.is_some_and(|f| f != app.final_status) {
            return false;
        }
        if self.user.as_ref().is_some_and(|u| *u != app.user) {
            return false;
        }
        // YARN: the queue filter only returns unfinished apps in that queue.
        if let Some(q) = &self.queue
            && (app.is_final()
                || !(app.queue_name == *q || format!("root.{}", app.queue_name) == *q))
        {
            return false;
        }
        let in_range = |v: u64, lo: Option<u64>, hi: Option<u64>| {
            lo.is_none_or(|lo| v >= lo) && hi.is_none_or(|hi| v <= hi)
        };
        if !in_range(app.submitted_ms, self.started_begin, self.started_end) {
            return false;
        }
        if (self.finished_begin.is_some() || self.finished_end.is_some())
            && !app
                .finished_ms
                .is_some_and(|f| in_range(f, self.finished_begin, self.finished_end))
        {
            return false;
        }
        if !self.application_types.is_empty()
            && !self
                .application_types
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&app.application_type))
        {
            return false;
        }
        if !self.application_tags.is_empty()
            && !app.tags.iter().any(|t| self.application_tags.contains(t))
        {
            return false;
        }
        if self.name.as_ref().is_some_and(|n| *n != app.name) {
            return false;
        }
        true
    }
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        round4(part / whole * 100.0)
    } else {
        0.0
    }
}

/// Percentages as YARN prints its floats: a few significant decimals, no binary noise.
fn round4(v: f64) -> f64 {
    if v.is_finite() {
        (v * 10_000.0).round() / 10_000.0
    } else {
        0.0
    }
}

fn yarn_resource_string(r: Resource) -> String {
    format!("<memory:{}, vCores:{}>", r.memory_mb, r.vcores)
}

impl RmState {
    fn build_version(&self) -> String {
        build_version(self.identity.runtime)
    }

    fn http(&self, node: usize) -> &str {
        self.nodes.get(node).map_or("", |n| n.http_address.as_str())
    }

    pub fn cluster_info(&self) -> ClusterInfoResponse {
        ClusterInfoResponse {
            cluster_info: ClusterInfo {
                id: self.identity.cluster_timestamp as i64,
                started_on: self.identity.cluster_timestamp as i64,
                state: "STARTED".into(),
                ha_state: "ACTIVE".into(),
                rm_state_store_name:
                    "org.apache.hadoop.yarn.server.resourcemanager.recovery.NullRMStateStore".into(),
                resource_manager_version: HADOOP_VERSION.into(),
                resource_manager_build_version: self.build_version(),
                resource_manager_version_built_on: String::new(),
                hadoop_version: HADOOP_VERSION.into(),
                hadoop_build_version: self.build_version(),
                hadoop_version_built_on: String::new(),
                ha_zoo_keeper_connection_state: "ResourceManager HA is not enabled.".into(),
            },
        }
    }

    pub fn cluster_metrics(&self) -> ClusterMetricsResponse {
        let total = self.cluster_total();
        let used = Resource::sum(self.nodes.iter().map(|n| &n.used));
        let count =
            |s: YarnApplicationState| self.apps.values().filter(|a| a.state == s).count() as i64;
        let pending: Resource = self
            .apps
            .values()
            .fold(Resource::ZERO, |acc, a| acc + a.pending_total());
        let pending_containers: usize = self.apps.values().map(|a| a.pending.len()).sum();
        let nodes = self.nodes.len() as i64;
        ClusterMetricsResponse {
            cluster_metrics: ClusterMetrics {
                apps_submitted: self.apps_submitted as i64,
                apps_completed: count(YarnApplicationState::Finished)
                    + count(YarnApplicationState::Failed)
                    + count(YarnApplicationState::Killed),
                apps_pending: count(YarnApplicationState::Accepted),
                apps_running: count(YarnApplicationState::Running),
                apps_failed: count(YarnApplicationState::Failed),
                apps_killed: count(YarnApplicationState::Killed),
                reserved_mb: 0,
                available_mb: total.saturating_sub(used).memory_mb as i64,
                allocated_mb: used.memory_mb as i64,
                pending_mb: pending.memory_mb as i64,
                total_mb: total.memory_mb as i64,
                reserved_virtual_cores: 0,
                available_virtual_cores: i64::from(total.saturating_sub(used).vcores),
                allocated_virtual_cores: i64::from(used.vcores),
                pending_virtual_cores: i64::from(pending.vcores),
                total_virtual_cores: i64::from(total.vcores),
                containers_allocated: self.containers.values().filter(|c| c.is_live()).count()
                    as i64,
                containers_reserved: 0,
                containers_pending: pending_containers as i64,
                total_nodes: nodes,
                active_nodes: nodes,
                ..Default::default()
            },
        }
    }

    // ------------------------------------------------------------ scheduler

    pub fn scheduler_info(&self) -> SchedulerResponse {
        // As the RM: a label the queues are configured for is listed before it exists,
        // with nothing in it.
        let configured = self.tree.queues.iter().flat_map(|q| q.partitions.keys());
        let partitions: Vec<String> = std::iter::once(DEFAULT_PARTITION.to_string())
            .chain(
                self.labels
                    .keys()
                    .chain(configured)
                    .filter(|l| !l.is_empty())
                    .cloned()
                    .collect::<std::collections::BTreeSet<String>>(),
            )
            .collect();
        let usage: Vec<(String, Resource, Vec<Resource>, Vec<Resource>)> = partitions
            .iter()
            .map(|p| {
                let mut pending = vec![Resource::ZERO; self.tree.queues.len()];
                for a in self.apps.values() {
                    if let Some(q) = a.queue {
                        for r in a.pending.iter().filter(|r| r.label == *p) {
                            for i in self.tree.path_to(q) {
                                pending[i] += r.capability;
                            }
                        }
                    }
                }
                (
                    p.clone(),
                    self.partition_total(p),
                    self.queue_usage(p),
                    pending,
                )
            })
            .collect();
        let mut root = self.queue_info(0, &usage);
        root.kind = Some(CAPACITY_SCHEDULER_TYPE.into());
        root.health = Some(self.health());
        SchedulerResponse {
            scheduler: SchedulerWrapper {
                scheduler_info: root,
            },
        }
    }

    fn health(&self) -> SchedulerHealth {
        let a = &self.activity;
        let op = |name: &str, what: &Option<(crate::cluster::NodeId, ContainerId, String)>| {
            let (node, container, queue) = match what {
                Some((n, c, q)) => (n.to_string(), c.to_string(), q.clone()),
                None => ("N/A".into(), "N/A".into(), "N/A".into()),
            };
            SchedulerOperation {
                operation: name.into(),
                node_id: node,
                container_id: container,
                queue,
            }
        };
        let none = None;
        SchedulerHealth {
            lastrun: a.last_run_ms as i64,
            operations_info: vec![
                op("last-allocation", &a.last_allocation),
                op("last-release", &a.last_release),
                op("last-preemption", &none),
                op("last-reservation", &none),
            ],
            last_run_details: vec![
                LastRunDetail {
                    operation: "releases".into(),
                    count: a.last_run_releases as i64,
                    resources: a.last_run_released.into(),
                },
                LastRunDetail {
                    operation: "allocations".into(),
                    count: a.last_run_allocations as i64,
                    resources: a.last_run_allocated.into(),
                },
                LastRunDetail {
                    operation: "reservations".into(),
                    count: 0,
                    resources: ResourceInfo::default(),
                },
            ],
        }
    }

    fn queue_info(
        &self,
        q: usize,
        usage: &[(String, Resource, Vec<Resource>, Vec<Resource>)],
    ) -> QueueInfo {
        let queue: &SchedQueue = &self.tree.queues[q];
        let apps: Vec<&RmApp> = self
            .apps
            .values()
            .filter(|a| !a.is_final() && a.queue.is_some_and(|aq| self.tree.is_under(aq, q)))
            .collect();
        let default = queue.capacity(DEFAULT_PARTITION).copied().unwrap_or(
            super::queues::PartitionCapacity {
                capacity_pct: 0.0,
                maximum_pct: 0.0,
                absolute: 0.0,
                absolute_max: 0.0,
            },
        );
        let (_, dtotal, dused, _) = &usage[0];
        let used = dused[q];
        let guaranteed = dtotal.scale(default.absolute);
        let mut capacities = Vec::new();
        let mut resources = Vec::new();
        for (p, total, used_p, pending_p) in usage {
            let Some(c) = queue.capacity(p) else { continue };
            let g = total.scale(c.absolute);
            let m = total.scale(c.absolute_max);
            let am_used = Resource::sum(
                self.containers
                    .values()
                    .filter(|x| {
                        x.is_live()
                            && x.is_am()
                            && self.nodes[x.node].label == *p
                            && self
                                .apps
                                .get(&x.id.application())
                                .and_then(|a| a.queue)
                                .is_some_and(|aq| self.tree.is_under(aq, q))
                    })
                    .map(|x| &x.resource),
            );
            let am_limit = m.scale(MAX_AM_RESOURCE_PERCENT);
            capacities.push(PartitionQueueCapacities {
                partition_name: p.clone(),
                capacity: round4(c.capacity_pct),
                used_capacity: pct(used_p[q].dominant_share(total), c.absolute),
                max_capacity: round4(c.maximum_pct),
                absolute_capacity: round4(c.absolute * 100.0),
                absolute_used_capacity: round4(used_p[q].dominant_share(total) * 100.0),
                absolute_max_capacity: round4(c.absolute_max * 100.0),
                max_am_limit_percentage: MAX_AM_RESOURCE_PERCENT * 100.0,
                weight: -1.0,
                normalized_weight: 0.0,
                configured_min_resource: ResourceInfo::default(),
                configured_max_resource: ResourceInfo::default(),
                effective_min_resource: g.into(),
                effective_max_resource: m.into(),
            });
            resources.push(PartitionResourceUsage {
                partition_name: p.clone(),
                used: used_p[q].into(),
                reserved: ResourceInfo::default(),
                pending: pending_p[q].into(),
                am_used: am_used.into(),
                am_limit: am_limit.into(),
                user_am_limit: am_limit.into(),
            });
        }
        let pending_containers: usize = apps.iter().map(|a| a.pending.len()).sum();
        let live: Vec<&RmContainer> = self
            .containers
            .values()
            .filter(|c| {
                c.is_live()
                    && self
                        .apps
                        .get(&c.id.application())
                        .and_then(|a| a.queue)
                        .is_some_and(|aq| self.tree.is_under(aq, q))
            })
            .collect();
        // The labels the queue may access, as the RM lists them: `*` or the names.
        let node_labels: Vec<String> = match &queue.accessible {
            NodeLabels::Any => vec!["*".into()],
            NodeLabels::Only(set) => set.iter().cloned().collect(),
        };
        let mut info = QueueInfo {
            kind: None,
            queue_path: queue.path.clone(),
            capacity: round4(default.capacity_pct),
            used_capacity: pct(used.dominant_share(dtotal), default.absolute),
            max_capacity: round4(default.maximum_pct),
            absolute_capacity: round4(default.absolute * 100.0),
            absolute_max_capacity: round4(default.absolute_max * 100.0),
            absolute_used_capacity: round4(used.dominant_share(dtotal) * 100.0),
            weight: -1.0,
            normalized_weight: 0.0,
            num_applications: apps.len() as i64,
            max_parallel_apps: i64::from(i32::MAX),
            queue_name: queue.name().to_string(),
            is_absolute_resource: false,
            state: "RUNNING".into(),
            used_resources: yarn_resource_string(used),
            resources_used: used.into(),
            node_labels,
            allocated_containers: live.len() as i64,
            reserved_containers: 0,
            pending_containers: pending_containers as i64,
            capacities: QueueCapacities {
                queue_capacities_by_partition: capacities,
            },
            resources: ResourceUsages {
                resource_usages_by_partition: resources,
            },
            min_effective_capacity: guaranteed.into(),
            max_effective_capacity: dtotal.scale(default.absolute_max).into(),
            maximum_allocation: self.identity.max_allocation.into(),
            queue_priority: 0,
            ordering_policy_info: if queue.is_leaf() {
                "fifo"
            } else {
                "utilization"
            }
            .into(),
            mode: "percentage".into(),
            queue_type: if queue.is_leaf() { "leaf" } else { "parent" }.into(),
            creation_method: "static".into(),
            ..Default::default()
        };
        if queue.is_leaf() {
            let active = apps
                .iter()
                .filter(|a| a.state == YarnApplicationState::Running)
                .count() as i64;
            let max_apps = (MAX_APPLICATIONS * default.absolute).floor() as i64;
            let mut users: Vec<UserInfo> = Vec::new();
            for a in &apps {
                let used_by_app = Resource::sum(
                    live.iter()
                        .filter(|c| c.id.application() == a.id)
                        .map(|c| &c.resource),
                );
                let running = i64::from(a.state == YarnApplicationState::Running);
                match users.iter_mut().find(|u| u.username == a.user) {
                    Some(u) => {
                        u.resources_used = (u.resources_used.to_resource() + used_by_app).into();
                        u.num_active_applications += running;
                        u.num_pending_applications += 1 - running;
                    }
                    None => users.push(UserInfo {
                        username: a.user.clone(),
                        resources_used: used_by_app.into(),
                        num_active_applications: running,
                        num_pending_applications: 1 - running,
                    }),
                }
            }
            let am_limit = dtotal
                .scale(default.absolute_max)
                .scale(MAX_AM_RESOURCE_PERCENT);
            info.kind = Some(LEAF_QUEUE_TYPE.into());
            info.num_active_applications = Some(active);
            info.num_pending_applications = Some(apps.len() as i64 - active);
            info.num_containers = Some(live.len() as i64);
            info.max_applications = Some(max_apps);
            info.max_applications_per_user = Some(max_apps);
            info.max_active_applications = Some(max_apps);
            info.max_active_applications_per_user = Some(max_apps);
            info.user_limit = Some(100.0);
            info.user_limit_factor = Some(1.0);
            info.users = Some(Users { user: users });
            info.configured_max_a_m_resource_limit = Some(MAX_AM_RESOURCE_PERCENT);
            info.am_resource_limit = Some(am_limit.into());
            info.used_am_resource =
                Some(Resource::sum(live.iter().filter(|c| c.is_am()).map(|c| &c.resource)).into());
            // YARN's own preemption monitor is off on clusters running Preemptor.
            info.preemption_disabled = Some(true);
            info.intra_queue_preemption_disabled = Some(true);
            info.default_priority = Some(0);
            info.default_node_label_expression = queue.default_label.clone();
        } else {
            info.queues = Some(Queues {
                queue: queue
                    .children
                    .iter()
                    .map(|&c| self.queue_info(c, usage))
                    .collect(),
            });
        }
        info
    }

    // ------------------------------------------------------------ applications

    pub fn app_info(&self, app: &RmApp, now: u64, with_requests: bool) -> AppInfo {
        let live = self.app_containers(app.id);
        let allocated = Resource::sum(live.iter().map(|c| &c.resource));
        let (mut mem_s, mut vc_s) = (app.memory_seconds_done, app.vcore_seconds_done);
        for c in &live {
            let secs = now.saturating_sub(c.started_ms.unwrap_or(c.allocated_ms)) as f64 / 1000.0;
            mem_s += c.resource.memory_mb as f64 * secs;
            vc_s += c.resource.vcores as f64 * secs;
        }
        let cluster = self.cluster_total();
        let queue_guarantee = app.queue.and_then(|q| {
            self.tree.queues[q]
                .capacity(DEFAULT_PARTITION)
                .map(|c| self.partition_total(DEFAULT_PARTITION).scale(c.absolute))
        });
        let am = app.am_container.and_then(|id| self.containers.get(&id));
        let am_http = am
            .map(|c| self.http(c.node).to_string())
            .unwrap_or_default();
        let end = app.finished_ms.unwrap_or(now);
        let final_ = app.is_final();
        let mut diagnostics = app.diagnostics.clone();
        if self.identity.runtime == RuntimeKind::Simulated {
            if !diagnostics.is_empty() {
                diagnostics.push(' ');
            }
            diagnostics.push_str("[simulated containers: no Docker, no cgroups]");
        }
        AppInfo {
            id: app.id.to_string(),
            user: app.user.clone(),
            name: app.name.clone(),
            // Hadoop 3.5 prints the leaf's full path (checked on a real RM).
            queue: app.queue.map_or_else(
                || app.queue_name.clone(),
                |q| self.tree.queues[q].path.clone(),
            ),
            state: app.state,
            final_status: app.final_status,
            progress: round4(app.progress() * 100.0),
            tracking_ui: if final_ {
                "History"
            } else {
                "ApplicationMaster"
            }
            .into(),
            tracking_url: format!("http://{}/cluster/app/{}", self.identity.rm_address, app.id),
            diagnostics,
            cluster_id: self.identity.cluster_timestamp as i64,
            application_type: app.application_type.clone(),
            application_tags: app.tags.join(","),
            priority: i64::from(app.priority),
            started_time: app.submitted_ms as i64,
            launch_time: app.launched_ms.unwrap_or(0) as i64,
            finished_time: app.finished_ms.unwrap_or(0) as i64,
            elapsed_time: end.saturating_sub(app.submitted_ms) as i64,
            am_container_logs: am
                .map(|c| format!("http://{am_http}/node/containerlogs/{}/{}", c.id, app.user))
                .unwrap_or_default(),
            am_host_http_address: am_http,
            am_rpc_address: String::new(),
            allocated_mb: if final_ {
                -1
            } else {
                allocated.memory_mb as i64
            },
            allocated_vcores: if final_ {
                -1
            } else {
                i64::from(allocated.vcores)
            },
            reserved_mb: 0,
            reserved_vcores: 0,
            running_containers: if final_ { -1 } else { live.len() as i64 },
            memory_seconds: mem_s as i64,
            vcore_seconds: vc_s as i64,
            queue_usage_percentage: queue_guarantee
                .map_or(0.0, |g| round4(allocated.dominant_share(&g) * 100.0)),
            cluster_usage_percentage: round4(allocated.dominant_share(&cluster) * 100.0),
            preempted_resource_mb: app.preempted_resource.memory_mb as i64,
            preempted_resource_vcores: i64::from(app.preempted_resource.vcores),
            num_non_am_container_preempted: i64::from(app.preempted_containers),
            num_am_container_preempted: 0,
            preempted_memory_seconds: 0,
            preempted_vcore_seconds: 0,
            log_aggregation_status: "DISABLED".into(),
            unmanaged_application: false,
            app_node_label_expression: app.app_label.clone(),
            am_node_label_expression: app.am_label.clone(),
            resource_requests: with_requests.then(|| resource_requests(app)),
        }
    }

    pub fn apps_info(&self, filter: &AppsFilter, now: u64) -> AppsResponse {
        let apps: Vec<AppInfo> = self
            .apps
            .values()
            .filter(|a| filter.matches(a))
            .take(filter.limit.unwrap_or(usize::MAX))
            .map(|a| self.app_info(a, now, !filter.deselect_resource_requests))
            .collect();
        AppsResponse::from_list(apps)
    }

    pub fn attempts_info(&self, app: &RmApp) -> AppAttemptsResponse {
        let am = app.am_container.and_then(|id| self.containers.get(&id));
        let state = match app.state {
            YarnApplicationState::Accepted => "SCHEDULED",
            YarnApplicationState::Running => "RUNNING",
            YarnApplicationState::Finished => "FINISHED",
            YarnApplicationState::Failed => "FAILED",
            YarnApplicationState::Killed => "KILLED",
            _ => "NEW",
        };
        AppAttemptsResponse {
            app_attempts: AppAttempts {
                app_attempt: vec![AppAttemptInfo {
                    id: 1,
                    app_attempt_id: app.attempt_id().to_string(),
                    start_time: app.submitted_ms as i64,
                    finished_time: app.finished_ms.unwrap_or(0) as i64,
                    container_id: am.map(|c| c.id.to_string()).unwrap_or_default(),
                    node_http_address: am
                        .map(|c| self.http(c.node).to_string())
                        .unwrap_or_default(),
                    node_id: am
                        .map(|c| self.nodes[c.node].id.to_string())
                        .unwrap_or_default(),
                    logs_link: am
                        .map(|c| {
                            format!(
                                "http://{}/node/containerlogs/{}/{}",
                                self.http(c.node),
                                c.id,
                                app.user
                            )
                        })
                        .unwrap_or_default(),
                    blacklisted_nodes: String::new(),
                    app_attempt_state: state.into(),
                }],
            },
        }
    }

    pub fn container_info(&self, c: &RmContainer, now: u64) -> ContainerInfo {
        let start = c.started_ms.unwrap_or(c.allocated_ms);
        let end = c.finished_ms.unwrap_or(now);
        let node = &self.nodes[c.node];
        let mut diagnostics = c.diagnostics.clone();
        if self.identity.runtime == RuntimeKind::Simulated && !c.is_am() {
            diagnostics = format!("[simulated container] {diagnostics}");
        }
        ContainerInfo {
            container_id: c.id.to_string(),
            allocated_mb: c.resource.memory_mb as i64,
            allocated_vcores: i64::from(c.resource.vcores),
            assigned_node_id: node.id.to_string(),
            priority: i64::from(c.priority),
            started_time: start as i64,
            finished_time: c.finished_ms.unwrap_or(0) as i64,
            elapsed_time: end.saturating_sub(start) as i64,
            log_url: format!(
                "http://{}/node/containerlogs/{}/{}",
                node.http_address, c.id, c.user
            ),
            container_exit_status: i64::from(c.exit_status),
            container_state: match c.state {
                RmContainerState::Allocated => "NEW",
                RmContainerState::Running => "RUNNING",
                RmContainerState::Complete => "COMPLETE",
            }
            .into(),
            node_http_address: format!("http://{}", node.http_address),
            node_id: node.id.to_string(),
            allocated_resources: vec![
                KeyValue {
                    key: "memory-mb".into(),
                    value: c.resource.memory_mb.to_string(),
                },
                KeyValue {
                    key: "vcores".into(),
                    value: c.resource.vcores.to_string(),
                },
            ],
            diagnostics_info: diagnostics,
        }
    }

    /// Live containers of the application's attempt, as YARN lists them.
    pub fn attempt_containers(
        &self,
        app: &RmApp,
        attempt: &str,
        now: u64,
    ) -> Result<AttemptContainersResponse, RmError> {
        self.check_attempt(app, attempt)?;
        let list: Vec<ContainerInfo> = self
            .app_containers(app.id)
            .into_iter()
            .map(|c| self.container_info(c, now))
            .collect();
        Ok(AttemptContainersResponse::from_list(list))
    }

    pub fn attempt_container(
        &self,
        app: &RmApp,
        attempt: &str,
        container: &str,
        now: u64,
    ) -> Result<ContainerResponse, RmError> {
        self.check_attempt(app, attempt)?;
        let cid: ContainerId = container
            .parse()
            .map_err(|e: crate::cluster::IdError| RmError::BadRequest(e.to_string()))?;
        match self.containers.get(&cid) {
            Some(c) if cid.application() == app.id => Ok(ContainerResponse {
                container: self.container_info(c, now),
            }),
            _ => Err(RmError::NotFound(format!(
                "java.lang.Exception: container with id: {container} not found"
            ))),
        }
    }

    fn check_attempt(&self, app: &RmApp, attempt: &str) -> Result<(), RmError> {
        let ok = attempt == app.attempt_id().to_string() || attempt == "1";
        if ok {
            Ok(())
        } else {
            Err(RmError::NotFound(format!(
                "java.lang.Exception: appattempt with id: {attempt} not found"
            )))
        }
    }

    // ------------------------------------------------------------ nodes

    pub fn node_info(&self, i: usize) -> NodeInfo {
        let n = &self.nodes[i];
        let avail = n.available();
        let health = health_report(self.identity.runtime);
        NodeInfo {
            rack: "/default-rack".into(),
            state: "RUNNING".into(),
            id: n.id.to_string(),
            node_host_name: n.id.host().to_string(),
            node_http_address: n.http_address.clone(),
            last_health_update: n.last_heartbeat_ms as i64,
            version: HADOOP_VERSION.into(),
            health_report: health,
            num_containers: n.live.len() as i64,
            used_memory_mb: n.used.memory_mb as i64,
            avail_memory_mb: avail.memory_mb as i64,
            used_virtual_cores: i64::from(n.used.vcores),
            available_virtual_cores: i64::from(avail.vcores),
            node_labels: if n.label.is_empty() {
                vec![]
            } else {
                vec![n.label.clone()]
            },
            resource_utilization: ResourceUtilization::default(),
            total_resource: n.total.into(),
            used_resource: n.used.into(),
            available_resource: avail.into(),
        }
    }

    pub fn nodes_info(&self, states: Option<&[String]>) -> NodesResponse {
        // Every emulated node is RUNNING.
        let want = states.is_none_or(|s| s.iter().any(|s| s.eq_ignore_ascii_case("RUNNING")));
        let nodes: Vec<NodeInfo> = if want {
            (0..self.nodes.len()).map(|i| self.node_info(i)).collect()
        } else {
            vec![]
        };
        NodesResponse::from_list(nodes)
    }

    pub fn node_labels_info(&self) -> NodeLabelsInfo {
        NodeLabelsInfo {
            node_label_info: self
                .labels
                .iter()
                .map(|(name, &exclusivity)| NodeLabelInfo {
                    name: name.clone(),
                    exclusivity,
                })
                .collect(),
        }
    }

    pub fn labels_of_node(&self, i: usize) -> NodeLabelsInfo {
        let l = &self.nodes[i].label;
        NodeLabelsInfo {
            node_label_info: if l.is_empty() {
                vec![]
            } else {
                vec![NodeLabelInfo {
                    name: l.clone(),
                    exclusivity: self.labels.get(l).copied().unwrap_or(true),
                }]
            },
        }
    }

    pub fn node_to_labels_info(&self) -> NodeToLabelsInfo {
        NodeToLabelsInfo {
            node_to_labels: NodeToLabelsMap {
                entry: self
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| !n.label.is_empty())
                    .map(|(i, n)| NodeToLabelsMapEntry {
                        key: n.id.to_string(),
                        value: self.labels_of_node(i),
                    })
                    .collect(),
            },
        }
    }

    // ------------------------------------------------------------ NodeManager

    /// Node `i` as its NodeManager describes itself.
    fn nm_node(&self, i: usize) -> NmNode<'_> {
        let n = &self.nodes[i];
        NmNode {
            id: &n.id,
            http_address: &n.http_address,
            capacity: n.capacity,
            started_ms: n.started_ms,
            runtime: self.identity.runtime,
        }
    }

    pub fn nm_node_info(&self, i: usize, now: u64) -> NmNodeInfoResponse {
        nm_node_info(&self.nm_node(i), now)
    }

    fn nm_containers_of(&self, i: usize, now: u64) -> Vec<NmContainer<'_>> {
        let mut v: Vec<NmContainer<'_>> = self
            .containers
            .values()
            .filter(|c| c.node == i)
            .map(|c| NmContainer {
                id: c.id,
                state: c.state,
                exit_status: c.exit_status,
                finished_ms: c.finished_ms,
                diagnostics: &c.diagnostics,
                user: &c.user,
                resource: c.resource,
            })
            .filter(|c| c.tracked(now))
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }

    pub fn nm_containers(&self, i: usize, now: u64) -> NmContainersResponse {
        nm_containers(&self.nm_node(i), &self.nm_containers_of(i, now))
    }

    pub fn nm_container(
        &self,
        i: usize,
        id: &str,
        now: u64,
    ) -> Result<NmContainerResponse, RmError> {
        nm_container(&self.nm_node(i), &self.nm_containers_of(i, now), id)
    }

    pub fn nm_apps(&self, i: usize, now: u64) -> NmAppsResponse {
        nm_apps(&self.nm_containers_of(i, now), |app| {
            self.apps.get(&app).is_some_and(|a| !a.is_final())
        })
    }
}

// ---------------------------------------------------------------- NodeManager pages
//
// Shared by the RM's in-process NodeManagers and the `preemptor nodemanager` process,
// which each describe their node and containers with these two views.

/// A NodeManager as its own web service describes it.
pub struct NmNode<'a> {
    pub id: &'a NodeId,
    pub http_address: &'a str,
    pub capacity: Resource,
    pub started_ms: u64,
    pub runtime: RuntimeKind,
}

/// One container as its NodeManager knows it.
pub struct NmContainer<'a> {
    pub id: ContainerId,
    pub state: RmContainerState,
    /// Meaningful once `state` is `Complete`.
    pub exit_status: i32,
    pub finished_ms: Option<u64>,
    pub diagnostics: &'a str,
    pub user: &'a str,
    pub resource: Resource,
}

impl NmContainer<'_> {
    pub fn is_live(&self) -> bool {
        self.state != RmContainerState::Complete
    }

    /// Whether the NodeManager still reports it: live, or finished less than
    /// [`TRACK_STOPPED_MS`] ago.
    pub fn tracked(&self, now: u64) -> bool {
        self.is_live()
            || self
                .finished_ms
                .is_some_and(|f| now.saturating_sub(f) < TRACK_STOPPED_MS)
    }
}

pub fn nm_node_info(n: &NmNode<'_>, now: u64) -> NmNodeInfoResponse {
    let version = format!("{HADOOP_VERSION} (emulated, {})", runtime_note(n.runtime));
    NmNodeInfoResponse {
        node_info: NmNodeInfo {
            id: n.id.to_string(),
            node_host_name: n.id.host().to_string(),
            total_vmem_allocated_containers_mb: (n.capacity.memory_mb as f64 * 2.1) as i64,
            total_pmem_allocated_containers_mb: n.capacity.memory_mb as i64,
            total_v_cores_allocated_containers: i64::from(n.capacity.vcores),
            vmem_check_enabled: false,
            pmem_check_enabled: n.runtime == RuntimeKind::Docker,
            last_node_update_time: now as i64,
            node_healthy: true,
            health_report: health_report(n.runtime),
            node_manager_version: version.clone(),
            node_manager_build_version: build_version(n.runtime),
            node_manager_version_built_on: String::new(),
            hadoop_version: HADOOP_VERSION.into(),
            hadoop_build_version: build_version(n.runtime),
            hadoop_version_built_on: String::new(),
            nm_startup_time: n.started_ms as i64,
        },
    }
}

fn nm_container_info(n: &NmNode<'_>, c: &NmContainer<'_>) -> NmContainerInfo {
    let diagnostics = if c.id.is_am() {
        "ApplicationMaster runs inside the emulator; this container holds its resources".into()
    } else if n.runtime == RuntimeKind::Simulated {
        format!(
            "[simulated container: no process, no cgroup] {}",
            c.diagnostics
        )
    } else {
        c.diagnostics.to_string()
    };
    NmContainerInfo {
        id: c.id.to_string(),
        state: match c.state {
            RmContainerState::Allocated => "NEW",
            RmContainerState::Running => "RUNNING",
            RmContainerState::Complete => "DONE",
        }
        .into(),
        exit_code: if c.is_live() {
            i64::from(exit::INVALID)
        } else {
            i64::from(c.exit_status)
        },
        diagnostics,
        user: c.user.to_string(),
        total_memory_needed_mb: c.resource.memory_mb as i64,
        total_v_cores_needed: i64::from(c.resource.vcores),
        container_logs_link: format!(
            "http://{}/node/containerlogs/{}/{}",
            n.http_address, c.id, c.user
        ),
        node_id: n.id.to_string(),
        container_log_files: vec![],
        execution_type: "GUARANTEED".into(),
    }
}

/// `/ws/v1/node/containers` of the (already filtered and sorted) containers.
pub fn nm_containers(n: &NmNode<'_>, containers: &[NmContainer<'_>]) -> NmContainersResponse {
    NmContainersResponse::from_list(containers.iter().map(|c| nm_container_info(n, c)).collect())
}

pub fn nm_container(
    n: &NmNode<'_>,
    containers: &[NmContainer<'_>],
    id: &str,
) -> Result<NmContainerResponse, RmError> {
    containers
        .iter()
        .find(|c| c.id.to_string() == id)
        .map(|c| NmContainerResponse {
            container: nm_container_info(n, c),
        })
        .ok_or_else(|| {
            RmError::NotFound(format!("container with id, {id}, not found on this node"))
        })
}

/// `/ws/v1/node/apps`: the applications of `containers`, RUNNING while `running` says so.
pub fn nm_apps(
    containers: &[NmContainer<'_>],
    running: impl Fn(ApplicationId) -> bool,
) -> NmAppsResponse {
    let mut apps: Vec<NmAppInfo> = Vec::new();
    for c in containers {
        let app_id = c.id.application().to_string();
        match apps.iter_mut().find(|a| a.id == app_id) {
            Some(a) => a.containerids.push(c.id.to_string()),
            None => apps.push(NmAppInfo {
                id: app_id,
                state: if running(c.id.application()) {
                    "RUNNING"
                } else {
                    "FINISHED"
                }
                .into(),
                user: c.user.to_string(),
                containerids: vec![c.id.to_string()],
            }),
        }
    }
    NmAppsResponse::from_list(apps)
}

fn runtime_note(runtime: RuntimeKind) -> &'static str {
    match runtime {
        RuntimeKind::Docker => "Docker containers",
        RuntimeKind::Simulated => "SIMULATED containers (in-process timers: no Docker, no cgroups)",
    }
}

fn build_version(runtime: RuntimeKind) -> String {
    format!(
        "{HADOOP_VERSION} emulated by preemptor {} with {}",
        env!("CARGO_PKG_VERSION"),
        runtime_note(runtime)
    )
}

fn health_report(runtime: RuntimeKind) -> String {
    match runtime {
        RuntimeKind::Docker => String::new(),
        RuntimeKind::Simulated => {
            "simulated NodeManager: containers are in-process timers (no Docker, no cgroups)".into()
        }
    }
}

fn resource_requests(app: &RmApp) -> Vec<ResourceRequestInfo> {
    // One ResourceRequest per (priority, capability, label), as an AM asks.
    let mut out: Vec<ResourceRequestInfo> = Vec::new();
    for r in &app.pending {
        let cap: ResourceInfo = r.capability.into();
        match out.iter_mut().find(|o| {
            o.priority == i64::from(r.priority)
                && o.capability == cap
                && o.node_label_expression == r.label
        }) {
            Some(o) => o.num_containers += 1,
            None => out.push(ResourceRequestInfo {
                priority: i64::from(r.priority),
                allocation_request_id: -1,
                resource_name: "*".into(),
                capability: cap,
                num_containers: 1,
                relax_locality: true,
                node_label_expression: r.label.clone(),
                execution_type_request: ExecutionTypeRequest {
                    execution_type: "GUARANTEED".into(),
                    enforce_execution_type: false,
                },
                enforce_execution_type: false,
            }),
        }
    }
    out
}
