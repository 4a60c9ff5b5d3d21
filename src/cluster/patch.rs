//! In-place changes to a [`ClusterView`], for a caller that keeps one view across
//! ticks: the simulator, whose cluster changes by a few containers between ticks that
//! each read thousands. Every change keeps the derived fields (usage and demand up the
//! queue tree, per-node and per-application lists, the id index, the containers below
//! their allocation) as [`ClusterView::new`] derives them, at a cost independent of
//! the cluster's size. Two things differ from a view built anew:
//! - removing a container moves the last container into its index, and the last entry
//!   of its application's and node's lists into its place there, so lists are in no
//!   particular order;
//! - [`ClusterView::containers_oldest_first`] turns false once a removal disturbs an
//!   application's list, even if it happens to be sorted (readers then sort).

use super::{
    App, AppIdx, BelowAllocation, ClusterView, Container, ContainerIdx, ContainerMove,
    ContainerState, Limits, Millis, NodeIdx, Partition, QueueIdx, ResourceRequest, ViewError,
    id_hash,
};
use crate::resources::Resource;

/// When [`ClusterView::link`] counts a container's allocation in the totals.
#[derive(Clone, Copy, Debug)]
pub(super) enum Totals {
    /// At once: on its node, its application, every queue above it and the free room.
    Now,
    /// On its node, application and own queue only: building a view rolls the queues
    /// and the free room up once, after every container.
    Later,
}

/// Whether [`ClusterView::hold`] starts or stops counting a live container's allocation.
#[derive(Clone, Copy, Debug)]
enum Hold {
    Count,
    Uncount,
}

impl ClusterView {
    /// Add an application; its container list is derived, so whatever it holds is
    /// dropped.
    pub fn add_app(&mut self, mut app: App) -> Result<AppIdx, ViewError> {
        if app.queue.get() >= self.queues.len() {
            return Err(ViewError::BadAppQueue {
                app: app.id,
                queue: app.queue.0,
            });
        }
        if self.app_index.contains_key(&app.id) {
            return Err(ViewError::Duplicate {
                what: "application",
                id: app.id.to_string(),
            });
        }
        let i = self.apps.len() as u32;
        app.containers.clear();
        self.roll_up(app.queue, Resource::ZERO, app.pending());
        self.app_index.insert(app.id, i);
        self.apps.push(app);
        self.oldest_first.push(true);
        self.app_used.push(Resource::ZERO);
        Ok(AppIdx(i))
    }

    /// Remove an application that has no containers left in the view. The last
    /// application moves into its index.
    pub fn remove_app(&mut self, i: AppIdx) -> Result<App, ViewError> {
        let app = self.apps.get(i.get()).ok_or(ViewError::NotInView {
            what: "application",
            index: i.0,
        })?;
        if !app.containers.is_empty() {
            return Err(ViewError::AppNotEmpty {
                app: app.id,
                containers: app.containers.len(),
            });
        }
        let (queue, pending) = (app.queue, app.pending());
        // With no containers it holds nothing: only its demand leaves the queues.
        self.unroll(queue, Resource::ZERO, pending);
        let app = self.apps.swap_remove(i.get());
        self.oldest_first.swap_remove(i.get());
        self.app_used.swap_remove(i.get());
        self.app_index.remove(&app.id);
        if let Some(moved) = self.apps.get(i.get()) {
            self.app_index.insert(moved.id, i.0);
            for &c in &moved.containers {
                self.containers[c.get()].app = i;
                if let Some(p) = self.below_at(c) {
                    self.below_allocation_facts[p].app = i;
                }
            }
        }
        Ok(app)
    }

    /// What changes while an application runs: the queue it counts against, its
    /// progress and its outstanding requests.
    pub fn set_app_demand(
        &mut self,
        i: AppIdx,
        queue: QueueIdx,
        progress: f64,
        requests: &[ResourceRequest],
        pending_since_ms: Option<Millis>,
    ) -> Result<(), ViewError> {
        let n_queues = self.queues.len();
        let app = self.apps.get_mut(i.get()).ok_or(ViewError::NotInView {
            what: "application",
            index: i.0,
        })?;
        if queue.get() >= n_queues {
            return Err(ViewError::BadAppQueue {
                app: app.id,
                queue: queue.0,
            });
        }
        let (was, was_pending) = (app.queue, app.pending());
        app.queue = queue;
        app.progress = progress;
        app.requests.clear();
        app.requests.extend_from_slice(requests);
        app.pending_since_ms = pending_since_ms;
        let pending = app.pending();
        let used = self.app_used[i.get()];
        self.unroll(was, used, was_pending);
        self.roll_up(queue, used, pending);
        if was != queue {
            // A reduced container's queue decides whose accounting got its room back.
            for k in 0..self.apps[i.get()].containers.len() {
                let c = self.apps[i.get()].containers[k];
                if self.below_at(c).is_some() {
                    self.journal_node(self.containers[c.get()].node);
                }
            }
        }
        Ok(())
    }

