//! `preemptor nodemanager`: one emulated NodeManager as a process of its own.
//!
//! It runs containers through the same [`ContainerRuntime`]s as the in-process emulator,
//! keeps its own table of them, and serves YARN's NM REST API from that table, so it
//! keeps answering while the RM is down. The RM (`preemptor emulate --nodemanager`)
//! drives it through an internal API under `/internal/v1` that wants a bearer token:
//!
//! - `POST /internal/v1/containers` with a [`LaunchSpec`] launches a container (201; 200
//!   if it was already launched, so the RM may retry);
//! - `POST /internal/v1/containers/{id}/signal/{command}` signals it (command as the RM's
//!   signal API: `OUTPUT_THREAD_DUMP`, `GRACEFUL_SHUTDOWN`, `FORCEFUL_SHUTDOWN`);
//! - `GET /internal/v1/containers/{id}/events` streams [`NmEvent`]s as newline-delimited
//!   JSON: first the container's current state, then each change, ending after `exit`.
//!   The RM re-attaches after a broken connection and gets the state again.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::{ContainerId, NodeId};
use crate::resources::Resource;
use crate::yarn::dto::{
    NmAppsResponse, NmContainerResponse, NmContainersResponse, NmNodeInfoResponse,
};

use super::nm_api::{self, NodeSource};
use super::runtime::{
    ContainerEvents, ContainerRuntime, ContainerSignal, ExitInfo, LaunchSpec, RuntimeError,
    RuntimeKind,
};
use super::state::{RmContainerState, RmError};
use super::views::{self, NmContainer, NmNode};
use super::{
    EmulatorError, RuntimeChoice, ShutdownReport, bind, choose_runtime, local_addr, now_ms,
};

/// Largest internal API request body (a launch spec is well under 1 KiB).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// How often an event stream says `alive` when nothing else happens, so that the RM
/// notices a stalled NodeManager (see [`STREAM_IDLE_TIMEOUT`]).
pub const KEEPALIVE: Duration = Duration::from_secs(1);
/// The RM treats an event stream silent this long as broken and re-attaches.
pub const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// Finished containers are dropped from the table this long after they exited
/// (yarn.nodemanager.duration-to-track-stopped-containers, 10 min, as long as the RM's
/// default NodeManager expiry): a re-attaching RM still gets the exit.
const FORGET_FINISHED_AFTER: Duration = Duration::from_secs(600);

/// One line of a container's event stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum NmEvent {
    Started,
    Progress {
        fraction: f64,
    },
    Exit {
        exit_status: i32,
        diagnostics: String,
    },
    /// Nothing changed; sent every [`KEEPALIVE`].
    Alive,
}

/// A container's state as the stream replays it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Status {
    started: bool,
    progress: f64,
    exit: Option<ExitInfo>,
}

struct Entry {
    resource: Resource,
    user: String,
    finished_ms: Option<u64>,
    status: Arc<watch::Sender<Status>>,
}

impl Entry {
    fn state(&self) -> (RmContainerState, Option<ExitInfo>) {
        let s = self.status.borrow();
        let state = match (&s.exit, s.started) {
            (Some(_), _) => RmContainerState::Complete,
            (None, true) => RmContainerState::Running,
            (None, false) => RmContainerState::Allocated,
        };
        (state, s.exit.clone())
    }
}

#[derive(Clone, Debug)]
pub struct NodeManagerConfig {
    /// Web service address (port 0 picks a free port).
    pub listen: SocketAddr,
    /// `None`: `<hostname>:<bound port>`.
    pub node_id: Option<NodeId>,
    pub resource: Resource,
    pub runtime: RuntimeChoice,
    /// Real CPUs per vcore for the Docker runtime.
    pub cpu_scale: f64,
    /// Workload image; built from `preemptor-workload` when `None`.
    pub image: Option<String>,
    /// Value of [`super::docker::INSTANCE_LABEL`] on its containers; `None` makes one up.
    pub instance: Option<String>,
    /// Bearer token the RM must present on the internal API.
    pub token: Vec<u8>,
}

struct Shared {
    node_id: NodeId,
    http_address: String,
    resource: Resource,
    started_ms: u64,
    kind: RuntimeKind,
    runtime: Arc<dyn ContainerRuntime>,
    token: Vec<u8>,
    containers: Mutex<BTreeMap<ContainerId, Entry>>,
    tracker: TaskTracker,
    cancel: CancellationToken,
    closing: AtomicBool,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, BTreeMap<ContainerId, Entry>> {
        crate::sync::lock(&self.containers)
    }

