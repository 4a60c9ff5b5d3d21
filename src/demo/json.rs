//! `preemptor demo --json FILE`: the figures of each policy's run as JSON, from the same
//! application records the table is made of.

use std::path::Path;

use serde::Serialize;

use crate::cluster::JobClass;
use crate::emulator::stats::AppRecord;

use super::DemoError;
use super::report::{PolicySummary, percentile};

/// The whole file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoJson {
    /// `emulator` or `hadoop`.
    pub cluster: String,
    pub policies: Vec<PolicyJson>,
}

/// One policy's run.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyJson {
    pub policy: String,
    pub short: ClassJson,
    pub long: ClassJson,
    pub failed_jobs: usize,
    pub failed_task_attempts: u64,
    pub killed_task_attempts: u64,
    pub preemptions: u64,
    /// Real cluster only: seconds spent starting (and stopping) the cluster before this
    /// run; 0 when the previous run's cluster was reused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_seconds: Option<f64>,
    /// Real cluster only: every job with where its figures came from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobJson>,
    /// Real cluster only: what was checked after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<ChecksJson>,
    /// Real cluster, Preemptor's policies: seconds from a short job's submission (the
    /// RM's startedTime) to the first victim's cgroup change applied after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_victim: Option<Percentiles>,
}

/// Short or long jobs of one run.
#[derive(Clone, Debug, Serialize)]
pub struct ClassJson {
    pub submitted: usize,
    pub done: usize,
    /// Seconds from submission to the first container (emulator: first task container;
    /// real YARN: the RM's launchTime, the ApplicationMaster's launch).
    pub queueing: Percentiles,
    /// Seconds from submission to finish, of the jobs that succeeded.
    pub completion: Percentiles,
}

/// Nearest-rank percentiles in seconds; `null` when nothing was measured.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
}

impl Percentiles {
    pub fn of(ms: &[u64]) -> Percentiles {
        let s = |p| percentile(ms, p).map(|v| v as f64 / 1000.0);
        Percentiles {
            p50: s(50.0),
            p90: s(90.0),
            p95: s(95.0),
        }
    }
}

/// One application on the real cluster.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobJson {
    pub application: String,
    /// `mapreduce` or `spark`.
    pub kind: String,
    pub class: JobClass,
    pub queue: String,
    pub state: String,
    pub final_status: String,
    /// The client (`hadoop jar`, `spark-submit`) exited with 0.
    pub client_succeeded: bool,
    /// Spark only: the query's rows equal DuckDB's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correct: Option<bool>,
    pub queueing: Option<f64>,
    pub completion: Option<f64>,
    pub failed_task_attempts: u64,
    pub killed_task_attempts: u64,
    /// Containers YARN itself preempted from this application.
    pub yarn_preempted_containers: u64,
}

/// After-run checks against the RM and the agents.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChecksJson {
    /// Every node's `totalResource` equals its configured size.
    pub capacities_restored: bool,
    /// Every container an agent changed is back to its original limits (true when no
    /// agent ran).
    pub cgroups_restored: bool,
    /// Container limits checked against their originals after a resume or at the end.
    pub cgroups_checked: usize,
    /// What did not hold, in words.
    pub problems: Vec<String>,
}

/// The JSON figures of one run from its records and table row. `failed_jobs` is the
/// row's unless the caller counts more (a real cluster's client-side failures).
pub fn policy_json(summary: &PolicySummary, records: &[AppRecord]) -> PolicyJson {
    let class = |c: JobClass| -> ClassJson {
        let of: Vec<&AppRecord> = records.iter().filter(|r| r.class == c).collect();
        let queueing: Vec<u64> = of.iter().filter_map(|r| r.queueing_ms()).collect();
        let completion: Vec<u64> = of.iter().filter_map(|r| r.completion_ms()).collect();
        ClassJson {
            submitted: of.len(),
            done: completion.len(),
            queueing: Percentiles::of(&queueing),
            completion: Percentiles::of(&completion),
        }
    };
    let mut short = class(JobClass::Short);
    // As in the table: a short job still waiting counts with its wait so far.
    short.queueing.p50 = summary.short_queueing_p50_ms.map(|v| v as f64 / 1000.0);
    short.queueing.p95 = summary.short_queueing_p95_ms.map(|v| v as f64 / 1000.0);
    PolicyJson {
        policy: summary.policy.clone(),
        short,
        long: class(JobClass::Long),
        failed_jobs: summary.failed_jobs,
        failed_task_attempts: records.iter().map(|r| u64::from(r.failed)).sum(),
        killed_task_attempts: records.iter().map(|r| u64::from(r.killed)).sum(),
        preemptions: summary.preemptions,
        setup_seconds: None,
        jobs: Vec::new(),
        checks: None,
        first_victim: None,
    }
}

/// Writes `report` to `path` (pretty-printed).
pub fn write(path: &Path, report: &DemoJson) -> Result<(), DemoError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| DemoError::Io(format!("encoding the JSON report: {e}")))?;
    std::fs::write(path, text + "\n")
        .map_err(|e| DemoError::Io(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::hub::Metrics;

    /// [`super::super::report::tests::rec`] with 3 attempts: 1 killed, 2 failed.
    fn rec(n: u32, class: JobClass, first: Option<u64>, done: Option<u64>) -> AppRecord {
        AppRecord {
            attempts: 3,
            failed: 2,
            ..super::super::report::tests::rec(n, class, first, done)
        }
    }

    #[test]
    fn figures_are_seconds_per_class_with_attempts_apart() {
        let records = [
            rec(1, JobClass::Short, Some(3000), Some(11_000)),
            rec(2, JobClass::Short, None, None),
            rec(3, JobClass::Long, Some(1500), Some(61_000)),
        ];
        let mut m = Metrics::default();
        m.actions.insert(("graceful".into(), "suspend".into()), 4);
        let s = PolicySummary::new("graceful", &records, &m, 21_000);
        let j = policy_json(&s, &records);
        assert_eq!((j.short.submitted, j.short.done), (2, 1));
        // The waiting job counts with its 20 s so far.
        assert_eq!(j.short.queueing.p95, Some(20.0));
        assert_eq!(j.short.completion.p50, Some(10.0));
        assert_eq!(j.long.completion.p90, Some(60.0));
        assert_eq!(j.long.queueing.p50, Some(0.5));
        assert_eq!((j.failed_task_attempts, j.killed_task_attempts), (6, 3));
        assert_eq!(j.preemptions, 4);
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["failedTaskAttempts"], 6);
        assert_eq!(v["short"]["queueing"]["p50"], 2.0);
        assert!(v.get("checks").is_none() && v.get("jobs").is_none());
    }
}
