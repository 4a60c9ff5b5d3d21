//! `preemptor sim`: run, compare and prepare simulations from the command line.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::cluster::JobClass;
use crate::resources::Resource;
use crate::sim::compare::{self, Baseline, NormalizedRow};
use crate::sim::costs::CostModel;
use crate::sim::error::SimError;
use crate::sim::report::{self, SimReport};
use crate::sim::trace::synth::{SynthSpec, generate};
use crate::sim::trace::{self, TraceFormat, TraceOptions};
use crate::sim::workload::{SLOT, TraceFamily, Workload, secs, to_secs};
use crate::sim::{EngineConfig, QueueSpec, SchedParams, SchedulerKind, SimSetup, plot, simulate};

const ABOUT: &str = "Simulate policies and schedulers on a job trace at datacenter scale";

macro_rules! long_about {
    () => {
        "\
Replays a job trace on a simulated cluster of thousands of nodes and reports, for short \
and long jobs separately, job completion time and queueing delay at p50/p75/p90/p95/p99, \
utilization over time, preemptions and failed or restarted tasks.

The capacity+<policy> schedulers, kairos and Dice run the same src/policy/ code as the \
controller; the other schedulers (fifo, reserve, sparrow, hawk, eagle, pigeon, tiresias) \
are the seed papers' baselines. Preemption costs follow BIG-C (about 3 s to reclaim a GB \
of dirty memory) and Dice (resume 10 s); --costs replaces them with rates measured on a \
live agent.

Workloads: Eagle/Hawk .tr traces (the Yahoo and Facebook subsets shipped in traces/), \
YARN SLS JSON job traces, and synthetic mixes (--synthetic bigc:pattern=high for BIG-C's \
HiBench + TPC-H bursts, --synthetic mmc:load=0.9 for an M/M/c check against Erlang C)."
    };
}

macro_rules! examples {
    () => {
        "\
Examples:
  preemptor sim run --trace traces/yahoo_sub1.tr --nodes 4000 -s hawk,eagle
  preemptor sim run --synthetic bigc:pattern=high -s fifo,capacity+kill,capacity+graceful --plot out/
  preemptor sim compare --trace traces/yahoo_sub1.tr \\
      --schedulers hawk,hawk+dice,eagle,eagle+dice --nodes 3000,4000,5000
  preemptor sim schedulers"
    };
}

const AFTER: &str = examples!();

/// Shown by `preemptor sim --help` (the subcommand's own doc comment in main.rs is its
/// one-line summary).
const LONG_HELP: &str = concat!(long_about!(), "\n\n", examples!());

#[derive(Debug, clap::Args)]
#[command(about = ABOUT, after_help = AFTER, after_long_help = LONG_HELP)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum SimCommand {
    /// Run one or more schedulers over a workload on one cluster size.
    #[command(after_help = AFTER)]
    Run(Box<RunArgs>),
    /// Run schedulers x cluster sizes in parallel and print tables normalized to a
    /// baseline, the way the papers do.
    #[command(after_help = AFTER)]
    Compare(Box<CompareArgs>),
    /// Write a .tr trace made by repeating another, each copy shifted in time (to build
    /// Google-sized traces from the bundled ones).
    Replicate(Box<ReplicateArgs>),
    /// List the schedulers and what each one models.
    Schedulers,
}

#[derive(Debug, clap::Args)]
pub struct WorkloadArgs {
    /// Job trace: Eagle/Hawk .tr or YARN SLS JSON (format from the extension or content).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "synthetic",
        conflicts_with = "synthetic"
    )]
    pub trace: Option<PathBuf>,
    /// Generated workload: bigc[:pattern=low|high|multi,long=mapreduce|spark|mixed,
    /// nodes=N,seconds=S,...] or mmc[:load=L,servers=C,jobs=N,mean=S].
    #[arg(long, value_name = "SPEC")]
    pub synthetic: Option<SynthSpec>,
    /// Trace format, when neither the extension nor the content says: tr or sls.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<TraceFormat>,
    /// Trace family (yahoo, google, cloudera, facebook): sets the short/long cutoff and
    /// the papers' partition sizes. Guessed from the file name.
    #[arg(long, value_name = "NAME")]
    pub family: Option<TraceFamily>,
    /// Short/long cutoff in mean task seconds (default: the family's, e.g. Yahoo
    /// 90.5811; else yarn.preemptor.class.cutoff-seconds).
    #[arg(long, value_name = "SECS")]
    pub cutoff: Option<f64>,
    /// Jobs of this SLS queue are short or long whatever their runtime: QUEUE=short|long.
    #[arg(long = "queue-class", value_name = "QUEUE=CLASS")]
    pub queue_class: Vec<QueueClass>,
    /// Repeat the workload this many times...
    #[arg(long, value_name = "N")]
    pub replicate: Option<u32>,
    /// ...each copy this many seconds after the previous (default: the trace's span).
    #[arg(long, value_name = "SECS", requires = "replicate")]
    pub replica_shift: Option<f64>,
}

