//! The cluster model every policy decides on: queues, applications, containers and nodes.
//!
//! Pure data. The controller builds a [`ClusterView`] from the RM's REST API and the agents'
//! reports; the simulator builds one from its own state. Entities refer to each other by
//! dense indices so that a view of 200,000 containers is a few flat vectors.

pub mod builder;
pub mod ids;
mod journal;
mod model;
mod patch;

use serde::Serialize;

pub use ids::{ApplicationAttemptId, ApplicationId, ContainerId, IdError, IdHasher, IdMap, NodeId};
pub use journal::{ContainerMove, JournalMark, LineageMark};
use journal::{Journal, Lineage};
pub use model::*;
use patch::Totals;

use crate::resources::{Limits, Resource};

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
/// every parent before its children. Only [`ClusterView::new`] builds one and only the
/// in-place changes of patch.rs change one, so the derived fields always agree with the
/// entities: callers read the entities through slices.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClusterView {
    queues: Vec<Queue>,
    apps: Vec<App>,
    nodes: Vec<Node>,
    containers: Vec<Container>,
    /// Sum of the nodes' physical capacity.
    capacity: Resource,
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
/// changes and clones keep it, as they never add, drop or reorder nodes. State kept per
/// node between ticks (LAS timers) stays laid out right while the layout is the same.
#[derive(Clone, Debug, Default)]
struct NodeLayout(Lineage);

/// Views compare by what they show, not by which one was built first.
impl PartialEq for NodeLayout {
    fn eq(&self, _: &Self) -> bool {
        true
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
            view.link(ContainerIdx(i as u32), Totals::Later)?;
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

    /// Queues in pre-order: the root first, every parent before its children.
    pub fn queues(&self) -> &[Queue] {
        &self.queues
    }

    pub fn apps(&self) -> &[App] {
        &self.apps
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn containers(&self) -> &[Container] {
        &self.containers
    }

    /// Sum of the nodes' physical capacity.
    pub fn capacity(&self) -> Resource {
        self.capacity
    }

    /// The entities, for building a changed view with [`ClusterView::new`].
    pub fn into_parts(self) -> (Vec<Queue>, Vec<App>, Vec<Node>, Vec<Container>) {
        (self.queues, self.apps, self.nodes, self.containers)
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
    pub fn node_layout(&self) -> LineageMark {
        self.layout.0.mark()
    }

    /// Whether `mark` is of this view's [`ClusterView::node_layout`].
    pub fn has_node_layout(&self, mark: &LineageMark) -> bool {
        self.layout.0.is(mark)
    }

    /// Where the node journal stands now; pass it to
    /// [`ClusterView::nodes_changed_since`] at the next look.
    pub fn journal_mark(&self) -> JournalMark {
        self.journal.mark()
    }

    /// The nodes changed in place since `mark` was taken of this view (some listed
    /// twice), or None when that is not known: the mark is of another view (a clone or
    /// one built anew), or the changes since were cleared.
    pub fn nodes_changed_since(&self, mark: &JournalMark) -> Option<&[u32]> {
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
    pub fn containers_moved_since(&self, mark: &JournalMark) -> Option<&[ContainerMove]> {
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
