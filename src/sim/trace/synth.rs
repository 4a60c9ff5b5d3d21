//! Synthetic workloads:
//! - `bigc`: BIG-C's HiBench + TPC-H mix (ATC'17 §5.2). Long HiBench jobs are submitted
//!   throughout and keep about 80% of the cluster busy; short TPC-H queries (Spark-SQL)
//!   ask for a base 20% and burst between seconds 300 and 700: to about 40% (`low`), 90%
//!   (`high`), or twice above 80% (`multi`).
//! - `mmc`: an M/M/c workload (Poisson arrivals, exponential task times, one task per
//!   job) for checking the engine against the Erlang-C formulas.
//!
//! Specs read `NAME[:key=value,...]`, e.g. `bigc:pattern=high,nodes=26` or
//! `mmc:load=0.9,servers=100,jobs=200000`.

use std::fmt::Write as _;
use std::str::FromStr;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::cluster::JobClass;
use crate::resources::Resource;
use crate::sim::workload::{
    ClusterShape, JobKind, JobSpec, SLOT, Time, TraceFamily, Workload, secs,
};

/// BIG-C's burst patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Burst {
    Low,
    High,
    Multi,
}

/// Which HiBench long jobs to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongMix {
    MapReduce,
    Spark,
    Mixed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BigCSpec {
    pub pattern: Burst,
    pub nodes: u32,
    pub node_capacity: Resource,
    /// Length of the submission window (BIG-C: 900 s).
    pub seconds: f64,
    pub burst_start: f64,
    pub burst_end: f64,
    /// Share of the cluster's vcores long jobs keep asking for.
    pub long_load: f64,
    /// Short jobs' demand outside the burst.
    pub base_short_load: f64,
    pub long_mix: LongMix,
}

impl Default for BigCSpec {
    fn default() -> Self {
        // 26 nodes of two 8-core Xeons with hyperthreading and 132 GB, as in BIG-C's
        // testbed; YARN gets 32 vcores and 128 GB of each.
        BigCSpec {
            pattern: Burst::High,
            nodes: 26,
            node_capacity: Resource::new(128 * 1024, 32),
            seconds: 900.0,
            burst_start: 300.0,
            burst_end: 700.0,
            long_load: 0.8,
            base_short_load: 0.2,
            long_mix: LongMix::Mixed,
        }
    }
}

