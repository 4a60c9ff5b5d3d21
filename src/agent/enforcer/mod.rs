//! Suspend, shrink, resume and kill, with the ordering, records and checks that make them
//! safe to run on a production NodeManager.
//!
//! Every action on a container runs under that container's lock. Before a limit changes,
//! the container's original limits and the action are written to the state store; after,
//! the outcome. Narrowing goes CPU first (a task that keeps dirtying memory cannot be
//! reclaimed quickly), waits until cpu.stat shows the throttle, then lowers memory: a
//! suspend in one real-time page-out and write ([`crate::agent::reclaim::reclaim_for_suspend`]),
//! a shrink gradually; both retry "device or resource busy" with smaller steps. Widening
//! goes memory first.
//!
//! [`narrow`] holds that narrowing sequence; [`watch`] what the agent does unasked (the
//! lease, swap, Docker's events and the host's container list).

mod narrow;
mod watch;

use backon::{BackoffBuilder, ExponentialBuilder};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tracing::Instrument;

use super::api::{
    Action, ActionKind, ActionRequest, ActionResult, ActionTimings, AgentEvent, ContainerStatus,
    LeaseStatus,
};
use super::cgroup::{CgroupDirs, CgroupError, CgroupMounts, read_proc_cgroup};
use super::docker::{DockerClient, DockerError, DockerEvent, Inspected};
use super::host::{HostBackend, HostContainers, HostError};
use super::lease::{Lease, LeaseError};
use super::limits::{
    CgroupLimits, CgroupVersion, DockerCpu, DockerLimits, MIB, MappingError, OriginalLimits,
    RealTarget, validate_target,
};
use super::metrics::{self, Metrics};
use super::nodemanager::{NodeManager, NodeManagerError};
use super::store::{LoadReport, StateStore, StoreError, StoredContainer};
use super::unix_ms;
use super::writer::{LimitWriter, Outcome, WriteError, WritePath, WriteTarget};
use crate::cluster::{ContainerId, ContainerState};
use crate::resources::{Limits, Resource};
use crate::sync::lock;

/// Smallest gap a memory step leaves between the limit and the container's usage.
const STEP_HEADROOM: u64 = 32 * MIB;
/// The longest wait between two tries of a memory cut the kernel refused as busy.
const BUSY_DELAY_MAX: Duration = Duration::from_millis(500);

/// CPU of a container frozen because it was swapping: BIG-C's 1% of a core.
pub const FREEZE_CPU_MILLIS: u32 = 10;

/// The agent's one error type at its API boundary; `server` maps it to HTTP.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Mapping(#[from] MappingError),
    #[error("no container {0} on this node")]
    UnknownContainer(String),
    #[error(
        "{reference} is Docker container {name:?}, whose name is not a YARN container id; the agent never touches it"
    )]
    NotYarn { reference: String, name: String },
    #[error(
        "{container} is not on this node: NodeManager {nodemanager} does not list it; the agent never touches it"
    )]
    NotOnThisNode {
        container: ContainerId,
        nodemanager: String,
    },
    #[error(transparent)]
    NodeManager(#[from] NodeManagerError),
    #[error(
        "no live lease: a controller must renew the lease (POST /v1/lease) before suspending or shrinking"
    )]
    NoLease,
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error("{0}")]
    Conflict(String),
    #[error("container {0} exited during the action")]
    Vanished(ContainerId),
    #[error(
        "memory of {container} got to {reached_mb} MB, not {target_mb} MB: the kernel kept refusing with \"device or resource busy\" for {secs} s"
    )]
    MemoryBusy {
        container: ContainerId,
        reached_mb: u64,
        target_mb: u64,
        secs: u64,
    },
    #[error(transparent)]
    Docker(DockerError),
    #[error(transparent)]
    Host(HostError),
    #[error(transparent)]
    Cgroup(CgroupError),
    #[error(transparent)]
    Write(WriteError),
    #[error(
        "{failure}; putting the limits back failed too ({rollback}): the container stays recorded as changed, and resume or the lease expiry restores it"
    )]
    RollbackFailed { failure: String, rollback: String },
    #[error("state store: {0}")]
    Store(#[from] StoreError),
    #[error("internal: {0}")]
    Internal(String),
}

impl From<WriteError> for Error {
    fn from(e: WriteError) -> Error {
        match e {
            WriteError::Docker(d) => Error::from(d),
            WriteError::Cgroup(c) => Error::Cgroup(c),
            other => Error::Write(other),
        }
    }
}

impl From<DockerError> for Error {
    fn from(e: DockerError) -> Error {
        match e {
            DockerError::NotFound(r) => Error::UnknownContainer(r),
            other => Error::Docker(other),
        }
    }
}

impl From<HostError> for Error {
    fn from(e: HostError) -> Error {
        match e {
            HostError::NotFound(r) => Error::UnknownContainer(r),
            HostError::NotYarn(r) => Error::NotYarn {
                name: r.clone(),
                reference: r,
            },
            HostError::Cgroup(c) => Error::Cgroup(c),
            other => Error::Host(other),
        }
    }
}

