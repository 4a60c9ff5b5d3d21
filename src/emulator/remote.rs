//! The RM's container runtime when NodeManagers are processes of their own
//! (`preemptor nodemanager`): each launch and signal goes over HTTP to the NodeManager
//! named in the [`LaunchSpec`], and its event stream feeds the container's events.
//!
//! A NodeManager that cannot be reached is retried, the launch as well as a broken event
//! stream, until it has been silent for the expiry interval; only then is the container
//! reported lost (ABORTED), as YARN's NM liveness monitor does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::{ContainerId, NodeId};
use crate::sync::lock;

use super::nodemanager::{NmEvent, STREAM_IDLE_TIMEOUT};
use super::runtime::{
    ContainerRuntime, ContainerSignal, Events, ExitInfo, LAUNCH_FAILED, LaunchSpec, RuntimeError,
    RuntimeKind,
};
use super::state::exit;
use super::{EmulatorError, RemoteNodeManagers};

/// Pause between attempts to reach a NodeManager.
const RETRY: Duration = Duration::from_secs(1);
/// Time limit of one launch or signal request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct RemoteRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    token: String,
    expiry: Duration,
    kind: RuntimeKind,
    cancel: CancellationToken,
    /// Containers between `run` and their exit.
    running: Mutex<HashMap<ContainerId, Running>>,
    /// NodeManagers currently unreachable, so that each outage is logged once.
    down: Mutex<HashSet<NodeId>>,
}

struct Running {
    node: NodeId,
    launched: bool,
    /// A stop asked for before the launch got through: the launch is abandoned.
    stop_before_launch: Option<ContainerSignal>,
}

/// How one attempt to follow a container's events ended.
enum Attach {
    Exit(ExitInfo),
    /// Connection failed, broke or went silent: retry.
    Broken(String),
    /// The NodeManager does not know the container (restarted, or forgot it).
    Unknown(String),
    /// The NodeManager refused the RM's token.
    Refused(String),
}

fn base(node: &NodeId) -> String {
    format!("http://{node}/internal/v1/containers")
}

fn refused(node: &NodeId, body: &str) -> String {
    format!(
        "NodeManager {node} refused the RM's bearer token (401 Unauthorized: {}); the RM's \
--nm-token-file must hold the token of the NodeManager's --token-file",
        body.trim()
    )
}

impl RemoteRuntime {
    pub fn new(config: &RemoteNodeManagers) -> Result<Self, EmulatorError> {
        let token = std::str::from_utf8(&config.token)
            .ok()
            .filter(|t| t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| {
                EmulatorError::Config(
                    "the NodeManagers' token must be printable ASCII without spaces".into(),
                )
            })?
            .to_string();
        let http = crate::tls::http_client_builder()
            .connect_timeout(Duration::from_secs(3))
            .build()
            .map_err(|e| EmulatorError::Config(format!("HTTP client: {e}")))?;
        Ok(RemoteRuntime {
            inner: Arc::new(Inner {
                http,
                token,
                expiry: config.expiry,
                kind: config.runtime,
                cancel: CancellationToken::new(),
                running: Mutex::new(HashMap::new()),
                down: Mutex::new(HashSet::new()),
            }),
        })
    }
}

impl Inner {
    fn unreachable(&self, node: &NodeId, why: &str) {
        if lock(&self.down).insert(node.clone()) {
            tracing::warn!(node = %node, error = %why,
                "NodeManager unreachable; retrying until it answers or {} s pass",
                self.expiry.as_secs());
        }
    }

    fn reachable(&self, node: &NodeId) {
        if lock(&self.down).remove(node) {
            tracing::info!(node = %node, "NodeManager reachable again");
        }
    }

    fn lost(&self, node: &NodeId, since: Instant, why: &str) -> ExitInfo {
        ExitInfo {
            exit_status: exit::ABORTED,
            diagnostics: format!(
                "Container lost: NodeManager {node} unreachable for {} s ({why})",
                since.elapsed().as_secs()
            ),
        }
    }

    /// Sleeps [`RETRY`]; false when the runtime is shutting down.
    async fn pause(&self) -> bool {
        tokio::select! {
            _ = self.cancel.cancelled() => false,
            _ = tokio::time::sleep(RETRY) => true,
        }
    }

    fn shutting_down(&self) -> ExitInfo {
        ExitInfo {
            exit_status: exit::ABORTED,
            diagnostics: "the emulator is shutting down".into(),
        }
    }