    /// Add a container to its application and node.
    pub fn add_container(&mut self, c: Container) -> Result<ContainerIdx, ViewError> {
        let idx = ContainerIdx(self.containers.len() as u32);
        self.containers.push(c);
        if let Err(e) = self.link(idx, Totals::Now) {
            self.containers.pop();
            return Err(e);
        }
        self.journal_move(ContainerMove::Added);
        Ok(idx)
    }

    /// Hook container `idx`, already in the list, into the id index, its
    /// application's and node's lists and the totals. Containers are linked in index
    /// order, each after every lower one; on error nothing has changed. With
    /// [`Totals::Later`] (building a view), its allocation is added to its own queue only
    /// and the free room is left alone: the caller rolls both up once at the end.
    pub(super) fn link(&mut self, idx: ContainerIdx, totals: Totals) -> Result<(), ViewError> {
        let c = &self.containers[idx.get()];
        if c.app.get() >= self.apps.len() {
            return Err(ViewError::BadContainerRef {
                container: c.id,
                what: "application",
                index: c.app.0,
            });
        }
        if c.node.get() >= self.nodes.len() {
            return Err(ViewError::BadContainerRef {
                container: c.id,
                what: "node",
                index: c.node.0,
            });
        }
        let containers = &self.containers;
        match self.container_index.0.entry(
            id_hash(&c.id),
            |&j| containers[j.get()].id == c.id,
            |&j| id_hash(&containers[j.get()].id),
        ) {
            hashbrown::hash_table::Entry::Occupied(_) => {
                return Err(ViewError::Duplicate {
                    what: "container",
                    id: c.id.to_string(),
                });
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(idx);
            }
        }
        let (app, node, allocated) = (c.app, c.node, c.allocated);
        let listed = &mut self.apps[app.get()].containers;
        if let Some(&prev) = listed.last() {
            let p = &containers[prev.get()];
            if (p.started_ms, p.id) > (c.started_ms, c.id) {
                self.oldest_first[app.get()] = false;
            }
        }
        self.at_app.push(listed.len() as u32);
        listed.push(idx);
        let on_node = &mut self.nodes[node.get()].containers;
        self.at_node.push(on_node.len() as u32);
        on_node.push(idx);
        self.at_below.push(u32::MAX);
        if c.is_live() {
            if c.state != ContainerState::Running {
                self.push_below(idx, below(idx, c));
            }
            match totals {
                Totals::Later => {
                    self.nodes[node.get()].used += allocated;
                    self.app_used[app.get()] += allocated;
                    let q = self.apps[app.get()].queue;
                    self.queues[q.get()].used += allocated;
                }
                Totals::Now => self.hold(app, node, allocated, Hold::Count),
            }
        }
        Ok(())
    }

