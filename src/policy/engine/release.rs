//! Giving back: containers whose policy no longer manages them, suspensions past their
//! limit, and the share-based policies' accounting and resume by queue share.

use super::*;

impl Tick<'_> {
    /// Containers under `none` (or every container, when the cluster policy is `none`)
    /// get everything back at once; kill marks under anything but `kill` are dropped.
    pub(super) fn release_unmanaged(&mut self) {
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
                Reason::PolicyNone
            } else {
                Reason::QueuePolicyNone {
                    queue: self.queue_name(self.queue_of(c)),
                }
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
    pub(super) fn end_long_suspensions(&mut self) {
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
            let reason = Reason::SuspendedTooLong {
                suspended_ms: self.now - at,
                rest_ms: rest,
            };
            self.resume_fully(ci, policy, room, reason);
            let until = self.now.saturating_add(rest);
            self.memos.update(ci, c.id, |m| m.rest_until = Some(until));
        }
    }

    /// Resumed by [`Self::end_long_suspensions`] and still resting.
    pub(super) fn resting(&self, ci: ContainerIdx) -> bool {
        self.memos.get(ci).rest_until.is_some_and(|t| self.now < t)
    }

    pub(super) fn queue_loads(&self) -> Vec<QueueLoad> {
        let s = self.s;
        self.view
            .queues()
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
    pub(super) fn share_based(&mut self) -> (Vec<QueueLoad>, Accounting) {
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
    pub(super) fn resume_share_based(&mut self, acc: &Accounting) {
        let view = self.view;
        let s = self.s;
        // Only room that is free now; room marked kills will free is the starved's.
        let mut spare = self.ledger.nodes_room() - Amount::sum(acc.starved.iter().copied());
        let mut room: Vec<Amount> = (0..view.queues().len())
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
        let mut unmarked = Acted::new(view.containers().len());
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
            let reason = Reason::BelowShare {
                queue: self.queue_name(q),
                below: acc.ideal[q] - self.ledger.held[q],
                picks,
                delay: d,
                step_back: inc != owed,
            };
            self.resume_by(ci, policy, Room::Advertised(n), inc, reason);
        }
    }
}
