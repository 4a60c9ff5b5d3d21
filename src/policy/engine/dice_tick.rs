//! Dice: the short partition's size from the short tasks' waiting time (and the node
//! partition changes it takes), and the opportunistic preemption requests to general
//! nodes (or, for short queues confined to the short partition, to short nodes).

use super::*;
use crate::config::settings::DiceSettings;

/// Dice's samples since the last tick.
pub(super) struct DiceScan {
    waits: Vec<u64>,
    short_vcores: u64,
    all_vcores: u64,
}

/// Waiting times of short containers started since the last sample (request to
/// start), and running vcores of short and of all containers.
pub(super) fn dice_samples(
    view: &ClusterView,
    waiting: &[BelowAllocation],
    now: Millis,
    since: Option<Millis>,
) -> DiceScan {
    // Vcores allocated to live containers on all nodes.
    let used_vcores: u64 = view.nodes().iter().map(|n| u64::from(n.used.vcores)).sum();
    let mut scan = DiceScan {
        waits: Vec::new(),
        short_vcores: 0,
        all_vcores: 0,
    };
    let running = |c: &Container| c.is_live() && c.state == ContainerState::Running;
    for app in view.apps().iter().filter(|a| a.class == JobClass::Short) {
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

/// The smallest outstanding short request, of queues that may run anywhere and of
/// queues confined to the short partition.
struct ShortUnits {
    anywhere: Option<Amount>,
    confined: Option<Amount>,
}

impl ShortUnits {
    fn of(view: &ClusterView) -> ShortUnits {
        let mut units = ShortUnits {
            anywhere: None,
            confined: None,
        };
        for a in view.apps().iter().filter(|a| a.class == JobClass::Short) {
            let unit = if view.queue(a.queue).confined_to == Some(Partition::Short) {
                &mut units.confined
            } else {
                &mut units.anywhere
            };
            for r in a.requests.iter().filter(|r| r.num_containers > 0) {
                let r = Amount::from(r.capability);
                *unit = Some(unit.map_or(r, |u| u.component_min(r)));
            }
        }
        units
    }
}

impl Tick<'_> {
    /// Dice: end timed-out suspensions, feed the window, and on the tick that closes
    /// it, size the short partition and send opportunistic preemption requests. Returns
    /// the window's report, and the partition changes when sending the requests needed
    /// them planned first.
    pub(super) fn dice(
        &mut self,
        st: &mut DiceState,
        rng: &mut Pcg64,
    ) -> (Option<DiceReport>, Option<Vec<(usize, Partition)>>) {
        let Some(scan) = self.dice.take() else {
            return (None, None);
        };
        let view = self.view;
        let settings = self.s;
        let s = &settings.dice;
        if !st.short_seen {
            st.short_seen = view.apps().iter().any(|a| a.class == JobClass::Short);
        }
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
                let reason = Reason::DiceTimeout {
                    timeout_ms: s.suspension_timeout_ms,
                };
                self.resume_fully(ci, PolicyKind::Dice, Room::Advertised(c.node.get()), reason);
            }
        }
        let (Some(last), true) = (st.last_sample_ms, st.window.is_some()) else {
            st.window = Some(DiceWindow::new(self.now));
            st.last_sample_ms = Some(self.now);
            return (None, None);
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
            return (None, None);
        }
        // Short tasks still waiting count with the time they have waited so far.
        for a in view.apps().iter().filter(|a| a.class == JobClass::Short) {
            if let Some(since) = a.pending_since_ms {
                let n: u64 = a.requests.iter().map(|r| r.num_containers as u64).sum();
                window.record_waits(self.now.saturating_sub(since), n);
            }
        }
        let share = window.short_share().or(st.short_share);
        st.short_share = share;
        let unfloored;
        let s_window = if st.short_seen {
            s
        } else {
            unfloored = DiceSettings {
                min_short_nodes: 0,
                ..s.clone()
            };
            &unfloored
        };
        let mut report =
            dice::window_decision(window.mean_wait_ms(), share, view.nodes().len(), s_window);
        st.short_partition = Some(report.short_partition);
        st.window = Some(DiceWindow::new(self.now));
        let mut planned = None;
        if report.preemption_requests > 0 {
            let changes = self.plan_partitions(report.short_partition);
            let mut converting = vec![false; view.nodes().len()];
            for &(n, _) in &changes {
                if let Some(c) = converting.get_mut(n) {
                    *c = true;
                }
            }
            // General once this window's changes are made.
            let general =
                |n: usize| (view.nodes()[n].partition == Partition::General) != converting[n];
            let units = ShortUnits::of(view);
            // The paper's requests go to general nodes, where its short tasks may run
            // too. A short queue confined to the short partition (YARN's exclusive
            // label) is helped only there, by the long containers left on converted
            // nodes: "a labeled job requesting labeled resources can preempt
            // non-labeled jobs on labeled nodes" (Dice, section 7).
            let general_ok = units.confined.is_none() || units.anywhere.is_some();
            let short_ok = units.confined.is_some();
            let candidates: Vec<u32> = (0..view.nodes().len())
                .filter(|&n| if general(n) { general_ok } else { short_ok })
                .map(|n| n as u32)
                .collect();
            let mut chosen = dice::choose_nodes(rng, &candidates, report.preemption_requests);
            // Visited in node order, so that a visit finds the last one's pages still
            // mapped or cached (docs/policies.md, "Cost of a decision"), from a random
            // start so that a binding round budget favours no node numbers.
            chosen.sort_unstable();
            if !chosen.is_empty() {
                let start = rng.random_range(0..chosen.len());
                chosen.rotate_left(start);
            }
            let window = Arc::new(DiceWindowWhy {
                mean_wait_ms: report.mean_wait_ms,
                r: report.r,
                model: s.preemption_model.name(),
                p_preemption: report.p_preemption,
                requests: report.preemption_requests,
            });
            for n in chosen {
                let n = n as usize;
                let unit = if general(n) {
                    units.anywhere
                } else {
                    units.confined
                };
                if self.dice_node(n, unit, &window) {
                    report.suspended += 1;
                }
            }
            planned = Some(changes);
        }
        (Some(report), planned)
    }

    /// A node that received a preemption request suspends one running long container
    /// if Dice's four conditions hold; `unit` is the smallest outstanding short request.
    pub(super) fn dice_node(
        &mut self,
        n: usize,
        unit: Option<Amount>,
        window: &Arc<DiceWindowWhy>,
    ) -> bool {
        let view = self.view;
        let settings = self.s;
        let s = &settings.dice;
        let node = &view.nodes()[n];
        let long = |c: &Container| c.is_live() && view.app(c.app).class == JobClass::Long;
        // One pass over the node's containers: they lie scattered in the view.
        // The candidate: non-AM before AM, then newest first; the first such in list
        // order on ties, as a stable sort would give.
        let better = |a: ContainerIdx, b: ContainerIdx| {
            let (ca, cb) = (view.container(a), view.container(b));
            ca.is_am
                .cmp(&cb.is_am)
                .then(crate::policy::victims::newest_first(ca, cb))
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
        // The suspension count is looked up for the best container only, as the lookup
        // costs more than the rest of the scan; only if that one is used up does a
        // second pass look for the best of the rest.
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
        let reason = Reason::DiceSuspend {
            window: window.clone(),
            job: view.app(c.app).id,
            suspension: suspensions + 1,
            max: s.max_suspensions,
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

    /// The partition changes this tick makes: to Dice's short partition of the size
    /// decided for this window (MinShort before the first window closes, if
    /// configured); without Dice, every node back to general.
    pub(super) fn partitions(&self, st: &DiceState) -> Vec<(usize, Partition)> {
        if !self.dice_active {
            let view = self.view;
            if view.partitioned_nodes() == 0 {
                return Vec::new();
            }
            return view
                .reshaped_nodes()
                .iter()
                .filter(|&&n| view.node(n).partition == Partition::Short)
                .map(|&n| (n.get(), Partition::General))
                .collect();
        }
        let nodes = self.view.nodes().len();
        // Before the first window closes: MinShort when configured, else the floor. The
        // floor keeps short work from being stranded outside an empty partition, so it
        // waits for short work: a node converted then is the least loaded of a busy
        // cluster, not one that an idle cluster keeps from the long jobs.
        let floor = if st.short_seen {
            self.s.dice.min_short_nodes.min(nodes)
        } else {
            0
        };
        let target = st.short_partition.map(|t| t.max(floor)).or_else(|| {
            let configured = self
                .s
                .dice
                .min_short_fraction
                .map(|f| dice::short_partition_size(nodes, 0, f, 1.0).max(floor));
            configured.or((floor > 0).then_some(floor))
        });
        target.map_or_else(Vec::new, |t| self.plan_partitions(t))
    }

    /// Convert the least loaded general nodes, or release the most loaded short nodes,
    /// until `target` nodes are short. Running containers are never touched.
    pub(super) fn plan_partitions(&self, target: usize) -> Vec<(usize, Partition)> {
        let ledger = &self.ledger;
        let nodes = self.view.nodes();
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
            return Vec::new();
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
        pool.into_iter().map(|(_, n)| (n as usize, to)).collect()
    }
}
