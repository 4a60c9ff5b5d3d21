//! Act: a [`Plan`]'s actions become agent calls (suspend, shrink, resume, kill) and RM
//! calls (node resource update, node labels), every one recorded in the preemption log.
//!
//! A tick never waits for its actions. It sends them out as one job per agent (a lane)
//! and goes on; the jobs run concurrently, at most
//! `yarn.preemptor.agent.max-parallel-requests` at once, and a lane's jobs run in the
//! order they were sent. Results come back to the loop as [`JobDone`]s. So a slow or
//! refusing agent delays only its own actions; one still out after a monitoring
//! interval is reported as late.
//!
//! Order within a job: the node capacities that go down first (YARN must stop placing
//! work in room that is being taken back before the containers get it back), then the
//! container actions in plan order, then the capacities that go up and partitions, on
//! nodes whose container actions all succeeded (room is advertised only once it is
//! really free). Before a node's capacity first moves away from its physical capacity,
//! the physical capacity is written to the [`CapacityLedger`]. Each call has a timeout
//! and bounded retries; an action that still fails is logged as failed, kept, and tried
//! again next tick until a newer plan supersedes it, its target is reached or gone, or
//! it has failed [`MAX_RETRY_TICKS`] ticks in a row.

use backon::{ExponentialBuilder, Retryable};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::agents::Actuator;
use super::capacities::CapacityLedger;
use super::hub::{ActionRecord, Amounts, Hub, Outcome};
use super::view::{Memory, SHORT_PARTITION_LABEL};
use crate::agent::api::{Action as AgentAction, ActionRequest, ActionResult};
use crate::cluster::{ClusterView, ContainerId, NodeId, Partition};
use crate::policy::{Action, ActionKind, Before, Plan};
use crate::resources::{Limits, Resource};
use crate::yarn::RmClient;
use crate::yarn::dto::SignalContainerCommand;

/// Ticks a failing action is retried before it is given up (with a warning).
pub const MAX_RETRY_TICKS: u32 = 10;

/// The lane of actions on nodes no agent serves: RM calls only.
const RM_LANE: &str = "resourcemanager";

/// What made the controller tick, for the latency of the actions it leads to.
#[derive(Clone, Copy, Debug)]
pub struct Trigger {
    pub kind: TriggerKind,
    pub at: Instant,
}

/// Why a tick ran, as the dashboard and the logs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerKind {
    /// The monitoring interval.
    Timer,
    /// A submission seen by the proxy.
    Submission,
    /// The RM's submission counter moved.
    RmSubmission,
    AgentEvent,
    /// `POST /api/v1/tick`.
    Manual,
    /// The configuration was reloaded.
    Reload,
    /// `preemptor resume` or `restore-capacities`.
    Operator,
    Shutdown,
    /// The first tick's undo of what an earlier run left.
    Restart,
}

impl TriggerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Timer => "timer",
            TriggerKind::Submission => "submission",
            TriggerKind::RmSubmission => "rm-submission",
            TriggerKind::AgentEvent => "agent-event",
            TriggerKind::Manual => "manual",
            TriggerKind::Reload => "reload",
            TriggerKind::Operator => "operator",
            TriggerKind::Shutdown => "shutdown",
            TriggerKind::Restart => "restart",
        }
    }
}

/// The target an action acts on; a newer action on the same target supersedes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Container(ContainerId),
    Capacity(NodeId),
    Partition(NodeId),
}

fn target_of(kind: &ActionKind) -> Target {
    match kind {
        ActionKind::Suspend { container, .. }
        | ActionKind::Shrink { container, .. }
        | ActionKind::Resume { container, .. }
        | ActionKind::Kill { container } => Target::Container(*container),
        ActionKind::SetNodeCapacity { node, .. } => Target::Capacity(node.clone()),
        ActionKind::SetNodePartition { node, .. } => Target::Partition(node.clone()),
    }
}

struct Pending {
    action: Action,
    /// Ticks it has failed in a row.
    ticks: u32,
}

struct InFlight {
    lane: String,
    verb: &'static str,
    since: Instant,
    late: bool,
}

/// What one tick sent out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dispatched {
    pub actions: usize,
    /// Held back because an earlier action on the same target is still out; they go
    /// out on a later tick unless superseded.
    pub deferred: usize,
}

/// A job's results, back from its lane.
pub struct JobDone {
    lane: String,
    finished: Vec<Finished>,
}

struct Finished {
    action: Action,
    ticks: u32,
    result: Result<Option<ActionResult>, String>,
}

/// What came back, for the loop.
#[derive(Clone, Debug, Default)]
pub struct Completed {
    pub failed: usize,
    /// Each applied container action's result, with the agent that applied it.
    pub applied: Vec<(String, ActionResult)>,
}

/// One call of a job.
enum Call {
    Agent(ActionRequest),
    RmKill(ContainerId),
    Capacity(NodeId, Resource),
    Partition(NodeId, Partition),
    Refused(String),
}

struct Item {
    action: Action,
    ticks: u32,
    call: Call,
}

#[derive(Default)]
struct Job {
    lower: Vec<Item>,
    containers: Vec<Item>,
    raise: Vec<Item>,
}

/// What a job needs to run on its own task.
#[derive(Clone)]
struct Calls {
    actuator: Arc<dyn Actuator>,
    rm: RmClient,
    hub: Hub,
    call_timeout: Duration,
    action_timeout: Duration,
    max_retries: u32,
}