    /// Remove a container. The last container moves into its index.
    pub fn remove_container(&mut self, i: ContainerIdx) -> Result<Container, ViewError> {
        let Some(c) = self.containers.get(i.get()) else {
            return Err(ViewError::NotInView {
                what: "container",
                index: i.0,
            });
        };
        if let Ok(e) = self
            .container_index
            .0
            .find_entry(id_hash(&c.id), |&j| j == i)
        {
            e.remove();
        }
        if c.is_live() {
            let (app, node, allocated) = (c.app, c.node, c.allocated);
            self.hold(app, node, allocated, Hold::Uncount);
        }
        self.journal_node(self.containers[i.get()].node);
        self.drop_below(i);
        let (app, node) = (self.containers[i.get()].app, self.containers[i.get()].node);
        let p = self.at_app[i.get()] as usize;
        let listed = &mut self.apps[app.get()].containers;
        listed.swap_remove(p);
        if let Some(&m) = listed.get(p) {
            self.at_app[m.get()] = p as u32;
            self.oldest_first[app.get()] = false;
        }
        let p = self.at_node[i.get()] as usize;
        let on_node = &mut self.nodes[node.get()].containers;
        on_node.swap_remove(p);
        if let Some(&m) = on_node.get(p) {
            self.at_node[m.get()] = p as u32;
        }
        let last = ContainerIdx(self.containers.len() as u32 - 1);
        let removed = self.containers.swap_remove(i.get());
        self.at_app.swap_remove(i.get());
        self.at_node.swap_remove(i.get());
        self.at_below.swap_remove(i.get());
        if i != last {
            let m = &self.containers[i.get()];
            self.apps[m.app.get()].containers[self.at_app[i.get()] as usize] = i;
            self.nodes[m.node.get()].containers[self.at_node[i.get()] as usize] = i;
            if let Ok(mut e) = self
                .container_index
                .0
                .find_entry(id_hash(&m.id), |&j| j == last)
            {
                *e.get_mut() = i;
            }
            if let Some(p) = self.below_at(i) {
                self.below_allocation[p] = i;
                self.below_allocation_facts[p].container = i;
            }
        }
        self.journal_move(ContainerMove::Removed(i));
        Ok(removed)
    }

    /// A container's limits and state change: suspended, shrunk, resumed or killed.
    pub fn set_container_limits(
        &mut self,
        i: ContainerIdx,
        current: Limits,
        state: ContainerState,
        swapping: bool,
    ) -> Result<(), ViewError> {
        let Some(c) = self.containers.get_mut(i.get()) else {
            return Err(ViewError::NotInView {
                what: "container",
                index: i.0,
            });
        };
        let was_live = c.is_live();
        c.current = current;
        c.state = state;
        c.swapping = swapping;
        let (live, reduced) = (c.is_live(), c.state != ContainerState::Running);
        let (app, node, allocated) = (c.app, c.node, c.allocated);
        let fact = below(i, c);
        self.journal_node(node);
        if was_live != live {
            let hold = if live { Hold::Count } else { Hold::Uncount };
            self.hold(app, node, allocated, hold);
        }
        if live && reduced {
            match self.below_at(i) {
                Some(p) => self.below_allocation_facts[p] = fact,
                None => self.push_below(i, fact),
            }
        } else {
            self.drop_below(i);
        }
        Ok(())
    }

    /// Attained service: `ms` at `as_of_ms`, growing at `rate` vcore-ms per ms from
    /// then on. Nothing derives from it.
    pub fn set_attained_service(
        &mut self,
        i: ContainerIdx,
        ms: u64,
        as_of_ms: Millis,
        rate: f64,
    ) -> Result<(), ViewError> {
        match self.containers.get_mut(i.get()) {
            Some(c) => {
                c.attained_service_ms = ms;
                c.attained_as_of_ms = as_of_ms;
                c.attained_rate = rate;
                Ok(())
            }
            None => Err(ViewError::NotInView {
                what: "container",
                index: i.0,
            }),
        }
    }

    /// What the RM advertises for a node, and its partition.
    pub fn set_node(
        &mut self,
        i: NodeIdx,
        advertised: Resource,
        partition: Partition,
    ) -> Result<(), ViewError> {
        match self.nodes.get_mut(i.get()) {
            Some(n) => {
                let before = (n.capacity, n.advertised);
                if let Some(k) = self.node_shapes.get_mut(&before) {
                    *k -= 1;
                    if *k == 0 {
                        self.node_shapes.remove(&before);
                    }
                }
                *self
                    .node_shapes
                    .entry((n.capacity, advertised))
                    .or_default() += 1;
                // Saturating: a count gone wrong must not panic.
                let general = |p: Partition| usize::from(p == Partition::General);
                self.partitioned =
                    (self.partitioned + general(n.partition)).saturating_sub(general(partition));
                n.advertised = advertised;
                n.partition = partition;
                self.node_facts[i.get()].advertised = advertised;
                let listed = self.reshaped.binary_search(&i);
                match (super::is_reshaped(n), listed) {
                    (true, Err(p)) => self.reshaped.insert(p, i),
                    (false, Ok(p)) => {
                        self.reshaped.remove(p);
                    }
                    _ => {}
                }
                self.journal_node(i);
                Ok(())
            }
            None => Err(ViewError::NotInView {
                what: "node",
                index: i.0,
            }),
        }
    }

