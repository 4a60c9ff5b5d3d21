//! Dry-run node agents for an emulator running simulated containers: one real agent API
//! (the agent's router over a dry-run enforcer) per NodeManager, all in one process. For
//! controller load tests, where thousands of `preemptor agent` processes would be too heavy.
//!
//! Every agent is served from ONE listening socket, each at its own loopback address on
//! the same port (`http://127.1.x.y:PORT`, [`super::loopback`]): a listener per agent
//! would cost an open file each, and at 5,000 nodes those plus the server side of the
//! controller's connections exceed a 20,000 open-file limit.
//!
//! A dry-run agent has no Docker to list containers from, so `GET /v1/containers` adds the
//! node's running simulated containers (with their work done as attained service) to
//! what the enforcer recorded; without them the controller would see every container as
//! unmanaged and no policy would act. Actions are recorded and reported, not applied: the
//! simulated containers keep their speed. See docs/load.md.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::api::{ActionKind, ActionResult, ContainerStatus};
use crate::agent::enforcer::{Enforcer, EnforcerSettings, Runtime};
use crate::agent::{metrics, server};
use crate::cluster::{ContainerId, NodeId};

use super::loopback::LoopbackHosts;
use super::runtime::{SimulatedContainer, SimulatedRuntime};
use super::{EmulatorError, NodeManagerInfo};

/// How stale a node's container list may be: one listing of the runtime serves every
/// agent asking within this window.
const LISTING_MAX_AGE: Duration = Duration::from_millis(250);
/// How often the agents' leases are checked (as the agent's own lease tick).
const LEASE_TICK: Duration = Duration::from_millis(200);
/// Largest answer body the middleware reads back (a container list).
const MAX_LIST_BYTES: usize = 64 * 1024 * 1024;
/// Agent `i` listens at this address plus `i`: 127.1.0.1, 127.1.0.2, ... 127.0.0.1 is left
/// to everything else, 127.2/16 on to the emulator's NodeManagers.
const FIRST_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 1, 0, 1);

/// Actions the agents carried out (2xx answers), by kind, and the ones they refused.
#[derive(Debug, Default)]
pub struct ActionCounts {
    pub suspend: AtomicU64,
    pub shrink: AtomicU64,
    pub resume: AtomicU64,
    pub kill: AtomicU64,
    pub refused: AtomicU64,
}