    /// Posts the launch until the NodeManager takes it; `Err` is the container's exit.
    async fn launch(&self, spec: &LaunchSpec) -> Result<(), ExitInfo> {
        let node = &spec.node;
        let first_failure = Instant::now();
        loop {
            if let Some(sig) = lock(&self.running)
                .get(&spec.container)
                .and_then(|r| r.stop_before_launch)
            {
                return Err(ExitInfo {
                    exit_status: if sig == ContainerSignal::GracefulShutdown {
                        exit::SIGTERM
                    } else {
                        exit::SIGKILL
                    },
                    diagnostics: format!("stopped ({}) before it was launched", sig.unix_name()),
                });
            }
            let sent = self
                .http
                .post(base(node))
                .bearer_auth(&self.token)
                .json(spec)
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await;
            let why = match sent {
                Ok(r) if r.status().is_success() => {
                    self.reachable(node);
                    return Ok(());
                }
                Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => {
                    let msg = refused(node, &r.text().await.unwrap_or_default());
                    tracing::error!(container = %spec.container, "{msg}");
                    return Err(ExitInfo {
                        exit_status: LAUNCH_FAILED,
                        diagnostics: msg,
                    });
                }
                // Shutting down: another NodeManager process may take its place.
                Ok(r) if r.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                    format!("503 {}", r.text().await.unwrap_or_default())
                }
                Ok(r) => {
                    let status = r.status();
                    return Err(ExitInfo {
                        exit_status: LAUNCH_FAILED,
                        diagnostics: format!(
                            "NodeManager {node} refused the launch: {status} {}",
                            r.text().await.unwrap_or_default().trim()
                        ),
                    });
                }
                Err(e) => e.to_string(),
            };
            self.unreachable(node, &why);
            if first_failure.elapsed() >= self.expiry {
                return Err(self.lost(node, first_failure, &why));
            }
            if !self.pause().await {
                return Err(self.shutting_down());
            }
        }
    }

    /// Follows the container's event stream once, feeding `events`; `contact` is set to
    /// the time of the last line received.
    async fn attach(
        &self,
        node: &NodeId,
        container: ContainerId,
        events: &Events,
        contact: &mut Instant,
    ) -> Attach {
        let url = format!("{}/{container}/events", base(node));
        let request = self.http.get(url).bearer_auth(&self.token).send();
        let resp = match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
            Err(_) => return Attach::Broken("no answer".into()),
            Ok(Err(e)) => return Attach::Broken(e.to_string()),
            Ok(Ok(r)) => r,
        };
        match resp.status() {
            s if s.is_success() => {}
            reqwest::StatusCode::UNAUTHORIZED => {
                return Attach::Refused(refused(node, &resp.text().await.unwrap_or_default()));
            }
            reqwest::StatusCode::NOT_FOUND => {
                return Attach::Unknown(resp.text().await.unwrap_or_default());
            }
            s => {
                return Attach::Broken(format!(
                    "{s} {}",
                    resp.text().await.unwrap_or_default().trim()
                ));
            }
        }
        *contact = Instant::now();
        self.reachable(node);
        let mut body = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let chunk = match tokio::time::timeout(STREAM_IDLE_TIMEOUT, body.next()).await {
                Err(_) => {
                    return Attach::Broken(format!(
                        "event stream silent for {} s",
                        STREAM_IDLE_TIMEOUT.as_secs()
                    ));
                }
                Ok(None) => return Attach::Broken("event stream ended".into()),
                Ok(Some(Err(e))) => return Attach::Broken(e.to_string()),
                Ok(Some(Ok(c))) => c,
            };
            *contact = Instant::now();
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                match serde_json::from_slice::<NmEvent>(&line) {
                    Ok(NmEvent::Started) => events.started(),
                    Ok(NmEvent::Progress { fraction }) => events.progress(fraction),
                    Ok(NmEvent::Alive) => {}
                    Ok(NmEvent::Exit {
                        exit_status,
                        diagnostics,
                    }) => {
                        return Attach::Exit(ExitInfo {
                            exit_status,
                            diagnostics,
                        });
                    }
                    Err(e) => {
                        tracing::warn!(node = %node, container = %container, error = %e,
                            "unreadable event from NodeManager")
                    }
                }
            }
            if buf.len() > 64 * 1024 {
                return Attach::Broken("event line longer than 64 KiB".into());
            }
        }
    }

    async fn run(&self, spec: LaunchSpec, events: Events) -> ExitInfo {
        let node = spec.node.clone();
        let container = spec.container;
        if let Err(x) = self.launch(&spec).await {
            return x;
        }
        if let Some(r) = lock(&self.running).get_mut(&container) {
            r.launched = true;
        }
        let mut contact = Instant::now();
        loop {
            if self.cancel.is_cancelled() {
                return self.shutting_down();
            }
            let why = tokio::select! {
                _ = self.cancel.cancelled() => return self.shutting_down(),
                a = self.attach(&node, container, &events, &mut contact) => match a {
                    Attach::Exit(x) => return x,
                    Attach::Unknown(body) => {
                        return ExitInfo {
                            exit_status: exit::ABORTED,
                            diagnostics: format!(
                                "Container lost: NodeManager {node} no longer knows it (restarted?): {}",
                                body.trim()
                            ),
                        };
                    }
                    Attach::Refused(msg) => msg,
                    Attach::Broken(why) => why,
                },
            };
            self.unreachable(&node, &why);
            if contact.elapsed() >= self.expiry {
                return self.lost(&node, contact, &why);
            }
            if !self.pause().await {
                return self.shutting_down();
            }
        }
    }
}

