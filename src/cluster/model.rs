//! The entities of the model: queues, applications, containers and nodes, what they
//! are, and how an application's class is decided.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ids::{ApplicationId, ContainerId, NodeId};
use crate::resources::{Limits, Resource};

/// Milliseconds on the caller's clock: epoch time in the controller, simulated time in
/// the simulator. Policies only ever compare and subtract them.
pub type Millis = u64;

/// Short (latency-sensitive) or long (batch) job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobClass {
    Short,
    Long,
}

impl FromStr for JobClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "short" => Ok(JobClass::Short),
            "long" => Ok(JobClass::Long),
            other => Err(format!(
                "unknown job class {other:?} (expected short or long)"
            )),
        }
    }
}

impl fmt::Display for JobClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobClass::Short => "short",
            JobClass::Long => "long",
        })
    }
}

/// The preemption policies Preemptor knows, by their configuration names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    None,
    Kill,
    Immediate,
    Graceful,
    Las,
    Dice,
    Adaptive,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 7] = [
        PolicyKind::None,
        PolicyKind::Kill,
        PolicyKind::Immediate,
        PolicyKind::Graceful,
        PolicyKind::Las,
        PolicyKind::Dice,
        PolicyKind::Adaptive,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            PolicyKind::None => "none",
            PolicyKind::Kill => "kill",
            PolicyKind::Immediate => "immediate",
            PolicyKind::Graceful => "graceful",
            PolicyKind::Las => "las",
            PolicyKind::Dice => "dice",
            PolicyKind::Adaptive => "adaptive",
        }
    }
}

impl FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        PolicyKind::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                let names: Vec<&str> = PolicyKind::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown policy {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What Preemptor has done to a container's cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    /// Running at its full allocation.
    Running,
    /// Squeezed to the minimal footprint (immediate, LAS, Dice).
    Suspended,
    /// Reduced below its allocation by graceful steps.
    Shrunk,
    /// Killed; YARN will report it gone soon.
    Killed,
}

/// Dice's node partition: short nodes take no new long containers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    #[default]
    General,
    Short,
}

/// The YARN node label that puts a node in Dice's short partition.
pub const SHORT_PARTITION_LABEL: &str = "short";

impl Partition {
    /// The partition a queue's containers are confined to, from its (effective)
    /// `default-node-label-expression`: Dice's label is exclusive, so a queue that
    /// defaults to it runs only there.
    pub fn confining(default_node_label_expression: Option<&str>) -> Option<Partition> {
        (default_node_label_expression.map(str::trim) == Some(SHORT_PARTITION_LABEL))
            .then_some(Partition::Short)
    }
}

