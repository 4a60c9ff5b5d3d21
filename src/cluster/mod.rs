//! The cluster model every policy decides on: queues, applications, containers and nodes.
//!
//! Pure data. The controller builds a [`ClusterView`] from the RM's REST API and the agents'
//! reports; the simulator builds one from its own state. Entities refer to each other by
//! dense indices so that a view of 200,000 containers is a few flat vectors.

pub mod builder;
pub mod ids;
mod patch;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use ids::{ApplicationAttemptId, ApplicationId, ContainerId, IdError, IdHasher, IdMap, NodeId};

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

/// An inconsistency found while assembling a view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    #[error("cluster view has no queues (expected at least root)")]
    NoQueues,
    #[error("queue {path} refers to parent index {parent}, which is not an earlier queue")]
    BadQueueParent { path: String, parent: u32 },
    #[error("application {app} refers to queue index {queue}, which does not exist")]
    BadAppQueue { app: ApplicationId, queue: u32 },
    #[error("container {container} refers to {what} index {index}, which does not exist")]
    BadContainerRef {
        container: ContainerId,
        what: &'static str,
        index: u32,
    },
    #[error("duplicate {what} {id}")]
    Duplicate { what: &'static str, id: String },
    #[error("{what} index {index} is not in the view")]
    NotInView { what: &'static str, index: u32 },
    #[error("application {app} still has {containers} containers in the view")]
    AppNotEmpty {
        app: ApplicationId,
        containers: usize,
    },
}

/// A consistent snapshot of the cluster. Queues are in pre-order: the root first and
/// every parent before its children. Only [`ClusterView::new`] builds one, so the derived
/// fields always agree with the entities.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClusterView {
    pub queues: Vec<Queue>,
    pub apps: Vec<App>,
    pub nodes: Vec<Node>,
    pub containers: Vec<Container>,
    /// Sum of the nodes' physical capacity.
    pub capacity: Resource,
    #[serde(skip)]
    container_index: ContainerIndex,
    /// Live containers below their allocation (suspended or shrunk): in index order
    /// as built, in no particular order once changed in place.
    #[serde(skip)]
    below_allocation: Vec<ContainerIdx>,
    /// The same containers, with what a policy tick reads of them.
    #[serde(skip)]
    below_allocation_facts: Vec<BelowAllocation>,
    /// Per application: whether its containers are listed oldest first (start time,
    /// then id), so that victim selection can walk them newest first without sorting.
    #[serde(skip)]
    oldest_first: Vec<bool>,
    /// What [`ClusterView`]'s in-place changes (patch.rs) need to stay O(1) each: per
    /// container, its place in its application's and its node's list; per application,
    /// what its live containers are allocated; application id -> index.
    #[serde(skip)]
    at_app: Vec<u32>,
    #[serde(skip)]
    at_node: Vec<u32>,
    /// Per container, its place in `below_allocation`, or `u32::MAX`.
    #[serde(skip)]
    at_below: Vec<u32>,
    #[serde(skip)]
    app_used: Vec<Resource>,
    #[serde(skip)]
    app_index: IdMap<ApplicationId, u32>,
    /// Sum over nodes of capacity less what is allocated there.
    #[serde(skip)]
    free: Resource,
    /// Nodes that advertise other than their capacity or are outside the general
    /// partition, in index order.
    #[serde(skip)]
    reshaped: Vec<NodeIdx>,
    /// How many nodes have each (capacity, advertised) pair, and how many are outside
    /// the general partition: a policy that wants every node to advertise one function
    /// of its capacity (LAS's N+Q) checks a few pairs instead of every node.
    #[serde(skip)]
    node_shapes: IdMap<(Resource, Resource), u32>,
    #[serde(skip)]
    partitioned: usize,
    /// Per node, in node order.
    #[serde(skip)]
    node_facts: Vec<NodeFacts>,
    /// A bit per node, set where its live containers are allocated more than its
    /// capacity (N+Q admission lets LAS nodes take more than they run).
    #[serde(skip)]
    overfull: Vec<u64>,
    #[serde(skip)]
    layout: NodeLayout,
    #[serde(skip)]
    journal: Journal<u32>,
    #[serde(skip)]
    moves: Journal<ContainerMove>,
}

