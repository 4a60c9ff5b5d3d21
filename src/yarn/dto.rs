//! ResourceManager and NodeManager REST objects, with Hadoop 3.x field names.
//!
//! Sources: Hadoop's ResourceManagerRest.md and NodeManagerRest.md (3.x), and the RM's
//! webapp DAO classes for the fields the documents leave out (partition capacities,
//! resource requests, node labels). Every struct is `#[serde(default)]` and numbers go
//! through [`super::lenient`], so a client reading an older or differently configured RM
//! gets defaults instead of errors. The emulator serializes these same types, so the two
//! sides cannot drift apart.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::lenient;
use crate::resources::Resource;

/// `{"memory":..,"vCores":..}` (ResourceInfo).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceInfo {
    #[serde(deserialize_with = "lenient::i64")]
    pub memory: i64,
    #[serde(
        rename = "vCores",
        alias = "virtualCores",
        alias = "vcores",
        deserialize_with = "lenient::i64"
    )]
    pub vcores: i64,
}

impl From<Resource> for ResourceInfo {
    fn from(r: Resource) -> Self {
        ResourceInfo {
            memory: i64::try_from(r.memory_mb).unwrap_or(i64::MAX),
            vcores: i64::from(r.vcores),
        }
    }
}

impl ResourceInfo {
    /// Negative components (YARN prints -1 for "unknown") become zero.
    pub fn to_resource(&self) -> Resource {
        Resource::new(
            u64::try_from(self.memory).unwrap_or(0),
            u32::try_from(self.vcores.max(0)).unwrap_or(u32::MAX),
        )
    }
}

/// YarnApplicationState.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum YarnApplicationState {
    #[default]
    New,
    NewSaving,
    Submitted,
    Accepted,
    Running,
    Finished,
    Failed,
    Killed,
}

impl YarnApplicationState {
    pub const ALL: [YarnApplicationState; 8] = [
        Self::New,
        Self::NewSaving,
        Self::Submitted,
        Self::Accepted,
        Self::Running,
        Self::Finished,
        Self::Failed,
        Self::Killed,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Self::New => "NEW",
            Self::NewSaving => "NEW_SAVING",
            Self::Submitted => "SUBMITTED",
            Self::Accepted => "ACCEPTED",
            Self::Running => "RUNNING",
            Self::Finished => "FINISHED",
            Self::Failed => "FAILED",
            Self::Killed => "KILLED",
        }
    }

    pub fn is_final(&self) -> bool {
        matches!(self, Self::Finished | Self::Failed | Self::Killed)
    }
}

impl FromStr for YarnApplicationState {
    type Err = String;
    /// Case-insensitive, as the RM's `states` filter is.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_uppercase();
        Self::ALL
            .into_iter()
            .find(|st| st.name() == t)
            .ok_or_else(|| {
                format!(
                    "Invalid application-state {s} specified. It should be one of NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED, KILLED"
                )
            })
    }
}

impl fmt::Display for YarnApplicationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// FinalApplicationStatus.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FinalApplicationStatus {
    #[default]
    Undefined,
    Succeeded,
    Failed,
    Killed,
    Ended,
}