impl From<CgroupError> for Error {
    fn from(e: CgroupError) -> Error {
        Error::Cgroup(e)
    }
}

#[derive(Clone, Debug)]
pub struct EnforcerSettings {
    /// The path new containers are changed through (`--cgroup-path`).
    pub path: WritePath,
    /// No suspend/shrink target may go below this.
    pub floor: Limits,
    /// Upper bound on waiting for cpu.stat to show a new throttle.
    pub throttle_wait_max: Duration,
    /// How long memory keeps stepping down through EBUSY refusals.
    pub memory_timeout: Duration,
    /// Page memory out before lowering the limit (see [`super::reclaim`]).
    pub proactive_reclaim: bool,
    pub swap_threshold_pages_per_sec: u64,
    pub lease_timeout: Duration,
}

impl Default for EnforcerSettings {
    /// The command line's defaults.
    fn default() -> EnforcerSettings {
        EnforcerSettings {
            path: WritePath::Docker,
            floor: Limits::MIN_FOOTPRINT,
            throttle_wait_max: Duration::from_secs(1),
            memory_timeout: Duration::from_secs(60),
            proactive_reclaim: true,
            swap_threshold_pages_per_sec: 256,
            lease_timeout: Duration::from_secs(30),
        }
    }
}

/// What the agent acts through.
pub enum Runtime {
    Live {
        docker: DockerClient,
        mounts: CgroupMounts,
    },
    /// YARN's own container cgroups, or plain processes (see [`super::host`]).
    Host(HostContainers),
    /// Records actions without touching any container (load tests of the controller).
    DryRun,
}

impl Runtime {
    /// The container as its runtime sees it now. `None` in dry-run.
    async fn inspect(&self, reference: &str) -> Result<Option<Inspected>, Error> {
        match self {
            Runtime::Live { docker, .. } => Ok(Some(docker.inspect(reference).await?)),
            Runtime::Host(host) => Ok(Some(host.inspect(reference)?)),
            Runtime::DryRun => Ok(None),
        }
    }
}

struct Tracked {
    record: StoredContainer,
    dirs: Option<CgroupDirs>,
    swapping: bool,
    /// (when, major faults + swap-ins) at the last swap check.
    last_faults: Option<(Instant, u64)>,
}

/// A container resolved from a request.
struct Resolved {
    id: ContainerId,
    /// `None` in dry-run.
    inspected: Option<Inspected>,
}

pub struct Enforcer {
    runtime: Runtime,
    writer: LimitWriter,
    settings: EnforcerSettings,
    tracked: Arc<Mutex<BTreeMap<ContainerId, Tracked>>>,
    locks: Mutex<HashMap<ContainerId, Arc<tokio::sync::Mutex<()>>>>,
    store: Option<Arc<Mutex<StateStore>>>,
    store_report: Option<LoadReport>,
    events: broadcast::Sender<AgentEvent>,
    metrics: Arc<Metrics>,
    lease: Mutex<Lease>,
    /// Dirs by Docker id, for listing without an inspect per container.
    dirs_cache: Mutex<HashMap<String, CgroupDirs>>,
    /// When set, only containers this NodeManager lists are this node's.
    nodemanager: Option<NodeManager>,
}

fn validate_reference(r: &str) -> Result<(), Error> {
    let ok = (1..=128).contains(&r.len())
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "container {:?} is not a container id or name (1-128 of [A-Za-z0-9_.-])",
            r.chars().take(140).collect::<String>()
        )))
    }
}

