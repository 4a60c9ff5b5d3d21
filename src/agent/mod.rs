//! The node agent: finds YARN's containers and changes their cgroup limits.
//!
//! It is the only part of Preemptor that touches containers. Layout:
//! - [`api`]: request/response bodies shared by server and [`client`];
//! - [`docker`]: the Docker Engine API (bollard); [`host`]: containers without Docker
//!   (YARN's own cgroups, or plain processes); [`cgroup`]: cgroup v1/v2 discovery and
//!   reading; [`limits`]: YARN units to real limits; [`writer`]: the one handle that
//!   writes limits;
//! - [`enforcer`]: suspend / shrink / resume / kill; [`store`]: durable record of changed
//!   containers; [`lease`]: no controller, no throttling;
//! - [`server`]: the HTTP API; [`metrics`]: OpenMetrics text; [`cli`]: `preemptor agent`.
//!
//! See docs/agent.md for the operator's view.

pub mod api;
pub mod cgroup;
pub mod cli;
pub mod client;
pub mod docker;
pub mod enforcer;
pub mod host;
pub mod lease;
pub mod limits;
pub mod metrics;
pub mod nodemanager;
pub mod reclaim;
pub mod server;
pub mod store;
pub mod writer;

#[cfg(test)]
mod fuzz_tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::resources::Limits;
use enforcer::{Enforcer, EnforcerSettings, Runtime};
use writer::WritePath;

pub use client::AgentClient;

/// How often the lease is checked.
const LEASE_TICK: Duration = Duration::from_millis(200);
/// How often the host backends look for ended containers.
const HOST_TICK: Duration = Duration::from_secs(1);

/// How the agent finds a YARN container and its cgroup (`--containers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ContainerBackend {
    /// Docker if its socket exists, else YARN's cgroup hierarchy if it exists, else
    /// plain processes when NodeManager local dirs are given.
    Auto,
    /// Docker containers named after their YARN container id (the Docker runtime).
    Docker,
    /// The cgroup the LinuxContainerExecutor gives each container,
    /// `<mount>/<hierarchy>/<container_id>`; written directly.
    YarnCgroups,
    /// Plain processes (DefaultContainerExecutor), found from the NodeManager's pid files
    /// and moved into a cgroup of the agent's own per container.
    Process,
}

impl ContainerBackend {
    pub fn name(&self) -> &'static str {
        match self {
            ContainerBackend::Auto => "auto",
            ContainerBackend::Docker => "docker",
            ContainerBackend::YarnCgroups => "yarn-cgroups",
            ContainerBackend::Process => "process",
        }
    }
}

/// YARN's default `yarn.nodemanager.linux-container-executor.cgroups.hierarchy`.
pub const YARN_CGROUP_HIERARCHY: &str = "/hadoop-yarn";
/// The parent of the process backend's per-container cgroups.
pub const AGENT_CGROUP_PARENT: &str = "/preemptor";

pub(crate) use crate::clock::unix_ms;

/// Everything the agent needs to run, validated. Built from the command line by
/// [`cli::AgentArgs::to_config`], or directly by tests and the demo.
#[derive(Clone)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    pub token: Vec<u8>,
    pub state_dir: PathBuf,
    pub docker_socket: PathBuf,
    pub path: WritePath,
    pub dry_run: bool,
    pub lease_timeout: Duration,
    pub swap_threshold_pages_per_sec: u64,
    pub swap_check_interval: Duration,
    pub max_body_bytes: usize,
    pub floor: Limits,
    pub throttle_wait_max: Duration,
    pub memory_timeout: Duration,
    /// Page a container's memory out (process_madvise) before lowering its limit.
    pub proactive_reclaim: bool,
    /// Serve HTTPS with this configuration ([`crate::tls::server_config`]); plain HTTP
    /// when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The NodeManager whose containers are this node's (`--nodemanager`); without it,
    /// every YARN container on the Docker daemon is.
    pub nodemanager: Option<String>,
    /// How an `https://` NodeManager is verified (`--nodemanager-ca-file`).
    pub nodemanager_tls: crate::config::settings::YarnTls,
    /// SPNEGO to a Kerberized NodeManager (`--nodemanager-principal`, `--nodemanager-keytab`).
    pub nodemanager_kerberos: Option<crate::config::settings::KerberosSettings>,
    pub containers: ContainerBackend,
    /// The NodeManager's `yarn.nodemanager.local-dirs` (process backend).
    pub nm_local_dirs: Vec<PathBuf>,
    /// YARN's cgroup hierarchy (yarn-cgroups backend).
    pub yarn_cgroup_hierarchy: String,
    /// Parent of the process backend's cgroups.
    pub agent_cgroup_parent: String,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("listen", &self.listen)
            .field("token", &"<redacted>")
            .field("state_dir", &self.state_dir)
            .field("docker_socket", &self.docker_socket)
            .field("path", &self.path)
            .field("dry_run", &self.dry_run)
            .field("lease_timeout", &self.lease_timeout)
            .field("tls", &self.tls.is_some())
            .field("nodemanager", &self.nodemanager)
            .field("containers", &self.containers)
            .finish_non_exhaustive()
    }
}