// ---------------------------------------------------------------- cluster info / metrics

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterInfoResponse {
    #[serde(rename = "clusterInfo")]
    pub cluster_info: ClusterInfo,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterInfo {
    #[serde(deserialize_with = "lenient::i64")]
    pub id: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub started_on: i64,
    pub state: String,
    pub ha_state: String,
    pub rm_state_store_name: String,
    pub resource_manager_version: String,
    pub resource_manager_build_version: String,
    pub resource_manager_version_built_on: String,
    pub hadoop_version: String,
    pub hadoop_build_version: String,
    pub hadoop_version_built_on: String,
    pub ha_zoo_keeper_connection_state: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterMetricsResponse {
    #[serde(rename = "clusterMetrics")]
    pub cluster_metrics: ClusterMetrics,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterMetrics {
    #[serde(deserialize_with = "lenient::i64")]
    pub apps_submitted: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub apps_completed: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub apps_pending: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub apps_running: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub apps_failed: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub apps_killed: i64,
    #[serde(rename = "reservedMB", deserialize_with = "lenient::i64")]
    pub reserved_mb: i64,
    #[serde(rename = "availableMB", deserialize_with = "lenient::i64")]
    pub available_mb: i64,
    #[serde(rename = "allocatedMB", deserialize_with = "lenient::i64")]
    pub allocated_mb: i64,
    #[serde(rename = "pendingMB", deserialize_with = "lenient::i64")]
    pub pending_mb: i64,
    #[serde(rename = "totalMB", deserialize_with = "lenient::i64")]
    pub total_mb: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub reserved_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub available_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub allocated_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub pending_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub total_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub containers_allocated: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub containers_reserved: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub containers_pending: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub total_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub active_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub lost_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub unhealthy_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub decommissioning_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub decommissioned_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub rebooted_nodes: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub shutdown_nodes: i64,
}

// ---------------------------------------------------------------- scheduler

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerResponse {
    pub scheduler: SchedulerWrapper,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerWrapper {
    #[serde(rename = "schedulerInfo")]
    pub scheduler_info: QueueInfo,
}

/// `{"queue":[..]}`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Queues {
    #[serde(deserialize_with = "lenient::vec")]
    pub queue: Vec<QueueInfo>,
}

/// One queue of the capacity scheduler, or its root (`schedulerInfo`, type
/// `capacityScheduler`). Parent and leaf queues share the object; leaf-only fields are
/// `None` on parents, so they are absent from the output as in YARN.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueInfo {
    /// `capacityScheduler` on the root, `capacitySchedulerLeafQueueInfo` on leaves, absent
    /// on parents.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub queue_path: String,
    #[serde(deserialize_with = "lenient::f64")]
    pub capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub used_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub max_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub absolute_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub absolute_max_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub absolute_used_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub weight: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub normalized_weight: f64,
    #[serde(deserialize_with = "lenient::i64")]
    pub num_applications: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub max_parallel_apps: i64,
    pub queue_name: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub is_absolute_resource: bool,
    pub state: String,
    /// `<memory:.., vCores:..>` as YARN prints it.
    pub used_resources: String,
    pub resources_used: ResourceInfo,
    #[serde(deserialize_with = "lenient::vec")]
    pub node_labels: Vec<String>,
    #[serde(deserialize_with = "lenient::i64")]
    pub allocated_containers: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub reserved_containers: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub pending_containers: i64,
    pub capacities: QueueCapacities,
    pub resources: ResourceUsages,
    pub min_effective_capacity: ResourceInfo,
    pub max_effective_capacity: ResourceInfo,
    pub maximum_allocation: ResourceInfo,
    #[serde(deserialize_with = "lenient::i64")]
    pub queue_priority: i64,
    pub ordering_policy_info: String,
    pub mode: String,
    pub queue_type: String,
    pub creation_method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<Queues>,
    /// Root only (Hadoop 3.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<SchedulerHealth>,
    // Leaf only.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub num_active_applications: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub num_pending_applications: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub num_containers: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub max_applications: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub max_applications_per_user: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub max_active_applications: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub max_active_applications_per_user: Option<i64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_f64"
    )]
    pub user_limit: Option<f64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_f64"
    )]
    pub user_limit_factor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<Users>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_f64"
    )]
    pub configured_max_a_m_resource_limit: Option<f64>,
    #[serde(rename = "AMResourceLimit", skip_serializing_if = "Option::is_none")]
    pub am_resource_limit: Option<ResourceInfo>,
    #[serde(rename = "usedAMResource", skip_serializing_if = "Option::is_none")]
    pub used_am_resource: Option<ResourceInfo>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_bool"
    )]
    pub preemption_disabled: Option<bool>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_bool"
    )]
    pub intra_queue_preemption_disabled: Option<bool>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_i64"
    )]
    pub default_priority: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_node_label_expression: Option<String>,
}

impl QueueInfo {
    /// A leaf by its `type`, or, where the RM prints no type (some 2.x builds, other
    /// serialisers), by having no child queues. The scheduler root is never a leaf.
    pub fn is_leaf(&self) -> bool {
        match self.kind.as_deref() {
            Some(LEAF_QUEUE_TYPE) => true,
            Some(CAPACITY_SCHEDULER_TYPE) => false,
            _ => self.children().is_empty(),
        }
    }

    pub fn children(&self) -> &[QueueInfo] {
        self.queues.as_ref().map_or(&[], |q| &q.queue)
    }
}

pub const LEAF_QUEUE_TYPE: &str = "capacitySchedulerLeafQueueInfo";
pub const CAPACITY_SCHEDULER_TYPE: &str = "capacityScheduler";

