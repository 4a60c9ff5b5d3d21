//! Skipping monitoring ticks whose plan is provably empty.
//!
//! Under kill, immediate and graceful (and `adaptive` when it maps only to those) a
//! tick acts on kill marks whose wait is over or whose queue is owed room, on queues the capacity accounting asks to give something
//! back, on squeezed containers of queues below their ideal share (resumption, with
//! its delayed picks), on shrunk containers that swap (graceful freezes them), and on
//! nodes whose advertised capacity or partition differs from what the ledger says.
//! When none of these exist, `policy::decide` returns no action and changes nothing it
//! reads later: no time-based rule can fire, since every kill wait is still running
//! and resume picks a queue that is owed. Marks still waiting are counted as the
//! policy's ledger counts them (their queue no longer holds them, their room is free
//! room to come). This check works that out from aggregates without allocating,
//! running the same `capacity::account` the policy runs on the numbers its view and
//! ledger would hold. It walks neither the containers nor the nodes. The engine keeps
//! what each job's containers hold, which containers are squeezed, and each task's
//! container ([`Holdings`](crate::sim::engine::Holdings)), so a check costs
//! O(jobs holding containers + squeezed containers + marks + queued jobs). The
//! scheduler counts the nodes that advertise other than their capacity and those whose
//! allocations exceed what they advertise (with none of the latter, no node's free
//! room is cut off at zero, so the cluster's free room is its capacity less what is
//! held).
//!
//! Skipped ticks are checked against a real `decide` under
//! [`PolicyTicks::VerifyIdle`] (the default in debug builds, so every test run checks
//! every skip).

use crate::cluster::{ContainerId, ContainerState, Millis, PolicyKind};
use crate::config::settings::PolicySettings;
use crate::policy::capacity::{self, QueueLoad};
use crate::policy::select::{adaptive_choice, is_share_based};
use crate::policy::{Amount, held_at};
use crate::resources::Resource;
use crate::sim::engine::{Core, Phase};
use crate::sim::sched::PolicyTicks;
use crate::sim::sched::central::{Leaf, Msg};
use crate::sim::workload::MICROS_PER_MILLI;

/// What the scheduler keeps counted about its nodes (see the module comment).
pub(crate) struct NodeTally<'a> {
    pub advertised: &'a [Resource],
    /// Nodes advertising other than their capacity.
    pub mismatched: usize,
    /// Nodes whose allocations do not fit in what they advertise.
    pub overfull: usize,
    /// Nodes outside the general partition.
    pub partitioned: usize,
    pub cluster: Resource,
}

/// Pending resources by task, as prefix sums (memory MB, vcores).
pub(crate) struct QuietCheck {
    prefix: Vec<(u64, u64)>,
    /// Per job, the tick that last counted its pending requests (scratch).
    counted: Vec<u64>,
    sums: Sums,
    loads: Vec<QueueLoad>,
    /// Kill marks of this tick as (job, container number, marked at ms), and whether
    /// some mark's time is unknown.
    marks: Vec<(u32, u64, u64)>,
    unknown_mark: bool,
    tick: u64,
    /// Also run `decide` on skipped ticks and fail the run if it would have acted.
    pub verify: bool,
}

/// Whether ticks under these settings can ever be skipped: the policies that act only
/// through queue accounting, kill marks and squeezed containers.
pub(crate) fn eligible(s: &PolicySettings) -> bool {
    let plain = |p: PolicyKind| {
        matches!(
            p,
            PolicyKind::None | PolicyKind::Kill | PolicyKind::Immediate | PolicyKind::Graceful
        )
    };
    match s.kind {
        PolicyKind::Adaptive => {
            // adaptive_choice turns an `adaptive` fallback into graceful.
            (plain(s.adaptive.fallback) || s.adaptive.fallback == PolicyKind::Adaptive)
                && s.adaptive.mapping.iter().all(|(_, p)| plain(*p))
        }
        p => plain(p),
    }
}

