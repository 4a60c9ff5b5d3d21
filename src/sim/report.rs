//! Results of a run: job completion time and queueing delay percentiles per job class,
//! utilization over time, preemptions, failures and scheduler counters. Printed as a
//! table, written as JSON, and plotted.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::cluster::JobClass;
use crate::resources::Resource;
use crate::sim::engine::{Core, NONE, PreemptionCounts};
use crate::sim::workload::{Time, to_secs};

/// The percentiles the papers report.
pub const PERCENTILES: [f64; 5] = [50.0, 75.0, 90.0, 95.0, 99.0];

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values` (sorted in place); `None` when empty.
    pub fn of(values: &mut [f64]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        };
        Some(Percentiles {
            p50: at(50.0),
            p75: at(75.0),
            p90: at(90.0),
            p95: at(95.0),
            p99: at(99.0),
        })
    }

    pub fn get(&self, p: f64) -> f64 {
        match p as u32 {
            50 => self.p50,
            75 => self.p75,
            90 => self.p90,
            95 => self.p95,
            _ => self.p99,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassStats {
    pub jobs: usize,
    pub finished: usize,
    /// Jobs that failed (a task ran out of attempts); excluded from the times, as in
    /// BIG-C.
    pub failed: usize,
    pub unfinished: usize,
    /// Submission to completion, seconds.
    pub completion: Option<Percentiles>,
    /// Submission to the first container starting, seconds.
    pub queueing: Option<Percentiles>,
    pub mean_completion: Option<f64>,
    pub mean_queueing: Option<f64>,
    /// Share of finished jobs that started without waiting beyond the (at most three)
    /// messages that carry a submission to a node (Pigeon's zero-queueing probability).
    pub zero_queueing: Option<f64>,
    /// Completion times, seconds, sorted (for CDFs; not in the JSON).
    #[serde(skip)]
    pub completion_samples: Vec<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UtilSample {
    pub t: f64,
    /// Share of vcores allocated to live containers (what YARN sees).
    pub allocated: f64,
    /// Share of vcores actually running (suspended and shrunk containers count for
    /// their CPU share).
    pub effective: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Utilization {
    pub mean_allocated: f64,
    pub mean_effective: f64,
    pub samples: Vec<UtilSample>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStats {
    pub events: u64,
    pub wall_secs: f64,
    pub jobs_per_sec: f64,
    pub simulated_secs: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimReport {
    pub scheduler: String,
    pub workload: String,
    pub nodes: u32,
    pub node_capacity: Resource,
    pub seed: u64,
    pub cutoff_secs: Option<f64>,
    pub short: ClassStats,
    pub long: ClassStats,
    pub utilization: Utilization,
    pub preemptions: PreemptionCounts,
    /// Scheduler counters: probes, rejections, steals, hops...
    pub counters: BTreeMap<String, u64>,
    pub run: RunStats,
}

impl SimReport {
    pub fn class(&self, c: JobClass) -> &ClassStats {
        match c {
            JobClass::Short => &self.short,
            JobClass::Long => &self.long,
        }
    }

    pub fn failed_jobs(&self) -> usize {
        self.short.failed + self.long.failed
    }
}

pub(crate) fn build<M: Copy + std::fmt::Debug>(
    core: &Core<'_, M>,
    scheduler: String,
    counters: Vec<(&'static str, u64)>,
    wall_secs: f64,
) -> SimReport {
    let wl = core.wl;
    let mut classes = [ClassStats::default(), ClassStats::default()];
    let mut times: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    let mut zero = [0usize; 2];
    for (spec, run) in wl.jobs.iter().zip(&core.jobs) {
        let i = (spec.class == JobClass::Long) as usize;
        let c = &mut classes[i];
        c.jobs += 1;
        if run.failed {
            c.failed += 1;
        } else if run.finish == NONE {
            c.unfinished += 1;
        } else {
            c.finished += 1;
            let waited = run.first_start.saturating_sub(spec.arrival);
            times[i].0.push(to_secs(run.finish - spec.arrival));
            times[i].1.push(to_secs(waited));
            if waited <= 3 * core.cfg.network_delay {
                zero[i] += 1;
            }
        }
    }
    for ((c, (mut done, mut queued)), zero) in classes.iter_mut().zip(times).zip(zero) {
        let n = done.len() as f64;
        c.mean_queueing = (n > 0.0).then(|| queued.iter().sum::<f64>() / n);
        c.zero_queueing = (n > 0.0).then(|| zero as f64 / n);
        c.completion = Percentiles::of(&mut done);
        c.queueing = Percentiles::of(&mut queued);
        c.mean_completion =
            (!done.is_empty()).then(|| done.iter().sum::<f64>() / done.len() as f64);
        c.completion_samples = done;
    }
    let samples: Vec<UtilSample> = core
        .util
        .samples
        .iter()
        .map(|&(t, a, e)| UtilSample {
            t: to_secs(t),
            allocated: a,
            effective: e,
        })
        .collect();
    let n = samples.len().max(1) as f64;
    let [short, long] = classes;
    let jobs = wl.jobs.len() as f64;
    SimReport {
        scheduler,
        workload: wl.name.clone(),
        nodes: core.nodes.len() as u32,
        node_capacity: core.cfg.node_capacity,
        seed: core.cfg.seed,
        cutoff_secs: wl.cutoff_secs,
        short,
        long,
        utilization: Utilization {
            mean_allocated: samples.iter().map(|s| s.allocated).sum::<f64>() / n,
            mean_effective: samples.iter().map(|s| s.effective).sum::<f64>() / n,
            samples,
        },
        preemptions: core.counts.clone(),
        counters: counters
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        run: RunStats {
            events: core.events_run,
            wall_secs,
            jobs_per_sec: if wall_secs > 0.0 {
                jobs / wall_secs
            } else {
                0.0
            },
            simulated_secs: to_secs(core.now.saturating_sub(wl.span().0 as Time)),
        },
    }
}

/// Seconds with a sensible number of digits.
pub fn fmt_secs(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0}")
    } else if s >= 10.0 {
        format!("{s:.1}")
    } else {
        format!("{s:.2}")
    }
}

/// The terminal table: one block per report.
pub fn table(reports: &[SimReport]) -> String {
    let mut out = String::new();
    for r in reports {
        let _ = writeln!(
            out,
            "{}  on {} nodes of {}  ({})",
            r.scheduler, r.nodes, r.node_capacity, r.workload
        );
        let _ = writeln!(
            out,
            "  {:<6} {:>6} {:>6}  {:<10} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "class", "jobs", "failed", "seconds", "p50", "p75", "p90", "p95", "p99"
        );
        for (name, c) in [("short", &r.short), ("long", &r.long)] {
            for (what, p) in [("completion", &c.completion), ("queueing", &c.queueing)] {
                let cells = match p {
                    Some(p) => PERCENTILES
                        .iter()
                        .map(|&q| format!("{:>8}", fmt_secs(p.get(q))))
                        .collect::<Vec<_>>()
                        .join(" "),
                    None => format!("{:>8}", "-"),
                };
                let (jobs, failed) = if what == "completion" {
                    (c.jobs.to_string(), c.failed.to_string())
                } else {
                    (String::new(), String::new())
                };
                let _ = writeln!(
                    out,
                    "  {:<6} {:>6} {:>6}  {:<10} {cells}",
                    if what == "completion" { name } else { "" },
                    jobs,
                    failed,
                    what
                );
            }
            if c.unfinished > 0 {
                let _ = writeln!(out, "  ({} {name} jobs never finished)", c.unfinished);
            }
        }
        let p = &r.preemptions;
        let _ = writeln!(
            out,
            "  utilization {:.1}% allocated, {:.1}% effective; suspended {}, shrunk {}, resumed {}, \
             killed {}, restarted tasks {}, failed tasks {}",
            100.0 * r.utilization.mean_allocated,
            100.0 * r.utilization.mean_effective,
            p.suspended,
            p.shrunk,
            p.resumed,
            p.killed,
            p.restarted_tasks,
            p.failed_tasks
        );
        if !r.counters.is_empty() {
            let c: Vec<String> = r.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(out, "  {}", c.join(", "));
        }
        let _ = writeln!(
            out,
            "  {} events in {:.2} s ({:.0} jobs/s), {} simulated seconds\n",
            r.run.events,
            r.run.wall_secs,
            r.run.jobs_per_sec,
            fmt_secs(r.run.simulated_secs)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!(
            (p.p50, p.p75, p.p90, p.p95, p.p99),
            (50.0, 75.0, 90.0, 95.0, 99.0)
        );
        let mut one = vec![7.0];
        assert_eq!(Percentiles::of(&mut one).unwrap().p99, 7.0);
        assert!(Percentiles::of(&mut []).is_none());
        let mut v = vec![1.0, 2.0, 3.0];
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!((p.p50, p.p99), (2.0, 3.0));
    }
}