/// Tells views apart by their node lists: every view built gets its own, and in-place
/// changes keep it, as they never add, drop or reorder nodes. State kept per node
/// between ticks (LAS timers) stays laid out right while the layout is the same.
#[derive(Clone, Copy, Debug)]
struct NodeLayout(u64);

impl Default for NodeLayout {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        NodeLayout(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// Views compare by what they show, not by which one was built first.
impl PartialEq for NodeLayout {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// What in-place changes (patch.rs) did since a reader last looked, so that state
/// kept between ticks redoes only that. Two are kept:
/// - the nodes they touched, so that a policy keeping per-node state redoes only those
///   nodes: a node is listed when what is allocated there, which of its containers are
///   below their allocation and how far, its advertised room, or the queue of an
///   application with a reduced container there changes (nodes may be listed more
///   than once);
/// - how the container list was reordered ([`ContainerMove`]), so that state kept by
///   container place (the policy's memos) follows its containers.
///
/// Every view gets its own `id`, a clone included (the two then change apart), and the
/// list is cleared now and then (`base` counts what was cleared), so a reader holding a
/// [`JournalMark`] of another view, or of changes already cleared, learns that it must
/// start over instead of missing a change.
#[derive(Debug)]
struct Journal<T> {
    id: u64,
    base: u64,
    entries: Vec<T>,
}

/// Where a reader of one of a view's journals got to: see
/// [`ClusterView::nodes_changed_since`] and [`ClusterView::containers_moved_since`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalMark {
    id: u64,
    seq: u64,
}

/// How an in-place change moved containers in [`ClusterView::containers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerMove {
    /// One was appended.
    Added,
    /// The one at this index was removed, and the last one moved into its index
    /// (unless it was the last).
    Removed(ContainerIdx),
}

impl<T> Default for Journal<T> {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Journal {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            base: 0,
            entries: Vec::new(),
        }
    }
}

impl<T> Clone for Journal<T> {
    fn clone(&self) -> Self {
        Journal::default()
    }
}

/// Derived from the changes, not from what the view shows.
impl<T> PartialEq for Journal<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Journal<T> {
    fn clear(&mut self) {
        self.base += self.entries.len() as u64;
        self.entries.clear();
    }

    fn mark(&self) -> JournalMark {
        JournalMark {
            id: self.id,
            seq: self.base + self.entries.len() as u64,
        }
    }

    fn since(&self, mark: JournalMark) -> Option<&[T]> {
        let from = mark.seq.checked_sub(self.base)?;
        if mark.id != self.id {
            return None;
        }
        self.entries.get(usize::try_from(from).ok()?..)
    }

    /// Cleared past `limit`, so that a journal nobody reads stays small.
    fn push(&mut self, e: T, limit: usize) {
        if self.entries.len() >= limit {
            self.clear();
        }
        self.entries.push(e);
    }
}

/// Container id -> index. It holds only the indexes (the ids are in the view's
/// containers), 5 bytes a slot where a map from id held 41: the simulator indexes
/// thousands of containers on every tick, and a map's inserts missed the cache.
#[derive(Clone, Debug, Default)]
struct ContainerIndex(hashbrown::HashTable<ContainerIdx>);

/// Derived from the containers, which the views compare.
impl PartialEq for ContainerIndex {
    fn eq(&self, _: &ContainerIndex) -> bool {
        true
    }
}

fn id_hash(id: &ContainerId) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = IdHasher::default();
    id.hash(&mut h);
    h.finish()
}