pub struct Executor {
    calls: Calls,
    ledger: CapacityLedger,
    failed: BTreeMap<Target, Pending>,
    in_flight: BTreeMap<Target, InFlight>,
    /// One per agent: its jobs run one after the other, in the order sent.
    lanes: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    permits: Arc<Semaphore>,
    done_tx: mpsc::UnboundedSender<JobDone>,
    done_rx: Option<mpsc::UnboundedReceiver<JobDone>>,
    tracker: TaskTracker,
}

pub use crate::clock::unix_ms;

/// Bounds and retries of the executor's calls.
#[derive(Clone, Copy, Debug)]
pub struct ExecutorLimits {
    /// One RM call or agent request.
    pub call_timeout: Duration,
    /// One agent action (`yarn.preemptor.agent.action-timeout-ms`).
    pub action_timeout: Duration,
    pub max_retries: u32,
    /// Jobs running at once (`yarn.preemptor.agent.max-parallel-requests`).
    pub max_parallel: usize,
}

impl Executor {
    pub fn new(
        actuator: Arc<dyn Actuator>,
        rm: RmClient,
        hub: Hub,
        limits: ExecutorLimits,
        ledger: CapacityLedger,
    ) -> Executor {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Executor {
            calls: Calls {
                actuator,
                rm,
                hub,
                call_timeout: limits.call_timeout,
                action_timeout: limits.action_timeout,
                max_retries: limits.max_retries,
            },
            ledger,
            failed: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            lanes: HashMap::new(),
            permits: Arc::new(Semaphore::new(limits.max_parallel.max(1))),
            done_tx,
            done_rx: Some(done_rx),
            tracker: TaskTracker::new(),
        }
    }

    pub fn actuator(&self) -> &Arc<dyn Actuator> {
        &self.calls.actuator
    }

    pub fn ledger(&self) -> &CapacityLedger {
        &self.ledger
    }

    /// The receiving end of the jobs' results, for the loop to select on; once.
    pub fn take_results(&mut self) -> Option<mpsc::UnboundedReceiver<JobDone>> {
        self.done_rx.take()
    }

    /// Actions failed or deferred, waiting to go out again.
    pub fn failed_pending(&self) -> usize {
        self.failed.len()
    }

    /// Actions sent and not back yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Forgets the failed or deferred actions `which` picks, so that no retry takes what
    /// an operator gave back; returns how many.
    pub fn drop_retries(&mut self, which: impl Fn(&Action) -> bool) -> usize {
        let before = self.failed.len();
        self.failed.retain(|_, p| !which(&p.action));
        before - self.failed.len()
    }

    /// Sends out `plan` (and the retries of earlier failures) on the cluster `view`
    /// shows, without waiting for any of it. In observe-only mode every planned action
    /// is logged as observed and nothing is touched.
    pub fn dispatch(
        &mut self,
        view: &ClusterView,
        plan: &Plan,
        trigger: Trigger,
        memory: &Memory,
    ) -> Dispatched {
        if plan.observe_only {
            for a in &plan.observed {
                self.record(a, trigger, Outcome::Observed);
            }
            return Dispatched {
                actions: plan.observed.len(),
                ..Dispatched::default()
            };
        }
        let mut actions: Vec<(Action, u32)> = Vec::new();
        let planned: BTreeSet<Target> = plan.actions.iter().map(|a| target_of(&a.kind)).collect();
        for (target, p) in std::mem::take(&mut self.failed) {
            if planned.contains(&target) || reached_or_gone(view, &p.action) {
                continue;
            }
            if p.ticks >= MAX_RETRY_TICKS {
                self.calls.hub.warn(
                    unix_ms(),
                    format!("giving up on `{}` after {} failed ticks", p.action, p.ticks),
                );
                continue;
            }
            actions.push((p.action, p.ticks));
        }
        actions.extend(plan.actions.iter().map(|a| (a.clone(), 0)));

        let mut out = Dispatched::default();
        let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
        let mut ledger_refused: Option<String> = None;
        let moving: Vec<(NodeId, Resource)> = actions
            .iter()
            .filter_map(|(a, _)| match &a.kind {
                ActionKind::SetNodeCapacity { node, advertised } => {
                    let physical = memory.physical.get(node)?;
                    (physical != advertised).then(|| (node.clone(), *physical))
                }
                _ => None,
            })
            .collect();
        if let Err(e) = self.ledger.record(moving) {
            ledger_refused = Some(format!(
                "not changed: its physical capacity could not be recorded first: {e}"
            ));
        }
        for (a, ticks) in actions {
            let target = target_of(&a.kind);
            if self.in_flight.contains_key(&target) {
                out.deferred += 1;
                self.failed.insert(target, Pending { action: a, ticks });
                continue;
            }
            let lane = a
                .node
                .as_ref()
                .and_then(|n| self.calls.actuator.agent_for(n))
                .unwrap_or_else(|| RM_LANE.to_string());
            let job = jobs.entry(lane.clone()).or_default();
            let call = match &a.kind {
                ActionKind::SetNodeCapacity { node, advertised } => {
                    match (&ledger_refused, memory.physical.get(node)) {
                        (Some(why), Some(p)) if p != advertised => Call::Refused(why.clone()),
                        _ => Call::Capacity(node.clone(), *advertised),
                    }
                }
                ActionKind::SetNodePartition { node, partition } => {
                    Call::Partition(node.clone(), *partition)
                }
                _ if lane == RM_LANE => match &a.kind {
                    ActionKind::Kill { container } => Call::RmKill(*container),
                    _ => Call::Refused("no agent is known for this node".into()),
                },
                _ => agent_request(view, &a.kind),
            };
            self.in_flight.insert(
                target,
                InFlight {
                    lane: lane.clone(),
                    verb: a.kind.verb(),
                    since: Instant::now(),
                    late: false,
                },
            );
            out.actions += 1;
            let list = if a.kind.container().is_some() {
                &mut job.containers
            } else if capacity_goes_down(view, &a) {
                &mut job.lower
            } else {
                &mut job.raise
            };
            list.push(Item {
                action: a,
                ticks,
                call,
            });
        }
        for (lane, job) in jobs {
            let gate = self.lanes.entry(lane.clone()).or_default().clone();
            let (calls, permits, tx) = (
                self.calls.clone(),
                self.permits.clone(),
                self.done_tx.clone(),
            );
            self.tracker.spawn(async move {
                let _in_order = gate.lock().await;
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                let finished = calls.run(&lane, job, trigger).await;
                let _ = tx.send(JobDone { lane, finished });
            });
        }
        out
    }

