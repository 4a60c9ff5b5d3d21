//! `preemptor emulate`.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::resources::Resource;
use crate::yarn::dto::YarnApplicationState;

use super::mix::{self, MixConfig};
use super::nodemanager::cli::{default_cpu_scale, parse_node_address};
use super::queues::QueueSetup;
use super::runtime::RuntimeKind;
use super::{Emulator, EmulatorConfig, EmulatorError, RemoteNodeManagers, RuntimeChoice};
use crate::config;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadMix {
    /// Submit nothing; applications come from REST clients.
    None,
    /// Long HiBench jobs (wordcount, terasort, kmeans, pagerank) keep about 80% of the
    /// cluster busy in queue `long`; bursts of TPC-H Q1/Q6 arrive in queue `short`.
    HibenchTpch,
}

#[derive(Debug, clap::Args)]
#[command(
    long_about = "Run a small YARN on this machine: a ResourceManager whose REST API is \
Hadoop 3.x's (JSON, or XML with `Accept: application/xml`) with capacity-scheduler \
semantics, and NodeManagers that launch each container as a real Docker container named \
after its YARN container id, in cgroup /hadoop-yarn/<containerId>, with the allocation's \
memory and CPU limits.\n\n\
Applications describe their tasks in the PREEMPTOR_WORKLOAD entry of am-container-spec's \
environment (see docs/emulator.md); `--workload-mix hibench-tpch` submits a BIG-C-like mix \
by itself.\n\n\
Without a Docker daemon (`--runtime simulated`, or `auto` when none answers) containers are \
in-process timers and every output says so.",
    after_help = "Example: preemptor emulate --nodes 4 --node-memory-mb 8192 --node-vcores 8 \
--workload-mix hibench-tpch\nThen: curl http://127.0.0.1:8088/ws/v1/cluster/apps"
)]
pub struct EmulateArgs {
    /// Address the ResourceManager and NodeManager web services bind to.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// ResourceManager web port (yarn.resourcemanager.webapp.address).
    #[arg(long, default_value_t = 8088)]
    pub rm_port: u16,
    /// Web port of the first NodeManager; node i listens on this + i. 0 picks free ports.
    #[arg(long, default_value_t = 8042)]
    pub nm_base_port: u16,
    /// Number of NodeManagers.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=512))]
    pub nodes: u16,
    /// Use the NodeManager process (`preemptor nodemanager`) at HOST:PORT instead of
    /// in-process ones; repeat for each. Its node id is HOST:PORT. Cannot be combined with
    /// --nodes or --nm-base-port. --node-memory-mb/--node-vcores must match the
    /// NodeManagers' --memory-mb/--vcores, and --runtime says what they run (auto: docker).
    #[arg(long = "nodemanager", value_name = "HOST:PORT",
        conflicts_with_all = ["nodes", "nm_base_port"], requires = "nm_token_file")]
    pub nodemanagers: Vec<String>,
    /// File (mode 0600) with the bearer token of the NodeManagers' internal API (their
    /// --token-file).
    #[arg(long, value_name = "PATH", requires = "nodemanagers")]
    pub nm_token_file: Option<PathBuf>,
    /// Seconds a NodeManager may stay unreachable (launches and event streams are
    /// retried meanwhile) before its containers are reported lost, exit -100
    /// (yarn.nm.liveness-monitor.expiry-interval-ms).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub nm_expiry_secs: u64,
    /// Memory each NodeManager offers (yarn.nodemanager.resource.memory-mb).
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1..))]
    pub node_memory_mb: u64,
    /// Vcores each NodeManager offers (yarn.nodemanager.resource.cpu-vcores).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub node_vcores: u32,
    /// Container runtime.
    #[arg(long, value_enum, default_value_t = RuntimeChoice::Auto)]
    pub runtime: RuntimeChoice,
    /// Real CPUs a container gets per vcore. Default: this machine's CPUs divided by all
    /// emulated vcores, so that a full cluster uses the whole machine. With --nodemanager
    /// the NodeManagers apply their own; the RM uses this only to pick each task's
    /// --threads, and defaults to the NodeManagers' default (CPUs / --node-vcores).
    #[arg(long)]
    pub cpu_scale: Option<f64>,
    /// Hadoop configuration directory; its capacity-scheduler.xml defines the queues. When
    /// the default ./hadoop-conf is absent, the example built into preemptor is used.
    #[arg(long, default_value = DEFAULT_CONF_DIR)]
    pub conf_dir: PathBuf,
    /// Submit a workload mix.
    #[arg(long, value_enum, default_value_t = WorkloadMix::None)]
    pub workload_mix: WorkloadMix,
    /// Seconds between TPC-H bursts of the mix.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub burst_interval_secs: u64,
    /// TPC-H queries per burst.
    #[arg(long, default_value_t = 3)]
    pub burst_size: u32,
    /// Seed of the mix's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// NodeManager heartbeat interval (the scheduler allocates on heartbeats).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub heartbeat_ms: u64,
    /// Stop after this many seconds; 0 runs until Ctrl-C.
    #[arg(long, default_value_t = 0)]
    pub duration_secs: u64,
    /// Workload image to run (its entrypoint must be preemptor-workload); built from the
    /// preemptor-workload binary next to this program when omitted.
    #[arg(long)]
    pub image: Option<String>,
    /// SPNEGO mode: the RM's REST API takes only Kerberos callers, as an RM with
    /// hadoop.http.authentication.type=kerberos does: a Negotiate token for a service
    /// principal in this keytab (HTTP/<host>@REALM, chmod 600), or the hadoop.auth
    /// cookie the emulator issued for one. The KDC comes from /etc/krb5.conf or
    /// KRB5_CONFIG.
    #[arg(long, value_name = "KEYTAB")]
    pub spnego_keytab: Option<PathBuf>,
}

