//! The workload a simulation replays: jobs, their tasks and the containers they ask for.
//!
//! Trace readers (`trace`) build a [`Workload`]; the engine only reads it. Tasks live in
//! flat arrays indexed by a job's `first_task`, so a 500,000-job trace is a handful of
//! allocations rather than millions.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cluster::JobClass;
use crate::resources::Resource;

/// Simulated time in microseconds. Every trace time is converted to it once, at the edge.
pub type Time = u64;

pub const MICROS_PER_MILLI: u64 = 1_000;
pub const MICROS_PER_SEC: u64 = 1_000_000;

/// Seconds (finite, non-negative) to simulated time, rounded to the microsecond.
pub fn secs(s: f64) -> Time {
    if s.is_nan() || s <= 0.0 {
        0
    } else if s >= (u64::MAX / MICROS_PER_SEC) as f64 {
        u64::MAX / 2
    } else {
        (s * MICROS_PER_SEC as f64).round() as Time
    }
}

pub fn to_secs(t: Time) -> f64 {
    t as f64 / MICROS_PER_SEC as f64
}

pub fn to_millis(t: Time) -> u64 {
    t / MICROS_PER_MILLI
}

/// What kind of program a job is; only the synthetic generator knows more than `Trace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobKind {
    /// A job from a trace that does not say.
    Trace,
    /// A TPC-H query run by Spark-SQL (short).
    TpchQuery,
    /// HiBench MapReduce (wordcount, terasort).
    MapReduce,
    /// HiBench Spark (pagerank, kmeans, bayes, wordcount).
    Spark,
}

impl JobKind {
    /// YARN's `applicationType` for this kind.
    pub fn application_type(&self) -> &'static str {
        match self {
            JobKind::Trace => "SIMULATED",
            JobKind::TpchQuery | JobKind::Spark => "SPARK",
            JobKind::MapReduce => "MAPREDUCE",
        }
    }
}

/// One job of the trace. Its tasks are `first_task .. first_task + num_tasks` in the
/// workload's task arrays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobSpec {
    pub arrival: Time,
    pub first_task: u32,
    pub num_tasks: u32,
    /// The scheduler's runtime estimate of one task: the trace's mean task duration, as
    /// Hawk and Eagle use it.
    pub estimate: Time,
    pub class: JobClass,
    /// Index into [`Workload::queues`].
    pub queue: u16,
    pub kind: JobKind,
}

/// The known trace families and the parameters the papers give for them
/// (docs/algorithms.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFamily {
    Yahoo,
    Google,
    Cloudera,
    Facebook,
    /// BIG-C-shaped HiBench + TPC-H mix from the generator.
    Synthetic,
    Unknown,
}

impl TraceFamily {
    pub const NAMED: [TraceFamily; 5] = [
        TraceFamily::Yahoo,
        TraceFamily::Google,
        TraceFamily::Cloudera,
        TraceFamily::Facebook,
        TraceFamily::Synthetic,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            TraceFamily::Yahoo => "yahoo",
            TraceFamily::Google => "google",
            TraceFamily::Cloudera => "cloudera",
            TraceFamily::Facebook => "facebook",
            TraceFamily::Synthetic => "synthetic",
            TraceFamily::Unknown => "unknown",
        }
    }

    /// Guess the family from a file name the way the papers' traces are named
    /// (`yahoo_sub1.tr`, `YH.tr`, `GOOG.tr`, `CCc.tr`, `FB.tr`...).
    pub fn from_file_name(name: &str) -> TraceFamily {
        let n = name.to_ascii_lowercase();
        let stem = n.rsplit('/').next().unwrap_or(&n);
        if stem.contains("yahoo") || stem.starts_with("yh") {
            TraceFamily::Yahoo
        } else if stem.contains("google") || stem.starts_with("goog") {
            TraceFamily::Google
        } else if stem.contains("cloudera") || stem.starts_with("cc") {
            TraceFamily::Cloudera
        } else if stem.contains("facebook") || stem.starts_with("fb") {
            TraceFamily::Facebook
        } else {
            TraceFamily::Unknown
        }
    }

    /// Mean-task-seconds cutoff between short and long jobs (Hawk/Eagle/Dice).
    pub fn cutoff_secs(&self) -> Option<f64> {
        match self {
            TraceFamily::Yahoo => Some(90.5811),
            TraceFamily::Google => Some(1129.532),
            TraceFamily::Cloudera => Some(272.783),
            TraceFamily::Facebook => Some(76.5951),
            TraceFamily::Synthetic | TraceFamily::Unknown => None,
        }
    }

    /// Hawk's and Eagle's short partition: the short jobs' share of task-seconds.
    pub fn short_partition(&self) -> Option<f64> {
        match self {
            TraceFamily::Yahoo | TraceFamily::Facebook => Some(0.02),
            TraceFamily::Google => Some(0.17),
            TraceFamily::Cloudera => Some(0.09),
            TraceFamily::Synthetic | TraceFamily::Unknown => None,
        }
    }

    /// Pigeon's reserved workers per group.
    pub fn pigeon_reserved(&self) -> Option<f64> {
        match self {
            TraceFamily::Yahoo | TraceFamily::Facebook => Some(0.02),
            TraceFamily::Google => Some(0.09),
            TraceFamily::Cloudera => Some(0.07),
            TraceFamily::Synthetic | TraceFamily::Unknown => None,
        }
    }

    /// Kairos' quantum W in the thesis' simulations (trace time units are seconds).
    pub fn kairos_quantum_secs(&self) -> Option<f64> {
        match self {
            TraceFamily::Yahoo | TraceFamily::Facebook | TraceFamily::Cloudera => Some(100.0),
            TraceFamily::Google => Some(10_000.0),
            TraceFamily::Synthetic | TraceFamily::Unknown => None,
        }
    }
}

