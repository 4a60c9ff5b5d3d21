//! `preemptor demo`: emulator + agent + controller on one machine, one policy after the
//! other, replaying the HiBench + TPC-H mix; prints the live preemption log and a table
//! comparing the policies. `--cluster hadoop` runs the comparison on a real YARN instead
//! ([`hadoop`]).

pub mod hadoop;
pub mod json;
pub mod report;
pub mod run;
pub mod simulated;

pub use run::{DemoReport, run};

use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::PolicyKind;
use crate::config::LoadedConfig;
use crate::emulator::RuntimeChoice;
use crate::emulator::workload::{Kernel, LONG_KERNELS};
use crate::resources::Resource;

/// A policy the demo compares: one of Preemptor's, or `yarn`, YARN's own preemption
/// monitor with Preemptor not running (real cluster only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoPolicy {
    Preemptor(PolicyKind),
    Yarn,
}

impl std::str::FromStr for DemoPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("yarn") {
            return Ok(DemoPolicy::Yarn);
        }
        s.parse().map(DemoPolicy::Preemptor)
    }
}

impl std::fmt::Display for DemoPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoPolicy::Preemptor(p) => f.write_str(p.name()),
            DemoPolicy::Yarn => f.write_str("yarn"),
        }
    }
}

/// Where the demo's policies run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterChoice {
    /// The emulated YARN (`preemptor emulate`'s), with Docker or simulated containers.
    Emulator,
    /// A real Hadoop YARN 3.5.0 started by deploy/hadoop/cluster.sh, MapReduce and Spark
    /// jobs on it.
    Hadoop,
}

/// Command-line flags of `preemptor demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Where the policies run: the emulated YARN, or a real Hadoop YARN 3.5.0 that
    /// deploy/hadoop/cluster.sh starts (needs Java 17, Maven, and a Python with pyspark,
    /// duckdb and tpchgen-cli: $PYTHON).
    #[arg(long, value_enum, default_value = "emulator")]
    pub cluster: ClusterChoice,
    /// Also write each policy's figures to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Total time, split evenly between the policies: `180`, `90s`, `3m`. Emulator only:
    /// on hadoop each run lasts until its jobs end.
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Policies to compare, in order, comma-separated: none, kill, immediate, graceful,
    /// las, dice, adaptive, and (hadoop only) yarn: YARN's own preemption, no Preemptor.
    #[arg(long, value_delimiter = ',', default_value = "none,kill,graceful")]
    pub policy: Vec<DemoPolicy>,
    /// NodeManagers: emulated ones of 16 GB and 4 vcores, or real ones of 6 GB and 4
    /// vcores.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub nodes: u16,
    /// hadoop: the cluster script.
    #[arg(long, env = "PREEMPTOR_CLUSTER_SH", default_value = hadoop::DEFAULT_CLUSTER_SH)]
    pub cluster_sh: PathBuf,
    /// hadoop: Spark SQL TPC-H Q1 queries per policy, 15 s apart. The shipped short
    /// queue's AM limit (30% of 95%) runs two Spark applications at once on 8 vcores.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=20))]
    pub short_queries: u16,
    /// hadoop: MB of text each long wordcount map counts (its length: about 2 MB per
    /// CPU-second).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=2048))]
    pub long_map_mb: u64,
    /// Container runtime: Docker if a daemon answers (auto), else simulated.
    #[arg(long, value_enum, default_value = "auto")]
    pub runtime: RuntimeChoice,
    /// Directory with capacity-scheduler.xml and preemptor-site.xml; the embedded
    /// `hadoop-conf/` by default. The demo forces the policy, a 1 s monitoring interval
    /// and the local RM, agent and proxy addresses.
    #[arg(long)]
    pub conf_dir: Option<PathBuf>,
    /// Seed of the workload mix and the policies.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// After each policy's time, stop submitting and wait up to this long for every job
    /// to finish (long jobs included), so that completion times are whole: `0` (no
    /// wait), `90s`, `5m`. Not part of --duration.
    #[arg(long, default_value = "0", value_parser = parse_drain)]
    pub drain: Duration,
    /// Input-size factor of the long HiBench jobs, above 0 and at most 1: e.g. 0.2 for long
    /// jobs that end within a few minutes' drain.
    #[arg(long, default_value_t = 1.0, value_parser = parse_long_scale)]
    pub long_scale: f64,
    /// HiBench kernels the long jobs cycle through, comma-separated: any of wordcount,
    /// terasort (MapReduce), kmeans, pagerank (Spark).
    #[arg(long, value_delimiter = ',', default_value = "wordcount,terasort,kmeans,pagerank", value_parser = parse_long_kernel)]
    pub long_kernels: Vec<Kernel>,
}

