//! The ResourceManager REST client.
//!
//! One [`RmClient`] serves the whole controller (it is a cheap handle; clones share the
//! connection pool, the active-RM choice and the attempt cache). With RM HA it is given
//! every RM's web address, finds the active one through `/ws/v1/cluster/info`
//! (`haState`), and follows it: a standby answers other paths with `307` and a
//! `Location` naming the active RM (or, when it knows none, a "This is standby RM" /
//! "no active RM" page), and an RM that stops answering is failed over from.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, LOCATION};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;

use super::dto::{
    AppAttemptInfo, AppAttemptsResponse, AppInfo, AppResponse, AppStateInfo,
    ApplicationSubmissionContext, AppsResponse, AttemptContainersResponse, CAPACITY_SCHEDULER_TYPE,
    ClusterInfo, ClusterInfoResponse, ClusterMetrics, ClusterMetricsResponse, ContainerInfo,
    NewApplication, NodeInfo, NodeLabelInfo, NodeLabelsInfo, NodeResponse, NodeToLabelsEntry,
    NodeToLabelsEntryList, NodeToLabelsInfo, NodesResponse, QueueInfo, RemoteException,
    RemoteExceptionResponse, ResourceInfo, ResourceInfoResponse, ResourceOptionInfo,
    SchedulerResponse, SignalContainerCommand, YarnApplicationState,
};
use super::error::{Error, ProbeFailure, excerpt};
use super::submission::BodyFormat;
use super::tolerant::{Parsed, decode};
use super::xml;
use crate::cluster::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use crate::config::settings::{RmSettings, YarnTls};
use crate::kerberos::{Spnego, asks_for_negotiate};
use crate::resources::Resource;

/// Requests one client keeps in flight at most, unless told otherwise.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;

const INFO_PATH: &str = "/ws/v1/cluster/info";
pub(super) const APPS_PATH: &str = "/ws/v1/cluster/apps";
pub(super) const NODES_PATH: &str = "/ws/v1/cluster/nodes";

/// A handle on the ResourceManager(s) of one cluster.
#[derive(Clone)]
pub struct RmClient {
    inner: Arc<Inner>,
}

struct Inner {
    rms: Vec<Rm>,
    user_name: Option<String>,
    http: reqwest::Client,
    /// Kept for the proxy's own client.
    tls: YarnTls,
    /// SPNEGO instead of `user.name`, for a Kerberized RM.
    spnego: Option<Spnego>,
    timeout: Duration,
    /// A larger answer is refused rather than buffered.
    max_response_bytes: usize,
    permits: Semaphore,
    active: Mutex<Active>,
    /// Held while the RMs are probed, so that concurrent failures probe once.
    discovery: tokio::sync::Mutex<()>,
    /// Application -> its current attempt, kept across snapshots.
    attempts: Mutex<HashMap<ApplicationId, ApplicationAttemptId>>,
    requests: AtomicU64,
    failovers: AtomicU64,
}

struct Rm {
    url: Url,
    /// `http://host:port`, as errors and logs print it.
    name: String,
}

#[derive(Clone, Copy, Debug)]
struct Active {
    index: Option<usize>,
    /// Bumped on every change, so a caller reporting a failure of an RM that was
    /// already replaced does not trigger another probe.
    generation: u64,
}

/// Counters since the client was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// HTTP requests sent for typed calls (probes of `/info` while looking for the
    /// active RM are not counted).
    pub requests: u64,
    /// Times the client switched to another RM.
    pub failovers: u64,
}

/// The `/ws/v1/cluster/apps` filters the client uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppsQuery {
    pub states: Vec<YarnApplicationState>,
    pub queue: Option<String>,
    pub application_types: Vec<String>,
    pub application_tags: Vec<String>,
    pub limit: Option<u32>,
    /// `deSelects=resourceRequests`: leave the outstanding requests out.
    pub without_resource_requests: bool,
}

impl AppsQuery {
    pub fn states(states: &[YarnApplicationState]) -> Self {
        AppsQuery {
            states: states.to_vec(),
            ..AppsQuery::default()
        }
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        let join = |v: &[String]| v.join(",");
        if !self.states.is_empty() {
            let s: Vec<String> = self.states.iter().map(|s| s.name().to_string()).collect();
            q.push(("states", join(&s)));
        }
        if let Some(queue) = &self.queue {
            q.push(("queue", queue.clone()));
        }
        if !self.application_types.is_empty() {
            q.push(("applicationTypes", join(&self.application_types)));
        }
        if !self.application_tags.is_empty() {
            q.push(("applicationTags", join(&self.application_tags)));
        }
        if let Some(limit) = self.limit {
            q.push(("limit", limit.to_string()));
        }
        if self.without_resource_requests {
            q.push(("deSelects", "resourceRequests".into()));
        }
        q
    }
}

/// One REST call, replayable against another RM.
struct Call {
    method: Method,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Option<Bytes>,
    /// Safe to send again after a timeout (a GET, or a write naming its target state).
    idempotent: bool,
}