    /// Takes in a job's results: failures wait for their retry, node changes are
    /// remembered, nodes back at their physical capacity leave the ledger.
    pub fn complete(&mut self, done: JobDone, memory: &mut Memory) -> Completed {
        let mut out = Completed::default();
        let mut back: Vec<NodeId> = Vec::new();
        for f in done.finished {
            let target = target_of(&f.action.kind);
            self.in_flight.remove(&target);
            match f.result {
                Ok(result) => {
                    remember(&f.action, memory);
                    if let ActionKind::SetNodeCapacity { node, advertised } = &f.action.kind
                        && memory.physical.get(node) == Some(advertised)
                    {
                        back.push(node.clone());
                    }
                    if let Some(r) = result {
                        out.applied.push((done.lane.clone(), r));
                    }
                }
                Err(_) => {
                    out.failed += 1;
                    // A newer action on the same target, deferred meanwhile, wins.
                    self.failed.entry(target).or_insert(Pending {
                        action: f.action,
                        ticks: f.ticks + 1,
                    });
                }
            }
        }
        if let Err(e) = self.ledger.forget(&back) {
            self.calls
                .hub
                .warn(unix_ms(), format!("node capacity record: {e}"));
        }
        out
    }

    /// Warns once about each action out for longer than `after`; returns how many are.
    pub fn report_late(&mut self, after: Duration) -> usize {
        let mut late = 0;
        for (target, f) in &mut self.in_flight {
            let waited = f.since.elapsed();
            if waited < after {
                continue;
            }
            late += 1;
            if !f.late {
                f.late = true;
                self.calls.hub.warn(
                    unix_ms(),
                    format!(
                        "late: {} of {} sent to {} {} ms ago, still waiting",
                        f.verb,
                        target_name(target),
                        f.lane,
                        waited.as_millis()
                    ),
                );
            }
        }
        late
    }

    /// Waits, for at most `timeout`, until every action sent is back, and takes the
    /// results in.
    pub async fn settle(
        &mut self,
        results: &mut mpsc::UnboundedReceiver<JobDone>,
        memory: &mut Memory,
        timeout: Duration,
    ) -> Completed {
        let mut all = Completed::default();
        let deadline = Instant::now() + timeout;
        while !self.in_flight.is_empty() {
            match tokio::time::timeout_at(deadline, results.recv()).await {
                Ok(Some(done)) => {
                    let c = self.complete(done, memory);
                    all.failed += c.failed;
                    all.applied.extend(c.applied);
                }
                Ok(None) | Err(_) => break,
            }
        }
        all
    }

    pub async fn set_capacity(&self, node: &NodeId, advertised: Resource) -> Result<(), String> {
        self.calls.set_capacity(node, advertised).await
    }

    /// Restores a node to its recorded physical capacity and forgets it.
    pub async fn restore_capacity(&mut self, node: &NodeId) -> Result<Resource, String> {
        let Some(&physical) = self.ledger.nodes().get(node) else {
            return Err(format!("{node} is not in the node capacity record"));
        };
        self.calls.set_capacity(node, physical).await?;
        self.ledger
            .forget([node])
            .map_err(|e| format!("restored, but {e}"))?;
        Ok(physical)
    }

    pub async fn set_partition(&self, node: &NodeId, partition: Partition) -> Result<(), String> {
        self.calls.set_partition(node, partition).await
    }

    pub fn record(&self, a: &Action, trigger: Trigger, outcome: Outcome) {
        record(&self.calls.hub, a, trigger, outcome);
    }
}

fn target_name(t: &Target) -> String {
    match t {
        Target::Container(c) => c.to_string(),
        Target::Capacity(n) => format!("the capacity of {n}"),
        Target::Partition(n) => format!("the partition of {n}"),
    }
}