fn parse_long_kernel(s: &str) -> Result<Kernel, String> {
    let k: Kernel = s.parse()?;
    if LONG_KERNELS.contains(&k) {
        Ok(k)
    } else {
        Err(format!(
            "{s:?} is not a HiBench kernel (expected wordcount, terasort, kmeans or pagerank)"
        ))
    }
}

fn parse_long_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a factor above 0 and at most 1 (e.g. 0.2)"
        )),
    }
}

fn parse_drain(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s)
}

/// `180`, `90s`, `3m`, `1h`: above zero.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    match crate::text::parse_cli_duration(s)? {
        d if d.is_zero() => Err("the duration must be positive".into()),
        d => Ok(d),
    }
}

/// Each NodeManager of the demo: four 2 GB / 1 vcore HiBench tasks take its vcores and
/// half its memory, so short jobs wait for vcores, the resource a CPU throttle frees.
pub const NODE_RESOURCE: Resource = Resource::new(16384, 4);

/// Below this per policy, long jobs barely start before the run ends.
pub const MIN_PER_POLICY: Duration = Duration::from_secs(30);

/// Everything one demo run needs; the CLI and the integration test build it.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    pub policies: Vec<PolicyKind>,
    /// How long each policy's run lasts (the mix runs for all of it).
    pub per_policy: Duration,
    pub nodes: usize,
    pub node_resource: Resource,
    pub runtime: RuntimeChoice,
    /// Queues and settings; the policy, interval and addresses are overridden per run.
    pub conf: LoadedConfig,
    pub seed: u64,
    /// Time between TPC-H bursts; the first comes one interval in, once the long jobs
    /// fill the cluster.
    pub burst_interval: Duration,
    pub burst_size: u32,
    /// TPC-H scale factor of the short queries; `None` draws 0.2 or 0.5 per query.
    pub short_scale: Option<f64>,
    /// Input-size factor of the long HiBench jobs (1.0: minutes per task on this
    /// machine's share of a CPU).
    pub long_scale: f64,
    /// HiBench kernels of the long jobs, cycled in order.
    pub long_kernels: Vec<Kernel>,
    /// After `per_policy`, the mix stops and the run waits up to this long for every
    /// submitted job to end.
    pub drain: Duration,
    /// Print the preemption log and progress while running.
    pub live: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{0}")]
    Usage(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("emulator: {0}")]
    Emulator(#[from] crate::emulator::EmulatorError),
    #[error("node agent: {0}")]
    Agent(crate::agent::StartError),
    #[error("controller: {0}")]
    Controller(crate::controller::ControllerError),
    #[error("{0}")]
    Io(String),
}

/// The policies of --policy, each once.
fn checked_policies(args: &DemoArgs) -> Result<Vec<DemoPolicy>, DemoError> {
    if args.policy.is_empty() {
        return Err(DemoError::Usage(
            "--policy needs at least one policy".into(),
        ));
    }
    let mut seen = Vec::new();
    for p in &args.policy {
        if seen.contains(p) {
            return Err(DemoError::Usage(format!("--policy lists {p} twice")));
        }
        seen.push(*p);
    }
    Ok(seen)
}