    /// Whether every derived field agrees with what [`ClusterView::new`] derives from
    /// the same queues, applications, nodes and containers, lists compared as sets
    /// (for debug assertions and tests).
    pub fn derived_agree(&self) -> bool {
        let Ok(fresh) = ClusterView::new(
            self.queues.clone(),
            self.apps.clone(),
            self.nodes.clone(),
            self.containers.clone(),
        ) else {
            return false;
        };
        let sorted = |v: &[ContainerIdx]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v
        };
        let lists_agree = |a: &[ContainerIdx], b: &[ContainerIdx], at: &[u32]| {
            sorted(a) == sorted(b)
                && a.iter()
                    .enumerate()
                    .all(|(p, c)| at.get(c.get()) == Some(&(p as u32)))
        };
        let apps_agree = self
            .apps
            .iter()
            .zip(&fresh.apps)
            .enumerate()
            .all(|(i, (a, b))| {
                lists_agree(&a.containers, &b.containers, &self.at_app)
                    && self.app_index.get(&a.id) == Some(&(i as u32))
                    && (!self.oldest_first[i] || fresh.oldest_first[i] || sorted_by_age(self, a))
            });
        let nodes_agree = self.nodes.iter().zip(&fresh.nodes).all(|(a, b)| {
            a.used == b.used && lists_agree(&a.containers, &b.containers, &self.at_node)
        });
        let queues_agree =
            self.queues.iter().zip(&fresh.queues).all(|(a, b)| {
                a.used == b.used && a.pending == b.pending && a.children == b.children
            });
        let indexed = self
            .containers
            .iter()
            .enumerate()
            .all(|(i, c)| self.container_by_id(&c.id) == Some(ContainerIdx(i as u32)));
        apps_agree
            && nodes_agree
            && queues_agree
            && indexed
            && self.container_index.0.len() == self.containers.len()
            && self.app_index.len() == self.apps.len()
            && self.app_used == fresh.app_used
            && self.below_agrees(&fresh)
            && self.capacity == fresh.capacity
            && self.free == fresh.free
            && self.reshaped == fresh.reshaped
            && self.node_shapes == fresh.node_shapes
            && self.partitioned == fresh.partitioned
            && self.node_facts == fresh.node_facts
            && self.overfull == fresh.overfull
    }

    /// The same containers below their allocation with the same facts, in any order,
    /// each where `at_below` says.
    fn below_agrees(&self, fresh: &ClusterView) -> bool {
        let by_index = |v: &ClusterView| {
            let mut f = v.below_allocation_facts.clone();
            f.sort_unstable_by_key(|b| b.container);
            f
        };
        let placed = self.below_allocation.iter().enumerate().all(|(p, &c)| {
            self.below_at(c) == Some(p) && self.below_allocation_facts[p].container == c
        });
        let listed = self.at_below.iter().filter(|&&p| p != u32::MAX).count();
        placed
            && listed == self.below_allocation.len()
            && self.at_below.len() == self.containers.len()
            && by_index(self) == by_index(fresh)
    }

    /// Count a live container's allocation on its node, application and queues, or
    /// stop counting it.
    fn hold(&mut self, app: AppIdx, node: NodeIdx, allocated: Resource, hold: Hold) {
        let queue = self.apps[app.get()].queue;
        let n = &mut self.nodes[node.get()];
        self.free -= n.capacity.saturating_sub(n.used);
        match hold {
            Hold::Count => {
                n.used += allocated;
                self.app_used[app.get()] += allocated;
                self.roll_up(queue, allocated, Resource::ZERO);
            }
            Hold::Uncount => {
                n.used -= allocated;
                self.app_used[app.get()] -= allocated;
                self.unroll(queue, allocated, Resource::ZERO);
            }
        }
        let n = &self.nodes[node.get()];
        self.free += n.capacity.saturating_sub(n.used);
        self.node_facts[node.get()].used = n.used;
        self.mark_overfull(node.get());
        self.journal_node(node);
    }

    /// Add usage and demand to a queue and its ancestors.
    fn roll_up(&mut self, q: QueueIdx, used: Resource, pending: Resource) {
        let mut at = Some(q);
        while let Some(i) = at {
            let x = &mut self.queues[i.get()];
            x.used += used;
            x.pending += pending;
            at = x.parent;
        }
    }

    /// Take usage and demand off a queue and its ancestors.
    fn unroll(&mut self, q: QueueIdx, used: Resource, pending: Resource) {
        let mut at = Some(q);
        while let Some(i) = at {
            let x = &mut self.queues[i.get()];
            x.used -= used;
            x.pending -= pending;
            at = x.parent;
        }
    }

    /// Where `i` is listed below its allocation, if it is.
    fn below_at(&self, i: ContainerIdx) -> Option<usize> {
        self.at_below
            .get(i.get())
            .filter(|&&p| p != u32::MAX)
            .map(|&p| p as usize)
    }

    fn push_below(&mut self, i: ContainerIdx, fact: BelowAllocation) {
        self.at_below[i.get()] = self.below_allocation.len() as u32;
        self.below_allocation.push(i);
        self.below_allocation_facts.push(fact);
    }

    /// Unlist `i`; the last listed container moves into its place.
    fn drop_below(&mut self, i: ContainerIdx) {
        if let Some(p) = self.below_at(i) {
            self.below_allocation.swap_remove(p);
            self.below_allocation_facts.swap_remove(p);
            self.at_below[i.get()] = u32::MAX;
            if let Some(&m) = self.below_allocation.get(p) {
                self.at_below[m.get()] = p as u32;
            }
        }
    }
}