/// CapacitySchedulerHealthInfo: what the last scheduling run did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SchedulerHealth {
    #[serde(deserialize_with = "lenient::i64")]
    pub lastrun: i64,
    #[serde(deserialize_with = "lenient::vec")]
    pub operations_info: Vec<SchedulerOperation>,
    #[serde(deserialize_with = "lenient::vec")]
    pub last_run_details: Vec<LastRunDetail>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SchedulerOperation {
    pub operation: String,
    pub node_id: String,
    pub container_id: String,
    pub queue: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LastRunDetail {
    pub operation: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub count: i64,
    pub resources: ResourceInfo,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Users {
    #[serde(
        deserialize_with = "lenient::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub user: Vec<UserInfo>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UserInfo {
    pub username: String,
    pub resources_used: ResourceInfo,
    #[serde(deserialize_with = "lenient::i64")]
    pub num_active_applications: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub num_pending_applications: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueCapacities {
    #[serde(deserialize_with = "lenient::vec")]
    pub queue_capacities_by_partition: Vec<PartitionQueueCapacities>,
}

/// PartitionQueueCapacitiesInfo: percentages, relative to the parent (`capacity`) or to
/// the partition's whole resource (`absolute*`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PartitionQueueCapacities {
    pub partition_name: String,
    #[serde(deserialize_with = "lenient::f64")]
    pub capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub used_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub max_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub absolute_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub absolute_used_capacity: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub absolute_max_capacity: f64,
    #[serde(rename = "maxAMLimitPercentage", deserialize_with = "lenient::f64")]
    pub max_am_limit_percentage: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub weight: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub normalized_weight: f64,
    pub configured_min_resource: ResourceInfo,
    pub configured_max_resource: ResourceInfo,
    pub effective_min_resource: ResourceInfo,
    pub effective_max_resource: ResourceInfo,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceUsages {
    #[serde(deserialize_with = "lenient::vec")]
    pub resource_usages_by_partition: Vec<PartitionResourceUsage>,
}

/// PartitionResourceUsageInfo.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PartitionResourceUsage {
    pub partition_name: String,
    pub used: ResourceInfo,
    pub reserved: ResourceInfo,
    pub pending: ResourceInfo,
    pub am_used: ResourceInfo,
    pub am_limit: ResourceInfo,
    pub user_am_limit: ResourceInfo,
}

// ---------------------------------------------------------------- applications

/// A YARN collection: `{"<outer>":{"<inner>":[..]}}`, or `{"<outer>":null}` when empty
/// (Jersey prints an empty list as null). `into_list` gives the elements either way.
macro_rules! collection {
    ($(#[$doc:meta])* $response:ident { $outer:ident: $wrapper:ident { $inner:ident: $item:ty } }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $response {
            pub $outer: Option<$wrapper>,
        }

        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $wrapper {
            #[serde(deserialize_with = "lenient::vec")]
            pub $inner: Vec<$item>,
        }

        impl $response {
            /// Wraps a list, printing an empty one as null like YARN.
            pub fn from_list(list: Vec<$item>) -> Self {
                $response {
                    $outer: (!list.is_empty()).then_some($wrapper { $inner: list }),
                }
            }

            pub fn into_list(self) -> Vec<$item> {
                self.$outer.map(|w| w.$inner).unwrap_or_default()
            }
        }
    };
}

collection!(
    /// `/ws/v1/cluster/apps`.
    AppsResponse { apps: Apps { app: AppInfo } }
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppResponse {
    pub app: AppInfo,
}

/// AppInfo: the *app* object of ResourceManagerRest.md plus Hadoop 3's additions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppInfo {
    pub id: String,
    pub user: String,
    pub name: String,
    pub queue: String,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    /// Percent, 0 to 100.
    #[serde(deserialize_with = "lenient::f64")]
    pub progress: f64,
    #[serde(rename = "trackingUI")]
    pub tracking_ui: String,
    pub tracking_url: String,
    pub diagnostics: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub cluster_id: i64,
    pub application_type: String,
    /// Comma-separated.
    pub application_tags: String,
    /// `applicationPriority` in Hadoop 2.8 and 2.9.
    #[serde(alias = "applicationPriority", deserialize_with = "lenient::i64")]
    pub priority: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub started_time: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub launch_time: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub finished_time: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub elapsed_time: i64,
    pub am_container_logs: String,
    pub am_host_http_address: String,
    #[serde(rename = "amRPCAddress")]
    pub am_rpc_address: String,
    #[serde(rename = "allocatedMB", deserialize_with = "lenient::i64")]
    pub allocated_mb: i64,
    #[serde(rename = "allocatedVCores", deserialize_with = "lenient::i64")]
    pub allocated_vcores: i64,
    #[serde(rename = "reservedMB", deserialize_with = "lenient::i64")]
    pub reserved_mb: i64,
    #[serde(rename = "reservedVCores", deserialize_with = "lenient::i64")]
    pub reserved_vcores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub running_containers: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub memory_seconds: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub vcore_seconds: i64,
    #[serde(deserialize_with = "lenient::f64")]
    pub queue_usage_percentage: f64,
    #[serde(deserialize_with = "lenient::f64")]
    pub cluster_usage_percentage: f64,
    #[serde(rename = "preemptedResourceMB", deserialize_with = "lenient::i64")]
    pub preempted_resource_mb: i64,
    #[serde(rename = "preemptedResourceVCores", deserialize_with = "lenient::i64")]
    pub preempted_resource_vcores: i64,
    #[serde(
        rename = "numNonAMContainerPreempted",
        deserialize_with = "lenient::i64"
    )]
    pub num_non_am_container_preempted: i64,
    #[serde(rename = "numAMContainerPreempted", deserialize_with = "lenient::i64")]
    pub num_am_container_preempted: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub preempted_memory_seconds: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub preempted_vcore_seconds: i64,
    pub log_aggregation_status: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub unmanaged_application: bool,
    pub app_node_label_expression: String,
    pub am_node_label_expression: String,
    /// Outstanding requests; absent with `deSelects=resourceRequests`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_opt_vec"
    )]
    pub resource_requests: Option<Vec<ResourceRequestInfo>>,
}