fn load_conf(args: &DemoArgs) -> Result<LoadedConfig, DemoError> {
    match &args.conf_dir {
        Some(dir) => crate::config::load_dir(dir),
        None => crate::config::load_embedded_default(),
    }
    .map_err(|e| DemoError::Config(e.to_string()))
}

/// Each real NodeManager: 4 vcores like the emulated ones, memory for its share of
/// MapReduce tasks (512 MB), their AMs (768 MB) and Spark's AM and executor (1 GB each).
pub const HADOOP_NODE_MEMORY_MB: u64 = 6144;
pub const HADOOP_NODE_VCORES: u32 = 4;

/// The longest a real-cluster run may take from its first submission.
pub const HADOOP_RUN_LIMIT: Duration = Duration::from_secs(900);

impl hadoop::HadoopDemoConfig {
    /// Checks the flags for `--cluster hadoop` and loads the configuration.
    pub fn from_args(args: &DemoArgs) -> Result<hadoop::HadoopDemoConfig, DemoError> {
        let policies = checked_policies(args)?;
        let nodes = usize::from(args.nodes);
        let vcores = nodes * HADOOP_NODE_VCORES as usize;
        Ok(hadoop::HadoopDemoConfig {
            policies,
            nodes,
            node_memory_mb: HADOOP_NODE_MEMORY_MB,
            node_vcores: HADOOP_NODE_VCORES,
            conf: load_conf(args)?,
            conf_dir: args.conf_dir.clone(),
            seed: args.seed,
            cluster_sh: args.cluster_sh.clone(),
            python: std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()),
            // One job: the shipped long queue's AM limit (5% guaranteed) admits one AM.
            workload: hadoop::HadoopWorkload::filling(
                vcores,
                1,
                args.long_map_mb,
                usize::from(args.short_queries),
            ),
            run_limit: HADOOP_RUN_LIMIT,
            live: true,
        })
    }
}

impl DemoConfig {
    /// Checks the flags and loads the configuration.
    pub fn from_args(args: &DemoArgs) -> Result<DemoConfig, DemoError> {
        let mut seen = Vec::new();
        for p in checked_policies(args)? {
            match p {
                DemoPolicy::Preemptor(k) => seen.push(k),
                DemoPolicy::Yarn => {
                    return Err(DemoError::Usage(
                        "--policy yarn (YARN's own preemption) needs --cluster hadoop".into(),
                    ));
                }
            }
        }
        let per_policy = args.duration / args.policy.len() as u32;
        if per_policy < MIN_PER_POLICY {
            return Err(DemoError::Usage(format!(
                "--duration {}s split between {} policies leaves {}s each; give each at least {}s",
                args.duration.as_secs(),
                args.policy.len(),
                per_policy.as_secs(),
                MIN_PER_POLICY.as_secs()
            )));
        }
        let conf = load_conf(args)?;
        Ok(DemoConfig {
            policies: seen,
            per_policy,
            nodes: usize::from(args.nodes),
            node_resource: NODE_RESOURCE,
            runtime: args.runtime,
            conf,
            seed: args.seed,
            burst_interval: burst_interval_for(per_policy),
            burst_size: 1,
            short_scale: None,
            long_scale: args.long_scale,
            long_kernels: args.long_kernels.clone(),
            drain: args.drain,
            live: true,
        })
    }
}

/// The agents' lease: short, so a demo killed with SIGKILL leaves nothing throttled for
/// long.
pub(crate) const AGENT_LEASE: Duration = Duration::from_secs(10);