impl ContainerRuntime for RemoteRuntime {
    fn kind(&self) -> RuntimeKind {
        self.inner.kind
    }

    fn run(&self, spec: LaunchSpec, events: Events) -> BoxFuture<'static, ExitInfo> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let container = spec.container;
            lock(&inner.running).insert(
                container,
                Running {
                    node: spec.node.clone(),
                    launched: false,
                    stop_before_launch: None,
                },
            );
            let exit = inner.run(spec, events).await;
            lock(&inner.running).remove(&container);
            exit
        })
    }

    fn signal(
        &self,
        container: ContainerId,
        signal: ContainerSignal,
    ) -> BoxFuture<'static, Result<(), RuntimeError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let node = {
                let mut running = lock(&inner.running);
                let Some(r) = running.get_mut(&container) else {
                    return Err(RuntimeError::NotRunning(container));
                };
                if !r.launched {
                    if signal == ContainerSignal::OutputThreadDump {
                        return Err(RuntimeError::NotRunning(container));
                    }
                    r.stop_before_launch = Some(signal);
                    return Ok(());
                }
                r.node.clone()
            };
            let url = format!("{}/{container}/signal/{}", base(&node), signal.yarn_name());
            let resp = inner
                .http
                .post(url)
                .bearer_auth(&inner.token)
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await
                .map_err(|e| RuntimeError::NodeManager {
                    node: node.clone(),
                    reason: e.to_string(),
                })?;
            match resp.status() {
                s if s.is_success() => Ok(()),
                reqwest::StatusCode::NOT_FOUND => Err(RuntimeError::NotRunning(container)),
                reqwest::StatusCode::UNAUTHORIZED => Err(RuntimeError::NodeManager {
                    reason: refused(&node, &resp.text().await.unwrap_or_default()),
                    node,
                }),
                s => Err(RuntimeError::NodeManager {
                    reason: format!("{s} {}", resp.text().await.unwrap_or_default().trim()),
                    node,
                }),
            }
        })
    }

    /// Kills (SIGKILL through each NodeManager) every container this RM launched, waits
    /// up to 15 s for their exits, then stops following the rest. Each NodeManager's
    /// runtime removes a container once it has exited; the NodeManagers keep running.
    fn shutdown(&self) -> BoxFuture<'static, Result<usize, RuntimeError>> {
        let this = self.clone();
        Box::pin(async move {
            let ids: Vec<ContainerId> = lock(&this.inner.running).keys().copied().collect();
            let mut killed = 0;
            for id in &ids {
                match this.signal(*id, ContainerSignal::ForcefulShutdown).await {
                    Ok(()) => killed += 1,
                    Err(RuntimeError::NotRunning(_)) => {}
                    Err(e) => tracing::warn!(container = %id, error = %e,
                        "could not stop container at shutdown"),
                }
            }
            let deadline = Instant::now() + Duration::from_secs(15);
            while !lock(&this.inner.running).is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            this.inner.cancel.cancel();
            Ok(killed)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::cluster::{ApplicationAttemptId, ApplicationId};
    use crate::emulator::RuntimeChoice;
    use crate::emulator::nodemanager::{NodeManager, NodeManagerConfig, NodeManagerHandle};
    use crate::emulator::runtime::ContainerEvents;
    use crate::resources::Resource;

    const TOKEN: &[u8] = b"unit-test-token";

    fn spec(node: &NodeId, n: u64, ms: u64) -> LaunchSpec {
        LaunchSpec {
            container: ContainerId::new(
                ApplicationAttemptId::new(ApplicationId::new(7, 1), 1),
                1,
                n,
            ),
            node: node.clone(),
            resource: Resource::new(1024, 1),
            command: vec!["burn".into()],
            simulated_duration_ms: ms,
            user: "u".into(),
        }
    }

    #[derive(Default)]
    struct Recorder {
        started: AtomicU64,
        percent: AtomicU64,
    }
    impl ContainerEvents for Recorder {
        fn started(&self) {
            self.started.fetch_add(1, Ordering::SeqCst);
        }
        fn progress(&self, p: f64) {
            self.percent.store((p * 100.0) as u64, Ordering::SeqCst);
        }
    }

    /// A simulated NodeManager of 4 GB and 4 vcores on `listen`.
    fn simulated_nm(listen: &str, node_id: Option<NodeId>) -> NodeManagerConfig {
        NodeManagerConfig {
            listen: listen.parse().unwrap(),
            node_id,
            resource: Resource::new(4096, 4),
            runtime: RuntimeChoice::Simulated,
            cpu_scale: 1.0,
            image: None,
            instance: None,
            token: TOKEN.to_vec(),
        }
    }

    async fn nodemanager() -> (NodeManagerHandle, NodeId) {
        let nm = NodeManager::start(simulated_nm("127.0.0.1:0", None))
            .await
            .unwrap();
        let node = NodeId::new(nm.url().trim_start_matches("http://"));
        (nm, node)
    }

    fn runtime(node: &NodeId, token: &[u8], expiry: Duration) -> RemoteRuntime {
        RemoteRuntime::new(&RemoteNodeManagers {
            nodes: vec![node.clone()],
            token: token.to_vec(),
            expiry,
            runtime: RuntimeKind::Simulated,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn a_remote_container_reports_its_events_and_a_second_attach_gets_its_exit() {
        let (nm, node) = nodemanager().await;
        let rt = runtime(&node, TOKEN, Duration::from_secs(30));
        let rec = Arc::new(Recorder::default());
        let done = rt.run(spec(&node, 2, 300), rec.clone()).await;
        assert_eq!(done.exit_status, exit::SUCCESS, "{done:?}");
        assert_eq!(rec.started.load(Ordering::SeqCst), 1);
        assert_eq!(rec.percent.load(Ordering::SeqCst), 100);
        // The same launch again (a retry whose answer was lost) is not run twice: the
        // stream replays the state the container ended in.
        let again = Arc::new(Recorder::default());
        let replay = rt.run(spec(&node, 2, 60_000), again.clone()).await;
        assert_eq!(replay, done);
        assert_eq!(again.started.load(Ordering::SeqCst), 1);

        let long = spec(&node, 3, 60_000);
        let id = long.container;
        let running = Arc::new(Recorder::default());
        let handle = tokio::spawn(rt.run(long, running.clone()));
        for _ in 0..250 {
            if running.started.load(Ordering::SeqCst) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(running.started.load(Ordering::SeqCst), 1);
        rt.signal(id, ContainerSignal::ForcefulShutdown)
            .await
            .unwrap();
        assert_eq!(handle.await.unwrap().exit_status, exit::SIGKILL);
        assert!(matches!(
            rt.signal(id, ContainerSignal::ForcefulShutdown).await,
            Err(RuntimeError::NotRunning(_))
        ));
        assert_eq!(rt.shutdown().await.unwrap(), 0);
        nm.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn an_unreachable_nodemanager_loses_the_container_after_the_expiry() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let node = NodeId::new(format!("127.0.0.1:{port}"));
        let rt = runtime(&node, TOKEN, Duration::from_secs(2));
        let started = Instant::now();
        let lost = rt
            .run(spec(&node, 4, 100), Arc::new(Recorder::default()))
            .await;
        assert_eq!(lost.exit_status, exit::ABORTED);
        assert!(
            lost.diagnostics
                .contains(&format!("NodeManager {node} unreachable")),
            "{lost:?}"
        );
        assert!(started.elapsed() >= Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_launch_waits_for_a_nodemanager_that_starts_later() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let node = NodeId::new(format!("127.0.0.1:{port}"));
        let rt = runtime(&node, TOKEN, Duration::from_secs(30));
        let rec = Arc::new(Recorder::default());
        let run = tokio::spawn(rt.run(spec(&node, 6, 100), rec.clone()));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!run.is_finished(), "the launch is retried, not given up");
        let nm = NodeManager::start(simulated_nm(
            &format!("127.0.0.1:{port}"),
            Some(node.clone()),
        ))
        .await
        .unwrap();
        let done = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the container ran once the NodeManager was up")
            .unwrap();
        assert_eq!(done.exit_status, exit::SUCCESS, "{done:?}");
        assert_eq!(rec.started.load(Ordering::SeqCst), 1);
        nm.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_wrong_token_fails_the_launch_and_says_why() {
        let (nm, node) = nodemanager().await;
        let rt = runtime(&node, b"not-the-token", Duration::from_secs(30));
        let refused = rt
            .run(spec(&node, 5, 100), Arc::new(Recorder::default()))
            .await;
        assert_eq!(refused.exit_status, LAUNCH_FAILED);
        assert!(refused.diagnostics.contains("401"), "{refused:?}");
        assert!(
            refused.diagnostics.contains("wrong bearer token"),
            "{refused:?}"
        );
        nm.shutdown().await.unwrap();
    }
}
