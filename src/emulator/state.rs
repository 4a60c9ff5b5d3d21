//! The emulated ResourceManager's state: applications and their thin ApplicationMaster,
//! containers, nodes, node labels, and the capacity scheduler that allocates on node
//! heartbeats.
//!
//! No I/O and no clock: every method that depends on time takes `now` (epoch ms), and
//! launching or killing real containers is returned to the caller as data.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::cluster::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use crate::resources::Resource;
use crate::yarn::dto::{
    ApplicationSubmissionContext, FinalApplicationStatus, YarnApplicationState,
};

use super::queues::{DEFAULT_PARTITION, QueueTree};
use super::runtime::RuntimeKind;
use super::workload::{WorkloadError, WorkloadSpec};

/// YARN's ContainerExitStatus values.
pub mod exit {
    pub const SUCCESS: i32 = 0;
    pub const INVALID: i32 = -1000;
    pub const ABORTED: i32 = -100;
    pub const PREEMPTED: i32 = -102;
    pub const KILLED_EXCEEDED_PMEM: i32 = -104;
    pub const KILLED_BY_APPMASTER: i32 = -105;
    pub const KILLED_BY_RESOURCEMANAGER: i32 = -106;
    pub const KILLED_AFTER_APP_COMPLETION: i32 = -107;
    pub const KILLED_BY_CONTAINER_SCHEDULER: i32 = -108;
    /// 128 + SIGKILL: `docker kill`, FORCEFUL_SHUTDOWN.
    pub const SIGKILL: i32 = 137;
    /// 128 + SIGTERM: GRACEFUL_SHUTDOWN.
    pub const SIGTERM: i32 = 143;

    /// Killed rather than failed: the task runs again without the attempt counting
    /// against its limit. MapReduce's RMContainerAllocator treats only ABORTED, PREEMPTED
    /// and KILLED_BY_CONTAINER_SCHEDULER so; the -105..-107 kills follow a stop the AM or
    /// RM asked for itself. A signal exit (137, 143) is a failed attempt, to MapReduce as
    /// to Spark (an executor lost with `exitCausedByApp`).
    pub fn is_kill(code: i32) -> bool {
        matches!(
            code,
            ABORTED
                | PREEMPTED
                | KILLED_BY_APPMASTER
                | KILLED_BY_RESOURCEMANAGER
                | KILLED_AFTER_APP_COMPLETION
                | KILLED_BY_CONTAINER_SCHEDULER
        )
    }
}

/// yarn.resourcemanager.max-completed-applications: finished applications kept.
pub const MAX_COMPLETED_APPS: usize = 1000;

/// What RMAppLifetimeMonitor says when an application outlives its LIFETIME timeout.
pub const LIFETIME_EXPIRED: &str =
    "Application is killed by ResourceManager as it has exceeded the lifetime period.";

/// The application type YARN reports when a submission names none.
pub const DEFAULT_APPLICATION_TYPE: &str = "YARN";

/// Priority of AM requests and of task requests (MapReduce's map priority).
pub const AM_PRIORITY: i32 = 0;
pub const TASK_PRIORITY: i32 = 20;

/// Errors of RM operations, each mapped to a YARN exception by the REST layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RmError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
}