impl BigCSpec {
    /// Short jobs' demand (share of vcores) at second `t`.
    fn short_load(&self, t: f64) -> f64 {
        let (a, b) = (self.burst_start, self.burst_end);
        if t < a || t >= b {
            return self.base_short_load;
        }
        match self.pattern {
            Burst::Low => 0.4,
            Burst::High => 0.9,
            Burst::Multi => {
                // Two peaks of a fifth of the burst each, at its second and fourth fifths.
                let fifth = (b - a) / 5.0;
                let k = ((t - a) / fifth) as u32;
                if k == 1 || k == 3 {
                    0.85
                } else {
                    self.base_short_load
                }
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MmcSpec {
    /// Offered load per server, λ·E[S]/c.
    pub load: f64,
    pub servers: u32,
    pub jobs: u64,
    pub mean_secs: f64,
}

impl Default for MmcSpec {
    fn default() -> Self {
        MmcSpec {
            load: 0.9,
            servers: 100,
            jobs: 200_000,
            mean_secs: 100.0,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SynthSpec {
    BigC(BigCSpec),
    Mmc(MmcSpec),
}

impl FromStr for SynthSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, args) = s.split_once(':').unwrap_or((s, ""));
        let pairs: Vec<(&str, &str)> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.split_once('=')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .ok_or_else(|| format!("expected key=value in {s:?}, found {a:?}"))
            })
            .collect::<Result<_, _>>()?;
        match name.trim().to_ascii_lowercase().as_str() {
            "bigc" => {
                let mut b = BigCSpec::default();
                for (k, v) in pairs {
                    match k {
                        "pattern" => {
                            b.pattern = match v {
                                "low" => Burst::Low,
                                "high" => Burst::High,
                                "multi" => Burst::Multi,
                                _ => {
                                    return Err(format!(
                                        "bigc pattern {v:?}: expected low, high or multi"
                                    ));
                                }
                            }
                        }
                        "long" => {
                            b.long_mix = match v {
                                "mapreduce" => LongMix::MapReduce,
                                "spark" => LongMix::Spark,
                                "mixed" => LongMix::Mixed,
                                _ => {
                                    return Err(format!(
                                        "bigc long {v:?}: expected mapreduce, spark or mixed"
                                    ));
                                }
                            }
                        }
                        "nodes" => b.nodes = positive_int(k, v)?,
                        "node-vcores" => b.node_capacity.vcores = positive_int(k, v)?,
                        "node-memory-mb" => b.node_capacity.memory_mb = positive_int::<u64>(k, v)?,
                        "seconds" => b.seconds = positive(k, v)?,
                        "burst-start" => b.burst_start = non_negative(k, v)?,
                        "burst-end" => b.burst_end = non_negative(k, v)?,
                        "long-load" => b.long_load = fraction(k, v)?,
                        "base-load" => b.base_short_load = fraction(k, v)?,
                        _ => {
                            return Err(format!(
                                "unknown bigc key {k:?} (pattern, long, nodes, node-vcores, \
                             node-memory-mb, seconds, burst-start, burst-end, long-load, base-load)"
                            ));
                        }
                    }
                }
                if b.burst_end < b.burst_start {
                    return Err("bigc burst-end is before burst-start".into());
                }
                if b.node_capacity.vcores < 16 || b.node_capacity.memory_mb < 32 * 1024 {
                    return Err(
                        "bigc nodes need at least 16 vcores and 32768 MB to hold the \
                                largest Spark executor (16 vcores, 32 GB)"
                            .into(),
                    );
                }
                Ok(SynthSpec::BigC(b))
            }
            "mmc" => {
                let mut m = MmcSpec::default();
                for (k, v) in pairs {
                    match k {
                        "load" => {
                            m.load = fraction(k, v)?;
                            if m.load >= 1.0 || m.load == 0.0 {
                                return Err(
                                    "mmc load must be in (0, 1) for the queue to be stable".into(),
                                );
                            }
                        }
                        "servers" => m.servers = positive_int(k, v)?,
                        "jobs" => m.jobs = positive_int(k, v)?,
                        "mean" => m.mean_secs = positive(k, v)?,
                        _ => {
                            return Err(format!(
                                "unknown mmc key {k:?} (load, servers, jobs, mean)"
                            ));
                        }
                    }
                }
                Ok(SynthSpec::Mmc(m))
            }
            other => Err(format!(
                "unknown synthetic workload {other:?} (expected bigc or mmc)"
            )),
        }
    }
}

fn positive_int<T: FromStr + PartialOrd + Default>(k: &str, v: &str) -> Result<T, String> {
    match v.parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err(format!("{k} must be a positive whole number, found {v:?}")),
    }
}

fn positive(k: &str, v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{k} must be a positive number, found {v:?}")),
    }
}

fn non_negative(k: &str, v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{k} must be a non-negative number, found {v:?}")),
    }
}

fn fraction(k: &str, v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{k} must be a fraction between 0 and 1, found {v:?}"
        )),
    }
}

pub fn generate(spec: &SynthSpec, seed: u64) -> Workload {
    match spec {
        SynthSpec::BigC(b) => bigc(b, seed),
        SynthSpec::Mmc(m) => mmc(m, seed),
    }
}

/// A job template: container, task count range, duration range (seconds).
struct Shape {
    kind: JobKind,
    groups: &'static [TaskGroup],
}

struct TaskGroup {
    container: Resource,
    tasks: (u32, u32),
    secs: (f64, f64),
}

const GB: u64 = 1024;

/// TPC-H on Spark-SQL: executors of 4 vcores and 4 GB.
const TPCH: Shape = Shape {
    kind: JobKind::TpchQuery,
    groups: &[TaskGroup {
        container: Resource::new(4 * GB, 4),
        tasks: (2, 8),
        secs: (20.0, 60.0),
    }],
};