fn de_opt_vec<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<ResourceRequestInfo>>, D::Error> {
    lenient::vec(d).map(Some)
}

impl AppInfo {
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.application_tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }
}

/// ResourceRequestInfo. Hadoop 3 prints `priority` as a number; 2.x as
/// `{"priority":n}`. Both are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceRequestInfo {
    #[serde(deserialize_with = "de_priority")]
    pub priority: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub allocation_request_id: i64,
    pub resource_name: String,
    pub capability: ResourceInfo,
    #[serde(deserialize_with = "lenient::i64")]
    pub num_containers: i64,
    #[serde(deserialize_with = "lenient::bool")]
    pub relax_locality: bool,
    pub node_label_expression: String,
    pub execution_type_request: ExecutionTypeRequest,
    #[serde(deserialize_with = "lenient::bool")]
    pub enforce_execution_type: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ExecutionTypeRequest {
    pub execution_type: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub enforce_execution_type: bool,
}

fn de_priority<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum P {
        Wrapped {
            #[serde(deserialize_with = "lenient::i64")]
            priority: i64,
        },
        Plain(#[serde(deserialize_with = "lenient::i64")] i64),
    }
    Ok(match Option::<P>::deserialize(d)? {
        None => 0,
        Some(P::Wrapped { priority }) | Some(P::Plain(priority)) => priority,
    })
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppAttemptsResponse {
    #[serde(rename = "appAttempts")]
    pub app_attempts: AppAttempts,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppAttempts {
    #[serde(rename = "appAttempt", deserialize_with = "lenient::vec")]
    pub app_attempt: Vec<AppAttemptInfo>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppAttemptInfo {
    #[serde(deserialize_with = "lenient::i64")]
    pub id: i64,
    pub app_attempt_id: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub start_time: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub finished_time: i64,
    pub container_id: String,
    pub node_http_address: String,
    pub node_id: String,
    pub logs_link: String,
    pub blacklisted_nodes: String,
    pub app_attempt_state: String,
}

/// `/apps/{id}/appattempts/{attempt}/containers`. Hadoop 3.5 prints its JSON without the
/// root (`{"container":[..]}`), its XML and the documentation with it
/// (`{"containers":{"container":[..]}}`): both are read, and written with the root.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttemptContainersResponse {
    pub containers: Option<AttemptContainers>,
    /// The rootless form's list.
    #[serde(
        deserialize_with = "lenient::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub container: Vec<ContainerInfo>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttemptContainers {
    #[serde(deserialize_with = "lenient::vec")]
    pub container: Vec<ContainerInfo>,
}

impl AttemptContainersResponse {
    /// Wraps a list, printing an empty one as null like YARN.
    pub fn from_list(list: Vec<ContainerInfo>) -> Self {
        AttemptContainersResponse {
            containers: (!list.is_empty()).then_some(AttemptContainers { container: list }),
            container: Vec::new(),
        }
    }

    pub fn into_list(self) -> Vec<ContainerInfo> {
        let mut list = self.containers.map(|w| w.container).unwrap_or_default();
        list.extend(self.container);
        list
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerResponse {
    pub container: ContainerInfo,
}

/// ContainerInfo of the RM (the attempt's containers). The documentation's example
/// prints every number as a string; both forms are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerInfo {
    pub container_id: String,
    #[serde(rename = "allocatedMB", deserialize_with = "lenient::i64")]
    pub allocated_mb: i64,
    #[serde(rename = "allocatedVCores", deserialize_with = "lenient::i64")]
    pub allocated_vcores: i64,
    pub assigned_node_id: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub priority: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub started_time: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub finished_time: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub elapsed_time: i64,
    pub log_url: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub container_exit_status: i64,
    /// NEW, RUNNING or COMPLETE.
    pub container_state: String,
    pub node_http_address: String,
    pub node_id: String,
    #[serde(deserialize_with = "de_key_values")]
    pub allocated_resources: Vec<KeyValue>,
    pub diagnostics_info: String,
}

/// A Java `Map` as a list of `{"key","value"}`: JAXB's `{"entry":[..]}` (XML's
/// `<entry><key>..</key><value>..</value></entry>`), Jersey 1's bare list, or a plain
/// JSON object (`{"memory-mb":1536}`) as Jackson writes one.
fn de_key_values<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<KeyValue>, D::Error> {
    use serde::de::Error;
    let mut v = Option::<serde_json::Value>::deserialize(d)?.unwrap_or_default();
    if let serde_json::Value::Object(m) = &mut v
        && m.len() == 1
        && let Some(entries) = m.remove("entry")
    {
        v = entries;
    }
    match v {
        serde_json::Value::Object(m) if !m.contains_key("key") => Ok(m
            .into_iter()
            .map(|(key, value)| KeyValue {
                key,
                value: match value {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                },
            })
            .collect()),
        other => lenient::vec(other).map_err(D::Error::custom),
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyValue {
    #[serde(deserialize_with = "lenient::string")]
    pub key: String,
    #[serde(deserialize_with = "lenient::string")]
    pub value: String,
}

/// The `{command}` of `POST /containers/{containerid}/signal/{command}`
/// (SignalContainerCommand).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SignalContainerCommand {
    /// SIGQUIT: the JVM prints its threads.
    OutputThreadDump,
    /// SIGTERM.
    GracefulShutdown,
    /// SIGKILL.
    ForcefulShutdown,
}

impl SignalContainerCommand {
    pub fn name(&self) -> &'static str {
        match self {
            Self::OutputThreadDump => "OUTPUT_THREAD_DUMP",
            Self::GracefulShutdown => "GRACEFUL_SHUTDOWN",
            Self::ForcefulShutdown => "FORCEFUL_SHUTDOWN",
        }
    }
}

impl fmt::Display for SignalContainerCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppStateInfo {
    pub state: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppQueueInfo {
    pub queue: String,
}

/// Response of `POST /apps/new-application`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct NewApplication {
    pub application_id: String,
    #[serde(alias = "maximum-resource-capabilities")]
    pub maximum_resource_capability: ResourceInfo,
}

/// Body of `POST /apps` (ApplicationSubmissionContextInfo).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct ApplicationSubmissionContext {
    pub application_id: String,
    pub application_name: String,
    pub queue: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub priority: i64,
    pub am_container_spec: ContainerLaunchContext,
    #[serde(rename = "unmanaged-AM", deserialize_with = "lenient::bool")]
    pub unmanaged_am: bool,
    #[serde(deserialize_with = "lenient::i64")]
    pub max_app_attempts: i64,
    pub resource: ResourceInfo,
    pub application_type: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub keep_containers_across_application_attempts: bool,
    pub application_tags: Tags,
    #[serde(deserialize_with = "lenient::i64")]
    pub attempt_failures_validity_interval: i64,
    pub reservation_id: String,
    pub app_node_label_expression: LabelExpression,
    pub am_container_node_label_expression: LabelExpression,
}

/// A submission's node label expression. The RM's REST DTO starts these fields as
/// `""` (the default partition), so only an explicit JSON `null` lets the queue's
/// `default-node-label-expression` apply (checked on Hadoop 3.5.0); an RPC
/// submission leaves them unset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LabelExpression(pub Option<String>);

impl Default for LabelExpression {
    fn default() -> LabelExpression {
        LabelExpression(Some(String::new()))
    }
}

impl LabelExpression {
    /// `null`: the queue's default applies.
    pub const QUEUE_DEFAULT: LabelExpression = LabelExpression(None);

    pub fn named(label: &str) -> LabelExpression {
        LabelExpression(Some(label.to_string()))
    }
}

/// `{"tag":[..]}`
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tags {
    #[serde(deserialize_with = "lenient::vec")]
    pub tag: Vec<String>,
}

/// ContainerLaunchContextInfo: only what the emulator reads is typed; the rest
/// (local-resources, credentials, service-data, acls) is accepted and ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct ContainerLaunchContext {
    pub environment: Entries,
    pub commands: Commands,
}

/// A Java map as JAXB prints it: `{"entry":[{"key":..,"value":..}]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Entries {
    #[serde(deserialize_with = "lenient::vec")]
    pub entry: Vec<KeyValue>,
}

