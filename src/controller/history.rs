//! The last minutes the dashboard charts: one sample per tick, taken where the tick sets
//! its status ([`Hub::set_status`](super::hub::Hub::set_status)), so that a page opened
//! mid-burst shows the recent past. Bounded: [`WINDOW_MS`] of samples at most
//! [`MIN_GAP_MS`] apart (frequent ticks are thinned), [`MAX_QUEUES`] leaf queues each.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::api::WaitPoint;
use super::hub::StatusReport;
use crate::resources::Resource;

/// How far back the history reaches.
pub const WINDOW_MS: u64 = 10 * 60 * 1000;
/// Samples kept at most: the window at one sample per [`MIN_GAP_MS`].
pub const MAX_SAMPLES: usize = 300;
/// Kept samples are at least this far apart, the newest one aside.
pub const MIN_GAP_MS: u64 = WINDOW_MS / MAX_SAMPLES as u64;
/// Leaf queues charted per sample; the rest are counted in `omittedQueues`.
pub const MAX_QUEUES: usize = 16;

/// Which resource gives a dominant share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Binding {
    Memory,
    Vcores,
    /// Memory and vcores give the same share.
    Both,
}

impl Binding {
    /// How the page says it: "vcores bind".
    pub fn phrase(self) -> &'static str {
        match self {
            Binding::Memory => "memory binds",
            Binding::Vcores => "vcores bind",
            Binding::Both => "memory and vcores bind equally",
        }
    }
}

/// `r` as a dominant share of `total` (DRF: the larger of the memory and vcores shares)
/// and the resource that gives it. A zero component of `total` counts as no share.
pub fn dominant(r: Resource, total: Resource) -> (f64, Binding) {
    let share = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
    let mem = share(r.memory_mb as f64, total.memory_mb as f64);
    let cpu = share(f64::from(r.vcores), f64::from(total.vcores));
    let binding = if (mem - cpu).abs() <= 1e-9 {
        Binding::Both
    } else if mem > cpu {
        Binding::Memory
    } else {
        Binding::Vcores
    };
    (mem.max(cpu), binding)
}

/// The cluster the shares are of: the nodes' physical capacity, as the policy counts it;
/// the root queue's guarantee while no node is known.
pub fn cluster_total(s: &StatusReport) -> Resource {
    let nodes = Resource::sum(s.nodes.iter().map(|n| &n.capacity));
    if nodes.any_positive() {
        return nodes;
    }
    s.queues
        .iter()
        .find(|q| !q.path.contains('.'))
        .map_or(Resource::ZERO, |q| q.guaranteed)
}

/// Indices of the leaf queues of `s`, in its order.
pub fn leaf_queues(s: &StatusReport) -> Vec<usize> {
    let parents: HashSet<&str> = s
        .queues
        .iter()
        .filter_map(|q| q.path.rsplit_once('.').map(|(p, _)| p))
        .collect();
    (0..s.queues.len())
        .filter(|&i| !parents.contains(s.queues[i].path.as_str()))
        .collect()
}

/// One leaf queue in one sample, as dominant shares of the cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueShare {
    /// Shared with the other samples of the queue rather than copied into each.
    #[serde(serialize_with = "ser_path", deserialize_with = "de_path")]
    pub path: Arc<str>,
    pub used: f64,
    pub guaranteed: f64,
    /// What the queue's applications ask for beyond what they use.
    pub pending: f64,
    /// The resource of `used`'s dominant share (`guaranteed`'s while nothing is used).
    pub binds: Binding,
}

fn ser_path<S: Serializer>(p: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p)
}

fn de_path<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    String::deserialize(d).map(Arc::from)
}

/// What one tick saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub at_ms: u64,
    /// False when the RM did not answer: the rest repeats the previous observation.
    pub rm_reachable: bool,
    pub suspended: usize,
    pub shrunk: usize,
    pub queues: Vec<QueueShare>,
    /// Leaf queues beyond [`MAX_QUEUES`], left out.
    pub omitted_queues: usize,
}