fn below(i: ContainerIdx, c: &Container) -> BelowAllocation {
    BelowAllocation {
        container: i,
        app: c.app,
        node: c.node,
        allocated: c.allocated,
        current: c.current,
        state: c.state,
        swapping: c.swapping,
    }
}

fn sorted_by_age(view: &ClusterView, a: &App) -> bool {
    a.containers.windows(2).all(|w| {
        let (p, c) = (view.container(w[0]), view.container(w[1]));
        (p.started_ms, p.id) <= (c.started_ms, c.id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tests::{app, node, queue};
    use crate::cluster::{ApplicationAttemptId, ApplicationId, ContainerId};

    fn container(app_id: u32, app: u32, n: u64, node: u32, started_ms: Millis) -> Container {
        Container {
            id: ContainerId::new(
                ApplicationAttemptId::new(ApplicationId::new(1, app_id), 1),
                0,
                n,
            ),
            app: AppIdx(app),
            node: NodeIdx(node),
            allocated: Resource::new(2048, 2),
            current: Limits::from(Resource::new(2048, 2)),
            state: ContainerState::Running,
            is_am: false,
            requested_ms: None,
            started_ms,
            attained_service_ms: 0,
            attained_rate: 0.0,
            attained_as_of_ms: 0,
            swapping: false,
            managed: true,
        }
    }

    fn empty_view() -> ClusterView {
        ClusterView::new(
            vec![
                queue("root", None),
                queue("root.a", Some(0)),
                queue("root.b", Some(0)),
            ],
            vec![],
            vec![node("n1:8041"), node("n2:8041")],
            vec![],
        )
        .unwrap()
    }

    #[test]
    fn patched_view_keeps_usage_lists_and_index_as_a_rebuild_would() {
        let mut v = empty_view();
        let a = v.add_app(app(1, 1, 3)).unwrap();
        let b = v.add_app(app(2, 2, 0)).unwrap();
        assert_eq!(v.queues[1].pending, Resource::new(3072, 3));
        assert_eq!(v.queues[0].pending, Resource::new(3072, 3));
        let c0 = v.add_container(container(1, a.0, 2, 0, 10)).unwrap();
        let c1 = v.add_container(container(1, a.0, 3, 1, 20)).unwrap();
        let c2 = v.add_container(container(2, b.0, 2, 1, 30)).unwrap();
        assert!(v.derived_agree());
        assert_eq!(v.queues[1].used, Resource::new(4096, 4));
        assert_eq!(v.queues[0].used, Resource::new(6144, 6));
        assert_eq!(v.nodes[1].used, Resource::new(4096, 4));
        assert!(v.containers_oldest_first(a));

        v.set_container_limits(c2, Limits::MIN_FOOTPRINT, ContainerState::Suspended, true)
            .unwrap();
        v.set_container_limits(c1, Limits::MIN_FOOTPRINT, ContainerState::Suspended, false)
            .unwrap();
        // Listed in the order they went below their allocation.
        assert_eq!(v.below_allocation(), &[c2, c1]);
        assert!(v.below_allocation_facts()[0].swapping);
        assert!(!v.below_allocation_facts()[1].swapping);
        // Killed: listed, but no longer counted, and no longer below its allocation.
        v.set_container_limits(c1, Limits::MIN_FOOTPRINT, ContainerState::Killed, false)
            .unwrap();
        assert_eq!(v.below_allocation(), &[c2]);
        assert_eq!(v.queues[1].used, Resource::new(2048, 2));
        assert!(v.derived_agree());

        // Removing the first container moves the last (suspended, app b) into index 0.
        let gone = v.remove_container(c0).unwrap();
        assert_eq!(gone.started_ms, 10);
        let moved = v.containers[0].id;
        assert_eq!(v.container_by_id(&moved), Some(ContainerIdx(0)));
        assert_eq!(v.below_allocation(), &[ContainerIdx(0)]);
        assert_eq!(v.below_allocation_facts()[0].container, ContainerIdx(0));
        assert_eq!(v.container_by_id(&gone.id), None);
        assert!(v.derived_agree());

        // Moving an application to another queue moves its usage and demand.
        let r = [ResourceRequest {
            capability: Resource::new(1024, 1),
            num_containers: 1,
        }];
        v.set_app_demand(b, QueueIdx(1), 0.5, &r, Some(5)).unwrap();
        assert_eq!(v.queues[2].used, Resource::ZERO);
        assert_eq!(v.queues[1].used, Resource::new(2048, 2));
        assert_eq!(v.queues[1].pending, Resource::new(4096, 4));
        assert!(v.derived_agree());

        // Application a empties and goes; b moves into its index.
        let killed = v.container_by_id(&container(1, 0, 3, 1, 20).id).unwrap();
        v.remove_container(killed).unwrap();
        v.remove_app(a).unwrap();
        assert_eq!(v.apps.len(), 1);
        assert_eq!(v.apps[0].id, ApplicationId::new(1, 2));
        assert_eq!(v.containers[0].app, AppIdx(0));
        assert_eq!(v.below_allocation_facts()[0].app, AppIdx(0));
        assert_eq!(v.queues[1].pending, Resource::new(1024, 1));
        assert!(v.derived_agree());
    }

    #[test]
    fn overfull_nodes_and_the_node_layout_follow_changes() {
        let mut v = empty_view();
        let layout = v.node_layout();
        let a = v.add_app(app(1, 1, 0)).unwrap();
        // Four (2 GB, 2 vcores) containers fill n2's (8 GB, 8 vcores); a fifth is more.
        let cs: Vec<ContainerIdx> = (2..7)
            .map(|n| v.add_container(container(1, a.0, n, 1, 0)).unwrap())
            .collect();
        assert_eq!(v.overfull_nodes(), &[0b10]);
        v.set_container_limits(cs[0], Limits::MIN_FOOTPRINT, ContainerState::Killed, false)
            .unwrap();
        assert_eq!(v.overfull_nodes(), &[0]);
        v.set_container_limits(
            cs[0],
            Limits::MIN_FOOTPRINT,
            ContainerState::Suspended,
            false,
        )
        .unwrap();
        assert_eq!(v.overfull_nodes(), &[0b10], "allocated while suspended");
        v.remove_container(cs[1]).unwrap();
        assert_eq!(v.overfull_nodes(), &[0]);
        assert!(v.derived_agree());
        // In-place changes and clones keep the layout; a view built anew gets its own.
        v.set_node(NodeIdx(0), Resource::new(16384, 16), Partition::Short)
            .unwrap();
        assert_eq!(v.node_layout(), layout);
        assert_eq!(v.clone().node_layout(), layout);
        assert_ne!(empty_view().node_layout(), layout);
    }

    #[test]
    fn the_node_journal_lists_what_changed_and_says_when_it_cannot() {
        let mut v = empty_view();
        let start = v.journal_mark();
        assert_eq!(v.nodes_changed_since(&start), Some(&[][..]));
        let a = v.add_app(app(1, 1, 0)).unwrap();
        assert_eq!(
            v.nodes_changed_since(&start),
            Some(&[][..]),
            "no node holds more"
        );
        let c = v.add_container(container(1, a.0, 2, 1, 0)).unwrap();
        v.clear_journals();
        // A mark from before the clear no longer knows; one taken now does.
        assert_eq!(v.nodes_changed_since(&start), None);
        let mark = v.journal_mark();
        v.set_container_limits(c, Limits::MIN_FOOTPRINT, ContainerState::Suspended, false)
            .unwrap();
        assert_eq!(v.nodes_changed_since(&mark), Some(&[1][..]));
        let mark = v.journal_mark();
        // Its application moves queue: whose room the suspension gave back changes.
        v.set_app_demand(a, QueueIdx(2), 0.0, &[], None).unwrap();
        v.set_node(NodeIdx(0), Resource::new(9000, 9), Partition::General)
            .unwrap();
        assert_eq!(v.nodes_changed_since(&mark), Some(&[1, 0][..]));
        let mark = v.journal_mark();
        v.add_container(container(1, a.0, 3, 0, 0)).unwrap();
        v.remove_container(c).unwrap();
        let listed = v.nodes_changed_since(&mark).unwrap();
        assert!(listed.contains(&0) && listed.contains(&1), "{listed:?}");
        // A clone changes apart from its original, so marks do not carry over.
        assert_eq!(v.clone().nodes_changed_since(&v.journal_mark()), None);
        assert_eq!(empty_view().nodes_changed_since(&mark), None);
        // A journal nobody clears stays small, and readers then start over.
        let mark = v.journal_mark();
        for _ in 0..1100 {
            v.set_node(NodeIdx(0), Resource::new(9000, 9), Partition::General)
                .unwrap();
        }
        assert_eq!(v.nodes_changed_since(&mark), None);
        assert!(v.nodes_changed_since(&v.journal_mark()).is_some());
    }

    #[test]
    fn the_container_journal_replays_the_list_as_it_changed() {
        // A list laid out as the containers were at a mark, replayed, is laid out as
        // they are now: what the policy's memos rely on.
        let replay = |list: &mut Vec<u64>, moves: &[ContainerMove], added: &[u64]| {
            let mut added = added.iter();
            for m in moves {
                match m {
                    ContainerMove::Added => list.push(*added.next().unwrap()),
                    ContainerMove::Removed(i) => {
                        list.swap_remove(i.get());
                    }
                }
            }
        };
        let ids = |v: &ClusterView| v.containers.iter().map(|c| c.id.id).collect::<Vec<_>>();
        let mut v = empty_view();
        let a = v.add_app(app(1, 1, 0)).unwrap();
        for n in 1..6 {
            v.add_container(container(1, a.0, n, (n % 2) as u32, 0))
                .unwrap();
        }
        let mut list = ids(&v);
        let mark = v.container_mark();
        v.remove_container(ContainerIdx(1)).unwrap();
        v.add_container(container(1, a.0, 6, 0, 0)).unwrap();
        // The last one removed: nothing moves into its place.
        v.remove_container(ContainerIdx(4)).unwrap();
        v.remove_container(ContainerIdx(0)).unwrap();
        // Refused changes are not journalled.
        assert!(v.add_container(container(1, a.0, 3, 0, 0)).is_err());
        assert!(v.remove_container(ContainerIdx(9)).is_err());
        let moves = v.containers_moved_since(&mark).unwrap();
        assert_eq!(
            moves,
            &[
                ContainerMove::Removed(ContainerIdx(1)),
                ContainerMove::Added,
                ContainerMove::Removed(ContainerIdx(4)),
                ContainerMove::Removed(ContainerIdx(0)),
            ]
        );
        replay(&mut list, moves, &[6]);
        assert_eq!(list, ids(&v));
        // Cleared, a clone or another view: the reader must lay its list out anew.
        v.clear_journals();
        assert_eq!(v.containers_moved_since(&mark), None);
        assert_eq!(v.containers_moved_since(&v.container_mark()), Some(&[][..]));
        assert_eq!(v.clone().containers_moved_since(&v.container_mark()), None);
        assert_eq!(
            empty_view().containers_moved_since(&v.container_mark()),
            None
        );
        // The node journal's marks are not the container journal's.
        assert_eq!(v.containers_moved_since(&v.journal_mark()), None);
        // Nobody reading: it stays small.
        let mark = v.container_mark();
        for n in 10..1100 {
            let c = v.add_container(container(1, a.0, n, 0, 0)).unwrap();
            v.remove_container(c).unwrap();
        }
        assert_eq!(v.containers_moved_since(&mark), None);
    }

    #[test]
    fn bad_changes_are_refused_and_change_nothing() {
        let mut v = empty_view();
        assert!(matches!(
            v.add_app(app(1, 7, 0)),
            Err(ViewError::BadAppQueue { queue: 7, .. })
        ));
        let a = v.add_app(app(1, 1, 2)).unwrap();
        assert!(matches!(
            v.add_app(app(1, 2, 0)),
            Err(ViewError::Duplicate { .. })
        ));
        assert!(matches!(
            v.add_container(container(1, 0, 2, 5, 0)),
            Err(ViewError::BadContainerRef { what: "node", .. })
        ));
        assert!(matches!(
            v.add_container(container(1, 3, 2, 0, 0)),
            Err(ViewError::BadContainerRef {
                what: "application",
                ..
            })
        ));
        let c = v.add_container(container(1, 0, 2, 0, 0)).unwrap();
        assert!(matches!(
            v.add_container(container(1, 0, 2, 1, 0)),
            Err(ViewError::Duplicate { .. })
        ));
        assert!(matches!(
            v.remove_app(a),
            Err(ViewError::AppNotEmpty { containers: 1, .. })
        ));
        assert!(matches!(
            v.set_app_demand(a, QueueIdx(9), 1.0, &[], None),
            Err(ViewError::BadAppQueue { queue: 9, .. })
        ));
        assert!(matches!(
            v.remove_container(ContainerIdx(4)),
            Err(ViewError::NotInView { .. })
        ));
        assert!(v.set_attained_service(ContainerIdx(4), 1, 0, 0.0).is_err());
        assert!(
            v.set_node(NodeIdx(2), Resource::ZERO, Partition::Short)
                .is_err()
        );
        assert_eq!(v.apps[0].requests[0].num_containers, 2);
        assert_eq!(v.apps[0].queue, QueueIdx(1));
        assert_eq!(v.containers.len(), 1);
        assert_eq!(v.container_by_id(&v.containers[0].id), Some(c));
        assert!(v.derived_agree());
    }

    /// Many random changes, each followed by a comparison with a rebuild.
    #[test]
    fn random_changes_agree_with_a_rebuild() {
        let mut v = empty_view();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n.max(1)
        };
        let mut apps_made = 0;
        let mut numbers = 0;
        for _ in 0..2000 {
            match next(8) {
                0 => {
                    apps_made += 1;
                    let q = 1 + next(2) as u32;
                    v.add_app(app(apps_made, q, next(4) as u32)).unwrap();
                }
                1 | 2 if !v.apps.is_empty() => {
                    let a = next(v.apps.len() as u64) as u32;
                    numbers += 1;
                    let id = v.apps[a as usize].id.id;
                    let c = container(id, a, numbers, next(2) as u32, next(100));
                    v.add_container(c).unwrap();
                }
                3 if !v.containers.is_empty() => {
                    let c = ContainerIdx(next(v.containers.len() as u64) as u32);
                    let state = [
                        ContainerState::Running,
                        ContainerState::Suspended,
                        ContainerState::Shrunk,
                        ContainerState::Killed,
                    ][next(4) as usize];
                    let swapping = next(2) == 0;
                    v.set_container_limits(c, Limits::MIN_FOOTPRINT, state, swapping)
                        .unwrap();
                }
                4 if !v.containers.is_empty() => {
                    let c = ContainerIdx(next(v.containers.len() as u64) as u32);
                    v.remove_container(c).unwrap();
                }
                5 if !v.apps.is_empty() => {
                    let a = AppIdx(next(v.apps.len() as u64) as u32);
                    if v.apps[a.get()].containers.is_empty() {
                        v.remove_app(a).unwrap();
                    } else {
                        assert!(v.remove_app(a).is_err());
                    }
                }
                6 if !v.apps.is_empty() => {
                    let a = AppIdx(next(v.apps.len() as u64) as u32);
                    let r = [ResourceRequest {
                        capability: Resource::new(512, 1),
                        num_containers: next(5) as u32,
                    }];
                    v.set_app_demand(a, QueueIdx(1 + next(2) as u32), 0.3, &r, None)
                        .unwrap();
                }
                7 => {
                    let n = NodeIdx(next(v.nodes.len() as u64) as u32);
                    let advertised = Resource::new(1024 * (1 + next(3)), 1 + next(3) as u32);
                    let partition = [Partition::General, Partition::Short][next(2) as usize];
                    v.set_node(n, advertised, partition).unwrap();
                    let pairs: Vec<_> = v.node_shapes().collect();
                    assert!(pairs.contains(&(v.nodes[n.get()].capacity, advertised)));
                }
                _ => {}
            }
            assert!(v.derived_agree());
        }
        assert!(v.containers.len() > 10, "the walk should leave containers");
    }
}