impl Entries {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entry
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.as_str())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Commands {
    #[serde(deserialize_with = "lenient::vec")]
    pub command: Vec<String>,
}

// ---------------------------------------------------------------- nodes

collection!(
    /// `/ws/v1/cluster/nodes`.
    NodesResponse { nodes: Nodes { node: NodeInfo } }
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeResponse {
    pub node: NodeInfo,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeInfo {
    pub rack: String,
    pub state: String,
    pub id: String,
    pub node_host_name: String,
    #[serde(rename = "nodeHTTPAddress")]
    pub node_http_address: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub last_health_update: i64,
    pub version: String,
    pub health_report: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub num_containers: i64,
    #[serde(rename = "usedMemoryMB", deserialize_with = "lenient::i64")]
    pub used_memory_mb: i64,
    #[serde(rename = "availMemoryMB", deserialize_with = "lenient::i64")]
    pub avail_memory_mb: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub used_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub available_virtual_cores: i64,
    #[serde(deserialize_with = "lenient::vec")]
    pub node_labels: Vec<String>,
    pub resource_utilization: ResourceUtilization,
    pub total_resource: ResourceInfo,
    pub used_resource: ResourceInfo,
    pub available_resource: ResourceInfo,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceUtilization {
    #[serde(rename = "nodePhysicalMemoryMB", deserialize_with = "lenient::i64")]
    pub node_physical_memory_mb: i64,
    #[serde(rename = "nodeVirtualMemoryMB", deserialize_with = "lenient::i64")]
    pub node_virtual_memory_mb: i64,
    #[serde(rename = "nodeCPUUsage", deserialize_with = "lenient::f64")]
    pub node_cpu_usage: f64,
    #[serde(
        rename = "aggregatedContainersPhysicalMemoryMB",
        deserialize_with = "lenient::i64"
    )]
    pub aggregated_containers_physical_memory_mb: i64,
    #[serde(
        rename = "aggregatedContainersVirtualMemoryMB",
        deserialize_with = "lenient::i64"
    )]
    pub aggregated_containers_virtual_memory_mb: i64,
    #[serde(rename = "containersCPUUsage", deserialize_with = "lenient::f64")]
    pub containers_cpu_usage: f64,
}