    fn node(&self) -> NmNode<'_> {
        NmNode {
            id: &self.node_id,
            http_address: &self.http_address,
            capacity: self.resource,
            started_ms: self.started_ms,
            runtime: self.kind,
        }
    }

    /// Runs `f` on the tracked containers, as the NM pages see them.
    fn with_containers<R>(&self, now: u64, f: impl FnOnce(&[NmContainer<'_>]) -> R) -> R {
        let table = self.table();
        let states: Vec<(ContainerId, &Entry, RmContainerState, Option<ExitInfo>)> = table
            .iter()
            .map(|(id, e)| {
                let (state, exit) = e.state();
                (*id, e, state, exit)
            })
            .collect();
        let list: Vec<NmContainer<'_>> = states
            .iter()
            .map(|(id, e, state, exit)| NmContainer {
                id: *id,
                state: *state,
                exit_status: exit.as_ref().map_or(0, |x| x.exit_status),
                finished_ms: e.finished_ms,
                diagnostics: exit.as_ref().map_or("", |x| x.diagnostics.as_str()),
                user: &e.user,
                resource: e.resource,
            })
            .filter(|c| c.tracked(now))
            .collect();
        f(&list)
    }

    fn forget_old(&self, now: u64) {
        let keep = FORGET_FINISHED_AFTER.as_millis() as u64;
        self.table()
            .retain(|_, e| e.finished_ms.is_none_or(|f| now.saturating_sub(f) < keep));
    }
}

impl NodeSource for Shared {
    fn node_info(&self, now: u64) -> NmNodeInfoResponse {
        views::nm_node_info(&self.node(), now)
    }
    fn apps(&self, now: u64) -> NmAppsResponse {
        // The NM knows only its containers: an application runs while one of them does.
        self.with_containers(now, |cs| {
            views::nm_apps(cs, |app| {
                cs.iter().any(|c| c.id.application() == app && c.is_live())
            })
        })
    }
    fn containers(&self, now: u64) -> NmContainersResponse {
        self.with_containers(now, |cs| views::nm_containers(&self.node(), cs))
    }
    fn container(&self, id: &str, now: u64) -> Result<NmContainerResponse, RmError> {
        self.with_containers(now, |cs| views::nm_container(&self.node(), cs, id))
    }
}

/// Feeds the runtime's reports into the container's status.
struct Reporter(Arc<watch::Sender<Status>>);

impl ContainerEvents for Reporter {
    fn started(&self) {
        self.0
            .send_if_modified(|s| !std::mem::replace(&mut s.started, true));
    }
    fn progress(&self, fraction: f64) {
        self.0.send_if_modified(|s| {
            let changed = s.progress != fraction;
            s.progress = fraction;
            changed
        });
    }
}

pub struct NodeManager;

/// A running NodeManager. Dropping it without [`NodeManagerHandle::shutdown`] stops the
/// web service but cannot wait for container cleanup.
pub struct NodeManagerHandle {
    url: String,
    instance: String,
    shared: Arc<Shared>,
}

impl NodeManager {
    pub async fn start(config: NodeManagerConfig) -> Result<NodeManagerHandle, EmulatorError> {
        if config.resource.memory_mb == 0 || config.resource.vcores == 0 {
            return Err(EmulatorError::Config(format!(
                "node resource {} must have memory and vcores",
                config.resource
            )));
        }
        if config.token.is_empty() {
            return Err(EmulatorError::Config("the bearer token is empty".into()));
        }
        let listener = bind(config.listen).await?;
        let local = local_addr(&listener, config.listen)?;
        let node_id = match config.node_id {
            Some(id) => id,
            None => NodeId::new(format!("{}:{}", hostname(), local.port())),
        };
        let instance = config
            .instance
            .unwrap_or_else(|| format!("nm-{}-{}", std::process::id(), now_ms()));
        let (runtime, _) =
            choose_runtime(config.runtime, &config.image, config.cpu_scale, &instance).await?;
        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared {
            http_address: node_id.to_string(),
            node_id,
            resource: config.resource,
            started_ms: now_ms(),
            kind: runtime.kind(),
            runtime,
            token: config.token,
            containers: Mutex::new(BTreeMap::new()),
            tracker: TaskTracker::new(),
            cancel: cancel.clone(),
            closing: AtomicBool::new(false),
        });
        let internal = Router::new()
            .route("/internal/v1/containers", post(launch))
            .route(
                "/internal/v1/containers/{cid}/signal/{command}",
                post(signal),
            )
            .route("/internal/v1/containers/{cid}/events", get(events))
            .route_layer(middleware::from_fn_with_state(
                shared.clone(),
                require_token,
            ))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(shared.clone());
        let router = nm_api::router(shared.clone()).merge(internal);
        let c = cancel.clone();
        let node = shared.node_id.clone();
        shared.tracker.spawn(async move {
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(c.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, node = %node, "NodeManager web service stopped");
            }
        });
        let s = shared.clone();
        shared.tracker.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            loop {
                tokio::select! {
                    _ = s.cancel.cancelled() => return,
                    _ = tick.tick() => s.forget_old(now_ms()),
                }
            }
        });
        tracing::info!(node = %shared.node_id, listen = %local, runtime = %shared.kind,
            instance = %instance, "emulated NodeManager started");
        Ok(NodeManagerHandle {
            url: format!("http://{local}"),
            instance,
            shared,
        })
    }
}