fn not_found(what: &str, id: impl std::fmt::Display) -> RmError {
    RmError::NotFound(format!(
        "java.lang.Exception: {what} with id: {id} not found"
    ))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmContainerState {
    /// Allocated by the scheduler; the NodeManager is starting it.
    Allocated,
    Running,
    Complete,
}

#[derive(Clone, Debug)]
pub struct RmContainer {
    pub id: ContainerId,
    pub node: usize,
    pub resource: Resource,
    pub priority: i32,
    pub task: Option<usize>,
    pub state: RmContainerState,
    pub allocated_ms: u64,
    pub started_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub exit_status: i32,
    pub diagnostics: String,
    /// In [0, 1], from the task's `progress n%` lines.
    pub progress: f64,
    pub user: String,
}

impl RmContainer {
    pub fn is_live(&self) -> bool {
        self.state != RmContainerState::Complete
    }

    pub fn is_am(&self) -> bool {
        self.id.is_am()
    }
}

#[derive(Clone, Debug)]
pub struct RmNode {
    pub id: NodeId,
    pub http_address: String,
    /// What the NodeManager was started with.
    pub capacity: Resource,
    /// What the RM schedules against (changed by the node resource update API).
    pub total: Resource,
    pub used: Resource,
    pub label: String,
    pub started_ms: u64,
    pub last_heartbeat_ms: u64,
    pub live: BTreeSet<ContainerId>,
    /// What the node's live containers hold, by queue of the tree (leaf use rolled up to
    /// its parents): a heartbeat sums these over the partition's nodes instead of scanning
    /// every container of the cluster.
    pub queue_used: Vec<Resource>,
}

impl RmNode {
    pub fn available(&self) -> Resource {
        self.total.saturating_sub(self.used)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    Pending,
    Running(ContainerId),
    Succeeded,
}

#[derive(Clone, Debug)]
pub struct Task {
    pub state: TaskState,
    pub attempts: u32,
    pub failures: u32,
    pub kills: u32,
    pub progress: f64,
}

/// One outstanding container request.
#[derive(Clone, Debug)]
pub struct PendingRequest {
    pub capability: Resource,
    pub label: String,
    pub priority: i32,
    /// `None` for the AM.
    pub task: Option<usize>,
    pub since_ms: u64,
}

#[derive(Clone, Debug)]
pub struct RmApp {
    pub id: ApplicationId,
    pub name: String,
    pub user: String,
    /// Leaf queue index, or `None` when submitted to a queue that does not exist.
    pub queue: Option<usize>,
    pub queue_name: String,
    pub application_type: String,
    pub tags: Vec<String>,
    pub priority: i32,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    pub submitted_ms: u64,
    pub launched_ms: Option<u64>,
    /// When the first task container was allocated (the demo's queueing delay ends here;
    /// not in the REST output, YARN has no such field).
    pub first_task_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub am_resource: Resource,
    pub am_label: String,
    pub app_label: String,
    /// `None` for a plain application: its AM idles until it is killed.
    pub workload: Option<Arc<WorkloadSpec>>,
    /// The LIFETIME timeout (epoch ms), set through `PUT /apps/{id}/timeout`.
    pub lifetime_expiry_ms: Option<u64>,
    pub tasks: Vec<Task>,
    pub pending: Vec<PendingRequest>,
    pub am_container: Option<ContainerId>,
    pub next_container: u64,
    pub killing: bool,
    pub memory_seconds_done: f64,
    pub vcore_seconds_done: f64,
    pub preempted_resource: Resource,
    pub preempted_containers: u32,
}

impl RmApp {
    pub fn attempt_id(&self) -> ApplicationAttemptId {
        ApplicationAttemptId::new(self.id, 1)
    }

    pub fn is_final(&self) -> bool {
        self.state.is_final()
    }

    /// Application progress in [0, 1]: the mean of its tasks' progress.
    pub fn progress(&self) -> f64 {
        if self.state == YarnApplicationState::Finished {
            return 1.0;
        }
        if self.tasks.is_empty() {
            return 0.0;
        }
        self.tasks.iter().map(|t| t.progress).sum::<f64>() / self.tasks.len() as f64
    }

    pub fn pending_total(&self) -> Resource {
        Resource::sum(self.pending.iter().map(|p| &p.capability))
    }
}

/// A task container the NodeManager must start.
#[derive(Clone, Debug)]
pub struct Launch {
    pub container: ContainerId,
    pub node: usize,
    pub resource: Resource,
    pub user: String,
    pub spec: Arc<WorkloadSpec>,
}

/// What a kill request led to.
#[derive(Clone, Debug, PartialEq)]
pub enum KillOutcome {
    /// Nothing left to stop: the application is in a final state now.
    Done(YarnApplicationState),
    /// These containers must be stopped; the application becomes KILLED when the last
    /// one has exited.
    Stopping {
        current: YarnApplicationState,
        containers: Vec<ContainerId>,
    },
}

/// Static facts about the emulated cluster.
#[derive(Clone, Debug)]
pub struct RmIdentity {
    pub cluster_timestamp: u64,
    pub runtime: RuntimeKind,
    /// `host:port` of the RM web service.
    pub rm_address: String,
    /// yarn.scheduler.minimum-allocation-*.
    pub min_allocation: Resource,
    /// yarn.scheduler.maximum-allocation-*.
    pub max_allocation: Resource,
}

/// What the scheduler did last, for the scheduler's `health` object.
#[derive(Clone, Debug, Default)]
pub struct SchedulerActivity {
    pub last_run_ms: u64,
    /// (node, container, queue)
    pub last_allocation: Option<(NodeId, ContainerId, String)>,
    pub last_release: Option<(NodeId, ContainerId, String)>,
    pub last_run_allocations: u64,
    pub last_run_allocated: Resource,
    pub last_run_releases: u64,
    pub last_run_released: Resource,
}

pub struct RmState {
    pub identity: RmIdentity,
    pub activity: SchedulerActivity,
    pub tree: QueueTree,
    pub nodes: Vec<RmNode>,
    /// Node label name -> exclusivity.
    pub labels: BTreeMap<String, bool>,
    pub apps: BTreeMap<ApplicationId, RmApp>,
    pub containers: HashMap<ContainerId, RmContainer>,
    next_app: u32,
    pub apps_submitted: u64,
}

fn label_name_ok(name: &str) -> bool {
    // CommonNodeLabelsManager: ^[0-9a-zA-Z][0-9a-zA-Z-_]*, at most 255 characters.
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.len() <= 255
}

impl RmState {
    pub fn new(identity: RmIdentity, tree: QueueTree) -> RmState {
        RmState {
            identity,
            activity: SchedulerActivity::default(),
            tree,
            nodes: Vec::new(),
            labels: BTreeMap::new(),
            apps: BTreeMap::new(),
            containers: HashMap::new(),
            next_app: 0,
            apps_submitted: 0,
        }
    }

    pub fn add_node(&mut self, id: NodeId, http_address: String, capacity: Resource, now: u64) {
        self.nodes.push(RmNode {
            id,
            http_address,
            capacity,
            total: capacity,
            used: Resource::ZERO,
            label: DEFAULT_PARTITION.to_string(),
            started_ms: now,
            last_heartbeat_ms: now,
            live: BTreeSet::new(),
            queue_used: vec![Resource::ZERO; self.tree.queues.len()],
        });
    }

    pub fn node_index(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id.as_str() == id)
    }

    pub fn node_index_or_err(&self, id: &str) -> Result<usize, RmError> {
        self.node_index(id).ok_or_else(|| {
            RmError::NotFound(format!("java.lang.Exception: nodeId, {id}, is not found"))
        })
    }

    pub fn app_or_err(&self, id: &str) -> Result<&RmApp, RmError> {
        let app_id = parse_app_id(id)?;
        self.apps.get(&app_id).ok_or_else(|| not_found("app", id))
    }

    /// Sum of the `total` of nodes in a partition.
    pub fn partition_total(&self, partition: &str) -> Resource {
        Resource::sum(
            self.nodes
                .iter()
                .filter(|n| n.label == partition)
                .map(|n| &n.total),
        )
    }

    pub fn cluster_total(&self) -> Resource {
        Resource::sum(self.nodes.iter().map(|n| &n.total))
    }

    /// Live resource use of every queue in one partition (leaf usage rolled up).
    pub fn queue_usage(&self, partition: &str) -> Vec<Resource> {
        let mut used = vec![Resource::ZERO; self.tree.queues.len()];
        for n in self.nodes.iter().filter(|n| n.label == partition) {
            for (u, q) in used.iter_mut().zip(&n.queue_used) {
                *u += *q;
            }
        }
        debug_assert_eq!(used, self.queue_usage_scanned(partition));
        used
    }

    /// [`Self::queue_usage`] from the containers themselves: the reference the per-node
    /// sums are checked against in debug builds.
    fn queue_usage_scanned(&self, partition: &str) -> Vec<Resource> {
        let mut used = vec![Resource::ZERO; self.tree.queues.len()];
        for c in self.containers.values().filter(|c| c.is_live()) {
            if self.nodes[c.node].label != partition {
                continue;
            }
            if let Some(q) = self.apps.get(&c.id.application()).and_then(|a| a.queue) {
                for i in self.tree.path_to(q) {
                    used[i] += c.resource;
                }
            }
        }
        used
    }

    // ------------------------------------------------------------ applications

    pub fn new_application(&mut self) -> ApplicationId {
        self.next_app += 1;
        ApplicationId::new(self.identity.cluster_timestamp, self.next_app)
    }

    /// `POST /apps`. A duplicate submission is accepted without effect, as YARN's
    /// ClientRMService does for retried submissions.
    pub fn submit(
        &mut self,
        ctx: &ApplicationSubmissionContext,
        user: &str,
        now: u64,
    ) -> Result<ApplicationId, RmError> {
        if ctx.application_id.trim().is_empty() {
            return Err(RmError::BadRequest(
                "application-id is required; get one from POST /ws/v1/cluster/apps/new-application"
                    .into(),
            ));
        }
        let id = parse_app_id(&ctx.application_id)?;
        if id.cluster_timestamp != self.identity.cluster_timestamp || id.id > self.next_app {
            return Err(RmError::BadRequest(format!(
                "application-id {} was not issued by this ResourceManager",
                ctx.application_id
            )));
        }
        if self.apps.contains_key(&id) {
            return Ok(id);
        }
        let spec = WorkloadSpec::from_submission(ctx)
            .map_err(|e: WorkloadError| RmError::BadRequest(e.to_string()))?;
        let min = self.identity.min_allocation;
        let max = self.identity.max_allocation;
        let am_resource = ctx.resource.to_resource().component_max(min);
        let task_resource = spec.as_ref().map(|s| ("task resource", s.task_resource()));
        for (what, r) in std::iter::once(("AM resource", am_resource)).chain(task_resource) {
            if !r.fits_in(&max) {
                return Err(RmError::BadRequest(format!(
                    "Invalid resource request: {what} {r} exceeds the maximum allocation {max}"
                )));
            }
        }
        let queue_name = match ctx.queue.trim() {
            "" => "default".to_string(),
            q => q.to_string(),
        };
        let queue = self.tree.leaf_by_name(&queue_name);
        // As the RM: an unset (null) expression takes the queue's default, and an empty
        // AM expression the application's.
        let app_label = match &ctx.app_node_label_expression.0 {
            Some(l) => l.trim().to_string(),
            None => queue
                .and_then(|q| self.tree.queues[q].default_label.clone())
                .unwrap_or_default(),
        };
        let am_label = match ctx
            .am_container_node_label_expression
            .0
            .as_deref()
            .map(str::trim)
        {
            None | Some("") => app_label.clone(),
            Some(l) => l.to_string(),
        };
        for l in [&app_label, &am_label] {
            if !l.is_empty() && !self.labels.contains_key(l.as_str()) {
                return Err(RmError::BadRequest(format!(
                    "Invalid label resource request, cluster do not contain , label= {l}"
                )));
            }
        }
        let mut diagnostics = String::new();
        let mut state = YarnApplicationState::Accepted;
        let mut final_status = FinalApplicationStatus::Undefined;
        let mut finished_ms = None;
        match queue {
            None => {
                diagnostics = format!(
                    "Application {id} submitted by user {user} to unknown queue: {queue_name}"
                );
                state = YarnApplicationState::Failed;
                final_status = FinalApplicationStatus::Failed;
                finished_ms = Some(now);
            }
            Some(q) => {
                for l in [&app_label, &am_label] {
                    if !l.is_empty() && self.tree.queues[q].capacity(l).is_none() {
                        return Err(RmError::BadRequest(format!(
                            "Invalid resource request, queue={queue_name} doesn't have permission to access all labels in resource request. labelExpression of resource request={l}"
                        )));
                    }
                }
            }
        }
        let tags = ctx
            .application_tags
            .tag
            .iter()
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty())
            .collect();
        let mut app = RmApp {
            id,
            name: if ctx.application_name.is_empty() {
                "N/A".into()
            } else {
                ctx.application_name.clone()
            },
            user: user.to_string(),
            queue,
            queue_name: queue.map_or(queue_name, |q| self.tree.queues[q].name().to_string()),
            application_type: match (ctx.application_type.trim(), &spec) {
                ("", Some(spec)) => spec.kernel.application_type().to_string(),
                ("", None) => DEFAULT_APPLICATION_TYPE.to_string(),
                (t, _) => t.to_string(),
            },
            tags,
            priority: i32::try_from(ctx.priority).unwrap_or(0),
            state,
            final_status,
            diagnostics,
            submitted_ms: now,
            launched_ms: None,
            first_task_ms: None,
            finished_ms,
            am_resource,
            am_label,
            app_label,
            tasks: Vec::new(),
            workload: spec.map(Arc::new),
            lifetime_expiry_ms: None,
            pending: Vec::new(),
            am_container: None,
            next_container: 1,
            killing: false,
            memory_seconds_done: 0.0,
            vcore_seconds_done: 0.0,
            preempted_resource: Resource::ZERO,
            preempted_containers: 0,
        };
        if app.state == YarnApplicationState::Accepted {
            app.pending.push(PendingRequest {
                capability: am_resource,
                label: app.am_label.clone(),
                priority: AM_PRIORITY,
                task: None,
                since_ms: now,
            });
        }
        self.apps.insert(id, app);
        self.apps_submitted += 1;
        Ok(id)
    }

    /// `PUT /apps/{id}/state {"state":"KILLED"}`.
    pub fn kill_app(&mut self, id: &str, now: u64) -> Result<KillOutcome, RmError> {
        let app_id = parse_app_id(id)?;
        if !self.apps.contains_key(&app_id) {
            return Err(not_found("app", id));
        }
        Ok(self.kill(app_id, "Application killed by user.", now))
    }

    /// Starts a kill; `diagnostics` become the application's once it is KILLED.
    fn kill(&mut self, app_id: ApplicationId, diagnostics: &str, now: u64) -> KillOutcome {
        let Some(app) = self.apps.get_mut(&app_id) else {
            return KillOutcome::Done(YarnApplicationState::Killed);
        };
        if app.is_final() {
            return KillOutcome::Done(app.state);
        }
        // A second kill keeps the first one's reason.
        if !app.killing {
            app.killing = true;
            app.pending.clear();
            app.diagnostics = diagnostics.to_string();
        }
        let current = app.state;
        let live = self.live_tasks(app_id);
        if live.is_empty() {
            self.finish_app(
                app_id,
                YarnApplicationState::Killed,
                FinalApplicationStatus::Killed,
                String::new(),
                now,
            );
            return KillOutcome::Done(YarnApplicationState::Killed);
        }
        KillOutcome::Stopping {
            current,
            containers: live,
        }
    }

    /// `PUT /apps/{id}/timeout` with type LIFETIME: the application is killed at
    /// `expiry_ms`. Returns the expiry set.
    pub fn update_lifetime(&mut self, id: &str, expiry_ms: u64, now: u64) -> Result<u64, RmError> {
        let app_id = parse_app_id(id)?;
        let app = self
            .apps
            .get_mut(&app_id)
            .ok_or_else(|| not_found("app", id))?;
        if app.is_final() || app.killing {
            return Err(RmError::BadRequest(format!(
                "Application {id} is in {} state, its timeout cannot be updated",
                app.state
            )));
        }
        if expiry_ms <= now {
            return Err(RmError::BadRequest(format!(
                "Expire time is less than current time, current-time={now} expire-time={expiry_ms}"
            )));
        }
        app.lifetime_expiry_ms = Some(expiry_ms);
        Ok(expiry_ms)
    }

    /// RMAppLifetimeMonitor's round: kills every application past its lifetime. Returns
    /// the task containers to stop.
    pub fn expire_lifetimes(&mut self, now: u64) -> Vec<ContainerId> {
        let expired: Vec<ApplicationId> = (self.apps.values())
            .filter(|a| !a.is_final() && !a.killing)
            .filter(|a| a.lifetime_expiry_ms.is_some_and(|e| e <= now))
            .map(|a| a.id)
            .collect();
        let mut to_stop = Vec::new();
        for id in expired {
            if let KillOutcome::Stopping { containers, .. } = self.kill(id, LIFETIME_EXPIRED, now) {
                to_stop.extend(containers);
            }
        }
        to_stop
    }

    fn finish_app(
        &mut self,
        id: ApplicationId,
        state: YarnApplicationState,
        status: FinalApplicationStatus,
        diagnostics: String,
        now: u64,
    ) {
        let am = match self.apps.get_mut(&id) {
            Some(app) => {
                app.state = state;
                app.final_status = status;
                if !diagnostics.is_empty() {
                    app.diagnostics = diagnostics;
                }
                app.finished_ms = Some(now);
                app.pending.clear();
                app.am_container
            }
            None => return,
        };
        if let Some(am) = am {
            let code = match state {
                YarnApplicationState::Killed => exit::KILLED_BY_RESOURCEMANAGER,
                _ => exit::SUCCESS,
            };
            self.release(am, code, String::new(), now);
        }
        self.retire_completed();
    }

    /// Forgets the oldest finished applications beyond [`MAX_COMPLETED_APPS`], with their
    /// containers, as the RM does; one still stopping containers is kept until done.
    fn retire_completed(&mut self) {
        let finished: Vec<ApplicationId> = self
            .apps
            .values()
            .filter(|a| a.is_final())
            .map(|a| a.id)
            .collect();
        let excess = finished.len().saturating_sub(MAX_COMPLETED_APPS);
        for id in finished.into_iter().take(excess) {
            if self
                .containers
                .values()
                .any(|c| c.id.application() == id && c.is_live())
            {
                continue;
            }
            self.apps.remove(&id);
            self.containers.retain(|cid, _| cid.application() != id);
        }
    }

    /// Marks a container complete and gives its resources back to the node.
    fn release(&mut self, id: ContainerId, exit_status: i32, diagnostics: String, now: u64) {
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        if !c.is_live() {
            return;
        }
        c.state = RmContainerState::Complete;
        c.exit_status = exit_status;
        c.diagnostics = diagnostics;
        c.finished_ms = Some(now);
        let secs = now.saturating_sub(c.started_ms.unwrap_or(c.allocated_ms)) as f64 / 1000.0;
        let (resource, node) = (c.resource, c.node);
        let mut queue = String::new();
        let mut path = Vec::new();
        if let Some(app) = self.apps.get_mut(&id.application()) {
            app.memory_seconds_done += resource.memory_mb as f64 * secs;
            app.vcore_seconds_done += resource.vcores as f64 * secs;
            queue = app.queue_name.clone();
            path = app.queue.map(|q| self.tree.path_to(q)).unwrap_or_default();
        }
        if let Some(n) = self.nodes.get_mut(node) {
            n.used -= resource;
            for i in path {
                n.queue_used[i] -= resource;
            }
            n.live.remove(&id);
            self.activity.last_release = Some((n.id.clone(), id, queue));
            self.activity.last_run_releases += 1;
            self.activity.last_run_released += resource;
        }
    }

    // ------------------------------------------------------------ containers

    pub fn container_started(&mut self, id: ContainerId, now: u64) {
        if let Some(c) = self.containers.get_mut(&id)
            && c.state == RmContainerState::Allocated
        {
            c.state = RmContainerState::Running;
            c.started_ms = Some(now);
        }
    }

    pub fn container_progress(&mut self, id: ContainerId, fraction: f64) {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            return;
        };
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        if !c.is_live() {
            return;
        }
        c.progress = fraction;
        let task = c.task;
        if let (Some(app), Some(t)) = (self.apps.get_mut(&id.application()), task)
            && let Some(task) = app.tasks.get_mut(t)
            && task.state == TaskState::Running(id)
        {
            task.progress = fraction;
        }
    }

    /// A task container exited. Returns the containers the AM now wants stopped (the
    /// rest of a failed application).
    pub fn container_completed(
        &mut self,
        id: ContainerId,
        exit_status: i32,
        diagnostics: String,
        now: u64,
    ) -> Vec<ContainerId> {
        let Some(c) = self.containers.get(&id) else {
            return Vec::new();
        };
        if !c.is_live() {
            return Vec::new();
        }
        let (task, resource) = (c.task, c.resource);
        let app_id = id.application();
        let killing = self.apps.get(&app_id).is_some_and(|a| a.killing);
        let exit_status = if killing && exit_status != exit::SUCCESS {
            exit::KILLED_BY_RESOURCEMANAGER
        } else {
            exit_status
        };
        self.release(id, exit_status, diagnostics.clone(), now);
        let Some(app) = self.apps.get_mut(&app_id) else {
            return Vec::new();
        };
        if app.is_final() {
            return Vec::new();
        }
        if killing {
            if self.live_tasks(app_id).is_empty() {
                // The kill's reason is in the diagnostics already.
                self.finish_app(
                    app_id,
                    YarnApplicationState::Killed,
                    FinalApplicationStatus::Killed,
                    String::new(),
                    now,
                );
            }
            return Vec::new();
        }
        let Some(t) = task else {
            return Vec::new();
        };
        let max_attempts = app.workload.as_ref().map_or(1, |w| w.max_attempts);
        let label = app.app_label.clone();
        let app_type = app.application_type.clone();
        let Some(state) = app.tasks.get_mut(t) else {
            return Vec::new();
        };
        if exit_status == exit::SUCCESS {
            state.state = TaskState::Succeeded;
            state.progress = 1.0;
            if app.tasks.iter().all(|t| t.state == TaskState::Succeeded) {
                self.finish_app(
                    app_id,
                    YarnApplicationState::Finished,
                    FinalApplicationStatus::Succeeded,
                    String::new(),
                    now,
                );
            }
            return Vec::new();
        }
        // The task loses its progress and runs again from scratch.
        state.progress = 0.0;
        state.state = TaskState::Pending;
        if exit::is_kill(exit_status) {
            state.kills += 1;
            if exit_status == exit::PREEMPTED {
                app.preempted_containers += 1;
                app.preempted_resource += resource;
            }
        } else {
            state.failures += 1;
            if state.failures >= max_attempts {
                let msg = task_failed_diagnostics(
                    &app_type,
                    app_id,
                    t,
                    state.failures,
                    exit_status,
                    &diagnostics,
                );
                let live = self.live_tasks(app_id);
                self.finish_app(
                    app_id,
                    YarnApplicationState::Failed,
                    FinalApplicationStatus::Failed,
                    msg,
                    now,
                );
                return live;
            }
        }
        app.pending.push(PendingRequest {
            capability: resource,
            label,
            priority: TASK_PRIORITY,
            task: Some(t),
            since_ms: now,
        });
        Vec::new()
    }

    /// Validates a container signal and returns the node the container runs on.
    pub fn container_for_signal(&self, id: &str) -> Result<(ContainerId, usize), RmError> {
        let cid: ContainerId = id
            .parse()
            .map_err(|e: crate::cluster::IdError| RmError::BadRequest(e.to_string()))?;
        match self.containers.get(&cid) {
            Some(c) if c.is_live() => Ok((cid, c.node)),
            _ => Err(RmError::NotFound(format!(
                "java.lang.Exception: container with id: {id} not found or not running"
            ))),
        }
    }

    // ------------------------------------------------------------ nodes and labels

    /// `POST /nodes/{id}/resource`: the node's new total. Running containers are kept even
    /// when it drops below their use (YARN's overcommit with no timeout).
    pub fn update_node_resource(&mut self, id: &str, total: Resource) -> Result<Resource, RmError> {
        let i = self.node_index_or_err(id)?;
        self.nodes[i].total = total;
        Ok(total)
    }

    pub fn add_labels(&mut self, labels: &[(String, bool)]) -> Result<(), RmError> {
        for (name, exclusive) in labels {
            if !label_name_ok(name) {
                return Err(RmError::BadRequest(format!(
                    "label name should only contains {{0-9, a-z, A-Z, -, _}} and should not started with {{-,_}}, now it is= {name}"
                )));
            }
            if !exclusive {
                return Err(RmError::BadRequest(format!(
                    "label {name}: non-exclusive node labels are not supported by the emulator"
                )));
            }
        }
        for (name, _) in labels {
            self.labels.insert(name.clone(), true);
            self.tree.add_partition_to_root(name);
        }
        Ok(())
    }

    /// `POST /remove-node-labels`: all or nothing. As the RM, a label a queue names in
    /// its `accessible-node-labels` cannot go; nodes carrying a removed label fall back
    /// to the default partition with their containers.
    pub fn remove_labels(&mut self, labels: &[String]) -> Result<(), RmError> {
        if labels.is_empty() {
            return Err(RmError::BadRequest("No labels to remove".into()));
        }
        for l in labels {
            if !self.labels.contains_key(l) {
                return Err(RmError::BadRequest(format!(
                    "Node label={l} to be removed doesn't existed in cluster node labels collection."
                )));
            }
            let named = self.tree.queues.iter().find(|q| match &q.accessible {
                crate::config::queues::NodeLabels::Only(set) => set.contains(l),
                crate::config::queues::NodeLabels::Any => false,
            });
            if let Some(q) = named {
                return Err(RmError::BadRequest(format!(
                    "Cannot remove label={l}, because queue={} is using this label. Please remove label on queue before remove the label",
                    q.path
                )));
            }
        }
        for l in labels {
            self.labels.remove(l);
            for n in self.nodes.iter_mut().filter(|n| &n.label == l) {
                n.label = DEFAULT_PARTITION.to_string();
            }
        }
        Ok(())
    }

    /// `POST /replace-node-to-labels`: all or nothing.
    pub fn replace_node_labels(
        &mut self,
        mapping: &[(String, Vec<String>)],
    ) -> Result<(), RmError> {
        let mut plan = Vec::with_capacity(mapping.len());
        for (node, labels) in mapping {
            let i = self.node_index_or_err(node)?;
            if labels.len() > 1 {
                return Err(RmError::BadRequest(format!(
                    "{node}: a node can have at most one label, got {labels:?}"
                )));
            }
            let label = labels
                .first()
                .map(|l| l.trim().to_string())
                .unwrap_or_default();
            if !label.is_empty() && !self.labels.contains_key(&label) {
                return Err(RmError::BadRequest(format!(
                    "Not all labels being replaced contained by known label collections, please check, new labels=[{label}]"
                )));
            }
            plan.push((i, label));
        }
        for (i, label) in plan {
            self.nodes[i].label = label;
        }
        Ok(())
    }

    // ------------------------------------------------------------ scheduling

    /// One NodeManager heartbeat: allocate as many containers on the node as the queues
    /// allow. AM containers start at once (the AM runs inside the emulator); task
    /// containers are returned for the NodeManager to launch.
    pub fn heartbeat(&mut self, node: usize, now: u64) -> Vec<Launch> {
        let mut launches = Vec::new();
        let Some(n) = self.nodes.get_mut(node) else {
            return launches;
        };
        n.last_heartbeat_ms = now;
        let partition = n.label.clone();
        self.activity.last_run_ms = now;
        self.activity.last_run_allocations = 0;
        self.activity.last_run_allocated = Resource::ZERO;
        // A full node places nothing; skip the queue accounting, which is linear in the
        // cluster's containers (2,000 nodes heartbeating every second on a full cluster).
        let avail = self.nodes[node].available();
        let any_fits = self.apps.values().any(|a| {
            !a.is_final()
                && !a.killing
                && a.pending
                    .iter()
                    .any(|r| r.capability.fits_in(&avail) && r.label == partition)
        });
        if !any_fits {
            return launches;
        }
        let total = self.partition_total(&partition);
        let mut used = self.queue_usage(&partition);
        while let Some((app_id, req_idx)) = self.pick(node, &partition, total, &used) {
            let Some(app) = self.apps.get_mut(&app_id) else {
                break;
            };
            let req = app.pending.remove(req_idx);
            let cid = ContainerId::new(app.attempt_id(), 1, app.next_container);
            app.next_container += 1;
            let user = app.user.clone();
            let n = &mut self.nodes[node];
            if let Some(q) = app.queue {
                for i in self.tree.path_to(q) {
                    used[i] += req.capability;
                    n.queue_used[i] += req.capability;
                }
            }
            n.used += req.capability;
            n.live.insert(cid);
            self.activity.last_allocation = Some((n.id.clone(), cid, app.queue_name.clone()));
            self.activity.last_run_allocations += 1;
            self.activity.last_run_allocated += req.capability;
            let mut container = RmContainer {
                id: cid,
                node,
                resource: req.capability,
                priority: req.priority,
                task: req.task,
                state: RmContainerState::Allocated,
                allocated_ms: now,
                started_ms: None,
                finished_ms: None,
                exit_status: exit::INVALID,
                diagnostics: String::new(),
                progress: 0.0,
                user: user.clone(),
            };
            match req.task {
                None => {
                    // The AM registers and asks for its tasks at once.
                    container.state = RmContainerState::Running;
                    container.started_ms = Some(now);
                    app.am_container = Some(cid);
                    app.state = YarnApplicationState::Running;
                    app.launched_ms = Some(now);
                    if let Some(spec) = app.workload.clone() {
                        app.tasks = (0..spec.tasks)
                            .map(|_| Task {
                                state: TaskState::Pending,
                                attempts: 0,
                                failures: 0,
                                kills: 0,
                                progress: 0.0,
                            })
                            .collect();
                        let label = app.app_label.clone();
                        app.pending
                            .extend((0..spec.tasks as usize).map(|t| PendingRequest {
                                capability: spec.task_resource(),
                                label: label.clone(),
                                priority: TASK_PRIORITY,
                                task: Some(t),
                                since_ms: now,
                            }));
                    }
                }
                Some(t) => {
                    app.first_task_ms.get_or_insert(now);
                    if let Some(task) = app.tasks.get_mut(t) {
                        task.state = TaskState::Running(cid);
                        task.attempts += 1;
                    }
                    if let Some(spec) = app.workload.clone() {
                        launches.push(Launch {
                            container: cid,
                            node,
                            resource: req.capability,
                            user,
                            spec,
                        });
                    }
                }
            }
            self.containers.insert(cid, container);
        }
        launches
    }

    /// The next request to place on `node`: descend the queue tree from the root, least
    /// used (relative to guarantee) child first, FIFO within the leaf.
    fn pick(
        &self,
        node: usize,
        partition: &str,
        total: Resource,
        used: &[Resource],
    ) -> Option<(ApplicationId, usize)> {
        let avail = self.nodes[node].available();
        if avail.is_zero() {
            return None;
        }
        self.pick_in(0, partition, total, used, avail)
    }

    fn pick_in(
        &self,
        q: usize,
        partition: &str,
        total: Resource,
        used: &[Resource],
        avail: Resource,
    ) -> Option<(ApplicationId, usize)> {
        let queue = &self.tree.queues[q];
        let cap = queue.capacity(partition)?;
        let max = total.scale(cap.absolute_max);
        if !queue.is_leaf() {
            let mut children: Vec<(f64, usize)> = queue
                .children
                .iter()
                .filter_map(|&c| {
                    let cc = self.tree.queues[c].capacity(partition)?;
                    if cc.absolute_max <= 0.0 {
                        return None;
                    }
                    let guaranteed = total.scale(cc.absolute);
                    let key = if guaranteed.is_zero() {
                        f64::INFINITY
                    } else {
                        used[c].dominant_share(&guaranteed)
                    };
                    Some((key, c))
                })
                .collect();
            children.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            return children
                .into_iter()
                .find_map(|(_, c)| self.pick_in(c, partition, total, used, avail));
        }
        let mut apps: Vec<&RmApp> = self
            .apps
            .values()
            .filter(|a| a.queue == Some(q) && !a.is_final() && !a.killing && !a.pending.is_empty())
            .collect();
        // FIFO ordering policy: priority first, then submission order.
        apps.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.id.cmp(&b.id)));
        let path = self.tree.path_to(q);
        for app in apps {
            let mut candidates: Vec<(usize, &PendingRequest)> = app
                .pending
                .iter()
                .enumerate()
                .filter(|(_, r)| r.label == partition)
                .collect();
            candidates.sort_by_key(|(i, r)| (r.priority, *i));
            for (i, r) in candidates {
                if !r.capability.fits_in(&avail) {
                    continue;
                }
                let fits_queues = path.iter().all(|&p| {
                    let Some(pc) = self.tree.queues[p].capacity(partition) else {
                        return false;
                    };
                    (used[p] + r.capability).fits_in(&total.scale(pc.absolute_max))
                });
                if fits_queues && (used[q] + r.capability).fits_in(&max) {
                    return Some((app.id, i));
                }
            }
        }
        None
    }

    /// Live task containers of an application (the AM's excluded: it has no process).
    fn live_tasks(&self, app: ApplicationId) -> Vec<ContainerId> {
        self.containers
            .values()
            .filter(|c| c.id.application() == app && c.is_live() && !c.is_am())
            .map(|c| c.id)
            .collect()
    }

    /// Live containers of an application (AM included).
    pub fn app_containers(&self, app: ApplicationId) -> Vec<&RmContainer> {
        let mut v: Vec<&RmContainer> = self
            .containers
            .values()
            .filter(|c| c.id.application() == app && c.is_live())
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }
}

