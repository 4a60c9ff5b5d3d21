//! A central ResourceManager as YARN runs it: leaf queues with guaranteed and maximum
//! capacity, FIFO order within a queue, and the most under-served queue first (the
//! capacity scheduler). `fifo` is one queue; `reserve` is BIG-C's static reservation;
//! `capacity+<policy>` adds a preemption policy from src/policy/ that runs every
//! monitoring interval on a [`ClusterView`](crate::cluster::ClusterView) of the
//! simulated cluster.
//!
//! The RM places a container on the first node in its list with room, as heartbeats in
//! a fixed order would. Under LAS it runs as an operator would configure YARN for
//! Kairos: multi-node placement by least allocation (`ResourceUsageMultiNodeLookupPolicy`,
//! Kairos' "fewest containers"), and queue limits against the N+Q capacity every node
//! advertises, which is what YARN computes them against.

use std::collections::{BTreeSet, VecDeque};

use crate::cluster::{JobClass, Partition};
use crate::policy;
use crate::resources::Resource;
use crate::sim::bridge::{PolicyBridge, SimAction, ViewBuilder};
use crate::sim::engine::{Core, Released, Scheduler, SlotSet, TaskRef};
use crate::sim::sched::quiet::{self, NodeTally, QuietCheck};
use crate::sim::sched::{PolicyTicks, QueueSpec};
use crate::sim::workload::{MICROS_PER_MILLI, Time};

#[derive(Clone, Copy, Debug)]
pub(crate) enum Msg {
    /// The client's submission reached the RM.
    Submit(u32),
    /// The RM's container allocation reached the NodeManager.
    Launch { job: u32, task: TaskRef, node: u32 },
    /// A NodeManager heartbeat told the RM a container is gone.
    Freed {
        node: u32,
        job: u32,
        shape: Resource,
    },
    /// The preemption monitor's tick.
    Monitor,
}

pub(crate) struct Leaf {
    pub spec: QueueSpec,
    pub guaranteed: Resource,
    pub maximum: Resource,
    pub used: Resource,
    /// Jobs with pending tasks, in submission order.
    pub apps: VecDeque<u32>,
}

pub(crate) struct Central {
    pub leaves: Vec<Leaf>,
    /// Leaf of every workload queue that names one, and the leaf of each job class.
    by_name: Vec<Option<u16>>,
    by_class: [u16; 2],
    pub advertised: Vec<Resource>,
    pub allocated: Vec<Resource>,
    /// Jobs currently in some leaf's `apps`.
    queued: Vec<bool>,
    /// Scratch for `schedule`: leaves that cannot allocate more this pass.
    blocked: Vec<bool>,
    /// Nodes with some room left.
    room: SlotSet,
    /// Under least-allocation placement, the nodes of `room` by (allocated vcores,
    /// allocated memory, node), and the key each is filed under.
    least_used: Option<LeastUsed>,
    /// Per node, whether it advertises other than its capacity (bit 0) and whether its
    /// allocations exceed what it advertises (bit 1); how many do each; and how many
    /// nodes are outside the general partition. The idle check reads these counts
    /// instead of walking the nodes.
    node_flags: Vec<u8>,
    mismatched: usize,
    overfull: usize,
    partitioned: usize,
    cluster: Resource,
    policy: Option<(PolicyBridge, Time)>,
    view: ViewBuilder,
    /// Skips ticks whose plan is provably empty (see `quiet`).
    quiet: Option<QuietCheck>,
    allocations: u64,
    ticks: u64,
    skipped: u64,
    actions: u64,
}

