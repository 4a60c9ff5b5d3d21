//! A small YARN (RM + NMs) with the real REST API, running real Docker containers.
//!
//! [`Emulator::start`] binds the ResourceManager's and each NodeManager's web service,
//! starts one heartbeat loop per NodeManager (the scheduler allocates on heartbeats, as
//! YARN's does) and returns an [`EmulatorHandle`]; [`EmulatorHandle::shutdown`] stops
//! everything and removes every container it created.

pub mod agents;
pub mod cli;
pub mod docker;
pub mod image;
mod loopback;
pub mod mix;
mod nm_api;
pub mod nodemanager;
pub mod queues;
pub mod remote;
pub mod rest;
mod rm_api;
pub mod runtime;
mod spnego;
pub mod state;
pub mod stats;
pub mod timeouts;
pub mod views;
pub mod workload;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::{ContainerId, NodeId};
use crate::resources::Resource;

use docker::{DockerLimits, DockerRuntime, DockerRuntimeConfig};
use loopback::LoopbackHosts;
use queues::{QueueError, QueueSetup, QueueTree};
use runtime::{
    ContainerRuntime, ContainerSignal, LaunchSpec, RuntimeError, RuntimeKind, SimulatedRuntime,
};
use state::{Launch, RmIdentity, RmState};

/// How often application lifetimes are checked, as YARN's default
/// yarn.resourcemanager.application-timeouts.monitor.interval-ms.
pub const LIFETIME_MONITOR_INTERVAL: Duration = Duration::from_secs(3);

/// With [`EmulatorConfig::nm_one_listener`], NodeManager `i` listens at this address plus
/// `i` (the dry-run agents take 127.1/16).
const FIRST_SHARED_NM: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 2, 0, 1);

/// Which container runtime the NodeManagers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeChoice {
    Docker,
    Simulated,
    /// Docker if a daemon answers, else simulated.
    Auto,
}

#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// The RM web service address (port 0 picks a free port).
    pub rm_addr: SocketAddr,
    /// The NodeManagers' web service addresses, one per node (port 0 picks a free port).
    pub nm_addrs: Vec<SocketAddr>,
    /// Serve every NodeManager's web service from one listening socket instead, the i-th
    /// at `127.2.0.1 + i` on one free port (its node id); only the number of `nm_addrs`
    /// counts. A listener per node costs an open file each: thousands of nodes in one
    /// process (the load bench) come near the open-file limit with them.
    pub nm_one_listener: bool,
    /// Resources each NodeManager offers.
    pub node_resource: Resource,
    pub runtime: RuntimeChoice,
    /// Real CPUs per vcore for the Docker runtime.
    pub cpu_scale: f64,
    /// Workload image for the Docker runtime; built from `preemptor-workload` when `None`.
    pub image: Option<String>,
    /// Queues; `None` uses the capacity-scheduler.xml shipped in `hadoop-conf/`
    /// ([`crate::config::load_embedded_default`]).
    pub queues: Option<QueueSetup>,
    pub heartbeat_interval: Duration,
    /// yarn.scheduler.minimum-allocation-mb / -vcores: the smallest container.
    pub min_allocation: Resource,
    /// NodeManager processes (`preemptor nodemanager`) to use instead of binding
    /// `nm_addrs`; `runtime` and `image` are then theirs to choose and are not used here.
    pub remote: Option<RemoteNodeManagers>,
    /// SPNEGO mode: the RM web service takes only Kerberos callers (`spnego.rs`).
    pub spnego: Option<Arc<crate::kerberos::SpnegoAcceptor>>,
}

/// The RM's side of NodeManagers running as processes of their own.
#[derive(Clone, Debug)]
pub struct RemoteNodeManagers {
    /// `HOST:PORT` of each NodeManager's web service: its node id and address.
    pub nodes: Vec<NodeId>,
    /// Bearer token of their internal API.
    pub token: Vec<u8>,
    /// How long a NodeManager may stay unreachable before its containers are reported
    /// lost (yarn.nm.liveness-monitor.expiry-interval-ms).
    pub expiry: Duration,
    /// What runtime they run, for the RM's reports and task thread counts.
    pub runtime: RuntimeKind,
}