/// `/api/v1/history`: the samples, oldest first, and the short-job waits of the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryReport {
    pub window_ms: u64,
    pub samples: Vec<Sample>,
    pub waits: Vec<WaitPoint>,
}

impl HistoryReport {
    /// `samples` with the `waits` of the same window: up to [`WINDOW_MS`] before the
    /// newest of either.
    pub fn new(samples: Vec<Sample>, waits: &[WaitPoint]) -> HistoryReport {
        let newest = (samples.last().map(|s| s.at_ms).into_iter())
            .chain(waits.iter().map(|w| w.at_ms))
            .max()
            .unwrap_or(0);
        let from = newest.saturating_sub(WINDOW_MS);
        HistoryReport {
            window_ms: WINDOW_MS,
            samples,
            waits: waits.iter().filter(|w| w.at_ms >= from).cloned().collect(),
        }
    }
}

/// The ring of samples.
#[derive(Debug, Default)]
pub struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Takes one tick's status in.
    pub fn record(&mut self, s: &StatusReport) {
        let total = cluster_total(s);
        let leaves = leaf_queues(s);
        let previous = self.samples.back();
        let queues = leaves
            .iter()
            .take(MAX_QUEUES)
            .map(|&i| {
                let q = &s.queues[i];
                let (used, used_binds) = dominant(q.used, total);
                let (guaranteed, guaranteed_binds) = dominant(q.guaranteed, total);
                let path = previous
                    .and_then(|p| p.queues.iter().find(|o| *o.path == *q.path))
                    .map_or_else(|| Arc::from(q.path.as_str()), |o| o.path.clone());
                QueueShare {
                    path,
                    used,
                    guaranteed,
                    pending: dominant(q.pending, total).0,
                    binds: if q.used.is_zero() {
                        guaranteed_binds
                    } else {
                        used_binds
                    },
                }
            })
            .collect();
        let sample = Sample {
            at_ms: s.at_ms,
            rm_reachable: s.rm_reachable,
            suspended: s.suspended,
            shrunk: s.shrunk,
            queues,
            omitted_queues: leaves.len().saturating_sub(MAX_QUEUES),
        };
        // A clock stepped back: what was recorded "later" no longer is.
        while self.samples.back().is_some_and(|b| b.at_ms > sample.at_ms) {
            self.samples.pop_back();
        }
        // The newest sample stands in for its stretch until it is MIN_GAP_MS past the
        // one before; till then a newer tick replaces it.
        let n = self.samples.len();
        if n >= 2 && self.samples[n - 1].at_ms - self.samples[n - 2].at_ms < MIN_GAP_MS {
            self.samples.pop_back();
        }
        self.samples.push_back(sample);
        let newest = s.at_ms;
        while self
            .samples
            .front()
            .is_some_and(|f| f.at_ms.saturating_add(WINDOW_MS) < newest)
            || self.samples.len() > MAX_SAMPLES + 1
        {
            self.samples.pop_front();
        }
    }

    pub fn samples(&self) -> Vec<Sample> {
        self.samples.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Partition;
    use crate::controller::hub::{NodeStatus, QueueStatus};

    fn status(at_ms: u64, queues: usize, suspended: usize) -> StatusReport {
        let queue = |path: String, used: Resource| QueueStatus {
            path,
            guaranteed: Resource::new(4096, 8),
            used,
            ..QueueStatus::default()
        };
        let mut qs = vec![queue("root".into(), Resource::ZERO)];
        qs.extend((0..queues).map(|i| queue(format!("root.q{i}"), Resource::new(1024, 12))));
        StatusReport {
            at_ms,
            rm_reachable: true,
            queues: qs,
            nodes: vec![NodeStatus {
                id: "nm1:8042".into(),
                capacity: Resource::new(16384, 16),
                advertised: Resource::new(16384, 16),
                partition: Partition::General,
                agent: None,
                agent_reachable: false,
                lease: None,
                containers: vec![],
            }],
            suspended,
            ..StatusReport::default()
        }
    }

    #[test]
    fn dominant_share_takes_the_larger_share_and_names_it() {
        let total = Resource::new(16384, 16);
        assert_eq!(
            dominant(Resource::new(2048, 6), total),
            (0.375, Binding::Vcores)
        );
        assert_eq!(
            dominant(Resource::new(12288, 6), total),
            (0.75, Binding::Memory)
        );
        assert_eq!(
            dominant(Resource::new(8192, 8), total),
            (0.5, Binding::Both)
        );
        // No vcores known: memory alone, never NaN.
        assert_eq!(
            dominant(Resource::new(4096, 4), Resource::new(16384, 0)),
            (0.25, Binding::Memory)
        );
        assert_eq!(dominant(Resource::new(1, 1), Resource::ZERO).0, 0.0);
    }

    #[test]
    fn samples_hold_leaf_queues_as_dominant_shares() {
        let mut h = History::default();
        h.record(&status(1_000, 2, 3));
        let s = &h.samples()[0];
        assert_eq!(s.suspended, 3);
        let paths: Vec<&str> = s.queues.iter().map(|q| &*q.path).collect();
        assert_eq!(paths, ["root.q0", "root.q1"], "the parent is not charted");
        // Used <1024 MB, 12 vcores> of <16384 MB, 16 vcores>: vcores bind at 75%.
        assert_eq!(s.queues[0].used, 0.75);
        assert_eq!(s.queues[0].binds, Binding::Vcores);
        assert_eq!(s.queues[0].guaranteed, 0.5);
    }

    #[test]
    fn cluster_total_falls_back_on_the_root_queue() {
        let mut s = status(0, 1, 0);
        assert_eq!(cluster_total(&s), Resource::new(16384, 16));
        s.nodes.clear();
        assert_eq!(cluster_total(&s), Resource::new(4096, 8));
    }

    #[test]
    fn history_is_bounded_in_time_samples_and_queues() {
        let mut h = History::default();
        // An hour of ticks every 100 ms with too many queues.
        let tick = 100;
        for n in 0..36_000u64 {
            h.record(&status(n * tick, MAX_QUEUES + 5, (n % 7) as usize));
        }
        let samples = h.samples();
        assert!(samples.len() <= MAX_SAMPLES + 1, "{}", samples.len());
        let newest = samples.last().map(|s| s.at_ms);
        assert_eq!(
            newest,
            Some(35_999 * tick),
            "the newest tick is always kept"
        );
        assert!(samples[0].at_ms + WINDOW_MS >= 35_999 * tick);
        for w in samples.windows(2).take(samples.len() - 2) {
            assert!(w[1].at_ms - w[0].at_ms >= MIN_GAP_MS);
        }
        assert!(samples.iter().all(|s| s.queues.len() == MAX_QUEUES));
        assert!(samples.iter().all(|s| s.omitted_queues == 5));
        // The paths are shared, not copied per sample.
        assert!(Arc::ptr_eq(
            &samples[0].queues[0].path,
            &samples[1].queues[0].path
        ));
    }

    #[test]
    fn the_report_keeps_the_waits_of_its_window() {
        let wait = |at_ms| WaitPoint {
            at_ms,
            application: "application_1_0001".into(),
            wait_ms: 500,
        };
        let mut h = History::default();
        h.record(&status(WINDOW_MS + 60_000, 1, 0));
        let r = HistoryReport::new(h.samples(), &[wait(1_000), wait(70_000), wait(WINDOW_MS)]);
        let at: Vec<u64> = r.waits.iter().map(|w| w.at_ms).collect();
        assert_eq!(at, [70_000, WINDOW_MS]);
        assert_eq!(r.window_ms, WINDOW_MS);
    }

    #[test]
    fn a_clock_stepped_back_drops_the_samples_after_it() {
        let mut h = History::default();
        for at in [10_000, 20_000, 30_000] {
            h.record(&status(at, 1, 0));
        }
        h.record(&status(15_000, 1, 1));
        let at: Vec<u64> = h.samples().iter().map(|s| s.at_ms).collect();
        assert_eq!(at, [10_000, 15_000]);
    }
}