/// How long an issued hadoop.auth cookie is honoured (Hadoop's default validity).
const SPNEGO_COOKIE_LIFE: Duration = Duration::from_secs(36_000);

const DEFAULT_CONF_DIR: &str = "hadoop-conf";

/// The queue tree: `conf_dir/capacity-scheduler.xml`, or, when the default directory is
/// absent, the example shipped in the binary. Returns a line saying which.
fn queue_setup(conf_dir: &Path, cluster: Resource) -> Result<(QueueSetup, String), EmulatorError> {
    let (loaded, source) = if conf_dir == Path::new(DEFAULT_CONF_DIR) && !conf_dir.exists() {
        (
            config::load_embedded_default(),
            "the example capacity-scheduler.xml built into preemptor".to_string(),
        )
    } else {
        (
            config::load_dir(conf_dir),
            conf_dir
                .join("capacity-scheduler.xml")
                .display()
                .to_string(),
        )
    };
    let loaded = loaded.map_err(|e| EmulatorError::Config(format!("{source}: {e}")))?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let leaves: Vec<String> = loaded
        .queues
        .leaves()
        .map(|q| format!("{} {}", q.path, q.capacities.capacity))
        .collect();
    Ok((
        QueueSetup::from_config(&loaded.queues, cluster),
        format!("{} (from {source})", leaves.join(", ")),
    ))
}

/// The `--nodemanager` list as the RM's remote NodeManagers, or `None` without one.
fn remote_nodemanagers(args: &EmulateArgs) -> Result<Option<RemoteNodeManagers>, EmulatorError> {
    if args.nodemanagers.is_empty() {
        return Ok(None);
    }
    let nodes = args
        .nodemanagers
        .iter()
        .map(|s| parse_node_address(s))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(path) = &args.nm_token_file else {
        return Err(EmulatorError::Config(
            "--nodemanager needs --nm-token-file".into(),
        ));
    };
    let token = config::secret::read_token_file(path)
        .map_err(|e| EmulatorError::Config(format!("--nm-token-file: {e}")))?;
    Ok(Some(RemoteNodeManagers {
        nodes,
        token,
        expiry: Duration::from_secs(args.nm_expiry_secs),
        runtime: match args.runtime {
            RuntimeChoice::Simulated => RuntimeKind::Simulated,
            RuntimeChoice::Docker | RuntimeChoice::Auto => RuntimeKind::Docker,
        },
    }))
}