impl Call {
    fn get(path: String, query: Vec<(&'static str, String)>) -> Call {
        Call {
            method: Method::GET,
            path,
            query,
            body: None,
            idempotent: true,
        }
    }

    fn write<B: Serialize>(
        method: Method,
        path: String,
        body: Option<&B>,
        idempotent: bool,
    ) -> Result<Call, Error> {
        let body = body
            .map(|b| serde_json::to_vec(b).map(Bytes::from))
            .transpose()
            .map_err(|e| Error::Config(format!("encoding the body of {path}: {e}")))?;
        Ok(Call {
            method,
            path,
            query: Vec::new(),
            body,
            idempotent,
        })
    }

    /// `GET /ws/v1/cluster/apps`: what warnings name as their source.
    fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// What one RM said to one call.
enum Answer {
    Reply {
        status: StatusCode,
        format: Option<BodyFormat>,
        body: Bytes,
    },
    /// A standby (or an RM that knows no active one): `location` is the active RM's URL
    /// when the standby named it.
    Standby { location: Option<String> },
}

/// Why a send failed, deciding whether to try another RM.
enum Failure {
    /// Nothing reached the RM (connection refused, reset, DNS).
    Unreachable(Error),
    TimedOut(Error),
    /// The connection broke during the exchange (closed or reset), as a pooled
    /// keep-alive connection does when its RM stops: the request may have reached it.
    Dropped(Error),
    Other(Error),
}

/// A reply from the active RM.
struct Served {
    rm: usize,
    generation: u64,
    status: StatusCode,
    /// `None`: neither JSON nor XML by its label (read as JSON, for the error).
    format: Option<BodyFormat>,
    body: Bytes,
}

impl RmClient {
    /// A client for the RMs of `settings` (`yarn.preemptor.rm.*`), with
    /// [`DEFAULT_MAX_IN_FLIGHT`] requests in flight at most. Nothing is contacted yet.
    pub fn new(settings: &RmSettings) -> Result<RmClient, Error> {
        Self::with_max_in_flight(settings, DEFAULT_MAX_IN_FLIGHT)
    }

    pub fn with_max_in_flight(
        settings: &RmSettings,
        max_in_flight: usize,
    ) -> Result<RmClient, Error> {
        if settings.addresses.is_empty() {
            return Err(Error::Config("no ResourceManager address".into()));
        }
        if max_in_flight == 0 {
            return Err(Error::Config("max_in_flight must be at least 1".into()));
        }
        if settings.request_timeout_ms == 0 {
            return Err(Error::Config("the request timeout must be positive".into()));
        }
        let rms = settings
            .addresses
            .iter()
            .map(|a| parse_address(a))
            .collect::<Result<Vec<_>, _>>()?;
        let user_name = settings.user_name.as_ref().map(|u| u.trim().to_string());
        if user_name.as_deref() == Some("") {
            return Err(Error::Config("the user name is empty".into()));
        }
        let max_response_bytes = (1..=RmSettings::LARGEST_MAX_RESPONSE_MB)
            .contains(&settings.max_response_mb)
            .then(|| usize::try_from(settings.max_response_mb << 20).ok())
            .flatten()
            .ok_or_else(|| {
                Error::Config(format!(
                    "the largest response must be 1 to {} MiB, not {}",
                    RmSettings::LARGEST_MAX_RESPONSE_MB,
                    settings.max_response_mb
                ))
            })?;
        let timeout = Duration::from_millis(settings.request_timeout_ms);
        let http = http_client(&settings.tls, timeout, Some(timeout))?;
        let spnego = settings
            .kerberos
            .as_ref()
            .map(Spnego::new)
            .transpose()
            .map_err(|e| Error::Config(format!("yarn.preemptor.rm.kerberos.*: {e}")))?;
        // Under SPNEGO the RM takes the user from the ticket; `user.name` would only
        // confuse a reader of its logs.
        let user_name = user_name.filter(|_| spnego.is_none());
        Ok(RmClient {
            inner: Arc::new(Inner {
                rms,
                user_name,
                http,
                tls: settings.tls.clone(),
                spnego,
                timeout,
                max_response_bytes,
                permits: Semaphore::new(max_in_flight),
                active: Mutex::new(Active {
                    index: None,
                    generation: 0,
                }),
                discovery: tokio::sync::Mutex::new(()),
                attempts: Mutex::new(HashMap::new()),
                requests: AtomicU64::new(0),
                failovers: AtomicU64::new(0),
            }),
        })
    }

    /// The configured RM addresses, normalised to `http://host:port`.
    pub fn addresses(&self) -> Vec<String> {
        self.inner.rms.iter().map(|r| r.name.clone()).collect()
    }

    pub fn request_timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// How the RMs' certificates are verified.
    pub fn tls(&self) -> &YarnTls {
        &self.inner.tls
    }

    pub fn stats(&self) -> ClientStats {
        ClientStats {
            requests: self.inner.requests.load(Ordering::Relaxed),
            failovers: self.inner.failovers.load(Ordering::Relaxed),
        }
    }

    /// The active RM's address, looking for it if none is known.
    pub async fn active_rm(&self) -> Result<String, Error> {
        let (rm, _) = self.current().await?;
        Ok(self.inner.rms[rm].name.clone())
    }

    // ------------------------------------------------------------------ typed calls

    /// `/ws/v1/cluster/info`. A standby answers this path itself (YARN does not
    /// redirect it), so a STANDBY `haState` here also sends the client looking.
    pub async fn cluster_info(&self) -> Result<Parsed<ClusterInfo>, Error> {
        let call = Call::get(INFO_PATH.into(), Vec::new());
        for _ in 0..=self.inner.rms.len() {
            let served = self.execute(&call).await?;
            let info: Parsed<ClusterInfoResponse> = self.parse(&call, &served)?;
            if !is_standby_state(&info.value.cluster_info.ha_state) {
                return Ok(info.map(|r| r.cluster_info));
            }
            self.follow(served.generation, served.rm, None).await?;
        }
        Err(Error::NoActiveRm(self.probe_all().await.1))
    }

    pub async fn cluster_metrics(&self) -> Result<Parsed<ClusterMetrics>, Error> {
        let p: Parsed<ClusterMetricsResponse> = self
            .get("/ws/v1/cluster/metrics".into(), Vec::new())
            .await?;
        Ok(p.map(|r| r.cluster_metrics))
    }

    /// The root of the capacity scheduler's queue tree (`schedulerInfo`). Another
    /// scheduler is an error: its queues have a different shape and meaning.
    pub async fn scheduler(&self) -> Result<Parsed<QueueInfo>, Error> {
        let p: Parsed<SchedulerResponse> = self
            .get("/ws/v1/cluster/scheduler".into(), Vec::new())
            .await?;
        match p.value.scheduler.scheduler_info.kind.as_deref() {
            None | Some(CAPACITY_SCHEDULER_TYPE) => Ok(p.map(|r| r.scheduler.scheduler_info)),
            Some(other) => Err(Error::UnsupportedScheduler(other.to_string())),
        }
    }

    pub async fn apps(&self, query: &AppsQuery) -> Result<Parsed<Vec<AppInfo>>, Error> {
        let p: Parsed<AppsResponse> = self.get(APPS_PATH.into(), query.pairs()).await?;
        Ok(p.map(AppsResponse::into_list))
    }

    pub async fn app(&self, app: &ApplicationId) -> Result<Parsed<AppInfo>, Error> {
        let p: Parsed<AppResponse> = self.get(app_path(app, ""), Vec::new()).await?;
        Ok(p.map(|r| r.app))
    }

    pub async fn app_attempts(
        &self,
        app: &ApplicationId,
    ) -> Result<Parsed<Vec<AppAttemptInfo>>, Error> {
        let p: Parsed<AppAttemptsResponse> =
            self.get(app_path(app, "/appattempts"), Vec::new()).await?;
        Ok(p.map(|r| r.app_attempts.app_attempt))
    }

    /// The live containers of an attempt (Hadoop 3.x; older RMs answer 404).
    pub async fn attempt_containers(
        &self,
        attempt: &ApplicationAttemptId,
    ) -> Result<Parsed<Vec<ContainerInfo>>, Error> {
        let p: Parsed<AttemptContainersResponse> =
            self.get(containers_path(attempt), Vec::new()).await?;
        Ok(p.map(AttemptContainersResponse::into_list))
    }

    pub async fn nodes(&self) -> Result<Parsed<Vec<NodeInfo>>, Error> {
        let p: Parsed<NodesResponse> = self.get(NODES_PATH.into(), Vec::new()).await?;
        Ok(p.map(NodesResponse::into_list))
    }

    pub async fn node(&self, node: &NodeId) -> Result<Parsed<NodeInfo>, Error> {
        let p: Parsed<NodeResponse> = self.get(node_path(node, ""), Vec::new()).await?;
        Ok(p.map(|r| r.node))
    }

    /// `POST /apps/new-application`: an application id and the largest container.
    pub async fn new_application(&self) -> Result<NewApplication, Error> {
        let path = "/ws/v1/cluster/apps/new-application".to_string();
        // Not replayed after a timeout: each call takes an id.
        let call = Call::write::<()>(Method::POST, path, None, false)?;
        let served = self.execute_ok(&call).await?;
        let p: Parsed<NewApplication> = self.parse(&call, &served)?;
        Ok(p.value)
    }

    /// `POST /apps`: submits an application (its id from
    /// [`RmClient::new_application`]). The RM refuses an id twice, so this is not
    /// replayed after a timeout either.
    pub async fn submit_application(
        &self,
        context: &ApplicationSubmissionContext,
    ) -> Result<ApplicationId, Error> {
        let id: ApplicationId = context
            .application_id
            .parse()
            .map_err(|e| Error::Config(format!("submitting: {e}")))?;
        let path = "/ws/v1/cluster/apps".to_string();
        let call = Call::write(Method::POST, path, Some(context), false)?;
        self.execute_ok(&call).await?;
        Ok(id)
    }

    /// `POST /nodes/{id}/resource`: set the node's total (advertised) resource.
    /// `over_commit_timeout` is how long YARN waits before preempting containers that
    /// no longer fit; `None` sends -1, never.
    pub async fn update_node_resource(
        &self,
        node: &NodeId,
        total: Resource,
        over_commit_timeout: Option<Duration>,
    ) -> Result<ResourceInfo, Error> {
        let body = ResourceOptionInfo {
            resource: ResourceInfo::from(total),
            over_commit_timeout: over_commit_timeout
                .map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        };
        let call = Call::write(
            Method::POST,
            node_path(node, "/resource"),
            Some(&body),
            true,
        )?;
        let served = self.execute_ok(&call).await?;
        let p: Parsed<ResourceInfoResponse> = self.parse(&call, &served)?;
        Ok(p.value.resource_info)
    }

    /// `POST /containers/{id}/signal/{command}`.
    pub async fn signal_container(
        &self,
        container: &ContainerId,
        command: SignalContainerCommand,
    ) -> Result<(), Error> {
        let path = format!("/ws/v1/cluster/containers/{container}/signal/{command}");
        // A second SIGKILL is harmless, but a repeated thread dump or SIGTERM is not
        // what was asked for: not replayed after a timeout.
        let call = Call::write::<()>(Method::POST, path, None, false)?;
        self.execute_ok(&call).await.map(|_| ())
    }

    /// `PUT /apps/{id}/state {"state":"KILLED"}`: the state the RM reports back (the
    /// kill is asynchronous: `ACCEPTED`/`RUNNING` with 202 until it is done, then
    /// `KILLED`).
    pub async fn kill_app(&self, app: &ApplicationId) -> Result<String, Error> {
        let body = AppStateInfo {
            state: YarnApplicationState::Killed.name().into(),
        };
        let call = Call::write(Method::PUT, app_path(app, "/state"), Some(&body), true)?;
        let served = self.execute_ok(&call).await?;
        let p: Parsed<AppStateInfo> = self.parse(&call, &served)?;
        Ok(p.value.state)
    }

    /// The cluster's node labels (`GET /get-node-labels`).
    pub async fn node_labels(&self) -> Result<Parsed<Vec<NodeLabelInfo>>, Error> {
        let p: Parsed<NodeLabelsInfo> = self
            .get("/ws/v1/cluster/get-node-labels".into(), Vec::new())
            .await?;
        Ok(p.map(|l| l.node_label_info))
    }

    /// `POST /add-node-labels`: labels must exist before nodes can carry them.
    pub async fn add_node_labels(&self, labels: &[NodeLabelInfo]) -> Result<(), Error> {
        let body = NodeLabelsInfo {
            node_label_info: labels.to_vec(),
        };
        let path = "/ws/v1/cluster/add-node-labels".to_string();
        let call = Call::write(Method::POST, path, Some(&body), true)?;
        self.execute_ok(&call).await.map(|_| ())
    }

    /// `POST /remove-node-labels?labels=..`: the RM refuses while a queue names a label
    /// in its `accessible-node-labels`.
    pub async fn remove_node_labels(&self, labels: &[String]) -> Result<(), Error> {
        let path = "/ws/v1/cluster/remove-node-labels".to_string();
        let mut call = Call::write::<()>(Method::POST, path, None, true)?;
        call.query = labels.iter().map(|l| ("labels", l.clone())).collect();
        self.execute_ok(&call).await.map(|_| ())
    }

    /// Each labelled node with its labels (`GET /get-node-to-labels`).
    pub async fn node_to_labels(&self) -> Result<Parsed<Vec<(NodeId, Vec<String>)>>, Error> {
        let p: Parsed<NodeToLabelsInfo> = self
            .get("/ws/v1/cluster/get-node-to-labels".into(), Vec::new())
            .await?;
        Ok(p.map(|m| {
            m.node_to_labels
                .entry
                .into_iter()
                .map(|e| {
                    let labels = e.value.node_label_info.into_iter().map(|l| l.name);
                    (NodeId::new(e.key), labels.collect())
                })
                .collect()
        }))
    }

    /// `POST /replace-node-to-labels`: each listed node gets exactly these labels.
    pub async fn replace_node_to_labels(
        &self,
        assignments: &[(NodeId, Vec<String>)],
    ) -> Result<(), Error> {
        let body = NodeToLabelsEntryList {
            node_to_labels: assignments
                .iter()
                .map(|(node, labels)| NodeToLabelsEntry {
                    node_id: node.to_string(),
                    labels: labels.clone(),
                })
                .collect(),
        };
        let path = "/ws/v1/cluster/replace-node-to-labels".to_string();
        let call = Call::write(Method::POST, path, Some(&body), true)?;
        self.execute_ok(&call).await.map(|_| ())
    }

    // ------------------------------------------------------------------ plumbing

    async fn get<T: DeserializeOwned + Default>(
        &self,
        path: String,
        query: Vec<(&'static str, String)>,
    ) -> Result<Parsed<T>, Error> {
        let call = Call::get(path, query);
        let served = self.execute_ok(&call).await?;
        self.parse(&call, &served)
    }

    fn parse<T: DeserializeOwned + Default>(
        &self,
        call: &Call,
        served: &Served,
    ) -> Result<Parsed<T>, Error> {
        let (method, url) = (call.method.to_string(), self.shown_url(served.rm, call));
        let reason =
            |e: &dyn std::fmt::Display| format!("{e}; it starts {:?}", body_start(&served.body));
        match served.format {
            Some(BodyFormat::Xml) => {
                xml::decode(&served.body, &call.describe()).map_err(|e| Error::NotXml {
                    method,
                    url,
                    reason: reason(&e),
                })
            }
            _ => decode(&served.body, &call.describe()).map_err(|e| Error::NotJson {
                method,
                url,
                reason: reason(&e),
            }),
        }
    }

    /// Like [`RmClient::execute`], turning a non-2xx answer into [`Error::Remote`].
    async fn execute_ok(&self, call: &Call) -> Result<Served, Error> {
        let served = self.execute(call).await?;
        if served.status.is_success() {
            return Ok(served);
        }
        let remote = read_remote_exception(&served.body, served.format)
            .map(|r| r.remote_exception)
            .filter(|r| !r.exception.is_empty() || !r.message.is_empty())
            .map(Box::new);
        Err(Error::Remote {
            method: call.method.to_string(),
            url: self.shown_url(served.rm, call),
            status: served.status.as_u16(),
            remote,
            body: excerpt(&String::from_utf8_lossy(&served.body), 300),
        })
    }

    /// Sends `call` to the active RM, following a standby's redirect and failing over
    /// from an RM that does not answer, trying each RM at most once more.
    async fn execute(&self, call: &Call) -> Result<Served, Error> {
        let mut last = None;
        for _ in 0..=self.inner.rms.len() {
            let (rm, generation) = self.current().await?;
            match self.send(rm, call).await {
                Ok(Answer::Reply {
                    status,
                    format,
                    body,
                }) => {
                    return Ok(Served {
                        rm,
                        generation,
                        status,
                        format,
                        body,
                    });
                }
                Ok(Answer::Standby { location }) => {
                    tracing::info!(rm = %self.inner.rms[rm].name, path = %call.path,
                        "the ResourceManager answered as a standby; following the active one");
                    self.follow(generation, rm, location.as_deref()).await?;
                    last = Some(Error::NoActiveRm(vec![ProbeFailure {
                        address: self.inner.rms[rm].name.clone(),
                        reason: "answered as a standby".into(),
                    }]));
                }
                Err(Failure::Unreachable(e)) => {
                    tracing::warn!(rm = %self.inner.rms[rm].name, error = %e,
                        "the ResourceManager is unreachable; failing over");
                    self.rediscover(generation).await?;
                    last = Some(e);
                }
                Err(Failure::TimedOut(e)) if call.idempotent => {
                    tracing::warn!(rm = %self.inner.rms[rm].name, error = %e,
                        "the ResourceManager timed out; checking which RM is active");
                    // Waiting again on the same slow RM would only double the delay.
                    if self.rediscover(generation).await?.0 == rm {
                        return Err(e);
                    }
                    last = Some(e);
                }
                Err(Failure::Dropped(e)) if call.idempotent => {
                    tracing::warn!(rm = %self.inner.rms[rm].name, error = %e,
                        "the connection to the ResourceManager broke; checking which RM is active");
                    // The active RM again (a stale connection) is asked once more, on a
                    // new connection.
                    self.rediscover(generation).await?;
                    last = Some(e);
                }
                Err(Failure::TimedOut(e) | Failure::Dropped(e) | Failure::Other(e)) => {
                    return Err(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::NoActiveRm(Vec::new())))
    }

    async fn send(&self, rm: usize, call: &Call) -> Result<Answer, Failure> {
        let url = self.url(rm, call);
        let shown = self.shown_url(rm, call);
        let transport = |e: reqwest::Error| {
            let (connect, timeout) = (e.is_connect(), e.is_timeout());
            let dropped = e.is_request() || e.is_body();
            let err = Error::Transport {
                method: call.method.to_string(),
                url: shown.clone(),
                reason: describe_reqwest(&e),
                source: Some(e),
            };
            if connect {
                Failure::Unreachable(err)
            } else if timeout {
                Failure::TimedOut(err)
            } else if dropped {
                Failure::Dropped(err)
            } else {
                Failure::Other(err)
            }
        };
        // Bounded concurrency; a permit is never held across a failover probe.
        let _permit = self.inner.permits.acquire().await.ok();
        self.inner.requests.fetch_add(1, Ordering::Relaxed);
        let build = || {
            let req = self
                .inner
                .http
                .request(call.method.clone(), url.clone())
                .header(ACCEPT, "application/json");
            match &call.body {
                Some(body) => req
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone()),
                None => req,
            }
        };
        let sent = crate::kerberos::send_with(self.inner.spnego.as_ref(), &url, build)
            .await
            .map_err(|source| {
                Failure::Other(Error::Kerberos {
                    method: call.method.to_string(),
                    url: shown.clone(),
                    source: Box::new(source),
                })
            })?;
        let resp = sent.map_err(&transport)?;
        let status = resp.status();
        if status == StatusCode::TEMPORARY_REDIRECT {
            let location = header_str(resp.headers(), LOCATION);
            return Ok(Answer::Standby { location });
        }
        let content_type = header_str(resp.headers(), CONTENT_TYPE);
        let limit = self.inner.max_response_bytes;
        let body = read_limited(resp, limit).await.map_err(|e| match e {
            ReadError::Http(e) => transport(e),
            ReadError::TooLarge => Failure::Other(Error::TooLarge {
                method: call.method.to_string(),
                url: shown.clone(),
                limit,
            }),
        })?;
        if may_be_standby_page(content_type.as_deref(), &body) {
            return Ok(Answer::Standby { location: None });
        }
        let format = body_format(content_type.as_deref(), &body);
        Ok(Answer::Reply {
            status,
            format,
            body,
        })
    }

    fn url(&self, rm: usize, call: &Call) -> Url {
        let mut url = self.inner.rms[rm].url.clone();
        url.set_path(&call.path);
        let user = self.inner.user_name.as_deref();
        if !call.query.is_empty() || user.is_some() {
            let mut q = url.query_pairs_mut();
            for (k, v) in &call.query {
                q.append_pair(k, v);
            }
            if let Some(u) = user {
                q.append_pair("user.name", u);
            }
        }
        url
    }

    /// The URL for messages: no query (it only repeats the filters and the user).
    fn shown_url(&self, rm: usize, call: &Call) -> String {
        format!("{}{}", self.inner.rms[rm].name, call.path)
    }

    fn active(&self) -> MutexGuard<'_, Active> {
        // A panic elsewhere cannot leave an Active half-written: it is Copy.
        self.inner.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The active RM and the generation it was chosen in.
    async fn current(&self) -> Result<(usize, u64), Error> {
        let a = *self.active();
        match a.index {
            Some(i) => Ok((i, a.generation)),
            None => self.rediscover(a.generation).await,
        }
    }

    /// After a standby answer from `from`: go where it points if that is one of ours,
    /// else look.
    async fn follow(
        &self,
        generation: u64,
        from: usize,
        location: Option<&str>,
    ) -> Result<(usize, u64), Error> {
        let target = location
            .and_then(|l| Url::parse(l).ok())
            .and_then(|l| self.inner.rms.iter().position(|r| same_origin(&r.url, &l)))
            .filter(|&i| i != from);
        if let Some(i) = target {
            let mut a = self.active();
            if a.generation == generation {
                a.index = Some(i);
                a.generation += 1;
                self.inner.failovers.fetch_add(1, Ordering::Relaxed);
                tracing::info!(rm = %self.inner.rms[i].name, "following the active ResourceManager");
            }
            return Ok((a.index.unwrap_or(i), a.generation));
        }
        self.rediscover(generation).await
    }

    /// Probes every RM and makes the active one current, unless another caller already
    /// did so since `generation`.
    async fn rediscover(&self, generation: u64) -> Result<(usize, u64), Error> {
        let _probing = self.inner.discovery.lock().await;
        {
            let a = self.active();
            if a.generation != generation
                && let Some(i) = a.index
            {
                return Ok((i, a.generation));
            }
        }
        let (found, failures) = self.probe_all().await;
        let mut a = self.active();
        let before = a.index;
        a.index = found;
        a.generation += 1;
        match found {
            Some(i) => {
                if before.is_some() && before != Some(i) {
                    self.inner.failovers.fetch_add(1, Ordering::Relaxed);
                }
                tracing::info!(rm = %self.inner.rms[i].name, "active ResourceManager");
                Ok((i, a.generation))
            }
            None => Err(Error::NoActiveRm(failures)),
        }
    }

    /// Asks every RM's `/info` at once. ACTIVE wins; an RM without HA (no `haState`)
    /// is taken when no RM says ACTIVE.
    async fn probe_all(&self) -> (Option<usize>, Vec<ProbeFailure>) {
        let answers = join_all((0..self.inner.rms.len()).map(|i| self.probe(i))).await;
        let mut failures = Vec::new();
        let mut active = None;
        let mut without_ha = None;
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(state) if state.eq_ignore_ascii_case("ACTIVE") => {
                    active = active.or(Some(i));
                }
                Ok(state) if state.is_empty() => without_ha = without_ha.or(Some(i)),
                Ok(state) => failures.push(ProbeFailure {
                    address: self.inner.rms[i].name.clone(),
                    reason: format!("haState {state}"),
                }),
                Err(reason) => failures.push(ProbeFailure {
                    address: self.inner.rms[i].name.clone(),
                    reason,
                }),
            }
        }
        (active.or(without_ha), failures)
    }

    /// One RM's `haState` ("" when it reports none), or why it could not be read.
    async fn probe(&self, rm: usize) -> Result<String, String> {
        let call = Call::get(INFO_PATH.into(), Vec::new());
        let url = self.url(rm, &call);
        let build = || {
            self.inner
                .http
                .get(url.clone())
                .header(ACCEPT, "application/json")
        };
        let resp = crate::kerberos::send_with(self.inner.spnego.as_ref(), &url, build)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| describe_reqwest(&e))?;
        let status = resp.status();
        if status == StatusCode::TEMPORARY_REDIRECT {
            return Err("standby (redirects)".into());
        }
        let content_type = header_str(resp.headers(), CONTENT_TYPE);
        if status == StatusCode::UNAUTHORIZED && asks_for_negotiate(resp.headers()) {
            return Err(match &self.inner.spnego {
                None => "HTTP 401: the RM asks for Kerberos (SPNEGO); set yarn.preemptor.rm.kerberos.principal and yarn.preemptor.rm.kerberos.keytab".into(),
                Some(s) => format!("HTTP 401: the RM refused the ticket of {}", s.principal()),
            });
        }
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        let body = read_limited(resp, 1 << 20).await.map_err(|e| match e {
            ReadError::Http(e) => describe_reqwest(&e),
            ReadError::TooLarge => "oversized /info answer".into(),
        })?;
        ha_state_of(content_type.as_deref(), &body)
    }

    pub(super) fn attempt_cache(
        &self,
    ) -> MutexGuard<'_, HashMap<ApplicationId, ApplicationAttemptId>> {
        self.inner
            .attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The address of the RM currently believed active, if any.
    pub fn current_rm(&self) -> Option<String> {
        self.active().index.map(|i| self.inner.rms[i].name.clone())
    }

    // -------------------------------------------------- for the reverse proxy

    /// The active RM's base URL and its generation (for [`RmClient::report_failure`]).
    pub(super) async fn upstream(&self) -> Result<(Url, u64), Error> {
        let (rm, generation) = self.current().await?;
        Ok((self.inner.rms[rm].url.clone(), generation))
    }

    /// The upstream chosen in `generation` failed or answered as a standby: follow
    /// `location` or probe again.
    pub(super) async fn report_failure(
        &self,
        generation: u64,
        upstream: &Url,
        location: Option<&str>,
    ) -> Result<(Url, u64), Error> {
        let from = self
            .inner
            .rms
            .iter()
            .position(|r| same_origin(&r.url, upstream))
            .unwrap_or(usize::MAX);
        let (rm, generation) = self.follow(generation, from, location).await?;
        Ok((self.inner.rms[rm].url.clone(), generation))
    }
}

/// An HTTP client for the RMs: `connect` bounds connecting, `total` (if any) a whole
/// exchange. Redirects are not followed: a standby's 307 is information, to be
/// followed only to a configured RM.
pub(super) fn http_client(
    tls: &YarnTls,
    connect: Duration,
    total: Option<Duration>,
) -> Result<reqwest::Client, Error> {
    let mut builder = crate::tls::yarn_client_builder(tls, "the RM CA file")
        .map_err(|e| Error::Config(e.to_string()))?
        .connect_timeout(connect)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    if let Some(t) = total {
        builder = builder.timeout(t);
    }
    builder
        .build()
        .map_err(|e| Error::Config(format!("building the HTTP client: {e}")))
}

fn is_standby_state(state: &str) -> bool {
    let s = state.trim();
    s.eq_ignore_ascii_case("STANDBY") || s.eq_ignore_ascii_case("INITIALIZING")
}

fn parse_address(address: &str) -> Result<Rm, Error> {
    let bad =
        |reason: &str| Error::Config(format!("ResourceManager address {address:?}: {reason}"));
    let with_scheme = if address.contains("://") {
        address.trim().to_string()
    } else {
        format!("http://{}", address.trim())
    };
    let url = Url::parse(&with_scheme).map_err(|e| bad(&e.to_string()))?;
    let scheme = url.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(bad("expected http:// or https://"));
    }
    let host = url.host_str().ok_or_else(|| bad("no host"))?;
    if !(url.path().is_empty() || url.path() == "/") || url.query().is_some() {
        return Err(bad("expected http(s)://host:port with no path"));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    Ok(Rm {
        name: format!("{scheme}://{host}:{port}"),
        url,
    })
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
        && a.port_or_known_default() == b.port_or_known_default()
}

/// `/ws/v1/cluster/apps/{id}{rest}`.
fn app_path(app: &ApplicationId, rest: &str) -> String {
    format!("{APPS_PATH}/{app}{rest}")
}

pub(super) fn containers_path(attempt: &ApplicationAttemptId) -> String {
    app_path(
        &attempt.application,
        &format!("/appattempts/{attempt}/containers"),
    )
}

fn node_path(node: &NodeId, rest: &str) -> String {
    format!("/ws/v1/cluster/nodes/{}{rest}", segment(node.as_str()))
}

/// A path segment from a free-form id: anything but unreserved characters and ':' is
/// percent-encoded, so an odd node id cannot change the path.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn header_str(headers: &HeaderMap, name: reqwest::header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The format of an answer by its `Content-Type` (`application/json`; `application/xml`
/// or `text/xml`, as Jersey, or a gateway such as Knox, may send even when JSON was
/// asked for). Without a label, by its first character.
fn body_format(content_type: Option<&str>, body: &[u8]) -> Option<BodyFormat> {
    match content_type {
        Some(t) => labelled_format(t),
        None => match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => Some(BodyFormat::Json),
            Some(b'<') => Some(BodyFormat::Xml),
            _ => None,
        },
    }
}

