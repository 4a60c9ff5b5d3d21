//! What an emulated application runs: the task description carried in the submission, and
//! the HiBench + TPC-H mix `preemptor emulate --workload-mix hibench-tpch` submits.
//!
//! An application names its tasks in the `PREEMPTOR_WORKLOAD` entry of the
//! `am-container-spec` environment, as JSON:
//!
//! ```json
//! {"kernel":"wordcount","args":["--size-mb","256"],"tasks":8,"memoryMb":2048,"vcores":1}
//! ```
//!
//! Optional: `maxAttempts` (failed attempts per task before the application fails,
//! default 4 like `mapreduce.map.maxattempts`) and `simulatedDurationMs` (how long a task
//! lasts under the simulated runtime; otherwise estimated from the kernel's size flags).
//!
//! An application without the entry is a plain YARN application: its AM is allocated and
//! idles until the application is killed or its lifetime ends.

use std::fmt;
use std::str::FromStr;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

use crate::resources::Resource;
use crate::yarn::dto::{
    ApplicationSubmissionContext, ContainerLaunchContext, Entries, KeyValue, LabelExpression,
    ResourceInfo, Tags,
};

/// The environment key of `am-container-spec` that describes an application's tasks.
pub const WORKLOAD_ENV: &str = "PREEMPTOR_WORKLOAD";

/// The kernels of `preemptor-workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    Burn,
    Tpch,
    Wordcount,
    Terasort,
    Kmeans,
    Pagerank,
}

impl Kernel {
    pub const ALL: [Kernel; 6] = [
        Kernel::Burn,
        Kernel::Tpch,
        Kernel::Wordcount,
        Kernel::Terasort,
        Kernel::Kmeans,
        Kernel::Pagerank,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Burn => "burn",
            Kernel::Tpch => "tpch",
            Kernel::Wordcount => "wordcount",
            Kernel::Terasort => "terasort",
            Kernel::Kmeans => "kmeans",
            Kernel::Pagerank => "pagerank",
        }
    }

    /// The YARN application type a real cluster would report for this kind of job.
    pub fn application_type(&self) -> &'static str {
        match self {
            Kernel::Burn | Kernel::Wordcount | Kernel::Terasort => "MAPREDUCE",
            Kernel::Kmeans | Kernel::Pagerank | Kernel::Tpch => "SPARK",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown kernel {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

fn default_max_attempts() -> u32 {
    4
}

/// The tasks of one application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadSpec {
    pub kernel: Kernel,
    #[serde(default)]
    pub args: Vec<String>,
    pub tasks: u32,
    pub memory_mb: u64,
    pub vcores: u32,
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated_duration_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("{WORKLOAD_ENV} is not valid: {0}")]
    Invalid(String),
}

pub const MAX_TASKS: u32 = 10_000;
const MAX_ARGS: usize = 64;
const MAX_ARG_LEN: usize = 256;