pub async fn run(args: EmulateArgs) -> Result<(), EmulatorError> {
    let remote = remote_nodemanagers(&args)?;
    let nodes = remote
        .as_ref()
        .map_or(usize::from(args.nodes), |r| r.nodes.len());
    let node = Resource::new(args.node_memory_mb, args.node_vcores);
    let cluster = node.scale(nodes as f64);
    let cpu_scale = match args.cpu_scale {
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => {
            return Err(EmulatorError::Config(format!(
                "--cpu-scale must be a positive number, got {s}"
            )));
        }
        None if remote.is_some() => default_cpu_scale(args.node_vcores),
        None => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            cpus as f64 / f64::from(cluster.vcores.max(1))
        }
    };
    let local_nodes = if remote.is_some() { 0 } else { nodes };
    let nm_addrs = (0..local_nodes)
        .map(|i| {
            let port = if args.nm_base_port == 0 {
                Some(0)
            } else {
                u16::try_from(usize::from(args.nm_base_port) + i).ok()
            };
            port.map(|p| SocketAddr::new(args.bind, p)).ok_or_else(|| {
                EmulatorError::Config(format!(
                    "--nm-base-port {} + {nodes} nodes runs past port 65535",
                    args.nm_base_port
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (queues, queue_note) = queue_setup(&args.conf_dir, cluster)?;
    let config = EmulatorConfig {
        rm_addr: SocketAddr::new(args.bind, args.rm_port),
        nm_addrs,
        nm_one_listener: false,
        node_resource: node,
        runtime: args.runtime,
        cpu_scale,
        image: args.image.clone(),
        queues: Some(queues),
        heartbeat_interval: Duration::from_millis(args.heartbeat_ms),
        min_allocation: Resource::new(1024, 1),
        remote,
        spnego: args
            .spnego_keytab
            .as_deref()
            .map(|k| crate::kerberos::SpnegoAcceptor::new(k, SPNEGO_COOKIE_LIFE))
            .transpose()
            .map_err(|e| EmulatorError::Config(format!("--spnego-keytab: {e}")))?
            .map(std::sync::Arc::new),
    };
    let handle = Emulator::start(config).await?;
    println!("Preemptor YARN emulator");
    println!("  ResourceManager  {}", handle.rm_url());
    if let Some(k) = &args.spnego_keytab {
        println!(
            "  authentication   SPNEGO (Kerberos), keys from {}",
            k.display()
        );
    }
    for n in handle.nodes() {
        println!("  NodeManager      {}  (node id {})", n.url, n.id);
    }
    println!("  node resource    {node} x {nodes} = {cluster}");
    match handle.runtime() {
        _ if !args.nodemanagers.is_empty() => println!(
            "  runtime          NodeManager processes (expected to run {}; lost after {} s unreachable)",
            handle.runtime(),
            args.nm_expiry_secs
        ),
        super::runtime::RuntimeKind::Docker => println!(
            "  runtime          docker (1 vcore = {cpu_scale:.3} CPU; containers named container_..., cgroup /hadoop-yarn/<id>)"
        ),
        super::runtime::RuntimeKind::Simulated => println!(
            "  runtime          SIMULATED: containers are in-process timers, no Docker, no cgroups"
        ),
    }
    println!("  queues           {queue_note}");
    let cancel = CancellationToken::new();
    let mix_task = match args.workload_mix {
        WorkloadMix::None => None,
        WorkloadMix::HibenchTpch => {
            println!(
                "  workload mix     hibench-tpch: long jobs fill ~80% (queue long), {} TPC-H queries every {} s (queue short)",
                args.burst_size, args.burst_interval_secs
            );
            let cfg = MixConfig {
                rm_url: handle.rm_url().to_string(),
                cluster,
                long_queue: "long".into(),
                short_queue: "short".into(),
                seed: args.seed,
                burst_interval: Duration::from_secs(args.burst_interval_secs),
                burst_size: args.burst_size,
                short_scale: None,
                long_scale: 1.0,
                long_kernels: super::workload::LONG_KERNELS.to_vec(),
                user: "preemptor".into(),
                tick: Duration::from_secs(2),
                long_fill: super::workload::DEFAULT_LONG_FILL,
                long_job_share: super::workload::DEFAULT_LONG_JOB_SHARE,
            };
            Some(tokio::spawn(mix::run(cfg, cancel.clone())))
        }
    };
    println!("Press Ctrl-C to stop; every container is removed on the way out.");
    let deadline = async {
        if args.duration_secs == 0 {
            std::future::pending::<()>().await
        } else {
            tokio::time::sleep(Duration::from_secs(args.duration_secs)).await
        }
    };
    tokio::pin!(deadline);
    let mut status = tokio::time::interval(Duration::from_secs(10));
    status.tick().await;
    loop {
        tokio::select! {
            r = tokio::signal::ctrl_c() => {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "cannot listen for Ctrl-C");
                }
                break;
            }
            _ = &mut deadline => break,
            _ = status.tick() => {
                let line = handle.inspect(|s| {
                    let count = |st: YarnApplicationState| s.apps.values().filter(|a| a.state == st).count();
                    let used = Resource::sum(s.nodes.iter().map(|n| &n.used));
                    format!(
                        "apps: {} running, {} accepted, {} finished, {} failed, {} killed; allocated {used} of {}",
                        count(YarnApplicationState::Running),
                        count(YarnApplicationState::Accepted),
                        count(YarnApplicationState::Finished),
                        count(YarnApplicationState::Failed),
                        count(YarnApplicationState::Killed),
                        s.cluster_total(),
                    )
                });
                println!("{line}");
            }
        }
    }
    println!("Stopping: removing containers...");
    cancel.cancel();
    if let Some(t) = mix_task {
        match t.await {
            Ok(Ok(stats)) => println!(
                "mix: {} long jobs and {} TPC-H queries submitted, {} errors",
                stats.long_submitted, stats.short_submitted, stats.errors
            ),
            Ok(Err(e)) => eprintln!("mix stopped: {e}"),
            Err(e) => eprintln!("mix task failed: {e}"),
        }
    }
    let report = handle.shutdown().await?;
    println!("Removed {} containers.", report.containers_removed);
    Ok(())
}