/// `QUEUE=short|long`.
#[derive(Clone, Debug)]
pub struct QueueClass(pub String, pub JobClass);

impl std::str::FromStr for QueueClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (q, c) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected QUEUE=short|long"))?;
        Ok(QueueClass(q.trim().to_string(), c.parse()?))
    }
}

#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// Task slots per node for slot traces (.tr, mmc): each slot is 1 vcore and 1 GB.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub slots_per_node: u32,
    /// Node vcores for resource traces (SLS, bigc). Default: the workload's, else 10.
    #[arg(long, value_name = "N")]
    pub node_vcores: Option<u32>,
    /// Node memory for resource traces. Default: the workload's, else 10240.
    #[arg(long, value_name = "MB")]
    pub node_memory_mb: Option<u64>,
    /// One-way delay of every scheduler message.
    #[arg(long, default_value_t = 0.5, value_name = "MS")]
    pub network_delay_ms: f64,
    /// Seed of every random choice; the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Preemption rates measured on a live agent (JSON, schema preemptor-sim-costs/1;
    /// see docs/simulator.md).
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
    /// Attempts after which a killed task fails its job (mapreduce.map.maxattempts).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub max_task_attempts: u32,
    /// Utilization sampling period (default: about 500 samples over the trace).
    #[arg(long, value_name = "SECS")]
    pub sample_secs: Option<f64>,
}

#[derive(Debug, clap::Args)]
pub struct SchedArgs {
    /// Hawk/Eagle short partition, percent of nodes (default: the family's: Yahoo and
    /// Facebook 2, Cloudera 9, Google 17; else the short jobs' share of task-seconds).
    #[arg(long, value_name = "PCT")]
    pub short_partition: Option<f64>,
    /// Probes per task (Sparrow, Hawk, Eagle).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub probe_ratio: u32,
    /// Eagle: minimum probes per job.
    #[arg(long, default_value_t = 20, value_name = "K")]
    pub min_probes: u32,
    /// Hawk: nodes an idle node contacts to steal from.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub steal_attempts: u32,
    /// Eagle: SRPT bypass cap, in task estimates.
    #[arg(long, default_value_t = 5.0, value_name = "X")]
    pub bypass_cap: f64,
    /// reserve: percent of the cluster kept for short jobs.
    #[arg(long, default_value_t = 60.0, value_name = "PCT")]
    pub reserve: f64,
    /// Capacity scheduler leaf queue NAME=CAPACITY[:MAXIMUM[:short|long]] in percent;
    /// repeat for each queue (default: short=95:100 and long=5:100, as in BIG-C).
    #[arg(long = "queue", value_name = "SPEC")]
    pub queues: Vec<QueueSpec>,
    /// Policy monitoring interval (yarn.preemptor.monitoring-interval-ms).
    #[arg(long, value_name = "MS")]
    pub monitoring_interval_ms: Option<u64>,
    /// Dice: MaxTaskWaitingTime, the mean short-task wait at which Dice acts in full
    /// (yarn.preemptor.dice.max-task-waiting-ms; the Dice paper used 1000 s on Yahoo).
    #[arg(long, value_name = "SECS")]
    pub dice_max_wait_secs: Option<f64>,
    /// LAS quantum W, for kairos and capacity+las (default: 100 for Yahoo-like traces,
    /// else yarn.preemptor.las.quantum-ms).
    #[arg(long, value_name = "SECS")]
    pub las_quantum_secs: Option<f64>,
    /// LAS containers admitted beyond one per core, for kairos and capacity+las (default:
    /// 2 on one-core nodes, as in the thesis' simulations, else
    /// yarn.preemptor.las.extra-slots).
    #[arg(long, value_name = "Q")]
    pub las_extra_slots: Option<u32>,
}