impl WorkloadSpec {
    pub fn parse(json: &str) -> Result<WorkloadSpec, WorkloadError> {
        let spec: WorkloadSpec =
            serde_json::from_str(json).map_err(|e| WorkloadError::Invalid(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// The submission's tasks; `None` for a plain application without [`WORKLOAD_ENV`].
    pub fn from_submission(
        ctx: &ApplicationSubmissionContext,
    ) -> Result<Option<Self>, WorkloadError> {
        ctx.am_container_spec
            .environment
            .get(WORKLOAD_ENV)
            .map(Self::parse)
            .transpose()
    }

    fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Invalid(m));
        if self.tasks == 0 || self.tasks > MAX_TASKS {
            return bad(format!("tasks must be 1..={MAX_TASKS}, got {}", self.tasks));
        }
        if self.memory_mb == 0 || self.vcores == 0 {
            return bad("memoryMb and vcores must be positive".into());
        }
        if self.max_attempts == 0 {
            return bad("maxAttempts must be at least 1".into());
        }
        if self.args.len() > MAX_ARGS {
            return bad(format!("at most {MAX_ARGS} args"));
        }
        if let Some(a) = self
            .args
            .iter()
            .find(|a| a.len() > MAX_ARG_LEN || a.contains('\0'))
        {
            return bad(format!(
                "argument {:?} is too long or contains NUL",
                a.chars().take(40).collect::<String>()
            ));
        }
        Ok(())
    }

    pub fn task_resource(&self) -> Resource {
        Resource::new(self.memory_mb, self.vcores)
    }

    /// `preemptor-workload` arguments for one task. `--threads` follows the CPU the task
    /// really gets unless the submission set it.
    pub fn command(&self, threads: u32) -> Vec<String> {
        let mut cmd = vec![self.kernel.name().to_string()];
        cmd.extend(self.args.iter().cloned());
        if !self.args.iter().any(|a| a == "--threads") {
            cmd.push("--threads".into());
            cmd.push(threads.max(1).to_string());
        }
        cmd
    }

    fn flag(&self, name: &str) -> Option<f64> {
        let i = self.args.iter().position(|a| a == name)?;
        self.args.get(i + 1)?.parse().ok()
    }

    /// How long a task lasts under the simulated runtime: `simulatedDurationMs`, else the
    /// CPU time one core of this machine needs for the kernel's size flags (per-unit costs
    /// from the single-thread measurements in docs/workload.md), at least one second.
    pub fn simulated_duration_ms(&self) -> u64 {
        if let Some(d) = self.simulated_duration_ms {
            return d;
        }
        let f = |name: &str, default: f64| self.flag(name).unwrap_or(default);
        let ms = match self.kernel {
            Kernel::Burn => f("--iterations", 100.0) * f("--rounds-millions", 5.0) * 2.4,
            Kernel::Tpch => f("--scale", 30.0) * 430.0,
            Kernel::Wordcount => f("--size-mb", 4096.0) * 4.1,
            Kernel::Terasort => f("--size-mb", 2048.0) * 5.4,
            Kernel::Kmeans => {
                f("--points", 2e6)
                    * f("--k", 10.0)
                    * f("--iterations", 100.0)
                    * f("--dimensions", 20.0)
                    * 3.7e-7
            }
            Kernel::Pagerank => f("--pages", 4e6) * f("--iterations", 100.0) * 5.2e-5,
        };
        if ms.is_finite() {
            (ms as u64).max(1000)
        } else {
            1000
        }
    }

    /// A submission context carrying this spec, as any REST client would send it.
    pub fn submission(
        &self,
        application_id: &str,
        name: &str,
        queue: &str,
        tags: Vec<String>,
        am: Resource,
    ) -> ApplicationSubmissionContext {
        ApplicationSubmissionContext {
            application_id: application_id.to_string(),
            application_name: name.to_string(),
            queue: queue.to_string(),
            am_container_spec: ContainerLaunchContext {
                environment: Entries {
                    entry: vec![KeyValue {
                        key: WORKLOAD_ENV.into(),
                        value: serde_json::to_string(self).unwrap_or_default(),
                    }],
                },
                ..Default::default()
            },
            max_app_attempts: 1,
            resource: ResourceInfo::from(am),
            application_type: self.kernel.application_type().into(),
            application_tags: Tags { tag: tags },
            // As a YarnClient over RPC, which leaves them unset: the queue's
            // default-node-label-expression applies.
            app_node_label_expression: LabelExpression::QUEUE_DEFAULT,
            am_container_node_label_expression: LabelExpression::QUEUE_DEFAULT,
            ..Default::default()
        }
    }
}

/// One application the mix wants submitted.
#[derive(Clone, Debug, PartialEq)]
pub struct MixJob {
    pub name: String,
    pub queue: String,
    pub tags: Vec<String>,
    pub spec: WorkloadSpec,
}

/// BIG-C's setup: long HiBench jobs keep about `long_fill` of the cluster busy; every
/// `burst_interval_ms` a burst of TPC-H queries arrives on top.
#[derive(Clone, Debug)]
pub struct HibenchTpchMix {
    pub cluster: Resource,
    pub long_fill: f64,
    /// Largest long job, as a share of the cluster's task slots.
    pub long_job_share: f64,
    pub long_queue: String,
    pub short_queue: String,
    pub burst_interval_ms: u64,
    pub burst_size: u32,
    /// TPC-H scale factor of every short query; `None` draws 0.2 or 0.5.
    pub short_scale: Option<f64>,
    /// Multiplies the long kernels' input sizes (not their iterations): below 1 for long
    /// jobs that finish within a short run.
    pub long_scale: f64,
    /// HiBench kernels the long jobs cycle through, in order ([`LONG_KERNELS`] by default).
    pub long_kernels: Vec<Kernel>,
    rng: Pcg64,
    long_seq: u64,
    short_seq: u64,
}

/// Size of a long job's task, and of every mix application's AM.
pub const LONG_TASK: Resource = Resource::new(2048, 1);
/// Long jobs' demand target as a share of the cluster: room is left for short jobs.
pub const DEFAULT_LONG_FILL: f64 = 0.8;

/// Each long job takes up to a quarter of the cluster's task slots.
pub const DEFAULT_LONG_JOB_SHARE: f64 = 0.25;

pub const MIX_AM: Resource = Resource::new(1024, 1);

/// The HiBench kernels a long job can run.
pub const LONG_KERNELS: [Kernel; 4] = [
    Kernel::Wordcount,
    Kernel::Terasort,
    Kernel::Kmeans,
    Kernel::Pagerank,
];

impl HibenchTpchMix {
    pub fn new(cluster: Resource, long_queue: &str, short_queue: &str, seed: u64) -> Self {
        HibenchTpchMix {
            cluster,
            long_fill: DEFAULT_LONG_FILL,
            long_job_share: DEFAULT_LONG_JOB_SHARE,
            long_queue: long_queue.into(),
            short_queue: short_queue.into(),
            burst_interval_ms: 60_000,
            burst_size: 3,
            short_scale: None,
            long_scale: 1.0,
            long_kernels: LONG_KERNELS.to_vec(),
            rng: Pcg64::seed_from_u64(seed),
            long_seq: 0,
            short_seq: 0,
        }
    }