/// The agent request for a container action, from the allocation the view shows.
fn agent_request(view: &ClusterView, kind: &ActionKind) -> Call {
    let Some(id) = kind.container() else {
        return Call::Refused("not a container action".into());
    };
    let allocated = view
        .container_by_id(&id)
        .map(|i| view.container(i).allocated);
    let action = match (kind, allocated) {
        (ActionKind::Suspend { footprint, .. }, Some(allocated)) => AgentAction::Suspend {
            allocated,
            target: *footprint,
        },
        (ActionKind::Shrink { to, .. }, Some(allocated)) => AgentAction::Shrink {
            allocated,
            target: *to,
        },
        (ActionKind::Resume { to, .. }, Some(allocated)) => {
            if Limits::from(allocated).fits_in(to) {
                AgentAction::Resume
            } else {
                // One graceful step back up.
                AgentAction::Shrink {
                    allocated,
                    target: *to,
                }
            }
        }
        (ActionKind::Resume { .. }, None) => AgentAction::Resume,
        (ActionKind::Kill { .. }, _) => AgentAction::Kill,
        _ => return Call::Refused(format!("{id} is no longer in the cluster")),
    };
    Call::Agent(ActionRequest {
        container: id.to_string(),
        action,
    })
}

fn record(hub: &Hub, a: &Action, trigger: Trigger, outcome: Outcome) {
    hub.record_action(ActionRecord {
        at_ms: unix_ms(),
        policy: a.policy.to_string(),
        action: a.kind.verb().to_string(),
        container: a.kind.container().map(|c| c.to_string()),
        application: a.application.map(|x| x.to_string()),
        queue: a.queue.as_deref().map(str::to_string),
        node: a.node.as_ref().map(|n| n.to_string()),
        before: a.before.to_string(),
        after: after_of(&a.kind),
        amounts: amounts_of(a),
        reason: a.reason.to_string(),
        latency_ms: Some(trigger.at.elapsed().as_millis() as u64),
        outcome,
    });
}

impl Calls {
    /// Runs one lane's job and logs each action as it finishes.
    async fn run(&self, lane: &str, job: Job, trigger: Trigger) -> Vec<Finished> {
        let mut finished = Vec::new();
        let mut troubled: BTreeSet<NodeId> = BTreeSet::new();
        for item in job.lower.into_iter().chain(job.containers) {
            let r = self.call(lane, &item.call).await;
            if r.is_err()
                && item.action.kind.container().is_some()
                && let Some(n) = &item.action.node
            {
                troubled.insert(n.clone());
            }
            finished.push(self.finish(item, r, trigger));
        }
        for item in job.raise {
            let r = match &item.call {
                Call::Capacity(node, _) if troubled.contains(node) => {
                    Err("not advertised: an action on this node's containers failed".to_string())
                }
                call => self.call(lane, call).await,
            };
            finished.push(self.finish(item, r, trigger));
        }
        finished
    }

    fn finish(
        &self,
        item: Item,
        r: Result<Option<ActionResult>, String>,
        trigger: Trigger,
    ) -> Finished {
        let outcome = match &r {
            Ok(_) => Outcome::Applied,
            Err(reason) => Outcome::Failed {
                reason: reason.clone(),
            },
        };
        record(&self.hub, &item.action, trigger, outcome);
        Finished {
            action: item.action,
            ticks: item.ticks,
            result: r,
        }
    }

    async fn call(&self, lane: &str, call: &Call) -> Result<Option<ActionResult>, String> {
        match call {
            Call::Agent(req) => self.agent_call(lane, req).await.map(Some),
            Call::RmKill(c) => self.rm_kill(c).await.map(|()| None),
            Call::Capacity(node, advertised) => self
                .with_retries(|| self.set_capacity(node, *advertised))
                .await
                .map(|()| None),
            Call::Partition(node, partition) => self
                .with_retries(|| self.set_partition(node, *partition))
                .await
                .map(|()| None),
            Call::Refused(why) => Err(why.clone()),
        }
    }

    /// Waits between the tries of one call: 100 ms, then doubling, `max_retries` times.
    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_factor(2.0)
            .with_max_delay(Duration::from_secs(5))
            .with_max_times(self.max_retries as usize)
    }

    async fn with_retries<F, Fut>(&self, f: F) -> Result<(), String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        f.retry(self.backoff()).await
    }

    /// One agent action with the timeout and retries.
    async fn agent_call(&self, agent: &str, req: &ActionRequest) -> Result<ActionResult, String> {
        // The error says whether another try may help.
        let attempt = || async {
            match tokio::time::timeout(self.action_timeout, self.actuator.act(agent, req.clone()))
                .await
            {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(e)) => Err((e.message, e.retry)),
                // Not retried: the agent may still be carrying it out. The next tick sends
                // it again if the plan still wants it.
                Err(_) => Err((
                    format!(
                        "{agent} did not finish the action within {} ms",
                        self.action_timeout.as_millis()
                    ),
                    false,
                )),
            }
        };
        attempt
            .retry(self.backoff())
            .when(|(_, retry)| *retry)
            .await
            .map_err(|(message, _)| message)
    }

    async fn rm_kill(&self, container: &ContainerId) -> Result<(), String> {
        let call = self
            .rm
            .signal_container(container, SignalContainerCommand::ForcefulShutdown);
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("the RM did not answer in time".into()),
        }
    }

    async fn set_capacity(&self, node: &NodeId, advertised: Resource) -> Result<(), String> {
        let call = self.rm.update_node_resource(node, advertised, None);
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(r) => r.map(|_| ()).map_err(|e| e.to_string()),
            Err(_) => Err("the RM did not answer in time".into()),
        }
    }

    /// Dice's short partition is the node label [`SHORT_PARTITION_LABEL`], which
    /// [`super::short_label`] makes sure exists before any partition change goes out.
    async fn set_partition(&self, node: &NodeId, partition: Partition) -> Result<(), String> {
        let labels = match partition {
            Partition::Short => vec![SHORT_PARTITION_LABEL.to_string()],
            Partition::General => Vec::new(),
        };
        let assignment = [(node.clone(), labels)];
        let call = self.rm.replace_node_to_labels(&assignment);
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("the RM did not answer in time".into()),
        }
    }
}