#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Also write the full results as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write SVG plots (completion time CDFs, utilization over time) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Parallel runs at most (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Schedulers to run, comma-separated (see `preemptor sim schedulers`).
    #[arg(
        short,
        long = "scheduler",
        value_delimiter = ',',
        default_value = "fifo"
    )]
    pub schedulers: Vec<SchedulerKind>,
    /// Nodes in the cluster (default: the workload's, e.g. 26 for bigc; 4000 for Yahoo
    /// and Facebook traces and 15000 for Google and Cloudera, as in the papers).
    #[arg(long, value_name = "N")]
    pub nodes: Option<u32>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub sched: SchedArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Schedulers, comma-separated.
    #[arg(short, long, value_delimiter = ',', required = true)]
    pub schedulers: Vec<SchedulerKind>,
    /// Cluster sizes, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, value_name = "N,N,...")]
    pub nodes: Vec<u32>,
    /// Normalize to this scheduler; "auto" normalizes X+dice to X and everything else
    /// to the first scheduler.
    #[arg(long, default_value = "auto")]
    pub baseline: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub sched: SchedArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReplicateArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Where to write the .tr trace.
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
}

pub fn run(args: SimArgs) -> Result<(), SimError> {
    match args.command {
        SimCommand::Run(a) => run_cmd(*a),
        SimCommand::Compare(a) => compare_cmd(*a),
        SimCommand::Replicate(a) => replicate_cmd(*a),
        SimCommand::Schedulers => {
            print!("{}", schedulers_help());
            Ok(())
        }
    }
}

fn schedulers_help() -> String {
    let rows: [(&str, &str); 16] = [
        ("fifo", "one central FIFO queue, no preemption"),
        (
            "reserve",
            "BIG-C's static reservation: --reserve percent for short jobs only",
        ),
        (
            "capacity",
            "YARN capacity scheduler (--queue), no preemption",
        ),
        (
            "capacity+kill",
            "capacity scheduler + YARN's kill-based preemption",
        ),
        (
            "capacity+immediate",
            "capacity scheduler + BIG-C immediate preemption (suspend)",
        ),
        (
            "capacity+graceful",
            "capacity scheduler + BIG-C graceful preemption (shrink)",
        ),
        ("capacity+las", "capacity scheduler + Kairos' node LAS"),
        (
            "capacity+dice",
            "capacity scheduler + Dice (elastic sizing, opportunistic preemption)",
        ),
        (
            "capacity+adaptive",
            "capacity scheduler + policy per application type",
        ),
        ("sparrow", "batch sampling, 2 probes per task, late binding"),
        (
            "hawk",
            "short partition, central LWL for long jobs, probes + stealing for short",
        ),
        (
            "eagle",
            "hawk's partitions + succinct state sharing, sticky probes, SRPT",
        ),
        (
            "kairos",
            "central N+Q admission, variance tie-break, node LAS",
        ),
        (
            "pigeon",
            "groups of workers with masters, reserved workers, weighted fair queues",
        ),
        (
            "tiresias",
            "one-node sampling, task hopping with a hop limit",
        ),
        (
            "hawk+dice, eagle+dice",
            "Dice layered on hawk and eagle, as in its paper",
        ),
    ];
    let mut out = String::from("Schedulers (policies marked * run src/policy/ code):\n");
    for (name, what) in rows {
        let needs = name
            .split(", ")
            .filter_map(|n| n.parse::<SchedulerKind>().ok())
            .any(|k| k.policy_needs().is_some());
        out.push_str(&format!(
            "  {:<22} {}{what}\n",
            name,
            if needs { "* " } else { "  " }
        ));
    }
    out
}