impl NodeManagerHandle {
    /// `http://host:port` of the bound web service.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn node_id(&self) -> &NodeId {
        &self.shared.node_id
    }

    /// The [`super::docker::INSTANCE_LABEL`] value of its Docker containers.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn runtime(&self) -> RuntimeKind {
        self.shared.kind
    }

    /// Stops the web service (and every event stream), then removes every container (and
    /// image) the runtime created, and waits for the container tasks to finish.
    pub async fn shutdown(self) -> Result<ShutdownReport, EmulatorError> {
        let s = &self.shared;
        s.closing.store(true, Ordering::SeqCst);
        s.cancel.cancel();
        let removed = s.runtime.shutdown().await?;
        s.tracker.close();
        if tokio::time::timeout(Duration::from_secs(60), s.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some NodeManager tasks did not finish within 60 s of shutdown");
        }
        let late = s.runtime.shutdown().await?;
        Ok(ShutdownReport {
            containers_removed: removed + late,
        })
    }
}

impl Drop for NodeManagerHandle {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.cancel.cancel();
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// An internal API error: a status and a sentence, as JSON `{"error": ...}`.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

async fn require_token(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    match crate::auth::bearer_token(req.headers()) {
        Some(t) if crate::auth::token_matches(t.as_bytes(), &s.token) => next.run(req).await,
        Some(_) => ApiError(StatusCode::UNAUTHORIZED, "wrong bearer token".into()).into_response(),
        None => ApiError(
            StatusCode::UNAUTHORIZED,
            "missing bearer token (Authorization: Bearer <token from the NodeManager's --token-file>)"
                .into(),
        )
        .into_response(),
    }
}

fn parse_container(raw: &str) -> Result<ContainerId, ApiError> {
    raw.parse().map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("container id {raw:?}: {e}"),
        )
    })
}

async fn launch(
    State(s): State<Arc<Shared>>,
    body: Result<axum::Json<LaunchSpec>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let axum::Json(spec) = body.map_err(|r| ApiError(r.status(), r.body_text()))?;
    if s.closing.load(Ordering::SeqCst) {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the NodeManager is shutting down".into(),
        ));
    }
    if spec.node != s.node_id {
        tracing::warn!(container = %spec.container, rm_node = %spec.node, node = %s.node_id,
            "the RM names this node differently; its Docker labels carry the RM's name");
    }
    let cid = spec.container;
    let status = {
        let mut table = s.table();
        if table.contains_key(&cid) {
            // A retried launch whose first answer was lost.
            return Ok(StatusCode::OK);
        }
        let status = Arc::new(watch::Sender::new(Status::default()));
        table.insert(
            cid,
            Entry {
                resource: spec.resource,
                user: spec.user.clone(),
                finished_ms: None,
                status: status.clone(),
            },
        );
        status
    };
    let shared = s.clone();
    s.tracker.spawn(async move {
        tracing::info!(container = %cid, resource = %spec.resource, runtime = %shared.kind,
            command = ?spec.command, "launching container");
        let exit = shared
            .runtime
            .run(spec, Arc::new(Reporter(status.clone())))
            .await;
        tracing::info!(container = %cid, exit_status = exit.exit_status,
            diagnostics = %exit.diagnostics, "container finished");
        if let Some(e) = shared.table().get_mut(&cid) {
            e.finished_ms = Some(now_ms());
        }
        status.send_modify(|st| st.exit = Some(exit));
    });
    Ok(StatusCode::CREATED)
}