fn remember(a: &Action, memory: &mut Memory) {
    if let ActionKind::SetNodePartition { node, partition } = &a.kind {
        match partition {
            Partition::General => {
                memory.partitions.remove(node);
            }
            Partition::Short => {
                memory.partitions.insert(node.clone(), *partition);
            }
        }
    }
}

pub fn after_of(kind: &ActionKind) -> String {
    match kind {
        ActionKind::Suspend { footprint, .. } => footprint.to_string(),
        ActionKind::Shrink { to, .. } | ActionKind::Resume { to, .. } => to.to_string(),
        ActionKind::Kill { .. } => "killed".into(),
        ActionKind::SetNodeCapacity { advertised, .. } => advertised.to_string(),
        ActionKind::SetNodePartition { partition, .. } => partition_name(*partition).into(),
    }
}

/// `before` and `after` of [`after_of`] as numbers.
fn amounts_of(a: &Action) -> Amounts {
    let limits = |l: &Limits| (Some(l.memory_mb), Some(f64::from(l.cpu_millis) / 1000.0));
    let resource = |r: &Resource| (Some(r.memory_mb), Some(f64::from(r.vcores)));
    let (before_memory_mb, before_vcores) = match &a.before {
        Before::Limits(l) => limits(l),
        Before::Advertised(r) => resource(r),
        Before::Partition(_) => (None, None),
    };
    let (after_memory_mb, after_vcores) = match &a.kind {
        ActionKind::Suspend { footprint, .. } => limits(footprint),
        ActionKind::Shrink { to, .. } | ActionKind::Resume { to, .. } => limits(to),
        ActionKind::SetNodeCapacity { advertised, .. } => resource(advertised),
        ActionKind::Kill { .. } | ActionKind::SetNodePartition { .. } => (None, None),
    };
    Amounts {
        before_memory_mb,
        before_vcores,
        after_memory_mb,
        after_vcores,
    }
}

pub fn partition_name(p: Partition) -> &'static str {
    match p {
        Partition::General => "general",
        Partition::Short => "short",
    }
}

fn capacity_goes_down(view: &ClusterView, a: &Action) -> bool {
    let ActionKind::SetNodeCapacity { node, advertised } = &a.kind else {
        return false;
    };
    view.nodes()
        .iter()
        .find(|n| &n.id == node)
        .is_some_and(|n| !n.advertised.fits_in(advertised))
}