impl AgentConfig {
    /// Defaults for everything but the token and the state directory.
    pub fn new(token: Vec<u8>, state_dir: PathBuf) -> AgentConfig {
        AgentConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8049)),
            token,
            state_dir,
            docker_socket: PathBuf::from("/var/run/docker.sock"),
            path: WritePath::Docker,
            dry_run: false,
            lease_timeout: Duration::from_secs(30),
            swap_threshold_pages_per_sec: 256,
            swap_check_interval: Duration::from_secs(1),
            max_body_bytes: 64 * 1024,
            floor: Limits::MIN_FOOTPRINT,
            throttle_wait_max: Duration::from_secs(1),
            memory_timeout: Duration::from_secs(60),
            proactive_reclaim: true,
            tls: None,
            nodemanager: None,
            nodemanager_tls: Default::default(),
            nodemanager_kerberos: None,
            containers: ContainerBackend::Docker,
            nm_local_dirs: Vec::new(),
            yarn_cgroup_hierarchy: YARN_CGROUP_HIERARCHY.to_string(),
            agent_cgroup_parent: AGENT_CGROUP_PARENT.to_string(),
        }
    }
}

/// How long a NodeManager has to list its containers.
const NODEMANAGER_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    NodeManager(#[from] nodemanager::NodeManagerError),
    #[error("the agent token must not be empty")]
    EmptyToken,
    #[error(transparent)]
    Docker(#[from] docker::DockerError),
    #[error("--containers {backend}: {error}")]
    Host {
        backend: &'static str,
        error: host::HostError,
    },
    #[error("--containers process needs --nodemanager: only containers it lists are touched")]
    ProcessNeedsNodeManager,
    #[error(
        "--containers auto: no Docker socket at {docker}, no YARN cgroup hierarchy {hierarchy} and no --nm-local-dirs; choose a backend with --containers"
    )]
    NoBackend { docker: String, hierarchy: String },
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    #[error("no cgroup v1 cpu+memory hierarchy or cgroup v2 mount found in /proc/self/mountinfo")]
    NoCgroups,
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("recovering state: {0}")]
    Reconcile(enforcer::Error),
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// A started agent. Dropping it does not stop it; call [`RunningAgent::shutdown`].
pub struct RunningAgent {
    addr: SocketAddr,
    tls: bool,
    cancel: CancellationToken,
    tracker: TaskTracker,
    enforcer: Arc<Enforcer>,
}

impl RunningAgent {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Stops serving and the background tasks. Changed containers stay as they are and
    /// recorded; a restarted agent resumes them when its lease expires.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        self.enforcer.close_store().await;
    }

    /// The token that stops the agent; its `cancelled()` resolves once something (a
    /// signal handler, the HTTP server failing) asked the agent to stop.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