impl ActionCounts {
    pub fn applied(&self) -> u64 {
        [&self.suspend, &self.shrink, &self.resume, &self.kill]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    fn count(&self, kind: ActionKind) {
        let c = match kind {
            ActionKind::Suspend => &self.suspend,
            ActionKind::Shrink => &self.shrink,
            ActionKind::Resume => &self.resume,
            ActionKind::Kill => &self.kill,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

type ByNode = Arc<HashMap<NodeId, Vec<SimulatedContainer>>>;

/// The simulated runtime's containers by node, listed at most every [`LISTING_MAX_AGE`].
struct Listing {
    runtime: SimulatedRuntime,
    cached: Mutex<Option<(Instant, ByNode)>>,
}

impl Listing {
    fn of(&self, node: &NodeId) -> Vec<SimulatedContainer> {
        let mut cached = crate::sync::lock(&self.cached);
        let fresh = cached
            .as_ref()
            .filter(|(at, _)| at.elapsed() < LISTING_MAX_AGE)
            .map(|(_, m)| m.clone());
        let map = match fresh {
            Some(m) => m,
            None => {
                let mut m: HashMap<NodeId, Vec<SimulatedContainer>> = HashMap::new();
                for c in self.runtime.containers() {
                    m.entry(c.node.clone()).or_default().push(c);
                }
                let m = Arc::new(m);
                *cached = Some((Instant::now(), m.clone()));
                m
            }
        };
        map.get(node).cloned().unwrap_or_default()
    }
}

struct Hosted {
    node: NodeId,
    listing: Arc<Listing>,
    counts: Arc<ActionCounts>,
}

/// One hosted agent.
#[derive(Clone, Debug)]
pub struct HostedAgent {
    pub node: NodeId,
    pub url: String,
}

/// Dry-run agents for every NodeManager of an emulator. Dropping this does not stop
/// them; call [`DryRunAgents::shutdown`].
pub struct DryRunAgents {
    agents: Vec<HostedAgent>,
    counts: Arc<ActionCounts>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl DryRunAgents {
    /// Starts an agent for each of `nodes`, the i-th at `127.1.0.1 + i` on one free port
    /// shared by all, all accepting `token`. `runtime` is the emulator's
    /// ([`super::EmulatorHandle::simulated_runtime`]).
    pub async fn start(
        nodes: &[NodeManagerInfo],
        runtime: SimulatedRuntime,
        token: &[u8],
        lease_timeout: Duration,
    ) -> Result<DryRunAgents, EmulatorError> {
        if token.is_empty() {
            return Err(EmulatorError::Config(
                "the agents' token must not be empty".into(),
            ));
        }
        let listing = Arc::new(Listing {
            runtime,
            cached: Mutex::new(None),
        });
        let counts = Arc::new(ActionCounts::default());
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let settings = EnforcerSettings {
            lease_timeout,
            ..EnforcerSettings::default()
        };
        let hosts = LoopbackHosts::bind(FIRST_ADDRESS, nodes.len())?;
        let mut agents = Vec::with_capacity(nodes.len());
        let mut routers = Vec::with_capacity(nodes.len());
        let mut enforcers = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let addr = hosts.addr(i).ok_or_else(|| {
                EmulatorError::Config(format!("no loopback address for dry-run agent {i}"))
            })?;
            let enforcer = Arc::new(Enforcer::new(
                Runtime::DryRun,
                settings.clone(),
                None,
                Arc::new(metrics::Metrics::new()),
                Instant::now(),
            ));
            let state = Arc::new(server::AppState {
                enforcer: enforcer.clone(),
                token: token.to_vec(),
                shutdown: cancel.clone(),
            });
            let hosted = Arc::new(Hosted {
                node: n.id.clone(),
                listing: listing.clone(),
                counts: counts.clone(),
            });
            routers.push(
                server::router(state, 64 * 1024)
                    .layer(middleware::from_fn_with_state(hosted, as_simulated_host)),
            );
            enforcers.push(enforcer);
            agents.push(HostedAgent {
                node: n.id.clone(),
                url: format!("http://{addr}"),
            });
        }
        let c = cancel.clone();
        tracker.spawn(async move {
            if let Err(e) = hosts.serve(routers, c.cancelled_owned()).await {
                tracing::error!(error = %e, "dry-run agents stopped");
            }
        });
        // One task for every lease: an expired lease resumes what the agent changed.
        let c = cancel.clone();
        tracker.spawn(async move {
            let mut tick = tokio::time::interval(LEASE_TICK);
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let now = Instant::now();
                for e in &enforcers {
                    e.on_lease_tick(now).await;
                }
            }
        });
        Ok(DryRunAgents {
            agents,
            counts,
            cancel,
            tracker,
        })
    }

    pub fn agents(&self) -> &[HostedAgent] {
        &self.agents
    }

    /// The value of `yarn.preemptor.agent.addresses` that sends the controller to these
    /// agents: `nodeId=url`, comma-separated.
    pub fn addresses(&self) -> String {
        self.agents
            .iter()
            .map(|a| format!("{}={}", a.node, a.url))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn counts(&self) -> &ActionCounts {
        &self.counts
    }

    /// Stops every agent and waits for their tasks.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Around the agent's router: counts actions, and lists the node's simulated containers
/// as a live agent lists Docker's. Authentication stays the router's.
async fn as_simulated_host(State(h): State<Arc<Hosted>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let listing = req.method() == Method::GET && path == "/v1/containers";
    let action = req.method() == Method::POST && path == "/v1/actions";
    let resp = next.run(req).await;
    if !(listing || action) {
        return resp;
    }
    if action && !resp.status().is_success() {
        h.counts.refused.fetch_add(1, Ordering::Relaxed);
    }
    if !resp.status().is_success() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_LIST_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("dry-run agent: reading the answer: {e}"),
            )
                .into_response();
        }
    };
    if action {
        if let Ok(r) = serde_json::from_slice::<ActionResult>(&bytes) {
            h.counts.count(r.action);
        }
        return Response::from_parts(parts, Body::from(bytes));
    }
    let recorded: Vec<ContainerStatus> = match serde_json::from_slice(&bytes) {
        Ok(l) => l,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("dry-run agent: reading the container list: {e}"),
            )
                .into_response();
        }
    };
    let merged = merge(recorded, h.listing.of(&h.node));
    match serde_json::to_vec(&merged) {
        Ok(b) => Response::from_parts(parts, Body::from(b)),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("dry-run agent: encoding the container list: {e}"),
        )
            .into_response(),
    }
}