/// HiBench MapReduce: maps of 1 vcore / 2 GB and reduces of 1 vcore / 4 GB; wordcount is
/// map-heavy, terasort reduce-heavy.
const WORDCOUNT_MR: Shape = Shape {
    kind: JobKind::MapReduce,
    groups: &[
        TaskGroup {
            container: Resource::new(2 * GB, 1),
            tasks: (20, 60),
            secs: (60.0, 150.0),
        },
        TaskGroup {
            container: Resource::new(4 * GB, 1),
            tasks: (2, 4),
            secs: (60.0, 120.0),
        },
    ],
};

const TERASORT: Shape = Shape {
    kind: JobKind::MapReduce,
    groups: &[
        TaskGroup {
            container: Resource::new(2 * GB, 1),
            tasks: (20, 40),
            secs: (60.0, 120.0),
        },
        TaskGroup {
            container: Resource::new(4 * GB, 1),
            tasks: (8, 16),
            secs: (300.0, 600.0),
        },
    ],
};

/// HiBench Spark: executors of 8-16 vcores and 16-32 GB that live as long as the job.
macro_rules! spark {
    ($name:ident, $gb:expr, $vcores:expr) => {
        const $name: Shape = Shape {
            kind: JobKind::Spark,
            groups: &[TaskGroup {
                container: Resource::new($gb * GB, $vcores),
                tasks: (2, 4),
                secs: (600.0, 1500.0),
            }],
        };
    };
}
spark!(PAGERANK, 16, 8);
spark!(KMEANS, 32, 8);
spark!(BAYES, 32, 16);
spark!(WORDCOUNT_SPARK, 16, 8);

struct Gen {
    rng: Pcg64Mcg,
    w: Workload,
}

impl Gen {
    fn shape_index(&mut self, r: Resource) -> u16 {
        match self.w.shapes.iter().position(|s| *s == r) {
            Some(i) => i as u16,
            None => {
                self.w.shapes.push(r);
                (self.w.shapes.len() - 1) as u16
            }
        }
    }

    /// Add one job of `shape` arriving at `at` seconds; returns the vcores its tasks ask
    /// for together.
    fn job(&mut self, shape: &Shape, at: f64, class: JobClass) -> f64 {
        let first = self.w.durations.len() as u32;
        let mut vcores = 0.0;
        let mut total = 0.0;
        for g in shape.groups {
            let n = self.rng.random_range(g.tasks.0..=g.tasks.1);
            let base = self.rng.random_range(g.secs.0..g.secs.1);
            let s = self.shape_index(g.container);
            for _ in 0..n {
                let d = base * self.rng.random_range(0.8..1.2);
                total += d;
                vcores += g.container.vcores as f64;
                self.w.durations.push(secs(d));
                self.w.task_shape.push(s);
            }
        }
        let n = self.w.durations.len() as u32 - first;
        self.w.jobs.push(JobSpec {
            arrival: secs(at),
            first_task: first,
            num_tasks: n,
            estimate: secs(total / n as f64),
            class,
            queue: if class == JobClass::Short { 0 } else { 1 },
            kind: shape.kind,
        });
        vcores
    }

    fn exp(&mut self, mean: f64) -> f64 {
        let u: f64 = self.rng.random();
        -(1.0 - u).ln() * mean
    }
}

fn long_shapes(mix: LongMix) -> &'static [&'static Shape] {
    match mix {
        LongMix::MapReduce => &[&WORDCOUNT_MR, &TERASORT],
        LongMix::Spark => &[&PAGERANK, &KMEANS, &BAYES, &WORDCOUNT_SPARK],
        LongMix::Mixed => &[
            &WORDCOUNT_MR,
            &TERASORT,
            &PAGERANK,
            &KMEANS,
            &BAYES,
            &WORDCOUNT_SPARK,
        ],
    }
}