/// Connects to Docker, recovers the state store, binds and starts serving.
pub async fn start(config: AgentConfig) -> Result<RunningAgent, StartError> {
    if config.token.is_empty() {
        return Err(StartError::EmptyToken);
    }
    let metrics = Arc::new(metrics::Metrics::new());
    let mut path = config.path;
    let (runtime, store) = if config.dry_run {
        tracing::warn!("dry-run: actions are recorded and reported, no container is touched");
        (Runtime::DryRun, None)
    } else {
        let mounts = cgroup::CgroupMounts::read_self()?;
        let version = mounts.version().ok_or(StartError::NoCgroups)?;
        let runtime = match choose_backend(&config, &mounts)? {
            b @ (ContainerBackend::YarnCgroups | ContainerBackend::Process) => {
                let (kind, parent) = if b == ContainerBackend::Process {
                    if config.nodemanager.is_none() {
                        return Err(StartError::ProcessNeedsNodeManager);
                    }
                    (host::HostBackend::Process, &config.agent_cgroup_parent)
                } else {
                    (
                        host::HostBackend::YarnCgroups,
                        &config.yarn_cgroup_hierarchy,
                    )
                };
                let host =
                    host::HostContainers::new(kind, mounts, parent, config.nm_local_dirs.clone())
                        .map_err(|error| StartError::Host {
                        backend: b.name(),
                        error,
                    })?;
                if path != WritePath::Direct {
                    tracing::info!(
                        backend = b.name(),
                        "no Docker: limits are written to the cgroup files directly"
                    );
                    path = WritePath::Direct;
                }
                tracing::info!(cgroup = ?version, backend = b.name(), cgroup_parent = %parent, local_dirs = ?config.nm_local_dirs, "containers without Docker");
                Runtime::Host(host)
            }
            _ => {
                let docker = docker::DockerClient::connect(&config.docker_socket).await?;
                tracing::info!(cgroup = ?version, driver = ?docker.driver, swap_accounting = ?docker.swap_limit, "connected to Docker");
                if docker.swap_limit == Some(false) {
                    tracing::warn!(
                        "the kernel does not account swap (no memory.memsw.*): Docker's MemorySwap is not enforced, suspended containers may use unlimited swap"
                    );
                }
                Runtime::Live { docker, mounts }
            }
        };
        let (store, records, report) = store::StateStore::open(&config.state_dir)?;
        for d in &report.damaged {
            tracing::error!(damage = %d, "state file damaged; using the newest intact generation");
        }
        tracing::info!(dir = %config.state_dir.display(), generation = report.generation, source = %report.source, containers = records.len(), "state store opened");
        (runtime, Some((store, report, records)))
    };
    let settings = EnforcerSettings {
        path,
        floor: config.floor,
        throttle_wait_max: config.throttle_wait_max,
        memory_timeout: config.memory_timeout,
        proactive_reclaim: config.proactive_reclaim,
        swap_threshold_pages_per_sec: config.swap_threshold_pages_per_sec,
        lease_timeout: config.lease_timeout,
    };
    let (store, records) = match store {
        Some((s, report, records)) => (Some((s, report)), records),
        None => (None, Vec::new()),
    };
    let mut enforcer = Enforcer::new(runtime, settings, store, metrics, Instant::now());
    if let Some(url) = &config.nodemanager {
        let nm = nodemanager::NodeManager::new(url, NODEMANAGER_TIMEOUT, &config.nodemanager_tls)?
            .with_kerberos(config.nodemanager_kerberos.as_ref())?;
        tracing::info!(
            nodemanager = nm.url(),
            "only containers this NodeManager lists are changed"
        );
        enforcer = enforcer.with_nodemanager(nm);
    }
    let enforcer = Arc::new(enforcer);
    let (kept, dropped) = enforcer
        .reconcile(records)
        .await
        .map_err(StartError::Reconcile)?;
    if kept + dropped > 0 {
        tracing::info!(
            kept,
            dropped,
            lease_timeout_ms = config.lease_timeout.as_millis() as u64,
            "reconciled recovered containers with Docker; they are resumed when the lease expires unless a controller renews it"
        );
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| StartError::Bind {
            addr: config.listen,
            error,
        })?;
    let addr = listener.local_addr().map_err(|error| StartError::Bind {
        addr: config.listen,
        error,
    })?;
    let cancel = CancellationToken::new();
    let tracker = TaskTracker::new();
    let state = Arc::new(server::AppState {
        enforcer: enforcer.clone(),
        token: config.token.clone(),
        shutdown: cancel.clone(),
    });
    let app = server::router(state, config.max_body_bytes);
    let c = cancel.clone();
    let tls = config.tls.is_some();
    match config.tls.clone() {
        None => tracker.spawn(async move {
            let serve =
                axum::serve(listener, app).with_graceful_shutdown(c.clone().cancelled_owned());
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "HTTP server stopped");
                c.cancel();
            }
        }),
        Some(tls) => {
            let listener =
                crate::tls::TlsListener::new(listener, tls).map_err(|error| StartError::Bind {
                    addr: config.listen,
                    error,
                })?;
            tracker.spawn(async move {
                let serve =
                    axum::serve(listener, app).with_graceful_shutdown(c.clone().cancelled_owned());
                if let Err(e) = serve.await {
                    tracing::error!(error = %e, "HTTPS server stopped");
                    c.cancel();
                }
            })
        }
    };

    let (e, c) = (enforcer.clone(), cancel.clone());
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(LEASE_TICK);
        let mut retry_at = Instant::now();
        loop {
            tokio::select! {
                _ = c.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            if now < retry_at {
                continue;
            }
            if e.on_lease_tick(now).await && !e.changed_containers().is_empty() {
                // Some resumes failed; do not hammer Docker.
                retry_at = Instant::now() + Duration::from_secs(5);
            }
        }
    });

    if enforcer.host().is_some() {
        let (e, c) = (enforcer.clone(), cancel.clone());
        tracker.spawn(async move {
            let mut tick = tokio::time::interval(HOST_TICK);
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => e.on_host_tick().await,
                }
            }
        });
    }
    if enforcer.is_live() {
        let (e, c) = (enforcer.clone(), cancel.clone());
        let interval = config.swap_check_interval;
        tracker.spawn(async move {
            let mut tick = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => e.on_swap_tick(Instant::now()).await,
                }
            }
        });
    }
    if let Some(docker) = enforcer.docker_client() {
        let (e, c) = (enforcer.clone(), cancel.clone());
        tracker.spawn(async move { watch_docker_events(docker, e, c).await });
    }
    tracing::info!(%addr, tls, path = path.name(), dry_run = config.dry_run, "agent listening");
    Ok(RunningAgent {
        addr,
        tls,
        cancel,
        tracker,
        enforcer,
    })
}

