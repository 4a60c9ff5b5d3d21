//! One decision tick. The ledger (what every queue and node holds) starts from the
//! view's usage totals less what its suspended and shrunk containers gave up; then, in
//! order: containers whose policy is `none` get their allocation back; share-based
//! policies (kill, immediate, graceful, adaptive) resume and reclaim by queue
//! accounting; LAS runs the node algorithm where a node needs it; Dice samples its
//! window and acts when one closes; last, node capacities and partitions are brought in
//! line with what was reclaimed.
//!
//! Each step is a submodule over the one [`Tick`]: [`release`], [`reclaim`] (with
//! [`kill`]), [`las_tick`], [`dice_tick`] and [`capacities`].

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::amount::Amount;
use super::capacity::{self, Accounting, QueueAccount, QueueLoad};
use super::dice::{self, DiceNodeFacts, DiceReport, DiceWindow};
use super::las::{self, LasCause, LasGate, LasTask};
use super::ledger::{Ledger, NodeBuffers, Room};
use super::plan::{Action, ActionKind, Before, PendingKill, Plan};
use super::reason::{DiceWindowWhy, Note, Reason, ReclaimWhy};
use super::select::{app_policy, is_share_based};
use super::state::{DiceState, LasTimers, Memo, MemoStore, Memos};
use super::victims::{jobs_by_remaining_time, newest_key, smallest_first};
use crate::cluster::{
    AppIdx, BelowAllocation, ClusterView, Container, ContainerIdx, ContainerState, IdMap, JobClass,
    JournalMark, Millis, Partition, PolicyKind,
};
use crate::config::settings::PolicySettings;
use crate::resources::{Limits, Resource};

pub(crate) fn run(view: &ClusterView, state: &mut PolicyState, now: Millis) -> Plan {
    let PolicyState {
        settings,
        rng,
        memos,
        dice: dice_state,
        las_checks,
        buffers,
    } = state;
    let memos = Memos::new(view, memos);
    let last_actions = buffers.actions;
    let mut t = Tick::new(
        view,
        settings,
        now,
        memos,
        dice_state.last_sample_ms,
        las_checks,
        std::mem::take(buffers),
    );
    // A LAS tick acts dozens of times, a varying number; growing the list copies
    // every action so far.
    let room = 2 * last_actions + 8;
    t.actions.reserve(room);
    t.release_unmanaged();
    t.end_long_suspensions();
    let (loads, acc) = t.share_based();
    if t.las_active {
        t.las();
    }
    let (report, planned) = if t.dice_active {
        t.dice(dice_state, rng)
    } else {
        (None, None)
    };
    let partitions = planned.unwrap_or_else(|| t.partitions(dice_state));
    t.node_capacities(partitions);
    let las = match t.las.take() {
        Some(mut las) => {
            // What this tick changed there is in the view only once the plan is carried
            // out: the next tick looks at them again.
            las.look.extend_from_slice(t.ledger.touched_nodes());
            las
        }
        None => LasIndex::default(),
    };
    *buffers = TickBuffers {
        ledger: t.ledger.take_buffers(),
        las,
        las_work: std::mem::take(&mut t.las_work),
        actions: t.actions.len(),
        queue_names: std::mem::take(&mut t.queue_names),
    };
    t.finish(&loads, &acc, report)
}

/// Everything a policy carries from one tick to the next. One per controller (or
/// simulator run); see [`super::decide`].
#[derive(Clone, Debug)]
pub struct PolicyState {
    pub(crate) settings: PolicySettings,
    pub(crate) rng: Pcg64,
    pub(crate) memos: MemoStore,
    pub(crate) dice: DiceState,
    /// LAS: per node, when it next needs a look even if nothing arrives or finishes
    /// there (its earliest quantum expiry while a container waits).
    pub(crate) las_checks: LasTimers,
    /// The last tick's per-node arrays, reused by the next.
    pub(crate) buffers: TickBuffers,
}

impl PolicyState {
    pub fn new(settings: PolicySettings) -> Self {
        PolicyState {
            rng: Pcg64::seed_from_u64(settings.seed),
            settings,
            memos: MemoStore::default(),
            dice: DiceState::default(),
            las_checks: LasTimers::default(),
            buffers: TickBuffers::default(),
        }
    }

    pub fn settings(&self) -> &PolicySettings {
        &self.settings
    }

    /// Replace the settings (SIGHUP). Suspended containers stay where they are; the next
    /// decision applies the new policy to them, and `none` resumes them all. A new seed
    /// restarts the random sequence.
    pub fn set_settings(&mut self, s: PolicySettings) {
        if s.seed != self.settings.seed {
            self.rng = Pcg64::seed_from_u64(s.seed);
        }
        self.settings = s;
    }