impl ClusterView {
    /// Validates cross-references and derives children lists, per-node and per-app
    /// container lists, and queue/node usage. Aggregates are recomputed from scratch, so
    /// callers need not fill them.
    pub fn new(
        mut queues: Vec<Queue>,
        apps: Vec<App>,
        mut nodes: Vec<Node>,
        containers: Vec<Container>,
    ) -> Result<ClusterView, ViewError> {
        if queues.is_empty() {
            return Err(ViewError::NoQueues);
        }
        for q in &mut queues {
            q.children.clear();
            q.used = Resource::ZERO;
            q.pending = Resource::ZERO;
        }
        for i in 0..queues.len() {
            if let Some(p) = queues[i].parent {
                if p.get() >= i {
                    return Err(ViewError::BadQueueParent {
                        path: queues[i].path.clone(),
                        parent: p.0,
                    });
                }
                queues[p.get()].children.push(QueueIdx(i as u32));
            }
        }
        for n in &mut nodes {
            n.containers.clear();
            n.used = Resource::ZERO;
        }
        let capacity = Resource::sum(nodes.iter().map(|n| &n.capacity));
        let reshaped = (0..nodes.len())
            .filter(|&i| is_reshaped(&nodes[i]))
            .map(|i| NodeIdx(i as u32))
            .collect();
        let mut node_shapes: IdMap<(Resource, Resource), u32> = IdMap::default();
        for n in &nodes {
            *node_shapes.entry((n.capacity, n.advertised)).or_default() += 1;
        }
        let partitioned = nodes
            .iter()
            .filter(|n| n.partition != Partition::General)
            .count();
        // Applications and containers go in as in-place changes (patch.rs) would add
        // them, so that both keep the derived fields alike.
        let n = containers.len();
        let mut view = ClusterView {
            queues,
            apps: Vec::with_capacity(apps.len()),
            nodes,
            containers,
            capacity,
            container_index: ContainerIndex(hashbrown::HashTable::with_capacity(n)),
            below_allocation: Vec::new(),
            below_allocation_facts: Vec::new(),
            oldest_first: Vec::with_capacity(apps.len()),
            at_app: Vec::with_capacity(n),
            at_node: Vec::with_capacity(n),
            at_below: Vec::with_capacity(n),
            app_used: Vec::with_capacity(apps.len()),
            app_index: IdMap::with_capacity_and_hasher(apps.len(), Default::default()),
            free: Resource::ZERO,
            reshaped,
            node_shapes,
            partitioned,
            node_facts: Vec::new(),
            overfull: Vec::new(),
            layout: NodeLayout::default(),
            journal: Journal::default(),
            moves: Journal::default(),
        };
        for a in apps {
            view.add_app(a)?;
        }
        for i in 0..n {
            view.link(ContainerIdx(i as u32), true)?;
        }
        // Children come after parents, so a reverse sweep rolls leaves up to the root.
        let queues = &mut view.queues;
        for i in (1..queues.len()).rev() {
            if let Some(p) = queues[i].parent {
                let used = queues[i].used;
                queues[p.get()].used += used;
            }
        }
        view.free = view
            .nodes
            .iter()
            .fold(Resource::ZERO, |a, n| a + n.capacity.saturating_sub(n.used));
        view.node_facts = view.nodes.iter().map(node_facts).collect();
        view.overfull = vec![0; view.nodes.len().div_ceil(64)];
        for i in 0..view.nodes.len() {
            view.mark_overfull(i);
        }
        Ok(view)
    }

    /// Sets or clears node `i`'s bit in [`ClusterView::overfull_nodes`].
    fn mark_overfull(&mut self, i: usize) {
        let n = &self.nodes[i];
        let bit = 1u64 << (i % 64);
        if n.used.fits_in(&n.capacity) {
            self.overfull[i / 64] &= !bit;
        } else {
            self.overfull[i / 64] |= bit;
        }
    }

    /// A bit per node (node `i` is bit `i % 64` of word `i / 64`), set where its live
    /// containers are allocated more than its capacity: a pass over overloaded nodes
    /// scans 64 nodes a word instead of reading every node.
    pub fn overfull_nodes(&self) -> &[u64] {
        &self.overfull
    }

    /// Equal for two views exactly when one was patched from the other (or cloned):
    /// they list the same nodes in the same order. Views built apart differ even when
    /// their nodes are the same.
    pub fn node_layout(&self) -> u64 {
        self.layout.0
    }