/// The diagnostics a framework's AM leaves when a task has used up its attempts:
/// MapReduce's JobImpl and Spark's DAGScheduler wording, a plain one for other types.
fn task_failed_diagnostics(
    app_type: &str,
    app: ApplicationId,
    task: usize,
    failures: u32,
    exit_status: i32,
    diagnostics: &str,
) -> String {
    let last = format!("exit status {exit_status}: {diagnostics}");
    if app_type.eq_ignore_ascii_case("MAPREDUCE") {
        format!(
            "Task failed task_{}_{:04}_m_{task:06}\nJob failed as tasks failed. failedMaps:1 failedReduces:0 killedMaps:0 killedReduces: 0\n(the last of {failures} attempts ended with {last})",
            app.cluster_timestamp, app.id
        )
    } else if app_type.eq_ignore_ascii_case("SPARK") {
        format!(
            "Job aborted due to stage failure: Task {task} in stage 0.0 failed {failures} times, most recent failure: {last}"
        )
    } else {
        format!("Task {task} failed {failures} times (last {last}); the application fails")
    }
}

pub fn parse_app_id(id: &str) -> Result<ApplicationId, RmError> {
    id.parse()
        .map_err(|e: crate::cluster::IdError| RmError::BadRequest(e.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::emulator::queues::{QueueLabelCapacity, QueueSetup, test_queue};
    use crate::emulator::workload::Kernel;

    pub(crate) const TS: u64 = 1_700_000_000_000;

    pub(crate) fn state_with(nodes: usize, node: Resource, setup: QueueSetup) -> RmState {
        let tree = QueueTree::build(&setup).unwrap();
        let mut s = RmState::new(
            RmIdentity {
                cluster_timestamp: TS,
                runtime: RuntimeKind::Simulated,
                rm_address: "127.0.0.1:8088".into(),
                min_allocation: Resource::new(1024, 1),
                max_allocation: node,
            },
            tree,
        );
        for i in 0..nodes {
            s.add_node(
                NodeId::new(format!("127.0.0.1:{}", 9000 + i)),
                format!("127.0.0.1:{}", 9000 + i),
                node,
                TS,
            );
        }
        s
    }

    pub(crate) fn submit(
        s: &mut RmState,
        queue: &str,
        tasks: u32,
        mem: u64,
        now: u64,
    ) -> ApplicationId {
        let id = s.new_application();
        let spec = WorkloadSpec {
            kernel: Kernel::Burn,
            args: vec![],
            tasks,
            memory_mb: mem,
            vcores: 1,
            max_attempts: 2,
            simulated_duration_ms: Some(1000),
        };
        let ctx = spec.submission(
            &id.to_string(),
            "job",
            queue,
            vec![],
            Resource::new(1024, 1),
        );
        s.submit(&ctx, "alice", now).unwrap()
    }

    /// root.default 10%, root.long 60%, root.short 30%, each elastic to 100%.
    pub(crate) fn two_queues() -> QueueSetup {
        let cluster = Resource::new(4 * 8192, 32);
        let q =
            |path: &str, parent: Option<u32>, pct: f64| test_queue(path, parent, cluster, pct, 1.0);
        QueueSetup {
            queues: vec![
                q("root", None, 1.0),
                q("root.default", Some(0), 0.1),
                q("root.long", Some(0), 0.6),
                q("root.short", Some(0), 0.3),
            ],
            cluster,
            labels: vec![],
            access: Default::default(),
        }
    }

    #[test]
    fn am_then_tasks_are_allocated_on_heartbeats_and_the_app_finishes() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let app = submit(&mut s, "long", 3, 2048, TS);
        assert_eq!(s.apps[&app].state, YarnApplicationState::Accepted);
        assert_eq!(s.apps[&app].pending_total(), Resource::new(1024, 1));
        let launches = s.heartbeat(0, TS + 1000);
        assert_eq!(s.apps[&app].state, YarnApplicationState::Running);
        assert_eq!(launches.len(), 3, "AM 1 GB + 3 x 2 GB fit in 8 GB");
        let am = s.apps[&app].am_container.unwrap();
        assert!(am.is_am());
        assert_eq!(am.to_string(), format!("container_e01_{TS}_0001_01_000001"));
        assert_eq!(s.nodes[0].used, Resource::new(7168, 4));
        for l in &launches {
            s.container_started(l.container, TS + 1100);
            s.container_progress(l.container, 0.5);
        }
        assert!((s.apps[&app].progress() - 0.5).abs() < 1e-9);
        for l in &launches {
            assert!(
                s.container_completed(l.container, 0, String::new(), TS + 5000)
                    .is_empty()
            );
        }
        let a = &s.apps[&app];
        assert_eq!(a.state, YarnApplicationState::Finished);
        assert_eq!(a.final_status, FinalApplicationStatus::Succeeded);
        assert_eq!(s.nodes[0].used, Resource::ZERO);
        assert!(a.memory_seconds_done > 0.0);
    }

    #[test]
    fn a_killed_task_loses_its_progress_and_is_requested_again() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let app = submit(&mut s, "long", 1, 2048, TS);
        let l = s.heartbeat(0, TS).pop().unwrap();
        s.container_started(l.container, TS);
        s.container_progress(l.container, 0.9);
        s.container_completed(l.container, exit::PREEMPTED, "preempted".into(), TS + 10);
        let a = &s.apps[&app];
        assert_eq!(a.tasks[0].progress, 0.0);
        assert_eq!(a.tasks[0].kills, 1);
        assert_eq!(a.tasks[0].failures, 0);
        assert_eq!(a.pending.len(), 1);
        let again = s.heartbeat(0, TS + 1000);
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].container, l.container);
        assert_eq!(s.apps[&app].tasks[0].attempts, 2);
    }

    #[test]
    fn too_many_failures_fail_the_application_and_stop_the_rest() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let app = submit(&mut s, "long", 2, 1024, TS);
        let l = s.heartbeat(0, TS);
        assert!(
            s.container_completed(l[0].container, 1, "boom".into(), TS)
                .is_empty()
        );
        let retry = s.heartbeat(0, TS + 1);
        let to_stop = s.container_completed(retry[0].container, 1, "boom".into(), TS + 2);
        assert_eq!(to_stop, vec![l[1].container]);
        let a = &s.apps[&app];
        assert_eq!(a.state, YarnApplicationState::Failed);
        // A burn job is a MAPREDUCE application: MapReduce's wording.
        assert!(
            a.diagnostics.starts_with(&format!(
                "Task failed task_{TS}_0001_m_000000\nJob failed as tasks failed. failedMaps:1"
            )),
            "{}",
            a.diagnostics
        );
        assert!(!s.containers[&a.am_container.unwrap()].is_live());
    }

    /// A MapReduce job of one task with YARN's default of 4 attempts.
    fn mapreduce_job(s: &mut RmState) -> ApplicationId {
        let id = s.new_application();
        let spec =
            WorkloadSpec::parse(r#"{"kernel":"wordcount","tasks":1,"memoryMb":1024,"vcores":1}"#)
                .unwrap();
        let ctx = spec.submission(
            &id.to_string(),
            "wc",
            "long",
            vec![],
            Resource::new(1024, 1),
        );
        assert_eq!(ctx.application_type, "MAPREDUCE");
        s.submit(&ctx, "alice", TS).unwrap()
    }

    #[test]
    fn signal_exits_are_failed_attempts_and_preemptions_are_not() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let app = mapreduce_job(&mut s);
        let mut task = s.heartbeat(0, TS).pop().unwrap().container;
        // docker kill, GRACEFUL_SHUTDOWN, docker kill: three failed attempts, each retried.
        for (i, code) in [exit::SIGKILL, exit::SIGTERM, exit::SIGKILL]
            .into_iter()
            .enumerate()
        {
            let now = TS + 10 * (i as u64 + 1);
            assert!(
                s.container_completed(task, code, "killed".into(), now)
                    .is_empty()
            );
            assert_eq!(s.apps[&app].tasks[0].failures, i as u32 + 1);
            task = s.heartbeat(0, now).pop().expect("retried").container;
        }
        // YARN's preemption and a lost NodeManager are kills: retried, not counted.
        for code in [exit::PREEMPTED, exit::ABORTED] {
            s.container_completed(task, code, String::new(), TS + 50);
            task = s.heartbeat(0, TS + 50).pop().expect("retried").container;
        }
        let t = &s.apps[&app].tasks[0];
        assert_eq!((t.attempts, t.failures, t.kills), (6, 3, 2));
        assert_eq!(s.apps[&app].state, YarnApplicationState::Running);
        // The fourth failure reaches mapreduce.map.maxattempts.
        s.container_completed(
            task,
            exit::SIGKILL,
            "Container killed on request. Exit code is 137".into(),
            TS + 60,
        );
        let a = &s.apps[&app];
        assert_eq!(a.state, YarnApplicationState::Failed);
        assert_eq!(a.final_status, FinalApplicationStatus::Failed);
        assert!(a.pending.is_empty());
        assert!(
            a.diagnostics
                .contains("Job failed as tasks failed. failedMaps:1")
                && a.diagnostics.contains("exit status 137"),
            "{}",
            a.diagnostics
        );
        assert_eq!(s.nodes[0].used, Resource::ZERO);
    }

    #[test]
    fn a_plain_application_idles_in_its_am_until_killed() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let id = s.new_application();
        let mut ctx = ApplicationSubmissionContext {
            application_id: id.to_string(),
            queue: "long".into(),
            resource: crate::yarn::dto::ResourceInfo::from(Resource::new(2048, 2)),
            ..Default::default()
        };
        ctx.am_container_spec.commands.command = vec!["sleep 600".into()];
        let app = s.submit(&ctx, "bob", TS).unwrap();
        assert_eq!(s.apps[&app].application_type, DEFAULT_APPLICATION_TYPE);
        assert!(s.apps[&app].workload.is_none());
        for t in 0..3 {
            assert!(
                s.heartbeat(0, TS + t * 1000).is_empty(),
                "no task to launch"
            );
        }
        let a = &s.apps[&app];
        assert_eq!(a.state, YarnApplicationState::Running);
        assert!(a.pending.is_empty() && a.tasks.is_empty());
        assert_eq!(s.nodes[0].used, Resource::new(2048, 2));
        assert_eq!(s.app_containers(app).len(), 1);
        // The AM has no process: the kill is done at once.
        assert_eq!(
            s.kill_app(&app.to_string(), TS + 5000).unwrap(),
            KillOutcome::Done(YarnApplicationState::Killed)
        );
        let a = &s.apps[&app];
        assert_eq!(a.final_status, FinalApplicationStatus::Killed);
        assert_eq!(a.diagnostics, "Application killed by user.");
        assert_eq!(s.nodes[0].used, Resource::ZERO);
        // A malformed workload is still refused.
        let id = s.new_application();
        ctx.application_id = id.to_string();
        ctx.am_container_spec
            .environment
            .entry
            .push(crate::yarn::dto::KeyValue {
                key: super::super::workload::WORKLOAD_ENV.into(),
                value: r#"{"kernel":"burn"}"#.into(),
            });
        let e = s.submit(&ctx, "bob", TS).unwrap_err();
        assert!(
            e.to_string().contains("PREEMPTOR_WORKLOAD is not valid"),
            "{e}"
        );
    }

    #[test]
    fn an_application_past_its_lifetime_is_killed() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let app = submit(&mut s, "long", 2, 1024, TS);
        let id = app.to_string();
        let l = s.heartbeat(0, TS);
        assert!(matches!(
            s.update_lifetime(&id, TS, TS + 1),
            Err(RmError::BadRequest(m)) if m.contains("less than current time")
        ));
        assert!(matches!(
            s.update_lifetime("application_1_0009", TS + 10, TS),
            Err(RmError::NotFound(_))
        ));
        assert_eq!(s.update_lifetime(&id, TS + 10_000, TS + 1), Ok(TS + 10_000));
        assert!(s.expire_lifetimes(TS + 9_999).is_empty());
        let mut to_stop = s.expire_lifetimes(TS + 10_000);
        to_stop.sort();
        let mut tasks: Vec<ContainerId> = l.iter().map(|l| l.container).collect();
        tasks.sort();
        assert_eq!(to_stop, tasks);
        assert!(
            s.expire_lifetimes(TS + 11_000).is_empty(),
            "stopping already"
        );
        for c in tasks {
            s.container_completed(c, exit::SIGKILL, String::new(), TS + 12_000);
        }
        let a = &s.apps[&app];
        assert_eq!(a.state, YarnApplicationState::Killed);
        assert_eq!(a.diagnostics, LIFETIME_EXPIRED);
        assert!(s.update_lifetime(&id, TS + 99_000, TS + 13_000).is_err());
        // Nothing running: killed at the monitor's round itself.
        let plain = submit(&mut s, "long", 1, 1024, TS);
        s.update_lifetime(&plain.to_string(), TS + 20_000, TS)
            .unwrap();
        assert!(s.expire_lifetimes(TS + 20_000).is_empty());
        assert_eq!(s.apps[&plain].state, YarnApplicationState::Killed);
    }

    #[test]
    fn kill_is_done_at_once_without_containers_and_otherwise_after_the_last_exit() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let accepted = submit(&mut s, "long", 1, 1024, TS);
        // Not yet scheduled: nothing to stop.
        assert_eq!(
            s.kill_app(&accepted.to_string(), TS).unwrap(),
            KillOutcome::Done(YarnApplicationState::Killed)
        );
        let running = submit(&mut s, "long", 2, 1024, TS);
        let l = s.heartbeat(0, TS);
        let out = s.kill_app(&running.to_string(), TS + 1).unwrap();
        let KillOutcome::Stopping {
            current,
            containers,
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(current, YarnApplicationState::Running);
        assert_eq!(containers.len(), 2);
        s.container_completed(l[0].container, exit::SIGKILL, String::new(), TS + 2);
        assert_eq!(s.apps[&running].state, YarnApplicationState::Running);
        s.container_completed(l[1].container, exit::SIGKILL, String::new(), TS + 3);
        assert_eq!(s.apps[&running].state, YarnApplicationState::Killed);
        assert_eq!(
            s.containers[&l[1].container].exit_status,
            exit::KILLED_BY_RESOURCEMANAGER
        );
        assert_eq!(s.nodes[0].used, Resource::ZERO);
        assert!(matches!(
            s.kill_app(&running.to_string(), TS + 4),
            Ok(KillOutcome::Done(YarnApplicationState::Killed))
        ));
        assert!(matches!(
            s.kill_app("application_1_0009", 0),
            Err(RmError::NotFound(_))
        ));
        assert!(matches!(s.kill_app("nope", 0), Err(RmError::BadRequest(_))));
    }

    #[test]
    fn queues_are_elastic_up_to_maximum_and_fifo_within_a_leaf() {
        // root.default 10%, long 60%, short 30%, all max 100%: long may take everything.
        let mut s = state_with(2, Resource::new(8192, 8), two_queues());
        let first = submit(&mut s, "long", 8, 1024, TS);
        let second = submit(&mut s, "long", 8, 1024, TS + 1);
        s.heartbeat(0, TS);
        s.heartbeat(1, TS);
        // The first app's AM and its 8 tasks come before anything of the second but its AM.
        assert!(s.apps[&first].pending.is_empty());
        let used = s.queue_usage(DEFAULT_PARTITION);
        assert_eq!(used[2], Resource::new(16384, 16));
        assert!(!s.apps[&second].pending.is_empty(), "cluster is full");
    }

    #[test]
    fn a_queue_below_its_guarantee_is_served_first() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let long = submit(&mut s, "long", 8, 1024, TS);
        s.heartbeat(0, TS); // long takes the whole node
        let short = submit(&mut s, "short", 1, 1024, TS + 1);
        // Free one long container: the short AM (queue under guarantee) goes first.
        let victim = s
            .app_containers(long)
            .iter()
            .find(|c| !c.is_am())
            .unwrap()
            .id;
        s.container_completed(victim, exit::PREEMPTED, String::new(), TS + 2);
        s.heartbeat(0, TS + 3);
        assert_eq!(s.apps[&short].state, YarnApplicationState::Running);
        assert_eq!(s.apps[&long].preempted_containers, 1);
    }

    #[test]
    fn maximum_capacity_caps_a_queue_and_node_resource_updates_make_room() {
        let c = Resource::new(8192, 8);
        let mut setup = two_queues();
        setup.cluster = c;
        for q in &mut setup.queues[1..] {
            q.guaranteed = c.scale(0.25);
            q.maximum = c.scale(0.5);
        }
        setup.queues[2].guaranteed = c.scale(0.5);
        let mut s = state_with(1, c, setup);
        submit(&mut s, "long", 8, 1024, TS);
        s.heartbeat(0, TS);
        assert_eq!(
            s.nodes[0].used,
            Resource::new(4096, 4),
            "long is capped at 50%"
        );
        // Raising the node's total raises the queue's maximum with it.
        s.update_node_resource("127.0.0.1:9000", Resource::new(16384, 16))
            .unwrap();
        s.heartbeat(0, TS + 1);
        assert_eq!(s.nodes[0].used, Resource::new(8192, 8));
        assert!(s.update_node_resource("x:1", c).is_err());
    }

    #[test]
    fn exclusive_labels_keep_unlabelled_requests_off_labelled_nodes() {
        let mut setup = two_queues();
        setup.labels.push(QueueLabelCapacity {
            queue: "root.short".into(),
            label: "fast".into(),
            capacity_pct: 100.0,
            maximum_capacity_pct: 100.0,
        });
        let mut s = state_with(2, Resource::new(8192, 8), setup);
        assert!(
            s.replace_node_labels(&[("127.0.0.1:9001".into(), vec!["fast".into()])])
                .is_err()
        );
        s.add_labels(&[("fast".into(), true)]).unwrap();
        assert!(s.add_labels(&[("-bad".into(), true)]).is_err());
        assert!(s.add_labels(&[("shared".into(), false)]).is_err());
        s.replace_node_labels(&[("127.0.0.1:9001".into(), vec!["fast".into()])])
            .unwrap();
        let long = submit(&mut s, "long", 20, 1024, TS);
        s.heartbeat(1, TS);
        assert!(
            s.nodes[1].live.is_empty(),
            "unlabelled work stays off the fast node"
        );
        s.heartbeat(0, TS);
        assert!(!s.apps[&long].pending.is_empty());
        // A short app asking for the label lands on node 1.
        let id = s.new_application();
        let spec = WorkloadSpec::parse(r#"{"kernel":"tpch","tasks":2,"memoryMb":1024,"vcores":1}"#)
            .unwrap();
        let mut ctx = spec.submission(
            &id.to_string(),
            "q",
            "short",
            vec![],
            Resource::new(1024, 1),
        );
        ctx.app_node_label_expression = crate::yarn::dto::LabelExpression::named("fast");
        let short = s.submit(&ctx, "bob", TS).unwrap();
        let l = s.heartbeat(1, TS + 1);
        assert_eq!(l.len(), 2);
        assert_eq!(s.apps[&short].state, YarnApplicationState::Running);
        // long cannot ask for the label at all.
        let id = s.new_application();
        let mut ctx = spec.submission(&id.to_string(), "q", "long", vec![], Resource::new(1024, 1));
        ctx.app_node_label_expression = crate::yarn::dto::LabelExpression::named("fast");
        assert!(matches!(
            s.submit(&ctx, "bob", TS),
            Err(RmError::BadRequest(_))
        ));
    }

    /// As Hadoop 3.5.0: a `null` expression takes the queue's default label, an omitted
    /// one stays in the default partition; a label a queue names cannot be removed.
    #[test]
    fn a_queue_default_label_applies_to_null_expressions_and_removal_follows_the_rm() {
        use crate::config::queues::NodeLabels;
        use crate::emulator::queues::QueueAccess;
        use crate::yarn::dto::LabelExpression;
        let mut setup = two_queues().with_short_partition("short", "short");
        let mut s = state_with(2, Resource::new(8192, 8), setup.clone());
        let spec = WorkloadSpec::parse(r#"{"kernel":"tpch","tasks":1,"memoryMb":1024,"vcores":1}"#)
            .unwrap();
        let ctx = |s: &mut RmState, label: LabelExpression| {
            let id = s.new_application();
            let mut ctx = spec.submission(
                &id.to_string(),
                "q",
                "short",
                vec![],
                Resource::new(1024, 1),
            );
            ctx.app_node_label_expression = label.clone();
            ctx.am_container_node_label_expression = label;
            ctx
        };
        // Before the label exists: null is refused, an omitted field runs unlabelled.
        let null = ctx(&mut s, LabelExpression::QUEUE_DEFAULT);
        let refused = s.submit(&null, "bob", TS).unwrap_err().to_string();
        assert!(
            refused.contains("cluster do not contain , label= short"),
            "{refused}"
        );
        let omitted = ctx(&mut s, LabelExpression::default());
        let plain = s.submit(&omitted, "bob", TS).unwrap();
        assert_eq!(s.apps[&plain].am_label, "");

        s.add_labels(&[("short".into(), true)]).unwrap();
        s.replace_node_labels(&[("127.0.0.1:9001".into(), vec!["short".into()])])
            .unwrap();
        let null = ctx(&mut s, LabelExpression::QUEUE_DEFAULT);
        let labelled = s.submit(&null, "bob", TS).unwrap();
        assert_eq!(s.apps[&labelled].am_label, "short");
        s.heartbeat(1, TS + 1);
        assert_eq!(s.apps[&labelled].state, YarnApplicationState::Running);

        // Removal drops the mapping; the running AM stays.
        let unknown = s.remove_labels(&["gone".into()]).unwrap_err().to_string();
        assert!(unknown.contains("doesn't existed"), "{unknown}");
        s.remove_labels(&["short".into()]).unwrap();
        assert_eq!(s.nodes[1].label, "");
        assert_eq!(s.apps[&labelled].state, YarnApplicationState::Running);

        // A queue naming the label keeps it.
        let named = QueueAccess {
            accessible: NodeLabels::Only(["short".to_string()].into()),
            default_label: Some("short".into()),
        };
        setup.access.insert("root.short".into(), named);
        let mut s = state_with(2, Resource::new(8192, 8), setup);
        s.add_labels(&[("short".into(), true)]).unwrap();
        let kept = s.remove_labels(&["short".into()]).unwrap_err().to_string();
        assert!(
            kept.contains("because queue=root.short is using this label"),
            "{kept}"
        );
    }

    #[test]
    fn only_the_newest_finished_applications_are_kept() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let ids: Vec<ApplicationId> = (0..MAX_COMPLETED_APPS + 3)
            .map(|i| submit(&mut s, "long", 1, 1024, TS + i as u64))
            .collect();
        for id in &ids {
            s.kill_app(&id.to_string(), TS).unwrap();
        }
        assert_eq!(s.apps.len(), MAX_COMPLETED_APPS);
        assert!(!s.apps.contains_key(&ids[0]) && s.apps.contains_key(&ids[3]));
        let running = submit(&mut s, "long", 1, 1024, TS);
        assert!(s.apps.contains_key(&running));
    }

    #[test]
    fn submissions_are_validated() {
        let mut s = state_with(1, Resource::new(8192, 8), two_queues());
        let mut ctx = ApplicationSubmissionContext::default();
        assert!(matches!(
            s.submit(&ctx, "u", TS),
            Err(RmError::BadRequest(_))
        ));
        ctx.application_id = format!("application_{TS}_0001");
        let e = s.submit(&ctx, "u", TS).unwrap_err();
        assert!(e.to_string().contains("not issued"), "{e}");
        let id = s.new_application();
        ctx.application_id = id.to_string();
        ctx.queue = "long".into();
        // No PREEMPTOR_WORKLOAD: a plain application, run as any RM would.
        let plain = s.submit(&ctx, "u", TS).unwrap();
        assert_eq!(s.apps[&plain].state, YarnApplicationState::Accepted);
        s.kill_app(&plain.to_string(), TS).unwrap();
        let id = s.new_application();
        let spec =
            WorkloadSpec::parse(r#"{"kernel":"burn","tasks":1,"memoryMb":99999,"vcores":1}"#)
                .unwrap();
        let ctx = spec.submission(&id.to_string(), "x", "long", vec![], Resource::ZERO);
        assert!(
            s.submit(&ctx, "u", TS)
                .unwrap_err()
                .to_string()
                .contains("maximum allocation")
        );
        // Unknown queue: accepted, then FAILED with YARN's diagnostics.
        let spec = WorkloadSpec::parse(r#"{"kernel":"burn","tasks":1,"memoryMb":1024,"vcores":1}"#)
            .unwrap();
        let ctx = spec.submission(
            &id.to_string(),
            "x",
            "nope",
            vec!["A".into()],
            Resource::ZERO,
        );
        let app = s.submit(&ctx, "u", TS).unwrap();
        assert_eq!(s.apps[&app].state, YarnApplicationState::Failed);
        assert!(s.apps[&app].diagnostics.contains("unknown queue: nope"));
        assert_eq!(s.apps[&app].tags, vec!["a"]);
        // The same id again is a no-op, as in YARN.
        assert_eq!(s.submit(&ctx, "u", TS).unwrap(), app);
        assert_eq!(s.apps.len(), 2, "the plain application and this one");
    }
}