/// Milliseconds as f64, for timings.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn narrower(wanted: Option<u64>, current: Option<u64>) -> bool {
    match (wanted, current) {
        (Some(w), Some(c)) => w < c,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

fn note_docker_cpu(d: &mut DockerLimits, cpu: DockerCpu) {
    match cpu {
        DockerCpu::Nano(n) => d.nano_cpus = n,
        DockerCpu::Quota { quota, period } => {
            d.cpu_quota = quota;
            d.cpu_period = period;
        }
    }
}

/// The record of a container the dry-run agent pretends to change: one core per vcore.
fn dry_run_original(allocated: Resource) -> OriginalLimits {
    let quota = u64::from(allocated.vcores) * 100_000;
    let mem = allocated.memory_mb.saturating_mul(MIB);
    OriginalLimits {
        version: CgroupVersion::V1,
        docker: DockerLimits {
            nano_cpus: i64::try_from(quota * 10_000).unwrap_or(i64::MAX),
            memory: i64::try_from(mem).unwrap_or(i64::MAX),
            memory_swap: i64::try_from(mem).unwrap_or(i64::MAX),
            ..Default::default()
        },
        cgroup: CgroupLimits {
            cpu_quota_us: Some(quota),
            cpu_period_us: 100_000,
            cpu_shares: 1024,
            memory_bytes: Some(mem),
            memory_swap_bytes: Some(mem),
            memory_high_bytes: None,
        },
    }
}

/// What applying one set of limits did.
#[derive(Default)]
struct Applied {
    changed: bool,
    throttle_confirmed: bool,
    busy_retries: u32,
    memory_before: Option<u64>,
    memory_after: Option<u64>,
    timings: ActionTimings,
}

impl Applied {
    fn fill(self, res: &mut ActionResult, started: Instant, store_time: Duration) {
        res.changed = self.changed;
        res.throttle_confirmed = self.throttle_confirmed;
        res.memory_before_bytes = self.memory_before;
        res.memory_after_bytes = self.memory_after;
        res.memory_busy_retries = self.busy_retries;
        res.timings = ActionTimings {
            total_ms: ms(started.elapsed()),
            store_ms: ms(store_time),
            ..self.timings
        };
    }
}

impl Enforcer {
    pub fn new(
        runtime: Runtime,
        settings: EnforcerSettings,
        store: Option<(StateStore, LoadReport)>,
        metrics: Arc<Metrics>,
        now: Instant,
    ) -> Enforcer {
        let docker = match &runtime {
            Runtime::Live { docker, .. } => Some(docker.clone()),
            Runtime::Host(_) | Runtime::DryRun => None,
        };
        let (store, store_report) = match store {
            Some((s, r)) => (Some(Arc::new(Mutex::new(s))), Some(r)),
            None => (None, None),
        };
        let (events, _) = broadcast::channel(1024);
        Enforcer {
            writer: LimitWriter::new(docker, metrics.clone()),
            lease: Mutex::new(Lease::new(now, settings.lease_timeout)),
            runtime,
            settings,
            tracked: Arc::new(Mutex::new(BTreeMap::new())),
            locks: Mutex::new(HashMap::new()),
            store,
            store_report,
            events,
            metrics,
            dirs_cache: Mutex::new(HashMap::new()),
            nodemanager: None,
        }
    }

    /// Narrows this agent to the containers `nm` lists (see [`super::nodemanager`]).
    pub fn with_nodemanager(mut self, nm: NodeManager) -> Enforcer {
        self.nodemanager = Some(nm);
        self
    }

    /// Refuses a container that is neither changed by this agent already nor listed by
    /// its NodeManager (when one is configured).
    async fn check_on_this_node(&self, id: ContainerId) -> Result<(), Error> {
        let Some(nm) = &self.nodemanager else {
            return Ok(());
        };
        if lock(&self.tracked).contains_key(&id) || nm.lists(id).await? {
            return Ok(());
        }
        self.metrics.inc(metrics::REFUSED, &[]);
        tracing::warn!(container = %id, nodemanager = nm.url(), "refused: not listed by this node's NodeManager");
        Err(Error::NotOnThisNode {
            container: id,
            nodemanager: nm.url().to_string(),
        })
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.events.subscribe()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn settings(&self) -> &EnforcerSettings {
        &self.settings
    }

    pub fn store_report(&self) -> Option<&LoadReport> {
        self.store_report.as_ref()
    }

    pub fn is_dry_run(&self) -> bool {
        matches!(self.runtime, Runtime::DryRun)
    }

    pub fn docker_client(&self) -> Option<DockerClient> {
        match &self.runtime {
            Runtime::Live { docker, .. } => Some(docker.clone()),
            Runtime::Host(_) | Runtime::DryRun => None,
        }
    }

    /// Whether the agent acts on real cgroups (Docker or the host backends).
    pub fn is_live(&self) -> bool {
        !self.is_dry_run()
    }

    pub fn backend_name(&self) -> &'static str {
        match &self.runtime {
            Runtime::Live { .. } => "docker",
            Runtime::Host(h) => h.backend().name(),
            Runtime::DryRun => "dry-run",
        }
    }

    pub fn host(&self) -> Option<&HostContainers> {
        match &self.runtime {
            Runtime::Host(h) => Some(h),
            _ => None,
        }
    }

    pub fn cgroup_version(&self) -> Option<CgroupVersion> {
        match &self.runtime {
            Runtime::Live { mounts, .. } => mounts.version(),
            Runtime::Host(h) => Some(h.version()),
            Runtime::DryRun => None,
        }
    }

    pub fn swap_accounting(&self) -> Option<bool> {
        match &self.runtime {
            Runtime::Live { docker, .. } => docker.swap_limit,
            Runtime::Host(_) | Runtime::DryRun => None,
        }
    }

    fn emit(&self, e: AgentEvent) {
        // No subscribers is normal.
        let _ = self.events.send(e);
    }

    fn container_lock(&self, id: ContainerId) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.locks).entry(id).or_default().clone()
    }

    /// Forgets a destroyed container's action lock unless an action holds it right now.
    fn drop_idle_lock(&self, id: ContainerId) {
        let mut locks = lock(&self.locks);
        if locks.get(&id).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(&id);
        }
    }

    fn update_tracked_gauge(&self) {
        let tracked = lock(&self.tracked);
        for state in [ContainerState::Suspended, ContainerState::Shrunk] {
            let n = tracked.values().filter(|t| t.record.state == state).count();
            let label = match state {
                ContainerState::Suspended => "suspended",
                _ => "shrunk",
            };
            self.metrics
                .set(metrics::TRACKED, &[("state", label)], n as f64);
        }
    }

    /// Releases the state directory: nothing is saved after this.
    pub async fn close_store(&self) {
        if let Some(store) = self.store.clone() {
            // Waits for a save in progress, which holds the mutex on a blocking thread.
            let _ = tokio::task::spawn_blocking(move || lock(&store).close()).await;
        }
    }

    /// Writes every tracked record durably. The snapshot is taken under the store's lock,
    /// so a later save always includes what an earlier one did.
    async fn persist(&self) -> Result<Duration, Error> {
        self.update_tracked_gauge();
        let Some(store) = self.store.clone() else {
            return Ok(Duration::ZERO);
        };
        let tracked = self.tracked.clone();
        let started = Instant::now();
        let r = tokio::task::spawn_blocking(move || {
            let mut store = lock(&store);
            let snapshot: Vec<StoredContainer> =
                lock(&tracked).values().map(|t| t.record.clone()).collect();
            store.save(&snapshot)
        })
        .await
        .map_err(|e| Error::Internal(format!("state store task: {e}")))?;
        let took = started.elapsed();
        let outcome = if r.is_ok() { "ok" } else { "error" };
        self.metrics
            .inc(metrics::STORE_WRITES, &[("outcome", outcome)]);
        self.metrics
            .observe(metrics::STORE_WRITE_SECONDS, &[], took);
        r?;
        Ok(took)
    }

    /// Adopts the records recovered from the store: containers Docker no longer has are
    /// forgotten, the rest stay tracked (and are resumed when the lease expires).
    pub async fn reconcile(&self, records: Vec<StoredContainer>) -> Result<(usize, usize), Error> {
        let mut kept = 0;
        let mut dropped = 0;
        for record in records {
            let keep = match self.runtime.inspect(&record.docker_id).await {
                Ok(None) => true,
                Ok(Some(i)) if i.name.parse::<ContainerId>().ok() == Some(record.container) => true,
                Ok(Some(i)) => {
                    tracing::warn!(container = %record.container, docker_id = %record.docker_id, name = %i.name, "stored Docker id now names another container; forgetting it");
                    false
                }
                Err(Error::UnknownContainer(_)) => {
                    tracing::info!(container = %record.container, "container is gone; forgetting its record");
                    false
                }
                // Without the runtime the agent cannot tell: keep the record, and the
                // lease expiry retries.
                Err(e) => {
                    tracing::warn!(container = %record.container, error = %e, "cannot check a recovered container; keeping it");
                    true
                }
            };
            if keep {
                tracing::info!(container = %record.container, state = ?record.state, pending = ?record.pending, "recovered a changed container");
                lock(&self.tracked).insert(
                    record.container,
                    Tracked {
                        record,
                        dirs: None,
                        swapping: false,
                        last_faults: None,
                    },
                );
                kept += 1;
            } else {
                dropped += 1;
            }
        }
        if dropped > 0 {
            self.persist().await?;
        } else {
            self.update_tracked_gauge();
        }
        Ok((kept, dropped))
    }

    fn dirs_for(&self, insp: &Inspected) -> Result<CgroupDirs, Error> {
        let (docker, mounts) = match &self.runtime {
            Runtime::Live { docker, mounts } => (docker, mounts),
            Runtime::Host(host) => {
                let id = insp
                    .name
                    .parse::<ContainerId>()
                    .map_err(|_| Error::UnknownContainer(insp.name.clone()))?;
                return Ok(host.prepare(id)?);
            }
            Runtime::DryRun => return Err(Error::Internal("no cgroups in dry-run".into())),
        };
        let from_proc = insp
            .pid
            .ok_or_else(|| "no pid".to_string())
            .and_then(|pid| read_proc_cgroup(pid).map_err(|e| e.to_string()))
            .and_then(|text| {
                mounts
                    .dirs_from_proc(&text, &insp.docker_id)
                    .map_err(|e| e.to_string())
            });
        let dirs = match from_proc {
            Ok(d) if d.exist() => d,
            other => {
                let d =
                    mounts.dirs_from_driver(docker.driver, &insp.cgroup_parent, &insp.docker_id)?;
                if !d.exist() {
                    let why = other.err().unwrap_or_else(|| "files missing".into());
                    return Err(Error::Cgroup(CgroupError::NotFound {
                        docker_id: insp.docker_id.clone(),
                        reason: format!(
                            "neither the init process ({why}) nor the {:?} driver path {} leads to its cgroup files",
                            docker.driver,
                            d.cpu.display()
                        ),
                    }));
                }
                d
            }
        };
        lock(&self.dirs_cache).insert(insp.docker_id.clone(), dirs.clone());
        Ok(dirs)
    }

    async fn resolve(&self, reference: &str) -> Result<Resolved, Error> {
        validate_reference(reference)?;
        match &self.runtime {
            Runtime::DryRun => {
                let id = reference
                    .parse::<ContainerId>()
                    .map_err(|_| Error::NotYarn {
                        reference: reference.to_string(),
                        name: reference.to_string(),
                    })?;
                Ok(Resolved {
                    id,
                    inspected: None,
                })
            }
            Runtime::Live { .. } | Runtime::Host(_) => {
                let insp = match self.runtime.inspect(reference).await {
                    Ok(Some(i)) => i,
                    Ok(None) => return Err(Error::Internal("no runtime to inspect".into())),
                    Err(Error::UnknownContainer(r)) => {
                        self.forget_gone(reference).await;
                        return Err(Error::UnknownContainer(r));
                    }
                    Err(e @ Error::NotYarn { .. }) => {
                        self.metrics.inc(metrics::REFUSED, &[]);
                        tracing::warn!(reference, "refused: not a YARN container");
                        return Err(e);
                    }
                    Err(e) => return Err(e),
                };
                match insp.name.parse::<ContainerId>() {
                    Ok(id) => {
                        self.check_on_this_node(id).await?;
                        Ok(Resolved {
                            id,
                            inspected: Some(insp),
                        })
                    }
                    Err(_) => {
                        self.metrics.inc(metrics::REFUSED, &[]);
                        tracing::warn!(reference, docker_id = %insp.docker_id, name = %insp.name, "refused: not a YARN container");
                        Err(Error::NotYarn {
                            reference: reference.to_string(),
                            name: insp.name,
                        })
                    }
                }
            }
        }
    }

    /// Docker no longer knows a tracked container: nothing is left to restore.
    async fn forget_gone(&self, reference: &str) {
        let Ok(id) = reference.parse::<ContainerId>() else {
            return;
        };
        if lock(&self.tracked).remove(&id).is_some() {
            tracing::info!(container = %id, "container is gone; forgetting its record");
            if let Err(e) = self.persist().await {
                tracing::error!(error = %e, "saving state after forgetting a container");
            }
        }
    }

    pub fn lease_live(&self, now: Instant) -> bool {
        lock(&self.lease).is_live(now)
    }

    pub fn renew_lease(
        &self,
        now: Instant,
        controller: &str,
        timeout: Option<Duration>,
    ) -> Result<LeaseStatus, Error> {
        let mut lease = lock(&self.lease);
        lease.renew(now, controller, timeout)?;
        self.metrics.inc(metrics::LEASE_RENEWALS, &[]);
        self.metrics.set(metrics::LEASE_LIVE, &[], 1.0);
        Ok(lease.status(now, lock(&self.tracked).len()))
    }

    pub fn lease_status(&self, now: Instant) -> LeaseStatus {
        let changed = lock(&self.tracked).len();
        lock(&self.lease).status(now, changed)
    }

    /// Runs one action end to end: metrics, events, log.
    pub async fn act(&self, req: ActionRequest) -> Result<ActionResult, Error> {
        let started = Instant::now();
        let kind = req.action.kind();
        let span = tracing::info_span!("action", action = kind.name(), container = %req.container);
        let r = self
            .act_inner(req.clone(), started)
            .instrument(span.clone())
            .await;
        let outcome = if r.is_ok() { "ok" } else { "error" };
        self.metrics.inc(
            metrics::ACTIONS,
            &[("action", kind.name()), ("outcome", outcome)],
        );
        self.metrics.observe(
            metrics::ACTION_SECONDS,
            &[("action", kind.name())],
            started.elapsed(),
        );
        match &r {
            Ok(result) => {
                tracing::info!(parent: &span, changed = result.changed, state = ?result.state, total_ms = result.timings.total_ms, "action done");
                self.emit(AgentEvent::Action {
                    result: result.clone(),
                });
            }
            Err(e) => {
                tracing::warn!(parent: &span, error = %e, "action failed");
                if let Ok(id) = req.container.parse::<ContainerId>() {
                    self.emit(AgentEvent::ActionFailed {
                        container: id,
                        action: kind,
                        error: crate::agent::server::error_code(e).to_string(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        r
    }

    async fn act_inner(&self, req: ActionRequest, started: Instant) -> Result<ActionResult, Error> {
        // The request itself is checked before Docker is asked anything.
        if let Action::Suspend { allocated, target } | Action::Shrink { allocated, target } =
            &req.action
        {
            validate_target(*target, *allocated, self.settings.floor)?;
        }
        let mut resolved = self.resolve(&req.container).await?;
        let container_lock = self.container_lock(resolved.id);
        let _guard = match container_lock.clone().try_lock_owned() {
            Ok(g) => g,
            Err(_) => {
                let g = container_lock.lock_owned().await;
                // Another action ran meanwhile: look again.
                if let Some(insp) = &resolved.inspected {
                    resolved.inspected = self.runtime.inspect(&insp.docker_id).await?;
                }
                g
            }
        };
        match req.action {
            Action::Suspend { allocated, target } => {
                self.narrow(ActionKind::Suspend, resolved, allocated, target, started)
                    .await
            }
            Action::Shrink { allocated, target } => {
                self.narrow(ActionKind::Shrink, resolved, allocated, target, started)
                    .await
            }
            Action::Resume => self.resume(resolved, started).await,
            Action::Kill => self.kill(resolved, started).await,
        }
    }

    fn result(
        &self,
        id: ContainerId,
        docker_id: String,
        action: ActionKind,
        state: ContainerState,
        started: Instant,
    ) -> ActionResult {
        ActionResult {
            container: id,
            docker_id,
            action,
            state,
            changed: false,
            limits: None,
            cgroup: None,
            path: None,
            throttle_confirmed: false,
            memory_before_bytes: None,
            memory_after_bytes: None,
            memory_busy_retries: 0,
            swapping: lock(&self.tracked).get(&id).is_some_and(|t| t.swapping),
            dry_run: self.is_dry_run(),
            timings: ActionTimings {
                total_ms: ms(started.elapsed()),
                ..Default::default()
            },
        }
    }

    fn set_record(&self, record: StoredContainer, dirs: Option<CgroupDirs>) {
        let mut tracked = lock(&self.tracked);
        match tracked.get_mut(&record.container) {
            Some(t) => {
                t.record = record;
                if dirs.is_some() {
                    t.dirs = dirs;
                }
            }
            None => {
                tracked.insert(
                    record.container,
                    Tracked {
                        record,
                        dirs,
                        swapping: false,
                        last_faults: None,
                    },
                );
            }
        }
    }

    async fn resume(&self, r: Resolved, started: Instant) -> Result<ActionResult, Error> {
        let existing = lock(&self.tracked).get(&r.id).map(|t| t.record.clone());
        let docker_id = r.inspected_id();
        match (r.inspected, existing) {
            (_, None) => Ok(self.result(
                r.id,
                docker_id,
                ActionKind::Resume,
                ContainerState::Running,
                started,
            )),
            (None, Some(e)) => {
                lock(&self.tracked).remove(&r.id);
                self.update_tracked_gauge();
                let mut res = self.result(
                    r.id,
                    String::new(),
                    ActionKind::Resume,
                    ContainerState::Running,
                    started,
                );
                res.changed = true;
                res.limits = Some(Limits::from(e.allocated));
                Ok(res)
            }
            (Some(insp), Some(e)) => {
                self.resume_live(r.id, insp, Some(e), ActionKind::Resume, started)
                    .await
            }
        }
    }

    /// Restores the recorded original limits (memory first, then CPU) and forgets the
    /// container.
    async fn resume_live(
        &self,
        id: ContainerId,
        insp: Inspected,
        existing: Option<StoredContainer>,
        kind: ActionKind,
        started: Instant,
    ) -> Result<ActionResult, Error> {
        let Some(mut record) = existing else {
            return Ok(self.result(id, insp.docker_id, kind, ContainerState::Running, started));
        };
        let want = RealTarget::original(&record.original);
        record.pending = Some(ActionKind::Resume);
        record.updated_unix_ms = unix_ms();
        let mut store_time = Duration::ZERO;
        let mut res = self.result(
            id,
            insp.docker_id.clone(),
            kind,
            ContainerState::Running,
            started,
        );
        res.path = Some(record.path);
        if !insp.running {
            // The cgroup is gone with the process; put Docker's configuration back so a
            // restart would not come up throttled.
            if record.path == WritePath::Docker
                && let Runtime::Live { docker, .. } = &self.runtime
            {
                docker
                    .update_memory(&insp.docker_id, want.docker_memory, want.docker_memory_swap)
                    .await?;
                docker.update_cpu(&insp.docker_id, want.docker_cpu).await?;
            }
            lock(&self.tracked).remove(&id);
            store_time += self.persist().await?;
            res.changed = true;
            res.limits = Some(Limits::from(record.allocated));
            res.timings.store_ms = ms(store_time);
            return Ok(res);
        }
        let dirs = self.dirs_for(&insp)?;
        let current = dirs.read_limits()?;
        self.set_record(record.clone(), Some(dirs.clone()));
        store_time += self.persist().await?;
        let applied = self
            .apply(id, kind, &insp, &dirs, record.path, &want, &current)
            .await;
        let applied = match applied {
            Ok(a) => a,
            Err(e) => {
                // Still changed; the lease expiry or the next resume tries again.
                record.pending = None;
                self.set_record(record, None);
                self.persist().await?;
                return Err(e);
            }
        };
        let after = dirs.read_limits()?;
        if !after.same_enforcement(&record.original.cgroup) {
            record.pending = None;
            self.set_record(record.clone(), None);
            self.persist().await?;
            return Err(Error::Internal(format!(
                "{id}: after resume the cgroup reads {after:?}, not the original {:?}",
                record.original.cgroup
            )));
        }
        lock(&self.tracked).remove(&id);
        store_time += self.persist().await?;
        res.limits = Some(Limits::from(record.allocated));
        res.cgroup = Some(after);
        applied.fill(&mut res, started, store_time);
        Ok(res)
    }

    async fn kill(&self, r: Resolved, started: Instant) -> Result<ActionResult, Error> {
        let docker_id = r.inspected_id();
        let mut res = self.result(
            r.id,
            docker_id.clone(),
            ActionKind::Kill,
            ContainerState::Killed,
            started,
        );
        res.changed = match (&self.runtime, &r.inspected) {
            (Runtime::Host(host), Some(insp)) => {
                if insp.running {
                    self.unthrottle_for_exit(r.id, insp).await;
                }
                host.kill(r.id)?
            }
            (Runtime::Live { docker, .. }, Some(insp)) => {
                if insp.running {
                    self.unthrottle_for_exit(r.id, insp).await;
                }
                match docker.kill(&docker_id).await {
                    Ok(()) => true,
                    Err(e) if e.is_not_running() => false,
                    Err(e) if e.is_exit_not_seen() => {
                        tracing::warn!(container = %r.id, error = %e, "SIGKILL sent; Docker has not seen the exit yet");
                        true
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            _ => true,
        };
        if lock(&self.tracked).remove(&r.id).is_some() {
            res.timings.store_ms = ms(self.persist().await?);
        }
        res.timings.total_ms = ms(started.elapsed());
        Ok(res)
    }

    /// A process throttled to 1% of a core takes long to exit (tearing down a large,
    /// swapped-out address space is CPU work charged to its cgroup), so a changed
    /// container gets its original CPU back before SIGKILL.
    async fn unthrottle_for_exit(&self, id: ContainerId, insp: &Inspected) {
        let Some(record) = lock(&self.tracked).get(&id).map(|t| t.record.clone()) else {
            return;
        };
        let Ok(dirs) = self.dirs_for(insp) else {
            return;
        };
        let want = RealTarget::original(&record.original);
        let t = WriteTarget {
            docker_id: &insp.docker_id,
            dirs: &dirs,
            path: record.path,
            docker_now: &insp.limits,
        };
        if let Err(e) = self.writer.set_cpu(&t, &want).await {
            tracing::warn!(container = %id, error = %e, "could not lift the CPU throttle before killing");
        }
    }

    fn status_of(
        &self,
        id: ContainerId,
        docker_id: String,
        running: bool,
        dirs: Option<&CgroupDirs>,
    ) -> ContainerStatus {
        let current = dirs.and_then(|d| d.read_limits().ok());
        let sample = dirs.and_then(|d| d.sample().ok());
        let tracked = lock(&self.tracked);
        let t = tracked.get(&id);
        ContainerStatus {
            container: id,
            docker_id,
            running,
            state: t.map_or(ContainerState::Running, |t| t.record.state),
            changed: t.is_some(),
            allocated: t.map(|t| t.record.allocated),
            limits: t.map(|t| t.record.limits),
            current,
            original: t.map(|t| t.record.original.cgroup).or(current),
            attained_service_ms: sample.map(|s| s.cpu_usage_ns / 1_000_000),
            memory_usage_bytes: sample.map(|s| s.memory_usage_bytes),
            swap_bytes: sample.map(|s| s.swap_bytes),
            swapping: t.is_some_and(|t| t.swapping),
            frozen: t.is_some_and(|t| t.record.frozen),
            path: t.map(|t| t.record.path),
        }
    }

    /// Every YARN container on this host (running ones, plus changed ones that stopped).
    pub async fn containers(&self) -> Result<Vec<ContainerStatus>, Error> {
        let docker = match &self.runtime {
            Runtime::Live { docker, .. } => Some(docker),
            Runtime::Host(_) => None,
            Runtime::DryRun => {
                let ids: Vec<ContainerId> = lock(&self.tracked).keys().copied().collect();
                return Ok(ids
                    .into_iter()
                    .map(|id| self.status_of(id, String::new(), true, None))
                    .collect());
            }
        };
        let listed = match &self.nodemanager {
            Some(nm) => Some(nm.containers(false).await?),
            None => None,
        };
        let mut out = BTreeMap::new();
        let running = match docker {
            Some(docker) => docker.list_running().await?,
            None => self.host_running()?,
        };
        for (docker_id, name) in running {
            let Ok(id) = name.parse::<ContainerId>() else {
                continue;
            };
            if listed.as_ref().is_some_and(|l| !l.contains(&id))
                && !lock(&self.tracked).contains_key(&id)
            {
                continue;
            }
            let cached = lock(&self.dirs_cache).get(&docker_id).cloned();
            let dirs = match (cached, docker, self.host()) {
                (Some(d), _, _) => Some(d),
                // Read-only: a container not yet moved into a cgroup has none to read.
                (None, _, Some(host)) => host.dirs(id).ok().filter(CgroupDirs::exist),
                (None, Some(docker), None) => match docker.inspect(&docker_id).await {
                    Ok(insp) => self.dirs_for(&insp).ok(),
                    Err(DockerError::NotFound(_)) => continue,
                    Err(e) => return Err(e.into()),
                },
                (None, None, None) => None,
            };
            out.insert(id, self.status_of(id, docker_id, true, dirs.as_ref()));
        }
        let stopped: Vec<(ContainerId, String)> = lock(&self.tracked)
            .iter()
            .filter(|(id, _)| !out.contains_key(id))
            .map(|(id, t)| (*id, t.record.docker_id.clone()))
            .collect();
        for (id, docker_id) in stopped {
            out.insert(id, self.status_of(id, docker_id, false, None));
        }
        Ok(out.into_values().collect())
    }

    /// (id, name) of every running container of the host backend.
    fn host_running(&self) -> Result<Vec<(String, String)>, Error> {
        let Some(host) = self.host() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for id in host.list()? {
            match host.inspect(&id.to_string()) {
                Ok(i) if i.running => out.push((i.docker_id, i.name)),
                Ok(_) | Err(HostError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    /// One container, by YARN id or Docker reference.
    pub async fn container(&self, reference: &str) -> Result<ContainerStatus, Error> {
        let r = self.resolve(reference).await?;
        match r.inspected {
            None => {
                if lock(&self.tracked).contains_key(&r.id) {
                    Ok(self.status_of(r.id, String::new(), true, None))
                } else {
                    Err(Error::UnknownContainer(reference.to_string()))
                }
            }
            Some(insp) => {
                let dirs = if insp.running {
                    // The status still answers; the log says why it has no readings.
                    self.dirs_for(&insp)
                        .inspect_err(|e| {
                            tracing::warn!(container = %r.id, error = %e, "no cgroup readings for the status");
                        })
                        .ok()
                } else {
                    None
                };
                Ok(self.status_of(r.id, insp.docker_id, insp.running, dirs.as_ref()))
            }
        }
    }

    /// Containers the agent has changed, for tests and health.
    pub fn changed_containers(&self) -> Vec<ContainerId> {
        lock(&self.tracked).keys().copied().collect()
    }
}

impl Resolved {
    fn inspected_id(&self) -> String {
        self.inspected
            .as_ref()
            .map(|i| i.docker_id.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dry_enforcer() -> Enforcer {
        Enforcer::new(
            Runtime::DryRun,
            EnforcerSettings::default(),
            None,
            Arc::new(Metrics::new()),
            Instant::now(),
        )
    }

    const C: &str = "container_e01_1700000000000_0001_01_000002";

    fn resume() -> ActionRequest {
        ActionRequest {
            container: C.into(),
            action: Action::Resume,
        }
    }

    fn suspend(target: Limits) -> ActionRequest {
        ActionRequest {
            container: C.into(),
            action: Action::Suspend {
                allocated: Resource::new(2048, 2),
                target,
            },
        }
    }

    #[tokio::test]
    async fn dry_run_records_actions_idempotently() {
        let e = dry_enforcer();
        let mut events = e.subscribe();
        let r = e.act(suspend(Limits::MIN_FOOTPRINT)).await.unwrap();
        assert!(r.changed && r.dry_run);
        assert_eq!(r.state, ContainerState::Suspended);
        let again = e.act(suspend(Limits::MIN_FOOTPRINT)).await.unwrap();
        assert!(!again.changed);
        assert!(matches!(
            events.recv().await.unwrap(),
            AgentEvent::Action { .. }
        ));
        let list = e.containers().await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].limits, Some(Limits::MIN_FOOTPRINT));
        let r = e.act(resume()).await.unwrap();
        assert_eq!(r.limits, Some(Limits::new(2048, 2000)));
        assert!(e.changed_containers().is_empty());
        let r = e.act(resume()).await.unwrap();
        assert!(!r.changed);
    }

    #[tokio::test]
    async fn bad_requests_are_refused_before_anything_changes() {
        let e = dry_enforcer();
        let too_low = e.act(suspend(Limits::new(16, 10))).await.unwrap_err();
        assert!(
            matches!(too_low, Error::Mapping(MappingError::BelowFloor { .. })),
            "{too_low}"
        );
        let mut req = suspend(Limits::MIN_FOOTPRINT);
        req.container = "decoy-nginx".into();
        assert!(matches!(e.act(req).await, Err(Error::NotYarn { .. })));
        let mut req = suspend(Limits::MIN_FOOTPRINT);
        req.container = "../../images/x/json".into();
        assert!(matches!(e.act(req).await, Err(Error::BadRequest(_))));
        assert!(e.changed_containers().is_empty());
    }

    #[tokio::test]
    async fn an_expired_lease_refuses_throttling_and_resumes_everything() {
        let e = dry_enforcer();
        e.act(suspend(Limits::MIN_FOOTPRINT)).await.unwrap();
        let later = Instant::now() + Duration::from_secs(31);
        // Lease not yet expired from the agent's own start: nothing to do.
        assert!(!e.on_lease_tick(Instant::now()).await);
        assert!(e.on_lease_tick(later).await);
        assert!(e.changed_containers().is_empty());
        // Time has not really passed, so renew at the future instant and let it lapse.
        e.renew_lease(later, "c1", Some(Duration::from_millis(100)))
            .unwrap();
        assert!(!e.lease_live(later + Duration::from_millis(100)));
    }

    #[tokio::test]
    async fn a_frozen_container_gives_no_more_memory() {
        let e = dry_enforcer();
        e.act(suspend(Limits::new(1024, 1000))).await.unwrap();
        lock(&e.tracked)
            .get_mut(&C.parse().unwrap())
            .unwrap()
            .record
            .frozen = true;
        let shrink = |mem| ActionRequest {
            container: C.into(),
            action: Action::Shrink {
                allocated: Resource::new(2048, 2),
                target: Limits::new(mem, 1000),
            },
        };
        assert!(matches!(e.act(shrink(512)).await, Err(Error::Conflict(_))));
        let r = e.act(shrink(1024)).await.unwrap();
        // CPU stays frozen at 1% whatever the step asks for.
        assert_eq!(r.limits, Some(Limits::new(1024, FREEZE_CPU_MILLIS)));
    }
}