macro_rules! index_type {
    ($name:ident) => {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u32);
        impl $name {
            pub fn get(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_type!(QueueIdx);
index_type!(AppIdx);
index_type!(NodeIdx);
index_type!(ContainerIdx);

/// A queue of the capacity scheduler's tree, with absolute resources worked out against
/// the cluster's physical capacity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Queue {
    /// Full path, e.g. `root.short`.
    pub path: String,
    pub parent: Option<QueueIdx>,
    /// Filled by [`ClusterView::new`].
    #[serde(default)]
    pub children: Vec<QueueIdx>,
    /// Absolute guaranteed resource.
    pub guaranteed: Resource,
    /// Absolute maximum resource (maximum-capacity).
    pub maximum: Resource,
    /// Effective `disable_preemption` (inherited from ancestors).
    pub preemption_disabled: bool,
    /// `preemptor.job-class` of the queue, if set.
    pub job_class: Option<JobClass>,
    /// `preemptor.policy` override, if set.
    pub policy: Option<PolicyKind>,
    /// The only partition its containers may be placed in, if any: on YARN, a queue
    /// whose `default-node-label-expression` is Dice's exclusive label runs only on
    /// that label's nodes. None: wherever its class may run (Dice's short tasks, in the
    /// paper, run on any node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_to: Option<Partition>,
    /// Allocated to its running containers (computed by [`ClusterView::new`]).
    #[serde(default)]
    pub used: Resource,
    /// Outstanding resource requests of its applications (computed).
    #[serde(default)]
    pub pending: Resource,
}

impl Queue {
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// Outstanding containers an application asks for, all of one size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRequest {
    pub capability: Resource,
    pub num_containers: u32,
}

impl ResourceRequest {
    pub fn total(&self) -> Resource {
        Resource {
            memory_mb: self
                .capability
                .memory_mb
                .saturating_mul(self.num_containers as u64),
            vcores: self.capability.vcores.saturating_mul(self.num_containers),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct App {
    pub id: ApplicationId,
    pub name: String,
    pub queue: QueueIdx,
    pub user: String,
    /// `MAPREDUCE`, `SPARK`, ... as YARN reports `applicationType`.
    pub application_type: String,
    pub tags: Vec<String>,
    pub class: JobClass,
    pub submitted_ms: Millis,
    /// Progress in [0, 1] as the AM reports it.
    pub progress: f64,
    pub requests: Vec<ResourceRequest>,
    /// When the oldest outstanding request was made, if any is outstanding.
    pub pending_since_ms: Option<Millis>,
    /// Filled by [`ClusterView::new`].
    #[serde(default)]
    pub containers: Vec<ContainerIdx>,
}

impl App {
    pub fn pending(&self) -> Resource {
        self.requests
            .iter()
            .fold(Resource::ZERO, |acc, r| acc + r.total())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Container {
    pub id: ContainerId,
    pub app: AppIdx,
    pub node: NodeIdx,
    /// What YARN allocated; Preemptor's resume target.
    pub allocated: Resource,
    /// What the cgroup enforces now, in YARN units.
    pub current: Limits,
    pub state: ContainerState,
    pub is_am: bool,
    /// When the request this container satisfied was made, if known.
    pub requested_ms: Option<Millis>,
    pub started_ms: Millis,
    /// CPU time the container had consumed (Kairos' attained service) at
    /// `attained_as_of_ms`; read it through [`Container::attained_service_at`].
    pub attained_service_ms: u64,
    /// How fast attained service grows from then on, in vcore-ms per ms, where the
    /// source knows it holds until it next reports the container. The simulator sets it,
    /// so that a view kept between ticks need not bring thousands of counters up to now
    /// every tick; the controller reads the counters afresh for every view and leaves 0.
    #[serde(default)]
    pub attained_rate: f64,
    #[serde(default)]
    pub attained_as_of_ms: Millis,
    /// The agent saw swap-in or major-fault activity above its threshold.
    pub swapping: bool,
    /// An agent reports this container, so actions on it can be carried out. YARN may
    /// run containers outside Docker (another runtime, or the emulator's in-process
    /// ApplicationMasters): they count as used, but no policy picks them.
    #[serde(default = "managed_default")]
    pub managed: bool,
}

fn managed_default() -> bool {
    true
}

impl Container {
    pub fn is_live(&self) -> bool {
        self.state != ContainerState::Killed
    }

    /// Attained service at `now`: as read, plus its growth since at the known rate.
    pub fn attained_service_at(&self, now: Millis) -> u64 {
        let grown = now.saturating_sub(self.attained_as_of_ms) as f64 * self.attained_rate;
        // `as` saturates: a negative or NaN rate (a bad report) adds nothing.
        self.attained_service_ms.saturating_add(grown as u64)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    /// Physical capacity the NodeManager was configured with.
    pub capacity: Resource,
    /// What the RM currently believes the node has (capacity plus reclaimed room).
    pub advertised: Resource,
    pub partition: Partition,
    /// Allocated to its live containers (computed).
    #[serde(default)]
    pub used: Resource,
    /// Filled by [`ClusterView::new`].
    #[serde(default)]
    pub containers: Vec<ContainerIdx>,
}

/// What a policy tick reads of a live container below its allocation (suspended or
/// shrunk), copied out of the container list by [`ClusterView::new`]. A tick walks all
/// of them; read through the container list they are a cache miss each on a large
/// cluster (one container in a hundred, a million containers), read here one dense run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BelowAllocation {
    pub container: ContainerIdx,
    pub app: AppIdx,
    pub node: NodeIdx,
    pub allocated: Resource,
    pub current: Limits,
    pub state: ContainerState,
    pub swapping: bool,
}

/// What a policy tick reads of every node, copied out of the node list: passes over
/// all nodes read one dense run instead of the larger `Node`s, which stop fitting the
/// cache from some tens of thousands of nodes on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeFacts {
    pub capacity: Resource,
    pub advertised: Resource,
    pub used: Resource,
}

/// Decide an application's class. First match wins: the queue's job-class, then an
/// application tag `preemptor.class=short|long`, then the estimated mean task runtime
/// against the cutoff, otherwise long.
pub fn classify(
    queue_class: Option<JobClass>,
    tags: &[String],
    estimated_mean_task_secs: Option<f64>,
    cutoff_secs: f64,
) -> JobClass {
    if let Some(c) = queue_class {
        return c;
    }
    for t in tags {
        if let Some(v) = t.trim().strip_prefix("preemptor.class=")
            && let Ok(c) = v.parse()
        {
            return c;
        }
    }
    match estimated_mean_task_secs {
        Some(s) if s.is_finite() && s < cutoff_secs => JobClass::Short,
        _ => JobClass::Long,
    }
}