    /// Long jobs to submit now, given what long jobs hold and ask for already: enough to
    /// bring their demand up to the fill target, at least one task each.
    /// Long jobs to submit now, given what long jobs hold and ask for already (tasks and
    /// AMs): enough to bring that demand to the fill target. Each job takes up to `long_job_share`
    /// of the cluster; the last one is cut to what is left.
    pub fn top_up(&mut self, long_demand: Resource) -> Vec<MixJob> {
        let share = |r: Resource| r.dominant_share(&self.cluster);
        let task_share = share(LONG_TASK);
        let am_share = share(MIX_AM);
        let slots = (self.cluster.memory_mb / LONG_TASK.memory_mb)
            .min(u64::from(self.cluster.vcores / LONG_TASK.vcores.max(1)))
            .max(1);
        let max_tasks = ((slots as f64 * self.long_job_share).floor() as u64).clamp(1, 64);
        let mut demand = share(long_demand);
        let mut jobs = Vec::new();
        while demand < self.long_fill && jobs.len() < 16 && task_share > 0.0 {
            let missing = self.long_fill - demand - am_share;
            let tasks = ((missing / task_share).ceil().max(1.0) as u64).min(max_tasks);
            demand += am_share + tasks as f64 * task_share;
            jobs.push(self.next_long(tasks as u32));
        }
        jobs
    }