fn load_workload(w: &WorkloadArgs, seed: u64) -> Result<Workload, SimError> {
    let mut wl = match (&w.trace, &w.synthetic) {
        (Some(path), _) => {
            let opts = TraceOptions {
                format: w.format,
                family: w.family,
                cutoff_secs: w.cutoff,
                queue_classes: w.queue_class.iter().map(|q| (q.0.clone(), q.1)).collect(),
                default_container: None,
            };
            trace::load(path, &opts)?
        }
        (None, Some(spec)) => {
            let mut wl = generate(spec, seed);
            if let Some(c) = w.cutoff {
                wl.reclassify(c);
            }
            wl
        }
        (None, None) => {
            return Err(SimError::Setting(
                "give --trace FILE or --synthetic SPEC".into(),
            ));
        }
    };
    if let Some(copies) = w.replicate {
        let (a, b) = wl.span();
        let shift = match w.replica_shift {
            Some(s) => secs(number("--replica-shift", s, Bound::AtLeastZero)?),
            None => (b - a).max(1),
        };
        wl = wl.replicate(copies, shift).map_err(SimError::Setting)?;
    }
    Ok(wl)
}

fn default_nodes(wl: &Workload) -> Option<u32> {
    wl.suggested_cluster.map(|c| c.nodes).or(match wl.family {
        TraceFamily::Yahoo | TraceFamily::Facebook => Some(4000),
        TraceFamily::Google | TraceFamily::Cloudera => Some(15000),
        TraceFamily::Synthetic | TraceFamily::Unknown => None,
    })
}