/// The settings and queues of one demo run, whatever its cluster: `kind` everywhere
/// (queue overrides would mix policies), acting, a 1 s interval, the RM at `rm`.
pub(crate) fn run_settings(
    conf: &LoadedConfig,
    kind: PolicyKind,
    seed: u64,
    rm: &str,
) -> (
    crate::config::settings::PreemptorSettings,
    crate::config::queues::QueueTree,
) {
    let mut settings = conf.settings.clone();
    settings.policy.kind = kind;
    settings.policy.monitoring_interval_ms = DEMO_INTERVAL_MS;
    settings.policy.observe_only = false;
    settings.policy.seed = seed;
    // YARN's per-round budgets (10% a round, 20% of the need) are for big clusters; on
    // eight containers they round down to nothing. Whole containers per round.
    settings.policy.total_preemption_per_round = 1.0;
    settings.policy.natural_termination_factor = 1.0;
    scale_dice_to_demo(&mut settings.policy.dice, DEMO_INTERVAL_MS);
    settings.rm.addresses = vec![rm.to_string()];
    settings.agent.lease_timeout_ms = AGENT_LEASE.as_millis() as u64;
    // Squeezing a container's memory can take seconds on a busy two-core machine.
    settings.agent.request_timeout_ms = settings.agent.request_timeout_ms.max(20_000);
    let mut queues = conf.queues.clone();
    for q in &mut queues.queues {
        q.policy = None;
        q.policy_is_own = false;
    }
    (settings, queues)
}

/// The demo's monitoring interval.
const DEMO_INTERVAL_MS: u64 = 1000;

/// Dice's window is its reaction time: only what waits when a window closes counts, and
/// a short task that meets a full cluster waits at least until the next window. The
/// paper's 60 s window is shorter than its short tasks (cutoff 90.58 s on Yahoo) and far
/// shorter than the waits it cuts (spikes of 3,000 s). A demo query runs for about a
/// second and waits at most about one long task, a few seconds, so the window in the
/// same proportion is one monitoring interval, the shortest a window can be.
/// MaxTaskWaitingTime is cut in the same proportion.
pub(crate) fn scale_dice_to_demo(
    dice: &mut crate::config::settings::DiceSettings,
    interval_ms: u64,
) {
    let window_ms = dice.window_ms.min(interval_ms.max(1));
    if window_ms < dice.window_ms {
        let scaled = dice.max_task_waiting_ms as u128 * window_ms as u128 / dice.window_ms as u128;
        dice.max_task_waiting_ms = u64::try_from(scaled).unwrap_or(u64::MAX).max(1);
        dice.window_ms = window_ms;
    }
}

/// About four bursts per policy, the first a quarter in, once long jobs hold the cluster.
pub fn burst_interval_for(per_policy: Duration) -> Duration {
    (per_policy / 4).max(Duration::from_secs(5))
}