impl QuietCheck {
    pub fn new(core: &Core<'_, Msg>, ticks: PolicyTicks) -> QuietCheck {
        let wl = core.wl;
        let mut prefix = Vec::with_capacity(wl.num_tasks() + 1);
        let mut acc = (0u64, 0u64);
        prefix.push(acc);
        for t in 0..wl.num_tasks() {
            let s = wl.shape(t);
            acc = (acc.0 + s.memory_mb, acc.1 + s.vcores as u64);
            prefix.push(acc);
        }
        QuietCheck {
            prefix,
            counted: vec![0; wl.jobs.len()],
            sums: Sums::default(),
            loads: Vec::new(),
            marks: Vec::new(),
            unknown_mark: false,
            tick: 0,
            verify: ticks == PolicyTicks::VerifyIdle,
        }
    }

    /// What `job` asks for and does not run, as the view's requests add up.
    fn pending(&self, core: &Core<'_, Msg>, job: u32) -> Resource {
        let spec = core.wl.jobs[job as usize];
        let run = &core.jobs[job as usize];
        if run.failed {
            return Resource::ZERO;
        }
        let from = (spec.first_task + run.next) as usize;
        let to = (spec.first_task + spec.num_tasks) as usize;
        let (mut mem, mut vc) = match (self.prefix.get(from), self.prefix.get(to)) {
            (Some(a), Some(b)) if from <= to => (b.0 - a.0, b.1 - a.1),
            _ => (0, 0),
        };
        for &(t, _, _) in &run.retry {
            let s = core.wl.shape(t as usize);
            mem += s.memory_mb;
            vc += s.vcores as u64;
        }
        Resource::new(mem, u32::try_from(vc).unwrap_or(u32::MAX))
    }

    /// The policy's kill marks before [`QuietCheck::is_quiet`].
    pub fn set_kill_marks(&mut self, marks: impl Iterator<Item = (ContainerId, Option<Millis>)>) {
        self.marks.clear();
        self.unknown_mark = false;
        for (id, at) in marks {
            let job = id.application().id.wrapping_sub(1);
            let Some(at) = at else {
                self.unknown_mark = true;
                continue;
            };
            self.marks.push((job, id.id, at));
        }
    }

    /// True when the policy's plan for a view of the cluster now is provably empty.
    #[allow(clippy::too_many_arguments)]
    pub fn is_quiet(
        &mut self,
        core: &Core<'_, Msg>,
        leaves: &[Leaf],
        queue_of: impl Fn(u32) -> usize,
        class_leaf: impl Fn(u32) -> usize,
        queued: &[bool],
        nodes: &NodeTally<'_>,
        s: &PolicySettings,
    ) -> bool {
        // Dice's partition is given back; an overfull node needs the per-node walk.
        if self.unknown_mark || nodes.partitioned > 0 || nodes.overfull > 0 {
            return false;
        }
        self.tick += 1;
        let nl = leaves.len();
        let mut sums = std::mem::take(&mut self.sums);
        sums.reset(nl);
        sums.leaves
            .extend(leaves.iter().map(|l| (l.guaranteed, l.maximum)));
        let quiet = self.sum_up(core, leaves, &queue_of, &class_leaf, queued, s, &mut sums)
            && self.accounting_is_idle(core, nodes, &mut sums, s);
        self.sums = sums;
        quiet
    }