impl Central {
    pub fn new(
        core: &Core<'_, Msg>,
        leaves: Vec<QueueSpec>,
        policy: Option<(PolicyBridge, Time)>,
    ) -> Central {
        let n = core.nodes.len();
        // The simulated cluster's applications carry no tags: the settings alone say
        // whether LAS may run.
        let las = policy
            .as_ref()
            .map(|(b, _)| b.settings())
            .filter(|s| policy::may_run_las(s));
        // YARN's queue limits follow what the nodes advertise. LAS's N+Q admission is
        // advertised for good, so the limits count it from the start; room other
        // policies reclaim is advertised for a round and is not counted (see
        // docs/simulator.md, "capacity+las").
        let cluster = core.nodes.iter().fold(Resource::ZERO, |a, x| {
            a + las.map_or(x.capacity, |s| policy::las::admission(x.capacity, &s.las))
        });
        let leaves: Vec<Leaf> = leaves
            .into_iter()
            .map(|spec| Leaf {
                guaranteed: cluster.scale(spec.capacity),
                maximum: cluster.scale(spec.maximum),
                spec,
                used: Resource::ZERO,
                apps: VecDeque::new(),
            })
            .collect();
        // A job goes to the leaf named like its workload queue, else to the leaf of its
        // class, else to the first leaf.
        let by_name: Vec<Option<u16>> = core
            .wl
            .queues
            .iter()
            .map(|name| {
                leaves
                    .iter()
                    .position(|l| {
                        l.spec.name == *name || l.spec.name.rsplit('.').next() == Some(name)
                    })
                    .map(|i| i as u16)
            })
            .collect();
        let by_class = [JobClass::Short, JobClass::Long].map(|c| {
            leaves
                .iter()
                .position(|l| l.spec.class == Some(c))
                .unwrap_or(0) as u16
        });
        let quiet = policy
            .as_ref()
            .filter(|(b, _)| quiet::eligible(b.settings()))
            .map(|_| QuietCheck::new(core, PolicyTicks::default()));
        let mut room = SlotSet::default();
        for node in 0..n as u32 {
            room.insert(node);
        }
        let least_used = las.is_some().then(|| LeastUsed {
            order: (0..n as u32).map(|i| (0, 0, i)).collect(),
            filed: vec![Some((0, 0)); n],
        });
        Central {
            blocked: vec![false; leaves.len()],
            leaves,
            by_name,
            by_class,
            queued: vec![false; core.wl.jobs.len()],
            advertised: core.nodes.iter().map(|x| x.capacity).collect(),
            allocated: vec![Resource::ZERO; n],
            room,
            least_used,
            node_flags: vec![0; n],
            mismatched: 0,
            overfull: 0,
            partitioned: 0,
            cluster,
            policy,
            view: ViewBuilder::new(core.nodes.len()),
            quiet,
            allocations: 0,
            ticks: 0,
            skipped: 0,
            actions: 0,
        }
    }

    pub fn set_policy_ticks(&mut self, core: &Core<'_, Msg>, ticks: PolicyTicks) {
        self.quiet = match (&self.policy, ticks) {
            (_, PolicyTicks::Every) | (None, _) => None,
            (Some((b, _)), t) => quiet::eligible(b.settings()).then(|| QuietCheck::new(core, t)),
        };
    }

    fn leaf_of(&self, core: &Core<'_, Msg>, job: u32) -> usize {
        leaf_of(core, &self.by_name, self.by_class, job)
    }

    fn free(&self, node: u32) -> Resource {
        self.advertised[node as usize].saturating_sub(self.allocated[node as usize])
    }

    /// Call after a node's allocations or advertised capacity change.
    fn update_room(&mut self, core: &Core<'_, Msg>, node: u32) {
        let i = node as usize;
        let old = self.node_flags[i];
        let new = (self.advertised[i] != core.nodes[i].capacity) as u8
            | ((!self.allocated[i].fits_in(&self.advertised[i])) as u8) << 1;
        if new != old {
            self.node_flags[i] = new;
            self.mismatched = self.mismatched + (new & 1) as usize - (old & 1) as usize;
            self.overfull = self.overfull + (new >> 1) as usize - (old >> 1) as usize;
        }
        let f = self.free(node);
        let has = f.vcores > 0 && f.memory_mb > 0;
        if let Some(l) = &mut self.least_used {
            l.refile(node, has.then_some(self.allocated[i]));
        }
        if has {
            self.room.insert(node);
        } else {
            self.room.remove(node);
        }
    }

    /// A node the shape fits on, or `None`: the least allocated one, or the first in
    /// the list. Short-partition nodes (Dice) take no long containers.
    fn find_node(&self, core: &Core<'_, Msg>, shape: Resource, class: JobClass) -> Option<u32> {
        let fits = |&n: &u32| {
            shape.fits_in(&self.free(n))
                && !(class == JobClass::Long
                    && core.nodes[n as usize].partition == Partition::Short)
        };
        match &self.least_used {
            Some(l) => l.order.iter().map(|&(_, _, n)| n).find(fits),
            None => self.room.items().iter().copied().find(fits),
        }
    }

    /// The capacity scheduler's loop: hand out containers while some queue under its
    /// maximum has a pending container that fits somewhere.
    fn schedule(&mut self, core: &mut Core<'_, Msg>) {
        let mut blocked = std::mem::take(&mut self.blocked);
        blocked.iter_mut().for_each(|b| *b = false);
        self.allocate(core, &mut blocked);
        self.blocked = blocked;
    }