/// `--containers auto` resolved: the first backend whose runtime is there.
fn choose_backend(
    config: &AgentConfig,
    mounts: &cgroup::CgroupMounts,
) -> Result<ContainerBackend, StartError> {
    if config.containers != ContainerBackend::Auto {
        return Ok(config.containers);
    }
    if config.docker_socket.exists() {
        return Ok(ContainerBackend::Docker);
    }
    if mounts
        .dirs_at(&config.yarn_cgroup_hierarchy)
        .is_ok_and(|d| d.cpu.is_dir())
    {
        return Ok(ContainerBackend::YarnCgroups);
    }
    if !config.nm_local_dirs.is_empty() {
        return Ok(ContainerBackend::Process);
    }
    Err(StartError::NoBackend {
        docker: config.docker_socket.display().to_string(),
        hierarchy: config.yarn_cgroup_hierarchy.clone(),
    })
}

async fn watch_docker_events(
    docker: docker::DockerClient,
    enforcer: Arc<Enforcer>,
    cancel: CancellationToken,
) {
    let mut since: Option<i64> = None;
    let mut delays = docker::reconnect_delays();
    loop {
        let stream = docker.events(since);
        futures_util::pin_mut!(stream);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                item = stream.next() => match item {
                    Some(Ok(ev)) => {
                        delays = docker::reconnect_delays();
                        since = Some((ev.time_ms / 1000) as i64);
                        enforcer.on_docker_event(ev).await;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "Docker event stream broke; reconnecting");
                        break;
                    }
                    None => break,
                },
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delays.next().unwrap_or(Duration::from_secs(8))) => {}
        }
    }
}