impl fmt::Display for TraceFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFamily {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        TraceFamily::NAMED
            .into_iter()
            .chain([TraceFamily::Unknown])
            .find(|f| f.name() == t)
            .ok_or_else(|| {
                format!(
                    "unknown trace family {s:?} (expected yahoo, google, cloudera, facebook, \
                     synthetic or unknown)"
                )
            })
    }
}

/// The cluster a trace was made for, when it says (the synthetic generator does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterShape {
    pub nodes: u32,
    pub node_capacity: Resource,
}

/// The container one slot holds in slot-based traces (`.tr`): one vcore and 1 GB, so that
/// the cost model has a memory size to work with.
pub const SLOT: Resource = Resource::new(1024, 1);

/// A whole trace, ready to simulate. Jobs are sorted by arrival time.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Where it came from, for reports (file name or generator description).
    pub name: String,
    pub family: TraceFamily,
    pub jobs: Vec<JobSpec>,
    /// Duration of every task at full speed, flat, indexed through `JobSpec::first_task`.
    pub durations: Vec<Time>,
    /// Container shape of every task, as an index into `shapes`. Empty when every task
    /// uses `shapes[0]`.
    pub task_shape: Vec<u16>,
    pub shapes: Vec<Resource>,
    /// Queue names the jobs were submitted to.
    pub queues: Vec<String>,
    /// The cutoff the classes were computed with; `None` when the classes come from the
    /// generator or the queues.
    pub cutoff_secs: Option<f64>,
    pub suggested_cluster: Option<ClusterShape>,
}

impl Workload {
    pub fn num_tasks(&self) -> usize {
        self.durations.len()
    }

    pub fn job_tasks(&self, j: &JobSpec) -> std::ops::Range<usize> {
        let start = j.first_task as usize;
        start..start + j.num_tasks as usize
    }

    /// The container task `t` asks for.
    pub fn shape(&self, task: usize) -> Resource {
        match self.task_shape.get(task) {
            Some(&s) => self.shapes[s as usize],
            None => self.shapes[0],
        }
    }

    /// Largest container any task asks for.
    pub fn max_shape(&self) -> Resource {
        self.shapes
            .iter()
            .fold(Resource::ZERO, |acc, s| acc.component_max(*s))
    }

    /// Short jobs' share of the total task-seconds (Hawk's partition size, Dice's
    /// MinShort).
    pub fn short_task_seconds_share(&self) -> f64 {
        let (mut short, mut all) = (0.0f64, 0.0f64);
        for j in &self.jobs {
            let s: f64 = self.durations[self.job_tasks(j)]
                .iter()
                .map(|&d| d as f64)
                .sum();
            all += s;
            if j.class == JobClass::Short {
                short += s;
            }
        }
        if all <= 0.0 { 0.0 } else { short / all }
    }

    pub fn count(&self, class: JobClass) -> usize {
        self.jobs.iter().filter(|j| j.class == class).count()
    }

    /// First and last arrival.
    pub fn span(&self) -> (Time, Time) {
        match (self.jobs.first(), self.jobs.last()) {
            (Some(a), Some(b)) => (a.arrival, b.arrival),
            _ => (0, 0),
        }
    }

    /// Reclassify every job against a new cutoff (mean task seconds).
    pub fn reclassify(&mut self, cutoff_secs: f64) {
        for j in &mut self.jobs {
            j.class = classify_mean(to_secs(j.estimate), cutoff_secs);
        }
        self.cutoff_secs = Some(cutoff_secs);
    }

    /// Index of a queue name, adding it if new.
    pub(crate) fn intern_queue(queues: &mut Vec<String>, name: &str) -> Option<u16> {
        if let Some(i) = queues.iter().position(|q| q == name) {
            return u16::try_from(i).ok();
        }
        let i = u16::try_from(queues.len()).ok()?;
        queues.push(name.to_string());
        Some(i)
    }