impl EmulatorConfig {
    /// `nodes` NodeManagers of `node_resource` each, every port chosen by the system, on
    /// loopback: what tests and the demo want.
    pub fn local(nodes: usize, node_resource: Resource, runtime: RuntimeChoice) -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        EmulatorConfig {
            rm_addr: any,
            nm_addrs: vec![any; nodes],
            nm_one_listener: false,
            node_resource,
            runtime,
            cpu_scale: 1.0,
            image: None,
            queues: None,
            heartbeat_interval: Duration::from_secs(1),
            min_allocation: Resource::new(1024, 1),
            remote: None,
            spnego: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("invalid emulator configuration: {0}")]
    Config(String),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("queue configuration: {0}")]
    Queues(#[from] QueueError),
    #[error("the Docker runtime was asked for but is unavailable: {0}")]
    DockerUnavailable(RuntimeError),
    #[error("container runtime: {0}")]
    Runtime(#[from] RuntimeError),
}

pub(crate) use crate::clock::unix_ms as now_ms;

/// The RM start time, made unique within the process: container names embed it, and
/// Docker names must not collide between emulators started in the same millisecond.
fn unique_cluster_timestamp() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = now_ms();
    let mut prev = LAST.load(Ordering::SeqCst);
    loop {
        let next = now.max(prev + 1);
        match LAST.compare_exchange(prev, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(p) => prev = p,
        }
    }
}

/// What the servers, heartbeats and container tasks share.
pub(crate) struct Cluster {
    state: Mutex<RmState>,
    runtime: Arc<dyn ContainerRuntime>,
    /// The same runtime when it is the simulated one, for speed changes.
    simulated: Option<SimulatedRuntime>,
    tracker: TaskTracker,
    cpu_scale: f64,
    /// Set at shutdown: nothing new is launched.
    closing: AtomicBool,
}