async fn signal(
    State(s): State<Arc<Shared>>,
    Path((cid, command)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let cid = parse_container(&cid)?;
    let sig: ContainerSignal = command
        .parse()
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e))?;
    match s.runtime.signal(cid, sig).await {
        Ok(()) => Ok(StatusCode::OK),
        Err(e @ RuntimeError::NotRunning(_)) => Err(ApiError(StatusCode::NOT_FOUND, e.to_string())),
        Err(e) => Err(ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

/// What changed from `sent` to `now`, as stream lines.
fn changes(sent: &Status, now: &Status) -> Vec<NmEvent> {
    let mut out = Vec::new();
    if now.started && !sent.started {
        out.push(NmEvent::Started);
    }
    if now.progress != sent.progress {
        out.push(NmEvent::Progress {
            fraction: now.progress,
        });
    }
    if let (Some(x), None) = (&now.exit, &sent.exit) {
        out.push(NmEvent::Exit {
            exit_status: x.exit_status,
            diagnostics: x.diagnostics.clone(),
        });
    }
    out
}

fn line(e: &NmEvent) -> bytes::Bytes {
    let mut v = serde_json::to_vec(e).unwrap_or_default();
    v.push(b'\n');
    v.into()
}

struct StreamState {
    rx: watch::Receiver<Status>,
    sent: Status,
    queue: VecDeque<NmEvent>,
    ended: bool,
    cancel: CancellationToken,
}

async fn events(
    State(s): State<Arc<Shared>>,
    Path(cid): Path<String>,
) -> Result<Response, ApiError> {
    let cid = parse_container(&cid)?;
    let rx = s
        .table()
        .get(&cid)
        .map(|e| e.status.subscribe())
        .ok_or_else(|| {
            ApiError(
                StatusCode::NOT_FOUND,
                format!("container {cid} is unknown to this NodeManager"),
            )
        })?;
    let start = StreamState {
        rx,
        sent: Status::default(),
        queue: VecDeque::new(),
        ended: false,
        cancel: s.cancel.clone(),
    };
    let stream = futures_util::stream::unfold(start, |mut st| async move {
        loop {
            if let Some(e) = st.queue.pop_front() {
                return Some((Ok::<_, Infallible>(line(&e)), st));
            }
            if st.ended {
                return None;
            }
            let now = st.rx.borrow_and_update().clone();
            st.queue.extend(changes(&st.sent, &now));
            st.ended = now.exit.is_some();
            st.sent = now;
            if !st.queue.is_empty() || st.ended {
                continue;
            }
            tokio::select! {
                r = st.rx.changed() => if r.is_err() {
                    // The entry was forgotten; the RM asks again and gets a 404.
                    return None;
                },
                _ = tokio::time::sleep(KEEPALIVE) => st.queue.push_back(NmEvent::Alive),
                _ = st.cancel.cancelled() => return None,
            }
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// `preemptor nodemanager`.
pub mod cli {
    use std::net::SocketAddr;
    use std::path::PathBuf;

    use crate::cluster::NodeId;
    use crate::resources::Resource;

    use super::super::{EmulatorError, RuntimeChoice};
    use super::{NodeManager, NodeManagerConfig};

    #[derive(Debug, clap::Args)]
    #[command(
        long_about = "Run one emulated YARN NodeManager as a process of its own, for an RM \
started with `preemptor emulate --nodemanager HOST:PORT`. It serves YARN's NM REST API \
(/ws/v1/node/...) from its own table of containers, so it keeps answering while the RM is \
down, and an internal API under /internal/v1 (bearer token from --token-file) through which \
the RM launches and signals containers and follows their events.\n\n\
On SIGTERM or Ctrl-C it removes every container (and the image, if it built one) it created.",
        after_help = "Example: preemptor nodemanager --listen 0.0.0.0:8042 --node-id nm1:8042 \
--token-file /run/secrets/nm-token\nThen: preemptor emulate --nodemanager nm1:8042 \
--nm-token-file /run/secrets/nm-token"
    )]
    pub struct NodemanagerArgs {
        /// Web service address (yarn.nodemanager.webapp.address).
        #[arg(long, default_value = "127.0.0.1:8042")]
        pub listen: SocketAddr,
        /// Node id the NM reports (HOST:PORT); give the address the RM uses in
        /// --nodemanager. Default: <hostname>:<listen port>.
        #[arg(long, value_name = "HOST:PORT")]
        pub node_id: Option<String>,
        /// Memory this NodeManager offers (yarn.nodemanager.resource.memory-mb).
        #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1..))]
        pub memory_mb: u64,
        /// Vcores this NodeManager offers (yarn.nodemanager.resource.cpu-vcores).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
        pub vcores: u32,
        /// Container runtime.
        #[arg(long, value_enum, default_value_t = RuntimeChoice::Auto)]
        pub runtime: RuntimeChoice,
        /// Real CPUs a container gets per vcore. Default: this machine's CPUs divided by
        /// --vcores, so that a full node uses the whole machine (give the RM the same
        /// value: it sizes each task's --threads with its own --cpu-scale).
        #[arg(long)]
        pub cpu_scale: Option<f64>,
        /// Workload image to run (its entrypoint must be preemptor-workload); built from
        /// the preemptor-workload binary next to this program when omitted.
        #[arg(long)]
        pub image: Option<String>,
        /// Value of the io.preemptor.emulator.instance label on this NM's Docker
        /// containers. Default: unique per process.
        #[arg(long)]
        pub instance: Option<String>,
        /// File (mode 0600) holding the bearer token the RM must present on the internal
        /// API (the RM's --nm-token-file).
        #[arg(long, value_name = "PATH")]
        pub token_file: PathBuf,
    }

    /// `HOST:PORT` with a non-empty host and a non-zero port.
    pub fn parse_node_address(s: &str) -> Result<NodeId, EmulatorError> {
        let bad = || EmulatorError::Config(format!("{s:?} is not HOST:PORT"));
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || port == 0 || host.contains('/') {
            return Err(bad());
        }
        Ok(NodeId::new(s))
    }

    /// CPUs per vcore when a node of `vcores` should use the whole machine.
    pub fn default_cpu_scale(vcores: u32) -> f64 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus as f64 / f64::from(vcores.max(1))
    }

    pub async fn run(args: NodemanagerArgs) -> Result<(), EmulatorError> {
        let token = crate::config::secret::read_token_file(&args.token_file)
            .map_err(|e| EmulatorError::Config(e.to_string()))?;
        let node_id = args
            .node_id
            .as_deref()
            .map(parse_node_address)
            .transpose()?;
        let cpu_scale = match args.cpu_scale {
            Some(s) if s.is_finite() && s > 0.0 => s,
            Some(s) => {
                return Err(EmulatorError::Config(format!(
                    "--cpu-scale must be a positive number, got {s}"
                )));
            }
            None => default_cpu_scale(args.vcores),
        };
        let resource = Resource::new(args.memory_mb, args.vcores);
        let handle = NodeManager::start(NodeManagerConfig {
            listen: args.listen,
            node_id,
            resource,
            runtime: args.runtime,
            cpu_scale,
            image: args.image,
            instance: args.instance,
            token,
        })
        .await?;
        println!("Preemptor emulated NodeManager");
        println!("  web service      {}", handle.url());
        println!("  node id          {}", handle.node_id());
        println!("  node resource    {resource}");
        println!(
            "  runtime          {} (1 vcore = {cpu_scale:.3} CPU)",
            handle.runtime()
        );
        println!("  instance         {}", handle.instance());
        println!(
            "Send SIGTERM or press Ctrl-C to stop; every container is removed on the way out."
        );
        wait_for_stop().await;
        println!("Stopping: removing containers...");
        let report = handle.shutdown().await?;
        println!("Removed {} containers.", report.containers_removed);
        Ok(())
    }

    async fn wait_for_stop() {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                None
            }
        };
        let sigterm = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let ctrl_c = async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                tracing::warn!(error = %e, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = sigterm => {}
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn node_addresses_are_host_and_port() {
            assert_eq!(parse_node_address("nm1:8042").unwrap().host(), "nm1");
            assert!(parse_node_address("[::1]:8042").is_ok());
            for bad in [
                "nm1",
                "nm1:",
                ":8042",
                "nm1:0",
                "nm1:99999",
                "http://nm1:8042",
            ] {
                assert!(parse_node_address(bad).is_err(), "{bad}");
            }
        }
    }
}