    /// Containers the state currently remembers something about (including some that
    /// left the view and are not dropped yet).
    pub fn remembered_containers(&self) -> usize {
        self.memos.len()
    }
}

/// Per-node arrays a tick fills, what LAS knows of its waiting containers and the
/// lists LAS steps nodes in, kept from the last tick so that a tick allocates none.
#[derive(Clone, Debug, Default)]
pub(crate) struct TickBuffers {
    ledger: NodeBuffers,
    las: LasIndex,
    las_work: LasWork,
    /// How many actions the last tick took (room to reserve for this one's).
    actions: usize,
    /// The queues' paths, shared by the actions that name them.
    queue_names: Vec<Arc<str>>,
}

/// Lays `names` out as the view's queue paths, allocating only when they differ.
fn refresh_queue_names(names: &mut Vec<Arc<str>>, view: &ClusterView) {
    let same = names.len() == view.queues().len()
        && names.iter().zip(view.queues()).all(|(n, q)| **n == *q.path);
    if !same {
        *names = view
            .queues()
            .iter()
            .map(|q| Arc::from(q.path.as_str()))
            .collect();
    }
}

impl TickBuffers {
    /// The next tick starts LAS's counts over (its timers were put back, so the nodes
    /// it meant to look at may be the wrong ones).
    pub(crate) fn forget_las(&mut self) {
        self.las = LasIndex::default();
    }
}

/// A set of this view's containers as a bitmap: containers already given an action
/// this tick (one action per container per plan), or marked for killing.
struct Acted(Vec<u64>);

impl Acted {
    fn new(containers: usize) -> Self {
        Acted(vec![0; containers.div_ceil(64)])
    }

    fn insert(&mut self, c: ContainerIdx) {
        if let Some(w) = self.0.get_mut(c.get() / 64) {
            *w |= 1 << (c.get() % 64);
        }
    }

    fn remove(&mut self, c: ContainerIdx) {
        if let Some(w) = self.0.get_mut(c.get() / 64) {
            *w &= !(1 << (c.get() % 64));
        }
    }

    fn contains(&self, c: ContainerIdx) -> bool {
        self.0
            .get(c.get() / 64)
            .is_some_and(|w| w & (1 << (c.get() % 64)) != 0)
    }
}

struct Tick<'a> {
    view: &'a ClusterView,
    s: &'a PolicySettings,
    now: Millis,
    total: Amount,
    /// Per application.
    policy: Vec<PolicyKind>,
    memos: Memos<'a>,
    ledger: Ledger<'a>,
    /// Live containers not at their allocation.
    waiting: &'a [BelowAllocation],
    /// Live containers marked for killing, as a list and as a set.
    marked: Vec<ContainerIdx>,
    marked_set: Acted,
    acted: Acted,
    las_checks: &'a mut LasTimers,
    las_active: bool,
    dice_active: bool,
    las: Option<LasIndex>,
    dice: Option<DiceScan>,
    las_work: LasWork,
    actions: Vec<Action>,
    pending_kills: Vec<PendingKill>,
    queue_names: Vec<Arc<str>>,
    notes: Vec<Note>,
}

mod capacities;
mod dice_tick;
mod kill;
mod las_tick;
mod reclaim;
mod release;

use dice_tick::{DiceScan, dice_samples};
use las_tick::{LasIndex, LasWork};

/// What a container holds in YARN's accounting at cgroup `limits`. CPU cut to the
/// suspend footprint holds no vcores: YARN's vcores are whole, so the footprint's 1% of
/// a vcore can be neither advertised nor asked for, and counting it would leave every
/// suspension a whole vcore short (two 1-vcore suspensions free 1.98 vcores, the node
/// advertises 1). Memory is in MB and the footprint's 64 MB is really held: it counts.
pub(crate) fn held_at(alloc: Amount, limits: Amount, footprint: Limits) -> Amount {
    let floor = Amount::from(footprint).component_min(alloc);
    let vcores =
        if limits.vcores_milli < alloc.vcores_milli && limits.vcores_milli <= floor.vcores_milli {
            0
        } else {
            limits.vcores_milli.min(alloc.vcores_milli)
        };
    Amount::new(limits.memory_mb.min(alloc.memory_mb), vcores)
}

fn held_of(c: &Container, footprint: Limits) -> Amount {
    held_in(c.allocated, c.current, c.state, footprint)
}