/// Body of `POST /nodes/{id}/resource` (ResourceOptionInfo).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceOptionInfo {
    pub resource: ResourceInfo,
    #[serde(deserialize_with = "lenient::i64")]
    pub over_commit_timeout: i64,
}

/// Response of `POST /nodes/{id}/resource`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceInfoResponse {
    #[serde(rename = "resourceInfo")]
    pub resource_info: ResourceInfo,
}

// ---------------------------------------------------------------- node labels

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeLabelsInfo {
    #[serde(rename = "nodeLabelInfo", deserialize_with = "lenient::vec")]
    pub node_label_info: Vec<NodeLabelInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeLabelInfo {
    pub name: String,
    #[serde(deserialize_with = "lenient::bool")]
    pub exclusivity: bool,
}

impl Default for NodeLabelInfo {
    /// YARN's labels are exclusive unless said otherwise.
    fn default() -> Self {
        NodeLabelInfo {
            name: String::new(),
            exclusivity: true,
        }
    }
}

/// Response of `GET /get-node-to-labels`: `{"nodeToLabels":{"entry":[{"key":node,
/// "value":{"nodeLabelInfo":[..]}}]}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeToLabelsInfo {
    #[serde(rename = "nodeToLabels")]
    pub node_to_labels: NodeToLabelsMap,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeToLabelsMap {
    #[serde(deserialize_with = "lenient::vec")]
    pub entry: Vec<NodeToLabelsMapEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeToLabelsMapEntry {
    pub key: String,
    pub value: NodeLabelsInfo,
}

/// Body of `POST /replace-node-to-labels` (NodeToLabelsEntryList).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeToLabelsEntryList {
    #[serde(rename = "nodeToLabels", deserialize_with = "lenient::vec")]
    pub node_to_labels: Vec<NodeToLabelsEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToLabelsEntry {
    pub node_id: String,
    #[serde(deserialize_with = "lenient::vec")]
    pub labels: Vec<String>,
}

// ---------------------------------------------------------------- errors

/// `{"RemoteException":{"exception":..,"message":..,"javaClassName":..}}`
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteExceptionResponse {
    #[serde(rename = "RemoteException")]
    pub remote_exception: RemoteException,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RemoteException {
    pub exception: String,
    pub message: String,
    pub java_class_name: String,
}

// ---------------------------------------------------------------- NodeManager

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NmNodeInfoResponse {
    #[serde(rename = "nodeInfo")]
    pub node_info: NmNodeInfo,
}

/// The NodeManager's *nodeInfo* object (NodeManagerRest.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NmNodeInfo {
    pub id: String,
    pub node_host_name: String,
    #[serde(
        rename = "totalVmemAllocatedContainersMB",
        deserialize_with = "lenient::i64"
    )]
    pub total_vmem_allocated_containers_mb: i64,
    #[serde(
        rename = "totalPmemAllocatedContainersMB",
        deserialize_with = "lenient::i64"
    )]
    pub total_pmem_allocated_containers_mb: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub total_v_cores_allocated_containers: i64,
    #[serde(deserialize_with = "lenient::bool")]
    pub vmem_check_enabled: bool,
    #[serde(deserialize_with = "lenient::bool")]
    pub pmem_check_enabled: bool,
    #[serde(deserialize_with = "lenient::i64")]
    pub last_node_update_time: i64,
    #[serde(deserialize_with = "lenient::bool")]
    pub node_healthy: bool,
    pub health_report: String,
    pub node_manager_version: String,
    pub node_manager_build_version: String,
    pub node_manager_version_built_on: String,
    pub hadoop_version: String,
    pub hadoop_build_version: String,
    pub hadoop_version_built_on: String,
    #[serde(deserialize_with = "lenient::i64")]
    pub nm_startup_time: i64,
}