fn engine_config(c: &ClusterArgs, wl: &Workload, nodes: u32) -> Result<EngineConfig, SimError> {
    if nodes == 0 {
        return Err(SimError::Setting("--nodes must be at least 1".into()));
    }
    let network_delay_ms = number("--network-delay-ms", c.network_delay_ms, Bound::AtLeastZero)?;
    if c.max_task_attempts == 0 {
        return Err(SimError::Setting(
            "--max-task-attempts must be at least 1".into(),
        ));
    }
    let slot_trace = wl.shapes.len() == 1 && wl.shapes[0] == SLOT;
    let node_capacity = if slot_trace && c.node_vcores.is_none() && c.node_memory_mb.is_none() {
        if c.slots_per_node == 0 {
            return Err(SimError::Setting(
                "--slots-per-node must be at least 1".into(),
            ));
        }
        Resource::new(
            SLOT.memory_mb * c.slots_per_node as u64,
            SLOT.vcores * c.slots_per_node,
        )
    } else {
        let suggested = wl.suggested_cluster.map(|s| s.node_capacity);
        Resource::new(
            c.node_memory_mb
                .or(suggested.map(|s| s.memory_mb))
                .unwrap_or(10 * 1024),
            c.node_vcores.or(suggested.map(|s| s.vcores)).unwrap_or(10),
        )
    };
    let costs = match &c.costs {
        Some(p) => CostModel::load(p)?,
        None => CostModel::default(),
    };
    let sample_every = c
        .sample_secs
        .map(|s| number("--sample-secs", s, Bound::Positive).map(secs))
        .transpose()?;
    Ok(EngineConfig {
        nodes,
        node_capacity,
        network_delay: secs(network_delay_ms / 1000.0),
        costs,
        max_task_attempts: c.max_task_attempts,
        seed: c.seed,
        sample_every,
        ..EngineConfig::new(nodes, node_capacity)
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Bound {
    Positive,
    AtLeastZero,
}

/// A finite number within `bound`, or an error naming the flag.
fn number(flag: &str, v: f64, bound: Bound) -> Result<f64, SimError> {
    let ok = v.is_finite()
        && match bound {
            Bound::Positive => v > 0.0,
            Bound::AtLeastZero => v >= 0.0,
        };
    if ok {
        Ok(v)
    } else {
        let want = if bound == Bound::Positive {
            "> 0"
        } else {
            ">= 0"
        };
        Err(SimError::Setting(format!(
            "{flag} must be a number {want}, got {v}"
        )))
    }
}

fn sched_params(a: &SchedArgs) -> Result<SchedParams, SimError> {
    let mut p = SchedParams::default();
    let pct = |v: f64, what: &str| {
        if (0.0..=100.0).contains(&v) {
            Ok(v / 100.0)
        } else {
            Err(SimError::Setting(format!(
                "{what} must be a percentage 0-100, got {v}"
            )))
        }
    };
    p.short_partition = a
        .short_partition
        .map(|v| pct(v, "--short-partition"))
        .transpose()?;
    p.reserve_short = pct(a.reserve, "--reserve")?;
    if a.probe_ratio == 0 {
        return Err(SimError::Setting("--probe-ratio must be at least 1".into()));
    }
    p.probe_ratio = a.probe_ratio;
    p.eagle_min_probes = a.min_probes;
    p.steal_attempts = a.steal_attempts;
    p.bypass_cap = number("--bypass-cap", a.bypass_cap, Bound::AtLeastZero)?;
    if !a.queues.is_empty() {
        // Jobs find their queue by name: a second queue of the same name would get none.
        for (i, q) in a.queues.iter().enumerate() {
            if a.queues[..i].iter().any(|o| o.name == q.name) {
                return Err(SimError::Setting(format!(
                    "--queue {} is given twice",
                    q.name
                )));
            }
        }
        let total: f64 = a.queues.iter().map(|q| q.capacity).sum();
        if (total - 1.0).abs() > 1e-6 {
            return Err(SimError::Setting(format!(
                "queue capacities must add up to 100%, they add up to {:.1}%",
                100.0 * total
            )));
        }
        p.queues = a.queues.clone();
    }
    if let Some(s) = a.dice_max_wait_secs {
        let s = number("--dice-max-wait-secs", s, Bound::Positive)?;
        p.policy.dice.max_task_waiting_ms = (s * 1000.0).round() as u64;
    }
    p.las_quantum = a
        .las_quantum_secs
        .map(|s| number("--las-quantum-secs", s, Bound::Positive).map(secs))
        .transpose()?;
    p.las_extra_slots = a.las_extra_slots;
    if let Some(ms) = a.monitoring_interval_ms {
        if ms == 0 {
            return Err(SimError::Setting(
                "--monitoring-interval-ms must be > 0".into(),
            ));
        }
        p.policy.monitoring_interval_ms = ms;
    }
    Ok(p)
}

/// Progress bars on stderr, shown only once a run has lasted a second.
struct Progress {
    multi: MultiProgress,
    started: Instant,
    shown: AtomicBool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            started: Instant::now(),
            shown: AtomicBool::new(false),
        }
    }

    fn bar(&self, label: String, jobs: usize) -> ProgressBar {
        let style =
            ProgressStyle::with_template("{prefix:>26} [{bar:30}] {pos}/{len} jobs {elapsed}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        let b = self.multi.add(ProgressBar::new(jobs as u64));
        b.set_style(style);
        b.set_prefix(label);
        b
    }

    fn update(&self, bar: &ProgressBar, done: u64) {
        if !self.shown.load(Ordering::Relaxed) && self.started.elapsed() > Duration::from_secs(1) {
            self.shown.store(true, Ordering::Relaxed);
            self.multi.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(done);
    }
}

fn run_cmd(a: RunArgs) -> Result<(), SimError> {
    let wl = load_workload(&a.workload, a.cluster.seed)?;
    let nodes = a.nodes.or_else(|| default_nodes(&wl)).ok_or_else(|| {
        SimError::Setting(format!(
            "give --nodes: the trace {} does not say how big its cluster is",
            wl.name
        ))
    })?;
    let setup = SimSetup {
        engine: engine_config(&a.cluster, &wl, nodes)?,
        params: sched_params(&a.sched)?,
    };
    describe(&wl, &setup);
    let reports = run_many(&wl, &[(nodes, setup)], &a.schedulers, &a.output)?;
    let reports: Vec<SimReport> = reports.into_iter().map(|(_, _, r)| r).collect();
    print!("{}", report::table(&reports));
    write_outputs(&a.output, &reports, &wl.name, &Outputs::Runs(&reports))?;
    Ok(())
}

fn compare_cmd(a: CompareArgs) -> Result<(), SimError> {
    let wl = load_workload(&a.workload, a.cluster.seed)?;
    let baseline = if a.baseline == "auto" {
        Baseline::Auto
    } else {
        let k: SchedulerKind = a.baseline.parse().map_err(SimError::Setting)?;
        if !a.schedulers.contains(&k) {
            return Err(SimError::Setting(format!(
                "--baseline {k} is not among --schedulers"
            )));
        }
        Baseline::Named(k)
    };
    let params = sched_params(&a.sched)?;
    let mut setups = Vec::new();
    for &n in &a.nodes {
        setups.push((
            n,
            SimSetup {
                engine: engine_config(&a.cluster, &wl, n)?,
                params: params.clone(),
            },
        ));
    }
    if let Some((_, s)) = setups.first() {
        describe(&wl, s);
    }
    let grid = run_many(&wl, &setups, &a.schedulers, &a.output)?;
    let rows = compare::normalize(&grid, &baseline);
    print!("{}", compare::tables(&grid, &rows));
    let reports: Vec<SimReport> = grid.iter().map(|(_, _, r)| r.clone()).collect();
    write_outputs(
        &a.output,
        &reports,
        &wl.name,
        &Outputs::Grid {
            runs: &reports,
            normalized: &rows,
        },
    )?;
    Ok(())
}

fn replicate_cmd(a: ReplicateArgs) -> Result<(), SimError> {
    if a.workload.replicate.is_none() {
        return Err(SimError::Setting("give --replicate N".into()));
    }
    let wl = load_workload(&a.workload, 1)?;
    let f = std::fs::File::create(&a.output).map_err(|e| SimError::io(&a.output, e))?;
    let mut w = std::io::BufWriter::new(f);
    trace::tr::write(&wl, &mut w).map_err(|e| SimError::io(&a.output, e))?;
    w.flush().map_err(|e| SimError::io(&a.output, e))?;
    eprintln!(
        "wrote {} jobs and {} tasks to {}",
        wl.jobs.len(),
        wl.num_tasks(),
        a.output.display()
    );
    Ok(())
}

fn describe(wl: &Workload, setup: &SimSetup) {
    let (a, b) = wl.span();
    eprintln!(
        "workload {}: {} jobs ({} short, {} long), {} tasks over {:.0} s; classes {}; \
         {} nodes of {}; network delay {} ms; costs: {}",
        wl.name,
        wl.jobs.len(),
        wl.count(JobClass::Short),
        wl.count(JobClass::Long),
        wl.num_tasks(),
        to_secs(b - a),
        match wl.cutoff_secs {
            Some(c) => format!("by a {c} s cutoff"),
            None => "given by the workload".into(),
        },
        setup.engine.nodes,
        setup.engine.node_capacity,
        to_secs(setup.engine.network_delay) * 1000.0,
        setup.engine.costs.source
    );
}

/// Run every scheduler on every setup, in parallel, with progress bars.
fn run_many(
    wl: &Workload,
    setups: &[(u32, SimSetup)],
    kinds: &[SchedulerKind],
    out: &OutputArgs,
) -> Result<Vec<(u32, SchedulerKind, SimReport)>, SimError> {
    if kinds.is_empty() {
        return Err(SimError::Setting("give at least one scheduler".into()));
    }
    let runs: Vec<(u32, &SimSetup, SchedulerKind)> = setups
        .iter()
        .flat_map(|(n, s)| kinds.iter().map(move |k| (*n, s, *k)))
        .collect();
    let progress = Progress::new();
    let threads = out.threads.unwrap_or_else(compare::default_threads);
    let results = compare::parallel(&runs, threads, |_, &(n, setup, kind)| {
        let bar = progress.bar(format!("{kind} @ {n} nodes"), wl.jobs.len());
        let r = simulate(wl, setup, kind, &|done| progress.update(&bar, done));
        bar.finish_and_clear();
        r.map(|r| (n, kind, r))
    });
    results.into_iter().collect()
}

enum Outputs<'a> {
    Runs(&'a [SimReport]),
    Grid {
        runs: &'a [SimReport],
        normalized: &'a [NormalizedRow],
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GridJson<'a> {
    runs: &'a [SimReport],
    normalized: &'a [NormalizedRow],
}

fn write_outputs(
    o: &OutputArgs,
    reports: &[SimReport],
    title: &str,
    json: &Outputs<'_>,
) -> Result<(), SimError> {
    if let Some(path) = &o.json {
        let text = match json {
            Outputs::Runs(r) => serde_json::to_string_pretty(r),
            Outputs::Grid { runs, normalized } => {
                serde_json::to_string_pretty(&GridJson { runs, normalized })
            }
        }
        .map_err(|e| SimError::Setting(format!("serializing results: {e}")))?;
        if path == Path::new("-") {
            println!("{text}");
        } else {
            std::fs::write(path, text + "\n").map_err(|e| SimError::io(path, e))?;
            eprintln!("wrote {}", path.display());
        }
    }
    if let Some(dir) = &o.plot {
        for p in plot::write_all(dir, reports, title)? {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}