/// [`held_of`] from the parts of a container it reads.
fn held_in(
    allocated: Resource,
    current: Limits,
    state: ContainerState,
    footprint: Limits,
) -> Amount {
    let alloc = Amount::from(allocated);
    match state {
        ContainerState::Running => alloc,
        _ => held_at(alloc, Amount::from(current), footprint),
    }
}

impl<'a> Tick<'a> {
    /// Works from the view's aggregates (queue and node usage) and its index of
    /// containers below their allocation, so that a tick costs O(nodes + queues +
    /// applications + suspended containers), not O(containers). LAS's suspended
    /// containers are counted between ticks ([`LasIndex`]): on a view changed in place,
    /// only those on nodes that changed are counted again.
    fn new(
        view: &'a ClusterView,
        s: &'a PolicySettings,
        now: Millis,
        memos: Memos<'a>,
        dice_sampled_until: Option<Millis>,
        las_checks: &'a mut LasTimers,
        buffers: TickBuffers,
    ) -> Self {
        let total = Amount::from(view.capacity());
        let policy: Vec<PolicyKind> = view.apps().iter().map(|a| app_policy(view, a, s)).collect();
        let on = s.kind != PolicyKind::None;
        let any = |p: PolicyKind| {
            on && (s.kind == p
                || policy.contains(&p)
                || view.queues().iter().any(|q| q.policy == Some(p)))
        };
        let (las_active, dice_active) = (any(PolicyKind::Las), any(PolicyKind::Dice));
        let nn = view.nodes().len();
        let budget = total.scale(capacity::finite_or(s.total_preemption_per_round, 0.0));
        let TickBuffers {
            ledger: mut node_buffers,
            las: mut las_index,
            las_work,
            actions: _,
            mut queue_names,
        } = buffers;
        refresh_queue_names(&mut queue_names, view);
        let las = if las_active {
            las_index.sync(view, s, &policy, las_checks, now, &mut node_buffers);
            Some(las_index)
        } else {
            node_buffers.clear_bases(nn);
            None
        };
        let mut ledger = Ledger::new(view, budget, node_buffers);
        let waiting = view.below_allocation_facts();
        // Summed per queue and taken once each: thousands wait under LAS, each a walk up
        // its queue's lineage. LAS's are counted already, and their room is the nodes'
        // bases; the others' room is advertised.
        let mut from_queue = match &las {
            Some(l) => l.queues.clone(),
            None => vec![Amount::ZERO; view.queues().len()],
        };
        if las.as_ref().is_none_or(|l| l.others > 0) {
            for w in waiting {
                let (n, a) = (w.node.get(), w.app.get());
                if policy[a] == PolicyKind::Las {
                    continue;
                }
                let held = held_in(w.allocated, w.current, w.state, s.suspend.footprint);
                let reclaimed = Amount::from(w.allocated) - held;
                ledger.reduced_before(n, reclaimed);
                from_queue[view.apps()[a].queue.get()] += reclaimed;
            }
        }
        for (q, amount) in from_queue.into_iter().enumerate() {
            if amount != Amount::ZERO {
                ledger.take_from_queue(q, amount);
            }
        }
        // A marked container still runs, but its queue no longer counts on it.
        let marked = memos.marked();
        let mut marked_set = Acted::new(view.containers().len());
        for &ci in &marked {
            let c = view.container(ci);
            ledger.take_from_queue(view.app(c.app).queue.get(), held_of(c, s.suspend.footprint));
            ledger.marked += held_of(c, s.suspend.footprint);
            marked_set.insert(ci);
        }
        let dice = dice_active.then(|| dice_samples(view, waiting, now, dice_sampled_until));
        Tick {
            view,
            s,
            now,
            total,
            policy,
            memos,
            ledger,
            waiting,
            marked,
            marked_set,
            acted: Acted::new(view.containers().len()),
            las_checks,
            las_active,
            dice_active,
            las,
            dice,
            las_work,
            actions: Vec::new(),
            pending_kills: Vec::new(),
            queue_names,
            notes: Vec::new(),
        }
    }

    fn floor(&self, c: &Container) -> Amount {
        Amount::from(
            self.s
                .suspend
                .footprint
                .component_min(Limits::from(c.allocated)),
        )
    }

    /// What `c` holds in YARN's accounting now ([`held_at`]).
    fn held(&self, c: &Container) -> Amount {
        held_of(c, self.s.suspend.footprint)
    }