/// The enforcer's records (containers it changed) and the node's running simulated
/// containers, one entry per container; a record that no longer runs says so.
fn merge(recorded: Vec<ContainerStatus>, running: Vec<SimulatedContainer>) -> Vec<ContainerStatus> {
    let mut by_id: HashMap<ContainerId, ContainerStatus> = recorded
        .into_iter()
        .map(|mut s| {
            s.running = false;
            (s.container, s)
        })
        .collect();
    for c in running {
        let attained = c.done.as_secs_f64() * f64::from(c.resource.vcores.max(1)) * 1000.0;
        let s = by_id.entry(c.container).or_insert_with(|| ContainerStatus {
            container: c.container,
            docker_id: String::new(),
            running: true,
            state: crate::cluster::ContainerState::Running,
            changed: false,
            allocated: None,
            limits: None,
            current: None,
            original: None,
            attained_service_ms: None,
            memory_usage_bytes: None,
            swap_bytes: None,
            swapping: false,
            frozen: false,
            path: None,
        });
        s.running = true;
        s.attained_service_ms = Some(attained as u64);
    }
    let mut out: Vec<ContainerStatus> = by_id.into_values().collect();
    out.sort_by_key(|s| s.container);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ApplicationAttemptId, ApplicationId, ContainerState};
    use crate::resources::Resource;

    fn id(n: u64) -> ContainerId {
        ContainerId::new(ApplicationAttemptId::new(ApplicationId::new(1, 1), 1), 1, n)
    }

    fn sim(n: u64, vcores: u32, done_ms: u64) -> SimulatedContainer {
        SimulatedContainer {
            container: id(n),
            node: NodeId::new("h:1"),
            resource: Resource::new(1024 * u64::from(vcores), vcores),
            speed: 1.0,
            done: Duration::from_millis(done_ms),
        }
    }

    #[tokio::test]
    async fn agents_behind_one_listener_keep_their_own_state() {
        use crate::agent::AgentClient;
        let nodes: Vec<NodeManagerInfo> = (0..3)
            .map(|i| NodeManagerInfo {
                id: NodeId::new(format!("h{i}:1")),
                url: String::new(),
            })
            .collect();
        let agents = DryRunAgents::start(
            &nodes,
            SimulatedRuntime::new(),
            b"secret",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        let urls: Vec<&str> = agents.agents().iter().map(|a| a.url.as_str()).collect();
        let port = urls[0].rsplit(':').next().unwrap();
        assert_eq!(
            urls[2],
            format!("http://127.1.0.3:{port}"),
            "one port for all"
        );
        assert_eq!(agents.addresses().split(',').count(), 3);

        let t = Duration::from_secs(5);
        let client = |url: &str, token: &str| AgentClient::new(url, token, t).unwrap();
        client(urls[1], "secret")
            .renew_lease("c", Some(Duration::from_secs(20)))
            .await
            .unwrap();
        let lease = |i: usize| {
            let c = client(urls[i], "secret");
            async move { c.lease().await.unwrap().holder }
        };
        assert_eq!(lease(1).await.as_deref(), Some("c"));
        assert_eq!(lease(0).await, None, "a lease is one agent's");
        assert_eq!(lease(2).await, None);
        let refused = client(urls[0], "wrong").lease().await.unwrap_err();
        assert_eq!(refused.status(), Some(reqwest::StatusCode::UNAUTHORIZED));

        // No agent at 127.0.0.1: the connection is closed unanswered.
        let stray = client(&format!("http://127.0.0.1:{port}"), "secret");
        assert!(stray.lease().await.is_err());

        agents.shutdown().await;
    }

    #[test]
    fn running_containers_are_listed_and_records_kept() {
        let mut suspended = merge(Vec::new(), vec![sim(1, 2, 0)]).remove(0);
        suspended.state = ContainerState::Suspended;
        suspended.changed = true;
        let ended = ContainerStatus {
            container: id(3),
            ..suspended.clone()
        };
        let l = merge(
            vec![suspended, ended],
            vec![sim(1, 2, 2000), sim(2, 1, 500)],
        );
        assert_eq!(
            l.iter().map(|s| s.container).collect::<Vec<_>>(),
            vec![id(1), id(2), id(3)]
        );
        assert_eq!(l[0].state, ContainerState::Suspended, "the record wins");
        assert!(l[0].changed && l[0].running);
        // 2 s of work on 2 vcores.
        assert_eq!(l[0].attained_service_ms, Some(4000));
        assert_eq!(l[1].state, ContainerState::Running);
        assert!(!l[1].changed && l[1].running);
        assert_eq!(l[1].attained_service_ms, Some(500));
        assert!(!l[2].running, "a record whose container ended");
    }
}
