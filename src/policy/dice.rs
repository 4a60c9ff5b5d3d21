//! Dice's feedback loop over short tasks' waiting time, as small pure pieces.
//!
//! A [`DiceWindow`] collects waiting times (submission to container start) of short
//! tasks and the short jobs' share of task-seconds. When it closes,
//! [`window_decision`] turns the mean waiting time into r = Curr / MaxTaskWaitingTime
//! (capped at 1) and p = model(r), and from p the short partition's size (elastic
//! sizing) and the number of opportunistic preemption requests. [`choose_nodes`] picks
//! the general-partition nodes that get a request and [`node_accepts`] is the node's
//! four-condition check. `decide` composes them; the simulator can call them per event.

use rand::Rng;
use serde::Serialize;

use crate::cluster::Millis;
use crate::config::settings::{DiceModel, DiceSettings};

/// One window's observations.
#[derive(Clone, Debug, PartialEq)]
pub struct DiceWindow {
    pub start_ms: Millis,
    wait_total_ms: f64,
    waits: u64,
    short_vcore_ms: f64,
    all_vcore_ms: f64,
}

impl DiceWindow {
    pub fn new(start_ms: Millis) -> Self {
        DiceWindow {
            start_ms,
            wait_total_ms: 0.0,
            waits: 0,
            short_vcore_ms: 0.0,
            all_vcore_ms: 0.0,
        }
    }

    /// `count` short tasks that waited `wait_ms` each.
    pub fn record_waits(&mut self, wait_ms: u64, count: u64) {
        self.wait_total_ms += wait_ms as f64 * count as f64;
        self.waits = self.waits.saturating_add(count);
    }

    /// Running vcores of short tasks and of all tasks over `dt_ms`.
    pub fn record_usage(&mut self, short_vcores: u64, all_vcores: u64, dt_ms: u64) {
        self.short_vcore_ms += short_vcores as f64 * dt_ms as f64;
        self.all_vcore_ms += all_vcores as f64 * dt_ms as f64;
    }

    pub fn is_due(&self, now: Millis, window_ms: u64) -> bool {
        now >= self.start_ms.saturating_add(window_ms.max(1))
    }

    /// CurrMeanTaskWaitingTime; 0 when no short task was seen.
    pub fn mean_wait_ms(&self) -> f64 {
        if self.waits == 0 {
            0.0
        } else {
            self.wait_total_ms / self.waits as f64
        }
    }

    /// The short jobs' share of task-seconds, if any task ran.
    pub fn short_share(&self) -> Option<f64> {
        (self.all_vcore_ms > 0.0).then(|| (self.short_vcore_ms / self.all_vcore_ms).clamp(0.0, 1.0))
    }
}

/// r = CurrMeanTaskWaitingTime / MaxTaskWaitingTime, capped at 1.
pub fn ratio(mean_wait_ms: f64, max_wait_ms: u64) -> f64 {
    if !mean_wait_ms.is_finite() || mean_wait_ms <= 0.0 {
        return 0.0;
    }
    if max_wait_ms == 0 {
        return 1.0;
    }
    (mean_wait_ms / max_wait_ms as f64).min(1.0)
}

/// p for r in [0, 1]: linear r, square r^2, square-root sqrt(r).
pub fn model_p(model: DiceModel, r: f64) -> f64 {
    let r = if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.0
    };
    match model {
        DiceModel::Linear => r,
        DiceModel::Square => r * r,
        DiceModel::SquareRoot => r.sqrt(),
    }
}

/// A positive fraction of a non-empty cluster is at least one node: on a small
/// cluster a rounded 0 would switch Dice's partition off.
fn fraction_of(nodes: usize, f: f64) -> usize {
    if !f.is_finite() || f <= 0.0 {
        return 0;
    }
    ((nodes as f64 * f.min(1.0)).round() as usize).clamp(1.min(nodes), nodes)
}

/// MinShort + p x (MaxShort - MinShort) nodes, with MaxShort = MinShort +
/// `extra_fraction` of the nodes.
pub fn short_partition_size(nodes: usize, min_short: usize, extra_fraction: f64, p: f64) -> usize {
    let min_short = min_short.min(nodes);
    let extra = fraction_of(nodes, extra_fraction);
    let p = if p.is_finite() {
        p.clamp(0.0, 1.0)
    } else {
        0.0
    };
    (min_short + (p * extra as f64).round() as usize).min(nodes)
}

/// n = p x CurrShortPartitionSize x Multiplier.
pub fn preemption_requests(p: f64, short_partition: usize, multiplier: f64) -> usize {
    let x = p * short_partition as f64 * multiplier;
    if x.is_finite() && x > 0.0 {
        x.round() as usize
    } else {
        0
    }
}

/// What a window's close decided.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiceReport {
    pub mean_wait_ms: f64,
    pub r: f64,
    pub p_sizing: f64,
    pub p_preemption: f64,
    pub min_short: usize,
    /// Short partition for the next window.
    pub short_partition: usize,
    pub preemption_requests: usize,
    /// Filled by `decide`: nodes that accepted a request and suspended a container.
    pub suspended: usize,
}

