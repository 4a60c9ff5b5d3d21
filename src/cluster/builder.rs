//! Compact descriptions of clusters for tests, benchmarks and fixtures.
//!
//! ```
//! use preemptor::cluster::JobClass;
//! use preemptor::cluster::builder::ClusterBuilder;
//! use preemptor::resources::Resource;
//!
//! let view = ClusterBuilder::new()
//!     .nodes(4, Resource::new(16384, 16))
//!     .queue("root.short", 95.0, 100.0, JobClass::Short)
//!     .queue("root.long", 5.0, 100.0, JobClass::Long)
//!     .app("root.long", "SPARK")
//!     .am(Resource::new(2048, 1))
//!     .containers(15, Resource::new(4096, 4))
//!     .app("root.short", "MAPREDUCE")
//!     .pending(2, Resource::new(4096, 2))
//!     .build()
//!     .unwrap();
//! assert_eq!(view.containers().len(), 16);
//! ```
//!
//! Queue capacities are percentages of the parent, as in capacity-scheduler.xml. Nodes
//! must be declared before containers; containers go round-robin to the next node with
//! physical room, or to a named node. Modifiers (`progress`, `with_last`, ...) apply to
//! the last application or container declared. Mistakes are reported by `build`.
//!
//! [`ClusterBuilder::from_notation`] reads the scenario notation of Hadoop's preemption
//! tests, `root(=[100 100 100 9 0]);-a(=[50 100 90 0]);-b(=[50 100 10 9])`: per queue,
//! guaranteed, maximum, used and pending (and reserved, which must be 0) in units of a
//! given resource, one dash per level of depth.