    /// Repeat the whole trace `copies` times, copy `k` shifted by `k * shift`, as a way
    /// to build Google-sized traces from the bundled ones.
    pub fn replicate(&self, copies: u32, shift: Time) -> Result<Workload, String> {
        if copies == 0 {
            return Err("replication needs at least one copy".into());
        }
        let total_tasks = (self.durations.len() as u64) * copies as u64;
        if total_tasks > u32::MAX as u64 {
            return Err(format!(
                "{copies} copies would hold {total_tasks} tasks, more than the simulator's \
                 limit of {}",
                u32::MAX
            ));
        }
        let mut jobs = Vec::with_capacity(self.jobs.len() * copies as usize);
        let mut durations = Vec::with_capacity(total_tasks as usize);
        let mut task_shape = Vec::with_capacity(if self.task_shape.is_empty() {
            0
        } else {
            total_tasks as usize
        });
        for k in 0..copies as u64 {
            let offset = durations.len() as u32;
            let dt = shift.checked_mul(k).ok_or("replication shift overflows")?;
            for j in &self.jobs {
                let mut c = *j;
                c.arrival = j.arrival.checked_add(dt).ok_or("replication overflows")?;
                c.first_task = j.first_task + offset;
                jobs.push(c);
            }
            durations.extend_from_slice(&self.durations);
            task_shape.extend_from_slice(&self.task_shape);
        }
        // Copies overlap in time when the shift is shorter than the span; keep arrival
        // order (stable, so ties keep their copy order).
        jobs.sort_by_key(|j| j.arrival);
        Ok(Workload {
            name: format!("{} x{copies} (shift {:.0} s)", self.name, to_secs(shift)),
            family: self.family,
            jobs,
            durations,
            task_shape,
            shapes: self.shapes.clone(),
            queues: self.queues.clone(),
            cutoff_secs: self.cutoff_secs,
            suggested_cluster: self.suggested_cluster,
        })
    }
}

/// A job is short when its mean task runtime is below the cutoff (Hawk, Eagle, Dice).
pub fn classify_mean(mean_secs: f64, cutoff_secs: f64) -> JobClass {
    crate::cluster::classify(None, &[], Some(mean_secs), cutoff_secs)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A slot workload from `(arrival secs, [task secs])`, classified at `cutoff`.
    pub fn slot_workload(jobs: &[(f64, &[f64])], cutoff: f64) -> Workload {
        let mut w = Workload {
            name: "test".into(),
            family: TraceFamily::Unknown,
            jobs: vec![],
            durations: vec![],
            task_shape: vec![],
            shapes: vec![SLOT],
            queues: vec!["default".into()],
            cutoff_secs: Some(cutoff),
            suggested_cluster: None,
        };
        for (arrival, tasks) in jobs {
            let mean = tasks.iter().sum::<f64>() / tasks.len() as f64;
            w.jobs.push(JobSpec {
                arrival: secs(*arrival),
                first_task: w.durations.len() as u32,
                num_tasks: tasks.len() as u32,
                estimate: secs(mean),
                class: classify_mean(mean, cutoff),
                queue: 0,
                kind: JobKind::Trace,
            });
            w.durations.extend(tasks.iter().map(|&d| secs(d)));
        }
        w
    }

    #[test]
    fn families_come_from_file_names() {
        assert_eq!(
            TraceFamily::from_file_name("traces/yahoo_sub1.tr"),
            TraceFamily::Yahoo
        );
        assert_eq!(TraceFamily::from_file_name("GOOG.tr"), TraceFamily::Google);
        assert_eq!(TraceFamily::from_file_name("CCc.tr"), TraceFamily::Cloudera);
        assert_eq!(
            TraceFamily::from_file_name("facebook_synthetic_2000.tr"),
            TraceFamily::Facebook
        );
        assert_eq!(
            TraceFamily::from_file_name("mine.json"),
            TraceFamily::Unknown
        );
        assert_eq!(TraceFamily::Yahoo.cutoff_secs(), Some(90.5811));
        assert_eq!("google".parse::<TraceFamily>(), Ok(TraceFamily::Google));
        assert!("goggle".parse::<TraceFamily>().is_err());
    }

    #[test]
    fn replication_shifts_and_interleaves_copies() {
        let w = slot_workload(&[(0.0, &[1.0, 2.0]), (10.0, &[300.0])], 90.0);
        let r = w.replicate(3, secs(5.0)).unwrap();
        assert_eq!(r.jobs.len(), 6);
        assert_eq!(r.durations.len(), 9);
        let arrivals: Vec<f64> = r.jobs.iter().map(|j| to_secs(j.arrival)).collect();
        assert_eq!(arrivals, vec![0.0, 5.0, 10.0, 10.0, 15.0, 20.0]);
        // Every copy still points at its own tasks.
        for j in &r.jobs {
            let d = &r.durations[r.job_tasks(j)];
            assert_eq!(d.len(), j.num_tasks as usize);
            assert_eq!(j.class == JobClass::Long, d[0] == secs(300.0));
        }
        assert!(w.replicate(0, 1).is_err());
        assert!((w.short_task_seconds_share() - 3.0 / 303.0).abs() < 1e-12);
    }

    #[test]
    fn time_conversions_round_and_clamp() {
        assert_eq!(secs(1.5), 1_500_000);
        assert_eq!(secs(-3.0), 0);
        assert_eq!(secs(f64::NAN), 0);
        assert_eq!(secs(0.0000004), 0);
        assert_eq!(secs(0.0000006), 1);
        assert_eq!(to_millis(secs(2.0)), 2000);
    }
}