    fn allocate(&mut self, core: &mut Core<'_, Msg>, blocked: &mut [bool]) {
        loop {
            // Most under-served queue first: lowest used / guaranteed (dominant share).
            let mut best: Option<(f64, usize)> = None;
            for (i, l) in self.leaves.iter_mut().enumerate() {
                if blocked[i] {
                    continue;
                }
                while let Some(&j) = l.apps.front() {
                    if core.pending(j) > 0 {
                        break;
                    }
                    l.apps.pop_front();
                    self.queued[j as usize] = false;
                }
                if l.apps.is_empty() {
                    continue;
                }
                let g = l.guaranteed.dominant_share(&self.cluster).max(1e-9);
                let key = l.used.dominant_share(&self.cluster) / g;
                if best.is_none_or(|(b, _)| key < b) {
                    best = Some((key, i));
                }
            }
            let Some((_, qi)) = best else { return };
            let job = self.leaves[qi].apps[0];
            let Some(shape) = core.peek_shape(job) else {
                self.leaves[qi].apps.pop_front();
                self.queued[job as usize] = false;
                continue;
            };
            let leaf = &self.leaves[qi];
            if !(leaf.used + shape).fits_in(&leaf.maximum) {
                blocked[qi] = true;
                continue;
            }
            let class = core.wl.jobs[job as usize].class;
            let Some(node) = self.find_node(core, shape, class) else {
                blocked[qi] = true;
                continue;
            };
            let Some(task) = core.take_task(job) else {
                continue;
            };
            self.allocated[node as usize] += shape;
            self.leaves[qi].used += shape;
            self.update_room(core, node);
            self.allocations += 1;
            core.send(Msg::Launch { job, task, node });
        }
    }

    fn monitor(&mut self, core: &mut Core<'_, Msg>) {
        let Some((bridge, interval)) = &mut self.policy else {
            return;
        };
        let interval = *interval;
        self.ticks += 1;
        let quiet = match &mut self.quiet {
            Some(q) => {
                let (by_name, by_class) = (&self.by_name, self.by_class);
                let queue_of = |job: u32| leaf_of(core, by_name, by_class, job);
                let class_leaf = |job: u32| {
                    by_class[(core.wl.jobs[job as usize].class == JobClass::Long) as usize] as usize
                };
                q.set_kill_marks(bridge.kill_marks());
                let nodes = NodeTally {
                    advertised: &self.advertised,
                    mismatched: self.mismatched,
                    overfull: self.overfull,
                    partitioned: self.partitioned,
                    cluster: self.cluster,
                };
                let quiet = q.is_quiet(
                    core,
                    &self.leaves,
                    queue_of,
                    class_leaf,
                    &self.queued,
                    &nodes,
                    bridge.settings(),
                );
                if quiet && !q.verify {
                    self.skipped += 1;
                    if !core.all_done() {
                        core.after(interval, Msg::Monitor);
                    }
                    return;
                }
                quiet
            }
            None => false,
        };
        if let Err(e) = self.view.update(core, &self.leaves, &self.advertised) {
            core.abort(format!("building the cluster view: {e}"));
            return;
        }
        let Some(view) = self.view.view() else {
            core.abort("the cluster view was not built".to_string());
            return;
        };
        let actions = bridge.decide(view, &self.view, core.now / MICROS_PER_MILLI);
        let actions = match actions {
            Ok(a) => a,
            Err(e) => {
                core.abort(e);
                return;
            }
        };
        if quiet {
            self.skipped += 1;
            if !actions.is_empty() {
                core.abort(format!(
                    "a monitoring tick judged quiet would have acted: {actions:?}"
                ));
                return;
            }
        }
        let mut changed = false;
        for a in actions {
            self.actions += 1;
            match a {
                SimAction::Suspend { container, to } => core.reduce(container, to, true),
                SimAction::Shrink { container, to } => core.reduce(container, to, false),
                SimAction::Resume { container, to } => core.restore(container, to),
                SimAction::Kill { container } => core.kill(container),
                SimAction::SetNodeCapacity { node, advertised } => {
                    self.advertised[node as usize] = advertised;
                    self.view.node_changed(node);
                    self.update_room(core, node);
                    changed = true;
                }
                SimAction::SetNodePartition { node, partition } => {
                    let was = &mut core.nodes[node as usize].partition;
                    self.partitioned = self.partitioned
                        + (partition != Partition::General) as usize
                        - (*was != Partition::General) as usize;
                    *was = partition;
                    self.view.node_changed(node);
                    changed = true;
                }
            }
        }
        if changed {
            self.schedule(core);
        }
        if !core.all_done() {
            core.after(interval, Msg::Monitor);
        }
    }
}