use crate::cluster::{
    App, AppIdx, ApplicationAttemptId, ApplicationId, ClusterView, Container, ContainerId,
    ContainerState, JobClass, Millis, Node, NodeId, NodeIdx, Partition, PolicyKind, Queue,
    QueueIdx, ResourceRequest, ViewError,
};
use crate::resources::{Limits, Resource};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("queue {0} is declared twice")]
    DuplicateQueue(String),
    #[error("queue {path}: its parent {parent} must be declared first")]
    MissingParent { path: String, parent: String },
    #[error("queue path {0:?} must start with root.")]
    BadQueuePath(String),
    #[error(
        "queue {path}: capacity {capacity}% / maximum {maximum}% must be within 0..=100 with capacity <= maximum"
    )]
    BadPercent {
        path: String,
        capacity: f64,
        maximum: f64,
    },
    #[error("unknown queue {0}")]
    UnknownQueue(String),
    #[error("application queue {0} is a parent queue; applications run in leaf queues")]
    ParentQueueApp(String),
    #[error("{0} needs an application declared before it")]
    NoApplication(&'static str),
    #[error("{0} needs a container declared before it")]
    NoContainer(&'static str),
    #[error("containers need nodes declared before them")]
    NoNodes,
    #[error("no node has room for a container of {0}")]
    NoRoom(Resource),
    #[error("node {index} does not exist ({count} nodes declared)")]
    NoSuchNode { index: usize, count: usize },
    #[error("scenario notation, entry {entry}: {message}")]
    Notation { entry: usize, message: String },
    #[error(transparent)]
    View(#[from] ViewError),
}

struct QueueDraft {
    path: String,
    parent: Option<usize>,
    capacity: Capacity,
    job_class: Option<JobClass>,
    policy: Option<PolicyKind>,
    disable_preemption: bool,
    confined_to: Option<Partition>,
}

enum Capacity {
    Percent {
        capacity: f64,
        maximum: f64,
    },
    Absolute {
        guaranteed: Resource,
        maximum: Resource,
    },
}

/// Builds a [`ClusterView`] step by step; see the module documentation.
pub struct ClusterBuilder {
    cluster_timestamp: u64,
    queues: Vec<QueueDraft>,
    apps: Vec<App>,
    nodes: Vec<Node>,
    node_room: Vec<Resource>,
    containers: Vec<Container>,
    /// Containers and task containers placed so far per application (start times and
    /// ids follow them).
    placed: Vec<(u64, u64)>,
    next_node: usize,
    error: Option<BuildError>,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterBuilder {
    /// An empty cluster with just the root queue.
    pub fn new() -> Self {
        ClusterBuilder {
            cluster_timestamp: 1_700_000_000_000,
            queues: vec![QueueDraft {
                path: "root".into(),
                parent: None,
                capacity: Capacity::Percent {
                    capacity: 100.0,
                    maximum: 100.0,
                },
                job_class: None,
                policy: None,
                disable_preemption: false,
                confined_to: None,
            }],
            apps: Vec::new(),
            nodes: Vec::new(),
            node_room: Vec::new(),
            containers: Vec::new(),
            placed: Vec::new(),
            next_node: 0,
            error: None,
        }
    }

    fn fail(mut self, e: BuildError) -> Self {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self
    }

    /// The RM start time used in every id.
    pub fn cluster_timestamp(mut self, ts: u64) -> Self {
        self.cluster_timestamp = ts;
        self
    }

    /// `count` nodes named `node-00001:8041`, ... with the given physical capacity.
    pub fn nodes(mut self, count: usize, capacity: Resource) -> Self {
        for _ in 0..count {
            let name = format!("node-{:05}:8041", self.nodes.len() + 1);
            self = self.node(&name, capacity);
        }
        self
    }

    pub fn node(mut self, id: &str, capacity: Resource) -> Self {
        self.nodes.push(Node {
            id: NodeId::new(id),
            capacity,
            advertised: capacity,
            partition: Partition::General,
            used: Resource::ZERO,
            containers: Vec::new(),
        });
        self.node_room.push(capacity);
        self
    }

    /// Change the last node's advertised capacity and partition.
    pub fn node_state(mut self, advertised: Resource, partition: Partition) -> Self {
        match self.nodes.last_mut() {
            Some(n) => {
                n.advertised = advertised;
                n.partition = partition;
                self
            }
            None => self.fail(BuildError::NoNodes),
        }
    }

    /// A leaf queue with capacity and maximum-capacity in percent of its parent.
    pub fn queue(self, path: &str, capacity: f64, maximum: f64, class: JobClass) -> Self {
        self.add_queue(path, Capacity::Percent { capacity, maximum }, Some(class))
    }

    /// A queue without a job class, typically a parent.
    pub fn parent_queue(self, path: &str, capacity: f64, maximum: f64) -> Self {
        self.add_queue(path, Capacity::Percent { capacity, maximum }, None)
    }

    /// A queue with absolute guaranteed and maximum resources.
    pub fn queue_absolute(
        self,
        path: &str,
        guaranteed: Resource,
        maximum: Resource,
        class: Option<JobClass>,
    ) -> Self {
        self.add_queue(
            path,
            Capacity::Absolute {
                guaranteed,
                maximum,
            },
            class,
        )
    }

    fn add_queue(mut self, path: &str, capacity: Capacity, class: Option<JobClass>) -> Self {
        if let Capacity::Percent {
            capacity: c,
            maximum: m,
        } = capacity
            && !((0.0..=100.0).contains(&c) && (0.0..=100.0).contains(&m) && c <= m)
        {
            return self.fail(BuildError::BadPercent {
                path: path.into(),
                capacity: c,
                maximum: m,
            });
        }
        if path == "root" {
            self.queues[0].capacity = capacity;
            self.queues[0].job_class = class;
            return self;
        }
        let Some((parent_path, _)) = path.rsplit_once('.') else {
            return self.fail(BuildError::BadQueuePath(path.into()));
        };
        if !path.starts_with("root.") {
            return self.fail(BuildError::BadQueuePath(path.into()));
        }
        if self.queues.iter().any(|q| q.path == path) {
            return self.fail(BuildError::DuplicateQueue(path.into()));
        }
        let Some(parent) = self.queues.iter().position(|q| q.path == parent_path) else {
            return self.fail(BuildError::MissingParent {
                path: path.into(),
                parent: parent_path.into(),
            });
        };
        self.queues.push(QueueDraft {
            path: path.into(),
            parent: Some(parent),
            capacity,
            job_class: class,
            policy: None,
            disable_preemption: false,
            confined_to: None,
        });
        self
    }

    /// Set `disable_preemption` on the last queue (inherited by its descendants).
    pub fn preemption_disabled(mut self) -> Self {
        if let Some(q) = self.queues.last_mut() {
            q.disable_preemption = true;
        }
        self
    }

    /// Confine the last queue's containers to `partition` (a YARN exclusive label).
    pub fn confined_to(mut self, partition: Partition) -> Self {
        if let Some(q) = self.queues.last_mut() {
            q.confined_to = Some(partition);
        }
        self
    }

    /// Set the `preemptor.policy` override of the last queue.
    pub fn queue_policy(mut self, policy: PolicyKind) -> Self {
        if let Some(q) = self.queues.last_mut() {
            q.policy = Some(policy);
        }
        self
    }

    /// A new application in `queue`; its class is the queue's job class, else long.
    pub fn app(mut self, queue: &str, application_type: &str) -> Self {
        let Some(qi) = self.queues.iter().position(|q| q.path == queue) else {
            return self.fail(BuildError::UnknownQueue(queue.into()));
        };
        if self.queues.iter().any(|q| q.parent == Some(qi)) {
            return self.fail(BuildError::ParentQueueApp(queue.into()));
        }
        let n = self.apps.len() as u32 + 1;
        self.apps.push(App {
            id: ApplicationId::new(self.cluster_timestamp, n),
            name: format!("{}-{n}", application_type.to_ascii_lowercase()),
            queue: QueueIdx(qi as u32),
            user: "hadoop".into(),
            application_type: application_type.into(),
            tags: Vec::new(),
            class: self.queues[qi].job_class.unwrap_or(JobClass::Long),
            submitted_ms: 0,
            progress: 0.5,
            requests: Vec::new(),
            pending_since_ms: None,
            containers: Vec::new(),
        });
        self.placed.push((0, 0));
        self
    }

    fn with_app(self, what: &'static str, f: impl FnOnce(&mut App)) -> Self {
        let mut b = self;
        match b.apps.last_mut() {
            Some(a) => {
                f(a);
                b
            }
            None => b.fail(BuildError::NoApplication(what)),
        }
    }

    pub fn submitted(self, ms: Millis) -> Self {
        self.with_app("submitted", |a| a.submitted_ms = ms)
    }

    pub fn progress(self, progress: f64) -> Self {
        self.with_app("progress", |a| a.progress = progress)
    }

    pub fn class(self, class: JobClass) -> Self {
        self.with_app("class", |a| a.class = class)
    }

    pub fn tag(self, tag: &str) -> Self {
        self.with_app("tag", |a| a.tags.push(tag.into()))
    }

    /// Outstanding requests of the last application, waiting since it was submitted
    /// unless `pending_since` says otherwise.
    pub fn pending(self, num_containers: u32, capability: Resource) -> Self {
        self.with_app("pending", |a| {
            a.requests.push(ResourceRequest {
                capability,
                num_containers,
            });
            a.pending_since_ms.get_or_insert(a.submitted_ms);
        })
    }

    pub fn pending_since(self, ms: Millis) -> Self {
        self.with_app("pending_since", |a| a.pending_since_ms = Some(ms))
    }

    /// The last application's ApplicationMaster container (container id 1).
    pub fn am(self, size: Resource) -> Self {
        self.place("am", None, size, true)
    }

    /// `n` running task containers of the last application, round-robin over nodes.
    pub fn containers(mut self, n: usize, size: Resource) -> Self {
        for _ in 0..n {
            self = self.place("containers", None, size, false);
        }
        self
    }

    /// `n` running task containers of the last application on node `node` (0-based),
    /// even beyond its physical capacity (as LAS's N+Q admission allows).
    pub fn containers_on(mut self, node: usize, n: usize, size: Resource) -> Self {
        for _ in 0..n {
            self = self.place("containers_on", Some(node), size, false);
        }
        self
    }

    /// Adjust the last container: state, limits, times, attained service, swapping.
    pub fn with_last(self, f: impl FnOnce(&mut Container)) -> Self {
        let mut b = self;
        match b.containers.last_mut() {
            Some(c) => {
                f(c);
                b
            }
            None => b.fail(BuildError::NoContainer("with_last")),
        }
    }

    /// Mark the last container suspended at `footprint`.
    pub fn suspended(self, footprint: Limits) -> Self {
        self.with_last(|c| {
            c.state = ContainerState::Suspended;
            c.current = footprint.component_min(Limits::from(c.allocated));
        })
    }

    fn place(mut self, what: &'static str, on: Option<usize>, size: Resource, is_am: bool) -> Self {
        if self.error.is_some() {
            return self;
        }
        let Some(ai) = self.apps.len().checked_sub(1) else {
            return self.fail(BuildError::NoApplication(what));
        };
        if self.nodes.is_empty() {
            return self.fail(BuildError::NoNodes);
        }
        let count = self.nodes.len();
        let node = match on {
            Some(i) if i >= count => return self.fail(BuildError::NoSuchNode { index: i, count }),
            Some(i) => i,
            None => {
                let start = self.next_node;
                match (0..count)
                    .map(|k| (start + k) % count)
                    .find(|&i| size.fits_in(&self.node_room[i]))
                {
                    Some(i) => {
                        self.next_node = (i + 1) % count;
                        i
                    }
                    None => return self.fail(BuildError::NoRoom(size)),
                }
            }
        };
        self.node_room[node] -= size;
        let app = &self.apps[ai];
        let (seq, tasks) = self.placed[ai];
        self.placed[ai] = (seq + 1, tasks + u64::from(!is_am));
        // Id 1 is the AM's; task containers follow, so ids grow with start time.
        let id = if is_am { 1 } else { tasks + 2 };
        self.containers.push(Container {
            id: ContainerId::new(ApplicationAttemptId::new(app.id, 1), 0, id),
            app: AppIdx(ai as u32),
            node: NodeIdx(node as u32),
            allocated: size,
            current: Limits::from(size),
            state: ContainerState::Running,
            is_am,
            requested_ms: Some(app.submitted_ms),
            started_ms: app.submitted_ms + seq + 1,
            attained_service_ms: 0,
            attained_rate: 0.0,
            attained_as_of_ms: 0,
            swapping: false,
            managed: true,
        });
        self
    }

    pub fn build(self) -> Result<ClusterView, BuildError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let total = Resource::sum(self.nodes.iter().map(|n| &n.capacity));
        let mut queues: Vec<Queue> = Vec::with_capacity(self.queues.len());
        for d in &self.queues {
            let (parent_g, parent_m, parent_disabled) = match d.parent {
                Some(p) => (
                    queues[p].guaranteed,
                    queues[p].maximum,
                    queues[p].preemption_disabled,
                ),
                None => (total, total, false),
            };
            let (guaranteed, maximum) = match d.capacity {
                Capacity::Percent { capacity, maximum } => (
                    parent_g.scale(capacity / 100.0),
                    parent_m.scale(maximum / 100.0),
                ),
                Capacity::Absolute {
                    guaranteed,
                    maximum,
                } => (guaranteed, maximum),
            };
            queues.push(Queue {
                path: d.path.clone(),
                parent: d.parent.map(|p| QueueIdx(p as u32)),
                children: Vec::new(),
                guaranteed,
                maximum,
                preemption_disabled: d.disable_preemption || parent_disabled,
                job_class: d.job_class,
                policy: d.policy,
                confined_to: d.confined_to,
                used: Resource::ZERO,
                pending: Resource::ZERO,
            });
        }
        Ok(ClusterView::new(
            queues,
            self.apps,
            self.nodes,
            self.containers,
        )?)
    }

    /// Build from Hadoop's scenario notation (see the module documentation). Every
    /// number counts `unit`s. The cluster gets `nodes` equal nodes sharing root's
    /// guaranteed amount; each leaf with `used` gets one application running that many
    /// `unit` containers, and `pending` becomes its outstanding request. A leaf may end
    /// in `{short}`, `{long}`, `{disable_preemption}` or `{policy=<name>}` (comma
    /// separated).
    pub fn from_notation(
        unit: Resource,
        nodes: usize,
        spec: &str,
    ) -> Result<ClusterBuilder, BuildError> {
        let entries = parse_notation(spec)?;
        let Some(root) = entries.first().filter(|e| e.depth == 0) else {
            return Err(notation_err(
                0,
                "the first entry must be root, without dashes",
            ));
        };
        if nodes == 0 || root.values[0] % nodes as u64 != 0 {
            return Err(notation_err(
                0,
                format!(
                    "root's guaranteed {} must split evenly over {nodes} nodes",
                    root.values[0]
                ),
            ));
        }
        let per_node = root.values[0] / nodes as u64;
        let times = |v: u64| {
            Resource::new(
                unit.memory_mb.saturating_mul(v),
                unit.vcores
                    .saturating_mul(u32::try_from(v).unwrap_or(u32::MAX)),
            )
        };
        let mut b = ClusterBuilder::new().nodes(nodes, times(per_node));
        // Path of the latest queue at each depth.
        let mut stack: Vec<String> = Vec::new();
        let mut leaves = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            if e.depth > stack.len() || (i > 0 && e.depth == 0) {
                return Err(notation_err(i, "depth jumps by more than one level"));
            }
            stack.truncate(e.depth);
            let path = match stack.last() {
                Some(p) => format!("{p}.{}", e.name),
                None => e.name.clone(),
            };
            if i == 0 && path != "root" {
                return Err(notation_err(0, "the first entry must be root"));
            }
            stack.push(path.clone());
            let is_leaf = entries.get(i + 1).is_none_or(|n| n.depth <= e.depth);
            b = b.queue_absolute(&path, times(e.values[0]), times(e.values[1]), e.class);
            if e.disable_preemption {
                b = b.preemption_disabled();
            }
            if let Some(p) = e.policy {
                b = b.queue_policy(p);
            }
            if is_leaf {
                leaves.push((path, e.values[2], e.values[3]));
            } else if e.class.is_some() || e.policy.is_some() {
                return Err(notation_err(i, "only leaf queues take a class or policy"));
            }
        }
        for (path, used, pending) in leaves {
            if used == 0 && pending == 0 {
                continue;
            }
            b = b.app(&path, "MAPREDUCE").containers(used as usize, unit);
            if pending > 0 {
                b = b.pending(u32::try_from(pending).unwrap_or(u32::MAX), unit);
            }
        }
        match b.error.take() {
            Some(e) => Err(e),
            None => Ok(b),
        }
    }
}

struct Entry {
    depth: usize,
    name: String,
    values: [u64; 4],
    class: Option<JobClass>,
    policy: Option<PolicyKind>,
    disable_preemption: bool,
}

fn notation_err(entry: usize, message: impl Into<String>) -> BuildError {
    BuildError::Notation {
        entry,
        message: message.into(),
    }
}

fn parse_notation(spec: &str) -> Result<Vec<Entry>, BuildError> {
    let mut out = Vec::new();
    for (i, raw) in spec.split(';').enumerate() {
        let item = raw.trim();
        if item.is_empty() {
            continue;
        }
        let depth = item.chars().take_while(|&c| c == '-').count();
        let rest = &item[depth..];
        let (name, rest) = rest
            .split_once('(')
            .ok_or_else(|| notation_err(i, format!("{item:?}: expected name(=[...])")))?;
        let (inner, tail) = rest
            .split_once(')')
            .ok_or_else(|| notation_err(i, format!("{item:?}: missing )")))?;
        let name = name.trim();
        if name.is_empty() || name.contains('.') {
            return Err(notation_err(
                i,
                format!("{item:?}: bad queue name {name:?}"),
            ));
        }
        let inner = inner.trim();
        let (label, list) = inner
            .split_once('=')
            .ok_or_else(|| notation_err(i, format!("{item:?}: expected =[...]")))?;
        if !label.trim().is_empty() {
            return Err(notation_err(i, "node-label partitions are not modelled"));
        }
        let list = list
            .trim()
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .ok_or_else(|| {
                notation_err(
                    i,
                    format!("{item:?}: expected [guaranteed max used pending]"),
                )
            })?;
        let nums: Vec<u64> = list
            .split_whitespace()
            .map(|t| {
                t.parse::<u64>()
                    .map_err(|_| notation_err(i, format!("{t:?} is not a whole number")))
            })
            .collect::<Result<_, _>>()?;
        if !(4..=5).contains(&nums.len()) {
            return Err(notation_err(
                i,
                "expected 4 or 5 numbers: guaranteed max used pending [reserved]",
            ));
        }
        if nums.get(4).is_some_and(|&r| r != 0) {
            return Err(notation_err(
                i,
                "reserved containers are not modelled (use 0)",
            ));
        }
        let mut e = Entry {
            depth,
            name: name.into(),
            values: [nums[0], nums[1], nums[2], nums[3]],
            class: None,
            policy: None,
            disable_preemption: false,
        };
        let tail = tail.trim();
        if !tail.is_empty() {
            let attrs = tail
                .strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .ok_or_else(|| notation_err(i, format!("{tail:?}: expected {{attributes}}")))?;
            for a in attrs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                match a {
                    "short" => e.class = Some(JobClass::Short),
                    "long" => e.class = Some(JobClass::Long),
                    "disable_preemption" => e.disable_preemption = true,
                    _ => match a.strip_prefix("policy=") {
                        Some(p) => {
                            e.policy = Some(p.parse().map_err(|m: String| notation_err(i, m))?)
                        }
                        None => return Err(notation_err(i, format!("unknown attribute {a:?}"))),
                    },
                }
            }
        }
        out.push(e);
    }
    if out.is_empty() {
        return Err(notation_err(0, "no queues"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_queues_apps_and_spread_containers() {
        let v = ClusterBuilder::new()
            .nodes(2, Resource::new(8192, 8))
            .parent_queue("root.a", 60.0, 100.0)
            .queue("root.a.x", 50.0, 100.0, JobClass::Short)
            .preemption_disabled()
            .queue("root.b", 40.0, 50.0, JobClass::Long)
            .queue_policy(PolicyKind::Kill)
            .app("root.b", "SPARK")
            .am(Resource::new(1024, 1))
            .containers(3, Resource::new(2048, 2))
            .with_last(|c| c.attained_service_ms = 7)
            .pending(2, Resource::new(1024, 1))
            .build()
            .unwrap();
        assert_eq!(v.queues.len(), 4);
        assert_eq!(v.queues[2].guaranteed, Resource::new(4915, 4));
        assert!(v.queues[2].preemption_disabled);
        assert_eq!(v.queues[3].maximum, Resource::new(8192, 8));
        assert_eq!(v.queues[3].policy, Some(PolicyKind::Kill));
        assert_eq!(v.nodes[0].containers.len(), 2);
        assert_eq!(v.nodes[1].containers.len(), 2);
        assert_eq!(v.queues[3].used, Resource::new(7168, 7));
        assert_eq!(v.queues[0].pending, Resource::new(2048, 2));
        assert!(v.containers[0].is_am && v.containers[0].id.id == 1);
        assert_eq!(v.containers[3].attained_service_ms, 7);
        assert_eq!(v.apps[0].class, JobClass::Long);
        assert!(v.below_allocation().is_empty());
    }

    #[test]
    fn the_view_indexes_containers_below_their_allocation() {
        let v = ClusterBuilder::new()
            .nodes(1, Resource::new(8192, 8))
            .queue("root.q", 100.0, 100.0, JobClass::Long)
            .app("root.q", "SPARK")
            .containers(2, Resource::new(2048, 2))
            .suspended(Limits::MIN_FOOTPRINT)
            .containers(1, Resource::new(2048, 2))
            .with_last(|c| c.state = ContainerState::Killed)
            .build()
            .unwrap();
        assert_eq!(v.below_allocation(), [crate::cluster::ContainerIdx(1)]);
        assert_eq!(v.containers[1].current, Limits::MIN_FOOTPRINT);
        let c = &v.containers[1];
        assert_eq!(
            v.below_allocation_facts(),
            [crate::cluster::BelowAllocation {
                container: crate::cluster::ContainerIdx(1),
                app: c.app,
                node: c.node,
                allocated: c.allocated,
                current: c.current,
                state: ContainerState::Suspended,
                swapping: false,
            }]
        );
    }

    #[test]
    fn reports_mistakes() {
        let e = ClusterBuilder::new()
            .app("root.nope", "X")
            .build()
            .unwrap_err();
        assert_eq!(e, BuildError::UnknownQueue("root.nope".into()));
        let e = ClusterBuilder::new()
            .queue("root.a.b", 10.0, 10.0, JobClass::Long)
            .build()
            .unwrap_err();
        assert!(matches!(e, BuildError::MissingParent { .. }));
        let e = ClusterBuilder::new()
            .nodes(1, Resource::new(1024, 1))
            .queue("root.a", 100.0, 100.0, JobClass::Long)
            .app("root.a", "X")
            .containers(2, Resource::new(1024, 1))
            .build()
            .unwrap_err();
        assert_eq!(e, BuildError::NoRoom(Resource::new(1024, 1)));
        let e = ClusterBuilder::new()
            .queue("root.a", 100.0, 50.0, JobClass::Long)
            .build()
            .unwrap_err();
        assert!(matches!(e, BuildError::BadPercent { .. }));
        assert!(matches!(
            ClusterBuilder::new()
                .containers(1, Resource::new(1, 1))
                .build(),
            Err(BuildError::NoApplication(_))
        ));
    }

    #[test]
    fn reads_hadoop_scenario_notation() {
        //        root
        //       /    \
        //      a      b
        let v = ClusterBuilder::from_notation(
            Resource::new(1024, 1),
            4,
            "root(=[100 100 100 9 0]);-a(=[50 100 90 0]){long};-b(=[50 100 10 9]){short,policy=immediate}",
        )
        .unwrap()
        .build()
        .unwrap();
        assert_eq!(v.nodes.len(), 4);
        assert_eq!(v.nodes[0].capacity, Resource::new(25 * 1024, 25));
        assert_eq!(v.queues[1].used, Resource::new(90 * 1024, 90));
        assert_eq!(v.queues[2].pending, Resource::new(9 * 1024, 9));
        assert_eq!(v.queues[2].job_class, Some(JobClass::Short));
        assert_eq!(v.queues[2].policy, Some(PolicyKind::Immediate));
        assert_eq!(v.queues[0].guaranteed, Resource::new(100 * 1024, 100));
    }

    #[test]
    fn rejects_bad_notation() {
        for bad in [
            "",
            "a(=[1 1 1 1])",
            "root(=[100 100 0 0]);--a(=[1 1 1 1])",
            "root(=[100 100 0 0 3])",
            "root(=[100 100 x 0])",
            "root(x=[100 100 0 0])",
            "root(=[100 100 0 0]);-a(=[1 1 1 1]){weird}",
            "root(=[99 100 0 0])",
        ] {
            assert!(
                ClusterBuilder::from_notation(Resource::new(1024, 1), 4, bad).is_err(),
                "{bad}"
            );
        }
    }
}