/// Mean vcore-seconds of a job of `shape`.
fn mean_vcore_secs(shape: &Shape) -> f64 {
    shape
        .groups
        .iter()
        .map(|g| {
            let n = (g.tasks.0 + g.tasks.1) as f64 / 2.0;
            let d = (g.secs.0 + g.secs.1) / 2.0;
            n * d * g.container.vcores as f64
        })
        .sum()
}

fn bigc(spec: &BigCSpec, seed: u64) -> Workload {
    let mut g = Gen {
        rng: Pcg64Mcg::seed_from_u64(seed),
        w: Workload {
            name: String::new(),
            family: TraceFamily::Synthetic,
            jobs: vec![],
            durations: vec![],
            task_shape: vec![],
            shapes: vec![],
            queues: vec!["short".into(), "long".into()],
            cutoff_secs: None,
            suggested_cluster: Some(ClusterShape {
                nodes: spec.nodes,
                node_capacity: spec.node_capacity,
            }),
        },
    };
    let capacity = spec.nodes as f64 * spec.node_capacity.vcores as f64;
    let longs = long_shapes(spec.long_mix);
    let mean_long = longs.iter().map(|s| mean_vcore_secs(s)).sum::<f64>() / longs.len() as f64;
    // Fill the cluster to the long load at time zero (a millisecond apart, to keep a
    // submission order), then keep the demand up with Poisson arrivals.
    let mut t = 0.0;
    let mut filled = 0.0;
    while filled < spec.long_load * capacity {
        let s = longs[g.rng.random_range(0..longs.len())];
        filled += g.job(s, t, JobClass::Long);
        t += 0.001;
    }
    let long_rate = spec.long_load * capacity / mean_long;
    t = g.exp(1.0 / long_rate);
    while t < spec.seconds {
        let s = longs[g.rng.random_range(0..longs.len())];
        g.job(s, t, JobClass::Long);
        t += g.exp(1.0 / long_rate);
    }
    // Short queries: a Poisson process whose rate follows the pattern, drawn by thinning
    // against the peak rate.
    let mean_short = mean_vcore_secs(&TPCH);
    let peak = [spec.base_short_load, 0.4, 0.9, 0.85]
        .into_iter()
        .fold(0.0f64, f64::max)
        * capacity
        / mean_short;
    let mut t = g.exp(1.0 / peak);
    while t < spec.seconds {
        let rate = spec.short_load(t) * capacity / mean_short;
        if g.rng.random::<f64>() < rate / peak {
            g.job(&TPCH, t, JobClass::Short);
        }
        t += g.exp(1.0 / peak);
    }
    g.w.jobs.sort_by_key(|j| j.arrival);
    let mut name = String::from("bigc:pattern=");
    let _ = write!(
        name,
        "{},long={},nodes={}",
        match spec.pattern {
            Burst::Low => "low",
            Burst::High => "high",
            Burst::Multi => "multi",
        },
        match spec.long_mix {
            LongMix::MapReduce => "mapreduce",
            LongMix::Spark => "spark",
            LongMix::Mixed => "mixed",
        },
        spec.nodes
    );
    g.w.name = name;
    g.w
}