/// Turn a closed window into sizing and preemption counts for a cluster of `nodes`.
/// MinShort is `min_short_fraction` of the nodes, or the observed short share of
/// task-seconds when that is unset. A switched-off half yields MinShort / 0 requests.
pub fn window_decision(
    mean_wait_ms: f64,
    short_share: Option<f64>,
    nodes: usize,
    s: &DiceSettings,
) -> DiceReport {
    let r = ratio(mean_wait_ms, s.max_task_waiting_ms);
    let p_sizing = model_p(s.sizing_model, r);
    let p_preemption = model_p(s.preemption_model, r);
    let min_short = fraction_of(nodes, s.min_short_fraction.or(short_share).unwrap_or(0.0));
    let short_partition = if s.sizing_enabled {
        short_partition_size(nodes, min_short, s.max_short_extra_fraction, p_sizing)
    } else {
        min_short
    }
    .max(s.min_short_nodes.min(nodes));
    let preemption_requests = if s.preemption_enabled {
        preemption_requests(p_preemption, short_partition, s.multiplier)
    } else {
        0
    };
    DiceReport {
        mean_wait_ms,
        r,
        p_sizing,
        p_preemption,
        min_short,
        short_partition,
        preemption_requests,
        suspended: 0,
    }
}

/// The four conditions under which a node receiving a request suspends `candidate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiceNodeFacts {
    /// A long container runs on the node.
    pub long_running: bool,
    /// Another long container is already suspended there.
    pub long_suspended: bool,
    /// Short work is waiting that would fit once the candidate is suspended.
    pub short_waiting: bool,
}

pub fn node_accepts(f: &DiceNodeFacts, candidate_suspensions: u32, max_suspensions: u32) -> bool {
    f.long_running
        && !f.long_suspended
        && candidate_suspensions < max_suspensions
        && f.short_waiting
}

/// `n` distinct entries of `candidates`, uniformly at random.
pub fn choose_nodes<R: Rng + ?Sized>(rng: &mut R, candidates: &[u32], n: usize) -> Vec<u32> {
    let n = n.min(candidates.len());
    rand::seq::index::sample(rng, candidates.len(), n)
        .into_iter()
        .map(|i| candidates[i])
        .collect()
}

/// A suspension ends once `suspension_timeout_ms` has passed and its room is free.
pub fn suspension_over(suspended_at: Option<Millis>, now: Millis, s: &DiceSettings) -> bool {
    suspended_at.is_none_or(|t| now >= t.saturating_add(s.suspension_timeout_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::PolicySettings;
    use rand::SeedableRng;

    #[test]
    fn window_collects_waits_and_share() {
        let mut w = DiceWindow::new(0);
        assert_eq!(w.mean_wait_ms(), 0.0);
        assert_eq!(w.short_share(), None);
        w.record_waits(10_000, 1);
        w.record_waits(40_000, 3);
        w.record_usage(1, 4, 1000);
        assert_eq!(w.mean_wait_ms(), 32_500.0);
        assert_eq!(w.short_share(), Some(0.25));
        assert!(!w.is_due(59_999, 60_000) && w.is_due(60_000, 60_000));
    }

    #[test]
    fn ratio_and_models() {
        assert_eq!(ratio(15_000.0, 30_000), 0.5);
        assert_eq!(ratio(90_000.0, 30_000), 1.0);
        assert_eq!(ratio(f64::NAN, 30_000), 0.0);
        assert_eq!(ratio(1.0, 0), 1.0);
        assert_eq!(model_p(DiceModel::Square, 0.5), 0.25);
        assert_eq!(model_p(DiceModel::SquareRoot, 0.25), 0.5);
        assert_eq!(model_p(DiceModel::Linear, 7.0), 1.0);
    }

    #[test]
    fn switched_off_halves() {
        let mut s = PolicySettings::default().dice;
        s.min_short_fraction = Some(0.02);
        s.sizing_enabled = false;
        s.preemption_enabled = false;
        let d = window_decision(60_000.0, None, 1000, &s);
        assert_eq!((d.short_partition, d.preemption_requests), (20, 0));
        s.min_short_fraction = None;
        let d = window_decision(0.0, Some(0.17), 1000, &s);
        assert_eq!(d.min_short, 170);
    }

    #[test]
    fn node_conditions_and_choice() {
        let ok = DiceNodeFacts {
            long_running: true,
            long_suspended: false,
            short_waiting: true,
        };
        assert!(node_accepts(&ok, 1, 2));
        assert!(!node_accepts(&ok, 2, 2));
        assert!(!node_accepts(
            &DiceNodeFacts {
                long_suspended: true,
                ..ok
            },
            0,
            2
        ));
        assert!(!node_accepts(
            &DiceNodeFacts {
                short_waiting: false,
                ..ok
            },
            0,
            2
        ));
        assert!(!node_accepts(
            &DiceNodeFacts {
                long_running: false,
                ..ok
            },
            0,
            2
        ));
        let mut a = rand_pcg::Pcg64::seed_from_u64(7);
        let mut b = rand_pcg::Pcg64::seed_from_u64(7);
        let cands: Vec<u32> = (0..100).collect();
        let x = choose_nodes(&mut a, &cands, 10);
        assert_eq!(x, choose_nodes(&mut b, &cands, 10));
        let mut sorted = x.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 10);
        assert_eq!(choose_nodes(&mut a, &cands[..3], 10).len(), 3);
        let s = PolicySettings::default().dice;
        assert!(suspension_over(None, 0, &s));
        assert!(!suspension_over(Some(1), 100_000, &s));
        assert!(suspension_over(Some(1), 100_001, &s));
    }
}