/// The view already shows the action's target state, or its target is gone.
fn reached_or_gone(view: &ClusterView, a: &Action) -> bool {
    if let Some(id) = a.kind.container() {
        let Some(i) = view.container_by_id(&id) else {
            return true;
        };
        let c = view.container(i);
        return match &a.kind {
            ActionKind::Suspend { footprint, .. } => c.current == *footprint,
            ActionKind::Shrink { to, .. } | ActionKind::Resume { to, .. } => c.current == *to,
            _ => false,
        };
    }
    match &a.kind {
        ActionKind::SetNodeCapacity { node, advertised } => view
            .nodes()
            .iter()
            .find(|n| &n.id == node)
            .is_none_or(|n| n.advertised == *advertised),
        ActionKind::SetNodePartition { node, partition } => view
            .nodes()
            .iter()
            .find(|n| &n.id == node)
            .is_none_or(|n| n.partition == *partition),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures_util::future::BoxFuture;

    use super::*;
    use crate::agent::api::{ActionKind as AgentKind, ContainerStatus};
    use crate::cluster::builder::ClusterBuilder;
    use crate::cluster::{ContainerState, JobClass, PolicyKind};
    use crate::config::settings::{PolicySettings, RmSettings};
    use crate::controller::agents::ActError;
    use crate::controller::hub::ControllerEvent;
    use crate::policy::{PolicyState, decide};

    /// Records every call; fails the first `fail` of them, as refusals with `refuse`.
    /// With `per_node`, each node has its own agent, and `slow` takes that long over each
    /// action. The executor retries `retries` times.
    struct FakeAgents {
        calls: Mutex<Vec<String>>,
        fail: Mutex<u32>,
        refuse: bool,
        per_node: bool,
        slow: Option<(String, Duration)>,
        retries: u32,
    }

    impl Actuator for FakeAgents {
        fn agent_for(&self, node: &NodeId) -> Option<String> {
            Some(if self.per_node {
                format!("http://agent-of-{node}")
            } else {
                "http://agent".into()
            })
        }
        fn act(
            &self,
            agent: &str,
            req: ActionRequest,
        ) -> BoxFuture<'_, Result<ActionResult, ActError>> {
            let agent = agent.to_string();
            Box::pin(async move {
                if let Some((slow, took)) = &self.slow
                    && *slow == agent
                {
                    tokio::time::sleep(*took).await;
                }
                self.calls.lock().unwrap().push(format!(
                    "{} {}",
                    req.action.kind().name(),
                    req.container
                ));
                let mut fail = self.fail.lock().unwrap();
                if *fail > 0 {
                    *fail -= 1;
                    return Err(if self.refuse {
                        ActError::refused("memory busy")
                    } else {
                        ActError::transient("agent busy")
                    });
                }
                Ok(ActionResult {
                    container: req
                        .container
                        .parse()
                        .map_err(|_| ActError::refused("bad id"))?,
                    docker_id: "d".into(),
                    action: req.action.kind(),
                    state: ContainerState::Suspended,
                    changed: true,
                    limits: None,
                    cgroup: None,
                    path: None,
                    throttle_confirmed: true,
                    memory_before_bytes: None,
                    memory_after_bytes: None,
                    memory_busy_retries: 0,
                    swapping: false,
                    dry_run: true,
                    timings: Default::default(),
                })
            })
        }
        fn containers(&self, _agent: &str) -> BoxFuture<'_, Result<Vec<ContainerStatus>, String>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn renew_lease(
            &self,
            _agent: &str,
            ttl: Duration,
        ) -> BoxFuture<'_, Result<crate::agent::api::LeaseStatus, String>> {
            let timeout_ms = ttl.as_millis() as u64;
            Box::pin(async move {
                Ok(crate::agent::api::LeaseStatus {
                    holder: Some("test".into()),
                    live: true,
                    timeout_ms,
                    remaining_ms: timeout_ms,
                    changed_containers: 0,
                })
            })
        }
    }

    /// `immediate`, whole containers per round.
    fn immediate() -> PolicySettings {
        PolicySettings {
            kind: PolicyKind::Immediate,
            natural_termination_factor: 1.0,
            total_preemption_per_round: 1.0,
            ..PolicySettings::default()
        }
    }

    /// Short work waits on a cluster full of long containers: immediate suspends.
    fn starved() -> (ClusterView, Plan, PolicySettings) {
        let view = ClusterBuilder::new()
            .nodes(1, Resource::new(8192, 8))
            .queue("root.short", 95.0, 100.0, JobClass::Short)
            .queue("root.long", 5.0, 100.0, JobClass::Long)
            .app("root.long", "MAPREDUCE")
            .am(Resource::new(1024, 1))
            .containers(7, Resource::new(1024, 1))
            .app("root.short", "MAPREDUCE")
            .pending(1, Resource::new(512, 1))
            .build()
            .unwrap();
        let settings = immediate();
        let plan = decide(&view, &mut PolicyState::new(settings.clone()), 100_000);
        assert!(
            plan.actions.iter().any(|a| a.kind.verb() == "suspend"),
            "{plan:?}"
        );
        (view, plan, settings)
    }

    struct Running {
        ex: Executor,
        results: mpsc::UnboundedReceiver<JobDone>,
        _state: tempfile::TempDir,
    }

    impl Running {
        /// Sends the plan out and waits until everything is back.
        async fn execute(
            &mut self,
            view: &ClusterView,
            plan: &Plan,
            memory: &mut Memory,
        ) -> (Dispatched, Completed) {
            let sent = self.ex.dispatch(view, plan, now(), memory);
            let done = self
                .ex
                .settle(&mut self.results, memory, Duration::from_secs(10))
                .await;
            assert_eq!(self.ex.in_flight(), 0);
            (sent, done)
        }
    }

    fn executor(fail: u32) -> (Running, Arc<FakeAgents>, Hub) {
        executor_with(FakeAgents {
            calls: Mutex::new(Vec::new()),
            fail: Mutex::new(fail),
            refuse: false,
            per_node: false,
            slow: None,
            retries: 0,
        })
    }

    fn executor_with(fake: FakeAgents) -> (Running, Arc<FakeAgents>, Hub) {
        let max_retries = fake.retries;
        let fake = Arc::new(fake);
        let rm = RmClient::new(&RmSettings {
            addresses: vec!["http://127.0.0.1:9".into()],
            user_name: None,
            request_timeout_ms: 200,
            max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
            tls: Default::default(),
            kerberos: None,
        })
        .unwrap();
        let hub = Hub::new();
        let state = tempfile::tempdir().unwrap();
        let mut ex = Executor::new(
            fake.clone(),
            rm,
            hub.clone(),
            ExecutorLimits {
                call_timeout: Duration::from_secs(1),
                action_timeout: Duration::from_secs(60),
                max_retries,
                max_parallel: 8,
            },
            CapacityLedger::open(state.path()).unwrap(),
        );
        let results = ex.take_results().unwrap();
        (
            Running {
                ex,
                results,
                _state: state,
            },
            fake,
            hub,
        )
    }

    fn outcomes(
        rx: &mut tokio::sync::broadcast::Receiver<ControllerEvent>,
    ) -> Vec<(String, Outcome)> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if let ControllerEvent::Action(a) = e {
                out.push((a.action.clone(), a.outcome.clone()));
            }
        }
        out
    }

    fn now() -> Trigger {
        Trigger {
            kind: TriggerKind::Timer,
            at: Instant::now(),
        }
    }

    #[tokio::test]
    async fn observe_only_logs_the_plan_and_calls_nothing() {
        let (view, _, mut settings) = starved();
        settings.observe_only = true;
        let plan = decide(&view, &mut PolicyState::new(settings), 100_000);
        let (mut ex, fake, hub) = executor(0);
        let mut rx = hub.subscribe();
        let (sent, _) = ex.execute(&view, &plan, &mut Memory::default()).await;
        assert!(sent.actions > 0);
        assert!(fake.calls.lock().unwrap().is_empty());
        let seen = outcomes(&mut rx);
        assert_eq!(seen.len(), plan.observed.len());
        assert!(seen.iter().all(|(_, o)| *o == Outcome::Observed));
    }

    #[test]
    fn records_carry_before_and_after_as_numbers() {
        let (_, plan, _) = starved();
        let suspend = plan
            .actions
            .iter()
            .find(|a| matches!(a.kind, ActionKind::Suspend { .. }))
            .expect("a suspension");
        let (ActionKind::Suspend { footprint, .. }, Before::Limits(before)) =
            (&suspend.kind, &suspend.before)
        else {
            panic!("{suspend:?}");
        };
        let a = amounts_of(suspend);
        assert_eq!(a.before_memory_mb, Some(before.memory_mb));
        assert_eq!(a.before_vcores, Some(f64::from(before.cpu_millis) / 1000.0));
        assert_eq!(a.after_memory_mb, Some(footprint.memory_mb));
        assert_eq!(
            a.after_vcores,
            Some(f64::from(footprint.cpu_millis) / 1000.0)
        );
        let raise = plan
            .actions
            .iter()
            .find(|a| matches!(a.kind, ActionKind::SetNodeCapacity { .. }))
            .expect("a capacity change");
        let ActionKind::SetNodeCapacity { advertised, .. } = &raise.kind else {
            unreachable!()
        };
        let a = amounts_of(raise);
        assert_eq!(a.after_memory_mb, Some(advertised.memory_mb));
        assert_eq!(a.after_vcores, Some(f64::from(advertised.vcores)));
    }

    #[tokio::test]
    async fn transport_failures_are_retried_at_once_and_an_agents_refusal_is_not() {
        let (view, plan, _) = starved();
        for refuse in [false, true] {
            let (mut ex, fake, hub) = executor_with(FakeAgents {
                calls: Mutex::new(Vec::new()),
                fail: Mutex::new(1),
                refuse,
                per_node: false,
                slow: None,
                retries: 2,
            });
            let mut rx = hub.subscribe();
            ex.execute(&view, &plan, &mut Memory::default()).await;
            let first = fake.calls.lock().unwrap()[0].clone();
            let tries = fake
                .calls
                .lock()
                .unwrap()
                .iter()
                .filter(|c| **c == first)
                .count();
            let seen = outcomes(&mut rx);
            let failed = seen
                .iter()
                .filter(|(a, o)| a == "suspend" && matches!(o, Outcome::Failed { .. }))
                .count();
            if refuse {
                assert_eq!((tries, failed), (1, 1), "{seen:?}");
            } else {
                assert_eq!((tries, failed), (2, 0), "{seen:?}");
            }
        }
    }

    #[tokio::test]
    async fn a_failed_suspension_is_logged_withholds_the_capacity_and_is_retried_next_tick() {
        let (view, plan, _) = starved();
        let (mut ex, fake, hub) = executor(1);
        let mut rx = hub.subscribe();
        let mut memory = Memory::default();
        let (_, done) = ex.execute(&view, &plan, &mut memory).await;
        assert!(done.failed >= 1, "{done:?}");
        let first = outcomes(&mut rx);
        assert!(
            first.iter().any(|(a, o)| a == "suspend"
                && matches!(o, Outcome::Failed { reason } if reason == "agent busy")),
            "{first:?}"
        );
        // The room is not advertised while the container still holds it (the RM here is
        // unreachable, so an attempt would have failed with another reason).
        assert!(
            first.iter().any(|(a, o)| a == "set-node-capacity"
                && matches!(o, Outcome::Failed { reason } if reason.contains("failed"))),
            "{first:?}"
        );
        assert!(ex.ex.failed_pending() >= 1);

        // Next tick the plan is empty (the policy thinks it is done): the suspension is
        // tried again and now succeeds.
        let empty = Plan {
            actions: Vec::new(),
            ..plan.clone()
        };
        ex.execute(&view, &empty, &mut memory).await;
        let second = outcomes(&mut rx);
        assert!(
            second
                .iter()
                .any(|(a, o)| a == "suspend" && *o == Outcome::Applied),
            "{second:?}"
        );
        let calls = fake.calls.lock().unwrap().clone();
        let suspends = calls.iter().filter(|c| c.starts_with("suspend")).count();
        let planned = plan
            .actions
            .iter()
            .filter(|a| a.kind.verb() == "suspend")
            .count();
        assert_eq!(
            suspends,
            planned + 1,
            "only the failed one again: {calls:?}"
        );
        assert_eq!(calls.first(), calls.last(), "{calls:?}");
        assert_eq!(AgentKind::Suspend.name(), "suspend");
    }

    #[tokio::test]
    async fn a_newer_plan_supersedes_a_failed_action() {
        let (view, plan, _) = starved();
        let (mut ex, fake, _hub) = executor(1);
        let mut memory = Memory::default();
        ex.execute(&view, &plan, &mut memory).await;
        let before = fake.calls.lock().unwrap().len();
        // The same plan again: each target is acted on once, not once for the retry and
        // once for the plan.
        ex.execute(&view, &plan, &mut memory).await;
        let calls = fake.calls.lock().unwrap().clone();
        let container_actions = plan
            .actions
            .iter()
            .filter(|a| a.kind.container().is_some())
            .count();
        assert_eq!(calls.len() - before, container_actions, "{calls:?}");
    }

    /// Two nodes, each with its own agent, full of long containers; short work waits on
    /// both.
    fn starved_on_two_nodes() -> (ClusterView, Plan) {
        let view = ClusterBuilder::new()
            .nodes(2, Resource::new(8192, 8))
            .queue("root.short", 95.0, 100.0, JobClass::Short)
            .queue("root.long", 5.0, 100.0, JobClass::Long)
            .app("root.long", "MAPREDUCE")
            .am(Resource::new(1024, 1))
            .containers_on(0, 7, Resource::new(1024, 1))
            .containers_on(1, 8, Resource::new(1024, 1))
            .app("root.short", "MAPREDUCE")
            .pending(12, Resource::new(1024, 1))
            .build()
            .unwrap();
        let settings = immediate();
        let plan = decide(&view, &mut PolicyState::new(settings), 100_000);
        (view, plan)
    }

    #[tokio::test]
    async fn a_slow_agent_delays_only_its_own_actions_and_the_tick_does_not_wait() {
        let (view, plan) = starved_on_two_nodes();
        let lanes: BTreeSet<String> = plan
            .actions
            .iter()
            .filter(|a| a.kind.container().is_some())
            .filter_map(|a| a.node.as_ref().map(|n| format!("http://agent-of-{n}")))
            .collect();
        assert_eq!(lanes.len(), 2, "both nodes give up containers: {plan:?}");
        let slow = lanes.first().unwrap().clone();
        let (mut ex, fake, hub) = executor_with(FakeAgents {
            calls: Mutex::new(Vec::new()),
            fail: Mutex::new(0),
            refuse: false,
            per_node: true,
            slow: Some((slow.clone(), Duration::from_secs(30))),
            retries: 0,
        });
        let mut rx = hub.subscribe();
        let mut memory = Memory::default();
        let started = Instant::now();
        let sent = ex.ex.dispatch(&view, &plan, now(), &memory);
        assert!(sent.actions > 0);
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "the tick waited"
        );

        // The other agent's job comes back on its own, long before the slow one.
        let done = tokio::time::timeout(Duration::from_secs(5), ex.results.recv())
            .await
            .expect("the fast agent's job")
            .unwrap();
        assert_ne!(done.lane, slow);
        let c = ex.ex.complete(done, &mut memory);
        // Only the raise of the node's capacity fails: the RM here is unreachable.
        assert!(!c.applied.is_empty(), "{c:?}");
        let applied = outcomes(&mut rx);
        assert!(
            applied
                .iter()
                .any(|(a, o)| a == "suspend" && *o == Outcome::Applied),
            "{applied:?}"
        );
        assert!(
            ex.ex.in_flight() > 0,
            "the slow agent's actions are still out"
        );

        // The next tick reports them late and does not send them again.
        assert!(ex.ex.report_late(Duration::ZERO) > 0);
        let warned = {
            let mut w = Vec::new();
            while let Ok(e) = rx.try_recv() {
                if let ControllerEvent::Warning { message, .. } = e {
                    w.push(message);
                }
            }
            w
        };
        assert!(
            warned
                .iter()
                .any(|m| m.starts_with("late: suspend") && m.contains(&slow)),
            "{warned:?}"
        );
        let before = fake.calls.lock().unwrap().len();
        let again = ex.ex.dispatch(&view, &plan, now(), &memory);
        assert!(again.deferred > 0, "{again:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            fake.calls.lock().unwrap().len() - before < plan.actions.len(),
            "targets still out are not sent twice"
        );
    }

    #[tokio::test]
    async fn a_nodes_physical_capacity_is_recorded_before_it_is_raised() {
        let (view, plan, _) = starved();
        let raise = plan
            .actions
            .iter()
            .find_map(|a| match &a.kind {
                ActionKind::SetNodeCapacity { node, advertised } => {
                    Some((node.clone(), *advertised))
                }
                _ => None,
            })
            .expect("immediate advertises the room it makes");
        let (mut ex, _, _) = executor(0);
        let mut memory = Memory::default();
        memory
            .physical
            .insert(raise.0.clone(), Resource::new(8192, 8));
        ex.ex.dispatch(&view, &plan, now(), &memory);
        // On disk before any call went out (the RM here is unreachable, so the raise
        // fails and the record stays).
        let text = std::fs::read_to_string(ex.ex.ledger().path()).unwrap();
        assert!(
            text.contains(raise.0.as_str()) && text.contains("8192"),
            "{text}"
        );
        ex.ex
            .settle(&mut ex.results, &mut memory, Duration::from_secs(10))
            .await;
        assert_eq!(
            ex.ex.ledger().nodes().get(&raise.0),
            Some(&Resource::new(8192, 8))
        );
    }
}
