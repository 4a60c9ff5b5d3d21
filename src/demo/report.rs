//! The demo's comparison: per policy, what short and long jobs went through, from the
//! emulator's application records and the controller's metrics.

use std::fmt::Write as _;

use crate::cluster::JobClass;
use crate::emulator::stats::AppRecord;

use crate::controller::hub::Metrics;

/// Actions that take resources from a container (resume and node updates are not
/// preemptions).
const PREEMPTING_ACTIONS: [&str; 3] = ["suspend", "shrink", "kill"];

/// What one policy's run came to.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySummary {
    pub policy: String,
    pub short_submitted: usize,
    /// Short jobs that never got a task container before the run ended; their queueing
    /// delay is counted as the wait so far (a lower bound).
    pub short_still_waiting: usize,
    pub short_finished: usize,
    pub short_queueing_p50_ms: Option<u64>,
    pub short_queueing_p95_ms: Option<u64>,
    pub short_completion_p50_ms: Option<u64>,
    pub short_completion_p95_ms: Option<u64>,
    pub long_submitted: usize,
    pub long_finished: usize,
    pub long_completion_p50_ms: Option<u64>,
    pub long_completion_p90_ms: Option<u64>,
    /// Applications that ended FAILED, short or long.
    pub failed_jobs: usize,
    /// Task attempts that ended killed (preempted, not counted) or failed (a kill's exit
    /// 137 counts against the task's attempts, as in MapReduce): work redone, or lost
    /// when its job fails.
    pub rerun_attempts: u32,
    /// Applied suspend, shrink and kill actions.
    pub preemptions: u64,
    /// Actions that failed (retried by the controller while the plan wanted them).
    pub failed_actions: u64,
    /// Memory held back from long jobs, integrated over time, in GB·s.
    pub reclaimed_gb_seconds: f64,
    /// CPU held back from long jobs, integrated over time, in vcore·s.
    pub reclaimed_vcore_seconds: f64,
}

/// Nearest-rank percentile (`p` in (0, 100]) of unsorted values.
pub fn percentile(values: &[u64], p: f64) -> Option<u64> {
    if values.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len()) - 1).copied()
}

impl PolicySummary {
    /// `records` as the emulator held them at `end_ms`; `metrics` the controller's.
    pub fn new(policy: &str, records: &[AppRecord], metrics: &Metrics, end_ms: u64) -> Self {
        let of = |class: JobClass| records.iter().filter(move |r| r.class == class);
        let short: Vec<&AppRecord> = of(JobClass::Short).collect();
        let long: Vec<&AppRecord> = of(JobClass::Long).collect();
        let waits: Vec<u64> = short
            .iter()
            .map(|r| {
                r.queueing_ms()
                    .unwrap_or_else(|| end_ms.saturating_sub(r.submitted_ms))
            })
            .collect();
        let short_done: Vec<u64> = short.iter().filter_map(|r| r.completion_ms()).collect();
        let long_done: Vec<u64> = long.iter().filter_map(|r| r.completion_ms()).collect();
        let count = |m: &std::collections::BTreeMap<(String, String), u64>| -> u64 {
            m.iter()
                .filter(|((p, a), _)| p == policy && PREEMPTING_ACTIONS.contains(&a.as_str()))
                .map(|(_, n)| n)
                .sum()
        };
        PolicySummary {
            policy: policy.to_string(),
            short_submitted: short.len(),
            short_still_waiting: short
                .iter()
                .filter(|r| r.first_container_ms.is_none())
                .count(),
            short_finished: short_done.len(),
            short_queueing_p50_ms: percentile(&waits, 50.0),
            short_queueing_p95_ms: percentile(&waits, 95.0),
            short_completion_p50_ms: percentile(&short_done, 50.0),
            short_completion_p95_ms: percentile(&short_done, 95.0),
            long_submitted: long.len(),
            long_finished: long_done.len(),
            long_completion_p50_ms: percentile(&long_done, 50.0),
            long_completion_p90_ms: percentile(&long_done, 90.0),
            failed_jobs: records.iter().filter(|r| r.failed_app()).count(),
            rerun_attempts: records.iter().map(|r| r.killed + r.failed).sum(),
            preemptions: count(&metrics.actions),
            failed_actions: count(&metrics.failures),
            reclaimed_gb_seconds: metrics.reclaimed_mb_seconds / 1024.0,
            reclaimed_vcore_seconds: metrics.reclaimed_vcore_seconds,
        }
    }
}

fn secs(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".to_string(), |v| format!("{:.1}", v as f64 / 1000.0))
}

fn pair(a: Option<u64>, b: Option<u64>) -> String {
    format!("{} / {}", secs(a), secs(b))
}

