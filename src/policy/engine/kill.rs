//! YARN's kill path as the `kill` policy models it: a container is marked, announced, and
//! killed only after `max_wait_before_kill`; and the freeze of a shrunk container that
//! swaps (BIG-C).

use super::*;

impl Tick<'_> {
    /// Marked containers whose wait is over are killed; the rest are reported.
    pub(super) fn expire_kill_marks(&mut self) {
        let wait = self.s.kill.max_wait_before_kill_ms;
        for ci in self.marked.clone() {
            let Some(at) = self.memos.get(ci).kill_marked_at else {
                continue;
            };
            if self.now >= at.saturating_add(wait) {
                let reason = Reason::KillAfterWait {
                    marked_at_ms: at,
                    wait_ms: wait,
                };
                self.kill(ci, reason, None);
            } else {
                self.pending_kill(ci, at, false, None);
            }
        }
    }

    pub(super) fn kill(&mut self, ci: ContainerIdx, reason: Reason, for_queue: Option<Arc<str>>) {
        let c = self.view.container(ci);
        let held = self.held(c);
        self.ledger
            .killed(c.node.get(), held, Amount::from(c.allocated) - held);
        let kind = ActionKind::Kill { container: c.id };
        self.push(ci, kind, PolicyKind::Kill, reason, for_queue);
    }

    pub(super) fn pending_kill(
        &mut self,
        ci: ContainerIdx,
        at: Millis,
        new: bool,
        for_queue: Option<Arc<str>>,
    ) {
        let view = self.view;
        let c = view.container(ci);
        self.pending_kills.push(PendingKill {
            container: c.id,
            application: view.app(c.app).id,
            queue: self.queue_name(self.queue_of(c)),
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
    pub(super) fn freeze_swapping(&mut self) -> Vec<Amount> {
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
                frozen.resize(view.queues().len(), Amount::ZERO);
            }
            frozen[q] += amount;
            // The CPU it frees must not resume it within the same interval.
            let now = self.now;
            self.memos.update(ci, c.id, |m| {
                m.suspended_at.get_or_insert(now);
                m.last_pick_at = Some(now);
            });
            let reason = Reason::SwapFreeze;
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
}
