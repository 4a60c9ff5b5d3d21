//! Skipping monitoring ticks whose plan is provably empty.
//!
//! Under kill, immediate and graceful (and `none`, and `adaptive` when it only maps to
//! those) a tick acts only on containers below their allocation, on kill marks, on
//! nodes whose advertised capacity or partition differs from what the policy wants,
//! or on queues the capacity accounting asks to give something back. When none of
//! these exist, `policy::decide` returns no action and changes nothing it reads later
//! (no time-based rule can fire: kill waits, delayed resumption and graceful steps all
//! need a marked or squeezed container). This check works that out from aggregates in
//! O(containers + nodes + queued jobs) without allocating, and runs the same
//! `capacity::account` the policy runs on the same numbers the view would hold.
//!
//! Skipped ticks are checked against a real `decide` under
//! [`PolicyTicks::VerifyIdle`] (the default in debug builds, so every test run checks
//! every skip).

use crate::cluster::{ContainerState, Partition, PolicyKind};
use crate::config::settings::PolicySettings;
use crate::policy::Amount;
use crate::policy::capacity::{self, QueueLoad};
use crate::policy::select::is_share_based;
use crate::resources::{Limits, Resource};
use crate::sim::engine::{Core, Phase};
use crate::sim::sched::PolicyTicks;
use crate::sim::sched::central::{Leaf, Msg};

/// Pending resources by task, as prefix sums (memory MB, vcores).
pub(crate) struct QuietCheck {
    prefix: Vec<(u64, u64)>,
    /// Per node, allocated to its live containers (scratch).
    node_used: Vec<Resource>,
    /// Per job, the tick that last counted its pending requests (scratch).
    counted: Vec<u64>,
    /// Per leaf, allocated and pending (scratch).
    used: Vec<Resource>,
    pending: Vec<Resource>,
    loads: Vec<QueueLoad>,
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
            node_used: vec![Resource::ZERO; core.nodes.len()],
            counted: vec![0; wl.jobs.len()],
            used: Vec::new(),
            pending: Vec::new(),
            loads: Vec::new(),
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

    /// True when the policy's plan for a view of the cluster now is provably empty.
    #[allow(clippy::too_many_arguments)]
    pub fn is_quiet(
        &mut self,
        core: &Core<'_, Msg>,
        leaves: &[Leaf],
        queue_of: impl Fn(u32) -> usize,
        class_leaf: impl Fn(u32) -> usize,
        queued: &[bool],
        advertised: &[Resource],
        s: &PolicySettings,
        has_kill_marks: bool,
    ) -> bool {
        if has_kill_marks {
            return false;
        }
        // Nodes: nothing reclaimed to advertise, no partition to give back.
        for (n, node) in core.nodes.iter().enumerate() {
            if advertised[n] != node.capacity || node.partition != Partition::General {
                return false;
            }
        }
        self.tick += 1;
        self.node_used.iter_mut().for_each(|u| *u = Resource::ZERO);
        // Queue 0 is the root, leaf i is queue i + 1, as in the view.
        self.loads.clear();
        let cluster = core
            .nodes
            .iter()
            .fold(Resource::ZERO, |a, n| a + n.capacity);
        let reclaimable = s.kind != PolicyKind::None && is_share_based(s.kind);
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
        self.loads.push(load(None, cluster, cluster));
        for l in leaves {
            self.loads.push(load(Some(0), l.guaranteed, l.maximum));
        }
        let (mut used, mut pending) = (
            std::mem::take(&mut self.used),
            std::mem::take(&mut self.pending),
        );
        used.clear();
        used.resize(leaves.len(), Resource::ZERO);
        pending.clear();
        pending.resize(leaves.len(), Resource::ZERO);
        let quiet = self.sum_up(
            core,
            leaves,
            &queue_of,
            &class_leaf,
            queued,
            &mut used,
            &mut pending,
        ) && (s.kind == PolicyKind::None
            || self.nothing_to_reclaim(core, &used, &pending, cluster, s));
        (self.used, self.pending) = (used, pending);
        quiet
    }

    /// Per-leaf allocation and pending demand as the view would hold them; false when
    /// some container is not steady at its allocation.
    #[allow(clippy::too_many_arguments)]
    fn sum_up(
        &mut self,
        core: &Core<'_, Msg>,
        leaves: &[Leaf],
        queue_of: &impl Fn(u32) -> usize,
        class_leaf: &impl Fn(u32) -> usize,
        queued: &[bool],
        used: &mut [Resource],
        pending: &mut [Resource],
    ) -> bool {
        let tick = self.tick;
        for (li, l) in leaves.iter().enumerate() {
            for &j in &l.apps {
                if self.counted[j as usize] != tick {
                    self.counted[j as usize] = tick;
                    add(pending, li, self.pending(core, j));
                }
            }
        }
        // Every container at its allocation and steady: nothing to resume, freeze or
        // watch.
        for (_, k) in core.containers() {
            if k.state == ContainerState::Killed {
                continue;
            }
            if k.state != ContainerState::Running
                || k.phase != Phase::Steady
                || k.current != Limits::from(k.allocated)
            {
                return false;
            }
            let q = if queued[k.job as usize] {
                queue_of(k.job)
            } else {
                class_leaf(k.job)
            };
            add(used, q, k.allocated);
            self.node_used[k.node as usize] += k.allocated;
            // A job out of the queues with a task pending again (killed, not yet
            // reported) is in the view with its requests.
            if self.counted[k.job as usize] != tick {
                self.counted[k.job as usize] = tick;
                add(pending, q, self.pending(core, k.job));
            }
        }
        true
    }

    /// The capacity accounting `decide` runs, on the view's numbers: nothing to take
    /// from any queue.
    fn nothing_to_reclaim(
        &mut self,
        core: &Core<'_, Msg>,
        used: &[Resource],
        pending: &[Resource],
        cluster: Resource,
        s: &PolicySettings,
    ) -> bool {
        for (li, (u, p)) in used.iter().zip(pending).enumerate() {
            let q = &mut self.loads[li + 1];
            q.used = (*u).into();
            q.held = q.used;
            q.pending = (*p).into();
            let root = &mut self.loads[0];
            root.used += (*u).into();
            root.pending += (*p).into();
        }
        self.loads[0].held = self.loads[0].used;
        let free_room = core
            .nodes
            .iter()
            .zip(&self.node_used)
            .fold(Amount::ZERO, |a, (n, u)| {
                a + (Amount::from(n.capacity) - Amount::from(*u))
            });
        let acc = capacity::account(&self.loads, cluster.into(), free_room, s);
        acc.to_reclaim.iter().all(|a| !a.any_positive())
    }
}

fn add(sums: &mut [Resource], leaf: usize, r: Resource) {
    if let Some(s) = sums.get_mut(leaf) {
        *s += r;
    }
}
