//! One decision tick. The ledger (what every queue and node holds) starts from the
//! view's usage totals less what its suspended and shrunk containers gave up; then, in
//! order: containers whose policy is `none` get their allocation back; share-based
//! policies (kill, immediate, graceful, adaptive) resume and reclaim by queue
//! accounting; LAS runs the node algorithm where a node needs it; Dice samples its
//! window and acts when one closes; last, node capacities and partitions are brought in
//! line with what was reclaimed.

use std::fmt::Write as _;
use std::rc::Rc;

use rand::RngExt;
use rand_pcg::Pcg64;

use super::amount::Amount;
use super::capacity::{self, Accounting, QueueAccount, QueueLoad};
use super::dice::{self, DiceNodeFacts, DiceReport, DiceWindow};
use super::las::{self, LasCause, LasGate, LasTask};
use super::ledger::{Ledger, NodeBuffers, Room};
use super::plan::{Action, ActionKind, Before, PendingKill, Plan};
use super::select::{app_policy, is_share_based};
use super::state::{DiceState, LasTimers, Memo, Memos, PolicyState};
use super::victims::{describe_remaining, jobs_by_remaining_time, newest_key, smallest_first};
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
        explain,
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
    t.explain = *explain;
    // A LAS tick acts dozens of times, a varying number; growing the list copies
    // every action so far.
    let room = 2 * last_actions + 8;
    t.actions.reserve(room);
    t.places.reserve(room);
    t.release_unmanaged();
    t.end_long_suspensions();
    let (loads, acc) = t.share_based();
    if t.las_active {
        t.las();
    }
    let report = if t.dice_active {
        t.dice(dice_state, rng)
    } else {
        None
    };
    t.partitions(dice_state);
    t.node_capacities();
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
        places: std::mem::take(&mut t.places),
    };
    t.finish(&loads, &acc, report)
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
    /// Where each of the last plan's actions' containers is in its view (None for
    /// a node action).
    places: Vec<Option<ContainerIdx>>,
}

impl TickBuffers {
    pub(crate) fn places(&self) -> &[Option<ContainerIdx>] {
        &self.places
    }

    /// The next tick starts LAS's counts over (its timers were put back, so the nodes
    /// it meant to look at may be the wrong ones).
    pub(crate) fn forget_las(&mut self) {
        self.las = LasIndex::default();
    }
}

/// LAS's waiting (suspended or shrunk) containers, counted per node and per queue and
/// kept between ticks: a tick redoes only the nodes the view's journal lists as
/// changed, instead of walking the thousands that wait. Each node's LAS reduction is
/// its base in the ledger. Also the nodes a tick must look at besides the ones it
/// touches: those changed, those whose timer is due, and those that qualified for a
/// LAS step when last looked at ([`Tick::las`]).
#[derive(Clone, Debug, Default)]
struct LasIndex {
    /// What the counts are of: None, start over.
    synced: Option<LasSynced>,
    nodes: Vec<LasWaiting>,
    /// Per queue (its own containers only), what its waiting LAS containers gave up.
    queues: Vec<Amount>,
    /// Waiting containers under other policies. Their room is advertised, not kept,
    /// and the tick walks the view's list of waiting containers for them, only when
    /// there are any.
    others: u32,
    /// Some nodes may be listed twice.
    look: Vec<u32>,
    /// The nodes whose entry or base was set since the last rebuild (each once), so
    /// that a rebuild, every tick for a controller's fresh views, clears only those.
    filled: Vec<u32>,
    /// Syncs so far, to count a node listed twice in the journal once.
    syncs: u64,
}

/// The view (to the journal entry read) and what decides each application's policy.
#[derive(Clone, Debug)]
struct LasSynced {
    mark: JournalMark,
    settings: PolicySettings,
    queue_policies: Vec<Option<PolicyKind>>,
    app_policies: Vec<PolicyKind>,
}

/// One node's waiting containers.
#[derive(Clone, Debug, Default)]
struct LasWaiting {
    /// Under LAS.
    count: u32,
    /// Under other policies.
    others: u32,
    /// What the LAS ones hold, the least any of them gave up, and what they gave up.
    held: Amount,
    smallest: Amount,
    reduced: Amount,
    /// What they gave up per queue, to be taken back out when the node changes.
    by_queue: Vec<(u32, Amount)>,
    /// Listed in [`LasIndex::filled`].
    filled: bool,
    /// The sync that last counted it ([`LasIndex::syncs`]).
    refreshed: u64,
}

impl LasIndex {
    /// Brings the counts up to `view`, and lists the nodes the tick must look at.
    fn sync(
        &mut self,
        view: &ClusterView,
        s: &PolicySettings,
        policy: &[PolicyKind],
        timers: &mut LasTimers,
        now: Millis,
        buffers: &mut NodeBuffers,
    ) {
        let nn = view.nodes.len();
        let same = self.synced.as_ref().is_some_and(|k| {
            let common = k.app_policies.len().min(policy.len());
            self.nodes.len() == nn
                && buffers.bases() == nn
                && self.queues.len() == view.queues.len()
                && k.settings == *s
                && view
                    .queues
                    .iter()
                    .map(|q| q.policy)
                    .eq(k.queue_policies.iter().copied())
                && k.app_policies[..common] == policy[..common]
        });
        let changed = self
            .synced
            .as_ref()
            .filter(|_| same)
            .and_then(|k| view.nodes_changed_since(k.mark));
        match changed {
            Some(nodes) => {
                self.syncs += 1;
                for &n in nodes {
                    let n = n as usize;
                    if self.nodes.get(n).is_some_and(|e| e.refreshed != self.syncs) {
                        self.refresh(view, s, policy, n, buffers);
                    }
                }
                self.look.extend_from_slice(nodes);
            }
            None => self.rebuild(view, s, policy, buffers),
        }
        timers.due(view, now, &mut self.look);
        let mark = view.journal_mark();
        match &mut self.synced {
            Some(k) if same => {
                k.mark = mark;
                k.app_policies.clear();
                k.app_policies.extend_from_slice(policy);
            }
            _ => {
                self.synced = Some(LasSynced {
                    mark,
                    settings: s.clone(),
                    queue_policies: view.queues.iter().map(|q| q.policy).collect(),
                    app_policies: policy.to_vec(),
                })
            }
        }
    }

    /// Counts every waiting container anew, from the view's dense list of them; every
    /// node with one, or with more allocated than fits, is looked at. A controller,
    /// deciding on a view built anew every tick, comes here every tick.
    fn rebuild(
        &mut self,
        view: &ClusterView,
        s: &PolicySettings,
        policy: &[PolicyKind],
        buffers: &mut NodeBuffers,
    ) {
        let nn = view.nodes.len();
        // The nodes filled before: their bases are cleared below unless filled again.
        let before = std::mem::take(&mut self.filled);
        if self.nodes.len() == nn && buffers.bases() == nn {
            for &n in &before {
                let e = &mut self.nodes[n as usize];
                e.clear();
                e.filled = false;
            }
        } else {
            self.nodes.clear();
            self.nodes.resize_with(nn, LasWaiting::default);
            buffers.clear_bases(nn);
        }
        self.queues.clear();
        self.queues.resize(view.queues.len(), Amount::ZERO);
        self.others = 0;
        for w in view.below_allocation_facts() {
            let e = &mut self.nodes[w.node.get()];
            e.fill(w.node.0, &mut self.filled);
            e.add(view, s, policy, w);
        }
        for &n in &self.filled {
            let e = &self.nodes[n as usize];
            for &(q, a) in &e.by_queue {
                self.queues[q as usize] += a;
            }
            self.others += e.others;
            buffers.set_base(n as usize, e.reduced, &view.node_facts()[n as usize]);
        }
        for &n in &before {
            let n = n as usize;
            if self.nodes.get(n).is_some_and(|e| !e.filled) {
                buffers.set_base(n, Amount::ZERO, &view.node_facts()[n]);
            }
        }
        self.look.clear();
        self.look.extend_from_slice(&self.filled);
        // More allocated than fits, and nothing waiting: all may run at once.
        self.look
            .extend(set_bits(view.overfull_nodes()).map(|n| n as u32));
    }