    /// Per-leaf and per-node totals as the view and the policy's ledger would hold
    /// them; false when some squeezed container is one the policy might act on anyway.
    /// Reads what the engine keeps up to date
    /// ([`Holdings`](crate::sim::engine::Holdings)): the jobs holding containers, the
    /// marked and the squeezed containers, never all of them.
    #[allow(clippy::too_many_arguments)]
    fn sum_up(
        &mut self,
        core: &Core<'_, Msg>,
        leaves: &[Leaf],
        queue_of: &impl Fn(u32) -> usize,
        class_leaf: &impl Fn(u32) -> usize,
        queued: &[bool],
        s: &PolicySettings,
        sums: &mut Sums,
    ) -> bool {
        let tick = self.tick;
        let now_ms = core.now / MICROS_PER_MILLI;
        for (li, l) in leaves.iter().enumerate() {
            for &j in &l.apps {
                if self.counted[j as usize] != tick {
                    self.counted[j as usize] = tick;
                    add(&mut sums.pending, li, self.pending(core, j));
                }
            }
        }
        let Some(holdings) = core.holdings() else {
            return false;
        };
        debug_assert!(core.holdings_agree(), "the engine's holdings drifted");
        let leaf = |job: u32| {
            if queued[job as usize] {
                queue_of(job)
            } else {
                class_leaf(job)
            }
        };
        let policy_of = |job: u32| match s.kind {
            PolicyKind::Adaptive => adaptive_choice(
                core.wl.jobs[job as usize].kind.application_type(),
                &[],
                &s.adaptive,
            ),
            p => p,
        };
        for &(job, number, at) in &self.marks {
            // A mark on a container that is gone, or being killed, is not in the view.
            let Some(c) = core.container_numbered(job, number) else {
                continue;
            };
            let k = core.container(c);
            // Killed now, or dropped (not under kill, or not running).
            if now_ms >= at.saturating_add(s.kill.max_wait_before_kill_ms)
                || policy_of(job) != PolicyKind::Kill
                || k.state != ContainerState::Running
            {
                return false;
            }
            // Still waiting: the ledger takes it from its queue, and its room is room
            // to come.
            let alloc = Amount::from(k.allocated);
            sums.marked[leaf(job)] += alloc;
            sums.marked_total += alloc;
        }
        for (job, allocated) in holdings.jobs() {
            let q = leaf(job);
            let alloc = Amount::from(allocated);
            sums.used[q] += alloc;
            sums.held += alloc;
            // A job out of the queues with a task pending again (killed, not yet
            // reported) is in the view with its requests.
            if self.counted[job as usize] != tick {
                self.counted[job as usize] = tick;
                add(&mut sums.pending, q, self.pending(core, job));
            }
        }
        // A marked one among these made the tick busy above: it is not running.
        for &c in holdings.squeezed() {
            let k = core.container(c);
            let q = leaf(k.job);
            let alloc = Amount::from(k.allocated);
            // Below its allocation: the ledger counts only what it still holds.
            let policy = policy_of(k.job);
            let swapping =
                k.phase == Phase::Steady && core.cfg.costs.swapping(k.allocated, k.current);
            if !is_share_based(policy)
                || (policy == PolicyKind::Graceful && k.state == ContainerState::Shrunk && swapping)
            {
                // Resumed by `none`, or possibly frozen by graceful.
                return false;
            }
            // As the ledger counts it: CPU at the footprint holds no vcore.
            let held = held_at(alloc, Amount::from(k.current), s.suspend.footprint);
            let reclaimed = alloc - held;
            sums.reclaimed[q] += reclaimed;
            sums.held -= reclaimed;
            sums.node_reclaimed.push((k.node, reclaimed));
            sums.squeezed[q] = true;
        }
        true
    }

    /// The capacity accounting `decide` runs, on the same numbers: nothing to take
    /// from any queue, no queue owed a squeezed container back, and every node already
    /// advertising what the policy would have it advertise.
    fn accounting_is_idle(
        &mut self,
        core: &Core<'_, Msg>,
        nodes: &NodeTally<'_>,
        sums: &mut Sums,
        s: &PolicySettings,
    ) -> bool {
        // Nodes with squeezed containers advertise what those give back, and no other
        // node advertises other than its capacity.
        let reclaimed_at = &mut sums.node_reclaimed;
        reclaimed_at.sort_unstable_by_key(|&(n, _)| n);
        let mut extended = 0;
        for run in reclaimed_at.chunk_by(|a, b| a.0 == b.0) {
            let n = run[0].0 as usize;
            let extra = Amount::sum(run.iter().map(|r| r.1)).to_resource();
            if nodes.advertised[n] != core.nodes[n].capacity + extra {
                return false;
            }
            extended += (extra != Resource::ZERO) as usize;
        }
        if extended != nodes.mismatched {
            return false;
        }
        let cluster = nodes.cluster;
        let reclaimable = is_share_based(s.kind);
        let load = |parent, guaranteed: Resource, maximum: Resource| QueueLoad {
            parent,
            guaranteed: guaranteed.into(),
            maximum: maximum.into(),
            used: Amount::ZERO,
            held: Amount::ZERO,
            pending: Amount::ZERO,
            preemption_disabled: false,
            reclaimable,
        };
        // Queue 0 is the root, leaf i is queue i + 1, as in the view.
        self.loads.clear();
        self.loads.push(load(None, cluster, cluster));
        for (li, l) in sums.leaves.iter().enumerate() {
            let mut q = load(Some(0), l.0, l.1);
            q.used = sums.used[li];
            q.held = sums.used[li] - sums.reclaimed[li] - sums.marked[li];
            q.pending = sums.pending[li].into();
            let root = &mut self.loads[0];
            root.used += q.used;
            root.held += q.used;
            root.held -= sums.reclaimed[li];
            root.held -= sums.marked[li];
            root.pending += q.pending;
            self.loads.push(q);
        }
        // No node holds more than its capacity (none is overfull), so no node's room is
        // cut off at zero.
        let free_room = Amount::from(cluster) - sums.held + sums.marked_total;
        let acc = capacity::account(&self.loads, cluster.into(), free_room, s);
        // A queue owed room gets squeezed containers back (after D picks) and drops
        // its kill marks.
        acc.to_reclaim.iter().all(|a| !a.any_positive())
            && (0..sums.leaves.len()).all(|li| {
                !(sums.squeezed[li] || sums.marked[li].any_positive())
                    || !(acc.ideal[li + 1] - self.loads[li + 1].held).any_positive()
            })
    }
}