    /// What `c` would hold in YARN's accounting at cgroup `limits`.
    fn held_at(&self, c: &Container, limits: Amount) -> Amount {
        held_at(Amount::from(c.allocated), limits, self.s.suspend.footprint)
    }

    /// The limits `c`'s cgroup enforces now, within its allocation.
    fn limits(&self, c: &Container) -> Amount {
        let alloc = Amount::from(c.allocated);
        match c.state {
            ContainerState::Running => alloc,
            _ => Amount::from(c.current).component_min(alloc),
        }
    }

    fn queue_of(&self, c: &Container) -> usize {
        self.view.app(c.app).queue.get()
    }

    /// Queue `q`'s path, shared: every action names its queue, and a simulator's tick
    /// may act hundreds of times.
    fn queue_name(&self, q: usize) -> Arc<str> {
        self.queue_names[q].clone()
    }

    fn push(
        &mut self,
        ci: ContainerIdx,
        kind: ActionKind,
        policy: PolicyKind,
        reason: Reason,
        for_queue: Option<Arc<str>>,
    ) {
        let view = self.view;
        let c = view.container(ci);
        self.acted.insert(ci);
        self.actions.push(Action {
            kind,
            policy,
            reason,
            application: Some(view.app(c.app).id),
            queue: Some(self.queue_name(self.queue_of(c))),
            node: Some(view.node(c.node).id.clone()),
            for_queue,
            before: Before::Limits(c.current),
            place: Some(ci),
        });
    }

    /// Give a container its whole allocation back.
    fn resume_fully(&mut self, ci: ContainerIdx, policy: PolicyKind, room: Room, reason: Reason) {
        let c = self.view.container(ci);
        let owed = Amount::from(c.allocated) - self.held(c);
        self.resume_by(ci, policy, room, owed, reason);
    }

    /// Give a container `inc` more (a graceful step), or everything it is owed.
    fn resume_by(
        &mut self,
        ci: ContainerIdx,
        policy: PolicyKind,
        room: Room,
        inc: Amount,
        reason: Reason,
    ) {
        let c = self.view.container(ci);
        let owed = Amount::from(c.allocated) - self.held(c);
        let inc = inc.component_min(owed);
        self.ledger.give(self.queue_of(c), room, inc);
        let to = if inc == owed {
            self.memos.update(ci, c.id, Memo::resumed);
            Limits::from(c.allocated)
        } else {
            (self.held(c) + inc)
                .component_max(self.floor(c))
                .to_limits()
        };
        let kind = ActionKind::Resume {
            container: c.id,
            to,
        };
        self.push(ci, kind, policy, reason, None);
    }

    /// Suspend to the footprint, taking through the ledger; what was taken, or None if
    /// the ledger refuses.
    fn suspend(
        &mut self,
        ci: ContainerIdx,
        policy: PolicyKind,
        room: Room,
        reason: Reason,
    ) -> Option<Amount> {
        let c = self.view.container(ci);
        let floor = self.floor(c);
        let amount = self.held(c) - self.held_at(c, floor);
        if !self.ledger.take(self.queue_of(c), room, amount, None) {
            return None;
        }
        let now = self.now;
        self.memos.update(ci, c.id, |m| m.suspended(now));
        let footprint = floor.to_limits();
        self.push(
            ci,
            ActionKind::Suspend {
                container: c.id,
                footprint,
            },
            policy,
            reason,
            None,
        );
        Some(amount)
    }

    fn finish(self, loads: &[QueueLoad], acc: &Accounting, dice: Option<DiceReport>) -> Plan {
        let view = self.view;
        let queues = view
            .queues()
            .iter()
            .enumerate()
            .map(|(i, q)| QueueAccount {
                queue: q.path.clone(),
                guaranteed: q.guaranteed.into(),
                used: loads[i].used,
                held: loads[i].held,
                pending: loads[i].pending,
                ideal: acc.ideal[i],
                starved: acc.starved[i],
                over: acc.over[i],
                to_reclaim: acc.to_reclaim[i],
                reclaimed: self.ledger.queue_reclaimed[i],
                restored: self.ledger.queue_restored[i],
            })
            .collect();
        let round_cap = self
            .total
            .scale(capacity::finite_or(self.s.total_preemption_per_round, 0.0));
        self.memos.finish();
        Plan {
            now: self.now,
            policy: self.s.kind,
            actions: self.actions,
            observe_only: false,
            observed: Vec::new(),
            pending_kills: self.pending_kills,
            queues,
            reclaimed: self.ledger.reclaimed,
            restored: self.ledger.restored,
            round_cap,
            dice,
            notes: self.notes,
        }
    }
}