    /// Counts node `n`'s waiting containers anew, from its list of containers.
    fn refresh(
        &mut self,
        view: &ClusterView,
        s: &PolicySettings,
        policy: &[PolicyKind],
        n: usize,
        buffers: &mut NodeBuffers,
    ) {
        let LasIndex {
            nodes,
            queues,
            others,
            filled,
            syncs: tick,
            ..
        } = self;
        let tick = *tick;
        let (Some(e), Some(facts)) = (nodes.get_mut(n), view.node_facts().get(n)) else {
            return;
        };
        for &(q, a) in &e.by_queue {
            queues[q as usize] -= a;
        }
        *others -= e.others;
        e.clear();
        e.fill(n as u32, filled);
        e.refreshed = tick;
        // Read from the dense list: most of a node's containers run, and are not read.
        for &ci in &view.nodes[n].containers {
            if let Some(w) = view.below_allocation_fact(ci) {
                e.add(view, s, policy, w);
            }
        }
        for &(q, a) in &e.by_queue {
            queues[q as usize] += a;
        }
        *others += e.others;
        buffers.set_base(n, e.reduced, facts);
    }
}

impl LasWaiting {
    /// Lists node `n` (this entry) in `filled`, once.
    fn fill(&mut self, n: u32, filled: &mut Vec<u32>) {
        if !self.filled {
            self.filled = true;
            filled.push(n);
        }
    }

    /// Nothing waits (its list's room is kept, and whether it is listed as filled).
    fn clear(&mut self) {
        let mut by_queue = std::mem::take(&mut self.by_queue);
        by_queue.clear();
        *self = LasWaiting {
            by_queue,
            filled: self.filled,
            ..LasWaiting::default()
        };
    }

    /// Container `w` waits here.
    fn add(
        &mut self,
        view: &ClusterView,
        s: &PolicySettings,
        policy: &[PolicyKind],
        w: &BelowAllocation,
    ) {
        let a = w.app.get();
        if policy[a] != PolicyKind::Las {
            self.others += 1;
            return;
        }
        let held = held_in(w.allocated, w.current, w.state, s.suspend.footprint);
        let reclaimed = Amount::from(w.allocated) - held;
        let q = view.apps[a].queue.0;
        self.smallest = if self.count == 0 {
            reclaimed
        } else {
            self.smallest.component_min(reclaimed)
        };
        self.count += 1;
        self.held += held;
        self.reduced += reclaimed;
        match self.by_queue.iter_mut().find(|(k, _)| *k == q) {
            Some((_, a)) => *a += reclaimed,
            None => self.by_queue.push((q, reclaimed)),
        }
    }
}

/// The places of the set bits of a bitmap (bit `i % 64` of word `i / 64`), in order.
fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                w * 64 + b
            })
        })
    })
}

/// Why a node needs a LAS step: what runs there, plus what non-LAS waiting containers
/// keep, does not fit the node; a waiting LAS container might fit the free room; or
/// its quantum timer is due (or it has none).
struct LasNeed {
    overflow: bool,
    fits: bool,
    due: bool,
}

/// Lists [`Tick::las_node`] works in, kept for the next node: tens of nodes are
/// stepped a tick.
#[derive(Clone, Debug, Default)]
struct LasWork {
    idx: Vec<ContainerIdx>,
    tasks: Vec<LasTask>,
    before: Vec<LasTask>,
    moves: Vec<las::LasMove>,
    scratch: las::LasScratch,
}