impl Scheduler for Central {
    type Msg = Msg;

    fn start(&mut self, core: &mut Core<'_, Msg>) {
        if self.quiet.is_some() {
            core.track_holdings();
        }
        if let Some((_, interval)) = &self.policy {
            let first = core.wl.span().0 + *interval;
            core.at(first, Msg::Monitor);
        }
    }

    fn job_arrived(&mut self, core: &mut Core<'_, Msg>, job: u32) {
        core.send(Msg::Submit(job));
    }

    fn message(&mut self, core: &mut Core<'_, Msg>, msg: Msg) {
        match msg {
            Msg::Submit(job) => {
                let q = self.leaf_of(core, job);
                self.leaves[q].apps.push_back(job);
                self.queued[job as usize] = true;
                self.schedule(core);
            }
            Msg::Launch { job, task, node } => {
                core.launch(job, task, node);
            }
            Msg::Freed { node, job, shape } => {
                self.allocated[node as usize] -= shape;
                let q = self.leaf_of(core, job);
                self.leaves[q].used -= shape;
                self.update_room(core, node);
                // A killed task is pending again; its job may have left the queue.
                if core.pending(job) > 0 && !self.queued[job as usize] {
                    insert_by_arrival(&mut self.leaves[q].apps, job);
                    self.queued[job as usize] = true;
                }
                self.schedule(core);
            }
            Msg::Monitor => self.monitor(core),
        }
    }

    fn released(&mut self, core: &mut Core<'_, Msg>, r: Released) {
        core.send(Msg::Freed {
            node: r.node,
            job: r.job,
            shape: r.shape,
        });
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![("allocations", self.allocations)];
        if self.policy.is_some() {
            v.push(("policy ticks", self.ticks));
            v.push(("policy ticks provably idle", self.skipped));
            v.push(("policy actions", self.actions));
        }
        v
    }
}

fn leaf_of(core: &Core<'_, Msg>, by_name: &[Option<u16>], by_class: [u16; 2], job: u32) -> usize {
    let spec = &core.wl.jobs[job as usize];
    let leaf = by_name.get(spec.queue as usize).copied().flatten();
    leaf.unwrap_or(by_class[(spec.class == JobClass::Long) as usize]) as usize
}

/// Nodes with room by allocation, least first, then by index.
struct LeastUsed {
    order: BTreeSet<(u32, u64, u32)>,
    /// Per node, the allocation it is filed under in `order`, if it is there.
    filed: Vec<Option<(u32, u64)>>,
}

impl LeastUsed {
    /// File `node` under `allocated`, or take it out (`None`: no room left).
    fn refile(&mut self, node: u32, allocated: Option<Resource>) {
        let i = node as usize;
        if let Some((v, m)) = self.filed[i].take() {
            self.order.remove(&(v, m, node));
        }
        if let Some(a) = allocated {
            self.order.insert((a.vcores, a.memory_mb, node));
            self.filed[i] = Some((a.vcores, a.memory_mb));
        }
    }
}

