//! "How much per queue": the capacity scheduler's ideal allocation and the amount each
//! over-served queue gives up this round, as YARN's ProportionalCapacityPreemptionPolicy
//! computes them, with BIG-C's dominant-resource aware amount (Algorithm 1).
//!
//! Which containers pay is decided elsewhere (`victims`); nothing here knows about
//! containers, so the simulator can run it on its own queue table.

use serde::Serialize;

use super::amount::Amount;
use crate::config::settings::PolicySettings;

/// One queue of the tree, in pre-order (every parent before its children), with
/// absolute amounts.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueLoad {
    pub parent: Option<usize>,
    pub guaranteed: Amount,
    pub maximum: Amount,
    /// As YARN counts it: suspended and shrunk containers at their full allocation.
    pub used: Amount,
    /// What its containers hold now: `used` minus what Preemptor reclaimed or marked.
    pub held: Amount,
    pub pending: Amount,
    pub preemption_disabled: bool,
    /// Some of its containers are under a policy that reclaims by queue share (kill,
    /// immediate, graceful, adaptive).
    pub reclaimable: bool,
}

/// The per-queue outcome of one round of accounting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accounting {
    pub ideal: Vec<Amount>,
    /// Pending demand a queue is entitled to under its ideal allocation (leaves only).
    pub starved: Vec<Amount>,
    /// What a queue holds beyond max(ideal, guaranteed), outside the dead zone.
    pub over: Vec<Amount>,
    /// This round's amount to reclaim from each queue.
    pub to_reclaim: Vec<Amount>,
    /// Starved demand not covered by free room (BIG-C's r_s).
    pub demand: Amount,
}

/// Why a queue is being asked to give something up, for the preemption log.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueAccount {
    pub queue: String,
    pub guaranteed: Amount,
    pub used: Amount,
    pub held: Amount,
    pub pending: Amount,
    pub ideal: Amount,
    pub starved: Amount,
    pub over: Amount,
    pub to_reclaim: Amount,
    /// Reclaimed from the queue by this plan.
    pub reclaimed: Amount,
    /// Given back to the queue by this plan.
    pub restored: Amount,
}