/// `preemptor demo`: runs the policies, then prints the table. Ctrl-C or SIGTERM stops
/// the run in progress cleanly and prints what was measured so far.
pub async fn demo(args: DemoArgs) -> Result<(), DemoError> {
    if args.cluster == ClusterChoice::Hadoop {
        return demo_hadoop(args).await;
    }
    let config = DemoConfig::from_args(&args)?;
    let policies: Vec<&str> = config.policies.iter().map(|p| p.name()).collect();
    println!(
        "Preemptor demo: {} for {}s each ({} nodes of {}), HiBench long jobs filling the cluster and {} TPC-H queries every {}s",
        policies.join(", "),
        config.per_policy.as_secs(),
        config.nodes,
        config.node_resource,
        config.burst_size,
        config.burst_interval.as_secs()
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let watcher = stop_on_signal(
        cancel.clone(),
        "\nstopping cleanly: containers resumed, emulator containers and images removed",
    );
    let report = run(&config, cancel).await;
    watcher.abort();
    let report = report?;
    println!("\nruntime: {}", report.runtime);
    print!("{}", report::table(&report.rows));
    if report.interrupted {
        println!("interrupted: the last row covers a shortened run, later policies did not run");
    }
    if let Some(path) = &args.json {
        let policies = report
            .rows
            .iter()
            .zip(&report.records)
            .map(|(row, records)| json::policy_json(row, records))
            .collect();
        json::write(
            path,
            &json::DemoJson {
                cluster: "emulator".into(),
                policies,
            },
        )?;
    }
    Ok(())
}

/// `preemptor demo --cluster hadoop`: progress on stderr, the table on stdout.
async fn demo_hadoop(args: DemoArgs) -> Result<(), DemoError> {
    let config = hadoop::HadoopDemoConfig::from_args(&args)?;
    let w = &config.workload;
    let policies: Vec<String> = config.policies.iter().map(|p| p.to_string()).collect();
    eprintln!(
        "Preemptor demo on a real Hadoop YARN 3.5.0: {}; {} NodeManagers of {} MB and {} vcores; \
         {} wordcount jobs of {} maps x {} MB in queue long, then {} Spark SQL TPC-H Q1 queries \
         (checked against DuckDB) in queue short, {}s apart",
        policies.join(", "),
        config.nodes,
        config.node_memory_mb,
        config.node_vcores,
        w.long_jobs,
        w.maps_per_job,
        w.map_input_mb,
        w.short_queries,
        w.short_interval.as_secs()
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let watcher = stop_on_signal(
        cancel.clone(),
        "\nstopping cleanly: clients killed, containers resumed, the cluster brought down",
    );
    let report = hadoop::run(&config, cancel).await;
    watcher.abort();
    let report = report?;
    let ops: Vec<String> = report
        .cluster_ops
        .iter()
        .map(|(what, took)| format!("{what} {:.1} s", took.as_secs_f64()))
        .collect();
    eprintln!("cluster.sh: {}", ops.join(", "));
    println!("\ncluster: hadoop (real YARN 3.5.0)");
    print!("{}", report::table(&report.rows));
    for j in &report.json {
        if let Some(c) = &j.checks
            && !(c.capacities_restored && c.cgroups_restored)
        {
            println!(
                "{}: NOT RESTORED after the run: {}",
                j.policy,
                c.problems.join("; ")
            );
        }
    }
    if report.interrupted {
        println!("interrupted: the last row covers a shortened run, later policies did not run");
    }
    if let Some(path) = &args.json {
        json::write(
            path,
            &json::DemoJson {
                cluster: "hadoop".into(),
                policies: report.json,
            },
        )?;
    }
    Ok(())
}

/// Cancels `cancel` on Ctrl-C or SIGTERM, after printing `message`.
fn stop_on_signal(
    cancel: tokio_util::sync::CancellationToken,
    message: &'static str,
) -> tokio::task::JoinHandle<()> {
    let on_signal = cancel;
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => if r.is_err() { return },
            _ = term => {}
        }
        eprintln!("{message}");
        on_signal.cancel();
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        demo: DemoArgs,
    }

    #[test]
    fn dices_window_and_max_wait_shrink_together_to_the_interval() {
        let mut d = crate::config::settings::PolicySettings::default().dice;
        assert_eq!((d.window_ms, d.max_task_waiting_ms), (60_000, 30_000));
        scale_dice_to_demo(&mut d, 1_000);
        assert_eq!((d.window_ms, d.max_task_waiting_ms), (1_000, 500));
        // A window already an interval or shorter is kept.
        scale_dice_to_demo(&mut d, 90_000);
        assert_eq!((d.window_ms, d.max_task_waiting_ms), (1_000, 500));
        scale_dice_to_demo(&mut d, 0);
        assert_eq!((d.window_ms, d.max_task_waiting_ms), (1, 1));
    }

    fn parse(args: &[&str]) -> Result<DemoArgs, String> {
        Cli::try_parse_from(std::iter::once("demo").chain(args.iter().copied()))
            .map(|c| c.demo)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn durations_parse_in_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("180"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 3m "), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        for bad in ["", "m", "3x", "-1m", "0", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_default_to_three_policies_in_three_minutes() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.cluster, ClusterChoice::Emulator);
        assert_eq!(a.json, None);
        let c = DemoConfig::from_args(&a).unwrap();
        assert_eq!(
            c.policies,
            vec![PolicyKind::None, PolicyKind::Kill, PolicyKind::Graceful]
        );
        assert_eq!(c.per_policy, Duration::from_secs(60));
        assert_eq!(c.burst_interval, Duration::from_secs(15));
        assert_eq!(c.nodes, 2);
        assert_eq!(c.runtime, RuntimeChoice::Auto);
        assert_eq!((c.drain, c.long_scale), (Duration::ZERO, 1.0));
        let d = parse(&["--drain", "2m", "--long-scale", "0.2"]).unwrap();
        assert_eq!((d.drain, d.long_scale), (Duration::from_secs(120), 0.2));
        assert_eq!(c.long_kernels, LONG_KERNELS.to_vec());
        let k = parse(&["--long-kernels", "wordcount,kmeans"]).unwrap();
        assert_eq!(k.long_kernels, vec![Kernel::Wordcount, Kernel::Kmeans]);
    }

    #[test]
    fn yarn_is_a_policy_of_the_real_cluster_only() {
        let a = parse(&[
            "--cluster",
            "hadoop",
            "--policy",
            "none,graceful,yarn",
            "--json",
            "f.json",
        ])
        .unwrap();
        assert_eq!(a.json, Some(PathBuf::from("f.json")));
        let h = hadoop::HadoopDemoConfig::from_args(&a).unwrap();
        assert_eq!(
            h.policies,
            vec![
                DemoPolicy::Preemptor(PolicyKind::None),
                DemoPolicy::Preemptor(PolicyKind::Graceful),
                DemoPolicy::Yarn
            ]
        );
        assert_eq!(h.policies[2].to_string(), "yarn");
        // One long job: its AM and seven maps take 2 x 4 vcores.
        assert_eq!((h.workload.long_jobs, h.workload.maps_per_job), (1, 7));
        let e = DemoConfig::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("needs --cluster hadoop"), "{e}");
        let twice = parse(&["--cluster", "hadoop", "--policy", "yarn,YARN"]).unwrap();
        let e = hadoop::HadoopDemoConfig::from_args(&twice)
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
        assert!(parse(&["--cluster", "kubernetes"]).is_err());
    }

    #[test]
    fn bad_flags_are_refused_with_reasons() {
        let e = parse(&["--policy", "none,fifo"]).unwrap_err();
        assert!(e.contains("unknown policy"), "{e}");
        let e = parse(&["--long-kernels", "wordcount,tpch"]).unwrap_err();
        assert!(e.contains("not a HiBench kernel"), "{e}");
        let e = parse(&["--long-kernels", "sort"]).unwrap_err();
        assert!(e.contains("unknown kernel"), "{e}");
        assert!(parse(&["--nodes", "0"]).is_err());
        assert!(parse(&["--runtime", "podman"]).is_err());
        assert!(parse(&["--duration", "soon"]).is_err());
        for bad in ["0", "1.5", "-0.1", "NaN", "x"] {
            assert!(parse(&["--long-scale", bad]).is_err(), "{bad}");
        }
        assert!(parse(&["--drain", "later"]).is_err());
        let twice = parse(&["--policy", "kill,kill"]).unwrap();
        let e = DemoConfig::from_args(&twice).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        let short = parse(&["--duration", "40s"]).unwrap();
        let e = DemoConfig::from_args(&short).unwrap_err().to_string();
        assert!(e.contains("at least 30s"), "{e}");
        let dir = parse(&["--conf-dir", "/nonexistent/preemptor-demo"]).unwrap();
        let e = DemoConfig::from_args(&dir).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/preemptor-demo"), "{e}");
    }
}