    fn next_long(&mut self, tasks: u32) -> MixJob {
        // Only HiBench kernels make long jobs; an empty or foreign list falls back to all.
        let mut kernels: Vec<Kernel> = (self.long_kernels.iter())
            .copied()
            .filter(|k| LONG_KERNELS.contains(k))
            .collect();
        if kernels.is_empty() {
            kernels = LONG_KERNELS.to_vec();
        }
        let kernel = kernels[(self.long_seq % kernels.len() as u64) as usize];
        self.long_seq += 1;
        // Sizes for about 5 to 12 CPU-seconds per task (docs/workload.md), which a
        // container's share of this machine stretches to minutes: long jobs.
        let args: Vec<String> = match kernel {
            Kernel::Wordcount => vec!["--size-mb".into(), self.pick_sized(&[1536, 2048, 3072])],
            Kernel::Terasort => vec!["--size-mb".into(), self.pick_sized(&[768, 1024, 1280])],
            Kernel::Kmeans => vec![
                "--points".into(),
                self.pick_sized(&[500_000, 750_000]),
                "--k".into(),
                "10".into(),
                "--iterations".into(),
                self.pick(&[100, 150, 200]),
            ],
            _ => vec![
                "--pages".into(),
                self.pick_sized(&[1_000_000, 1_500_000]),
                "--iterations".into(),
                self.pick(&[100, 150]),
            ],
        };
        MixJob {
            name: format!("hibench-{kernel}-{}", self.long_seq),
            queue: self.long_queue.clone(),
            tags: vec!["preemptor.class=long".into(), format!("hibench={kernel}")],
            spec: WorkloadSpec {
                kernel,
                args,
                tasks,
                memory_mb: LONG_TASK.memory_mb,
                vcores: LONG_TASK.vcores,
                max_attempts: default_max_attempts(),
                simulated_duration_ms: None,
            },
        }
    }

    /// One burst of TPC-H queries (Q1 and Q6 alternating), each a few small tasks.
    pub fn burst(&mut self) -> Vec<MixJob> {
        (0..self.burst_size)
            .map(|_| {
                self.short_seq += 1;
                let query = if self.short_seq % 2 == 1 { "1" } else { "6" };
                MixJob {
                    name: format!("tpch-q{query}-{}", self.short_seq),
                    queue: self.short_queue.clone(),
                    tags: vec!["preemptor.class=short".into(), format!("tpch=q{query}")],
                    spec: WorkloadSpec {
                        kernel: Kernel::Tpch,
                        args: vec!["--query".into(), query.into(), "--scale".into(), {
                            // Drawn either way, so a fixed scale keeps the seed's sequence.
                            let drawn = self.pick_str(&["0.2", "0.5"]);
                            self.short_scale.map_or(drawn, |s| s.to_string())
                        }],
                        tasks: 2,
                        memory_mb: 1024,
                        vcores: 1,
                        max_attempts: default_max_attempts(),
                        simulated_duration_ms: None,
                    },
                }
            })
            .collect()
    }

    fn pick(&mut self, options: &[u64]) -> String {
        options[self.rng.random_range(0..options.len())].to_string()
    }

    /// An input size, times `long_scale` (at least 1).
    fn pick_sized(&mut self, options: &[u64]) -> String {
        let n = options[self.rng.random_range(0..options.len())];
        let scale = if self.long_scale.is_finite() && self.long_scale > 0.0 {
            self.long_scale
        } else {
            1.0
        };
        ((n as f64 * scale).round() as u64).max(1).to_string()
    }