/// Scratch totals of one check, kept between ticks so that a check allocates nothing.
#[derive(Default)]
pub(crate) struct Sums {
    /// Per leaf: guaranteed and maximum.
    leaves: Vec<(Resource, Resource)>,
    used: Vec<Amount>,
    reclaimed: Vec<Amount>,
    /// Held by containers marked for killing and still waiting, per leaf and in all.
    marked: Vec<Amount>,
    marked_total: Amount,
    pending: Vec<Resource>,
    /// Some container of the leaf is below its allocation.
    squeezed: Vec<bool>,
    /// Held on all nodes, as the ledger counts it.
    held: Amount,
    /// What each squeezed container gives back, by node.
    node_reclaimed: Vec<(u32, Amount)>,
}

impl Sums {
    fn reset(&mut self, leaves: usize) {
        self.leaves.clear();
        self.marked_total = Amount::ZERO;
        self.held = Amount::ZERO;
        self.node_reclaimed.clear();
        for v in [&mut self.used, &mut self.reclaimed, &mut self.marked] {
            v.clear();
            v.resize(leaves, Amount::ZERO);
        }
        self.pending.clear();
        self.pending.resize(leaves, Resource::ZERO);
        self.squeezed.clear();
        self.squeezed.resize(leaves, false);
    }
}

fn add(sums: &mut [Resource], leaf: usize, r: Resource) {
    if let Some(s) = sums.get_mut(leaf) {
        *s += r;
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster::PolicyKind;
    use crate::sim::trace::synth::{SynthSpec, generate};
    use crate::sim::{EngineConfig, PolicyTicks, SchedParams, SchedulerKind, SimSetup, simulate};

    /// Skipping idle ticks gives the very run that deciding on every tick gives, and
    /// some ticks are skipped; in verify mode every skipped tick's plan was empty.
    #[test]
    fn skipping_idle_ticks_changes_nothing() {
        let spec: SynthSpec = "bigc:pattern=multi,nodes=6,seconds=600".parse().unwrap();
        let wl = generate(&spec, 3);
        let cluster = wl.suggested_cluster.unwrap();
        for policy in [
            PolicyKind::Kill,
            PolicyKind::Immediate,
            PolicyKind::Graceful,
        ] {
            let run = |ticks| {
                let setup = SimSetup {
                    engine: EngineConfig::new(cluster.nodes, cluster.node_capacity),
                    params: SchedParams {
                        policy_ticks: ticks,
                        ..SchedParams::default()
                    },
                };
                simulate(&wl, &setup, SchedulerKind::Capacity(policy), &|_| {}).unwrap()
            };
            let every = run(PolicyTicks::Every);
            let skip = run(PolicyTicks::SkipIdle);
            let verify = run(PolicyTicks::VerifyIdle);
            let idle = skip.counters["policy ticks provably idle"];
            assert!(idle > 0, "{policy:?}: no tick was idle");
            assert_eq!(verify.counters["policy ticks provably idle"], idle);
            for r in [&skip, &verify] {
                assert_eq!(r.short, every.short, "{policy:?}");
                assert_eq!(r.long, every.long, "{policy:?}");
                assert_eq!(r.preemptions, every.preemptions, "{policy:?}");
                assert_eq!(
                    r.counters["policy actions"],
                    every.counters["policy actions"]
                );
            }
        }
    }
}