collection!(
    /// A NodeManager's `/ws/v1/node/apps`.
    NmAppsResponse { apps: NmApps { app: NmAppInfo } }
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NmAppInfo {
    pub id: String,
    pub state: String,
    pub user: String,
    #[serde(deserialize_with = "lenient::vec")]
    pub containerids: Vec<String>,
}

collection!(
    /// A NodeManager's `/ws/v1/node/containers`.
    NmContainersResponse { containers: NmContainers { container: NmContainerInfo } }
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NmContainerResponse {
    pub container: NmContainerInfo,
}

/// The NodeManager's *container* object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NmContainerInfo {
    pub id: String,
    /// NEW, LOCALIZING, RUNNING, ..., DONE (NodeManager ContainerState).
    pub state: String,
    /// -1000 while the container runs.
    #[serde(deserialize_with = "lenient::i64")]
    pub exit_code: i64,
    pub diagnostics: String,
    pub user: String,
    #[serde(rename = "totalMemoryNeededMB", deserialize_with = "lenient::i64")]
    pub total_memory_needed_mb: i64,
    #[serde(deserialize_with = "lenient::i64")]
    pub total_v_cores_needed: i64,
    pub container_logs_link: String,
    pub node_id: String,
    #[serde(deserialize_with = "lenient::vec")]
    pub container_log_files: Vec<String>,
    pub execution_type: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_container_example_with_string_numbers_parses() {
        // ResourceManagerRest.md, "Containers for an Application Attempt API".
        let j = r#"{"containers":{"container":[{"containerId":"container_1531404209605_0008_01_000001",
          "allocatedMB":"1536","allocatedVCores":"1","assignedNodeId":"host.domain.com:37814",
          "priority":"0","startedTime":"1531405909444","finishedTime":"0","elapsedTime":"4112",
          "containerExitStatus":"0","containerState":"RUNNING",
          "nodeHttpAddress":"http://host.domain.com:8042","nodeId":"host.domain.com:37814",
          "allocatedResources":[{"key":"memory-mb","value":"1536"},{"key":"vcores","value":"1"}]}]}}"#;
        let r: AttemptContainersResponse = serde_json::from_str(j).unwrap();
        let c = &r.into_list()[0];
        assert_eq!(c.allocated_mb, 1536);
        let entries = r#"{"allocatedResources":{"entry":[{"key":"memory-mb","value":"1536"},{"key":"vcores","value":"1"}]}}"#;
        let plain = r#"{"allocatedResources":{"memory-mb":1536,"vcores":1}}"#;
        for j in [entries, plain] {
            let e: ContainerInfo = serde_json::from_str(j).unwrap();
            assert_eq!(e.allocated_resources, c.allocated_resources, "{j}");
        }
        assert_eq!(c.started_time, 1531405909444);
        assert_eq!(c.allocated_resources[1].value, "1");
    }

    #[test]
    fn empty_collections_are_null_and_read_back_as_empty() {
        let r: AppsResponse = serde_json::from_str(r#"{"apps":null}"#).unwrap();
        assert!(r.into_list().is_empty());
        assert_eq!(
            serde_json::to_string(&AppsResponse::default()).unwrap(),
            r#"{"apps":null}"#
        );
        let r: NodesResponse = serde_json::from_str(r#"{"nodes":{"node":{"id":"h:1"}}}"#).unwrap();
        assert_eq!(r.into_list()[0].id, "h:1");
    }

    #[test]
    fn resource_requests_read_both_priority_shapes_and_capability_names() {
        let j = r#"{"app":{"id":"application_1_0001","state":"RUNNING","resourceRequests":[
            {"capability":{"memory":4096,"virtualCores":1},"numContainers":2,
             "priority":{"priority":20},"relaxLocality":true,"resourceName":"*"},
            {"capability":{"memory":"1024","vCores":"2"},"numContainers":"1","priority":0}]}}"#;
        let r: AppResponse = serde_json::from_str(j).unwrap();
        let rr = r.app.resource_requests.unwrap();
        assert_eq!(rr[0].priority, 20);
        assert_eq!(rr[0].capability.to_resource(), Resource::new(4096, 1));
        assert_eq!(rr[1].capability.to_resource(), Resource::new(1024, 2));
        assert_eq!(r.app.state, YarnApplicationState::Running);
    }

    #[test]
    fn submission_context_reads_the_documented_example_shape() {
        let j = r#"{"application-id":"application_1404203615263_0001","application-name":"test",
          "am-container-spec":{"local-resources":{"entry":[{"key":"AppMaster.jar","value":{"resource":"x"}}]},
            "commands":{"command":"java -Xmx10m"},
            "environment":{"entry":[{"key":"A","value":"1"},{"key":"B","value":"2"}]}},
          "unmanaged-AM":false,"max-app-attempts":2,"resource":{"memory":1024,"vCores":1},
          "application-type":"YARN","application-tags":{"tag":["tag1","tag 2"]}}"#;
        let s: ApplicationSubmissionContext = serde_json::from_str(j).unwrap();
        assert_eq!(s.am_container_spec.environment.get("B"), Some("2"));
        assert_eq!(s.am_container_spec.commands.command, vec!["java -Xmx10m"]);
        assert_eq!(s.application_tags.tag.len(), 2);
        assert_eq!(s.resource.to_resource(), Resource::new(1024, 1));
        assert_eq!(s.max_app_attempts, 2);
    }

    #[test]
    fn application_states_parse_case_insensitively() {
        assert_eq!(
            "running".parse::<YarnApplicationState>().unwrap(),
            YarnApplicationState::Running
        );
        assert!("RUNNIN".parse::<YarnApplicationState>().is_err());
        assert_eq!(
            serde_json::to_string(&YarnApplicationState::NewSaving).unwrap(),
            "\"NEW_SAVING\""
        );
    }
}
