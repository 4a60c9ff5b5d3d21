//! `preemptor demo`: emulator + agent + controller on one machine, one policy after the
//! other, replaying the HiBench + TPC-H mix; prints the live preemption log and a table
//! comparing the policies.

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

/// Command-line flags of `preemptor demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Total time, split evenly between the policies: `180`, `90s`, `3m`.
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Policies to compare, in order, comma-separated: none, kill, immediate, graceful,
    /// las, dice, adaptive.
    #[arg(long, value_delimiter = ',', default_value = "none,kill,graceful")]
    pub policy: Vec<PolicyKind>,
    /// Emulated NodeManagers (16 GB, 4 vcores each).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub nodes: u16,
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

/// `180`, `90s`, `3m`, `1h`: whole seconds, minutes or hours.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (examples: 180, 90s, 3m)"))?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(|| format!("{s:?} is not a duration (examples: 180, 90s, 3m)"))?;
    if secs == 0 {
        return Err("the duration must be positive".into());
    }
    Ok(Duration::from_secs(secs))
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
    Controller(super::ControllerError),
    #[error("{0}")]
    Io(String),
}

impl DemoConfig {
    /// Checks the flags and loads the configuration.
    pub fn from_args(args: &DemoArgs) -> Result<DemoConfig, DemoError> {
        if args.policy.is_empty() {
            return Err(DemoError::Usage(
                "--policy needs at least one policy".into(),
            ));
        }
        let mut seen = Vec::new();
        for p in &args.policy {
            if seen.contains(p) {
                return Err(DemoError::Usage(format!(
                    "--policy lists {} twice",
                    p.name()
                )));
            }
            seen.push(*p);
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
        let conf = match &args.conf_dir {
            Some(dir) => crate::config::load_dir(dir),
            None => crate::config::load_embedded_default(),
        }
        .map_err(|e| DemoError::Config(e.to_string()))?;
        Ok(DemoConfig {
            policies: args.policy.clone(),
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

/// About four bursts per policy, the first a quarter in, once long jobs hold the cluster.
pub fn burst_interval_for(per_policy: Duration) -> Duration {
    (per_policy / 4).max(Duration::from_secs(5))
}

/// `preemptor demo`: runs the policies, then prints the table. Ctrl-C or SIGTERM stops
/// the run in progress cleanly and prints what was measured so far.
pub async fn demo(args: DemoArgs) -> Result<(), DemoError> {
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
    let on_signal = cancel.clone();
    let watcher = tokio::spawn(async move {
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
        println!("\nstopping cleanly: containers resumed, emulator containers and images removed");
        on_signal.cancel();
    });
    let report = run(&config, cancel).await;
    watcher.abort();
    let report = report?;
    println!("\nruntime: {}", report.runtime);
    print!("{}", report::table(&report.rows));
    if report.interrupted {
        println!("interrupted: the last row covers a shortened run, later policies did not run");
    }
    Ok(())
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
        for bad in ["", "m", "3x", "-1m", "0", "1.5m", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_default_to_three_policies_in_three_minutes() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            a.policy,
            vec![PolicyKind::None, PolicyKind::Kill, PolicyKind::Graceful]
        );
        let c = DemoConfig::from_args(&a).unwrap();
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