/// Jobs are indexed in arrival order, so a resubmitted job goes back to its place.
fn insert_by_arrival(q: &mut VecDeque<u32>, job: u32) {
    let pos = q.partition_point(|&j| j < job);
    q.insert(pos, job);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PolicyKind;
    use crate::sim::SimSetup;
    use crate::sim::engine::EngineConfig;
    use crate::sim::sched::{SchedParams, SchedulerKind};
    use crate::sim::trace::{TraceOptions, load};
    use crate::sim::workload::SLOT;

    fn yahoo(jobs: usize) -> crate::sim::workload::Workload {
        let mut wl = load(
            &crate::sim::testutil::bundled_trace("yahoo_sub1.tr"),
            &TraceOptions::default(),
        )
        .unwrap();
        wl.jobs.truncate(jobs);
        wl
    }

    fn central(core: &Core<'_, Msg>, policy: PolicyKind) -> Central {
        let p = SchedParams::default();
        let kind = SchedulerKind::Capacity(policy);
        let bridge = PolicyBridge::new(policy, p.policy_settings(core.wl, SLOT));
        Central::new(
            core,
            p.leaves_for(kind),
            Some((bridge, p.monitoring_interval())),
        )
    }

    /// Under LAS queue limits count every node's N+Q admission and placement goes to
    /// the least allocated node; under other policies limits are physical and the
    /// first node with room takes the container.
    #[test]
    fn las_places_least_allocated_against_admitted_limits() {
        let wl = yahoo(50);
        let cfg = EngineConfig::new(10, SLOT);
        let core: Core<'_, Msg> = Core::new(&wl, &cfg).unwrap();
        let mut las = central(&core, PolicyKind::Las);
        // Q = 2 on one-core nodes: three slots each.
        assert_eq!(las.cluster, Resource::new(3 * 10 * 1024, 30));
        assert_eq!(las.leaves[0].maximum, Resource::new(30 * 1024, 30));
        let kill = central(&core, PolicyKind::Kill);
        assert_eq!(kill.cluster, Resource::new(10 * 1024, 10));
        assert!(kill.least_used.is_none());

        // Every node advertises three slots; nodes 0-3 hold two containers, 4-8 one
        // and node 9 none.
        for n in 0..10u32 {
            las.advertised[n as usize] = Resource::new(3 * 1024, 3);
            las.allocated[n as usize] = SLOT.scale(match n {
                0..=3 => 2.0,
                4..=8 => 1.0,
                _ => 0.0,
            });
            las.update_room(&core, n);
        }
        assert_eq!(las.find_node(&core, SLOT, JobClass::Long), Some(9));
        las.allocated[9] = SLOT;
        las.update_room(&core, 9);
        assert_eq!(las.find_node(&core, SLOT, JobClass::Long), Some(4));
        las.allocated[5] = Resource::ZERO;
        las.update_room(&core, 5);
        assert_eq!(las.find_node(&core, SLOT, JobClass::Short), Some(5));
        // Full nodes leave the order; a shape that fits nowhere finds nothing.
        for n in 0..10u32 {
            las.allocated[n as usize] = las.advertised[n as usize];
            las.update_room(&core, n);
        }
        assert_eq!(las.least_used.as_ref().map(|l| l.order.len()), Some(0));
        assert_eq!(las.find_node(&core, SLOT, JobClass::Short), None);
    }

    /// End to end: four one-core nodes run a long job's four 1000 s tasks when a short
    /// job of four 20 s tasks arrives. The capacity scheduler alone makes it wait for
    /// the long tasks to end; under LAS the nodes admit more, the RM spreads the short
    /// tasks one to a node, and each node suspends its long task (the most attained
    /// service) for the new one and resumes it once that ends.
    #[test]
    fn capacity_las_admits_and_time_shares_a_short_job() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("burst.tr");
        std::fs::write(&path, "0 4 1000 1000 1000 1000 1000\n10 4 20 20 20 20 20\n").unwrap();
        let opts = TraceOptions {
            cutoff_secs: Some(100.0),
            ..TraceOptions::default()
        };
        let wl = load(&path, &opts).unwrap();
        let mut params = SchedParams::default();
        // On four vcores the default round budget (10%) could suspend nothing, and the
        // long queue's 5% guarantee would keep its last vcore from being taken.
        params.policy.total_preemption_per_round = 1.0;
        params.queues = vec![
            QueueSpec::new("short", 1.0, 1.0, Some(JobClass::Short)),
            QueueSpec::new("long", 0.0, 1.0, Some(JobClass::Long)),
        ];
        let setup = SimSetup {
            engine: EngineConfig::new(4, SLOT),
            params,
        };
        let run =
            |p| crate::sim::simulate(&wl, &setup, SchedulerKind::Capacity(p), &|_| {}).unwrap();
        let p50 = |c: &crate::sim::report::ClassStats| c.completion.map_or(f64::NAN, |p| p.p50);
        let (las, none) = (run(PolicyKind::Las), run(PolicyKind::None));
        assert_eq!((las.short.finished, las.long.finished), (1, 1));
        assert!(p50(&none.short) > 990.0, "{}", p50(&none.short));
        assert!(p50(&las.short) < 60.0, "{}", p50(&las.short));
        assert_eq!(las.preemptions.suspended, 4);
        assert_eq!(las.preemptions.resumed, 4);
        // The long job lost only the short job's time, not its work.
        assert!(p50(&las.long) < p50(&none.long) + 60.0);
    }
}
