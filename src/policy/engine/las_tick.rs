//! Kairos' least-attained-service time sharing on a node, and the index of waiting
//! containers that keeps a tick from walking every node.

use super::*;

/// LAS's waiting (suspended or shrunk) containers, counted per node and per queue and
/// kept between ticks: a tick redoes only the nodes the view's journal lists as
/// changed, instead of walking the thousands that wait. Each node's LAS reduction is
/// its base in the ledger. Also the nodes a tick must look at besides the ones it
/// touches: those changed, those whose timer is due, and those that qualified for a
/// LAS step when last looked at ([`Tick::las`]).
#[derive(Clone, Debug, Default)]
pub(super) struct LasIndex {
    /// What the counts are of: None, start over.
    synced: Option<LasSynced>,
    nodes: Vec<LasWaiting>,
    /// Per queue (its own containers only), what its waiting LAS containers gave up.
    pub(super) queues: Vec<Amount>,
    /// Waiting containers under other policies. Their room is advertised, not kept,
    /// and the tick walks the view's list of waiting containers for them, only when
    /// there are any.
    pub(super) others: u32,
    /// Some nodes may be listed twice.
    pub(super) look: Vec<u32>,
    /// The nodes whose entry or base was set since the last rebuild (each once), so
    /// that a rebuild, every tick for a controller's fresh views, clears only those.
    filled: Vec<u32>,
    /// Syncs so far, to count a node listed twice in the journal once.
    syncs: u64,
}

/// The view (to the journal entry read) and what decides each application's policy.
#[derive(Clone, Debug)]
pub(super) struct LasSynced {
    mark: JournalMark,
    settings: PolicySettings,
    queue_policies: Vec<Option<PolicyKind>>,
    app_policies: Vec<PolicyKind>,
}

/// One node's waiting containers.
#[derive(Clone, Debug, Default)]
pub(super) struct LasWaiting {
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
    pub(super) fn sync(
        &mut self,
        view: &ClusterView,
        s: &PolicySettings,
        policy: &[PolicyKind],
        timers: &mut LasTimers,
        now: Millis,
        buffers: &mut NodeBuffers,
    ) {
        let nn = view.nodes().len();
        let same = self.synced.as_ref().is_some_and(|k| {
            let common = k.app_policies.len().min(policy.len());
            self.nodes.len() == nn
                && buffers.bases() == nn
                && self.queues.len() == view.queues().len()
                && k.settings == *s
                && view
                    .queues()
                    .iter()
                    .map(|q| q.policy)
                    .eq(k.queue_policies.iter().copied())
                && k.app_policies[..common] == policy[..common]
        });
        let changed = self
            .synced
            .as_ref()
            .filter(|_| same)
            .and_then(|k| view.nodes_changed_since(&k.mark));
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
                    queue_policies: view.queues().iter().map(|q| q.policy).collect(),
                    app_policies: policy.to_vec(),
                })
            }
        }
    }

    /// Counts every waiting container anew, from the view's dense list of them; every
    /// node with one, or with more allocated than fits, is looked at. A controller,
    /// deciding on a view built anew every tick, comes here every tick.
    pub(super) fn rebuild(
        &mut self,
        view: &ClusterView,
        s: &PolicySettings,
        policy: &[PolicyKind],
        buffers: &mut NodeBuffers,
    ) {
        let nn = view.nodes().len();
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
        self.queues.resize(view.queues().len(), Amount::ZERO);
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
    pub(super) fn refresh(
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
        for &ci in &view.nodes()[n].containers {
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
    pub(super) fn fill(&mut self, n: u32, filled: &mut Vec<u32>) {
        if !self.filled {
            self.filled = true;
            filled.push(n);
        }
    }

    /// Nothing waits (its list's room is kept, and whether it is listed as filled).
    pub(super) fn clear(&mut self) {
        let mut by_queue = std::mem::take(&mut self.by_queue);
        by_queue.clear();
        *self = LasWaiting {
            by_queue,
            filled: self.filled,
            ..LasWaiting::default()
        };
    }

    /// Container `w` waits here.
    pub(super) fn add(
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
        let q = view.apps()[a].queue.0;
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
pub(super) fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
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
pub(super) struct LasNeed {
    overflow: bool,
    fits: bool,
    due: bool,
}

/// Lists [`Tick::las_node`] works in, kept for the next node: tens of nodes are
/// stepped a tick.
#[derive(Clone, Debug, Default)]
pub(super) struct LasWork {
    idx: Vec<ContainerIdx>,
    tasks: Vec<LasTask>,
    before: Vec<LasTask>,
    moves: Vec<las::LasMove>,
    scratch: las::LasScratch,
}

impl Tick<'_> {
    /// Kairos' node algorithm on every node that has a LAS container waiting (that fits
    /// the free room, or whose quantum timer is due) or more running than fits.
    pub(super) fn las(&mut self) {
        let Some(mut index) = self.las.take() else {
            return;
        };
        // Only these can qualify: nodes this tick has touched (only they hold other
        // than the view and their base say) and the nodes the index lists: changed
        // since the last tick, timer due, or qualifying then. On any other node nothing
        // the test reads has changed since it failed. As a bitmap, so that nodes go in
        // index order, as the round budget is spent.
        let mut candidates = vec![0u64; self.view.nodes().len().div_ceil(64)];
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
    pub(super) fn las_need(&mut self, n: usize, w: &LasWaiting) -> LasNeed {
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
    pub(super) fn check_las_candidates(&mut self, index: &LasIndex, candidates: &[u64]) {
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

    pub(super) fn las_node(&mut self, n: usize) {
        let mut work = std::mem::take(&mut self.las_work);
        self.las_node_in(n, &mut work);
        self.las_work = work;
    }

    pub(super) fn las_node_in(&mut self, n: usize, work: &mut LasWork) {
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
        for mv in moves.iter() {
            let ci = idx[mv.task];
            let c = view.container(ci);
            let t = &tasks[mv.task];
            let attained_ms = c.attained_service_at(self.now);
            let other = mv.for_task.map(|b| {
                (
                    view.container(idx[b]).id,
                    view.container(idx[b]).attained_service_at(self.now),
                )
            });
            let for_queue =
                (mv.for_task).map(|b| self.queue_name(self.queue_of(view.container(idx[b]))));
            if mv.suspend {
                let reason = match (mv.cause, other) {
                    (LasCause::QuantumExpired, Some((waiting, waiting_attained_ms))) => {
                        Reason::LasQuantumExpired {
                            node: node.id.clone(),
                            quantum_ms: s.las.quantum_ms,
                            waiting,
                            waiting_attained_ms,
                            attained_ms,
                        }
                    }
                    _ => Reason::LasNoFreeCore {
                        node: node.id.clone(),
                        cap,
                        attained_ms,
                    },
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
                let reason = Reason::LasResume {
                    node: node.id.clone(),
                    quantum: mv.cause == LasCause::QuantumExpired,
                    attained_ms,
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
        if !running.fits_in(&cap) {
            self.notes.push(Note::LasOverfull {
                node: node.id.clone(),
                running,
                cap,
            });
        }
    }
}