fn mmc(spec: &MmcSpec, seed: u64) -> Workload {
    let mut g = Gen {
        rng: Pcg64Mcg::seed_from_u64(seed),
        w: Workload {
            name: format!(
                "mmc:load={},servers={},jobs={},mean={}",
                spec.load, spec.servers, spec.jobs, spec.mean_secs
            ),
            family: TraceFamily::Synthetic,
            jobs: Vec::with_capacity(spec.jobs as usize),
            durations: Vec::with_capacity(spec.jobs as usize),
            task_shape: vec![],
            shapes: vec![SLOT],
            queues: vec!["default".into()],
            cutoff_secs: None,
            suggested_cluster: Some(ClusterShape {
                nodes: spec.servers,
                node_capacity: SLOT,
            }),
        },
    };
    let mean_gap = spec.mean_secs / (spec.load * spec.servers as f64);
    let mean: Time = secs(spec.mean_secs);
    let mut t = 0.0f64;
    for i in 0..spec.jobs {
        t += g.exp(mean_gap);
        let d = g.exp(spec.mean_secs);
        g.w.durations.push(secs(d));
        g.w.jobs.push(JobSpec {
            arrival: secs(t),
            first_task: i as u32,
            num_tasks: 1,
            estimate: mean,
            class: JobClass::Short,
            queue: 0,
            kind: JobKind::Trace,
        });
    }
    g.w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_clear_errors() {
        let s: SynthSpec = "bigc:pattern=multi,nodes=40".parse().unwrap();
        let SynthSpec::BigC(b) = s else { panic!() };
        assert_eq!(b.pattern, Burst::Multi);
        assert_eq!(b.nodes, 40);
        let s: SynthSpec = "mmc:load=0.8,servers=10,jobs=5".parse().unwrap();
        assert_eq!(
            s,
            SynthSpec::Mmc(MmcSpec {
                load: 0.8,
                servers: 10,
                jobs: 5,
                mean_secs: 100.0
            })
        );
        for (bad, want) in [
            ("bigc:pattern=huge", "expected low, high or multi"),
            ("bigc:nodes=0", "nodes must be a positive whole number"),
            ("bigc:nodes", "expected key=value"),
            ("bigc:colour=red", "unknown bigc key"),
            ("mmc:load=1.0", "must be in (0, 1)"),
            ("poisson", "unknown synthetic workload"),
            ("bigc:node-vcores=8", "at least 16 vcores"),
        ] {
            let e = bad.parse::<SynthSpec>().unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn bigc_follows_the_burst_pattern_and_shapes() {
        let w = generate(&SynthSpec::BigC(BigCSpec::default()), 7);
        assert_eq!(w, generate(&SynthSpec::BigC(BigCSpec::default()), 7));
        let capacity = 26.0 * 32.0;
        // Short demand (vcore-seconds per second of arrivals) in and out of the burst.
        let demand = |from: f64, to: f64| {
            let mut vs = 0.0;
            for j in w.jobs.iter().filter(|j| j.class == JobClass::Short) {
                let t = crate::sim::workload::to_secs(j.arrival);
                if t >= from && t < to {
                    for k in w.job_tasks(j) {
                        vs += crate::sim::workload::to_secs(w.durations[k])
                            * w.shape(k).vcores as f64;
                    }
                }
            }
            vs / (to - from) / capacity
        };
        let base = demand(0.0, 300.0);
        let burst = demand(300.0, 700.0);
        assert!((0.12..0.28).contains(&base), "base {base}");
        assert!((0.75..1.05).contains(&burst), "burst {burst}");
        for j in &w.jobs {
            let shapes: Vec<Resource> = w.job_tasks(j).map(|k| w.shape(k)).collect();
            match j.kind {
                JobKind::TpchQuery => assert!(shapes.iter().all(|s| *s == Resource::new(4096, 4))),
                JobKind::MapReduce => assert!(
                    shapes
                        .iter()
                        .all(|s| s.vcores == 1 && (s.memory_mb == 2048 || s.memory_mb == 4096))
                ),
                JobKind::Spark => assert!(shapes.iter().all(
                    |s| (8..=16).contains(&s.vcores) && (16384..=32768).contains(&s.memory_mb)
                )),
                JobKind::Trace => panic!("bigc makes no trace jobs"),
            }
            assert_eq!(j.class == JobClass::Short, j.kind == JobKind::TpchQuery);
        }
    }

    #[test]
    fn mmc_has_the_requested_rates() {
        let spec = MmcSpec {
            load: 0.5,
            servers: 10,
            jobs: 20_000,
            mean_secs: 2.0,
        };
        let w = generate(&SynthSpec::Mmc(spec), 1);
        let n = w.jobs.len() as f64;
        let span = crate::sim::workload::to_secs(w.jobs.last().unwrap().arrival);
        let rate = n / span;
        assert!((rate - 2.5).abs() / 2.5 < 0.03, "rate {rate}");
        let mean = w.durations.iter().map(|&d| d as f64).sum::<f64>() / n / 1e6;
        assert!((mean - 2.0).abs() / 2.0 < 0.03, "mean {mean}");
    }
}