fn labelled_format(content_type: &str) -> Option<BodyFormat> {
    let t = content_type.to_ascii_lowercase();
    if t.contains("json") {
        Some(BodyFormat::Json)
    } else if t.contains("xml") {
        Some(BodyFormat::Xml)
    } else {
        None
    }
}

/// A standby's page is plain text; an answer labelled JSON or XML is taken at its word
/// (its diagnostics may well mention an "active RM").
fn may_be_standby_page(content_type: Option<&str>, body: &[u8]) -> bool {
    content_type.and_then(labelled_format).is_none() && looks_like_standby_page(body)
}

/// The `haState` of an `/info` answer ("" when it has none), or why it is not one.
fn ha_state_of(content_type: Option<&str>, body: &[u8]) -> Result<String, String> {
    if may_be_standby_page(content_type, body) {
        return Err("standby".into());
    }
    let info: ClusterInfoResponse = match body_format(content_type, body) {
        Some(BodyFormat::Xml) => xml::decode(body, INFO_PATH)
            .map(|p| p.value)
            .map_err(|e| e.to_string()),
        _ => serde_json::from_slice(body).map_err(|e| e.to_string()),
    }
    .map_err(|e| format!("unreadable /info ({e})"))?;
    Ok(info.cluster_info.ha_state.trim().to_string())
}

