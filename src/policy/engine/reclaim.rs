//! Victim choice for the share-based policies: which containers of an over-capacity
//! queue to mark, suspend or shrink, and in what order (YARN's and BIG-C's).

use super::*;

/// What one queue's victim selection has taken so far, and for whom.
pub(super) struct Selection {
    target: Amount,
    to: Option<usize>,
    taken: Amount,
    picks: Vec<Pick>,
}

impl Selection {
    pub(super) fn met(&self) -> bool {
        self.target.fits_in(&self.taken)
    }
}

/// A container chosen in [`Tick::reclaim_queue`], already taken in the ledger.
pub(super) struct Pick {
    ci: ContainerIdx,
    room: Room,
    amount: Amount,
    what: Reclaim,
    policy: PolicyKind,
    why: Arc<ReclaimWhy>,
    /// Taken once only ApplicationMasters were left.
    ams_only: bool,
}

pub(super) enum Reclaim {
    Mark,
    Suspend(Amount),
    Shrink(Amount),
}

/// Which of a job's containers a pass takes: its tasks, or, once no task is left, its
/// ApplicationMasters (whose loss costs the whole job its progress).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TakeFrom {
    Tasks,
    ApplicationMasters,
}

impl TakeFrom {
    fn holds(self, c: &Container) -> bool {
        c.is_am == (self == TakeFrom::ApplicationMasters)
    }
}

impl Tick<'_> {
    /// Not marked, not yet acted on, managed, running or shrunk, above its footprint.
    /// The bitmaps come first: a victim walk passes every container marked in earlier
    /// ticks, and reading those from a large view is a cache miss each.
    pub(super) fn reclaimable(&self, ci: ContainerIdx, c: &Container) -> bool {
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
    pub(super) fn reclaim_queue(&mut self, q: usize, target: Amount, acc: &Accounting) {
        let view = self.view;
        let starved = (0..acc.starved.len())
            .filter(|&i| acc.starved[i].any_positive())
            .max_by(|&a, &b| {
                acc.starved[a]
                    .dominant_share(&self.total)
                    .total_cmp(&acc.starved[b].dominant_share(&self.total))
                    .then(b.cmp(&a))
            });
        let for_queue = starved.map(|i| self.queue_name(i));
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
            let why = Arc::new(ReclaimWhy {
                starved: starved.map(|i| (self.queue_name(i), acc.starved[i])),
                over_queue: self.queue_name(q),
                over_by: acc.over[q],
                target,
                job: view.app(ai).id,
                rank,
                remaining_ms: remaining,
            });
            self.pick_from(ai, TakeFrom::Tasks, &why, &mut sel);
            reached.push((ai, why));
        }
        for (ai, why) in reached {
            if sel.met() {
                break;
            }
            self.pick_from(ai, TakeFrom::ApplicationMasters, &why, &mut sel);
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

    /// Take from one job's reclaimable containers of `kind` through the ledger until the selection's target is met: whole containers for
    /// kill and immediate, one graceful step per container (those shrunk least so far
    /// first, so that steps go round-robin across rounds), newest first.
    pub(super) fn pick_from(
        &mut self,
        ai: AppIdx,
        kind: TakeFrom,
        why: &Arc<ReclaimWhy>,
        sel: &mut Selection,
    ) {
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
            |t: &Self, ci: ContainerIdx, c: &Container| t.reclaimable(ci, c) && kind.holds(c);
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
                self.pick(ci, policy, (why, kind), sel);
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
                self.pick(ci, policy, (why, kind), sel);
            } else {
                shrunk_ones.push(ci);
            }
        }
        for ci in smallest_first(shrunk_ones, key) {
            if sel.met() {
                return;
            }
            self.pick(ci, policy, (why, kind), sel);
        }
    }

    /// Take from container `ci` for the selection, if its policy and the ledger allow.
    pub(super) fn pick(
        &mut self,
        ci: ContainerIdx,
        policy: PolicyKind,
        (why, kind): (&Arc<ReclaimWhy>, TakeFrom),
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
                why: why.clone(),
                ams_only: kind == TakeFrom::ApplicationMasters,
            });
        }
    }

    /// Graceful takes one step per container per round (monitoring interval).
    pub(super) fn may_step(&self, ci: ContainerIdx) -> bool {
        let interval = self.s.monitoring_interval_ms.max(1);
        self.memos
            .get(ci)
            .last_step_at
            .is_none_or(|at| self.now >= at.saturating_add(interval))
    }

    pub(super) fn carry_out(&mut self, p: Pick, for_queue: &Option<Arc<str>>) {
        let c = self.view.container(p.ci);
        let step = match p.what {
            Reclaim::Shrink(_) => Some(self.s.graceful.step),
            _ => None,
        };
        let reason = Reason::Reclaim {
            why: p.why,
            ams_only: p.ams_only,
            graceful_step: step,
        };
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
}