    /// Where the node journal stands now; pass it to
    /// [`ClusterView::nodes_changed_since`] at the next look.
    pub fn journal_mark(&self) -> JournalMark {
        self.journal.mark()
    }

    /// The nodes changed in place since `mark` was taken of this view (some listed
    /// twice), or None when that is not known: the mark is of another view (a clone or
    /// one built anew), or the changes since were cleared.
    pub fn nodes_changed_since(&self, mark: JournalMark) -> Option<&[u32]> {
        self.journal.since(mark)
    }

    /// Where the container journal stands now; pass it to
    /// [`ClusterView::containers_moved_since`] at the next look.
    pub fn container_mark(&self) -> JournalMark {
        self.moves.mark()
    }

    /// How [`ClusterView::containers`] was reordered in place since `mark` was taken
    /// of this view, in order: replayed on a list laid out as the containers were
    /// then, it lays it out as they are now. None when that is not known (as for
    /// [`ClusterView::nodes_changed_since`]).
    pub fn containers_moved_since(&self, mark: JournalMark) -> Option<&[ContainerMove]> {
        self.moves.since(mark)
    }

    /// Forget the journalled changes; readers with an earlier mark start over. A
    /// caller that patches a view between ticks clears them before each patch, so that
    /// they hold one tick's changes.
    pub fn clear_journals(&mut self) {
        self.journal.clear();
        self.moves.clear();
    }

    /// List node `n` as changed.
    pub(super) fn journal_node(&mut self, n: NodeIdx) {
        let limit = 4 * self.nodes.len() + 1024;
        self.journal.push(n.0, limit);
    }

    pub(super) fn journal_move(&mut self, m: ContainerMove) {
        let limit = 4 * self.containers.len() + 1024;
        self.moves.push(m, limit);
    }

    /// Room not allocated on the nodes, summed: each node's capacity less what its
    /// live containers are allocated (never below zero on a node).
    pub fn free_room(&self) -> Resource {
        self.free
    }

    /// Nodes that advertise other than their capacity or are outside the general
    /// partition, in index order: every other node is as YARN configured it.
    pub fn reshaped_nodes(&self) -> &[NodeIdx] {
        &self.reshaped
    }

    /// Every (capacity, advertised) pair some node has, each once, in no particular
    /// order.
    pub fn node_shapes(&self) -> impl Iterator<Item = (Resource, Resource)> + '_ {
        self.node_shapes.keys().copied()
    }

    /// How many nodes are outside the general partition.
    pub fn partitioned_nodes(&self) -> usize {
        self.partitioned
    }

    /// [`NodeFacts`] of every node, in node order.
    pub fn node_facts(&self) -> &[NodeFacts] {
        &self.node_facts
    }

    pub fn queue(&self, i: QueueIdx) -> &Queue {
        &self.queues[i.get()]
    }

    pub fn app(&self, i: AppIdx) -> &App {
        &self.apps[i.get()]
    }

    pub fn node(&self, i: NodeIdx) -> &Node {
        &self.nodes[i.get()]
    }

    pub fn container(&self, i: ContainerIdx) -> &Container {
        &self.containers[i.get()]
    }

    /// Live containers that are suspended or shrunk, so that policies need not scan
    /// every container to find them. In index order when built by
    /// [`ClusterView::new`]; in no particular order after in-place changes.
    pub fn below_allocation(&self) -> &[ContainerIdx] {
        &self.below_allocation
    }

    /// What a policy tick reads of container `i` if it is below its allocation (live,
    /// and suspended or shrunk), from the dense list rather than the container itself.
    pub fn below_allocation_fact(&self, i: ContainerIdx) -> Option<&BelowAllocation> {
        let p = *self.at_below.get(i.get())?;
        self.below_allocation_facts.get(usize::try_from(p).ok()?)
    }

    /// [`ClusterView::below_allocation`] with what a policy tick reads of each, in the
    /// same order.
    pub fn below_allocation_facts(&self) -> &[BelowAllocation] {
        &self.below_allocation_facts
    }

    /// Whether `app`'s containers are listed oldest first (by start time, then id):
    /// walking them backwards gives newest first.
    pub fn containers_oldest_first(&self, app: AppIdx) -> bool {
        self.oldest_first.get(app.get()).copied().unwrap_or(false)
    }

    pub fn container_by_id(&self, id: &ContainerId) -> Option<ContainerIdx> {
        self.container_index
            .0
            .find(id_hash(id), |&j| self.containers[j.get()].id == *id)
            .copied()
    }

    pub fn queue_by_path(&self, path: &str) -> Option<QueueIdx> {
        self.queues
            .iter()
            .position(|q| q.path == path)
            .map(|i| QueueIdx(i as u32))
    }

    pub fn leaf_queues(&self) -> impl Iterator<Item = (QueueIdx, &Queue)> {
        self.queues
            .iter()
            .enumerate()
            .filter(|(_, q)| q.is_leaf())
            .map(|(i, q)| (QueueIdx(i as u32), q))
    }

    /// The queue an application runs in.
    pub fn queue_of(&self, c: &Container) -> &Queue {
        self.queue(self.app(c.app).queue)
    }
}