/// YARN's `RemoteException` in an error answer, JSON or XML, if it holds one.
fn read_remote_exception(
    body: &[u8],
    format: Option<BodyFormat>,
) -> Option<RemoteExceptionResponse> {
    match format {
        Some(BodyFormat::Xml) => xml::to_value(body)
            .ok()
            .filter(|(root, _)| root == "RemoteException")
            .and_then(|(_, v)| xml::read::<RemoteException>(&v).ok())
            .map(|remote_exception| RemoteExceptionResponse { remote_exception }),
        _ => serde_json::from_slice(body).ok(),
    }
}

/// RMWebAppFilter's text when a standby cannot redirect: "This is standby RM. ...",
/// "Can not find any active RM. ..." or "There is no active RM right now."
pub(super) fn looks_like_standby_page(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]);
    head.contains("standby RM") || head.contains("active RM")
}

fn body_start(body: &[u8]) -> String {
    excerpt(&String::from_utf8_lossy(&body[..body.len().min(200)]), 80)
}

/// reqwest's message with its causes ("error sending request: ... Connection refused"),
/// its URL without query or credentials: the proxy's errors are logged, and a query can
/// carry a delegation token.
pub(crate) fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut out = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else {
        e.to_string()
    };
    if let Some(url) = e.url() {
        let mut shown = url.clone();
        shown.set_query(None);
        shown.set_fragment(None);
        // Fails only for URLs that cannot carry credentials, which then have none.
        let _ = shown.set_password(None);
        let _ = shown.set_username("");
        out = out.replace(url.as_str(), shown.as_str());
    }
    crate::append_causes(&mut out, std::error::Error::source(e));
    out
}