/// Dice's samples since the last tick.
struct DiceScan {
    waits: Vec<u64>,
    short_vcores: u64,
    all_vcores: u64,
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

/// What one queue's victim selection has taken so far, and for whom.
struct Selection {
    target: Amount,
    to: Option<usize>,
    taken: Amount,
    picks: Vec<Pick>,
}

impl Selection {
    fn met(&self) -> bool {
        self.target.fits_in(&self.taken)
    }
}

/// A container chosen in [`Tick::reclaim_queue`], already taken in the ledger.
struct Pick {
    ci: ContainerIdx,
    room: Room,
    amount: Amount,
    what: Reclaim,
    policy: PolicyKind,
    reason: Rc<String>,
}

enum Reclaim {
    Mark,
    Suspend(Amount),
    Shrink(Amount),
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
    partition_changes: Vec<(usize, Partition)>,
    /// Dice planned the partitions already this tick (possibly to no change).
    partitions_planned: bool,
    actions: Vec<Action>,
    /// Per action, its container's place ([`PolicyState::action_places`]).
    places: Vec<Option<ContainerIdx>>,
    pending_kills: Vec<PendingKill>,
    notes: Vec<String>,
    /// Format reasons and notes (with `why!`) and name queues and nodes in actions
    /// ([`PolicyState::set_explain`]).
    explain: bool,
}

/// A reason or note, formatted only when plans carry them (`$t.explain`).
macro_rules! why {
    ($t:expr, $($arg:tt)*) => {
        if $t.explain {
            format!($($arg)*)
        } else {
            String::new()
        }
    };
}

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

/// Waiting times of short containers started since the last sample (request to
/// start), and running vcores of short and of all containers.
fn dice_samples(
    view: &ClusterView,
    waiting: &[BelowAllocation],
    now: Millis,
    since: Option<Millis>,
) -> DiceScan {
    // Vcores allocated to live containers on all nodes.
    let used_vcores: u64 = view.nodes.iter().map(|n| u64::from(n.used.vcores)).sum();
    let mut scan = DiceScan {
        waits: Vec::new(),
        short_vcores: 0,
        all_vcores: 0,
    };
    let running = |c: &Container| c.is_live() && c.state == ContainerState::Running;
    for app in view.apps.iter().filter(|a| a.class == JobClass::Short) {
        for c in app.containers.iter().map(|&ci| view.container(ci)) {
            if running(c) {
                scan.short_vcores += c.allocated.vcores as u64;
            }
            if let Some(after) = since
                && c.started_ms > after
                && c.started_ms <= now
            {
                let asked = c.requested_ms.unwrap_or(app.submitted_ms);
                scan.waits.push(c.started_ms.saturating_sub(asked));
            }
        }
    }
    let below: u64 = waiting.iter().map(|w| w.allocated.vcores as u64).sum();
    scan.all_vcores = used_vcores.saturating_sub(below);
    scan
}

/// Milliseconds shown as whole seconds ("12 s"), rounded half to even as `{:.0}`
/// rounds, in integers: LAS names attained service in every move's reason.
#[derive(Clone, Copy)]
struct Secs(u64);

impl std::fmt::Display for Secs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (q, r) = (self.0 / 1000, self.0 % 1000);
        let q = if r > 500 || (r == 500 && q % 2 == 1) {
            q + 1
        } else {
            q
        };
        write!(f, "{q} s")
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
        let total = Amount::from(view.capacity);
        let policy: Vec<PolicyKind> = view.apps.iter().map(|a| app_policy(view, a, s)).collect();
        let on = s.kind != PolicyKind::None;
        let any = |p: PolicyKind| {
            on && (s.kind == p
                || policy.contains(&p)
                || view.queues.iter().any(|q| q.policy == Some(p)))
        };
        let (las_active, dice_active) = (any(PolicyKind::Las), any(PolicyKind::Dice));
        let nn = view.nodes.len();
        let budget = total.scale(capacity::finite_or(s.total_preemption_per_round, 0.0));
        let TickBuffers {
            ledger: mut node_buffers,
            las: mut las_index,
            las_work,
            actions: _,
            mut places,
        } = buffers;
        places.clear();
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
            None => vec![Amount::ZERO; view.queues.len()],
        };
        if las.as_ref().is_none_or(|l| l.others > 0) {
            for w in waiting {
                let (n, a) = (w.node.get(), w.app.get());
                if policy[a] == PolicyKind::Las {
                    continue;
                }
                let held = held_in(w.allocated, w.current, w.state, s.suspend.footprint);
                let reclaimed = Amount::from(w.allocated) - held;
                ledger.reduced_before(n, reclaimed, true);
                from_queue[view.apps[a].queue.get()] += reclaimed;
            }
        }
        for (q, amount) in from_queue.into_iter().enumerate() {
            if amount != Amount::ZERO {
                ledger.take_from_queue(q, amount);
            }
        }
        // A marked container still runs, but its queue no longer counts on it.
        let marked = memos.marked();
        let mut marked_set = Acted::new(view.containers.len());
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
            acted: Acted::new(view.containers.len()),
            las_checks,
            las_active,
            dice_active,
            las,
            dice,
            las_work,
            partition_changes: Vec::new(),
            partitions_planned: false,
            actions: Vec::new(),
            places,
            pending_kills: Vec::new(),
            notes: Vec::new(),
            explain: true,
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

    fn push(
        &mut self,
        ci: ContainerIdx,
        kind: ActionKind,
        policy: PolicyKind,
        reason: String,
        for_queue: Option<String>,
    ) {
        let view = self.view;
        let c = view.container(ci);
        self.acted.insert(ci);
        self.places.push(Some(ci));
        self.actions.push(Action {
            kind,
            policy,
            reason,
            application: Some(view.app(c.app).id),
            queue: self.explain.then(|| view.queue_of(c).path.clone()),
            node: self.explain.then(|| view.node(c.node).id.clone()),
            for_queue,
            before: Before::Limits(c.current),
        });
    }

    /// Give a container its whole allocation back.
    fn resume_fully(&mut self, ci: ContainerIdx, policy: PolicyKind, room: Room, reason: String) {
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
        reason: String,
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
        reason: impl FnOnce() -> String,
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
            if self.explain {
                reason()
            } else {
                String::new()
            },
            None,
        );
        Some(amount)
    }

    /// Containers under `none` (or every container, when the cluster policy is `none`)
    /// get everything back at once; kill marks under anything but `kill` are dropped.
    fn release_unmanaged(&mut self) {
        let view = self.view;
        // Skip walking every waiting container when no application is under `none`.
        let unmanaged = if self.policy.contains(&PolicyKind::None) {
            self.waiting
        } else {
            &[]
        };
        // The view lists them in no particular order: act in id order.
        let mut unmanaged: Vec<ContainerIdx> = unmanaged
            .iter()
            .filter(|w| self.policy[w.app.get()] == PolicyKind::None)
            .map(|w| w.container)
            .collect();
        unmanaged.sort_unstable_by_key(|&ci| view.container(ci).id);
        for ci in unmanaged {
            let c = view.container(ci);
            let reason = if self.s.kind == PolicyKind::None {
                why!(
                    self,
                    "policy is none: Preemptor is off and gives every container its allocation back"
                )
            } else {
                why!(
                    self,
                    "queue {} has policy none: its containers get their allocation back",
                    view.queue_of(c).path
                )
            };
            self.resume_fully(ci, PolicyKind::None, Room::Advertised(c.node.get()), reason);
        }
        let marked = std::mem::take(&mut self.marked);
        for ci in marked {
            let c = view.container(ci);
            if self.policy[c.app.get()] == PolicyKind::Kill {
                self.marked.push(ci);
            } else {
                self.ledger
                    .give(self.queue_of(c), Room::QueueOnly, self.held(c));
                self.memos.update(ci, c.id, |m| m.kill_marked_at = None);
            }
        }
    }

    /// A suspension that reached `suspend.max-duration-ms` ends, whatever the policy:
    /// the framework's own timeout would otherwise give up on the container
    /// (docs/operator-guide.md, section 8). It then rests for `suspend.rest-ms`, time to
    /// report, before any policy may take it again; its queue's other containers are
    /// taken instead.
    fn end_long_suspensions(&mut self) {
        let s = self.s;
        let max = s.suspend.max_duration_ms;
        if max == 0 || s.kind == PolicyKind::None {
            return;
        }
        let view = self.view;
        let mut due: Vec<(ContainerIdx, PolicyKind, Millis)> = Vec::new();
        for w in self.waiting {
            let ci = w.container;
            let policy = self.policy[w.app.get()];
            if w.state != ContainerState::Suspended
                || policy == PolicyKind::None
                || self.acted.contains(ci)
            {
                continue;
            }
            if let Some(at) = self.memos.get(ci).suspended_at
                && self.now >= at.saturating_add(max)
            {
                due.push((ci, policy, at));
            }
        }
        // The view lists them in no particular order: act in id order.
        due.sort_unstable_by_key(|&(ci, _, _)| view.container(ci).id);
        for (ci, policy, at) in due {
            let c = view.container(ci);
            let n = c.node.get();
            // LAS lends room on its node only; the others advertise it to the RM.
            let room = if policy == PolicyKind::Las {
                Room::Local(n)
            } else {
                Room::Advertised(n)
            };
            let rest = s.suspend.rest_ms;
            let reason = why!(
                self,
                "suspended for {}, the most yarn.preemptor.suspend.max-duration-ms allows before the framework's own timeout could give up on it; it runs at least {} before it may be taken again",
                Secs(self.now - at),
                Secs(rest)
            );
            self.resume_fully(ci, policy, room, reason);
            let until = self.now.saturating_add(rest);
            self.memos.update(ci, c.id, |m| m.rest_until = Some(until));
        }
    }

    /// Resumed by [`Self::end_long_suspensions`] and still resting.
    fn resting(&self, ci: ContainerIdx) -> bool {
        self.memos.get(ci).rest_until.is_some_and(|t| self.now < t)
    }

    fn queue_loads(&self) -> Vec<QueueLoad> {
        let s = self.s;
        self.view
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| QueueLoad {
                parent: q.parent.map(|p| p.get()),
                guaranteed: q.guaranteed.into(),
                maximum: q.maximum.into(),
                used: q.used.into(),
                held: self.ledger.held[i],
                pending: q.pending.into(),
                preemption_disabled: q.preemption_disabled,
                reclaimable: s.kind != PolicyKind::None
                    && is_share_based(q.policy.unwrap_or(s.kind)),
            })
            .collect()
    }

    /// Capacity accounting for every policy's report; kill, immediate, graceful and
    /// adaptive act on it.
    fn share_based(&mut self) -> (Vec<QueueLoad>, Accounting) {
        let loads = self.queue_loads();
        let acc = capacity::account(&loads, self.total, self.ledger.free_room(), self.s);
        if self.s.kind == PolicyKind::None {
            return (loads, acc);
        }
        self.resume_share_based(&acc);
        self.expire_kill_marks();
        // What a freeze frees counts toward its queue's target: taking the target on
        // top would be undone by resumption on the very next tick.
        let frozen = self.freeze_swapping();
        for q in 0..loads.len() {
            let target = acc.to_reclaim[q] - frozen.get(q).copied().unwrap_or_default();
            if target.any_positive() {
                self.reclaim_queue(q, target, &acc);
            }
        }
        (loads, acc)
    }

    /// Resumption when demand falls: under-served queues get back what they are owed,
    /// kill marks first, then suspended containers oldest suspension first (newest
    /// suspended last), each only after its D-th pick, never into room that starved
    /// demand or a node's running containers need.
    fn resume_share_based(&mut self, acc: &Accounting) {
        let view = self.view;
        let s = self.s;
        // Only room that is free now; room marked kills will free is the starved's.
        let mut spare = self.ledger.nodes_room() - Amount::sum(acc.starved.iter().copied());
        let mut room: Vec<Amount> = (0..view.queues.len())
            .map(|q| acc.ideal[q] - self.ledger.held[q])
            .collect();
        // Only queues under their ideal share get anything back.
        let owed =
            |ci: ContainerIdx| room[view.app(view.container(ci).app).queue.get()].any_positive();
        let mut marks: Vec<ContainerIdx> =
            self.marked.iter().copied().filter(|&ci| owed(ci)).collect();
        // Cached: a key costs a memo lookup, and thousands may wait.
        marks.sort_by_cached_key(|&ci| {
            let m = self.memos.get(ci);
            (
                std::cmp::Reverse(m.kill_marked_at),
                std::cmp::Reverse(view.container(ci).id),
            )
        });
        // Under LAS alone no application is share-based: thousands wait, none of them
        // for this.
        let mut waiting: Vec<ContainerIdx> = Vec::new();
        if self.policy.iter().any(|&p| is_share_based(p)) {
            waiting.extend(
                self.waiting
                    .iter()
                    .filter(|w| {
                        is_share_based(self.policy[w.app.get()])
                            && !self.acted.contains(w.container)
                            && room[view.app(w.app).queue.get()].any_positive()
                    })
                    .map(|w| w.container),
            );
        }
        if marks.is_empty() && waiting.is_empty() {
            return;
        }
        waiting.sort_by_cached_key(|&ci| {
            (
                self.memos.get(ci).suspended_at.unwrap_or(0),
                view.container(ci).id,
            )
        });
        let mut unmarked = Acted::new(view.containers.len());
        let mut any_unmarked = false;
        for ci in marks {
            let c = view.container(ci);
            let (q, held) = (self.queue_of(c), self.held(c));
            if held.fits_in(&room[q]) {
                room[q] -= held;
                self.ledger.give(q, Room::QueueOnly, held);
                self.memos.update(ci, c.id, |m| m.kill_marked_at = None);
                unmarked.insert(ci);
                any_unmarked = true;
            }
        }
        if any_unmarked {
            self.marked.retain(|&m| !unmarked.contains(m));
        }
        let d = s.suspend.resume_delay.max(1);
        let interval = s.monitoring_interval_ms.max(1);
        let step = Amount::from(s.graceful.step);
        // Room picked containers will need on their node (resumed or not yet).
        let mut reserved: IdMap<usize, Amount> = IdMap::default();
        for ci in waiting {
            let c = view.container(ci);
            let (q, n) = (self.queue_of(c), c.node.get());
            let policy = self.policy[c.app.get()];
            let owed = Amount::from(c.allocated) - self.held(c);
            let inc = if policy == PolicyKind::Graceful {
                owed.component_min(step)
            } else {
                owed
            };
            let node_free =
                self.ledger.node_room(n) - reserved.get(&n).copied().unwrap_or_default();
            if !(inc.fits_in(&room[q]) && inc.fits_in(&spare) && inc.fits_in(&node_free)) {
                continue;
            }
            room[q] -= inc;
            spare -= inc;
            // One pick, and one graceful step, per monitoring interval however often
            // `decide` runs.
            let now = self.now;
            let (counted, picks) = self.memos.update(ci, c.id, |m| {
                let counted = m
                    .last_pick_at
                    .is_none_or(|at| now >= at.saturating_add(interval));
                if counted {
                    m.resume_picks = m.resume_picks.saturating_add(1);
                    m.last_pick_at = Some(now);
                }
                (counted, m.resume_picks)
            });
            if !counted || picks < d {
                *reserved.entry(n).or_default() += inc;
                continue;
            }
            let queue = &view.queue_of(c).path;
            let reason = why!(
                self,
                "queue {queue} is {} below its ideal share; picked for resumption {picks} times (delayed resumption D = {d})",
                acc.ideal[q] - self.ledger.held[q]
            );
            let reason = if inc == owed {
                reason
            } else {
                why!(self, "{reason}; one graceful step back")
            };
            self.resume_by(ci, policy, Room::Advertised(n), inc, reason);
        }
    }

    /// Marked containers whose wait is over are killed; the rest are reported.
    fn expire_kill_marks(&mut self) {
        let wait = self.s.kill.max_wait_before_kill_ms;
        for ci in self.marked.clone() {
            let Some(at) = self.memos.get(ci).kill_marked_at else {
                continue;
            };
            if self.now >= at.saturating_add(wait) {
                let reason = why!(
                    self,
                    "marked for preemption at {at} ms; the ApplicationMaster did not release it within max-wait-before-kill ({})",
                    Secs(wait)
                );
                self.kill(ci, reason, None);
            } else {
                self.pending_kill(ci, at, false, None);
            }
        }
    }

    fn kill(&mut self, ci: ContainerIdx, reason: String, for_queue: Option<String>) {
        let c = self.view.container(ci);
        let held = self.held(c);
        self.ledger
            .killed(c.node.get(), held, Amount::from(c.allocated) - held);
        let kind = ActionKind::Kill { container: c.id };
        self.push(ci, kind, PolicyKind::Kill, reason, for_queue);
    }

    fn pending_kill(&mut self, ci: ContainerIdx, at: Millis, new: bool, for_queue: Option<String>) {
        let view = self.view;
        let c = view.container(ci);
        self.pending_kills.push(PendingKill {
            container: c.id,
            application: view.app(c.app).id,
            queue: view.queue_of(c).path.clone(),
            node: view.node(c.node).id.clone(),
            marked_at_ms: at,
            kill_at_ms: at.saturating_add(self.s.kill.max_wait_before_kill_ms),
            new,
            allocated: c.allocated,
            for_queue,
        });
    }

    /// Graceful: a shrunk container that started swapping is frozen at the footprint's
    /// CPU at once and no more memory is taken from it (`reclaimable` skips it).
    /// Returns what that took from each queue (empty if nothing).
    fn freeze_swapping(&mut self) -> Vec<Amount> {
        let view = self.view;
        let mut frozen = Vec::new();
        if !self.policy.contains(&PolicyKind::Graceful) {
            return frozen;
        }
        // One on its way back (picked for resumption) is relieved, not frozen. The
        // view lists them in no particular order and the ledger may refuse some: take
        // in id order.
        let mut swapping: Vec<ContainerIdx> = self
            .waiting
            .iter()
            .filter(|w| {
                self.policy[w.app.get()] == PolicyKind::Graceful
                    && w.state == ContainerState::Shrunk
                    && w.swapping
                    && !self.acted.contains(w.container)
                    && self.memos.get(w.container).resume_picks == 0
            })
            .map(|w| w.container)
            .collect();
        swapping.sort_unstable_by_key(|&ci| view.container(ci).id);
        for ci in swapping {
            let c = view.container(ci);
            let floor = self.floor(c);
            let to = Amount::new(self.limits(c).memory_mb, floor.vcores_milli);
            let amount = self.held(c) - self.held_at(c, to);
            let q = self.queue_of(c);
            if amount.is_zero()
                || !self
                    .ledger
                    .take(q, Room::Advertised(c.node.get()), amount, None)
            {
                continue;
            }
            if frozen.is_empty() {
                frozen.resize(view.queues.len(), Amount::ZERO);
            }
            frozen[q] += amount;
            // The CPU it frees must not resume it within the same interval.
            let now = self.now;
            self.memos.update(ci, c.id, |m| {
                m.suspended_at.get_or_insert(now);
                m.last_pick_at = Some(now);
            });
            let reason = why!(
                self,
                "swapping (swap-in or major-fault rate above the threshold): frozen at the footprint CPU; no more memory is taken from it"
            );
            self.push(
                ci,
                ActionKind::Shrink {
                    container: c.id,
                    to: to.to_limits(),
                },
                PolicyKind::Graceful,
                reason,
                None,
            );
        }
        frozen
    }

    /// Not marked, not yet acted on, managed, running or shrunk, above its footprint.
    /// The bitmaps come first: a victim walk passes every container marked in earlier
    /// ticks, and reading those from a large view is a cache miss each.
    fn reclaimable(&self, ci: ContainerIdx, c: &Container) -> bool {
        !self.marked_set.contains(ci)
            && !self.acted.contains(ci)
            && c.managed
            && matches!(c.state, ContainerState::Running | ContainerState::Shrunk)
            && !self.limits(c).fits_in(&self.floor(c))
            && !self.resting(ci)
    }

    /// BIG-C Algorithm 2 on one over-served queue: jobs by longest remaining time,
    /// their containers newest first, AMs only once nothing else is left; each job is
    /// reclaimed with its own mechanism. Picks that turn out unnecessary (the target
    /// is met without them) are dropped again, latest first, so that the overshoot is
    /// smaller than every pick and the next tick has nothing to give back.
    fn reclaim_queue(&mut self, q: usize, target: Amount, acc: &Accounting) {
        let view = self.view;
        let starved = (0..acc.starved.len())
            .filter(|&i| acc.starved[i].any_positive())
            .max_by(|&a, &b| {
                acc.starved[a]
                    .dominant_share(&self.total)
                    .total_cmp(&acc.starved[b].dominant_share(&self.total))
                    .then(b.cmp(&a))
            });
        let for_queue = (starved)
            .filter(|_| self.explain)
            .map(|i| view.queues[i].path.clone());
        let mut queue_reason = match starved {
            Some(i) => why!(
                self,
                "queue {} is {} short of its share",
                view.queues[i].path,
                acc.starved[i]
            ),
            None => why!(self, "starved demand"),
        };
        if self.explain {
            let _ = write!(
                queue_reason,
                "; {} is over its share by {}, reclaiming {} this round",
                view.queues[q].path, acc.over[q], target
            );
        }
        let jobs = jobs_by_remaining_time(
            view,
            crate::cluster::QueueIdx(q as u32),
            self.now,
            |ai, _| is_share_based(self.policy[ai.get()]),
        );
        let mut sel = Selection {
            target,
            to: starved,
            taken: Amount::ZERO,
            picks: Vec::new(),
        };
        let mut reached = Vec::new();
        for (rank, (ai, remaining)) in jobs.into_iter().enumerate() {
            if sel.met() {
                break;
            }
            let reason = why!(
                self,
                "{queue_reason}; job {} has the {} remaining time ({})",
                view.app(ai).id,
                if rank == 0 { "longest" } else { "next-longest" },
                describe_remaining(remaining)
            );
            let reason = Rc::new(reason);
            self.pick_from(ai, false, &reason, &mut sel);
            reached.push((ai, reason));
        }
        for (ai, reason) in reached {
            if sel.met() {
                break;
            }
            let reason = Rc::new(why!(self, "{reason}; only ApplicationMasters are left"));
            self.pick_from(ai, true, &reason, &mut sel);
        }
        let Selection {
            mut taken,
            mut picks,
            ..
        } = sel;
        for i in (0..picks.len()).rev() {
            let p = &picks[i];
            if target.fits_in(&(taken - p.amount)) {
                self.ledger.untake(q, p.room, p.amount);
                self.acted.remove(p.ci);
                taken -= p.amount;
                picks.remove(i);
            }
        }
        for p in picks {
            self.carry_out(p, &for_queue);
        }
    }

    /// Take from one job's reclaimable containers (its ApplicationMasters if `ams`)
    /// through the ledger until the selection's target is met: whole containers for
    /// kill and immediate, one graceful step per container (those shrunk least so far
    /// first, so that steps go round-robin across rounds), newest first.
    fn pick_from(&mut self, ai: AppIdx, ams: bool, reason: &Rc<String>, sel: &mut Selection) {
        let view = self.view;
        let policy = self.policy[ai.get()];
        let footprint = self.s.suspend.footprint;
        // Graceful goes round-robin: least shrunk so far first.
        let shrunk = |c: &Container| {
            if policy == PolicyKind::Graceful {
                let r = Amount::from(c.allocated) - held_of(c, footprint);
                (r.memory_mb, r.vcores_milli)
            } else {
                (0, 0)
            }
        };
        let key = |ci: ContainerIdx| {
            let c = view.container(ci);
            (shrunk(c), newest_key(c))
        };
        let candidate =
            |t: &Self, ci: ContainerIdx, c: &Container| t.reclaimable(ci, c) && c.is_am == ams;
        let containers = &view.app(ai).containers;
        if !view.containers_oldest_first(ai) {
            let all = containers
                .iter()
                .copied()
                .filter(|&ci| candidate(self, ci, view.container(ci)))
                .collect();
            for ci in smallest_first(all, key) {
                if sel.met() {
                    return;
                }
                self.pick(ci, policy, reason, sel);
            }
            return;
        }
        // Listed oldest first: walk backwards and stop once the target is met, so a
        // tick reads only the containers it takes (not every container of the job).
        // Ones already shrunk come after every unshrunk one, in their own order.
        let mut shrunk_ones = Vec::new();
        for &ci in containers.iter().rev() {
            if sel.met() {
                return;
            }
            let c = view.container(ci);
            if !candidate(self, ci, c) {
                continue;
            }
            if shrunk(c) == (0, 0) {
                self.pick(ci, policy, reason, sel);
            } else {
                shrunk_ones.push(ci);
            }
        }
        for ci in smallest_first(shrunk_ones, key) {
            if sel.met() {
                return;
            }
            self.pick(ci, policy, reason, sel);
        }
    }

    /// Take from container `ci` for the selection, if its policy and the ledger allow.
    fn pick(
        &mut self,
        ci: ContainerIdx,
        policy: PolicyKind,
        reason: &Rc<String>,
        sel: &mut Selection,
    ) {
        let view = self.view;
        let step = Amount::from(self.s.graceful.step);
        let c = view.container(ci);
        let q = self.queue_of(c);
        let node = c.node.get();
        let held = self.held(c);
        let (room, amount, what) = match policy {
            PolicyKind::Kill => (Room::QueueOnly, held, Reclaim::Mark),
            PolicyKind::Immediate => {
                let floor = self.floor(c);
                (
                    Room::Advertised(node),
                    held - self.held_at(c, floor),
                    Reclaim::Suspend(floor),
                )
            }
            PolicyKind::Graceful if !c.swapping && self.may_step(ci) => {
                let to = (self.limits(c) - step).component_max(self.floor(c));
                let amount = held - self.held_at(c, to);
                (Room::Advertised(node), amount, Reclaim::Shrink(to))
            }
            _ => return,
        };
        if self.ledger.take(q, room, amount, sel.to) {
            sel.taken += amount;
            self.acted.insert(ci);
            sel.picks.push(Pick {
                ci,
                room,
                amount,
                what,
                policy,
                reason: reason.clone(),
            });
        }
    }

    /// Graceful takes one step per container per round (monitoring interval).
    fn may_step(&self, ci: ContainerIdx) -> bool {
        let interval = self.s.monitoring_interval_ms.max(1);
        self.memos
            .get(ci)
            .last_step_at
            .is_none_or(|at| self.now >= at.saturating_add(interval))
    }

    fn carry_out(&mut self, p: Pick, for_queue: &Option<String>) {
        let c = self.view.container(p.ci);
        let reason = Rc::unwrap_or_clone(p.reason);
        let now = self.now;
        self.memos.update(p.ci, c.id, |m| match p.what {
            Reclaim::Mark => m.kill_marked_at = Some(now),
            Reclaim::Suspend(_) => m.suspended(now),
            Reclaim::Shrink(_) => {
                m.suspended(now);
                m.last_step_at = Some(now);
            }
        });
        match p.what {
            Reclaim::Mark => {
                if self.s.kill.max_wait_before_kill_ms == 0 {
                    self.kill(p.ci, reason, for_queue.clone());
                } else {
                    self.pending_kill(p.ci, now, true, for_queue.clone());
                }
            }
            Reclaim::Suspend(floor) => {
                let footprint = floor.to_limits();
                self.push(
                    p.ci,
                    ActionKind::Suspend {
                        container: c.id,
                        footprint,
                    },
                    p.policy,
                    reason,
                    for_queue.clone(),
                );
            }
            Reclaim::Shrink(to) => {
                let reason = why!(
                    self,
                    "{reason}; one graceful step of {}",
                    self.s.graceful.step
                );
                self.push(
                    p.ci,
                    ActionKind::Shrink {
                        container: c.id,
                        to: to.to_limits(),
                    },
                    p.policy,
                    reason,
                    for_queue.clone(),
                );
            }
        }
    }

    /// Kairos' node algorithm on every node that has a LAS container waiting (that fits
    /// the free room, or whose quantum timer is due) or more running than fits.
    fn las(&mut self) {
        let Some(mut index) = self.las.take() else {
            return;
        };
        // Only these can qualify: nodes this tick has touched (only they hold other
        // than the view and their base say) and the nodes the index lists: changed
        // since the last tick, timer due, or qualifying then. On any other node nothing
        // the test reads has changed since it failed. As a bitmap, so that nodes go in
        // index order, as the round budget is spent.
        let mut candidates = vec![0u64; self.view.nodes.len().div_ceil(64)];
        for &n in self.ledger.touched_nodes().iter().chain(&index.look) {
            if let Some(w) = candidates.get_mut(n as usize / 64) {
                *w |= 1 << (n % 64);
            }
        }
        index.look.clear();
        #[cfg(debug_assertions)]
        self.check_las_candidates(&index, &candidates);
        for n in set_bits(&candidates) {
            let Some(w) = index.nodes.get(n) else {
                continue;
            };
            let any = w.count > 0;
            let LasNeed {
                overflow,
                fits,
                due,
            } = self.las_need(n, w);
            if !(overflow || fits || due) {
                // Nor next tick, unless the node changes or its timer comes due.
                continue;
            }
            self.las_node(n);
            // Qualifying next tick with nothing changed here (a change lists the node
            // again, a due timer reports it, and a node this tick touched is looked at
            // anyway): more runs than fits, or a waiting container fits the room or has
            // no timer.
            let timer = self.las_checks.get(self.view, n);
            if !self.ledger.touched(n) && (overflow || fits || any && timer.is_none()) {
                index.look.push(n as u32);
            }
        }
        self.las = Some(index);
    }

    /// Why node `n`, whose waiting LAS containers are `w`, needs a LAS step, if it
    /// does (any of the three).
    fn las_need(&mut self, n: usize, w: &LasWaiting) -> LasNeed {
        let any = w.count > 0;
        let busy = self.ledger.node_held(n) - if any { w.held } else { Amount::ZERO };
        LasNeed {
            overflow: !busy.fits_in(&self.ledger.node_cap(n)),
            fits: any && w.smallest.fits_in(&self.ledger.node_room(n)),
            due: any && (self.las_checks.get(self.view, n)).is_none_or(|t| t <= self.now),
        }
    }

    /// Debug builds: the index agrees with counting every waiting container anew, and
    /// no node that qualifies is missing from `candidates`.
    #[cfg(debug_assertions)]
    fn check_las_candidates(&mut self, index: &LasIndex, candidates: &[u64]) {
        let mut fresh = LasIndex::default();
        let mut scratch = NodeBuffers::default();
        fresh.rebuild(self.view, self.s, &self.policy, &mut scratch);
        assert_eq!(fresh.queues, index.queues, "LAS index: per-queue sums");
        assert_eq!(
            fresh.others, index.others,
            "LAS index: other waiting containers"
        );
        for (n, (a, b)) in fresh.nodes.iter().zip(&index.nodes).enumerate() {
            assert!(
                (a.count, a.others, a.held, a.reduced) == (b.count, b.others, b.held, b.reduced)
                    && (a.count == 0 || a.smallest == b.smallest),
                "LAS index: node {n} counted {b:?}, anew {a:?}"
            );
        }
        // The ledger's bases are the index's reductions, and its free room their sum.
        let mut room = Amount::ZERO;
        for (n, a) in fresh.nodes.iter().enumerate() {
            if !self.ledger.touched(n) {
                let used = Amount::from(self.view.node_facts()[n].used);
                assert_eq!(
                    self.ledger.node_held(n),
                    used - a.reduced,
                    "node {n}'s base"
                );
            }
            room += self.ledger.node_room(n);
        }
        assert_eq!(room, self.ledger.nodes_room(), "free room and the bases");
        // A rebuild lists every node with a waiting container or more allocated than
        // fits, and nothing else makes a node qualify.
        for &n in &fresh.look {
            let n = n as usize;
            let w = &fresh.nodes[n];
            let listed = candidates
                .get(n / 64)
                .is_some_and(|w| w & (1 << (n % 64)) != 0);
            let LasNeed {
                overflow,
                fits,
                due,
            } = self.las_need(n, w);
            assert!(
                listed || !(overflow || fits || due),
                "LAS: node {n} qualifies but is not a candidate"
            );
        }
    }

    fn las_node(&mut self, n: usize) {
        let mut work = std::mem::take(&mut self.las_work);
        self.las_node_in(n, &mut work);
        self.las_work = work;
    }

    fn las_node_in(&mut self, n: usize, work: &mut LasWork) {
        let view = self.view;
        let s = self.s;
        let node = view.node(crate::cluster::NodeIdx(n as u32));
        let LasWork {
            idx,
            tasks,
            before,
            moves,
            scratch,
        } = work;
        idx.clear();
        let mut others = Amount::ZERO;
        for &ci in &node.containers {
            let c = view.container(ci);
            if !c.is_live() {
                continue;
            }
            if self.policy[c.app.get()] == PolicyKind::Las
                && c.managed
                && !self.acted.contains(ci)
                && !self.resting(ci)
            {
                idx.push(ci);
            } else {
                others += self.held(c);
            }
        }
        // LAS breaks ties by place: make that the container id, not however the
        // node's containers happen to be listed.
        idx.sort_unstable_by_key(|&ci| view.container(ci).id);
        let cap = self.ledger.node_cap(n) - others;
        tasks.clear();
        tasks.extend(idx.iter().map(|&ci| {
            let c = view.container(ci);
            let m = self.memos.get(ci);
            LasTask {
                demand: Amount::from(c.allocated),
                attained_ms: c.attained_service_at(self.now),
                running: c.state == ContainerState::Running,
                since_ms: match c.state {
                    ContainerState::Running => m.quantum_start.unwrap_or(c.started_ms),
                    _ => m.suspended_at.unwrap_or(c.started_ms),
                },
                preemptions: m.las_preemptions,
            }
        }));
        before.clear();
        before.extend_from_slice(tasks);
        moves.clear();
        {
            let ledger = &mut self.ledger;
            let footprint = s.suspend.footprint;
            las::node_step(
                cap,
                tasks,
                self.now,
                &s.las,
                |g| {
                    let (v, for_task, withdraw) = match g {
                        LasGate::Preempt { victim, for_task } => (victim, for_task, false),
                        LasGate::Withdraw { victim, for_task } => (victim, for_task, true),
                    };
                    let c = view.container(idx[v]);
                    let q = view.app(c.app).queue.get();
                    let alloc = Amount::from(c.allocated);
                    let floor = alloc.component_min(Amount::from(footprint));
                    let amount = held_of(c, footprint) - held_at(alloc, floor, footprint);
                    if withdraw {
                        ledger.untake(q, Room::Local(n), amount);
                        return true;
                    }
                    let to = for_task.map(|b| view.app(view.container(idx[b]).app).queue.get());
                    ledger.take(q, Room::Local(n), amount, to)
                },
                scratch,
                moves,
            );
        }
        let w = Secs(s.las.quantum_ms);
        for mv in moves.iter() {
            let ci = idx[mv.task];
            let c = view.container(ci);
            let t = &tasks[mv.task];
            let attained = Secs(c.attained_service_at(self.now));
            let other = mv.for_task.map(|b| {
                (
                    view.container(idx[b]).id,
                    Secs(view.container(idx[b]).attained_service_at(self.now)),
                )
            });
            let for_queue = (mv.for_task)
                .filter(|_| self.explain)
                .map(|b| view.queue_of(view.container(idx[b])).path.clone());
            if mv.suspend {
                let reason = match (mv.cause, other) {
                    (LasCause::QuantumExpired, Some((b, ba))) => why!(
                        self,
                        "node {}: its quantum W = {w} expired and {b} waits with less attained service ({ba} <= {attained})",
                        node.id
                    ),
                    _ => why!(
                        self,
                        "node {}: no free core for a new container (running LAS containers need more than {cap}); it has the most attained service ({attained})",
                        node.id
                    ),
                };
                let preemptions = t.preemptions;
                let floor = self.floor(c);
                let now = self.now;
                self.memos.update(ci, c.id, |m| {
                    m.suspended(now);
                    m.las_preemptions = preemptions;
                });
                self.push(
                    ci,
                    ActionKind::Suspend {
                        container: c.id,
                        footprint: floor.to_limits(),
                    },
                    PolicyKind::Las,
                    reason,
                    for_queue,
                );
            } else {
                let reason = match mv.cause {
                    LasCause::QuantumExpired => why!(
                        self,
                        "node {}: a quantum expired and this waiting container has the least attained service ({attained})",
                        node.id
                    ),
                    _ => why!(
                        self,
                        "node {}: room is free; least attained service among waiting containers ({attained})",
                        node.id
                    ),
                };
                self.resume_fully(ci, PolicyKind::Las, Room::Local(n), reason);
                let now = self.now;
                self.memos.update(ci, c.id, |m| m.quantum_start = Some(now));
            }
        }
        for (i, (t, b)) in tasks.iter().zip(before.iter()).enumerate() {
            if t.running && b.running && t.since_ms != b.since_ms {
                let c = view.container(idx[i]);
                let since = t.since_ms;
                self.memos
                    .update(idx[i], c.id, |m| m.quantum_start = Some(since));
            }
        }
        self.las_checks
            .set(view, n, las::next_expiry(tasks, &s.las));
        let running = Amount::sum(tasks.iter().filter(|t| t.running).map(|t| t.demand));
        if self.explain && !running.fits_in(&cap) {
            self.notes.push(format!(
                "node {}: running LAS containers need {running} but only {cap} is theirs; none may be suspended now (starvation guard, protected queue or round budget)",
                node.id
            ));
        }
    }

    /// Dice: end timed-out suspensions, feed the window, and on the tick that closes
    /// it, size the short partition and send opportunistic preemption requests.
    fn dice(&mut self, st: &mut DiceState, rng: &mut Pcg64) -> Option<DiceReport> {
        let scan = self.dice.take()?;
        let view = self.view;
        let settings = self.s;
        let s = &settings.dice;
        for w in self.waiting {
            let ci = w.container;
            if self.policy[w.app.get()] != PolicyKind::Dice || self.acted.contains(ci) {
                continue;
            }
            let c = view.container(ci);
            let owed = Amount::from(c.allocated) - self.held(c);
            if dice::suspension_over(self.memos.get(ci).suspended_at, self.now, s)
                && owed.fits_in(&self.ledger.node_room(c.node.get()))
            {
                let reason = why!(
                    self,
                    "suspension timeout ({}) is over and the room it lent is free again",
                    Secs(s.suspension_timeout_ms)
                );
                self.resume_fully(ci, PolicyKind::Dice, Room::Advertised(c.node.get()), reason);
            }
        }
        let (Some(last), true) = (st.last_sample_ms, st.window.is_some()) else {
            st.window = Some(DiceWindow::new(self.now));
            st.last_sample_ms = Some(self.now);
            return None;
        };
        let window = st.window.get_or_insert_with(|| DiceWindow::new(last));
        for &w in &scan.waits {
            window.record_waits(w, 1);
        }
        window.record_usage(
            scan.short_vcores,
            scan.all_vcores,
            self.now.saturating_sub(last),
        );
        st.last_sample_ms = Some(self.now);
        if !window.is_due(self.now, s.window_ms) {
            return None;
        }
        // Short tasks still waiting count with the time they have waited so far.
        for a in view.apps.iter().filter(|a| a.class == JobClass::Short) {
            if let Some(since) = a.pending_since_ms {
                let n: u64 = a.requests.iter().map(|r| r.num_containers as u64).sum();
                window.record_waits(self.now.saturating_sub(since), n);
            }
        }
        let share = window.short_share().or(st.short_share);
        st.short_share = share;
        let mut report = dice::window_decision(window.mean_wait_ms(), share, view.nodes.len(), s);
        st.short_partition = Some(report.short_partition);
        st.window = Some(DiceWindow::new(self.now));
        if report.preemption_requests > 0 {
            self.plan_partitions(report.short_partition);
            let mut converting = vec![false; view.nodes.len()];
            for &(n, _) in &self.partition_changes {
                if let Some(c) = converting.get_mut(n) {
                    *c = true;
                }
            }
            let general: Vec<u32> = (0..view.nodes.len())
                .filter(|&n| (view.nodes[n].partition == Partition::General) != converting[n])
                .map(|n| n as u32)
                .collect();
            let mut chosen = dice::choose_nodes(rng, &general, report.preemption_requests);
            // Visited in node order, from a random start so that a binding round budget
            // favours no node numbers: in the sample's own order no visit finds the last
            // one's pages mapped or cached, which made this pass grow faster than the
            // cluster (docs/policies.md, "Cost of a decision").
            chosen.sort_unstable();
            if !chosen.is_empty() {
                let start = rng.random_range(0..chosen.len());
                chosen.rotate_left(start);
            }
            let unit = view
                .apps
                .iter()
                .filter(|a| a.class == JobClass::Short)
                .flat_map(|a| a.requests.iter())
                .filter(|r| r.num_containers > 0)
                .map(|r| Amount::from(r.capability))
                .reduce(Amount::component_min);
            let header = why!(
                self,
                "Dice window: short tasks waited {} on average (r = {:.2}, {} model p = {:.2}); opportunistic preemption request to this node, one of {}",
                Secs(report.mean_wait_ms as u64),
                report.r,
                s.preemption_model.name(),
                report.p_preemption,
                report.preemption_requests
            );
            for n in chosen {
                if self.dice_node(n as usize, unit, &header) {
                    report.suspended += 1;
                }
            }
        }
        Some(report)
    }

    /// A node that received a preemption request suspends one running long container
    /// if Dice's four conditions hold; `unit` is the smallest outstanding short request.
    fn dice_node(&mut self, n: usize, unit: Option<Amount>, header: &str) -> bool {
        let view = self.view;
        let settings = self.s;
        let s = &settings.dice;
        let node = &view.nodes[n];
        let long = |c: &Container| c.is_live() && view.app(c.app).class == JobClass::Long;
        // One pass over the node's containers: they lie scattered in the view.
        // The candidate: non-AM before AM, then newest first; the first such in list
        // order on ties, as a stable sort would give.
        let better = |a: ContainerIdx, b: ContainerIdx| {
            let (ca, cb) = (view.container(a), view.container(b));
            ca.is_am
                .cmp(&cb.is_am)
                .then(super::victims::newest_first(ca, cb))
                .is_lt()
        };
        let eligible = |ci: ContainerIdx, c: &Container| {
            c.managed && self.policy[c.app.get()] == PolicyKind::Dice && !self.acted.contains(ci)
        };
        let mut candidate: Option<ContainerIdx> = None;
        for &ci in &node.containers {
            let c = view.container(ci);
            if !long(c) {
                continue;
            }
            if c.state != ContainerState::Running {
                // Another long container is suspended here: the node declines.
                return false;
            }
            // The acted bitmap last: a node's containers lie far apart in it.
            if candidate.is_none_or(|best| better(ci, best)) && eligible(ci, c) {
                candidate = Some(ci);
            }
        }
        // The suspension count is looked up for the best container only (a hash lookup
        // per container was a third of the pass at 50,000 nodes); only if that one is
        // used up does a second pass look for the best of the rest.
        let used_up = |ci: ContainerIdx| self.memos.get(ci).dice_suspensions >= s.max_suspensions;
        if candidate.is_some_and(used_up) {
            candidate = None;
            for &ci in &node.containers {
                let c = view.container(ci);
                if long(c)
                    && c.state == ContainerState::Running
                    && eligible(ci, c)
                    && !used_up(ci)
                    && candidate.is_none_or(|best| better(ci, best))
                {
                    candidate = Some(ci);
                }
            }
        }
        let Some(ci) = candidate else {
            return false;
        };
        if self.resting(ci) {
            return false;
        }
        let c = view.container(ci);
        let freed = self.ledger.node_room(n) + (self.held(c) - self.held_at(c, self.floor(c)));
        let facts = DiceNodeFacts {
            // The candidate is one; the scan returned at the first suspended one.
            long_running: true,
            long_suspended: false,
            short_waiting: unit.is_some_and(|u| u.fits_in(&freed)),
        };
        let suspensions = self.memos.get(ci).dice_suspensions;
        if !dice::node_accepts(&facts, suspensions, s.max_suspensions) {
            return false;
        }
        let reason = || {
            // Sized up front: growing a copy of the long header costs more than the rest.
            let mut r = String::with_capacity(header.len() + 160);
            let _ = write!(
                r,
                "{header}: long job {} runs here, no long container is suspended here, short work is waiting (suspension {} of at most {})",
                view.app(c.app).id,
                suspensions + 1,
                s.max_suspensions
            );
            r
        };
        if self
            .suspend(ci, PolicyKind::Dice, Room::Advertised(n), reason)
            .is_none()
        {
            return false;
        }
        self.memos.update(ci, c.id, |m| {
            m.dice_suspensions = m.dice_suspensions.saturating_add(1);
        });
        true
    }

    /// Node partitions: Dice's short partition of the size decided for this window
    /// (MinShort before the first window closes, if configured); without Dice, every
    /// node is general.
    fn partitions(&mut self, st: &DiceState) {
        if self.partitions_planned {
            return;
        }
        if !self.dice_active {
            let view = self.view;
            if view.partitioned_nodes() == 0 {
                return;
            }
            self.partition_changes = view
                .reshaped_nodes()
                .iter()
                .filter(|&&n| view.node(n).partition == Partition::Short)
                .map(|&n| (n.get(), Partition::General))
                .collect();
            return;
        }
        let nodes = self.view.nodes.len();
        // Before the first window closes: MinShort when configured, else the floor.
        let floor = self.s.dice.min_short_nodes.min(nodes);
        let target = st.short_partition.or_else(|| {
            let configured = self
                .s
                .dice
                .min_short_fraction
                .map(|f| dice::short_partition_size(nodes, 0, f, 1.0).max(floor));
            configured.or((floor > 0).then_some(floor))
        });
        if let Some(target) = target {
            self.plan_partitions(target);
        }
    }

    /// Convert the least loaded general nodes, or release the most loaded short nodes,
    /// until `target` nodes are short. Running containers are never touched.
    fn plan_partitions(&mut self, target: usize) {
        self.partitions_planned = true;
        let ledger = &self.ledger;
        let nodes = &self.view.nodes;
        let short = nodes
            .iter()
            .filter(|n| n.partition == Partition::Short)
            .count();
        let (from, k, to) = if short < target {
            (Partition::General, target - short, Partition::Short)
        } else {
            (Partition::Short, short - target, Partition::General)
        };
        if k == 0 {
            self.partition_changes.clear();
            return;
        }
        // Least loaded first when converting, most loaded first when releasing; the
        // load is computed once per node, not once per comparison.
        let converting = to == Partition::Short;
        let mut pool: Vec<(f64, u32)> = (0..nodes.len())
            .filter(|&n| nodes[n].partition == from)
            .map(|n| {
                let load = ledger.node_held(n).dominant_share(&ledger.node_cap(n));
                (if converting { load } else { -load }, n as u32)
            })
            .collect();
        if k < pool.len() {
            pool.select_nth_unstable_by(k, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            pool.truncate(k);
        }
        pool.sort_unstable_by_key(|&(_, n)| n);
        self.partition_changes = pool.into_iter().map(|(_, n)| (n as usize, to)).collect();
    }

    /// Advertise physical capacity plus what was reclaimed there (and N+Q admission
    /// under LAS); set partitions.
    fn node_capacities(&mut self) {
        let view = self.view;
        let off = self.s.kind == PolicyKind::None;
        let las_on = self.las_active;
        // A node the tick did not touch has nothing reclaimed, so it needs a change
        // only if it advertises other than its capacity (plus LAS's admission): without
        // LAS, a reshaped node; under LAS, a node of a (capacity, advertised) pair that
        // does not match, which a few pairs tell for all nodes.
        let admitted_everywhere = || {
            view.node_shapes()
                .all(|(capacity, advertised)| advertised == las::admission(capacity, &self.s.las))
        };
        // Touched nodes come in the order first touched, thousands under LAS: only the
        // few that change are sorted into node order. Once every node advertises N+Q, a
        // node changes only if it has reclaimed room to advertise.
        let all = 0..view.nodes.len();
        let touched = self.ledger.touched_nodes().iter().map(|&n| n as usize);
        let advertising = self.ledger.advertising_nodes().iter().map(|&n| n as usize);
        let candidates: Box<dyn Iterator<Item = usize>> = if las_on && !admitted_everywhere() {
            Box::new(all)
        } else if las_on {
            Box::new(advertising)
        } else {
            Box::new(view.reshaped_nodes().iter().map(|n| n.get()).chain(touched))
        };
        // Nodes mostly share a few shapes: admission is worked out once per shape run.
        let mut admitted: Option<(Resource, Resource)> = None;
        let mut changes: Vec<(usize, Resource, Resource)> = Vec::new();
        for n in candidates {
            let facts = &view.node_facts()[n];
            let capacity = facts.capacity;
            let reclaimed = if off {
                Resource::ZERO
            } else {
                self.ledger.node_reclaimed(n).to_resource()
            };
            let extra = match admitted {
                _ if !las_on => Resource::ZERO,
                Some((cap, extra)) if cap == capacity => extra,
                _ => {
                    let extra = las::admission(capacity, &self.s.las) - capacity;
                    admitted = Some((capacity, extra));
                    extra
                }
            };
            if capacity + reclaimed + extra != facts.advertised {
                changes.push((n, reclaimed, extra));
            }
        }
        changes.sort_unstable_by_key(|&(n, ..)| n);
        changes.dedup_by_key(|&mut (n, ..)| n);
        for (n, reclaimed, extra) in changes {
            let facts = &view.node_facts()[n];
            let (capacity, before) = (facts.capacity, facts.advertised);
            let advertised = capacity + reclaimed + extra;
            let node = &view.nodes[n];
            let mut reason = why!(self, "physical {capacity}");
            if self.explain && reclaimed.any_positive() {
                let _ = write!(reason, " + reclaimed {reclaimed}");
            }
            if self.explain && extra.any_positive() {
                let _ = write!(
                    reason,
                    " + LAS admission of N + Q = {} + {} containers",
                    capacity.vcores, self.s.las.extra_slots
                );
            }
            self.node_action(
                n,
                ActionKind::SetNodeCapacity {
                    node: node.id.clone(),
                    advertised,
                },
                Before::Advertised(before),
                reason,
            );
        }
        for (n, p) in std::mem::take(&mut self.partition_changes) {
            let node = &view.nodes[n];
            if node.partition == p {
                continue;
            }
            let reason = match p {
                Partition::Short => why!(
                    self,
                    "Dice elastic sizing: converted to the short partition for this window; takes no new long containers"
                ),
                Partition::General => why!(self, "back to the general partition"),
            };
            self.node_action(
                n,
                ActionKind::SetNodePartition {
                    node: node.id.clone(),
                    partition: p,
                },
                Before::Partition(node.partition),
                reason,
            );
        }
    }

    fn node_action(&mut self, n: usize, kind: ActionKind, before: Before, reason: String) {
        let policy = match kind {
            ActionKind::SetNodePartition { .. } => PolicyKind::Dice,
            _ => self.s.kind,
        };
        self.places.push(None);
        self.actions.push(Action {
            kind,
            policy,
            reason,
            application: None,
            queue: None,
            node: self.explain.then(|| self.view.nodes[n].id.clone()),
            for_queue: None,
            before,
        });
    }

    fn finish(self, loads: &[QueueLoad], acc: &Accounting, dice: Option<DiceReport>) -> Plan {
        let view = self.view;
        let queues = view
            .queues
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

#[cfg(test)]
mod tests {
    use super::Secs;

    #[test]
    fn whole_seconds_round_as_float_formatting_does() {
        let edges = (0..5u64).flat_map(|q| [q * 1000 + 499, q * 1000 + 500, q * 1000 + 501]);
        for ms in (0..20_000u64)
            .step_by(7)
            .chain(edges)
            .chain([u32::MAX as u64])
        {
            assert_eq!(
                Secs(ms).to_string(),
                format!("{:.0} s", ms as f64 / 1000.0),
                "{ms} ms"
            );
        }
    }
}