impl Cluster {
    pub(crate) fn lock(&self) -> MutexGuard<'_, RmState> {
        // A panic elsewhere must not take the whole emulator down with it.
        crate::sync::lock(&self.state)
    }

    pub(crate) fn runtime_kind(&self) -> RuntimeKind {
        self.runtime.kind()
    }

    fn heartbeat(self: &Arc<Self>, node: usize) {
        let launches = self.lock().heartbeat(node, now_ms());
        for l in launches {
            self.launch(l);
        }
    }

    /// Kills the applications whose lifetime has ended.
    fn expire_lifetimes(self: &Arc<Self>) {
        let to_stop = self.lock().expire_lifetimes(now_ms());
        if !to_stop.is_empty() {
            tracing::info!(
                containers = to_stop.len(),
                "stopping applications past their lifetime"
            );
        }
        self.stop(to_stop, ContainerSignal::ForcefulShutdown);
    }

    fn launch(self: &Arc<Self>, l: Launch) {
        if self.closing.load(Ordering::SeqCst) {
            self.lock().container_completed(
                l.container,
                state::exit::ABORTED,
                "the emulator is shutting down".into(),
                now_ms(),
            );
            return;
        }
        let threads = match self.runtime.kind() {
            RuntimeKind::Docker => {
                DockerLimits::for_allocation(l.resource, self.cpu_scale).threads()
            }
            RuntimeKind::Simulated => l.resource.vcores.max(1),
        };
        let node_id = self.lock().nodes[l.node].id.clone();
        let spec = LaunchSpec {
            container: l.container,
            node: node_id,
            resource: l.resource,
            command: l.spec.command(threads),
            simulated_duration_ms: l.spec.simulated_duration_ms(),
            user: l.user.clone(),
        };
        let cluster = self.clone();
        self.tracker.spawn(async move {
            let cid = spec.container;
            tracing::info!(container = %cid, node = %spec.node, resource = %spec.resource,
                runtime = %cluster.runtime.kind(), command = ?spec.command, "launching container");
            let events: runtime::Events = Arc::new(Tracked {
                cluster: cluster.clone(),
                container: cid,
            });
            let exit = cluster.runtime.run(spec, events).await;
            tracing::info!(container = %cid, exit_status = exit.exit_status,
                diagnostics = %exit.diagnostics, runtime = %cluster.runtime.kind(), "container finished");
            let to_stop = cluster
                .lock()
                .container_completed(cid, exit.exit_status, exit.diagnostics, now_ms());
            cluster.stop(to_stop, ContainerSignal::ForcefulShutdown);
        });
    }

    /// Signals containers, retrying while one is allocated but not started yet, until it
    /// has exited.
    pub(crate) fn stop(self: &Arc<Self>, ids: Vec<ContainerId>, signal: ContainerSignal) {
        for id in ids {
            let cluster = self.clone();
            self.tracker.spawn(async move {
                for _ in 0..150 {
                    match cluster.runtime.signal(id, signal).await {
                        Ok(()) => return,
                        Err(RuntimeError::NotRunning(_)) => {
                            let live = cluster
                                .lock()
                                .containers
                                .get(&id)
                                .is_some_and(|c| c.is_live());
                            if !live {
                                return;
                            }
                        }
                        Err(e) => {
                            tracing::warn!(container = %id, error = %e, "signalling container")
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                tracing::warn!(container = %id, "gave up stopping container");
            });
        }
    }

    pub(crate) async fn signal(
        &self,
        id: ContainerId,
        signal: ContainerSignal,
    ) -> Result<(), RuntimeError> {
        self.runtime.signal(id, signal).await
    }
}

/// Feeds a runtime's reports about one container into the RM state.
struct Tracked {
    cluster: Arc<Cluster>,
    container: ContainerId,
}

impl runtime::ContainerEvents for Tracked {
    fn started(&self) {
        self.cluster
            .lock()
            .container_started(self.container, now_ms());
    }

    fn progress(&self, fraction: f64) {
        self.cluster
            .lock()
            .container_progress(self.container, fraction);
    }
}

/// One NodeManager of a running emulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeManagerInfo {
    pub id: NodeId,
    /// `http://host:port` of its web service.
    pub url: String,
}

pub struct Emulator;

/// A running emulator. Dropping it without [`EmulatorHandle::shutdown`] stops the
/// servers and heartbeats but cannot wait for container cleanup.
pub struct EmulatorHandle {
    rm_url: String,
    instance: String,
    nodes: Vec<NodeManagerInfo>,
    cluster: Arc<Cluster>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

/// What a shutdown removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    pub containers_removed: usize,
}

/// A simulated runtime both as the cluster's runtime and as itself.
fn simulated() -> (Arc<dyn ContainerRuntime>, Option<SimulatedRuntime>) {
    let rt = SimulatedRuntime::new();
    (Arc::new(rt.clone()), Some(rt))
}

async fn choose_runtime(
    choice: RuntimeChoice,
    image: &Option<String>,
    cpu_scale: f64,
    instance: &str,
) -> Result<(Arc<dyn ContainerRuntime>, Option<SimulatedRuntime>), EmulatorError> {
    let docker_config = || DockerRuntimeConfig {
        image: image.clone(),
        cpu_scale,
        instance: instance.to_string(),
    };
    match choice {
        RuntimeChoice::Simulated => Ok(simulated()),
        RuntimeChoice::Docker => {
            let docker = docker::connect()
                .await
                .map_err(EmulatorError::DockerUnavailable)?;
            Ok((
                Arc::new(DockerRuntime::start(docker, docker_config()).await?),
                None,
            ))
        }
        RuntimeChoice::Auto => {
            match tokio::time::timeout(Duration::from_secs(5), docker::connect()).await {
                Ok(Ok(docker)) => {
                    tracing::info!(
                        "runtime auto: a Docker daemon answered, using the Docker runtime"
                    );
                    Ok((
                        Arc::new(DockerRuntime::start(docker, docker_config()).await?),
                        None,
                    ))
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "runtime auto: no Docker daemon, using the SIMULATED runtime (no real containers)");
                    Ok(simulated())
                }
                Err(_) => {
                    tracing::warn!(
                        "runtime auto: Docker did not answer within 5 s, using the SIMULATED runtime (no real containers)"
                    );
                    Ok(simulated())
                }
            }
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, EmulatorError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| EmulatorError::Bind { addr, source })
}

fn local_addr(l: &tokio::net::TcpListener, asked: SocketAddr) -> Result<SocketAddr, EmulatorError> {
    l.local_addr().map_err(|source| EmulatorError::Bind {
        addr: asked,
        source,
    })
}

impl Emulator {
    pub async fn start(config: EmulatorConfig) -> Result<EmulatorHandle, EmulatorError> {
        let node_count = match &config.remote {
            Some(r) => r.nodes.len(),
            None => config.nm_addrs.len(),
        };
        if node_count == 0 {
            return Err(EmulatorError::Config(
                "at least one NodeManager is needed".into(),
            ));
        }
        if let Some(r) = &config.remote {
            let mut seen = std::collections::HashSet::new();
            if let Some(dup) = r.nodes.iter().find(|n| !seen.insert(*n)) {
                return Err(EmulatorError::Config(format!(
                    "NodeManager {dup} is given twice"
                )));
            }
            if r.token.is_empty() {
                return Err(EmulatorError::Config(
                    "the NodeManagers' bearer token is empty".into(),
                ));
            }
        }
        if config.node_resource.memory_mb == 0 || config.node_resource.vcores == 0 {
            return Err(EmulatorError::Config(format!(
                "node resource {} must have memory and vcores",
                config.node_resource
            )));
        }
        if !(config.cpu_scale.is_finite() && config.cpu_scale > 0.0) {
            return Err(EmulatorError::Config(format!(
                "cpu scale must be a positive number, got {}",
                config.cpu_scale
            )));
        }
        if config.heartbeat_interval.is_zero() {
            return Err(EmulatorError::Config(
                "heartbeat interval must be positive".into(),
            ));
        }
        let cluster_resource = config.node_resource.scale(node_count as f64);
        let setup = match config.queues.clone() {
            Some(s) => s,
            None => {
                let loaded = crate::config::load_embedded_default().map_err(|e| {
                    EmulatorError::Config(format!("the embedded capacity-scheduler.xml: {e}"))
                })?;
                QueueSetup::from_config(&loaded.queues, cluster_resource)
            }
        };
        let tree = QueueTree::build(&setup)?;
        // Bind everything before touching Docker, so a busy port fails fast.
        let rm_listener = bind(config.rm_addr).await?;
        let rm_local = local_addr(&rm_listener, config.rm_addr)?;
        let mut nm_listeners = Vec::with_capacity(config.nm_addrs.len());
        let local_nms: &[SocketAddr] = if config.remote.is_some() {
            &[]
        } else {
            &config.nm_addrs
        };
        let nm_shared = if config.nm_one_listener && !local_nms.is_empty() {
            Some(LoopbackHosts::bind(FIRST_SHARED_NM, local_nms.len())?)
        } else {
            None
        };
        let mut nm_locals = Vec::with_capacity(local_nms.len());
        for (i, &a) in local_nms.iter().enumerate() {
            match &nm_shared {
                Some(hosts) => nm_locals.push(hosts.addr(i).ok_or_else(|| {
                    EmulatorError::Config(format!("no loopback address for NodeManager {i}"))
                })?),
                None => {
                    let l = bind(a).await?;
                    nm_locals.push(local_addr(&l, a)?);
                    nm_listeners.push(l);
                }
            }
        }
        let cluster_timestamp = unique_cluster_timestamp();
        let instance = format!("{}-{cluster_timestamp}", std::process::id());
        let (runtime, simulated) = match &config.remote {
            Some(r) => (
                Arc::new(remote::RemoteRuntime::new(r)?) as Arc<dyn ContainerRuntime>,
                None,
            ),
            None => {
                choose_runtime(config.runtime, &config.image, config.cpu_scale, &instance).await?
            }
        };
        let mut state = RmState::new(
            RmIdentity {
                cluster_timestamp,
                runtime: runtime.kind(),
                rm_address: rm_local.to_string(),
                min_allocation: config.min_allocation.component_min(config.node_resource),
                max_allocation: config.node_resource,
            },
            tree,
        );
        let node_addrs: Vec<String> = match &config.remote {
            Some(r) => r.nodes.iter().map(|n| n.to_string()).collect(),
            None => nm_locals.iter().map(|l| l.to_string()).collect(),
        };
        let mut nodes = Vec::new();
        for local in &node_addrs {
            let id = NodeId::new(local.clone());
            state.add_node(
                id.clone(),
                local.to_string(),
                config.node_resource,
                cluster_timestamp,
            );
            nodes.push(NodeManagerInfo {
                id,
                url: format!("http://{local}"),
            });
        }
        let tracker = TaskTracker::new();
        let cancel = CancellationToken::new();
        let cluster = Arc::new(Cluster {
            state: Mutex::new(state),
            runtime,
            simulated,
            tracker: tracker.clone(),
            cpu_scale: config.cpu_scale,
            closing: AtomicBool::new(false),
        });
        let rm_router = match &config.spnego {
            Some(acceptor) => rm_api::router(cluster.clone()).layer(
                axum::middleware::from_fn_with_state(acceptor.clone(), spnego::guard),
            ),
            None => rm_api::router(cluster.clone()),
        };
        let c = cancel.clone();
        tracker.spawn(async move {
            if let Err(e) = axum::serve(rm_listener, rm_router)
                .with_graceful_shutdown(c.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "ResourceManager web service stopped");
            }
        });
        let nm_router = |i| {
            nm_api::router(Arc::new(nm_api::InProcessNode {
                cluster: cluster.clone(),
                index: i,
            }))
        };
        if let Some(hosts) = nm_shared {
            let routers = (0..nm_locals.len()).map(nm_router).collect();
            let c = cancel.clone();
            tracker.spawn(async move {
                if let Err(e) = hosts.serve(routers, c.cancelled_owned()).await {
                    tracing::error!(error = %e, "NodeManager web services stopped");
                }
            });
        }
        for (i, listener) in nm_listeners.into_iter().enumerate() {
            let router = nm_router(i);
            let c = cancel.clone();
            tracker.spawn(async move {
                if let Err(e) = axum::serve(listener, router)
                    .with_graceful_shutdown(c.cancelled_owned())
                    .await
                {
                    tracing::error!(error = %e, node = i, "NodeManager web service stopped");
                }
            });
        }
        // The RM heartbeats for every node, local or remote: allocation happens there.
        let n = node_addrs.len() as u32;
        for i in 0..node_addrs.len() {
            let interval = config.heartbeat_interval;
            let c = cancel.clone();
            let cl = cluster.clone();
            tracker.spawn(async move {
                // Stagger the heartbeats as real NodeManagers are.
                let offset = interval.mul_f64(i as f64 / n as f64);
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tokio::time::sleep(offset) => {}
                }
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = c.cancelled() => return,
                        _ = tick.tick() => cl.heartbeat(i),
                    }
                }
            });
        }
        // yarn.resourcemanager.application-timeouts.monitor.interval-ms.
        let c = cancel.clone();
        let cl = cluster.clone();
        tracker.spawn(async move {
            let mut tick = tokio::time::interval(LIFETIME_MONITOR_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => cl.expire_lifetimes(),
                }
            }
        });
        tracing::info!(rm = %rm_local, nodes = nodes.len(), runtime = %cluster.runtime.kind(),
            "emulated YARN started");
        Ok(EmulatorHandle {
            rm_url: format!("http://{rm_local}"),
            instance,
            nodes,
            cluster,
            cancel,
            tracker,
        })
    }
}