/// DominantResourceCalculator's `greaterThan`: compare dominant shares of the cluster,
/// then the other share.
pub fn drf_greater(a: &Amount, b: &Amount, total: &Amount) -> bool {
    let shares = |x: &Amount| {
        let m = ratio(x.memory_mb, total.memory_mb);
        let c = ratio(x.vcores_milli, total.vcores_milli);
        (m.max(c), m.min(c))
    };
    let (da, sa) = shares(a);
    let (db, sb) = shares(b);
    da > db || (da == db && sa > sb)
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

/// Water-filling of `total` down the queue tree: every queue is offered its guarantee,
/// and what queues without demand leave is shared among queues with pending demand in
/// proportion to their guarantees, each capped at its maximum and its demand. Queues
/// with zero guarantee share what is left after that, equally. Preemption-disabled
/// queues keep what they use beyond their guarantee (YARN's untouchable extra).
///
/// Deviation from YARN: offers are capped component-wise rather than by whichever
/// whole vector has the smaller dominant share, so a queue that is capped in memory
/// can still take CPU.
pub fn ideal_allocation(queues: &[QueueLoad], total: Amount) -> Vec<Amount> {
    let n = queues.len();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        match q.parent {
            Some(p) if p < i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    let untouchable = untouchable_extras(queues, &children, &total);
    let mut ideal = vec![Amount::ZERO; n];
    distribute(total, &roots, queues, &untouchable, &total, &mut ideal);
    for i in 0..n {
        if !children[i].is_empty() {
            distribute(
                ideal[i],
                &children[i],
                queues,
                &untouchable,
                &total,
                &mut ideal,
            );
        }
    }
    ideal
}

/// What each queue uses beyond its guarantee that preemption may not touch: all of it
/// for a preemption-disabled leaf; for a parent, what its children cannot give up.
fn untouchable_extras(
    queues: &[QueueLoad],
    children: &[Vec<usize>],
    total: &Amount,
) -> Vec<Amount> {
    let n = queues.len();
    let mut untouchable = vec![Amount::ZERO; n];
    let mut preemptable = vec![Amount::ZERO; n];
    for i in (0..n).rev() {
        let q = &queues[i];
        let extra = if drf_greater(&q.guaranteed, &q.used, total) {
            Amount::ZERO
        } else {
            q.used - q.guaranteed
        };
        if children[i].is_empty() {
            if q.preemption_disabled {
                untouchable[i] = extra;
            } else {
                preemptable[i] = extra;
            }
        } else {
            let kids = Amount::sum(children[i].iter().map(|&c| preemptable[c]));
            untouchable[i] = extra - kids;
            preemptable[i] = kids.component_min(extra);
        }
    }
    untouchable
}

/// Share `avail` among sibling queues (YARN's computeFixpointAllocation).
fn distribute(
    avail: Amount,
    kids: &[usize],
    queues: &[QueueLoad],
    untouchable: &[Amount],
    total: &Amount,
    ideal: &mut [Amount],
) {
    let mut unassigned = avail;
    for &k in kids {
        let q = &queues[k];
        ideal[k] = if drf_greater(&q.used, &q.guaranteed, total) {
            q.guaranteed + untouchable[k]
        } else {
            q.used
        };
        unassigned -= ideal[k];
    }
    let headroom = |k: usize, ideal: &[Amount]| {
        let q = &queues[k];
        (q.maximum - ideal[k]).component_min((q.used + q.pending) - ideal[k])
    };
    let (with_guarantee, without): (Vec<usize>, Vec<usize>) = kids
        .iter()
        .copied()
        .filter(|&k| headroom(k, ideal).any_positive())
        .partition(|&k| queues[k].guaranteed.any_positive());
    for (mut active, by_guarantee) in [(with_guarantee, true), (without, false)] {
        // Each pass gives something away or drops a queue; the cap only guards against
        // pathological inputs.
        for _ in 0..10_000 {
            active.retain(|&k| headroom(k, ideal).any_positive());
            if active.is_empty() || unassigned.is_zero() {
                break;
            }
            let weight = |k: usize| {
                if by_guarantee {
                    queues[k].guaranteed.dominant_share(total)
                } else {
                    1.0
                }
            };
            let weights: f64 = active.iter().map(|&k| weight(k)).sum();
            // The most under-served queues (lowest ideal/guaranteed) are offered first.
            let served = |k: usize, ideal: &[Amount]| {
                if by_guarantee {
                    served_ratio(&ideal[k], &queues[k].guaranteed)
                } else {
                    0.0
                }
            };
            let least = active
                .iter()
                .map(|&k| served(k, ideal))
                .fold(f64::INFINITY, f64::min);
            let mut assigned = Amount::ZERO;
            for &k in &active {
                if served(k, ideal) != least {
                    continue;
                }
                let share = if weights > 0.0 {
                    weight(k) / weights
                } else {
                    0.0
                };
                let offer = unassigned
                    .scale_up(share)
                    .component_min(unassigned - assigned);
                let accepted = offer.component_min(headroom(k, ideal));
                ideal[k] += accepted;
                assigned += accepted;
            }
            if assigned.is_zero() {
                // Nothing accepted at this level of service: those queues are done.
                active.retain(|&k| served(k, ideal) != least);
            }
            unassigned -= assigned;
        }
    }
}

/// DominantResourceCalculator's ratio: the larger per-component ratio.
fn served_ratio(ideal: &Amount, guaranteed: &Amount) -> f64 {
    let r = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    r(ideal.memory_mb, guaranteed.memory_mb).max(r(ideal.vcores_milli, guaranteed.vcores_milli))
}

/// BIG-C Algorithm 1: if the starved demand `r_s` fits within the over-provisioned
/// amount `a`, reclaim exactly `r_s`; otherwise reclaim `a`, but never more of a
/// resource than the starved demand asks for (COMPUTEDR), so nothing is freed that the
/// short jobs cannot use.
pub fn amount_to_reclaim(starved: Amount, over: Amount) -> Amount {
    if starved.fits_in(&over) {
        starved
    } else {
        over.component_min(starved)
    }
}

/// The whole "how much" step. `free_room` is room the starved demand can already be
/// placed into: free, reclaimed and not yet used, or about to be freed by kills.
pub fn account(
    queues: &[QueueLoad],
    total: Amount,
    free_room: Amount,
    s: &PolicySettings,
) -> Accounting {
    let n = queues.len();
    let ideal = ideal_allocation(queues, total);
    let is_leaf = leaves(queues);
    let mut starved = vec![Amount::ZERO; n];
    let mut over = vec![Amount::ZERO; n];
    let dead_zone = 1.0 + finite_or(s.max_ignored_over_capacity, 0.0).max(0.0);
    for i in 0..n {
        if !is_leaf[i] {
            continue;
        }
        let q = &queues[i];
        starved[i] = q.pending.component_min(ideal[i] - q.used);
        if q.reclaimable
            && !q.preemption_disabled
            && drf_greater(&q.held, &q.guaranteed.scale(dead_zone), &total)
        {
            over[i] = q.held - ideal[i].component_max(q.guaranteed);
        }
    }
    let demand = Amount::sum(starved.iter().copied()) - free_room;
    let over_total = Amount::sum(over.iter().copied());
    let reclaim_total = amount_to_reclaim(demand, over_total);
    // Damping: take only a fraction of the gap per round, rounded up so that a small
    // gap still closes (natural_termination_factor).
    let ntf = finite_or(s.natural_termination_factor, 1.0).clamp(0.0, 1.0);
    let mut to_reclaim: Vec<Amount> = over
        .iter()
        .map(|a| {
            let share = a.proportion(reclaim_total, over_total);
            share.scale_up(ntf).component_min(share)
        })
        .collect();
    // Per-round budget (total_preemption_per_round): shrink every queue's part alike.
    let cap = total.scale(finite_or(s.total_preemption_per_round, 0.0));
    let asked = Amount::sum(to_reclaim.iter().copied());
    if !asked.fits_in(&cap) {
        for t in &mut to_reclaim {
            *t = t.proportion(cap.component_min(asked), asked);
        }
    }
    Accounting {
        ideal,
        starved,
        over,
        to_reclaim,
        demand,
    }
}

pub(crate) fn finite_or(v: f64, default: f64) -> f64 {
    if v.is_finite() { v } else { default }
}

fn leaves(queues: &[QueueLoad]) -> Vec<bool> {
    let mut leaf = vec![true; queues.len()];
    for (i, q) in queues.iter().enumerate() {
        if let Some(p) = q.parent
            && p < i
        {
            leaf[p] = false;
        }
    }
    leaf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(parent: Option<usize>, g: u64, max: u64, used: u64, pending: u64) -> QueueLoad {
        let a = |v: u64| Amount::new(v * 1024, v * 1000);
        QueueLoad {
            parent,
            guaranteed: a(g),
            maximum: a(max),
            used: a(used),
            held: a(used),
            pending: a(pending),
            preemption_disabled: false,
            reclaimable: true,
        }
    }

    fn units(a: Amount) -> u64 {
        a.memory_mb / 1024
    }

    //      root (100)
    //      /        \
    //   a(50)      b(50)
    // a uses 90 of 100 with nothing pending, b uses 10 and asks 40 more:
    // b's ideal is its guarantee, a gives back 40.
    #[test]
    fn water_filling_gives_pending_queues_their_guarantee() {
        let qs = vec![
            q(None, 100, 100, 100, 40),
            q(Some(0), 50, 100, 90, 0),
            q(Some(0), 50, 100, 10, 40),
        ];
        let total = Amount::new(100 * 1024, 100_000);
        let ideal = ideal_allocation(&qs, total);
        assert_eq!(
            ideal.iter().map(|a| units(*a)).collect::<Vec<_>>(),
            [100, 50, 50]
        );
    }

    // Unused capacity goes to the queue with demand, up to its maximum.
    #[test]
    fn idle_capacity_flows_to_demand_up_to_maximum() {
        let qs = vec![
            q(None, 100, 100, 30, 200),
            q(Some(0), 70, 100, 0, 0),
            q(Some(0), 20, 60, 20, 100),
            q(Some(0), 10, 100, 10, 100),
        ];
        let total = Amount::new(100 * 1024, 100_000);
        let ideal = ideal_allocation(&qs, total);
        // b is capped at 60; c takes the rest.
        assert_eq!(
            ideal.iter().map(|a| units(*a)).collect::<Vec<_>>(),
            [100, 0, 60, 40]
        );
    }

    #[test]
    fn preemption_disabled_queue_keeps_its_extra() {
        let mut qs = vec![
            q(None, 100, 100, 100, 50),
            q(Some(0), 20, 100, 80, 0),
            q(Some(0), 80, 100, 20, 50),
        ];
        qs[1].preemption_disabled = true;
        let total = Amount::new(100 * 1024, 100_000);
        let ideal = ideal_allocation(&qs, total);
        assert_eq!(units(ideal[1]), 80);
        assert_eq!(units(ideal[2]), 20);
    }

    #[test]
    fn algorithm_one_reclaims_the_request_not_the_overcapacity() {
        let starved = Amount::new(8192, 4000);
        assert_eq!(
            amount_to_reclaim(starved, Amount::new(90_000, 90_000)),
            starved
        );
        // Over-capacity smaller than the request: take it, but no more memory than asked.
        assert_eq!(
            amount_to_reclaim(Amount::new(8192, 8000), Amount::new(65_536, 2000)),
            Amount::new(8192, 2000)
        );
    }

    #[test]
    fn accounting_applies_dead_zone_damping_and_round_cap() {
        let qs = vec![
            q(None, 100, 100, 100, 30),
            q(Some(0), 50, 100, 80, 0),
            q(Some(0), 50, 100, 20, 30),
        ];
        let total = Amount::new(100 * 1024, 100_000);
        let mut s = PolicySettings {
            natural_termination_factor: 1.0,
            total_preemption_per_round: 1.0,
            ..PolicySettings::default()
        };
        let acc = account(&qs, total, Amount::ZERO, &s);
        assert_eq!(units(acc.starved[2]), 30);
        assert_eq!(units(acc.over[1]), 30);
        assert_eq!(units(acc.to_reclaim[1]), 30);

        s.natural_termination_factor = 0.2;
        let acc = account(&qs, total, Amount::ZERO, &s);
        assert_eq!(units(acc.to_reclaim[1]), 6);

        s.natural_termination_factor = 1.0;
        s.total_preemption_per_round = 0.1;
        let acc = account(&qs, total, Amount::ZERO, &s);
        assert_eq!(units(acc.to_reclaim[1]), 10);

        // Free room already covers the demand: nothing to take.
        let acc = account(&qs, total, Amount::new(40 * 1024, 40_000), &s);
        assert!(acc.to_reclaim[1].is_zero());

        // a is within the dead zone above its guarantee.
        s.max_ignored_over_capacity = 0.7;
        let acc = account(&qs, total, Amount::ZERO, &s);
        assert!(acc.over[1].is_zero());
    }
}