/// The comparison table, one row per policy, plus the notes it needs to be read right.
pub fn table(rows: &[PolicySummary]) -> String {
    let header = [
        "policy",
        "short done",
        "short queueing p50/p95 s",
        "short completion p50/p95 s",
        "long done",
        "long completion p50/p90 s",
        "failed jobs",
        "re-run attempts",
        "preemptions",
        "reclaimed GB·s",
        "reclaimed vcore·s",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.policy.clone(),
                format!("{}/{}", r.short_finished, r.short_submitted),
                pair(r.short_queueing_p50_ms, r.short_queueing_p95_ms),
                pair(r.short_completion_p50_ms, r.short_completion_p95_ms),
                format!("{}/{}", r.long_finished, r.long_submitted),
                pair(r.long_completion_p50_ms, r.long_completion_p90_ms),
                r.failed_jobs.to_string(),
                r.rerun_attempts.to_string(),
                r.preemptions.to_string(),
                format!("{:.0}", r.reclaimed_gb_seconds),
                format!("{:.0}", r.reclaimed_vcore_seconds),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, cols: &[&str]| {
        let padded: Vec<String> = cols
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}", w = *w))
            .collect();
        let _ = writeln!(out, "| {} |", padded.join(" | "));
    };
    line(&mut out, &header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let rule: Vec<&str> = rule.iter().map(String::as_str).collect();
    line(&mut out, &rule);
    for c in &cells {
        let c: Vec<&str> = c.iter().map(String::as_str).collect();
        line(&mut out, &c);
    }
    for r in rows.iter().filter(|r| r.short_still_waiting > 0) {
        let _ = writeln!(
            out,
            "{}: {} short job(s) still waited when the run ended; their queueing delay is the wait so far.",
            r.policy, r.short_still_waiting
        );
    }
    for r in rows.iter().filter(|r| r.failed_actions > 0) {
        let _ = writeln!(
            out,
            "{}: {} action(s) failed and were retried.",
            r.policy, r.failed_actions
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cluster::ApplicationId;
    use crate::yarn::dto::{FinalApplicationStatus, YarnApplicationState};

    /// A record submitted at 1 s, finished (and succeeded) iff `done`; 2 attempts, 1
    /// killed. The demo's other tests share it.
    pub(crate) fn rec(n: u32, class: JobClass, first: Option<u64>, done: Option<u64>) -> AppRecord {
        AppRecord {
            id: ApplicationId::new(1, n),
            name: format!("app{n}"),
            queue: "q".into(),
            class,
            submitted_ms: 1000,
            first_container_ms: first,
            finished_ms: done,
            state: if done.is_some() {
                YarnApplicationState::Finished
            } else {
                YarnApplicationState::Running
            },
            final_status: if done.is_some() {
                FinalApplicationStatus::Succeeded
            } else {
                FinalApplicationStatus::Undefined
            },
            attempts: 2,
            killed: 1,
            failed: 0,
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&v, 50.0), Some(10));
        assert_eq!(percentile(&v, 95.0), Some(19));
        assert_eq!(percentile(&v, 100.0), Some(20));
        assert_eq!(percentile(&[7], 95.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, 0.0), None);
    }

    #[test]
    fn a_short_job_still_waiting_counts_with_its_wait_so_far() {
        let mut records = [
            rec(1, JobClass::Short, Some(2000), Some(4000)),
            rec(2, JobClass::Short, None, None),
            rec(3, JobClass::Long, Some(1000), Some(61_000)),
            rec(4, JobClass::Long, Some(1500), None),
        ];
        records[3].failed = 2;
        let mut m = Metrics::default();
        m.actions.insert(("graceful".into(), "shrink".into()), 3);
        m.actions.insert(("graceful".into(), "resume".into()), 3);
        m.actions
            .insert(("graceful".into(), "set-node-capacity".into()), 2);
        m.failures.insert(("graceful".into(), "suspend".into()), 1);
        m.reclaimed_mb_seconds = 2048.0 * 10.0;
        m.reclaimed_vcore_seconds = 15.0;
        let s = PolicySummary::new("graceful", &records, &m, 31_000);
        assert_eq!((s.short_submitted, s.short_finished), (2, 1));
        assert_eq!(s.short_still_waiting, 1);
        assert_eq!(s.short_queueing_p50_ms, Some(1000));
        assert_eq!(s.short_queueing_p95_ms, Some(30_000));
        assert_eq!(s.short_completion_p95_ms, Some(3000));
        assert_eq!((s.long_submitted, s.long_finished), (2, 1));
        assert_eq!(s.long_completion_p90_ms, Some(60_000));
        assert_eq!(s.rerun_attempts, 6);
        assert_eq!(s.preemptions, 3);
        assert_eq!(s.failed_actions, 1);
        assert!((s.reclaimed_gb_seconds - 20.0).abs() < 1e-9);
        assert_eq!(s.reclaimed_vcore_seconds, 15.0);
        let t = table(&[s]);
        assert!(t.contains("| graceful "), "{t}");
        assert!(t.contains("1.0 / 30.0"), "{t}");
        assert!(t.contains("1 short job(s) still waited"), "{t}");
        assert!(t.contains("1 action(s) failed"), "{t}");
    }
}