enum ReadError {
    Http(reqwest::Error),
    TooLarge,
}

async fn read_limited(mut resp: reqwest::Response, limit: usize) -> Result<Bytes, ReadError> {
    if resp
        .content_length()
        .is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX))
    {
        return Err(ReadError::TooLarge);
    }
    let mut buf = BytesMut::new();
    while let Some(chunk) = resp.chunk().await.map_err(ReadError::Http)? {
        if buf.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(addresses: &[&str]) -> RmSettings {
        RmSettings {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            user_name: Some("yarn".into()),
            request_timeout_ms: 1000,
            max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
            tls: YarnTls::default(),
            kerberos: None,
        }
    }

    #[test]
    fn addresses_are_normalised_and_bad_ones_refused() {
        let c = RmClient::new(&settings(&["rm1:8088", "http://RM2:8088/", "https://rm3"])).unwrap();
        assert_eq!(
            c.addresses(),
            ["http://rm1:8088", "http://rm2:8088", "https://rm3:443"]
        );
        for bad in [
            "ftp://rm:8090",
            "http://rm:8088/cluster",
            "http://:8088",
            "",
        ] {
            let e = RmClient::new(&settings(&[bad])).err().unwrap();
            assert!(matches!(e, Error::Config(_)), "{bad}: {e}");
        }
        assert!(RmClient::new(&settings(&[])).is_err());
        let mut s = settings(&["rm:8088"]);
        s.user_name = Some("  ".into());
        assert!(RmClient::new(&s).is_err());
    }

    #[test]
    fn urls_carry_the_filters_and_the_user() {
        let c = RmClient::new(&settings(&["rm:8088"])).unwrap();
        let q = AppsQuery {
            states: vec![
                YarnApplicationState::Running,
                YarnApplicationState::Accepted,
            ],
            without_resource_requests: true,
            ..AppsQuery::default()
        };
        let url = c.url(0, &Call::get("/ws/v1/cluster/apps".into(), q.pairs()));
        assert_eq!(
            url.as_str(),
            "http://rm:8088/ws/v1/cluster/apps?states=RUNNING%2CACCEPTED&deSelects=resourceRequests&user.name=yarn"
        );
        let node = NodeId::new("host-1.example.com:8041/../x?y");
        assert_eq!(
            node_path(&node, "/resource"),
            "/ws/v1/cluster/nodes/host-1.example.com:8041%2F..%2Fx%3Fy/resource"
        );
    }

    #[test]
    fn standby_pages_are_recognised() {
        assert!(looks_like_standby_page(
            b"This is standby RM. The redirect url is: /ws/v1/cluster/apps\n"
        ));
        assert!(looks_like_standby_page(
            b"There is no active RM right now.\nHA Zookeeper Connection State: x"
        ));
        assert!(!looks_like_standby_page(b"{\"apps\":null}"));
        assert!(is_standby_state("STANDBY") && !is_standby_state("ACTIVE"));
    }

    /// A stand-in RM that answers every path in XML, as a gateway may even when JSON
    /// is asked for.
    async fn xml_rm() -> (String, tokio::task::JoinHandle<()>) {
        use axum::http::{HeaderValue, header};
        use axum::response::IntoResponse;
        let xml = |status: StatusCode, ctype: &'static str, body: &'static str| {
            let mut r = (status, body).into_response();
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
            r
        };
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| async move {
            match uri.path() {
                "/ws/v1/cluster/info" => xml(
                    StatusCode::OK,
                    "application/xml",
                    r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><clusterInfo><id>1</id><haState>ACTIVE</haState></clusterInfo>"#,
                ),
                "/ws/v1/cluster/apps" => xml(
                    StatusCode::OK,
                    "text/xml; charset=utf-8",
                    r#"<apps><app><id>application_1_0001</id><queue>short</queue><state>RUNNING</state>
                      <diagnostics>no active RM was harmed</diagnostics><allocatedMB>1536</allocatedMB>
                      <resourceRequests><priority>20</priority><capability><memory>1024</memory><vCores>1</vCores></capability><numContainers>2</numContainers></resourceRequests>
                      </app></apps>"#,
                ),
                "/ws/v1/cluster/scheduler" => xml(
                    StatusCode::OK,
                    "application/xml",
                    r#"<scheduler><schedulerInfo xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="capacityScheduler">
                      <queueName>root</queueName><capacity>100.0</capacity><queues>
                      <queue xsi:type="capacitySchedulerLeafQueueInfo"><queueName>short</queueName><capacity>25.0</capacity></queue>
                      </queues></schedulerInfo></scheduler>"#,
                ),
                "/ws/v1/cluster/nodes/h1:8041/resource" => xml(
                    StatusCode::OK,
                    "application/xml",
                    r#"<resourceInfo><memory>8192</memory><vCores>6</vCores></resourceInfo>"#,
                ),
                _ => xml(
                    StatusCode::NOT_FOUND,
                    "application/xml",
                    r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><RemoteException><exception>NotFoundException</exception><message>java.lang.Exception: app with id: application_1_0002 not found</message><javaClassName>org.apache.hadoop.yarn.webapp.NotFoundException</javaClassName></RemoteException>"#,
                ),
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, task)
    }

    #[tokio::test]
    async fn xml_answers_read_as_json_ones_do() {
        let (url, server) = xml_rm().await;
        let c = RmClient::new(&settings(&[&url])).unwrap();
        assert_eq!(c.active_rm().await.unwrap(), url);

        let apps = c.apps(&AppsQuery::default()).await.unwrap();
        assert!(apps.warnings.is_empty(), "{:?}", apps.warnings);
        let app = &apps.value[0];
        assert_eq!(
            (app.id.as_str(), app.queue.as_str()),
            ("application_1_0001", "short")
        );
        assert_eq!(app.state, YarnApplicationState::Running);
        assert_eq!(app.allocated_mb, 1536);
        let rr = app.resource_requests.as_deref().unwrap();
        assert_eq!((rr[0].priority, rr[0].num_containers), (20, 2));
        assert_eq!(rr[0].capability.to_resource(), Resource::new(1024, 1));

        let root = c.scheduler().await.unwrap().value;
        assert_eq!(root.kind.as_deref(), Some(CAPACITY_SCHEDULER_TYPE));
        let short = &root.children()[0];
        assert!(short.is_leaf());
        assert_eq!((short.queue_name.as_str(), short.capacity), ("short", 25.0));

        let total = c
            .update_node_resource(&NodeId::new("h1:8041"), Resource::new(8192, 6), None)
            .await
            .unwrap();
        assert_eq!(total.to_resource(), Resource::new(8192, 6));

        let app: ApplicationId = "application_1_0002".parse().unwrap();
        let e = c.app(&app).await.unwrap_err();
        assert!(e.is_not_found(), "{e}");
        let remote = e.remote_exception().expect("the XML RemoteException");
        assert_eq!(remote.exception, "NotFoundException");
        assert_eq!(
            remote.java_class_name,
            "org.apache.hadoop.yarn.webapp.NotFoundException"
        );
        server.abort();
    }

    #[test]
    fn the_format_comes_from_the_label_or_the_first_character() {
        let f = |ct: Option<&str>, body: &[u8]| body_format(ct, body);
        assert_eq!(f(Some("application/json"), b"<x/>"), Some(BodyFormat::Json));
        assert_eq!(f(Some("application/xml"), b"{}"), Some(BodyFormat::Xml));
        assert_eq!(
            f(Some("Text/XML; charset=UTF-8"), b""),
            Some(BodyFormat::Xml)
        );
        assert_eq!(f(Some("text/plain"), b"<x/>"), None);
        assert_eq!(f(None, b" \n<apps/>"), Some(BodyFormat::Xml));
        assert_eq!(f(None, b"{\"apps\":null}"), Some(BodyFormat::Json));
        assert_eq!(f(None, b"This is standby RM."), None);
        let page = b"<html>This is standby RM. The redirect url is: /x</html>";
        assert!(may_be_standby_page(None, page));
        assert!(may_be_standby_page(Some("text/plain"), page));
        assert!(!may_be_standby_page(Some("application/xml"), page));
        let info = b"<clusterInfo><id>1</id><haState>STANDBY</haState></clusterInfo>";
        assert_eq!(
            ha_state_of(Some("text/xml"), info).as_deref(),
            Ok("STANDBY")
        );
        assert_eq!(ha_state_of(None, info).as_deref(), Ok("STANDBY"));
        let info = br#"{"clusterInfo":{"haState":"ACTIVE"}}"#;
        assert_eq!(ha_state_of(None, info).as_deref(), Ok("ACTIVE"));
        assert!(ha_state_of(Some("application/xml"), b"<clusterInfo>").is_err());
        let r = read_remote_exception(b"<html><body>oops</body></html>", Some(BodyFormat::Xml));
        assert_eq!(r, None);
    }
}