    fn pick_str(&mut self, options: &[&str]) -> String {
        options[self.rng.random_range(0..options.len())].to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_and_builds_the_command() {
        let s = WorkloadSpec::parse(
            r#"{"kernel":"burn","args":["--iterations","3"],"tasks":4,"memoryMb":512,"vcores":2}"#,
        )
        .unwrap();
        assert_eq!(s.max_attempts, 4);
        assert_eq!(
            s.command(3),
            vec!["burn", "--iterations", "3", "--threads", "3"]
        );
        let mut with_threads = s.clone();
        with_threads.args.extend(["--threads".into(), "1".into()]);
        assert_eq!(with_threads.command(8).last().unwrap(), "1");
        let ctx = s.submission(
            "application_1_0001",
            "x",
            "default",
            vec![],
            Resource::new(1024, 1),
        );
        assert_eq!(WorkloadSpec::from_submission(&ctx).unwrap(), Some(s));
    }

    #[test]
    fn bad_specs_are_rejected_with_reasons() {
        for (json, needle) in [
            (
                r#"{"kernel":"sleep","tasks":1,"memoryMb":1,"vcores":1}"#,
                "unknown variant",
            ),
            (
                r#"{"kernel":"burn","tasks":0,"memoryMb":1,"vcores":1}"#,
                "tasks must be",
            ),
            (
                r#"{"kernel":"burn","tasks":1,"memoryMb":0,"vcores":1}"#,
                "positive",
            ),
            (
                r#"{"kernel":"burn","tasks":1,"memoryMb":1,"vcores":1,"x":1}"#,
                "unknown field",
            ),
            ("not json", "expected"),
        ] {
            let e = WorkloadSpec::parse(json).unwrap_err().to_string();
            assert!(e.contains(needle), "{json}: {e}");
        }
        // No entry is a plain application; a malformed one is still an error.
        let mut ctx = ApplicationSubmissionContext::default();
        assert_eq!(WorkloadSpec::from_submission(&ctx), Ok(None));
        ctx.am_container_spec.environment.entry.push(KeyValue {
            key: WORKLOAD_ENV.into(),
            value: "{".into(),
        });
        assert!(matches!(
            WorkloadSpec::from_submission(&ctx),
            Err(WorkloadError::Invalid(_))
        ));
    }

    #[test]
    fn durations_follow_the_size_flags() {
        let mut s = WorkloadSpec::parse(
            r#"{"kernel":"wordcount","args":["--size-mb","1000"],"tasks":1,"memoryMb":1,"vcores":1}"#,
        )
        .unwrap();
        assert_eq!(s.simulated_duration_ms(), 4100);
        s.simulated_duration_ms = Some(10);
        assert_eq!(s.simulated_duration_ms(), 10);
    }

    #[test]
    fn the_mix_fills_about_eighty_percent_and_bursts_short_queries() {
        let cluster = Resource::new(4 * 16384, 32);
        let mut mix = HibenchTpchMix::new(cluster, "long", "short", 7);
        let demand = |jobs: &[MixJob]| {
            jobs.iter().fold(Resource::ZERO, |acc, j| {
                acc + MIX_AM + j.spec.task_resource().scale(j.spec.tasks as f64)
            })
        };
        let big = mix.top_up(Resource::ZERO);
        let share = demand(&big).dominant_share(&cluster);
        assert!((0.8..0.9).contains(&share), "{share}");
        // A small cluster: the last job is cut so the fill stays near 80%.
        let small = Resource::new(2 * 8192, 16);
        let cut = HibenchTpchMix::new(small, "long", "short", 7).top_up(Resource::ZERO);
        let share = demand(&cut).dominant_share(&small);
        assert!((0.8..0.9).contains(&share), "{share}");
        assert!(big.iter().all(|j| j.queue == "long"));
        assert!(mix.top_up(cluster).is_empty());
        let burst = mix.burst();
        assert_eq!(burst.len(), 3);
        assert!(
            burst
                .iter()
                .all(|j| j.spec.kernel == Kernel::Tpch && j.queue == "short")
        );
        // Same seed, same jobs.
        let mut again = HibenchTpchMix::new(cluster, "long", "short", 7);
        assert_eq!(again.top_up(Resource::ZERO), big);
    }

    #[test]
    fn long_jobs_cycle_through_the_chosen_kernels_only() {
        let cluster = Resource::new(4 * 16384, 32);
        let mut mix = HibenchTpchMix::new(cluster, "long", "short", 7);
        mix.long_kernels = vec![Kernel::Wordcount, Kernel::Kmeans];
        let kernels: Vec<Kernel> = mix
            .top_up(Resource::ZERO)
            .iter()
            .map(|j| j.spec.kernel)
            .collect();
        assert!(kernels.len() >= 3, "{kernels:?}");
        for (i, k) in kernels.iter().enumerate() {
            assert_eq!(*k, [Kernel::Wordcount, Kernel::Kmeans][i % 2]);
        }
        // Kernels that make no long job are ignored; nothing left means all four.
        mix.long_kernels = vec![Kernel::Tpch, Kernel::Burn];
        let kernels: Vec<Kernel> = mix
            .top_up(Resource::ZERO)
            .iter()
            .map(|j| j.spec.kernel)
            .collect();
        assert!(
            kernels.iter().all(|k| LONG_KERNELS.contains(k)),
            "{kernels:?}"
        );
        assert!(kernels.len() >= 3);
    }
}