fn node_facts(n: &Node) -> NodeFacts {
    NodeFacts {
        capacity: n.capacity,
        advertised: n.advertised,
        used: n.used,
    }
}

fn is_reshaped(n: &Node) -> bool {
    n.advertised != n.capacity || n.partition != Partition::General
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

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn queue(path: &str, parent: Option<u32>) -> Queue {
        Queue {
            path: path.into(),
            parent: parent.map(QueueIdx),
            children: vec![],
            guaranteed: Resource::ZERO,
            maximum: Resource::ZERO,
            preemption_disabled: false,
            job_class: None,
            policy: None,
            confined_to: None,
            used: Resource::ZERO,
            pending: Resource::ZERO,
        }
    }

    pub(super) fn app(id: u32, q: u32, pending: u32) -> App {
        App {
            id: ApplicationId::new(1, id),
            name: format!("app{id}"),
            queue: QueueIdx(q),
            user: "u".into(),
            application_type: "MAPREDUCE".into(),
            tags: vec![],
            class: JobClass::Long,
            submitted_ms: 0,
            progress: 0.5,
            requests: vec![ResourceRequest {
                capability: Resource::new(1024, 1),
                num_containers: pending,
            }],
            pending_since_ms: None,
            containers: vec![],
        }
    }

    fn container(app: u32, n: u64, node: u32, state: ContainerState) -> Container {
        Container {
            id: ContainerId::new(
                ApplicationAttemptId::new(ApplicationId::new(1, app), 1),
                0,
                n,
            ),
            app: AppIdx(app - 1),
            node: NodeIdx(node),
            allocated: Resource::new(2048, 2),
            current: Limits::from(Resource::new(2048, 2)),
            state,
            is_am: n == 1,
            requested_ms: None,
            started_ms: 0,
            attained_service_ms: 0,
            attained_rate: 0.0,
            attained_as_of_ms: 0,
            swapping: false,
            managed: true,
        }
    }

    pub(super) fn node(name: &str) -> Node {
        Node {
            id: NodeId::new(name),
            capacity: Resource::new(8192, 8),
            advertised: Resource::new(8192, 8),
            partition: Partition::General,
            used: Resource::ZERO,
            containers: vec![],
        }
    }

    #[test]
    fn attained_service_grows_at_its_rate_from_when_it_was_read() {
        let mut c = container(1, 2, 0, ContainerState::Running);
        c.attained_service_ms = 5_000;
        assert_eq!(c.attained_service_at(60_000), 5_000, "rate 0: as read");
        c.attained_as_of_ms = 10_000;
        c.attained_rate = 2.0;
        assert_eq!(c.attained_service_at(4_000), 5_000, "before it was read");
        assert_eq!(c.attained_service_at(10_500), 6_000);
        for bad in [-1.0, f64::NAN] {
            c.attained_rate = bad;
            assert_eq!(c.attained_service_at(20_000), 5_000);
        }
        c.attained_rate = f64::INFINITY;
        assert_eq!(c.attained_service_at(20_000), u64::MAX);
    }

    #[test]
    fn view_rolls_usage_and_demand_up_the_tree() {
        let queues = vec![
            queue("root", None),
            queue("root.a", Some(0)),
            queue("root.b", Some(0)),
        ];
        let apps = vec![app(1, 1, 2), app(2, 2, 0)];
        let containers = vec![
            container(1, 1, 0, ContainerState::Running),
            container(1, 2, 1, ContainerState::Suspended),
            container(2, 1, 1, ContainerState::Killed),
        ];
        let v = ClusterView::new(
            queues,
            apps,
            vec![node("n1:8041"), node("n2:8041")],
            containers,
        )
        .unwrap();
        assert_eq!(v.queues[0].children, vec![QueueIdx(1), QueueIdx(2)]);
        assert_eq!(v.queues[1].used, Resource::new(4096, 4));
        assert_eq!(v.queues[1].pending, Resource::new(2048, 2));
        assert_eq!(v.queues[2].used, Resource::ZERO);
        assert_eq!(v.queues[0].used, Resource::new(4096, 4));
        assert_eq!(v.queues[0].pending, Resource::new(2048, 2));
        assert_eq!(v.nodes[1].used, Resource::new(2048, 2));
        assert_eq!(v.nodes[1].containers.len(), 2);
        assert_eq!(v.capacity, Resource::new(16384, 16));
        assert_eq!(v.apps[0].containers, vec![ContainerIdx(0), ContainerIdx(1)]);
        let id = v.containers[1].id;
        assert_eq!(v.container_by_id(&id), Some(ContainerIdx(1)));
        assert_eq!(v.queue_by_path("root.b"), Some(QueueIdx(2)));
        assert_eq!(v.queues[1].name(), "a");
    }

    #[test]
    fn view_rejects_dangling_references() {
        let bad_parent = vec![queue("root", Some(0))];
        assert!(matches!(
            ClusterView::new(bad_parent, vec![], vec![], vec![]),
            Err(ViewError::BadQueueParent { .. })
        ));
        assert_eq!(
            ClusterView::new(vec![], vec![], vec![], vec![]),
            Err(ViewError::NoQueues)
        );
        let r = ClusterView::new(
            vec![queue("root", None)],
            vec![app(1, 0, 0)],
            vec![],
            vec![container(1, 1, 3, ContainerState::Running)],
        );
        assert!(matches!(
            r,
            Err(ViewError::BadContainerRef { what: "node", .. })
        ));
        let r = ClusterView::new(
            vec![queue("root", None)],
            vec![app(1, 0, 0), app(1, 0, 0)],
            vec![],
            vec![],
        );
        assert!(matches!(r, Err(ViewError::Duplicate { .. })));
    }

    #[test]
    fn classification_order() {
        let tags = vec!["x".to_string(), "preemptor.class=short".to_string()];
        assert_eq!(
            classify(Some(JobClass::Long), &tags, None, 90.0),
            JobClass::Long
        );
        assert_eq!(classify(None, &tags, Some(1000.0), 90.0), JobClass::Short);
        assert_eq!(classify(None, &[], Some(10.0), 90.0), JobClass::Short);
        assert_eq!(classify(None, &[], Some(100.0), 90.0), JobClass::Long);
        assert_eq!(classify(None, &[], Some(f64::NAN), 90.0), JobClass::Long);
        assert_eq!(classify(None, &[], None, 90.0), JobClass::Long);
    }

    #[test]
    fn policy_names_parse() {
        for p in PolicyKind::ALL {
            assert_eq!(p.name().parse::<PolicyKind>().unwrap(), p);
        }
        let e = "gracefull".parse::<PolicyKind>().unwrap_err();
        assert!(e.contains("graceful"), "{e}");
    }
}