impl EmulatorHandle {
    /// `http://host:port` of the ResourceManager's web service.
    pub fn rm_url(&self) -> &str {
        &self.rm_url
    }

    /// Unique id of this emulator; its Docker containers carry it in
    /// [`docker::INSTANCE_LABEL`], so a cleanup can find them even without the handle.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn nodes(&self) -> &[NodeManagerInfo] {
        &self.nodes
    }

    pub fn runtime(&self) -> RuntimeKind {
        self.cluster.runtime_kind()
    }

    /// The simulated runtime, to change its containers' speed; `None` with Docker.
    pub fn simulated_runtime(&self) -> Option<SimulatedRuntime> {
        self.cluster.simulated.clone()
    }

    pub fn cluster_timestamp(&self) -> u64 {
        self.cluster.lock().identity.cluster_timestamp
    }

    /// Reads the RM's state (for tests and the demo: compare what REST says with what
    /// the emulator holds).
    pub fn inspect<R>(&self, f: impl FnOnce(&RmState) -> R) -> R {
        f(&self.cluster.lock())
    }

    /// Stops the web services and heartbeats, then removes every container (and image)
    /// the runtime created, and waits for the container tasks to finish.
    pub async fn shutdown(self) -> Result<ShutdownReport, EmulatorError> {
        self.cancel.cancel();
        self.cluster.closing.store(true, Ordering::SeqCst);
        let removed = self.cluster.runtime.shutdown().await?;
        self.tracker.close();
        if tokio::time::timeout(Duration::from_secs(60), self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some emulator tasks did not finish within 60 s of shutdown");
        }
        // Anything started after the first sweep (a launch racing the shutdown).
        let late = self.cluster.runtime.shutdown().await?;
        Ok(ShutdownReport {
            containers_removed: removed + late,
        })
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.cluster.closing.store(true, Ordering::SeqCst);
    }
}
