//! Act: a [`Plan`]'s actions become agent calls (suspend, shrink, resume, kill) and RM
//! calls (node resource update, node labels), every one recorded in the preemption log.
//!
//! Order per tick: node capacities that go down first (YARN must stop placing work in
//! room that is being taken back before the containers get it back), then the container
//! actions, in parallel across agents and in plan order within one, then capacities that
//! go up and partitions, on nodes whose container actions all succeeded (room is
//! advertised only once it is really free). Each call has a timeout and bounded retries;
//! an action that still fails is logged as failed, kept, and tried again next tick until
//! a newer plan supersedes it, its target is reached or gone, or it has failed
//! [`MAX_RETRY_TICKS`] ticks in a row.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use tokio::time::Instant;

use super::agents::Actuator;
use super::hub::{ActionRecord, Hub, Outcome};
use super::view::{Memory, SHORT_PARTITION_LABEL};
use crate::agent::api::{Action as AgentAction, ActionRequest, ActionResult};
use crate::cluster::{ClusterView, ContainerId, NodeId, Partition};
use crate::policy::{Action, ActionKind, Plan};
use crate::resources::{Limits, Resource};
use crate::yarn::RmClient;
use crate::yarn::dto::SignalContainerCommand;

/// Ticks a failing action is retried before it is given up (with a warning).
pub const MAX_RETRY_TICKS: u32 = 10;

/// What made the controller tick, for the latency of the actions it leads to.
#[derive(Clone, Copy, Debug)]
pub struct Trigger {
    /// `timer`, `submission` (the proxy), `rm-submission` (the RM's submission counter),
    /// `agent-event`, `manual`, `reload`, `shutdown`.
    pub kind: &'static str,
    pub at: Instant,
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
    ticks: u32,
}

/// Counts of one tick's actions, and what the agents answered to the ones applied.
#[derive(Clone, Debug, Default)]
pub struct Executed {
    pub actions: usize,
    pub failed: usize,
    /// Each applied container action's result, with the agent that applied it.
    pub applied: Vec<(String, ActionResult)>,
}

pub struct Executor {
    actuator: Arc<dyn Actuator>,
    rm: RmClient,
    hub: Hub,
    call_timeout: Duration,
    /// Bounds one agent action (`yarn.preemptor.agent.action-timeout-ms`).
    action_timeout: Duration,
    max_retries: u32,
    failed: BTreeMap<Target, Pending>,
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Executor {
    pub fn new(
        actuator: Arc<dyn Actuator>,
        rm: RmClient,
        hub: Hub,
        call_timeout: Duration,
        action_timeout: Duration,
        max_retries: u32,
    ) -> Executor {
        Executor {
            actuator,
            rm,
            hub,
            call_timeout,
            action_timeout,
            max_retries,
            failed: BTreeMap::new(),
        }
    }

    pub fn actuator(&self) -> &Arc<dyn Actuator> {
        &self.actuator
    }

    /// Actions failed and waiting for their retry.
    pub fn failed_pending(&self) -> usize {
        self.failed.len()
    }

    /// Carries out `plan` (and the retries of earlier failures) on the cluster `view`
    /// shows. In observe-only mode every planned action is logged as observed and
    /// nothing is touched.
    pub async fn execute(
        &mut self,
        view: &ClusterView,
        plan: &Plan,
        trigger: Trigger,
        memory: &mut Memory,
    ) -> Executed {
        if plan.observe_only {
            for a in &plan.observed {
                self.record(a, trigger, Outcome::Observed);
            }
            return Executed {
                actions: plan.observed.len(),
                ..Executed::default()
            };
        }
        let mut actions: Vec<Action> = Vec::new();
        let planned: BTreeSet<Target> = plan.actions.iter().map(|a| target_of(&a.kind)).collect();
        let mut retried: BTreeMap<Target, u32> = BTreeMap::new();
        for (target, p) in std::mem::take(&mut self.failed) {
            if planned.contains(&target) || reached_or_gone(view, &p.action) {
                continue;
            }
            if p.ticks >= MAX_RETRY_TICKS {
                self.hub.warn(
                    unix_ms(),
                    format!("giving up on `{}` after {} failed ticks", p.action, p.ticks),
                );
                continue;
            }
            retried.insert(target, p.ticks);
            actions.push(p.action);
        }
        actions.extend(plan.actions.iter().cloned());

        let (lowering, rest): (Vec<Action>, Vec<Action>) = actions
            .into_iter()
            .partition(|a| capacity_goes_down(view, a));
        let (containers, raising): (Vec<Action>, Vec<Action>) =
            rest.into_iter().partition(|a| a.kind.container().is_some());

        let mut results: Vec<(Action, Result<(), String>)> = Vec::new();
        for a in lowering {
            let r = self.node_call(&a, memory).await;
            results.push((a, r));
        }

        // One sequence per agent, all agents at once.
        let mut by_agent: BTreeMap<String, Vec<Action>> = BTreeMap::new();
        let mut no_agent = Vec::new();
        for a in containers {
            match a.node.as_ref().and_then(|n| self.actuator.agent_for(n)) {
                Some(agent) => by_agent.entry(agent).or_default().push(a),
                None => no_agent.push(a),
            }
        }
        let this = &*self;
        let groups = join_all(by_agent.into_iter().map(|(agent, list)| async move {
            let mut out = Vec::with_capacity(list.len());
            for a in list {
                let r = this.container_call(&agent, view, &a).await;
                out.push((a, r));
            }
            (agent, out)
        }))
        .await;
        let mut applied = Vec::new();
        let mut container_results: Vec<(Action, Result<(), String>)> = Vec::new();
        for (agent, out) in groups {
            for (a, r) in out {
                let r = r.map(|result| applied.push((agent.clone(), result)));
                container_results.push((a, r));
            }
        }
        for a in no_agent {
            let r = match &a.kind {
                ActionKind::Kill { container } => self.rm_kill(container).await,
                _ => Err("no agent is known for this node".to_string()),
            };
            container_results.push((a, r));
        }
        let troubled: BTreeSet<NodeId> = container_results
            .iter()
            .filter(|(_, r)| r.is_err())
            .filter_map(|(a, _)| a.node.clone())
            .collect();
        results.extend(container_results);

        for a in raising {
            let node = match &a.kind {
                ActionKind::SetNodeCapacity { node, .. } => Some(node),
                _ => None,
            };
            let r = if node.is_some_and(|n| troubled.contains(n)) {
                Err("not advertised: an action on this node's containers failed".to_string())
            } else {
                self.node_call(&a, memory).await
            };
            results.push((a, r));
        }

        let mut done = Executed {
            applied,
            ..Executed::default()
        };
        for (a, r) in results {
            done.actions += 1;
            match r {
                Ok(()) => self.record(&a, trigger, Outcome::Applied),
                Err(reason) => {
                    done.failed += 1;
                    self.record(&a, trigger, Outcome::Failed { reason });
                    let target = target_of(&a.kind);
                    let ticks = retried.get(&target).copied().unwrap_or(0) + 1;
                    self.failed.insert(target, Pending { action: a, ticks });
                }
            }
        }
        done
    }

    /// One agent call with the timeout and retries.
    async fn container_call(
        &self,
        agent: &str,
        view: &ClusterView,
        a: &Action,
    ) -> Result<ActionResult, String> {
        let Some(id) = a.kind.container() else {
            return Err("not a container action".into());
        };
        let allocated = view
            .container_by_id(&id)
            .map(|i| view.container(i).allocated);
        let action = match (&a.kind, allocated) {
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
            _ => return Err(format!("{id} is no longer in the cluster")),
        };
        let req = ActionRequest {
            container: id.to_string(),
            action,
        };
        let mut last = String::new();
        for attempt in 0..=self.max_retries {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
            }
            match tokio::time::timeout(self.action_timeout, self.actuator.act(agent, req.clone()))
                .await
            {
                Ok(Ok(result)) => return Ok(result),
                Ok(Err(e)) => last = e,
                Err(_) => {
                    // Not retried: the agent may still be carrying it out. The next tick
                    // sends it again if the plan still wants it.
                    return Err(format!(
                        "{agent} did not finish the action within {} ms",
                        self.action_timeout.as_millis()
                    ));
                }
            }
        }
        Err(last)
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

    /// A node resource update or a node label change, with the retries.
    async fn node_call(&self, a: &Action, memory: &mut Memory) -> Result<(), String> {
        let mut last = String::new();
        for attempt in 0..=self.max_retries {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
            }
            let r = match &a.kind {
                ActionKind::SetNodeCapacity { node, advertised } => {
                    self.set_capacity(node, *advertised).await
                }
                ActionKind::SetNodePartition { node, partition } => {
                    self.set_partition(node, *partition).await
                }
                _ => return Err("not a node action".into()),
            };
            match r {
                Ok(()) => {
                    remember(a, memory);
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub async fn set_capacity(&self, node: &NodeId, advertised: Resource) -> Result<(), String> {
        let call = self.rm.update_node_resource(node, advertised, None);
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(r) => r.map(|_| ()).map_err(|e| e.to_string()),
            Err(_) => Err("the RM did not answer in time".into()),
        }
    }

    /// Dice's short partition is the node label [`SHORT_PARTITION_LABEL`]; the label must
    /// exist in the RM (`yarn rmadmin -addToClusterNodeLabels short`).
    pub async fn set_partition(&self, node: &NodeId, partition: Partition) -> Result<(), String> {
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

    pub fn record(&self, a: &Action, trigger: Trigger, outcome: Outcome) {
        self.hub.record_action(ActionRecord {
            at_ms: unix_ms(),
            policy: a.policy.to_string(),
            action: a.kind.verb().to_string(),
            container: a.kind.container().map(|c| c.to_string()),
            application: a.application.map(|x| x.to_string()),
            queue: a.queue.clone(),
            node: a.node.as_ref().map(|n| n.to_string()),
            before: a.before.to_string(),
            after: after_of(&a.kind),
            reason: a.reason.clone(),
            latency_ms: Some(trigger.at.elapsed().as_millis() as u64),
            outcome,
        });
    }
}

fn remember(a: &Action, memory: &mut Memory) {
    match &a.kind {
        ActionKind::SetNodeCapacity { node, advertised } => {
            if memory.physical.get(node) == Some(advertised) {
                memory.advertised.remove(node);
            } else {
                memory.advertised.insert(node.clone(), *advertised);
            }
        }
        ActionKind::SetNodePartition { node, partition } => match partition {
            Partition::General => {
                memory.partitions.remove(node);
            }
            Partition::Short => {
                memory.partitions.insert(node.clone(), *partition);
            }
        },
        _ => {}
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
    view.nodes
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
            .nodes
            .iter()
            .find(|n| &n.id == node)
            .is_none_or(|n| n.advertised == *advertised),
        ActionKind::SetNodePartition { node, partition } => view
            .nodes
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
    use crate::controller::hub::ControllerEvent;
    use crate::policy::{PolicyState, decide};

    /// Records every call; fails the first `fail` of them.
    struct FakeAgents {
        calls: Mutex<Vec<String>>,
        fail: Mutex<u32>,
    }

    impl Actuator for FakeAgents {
        fn agent_for(&self, _node: &NodeId) -> Option<String> {
            Some("http://agent".into())
        }
        fn act(
            &self,
            _agent: &str,
            req: ActionRequest,
        ) -> BoxFuture<'_, Result<ActionResult, String>> {
            Box::pin(async move {
                self.calls.lock().unwrap().push(format!(
                    "{} {}",
                    req.action.kind().name(),
                    req.container
                ));
                let mut fail = self.fail.lock().unwrap();
                if *fail > 0 {
                    *fail -= 1;
                    return Err("agent busy".into());
                }
                Ok(ActionResult {
                    container: req.container.parse().map_err(|_| "bad id".to_string())?,
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
        fn renew_lease(&self, _agent: &str, _ttl: Duration) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async { Ok(()) })
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
        let settings = PolicySettings {
            kind: PolicyKind::Immediate,
            natural_termination_factor: 1.0,
            total_preemption_per_round: 1.0,
            ..PolicySettings::default()
        };
        let plan = decide(&view, &mut PolicyState::new(settings.clone()), 100_000);
        assert!(
            plan.actions.iter().any(|a| a.kind.verb() == "suspend"),
            "{plan:?}"
        );
        (view, plan, settings)
    }

    fn executor(fail: u32) -> (Executor, Arc<FakeAgents>, Hub) {
        let fake = Arc::new(FakeAgents {
            calls: Mutex::new(Vec::new()),
            fail: Mutex::new(fail),
        });
        let rm = RmClient::new(&RmSettings {
            addresses: vec!["http://127.0.0.1:9".into()],
            user_name: None,
            request_timeout_ms: 200,
            max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
        })
        .unwrap();
        let hub = Hub::new();
        let ex = Executor::new(
            fake.clone(),
            rm,
            hub.clone(),
            Duration::from_secs(1),
            Duration::from_secs(1),
            0,
        );
        (ex, fake, hub)
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
            kind: "timer",
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
        let done = ex
            .execute(&view, &plan, now(), &mut Memory::default())
            .await;
        assert!(done.actions > 0);
        assert!(fake.calls.lock().unwrap().is_empty());
        let seen = outcomes(&mut rx);
        assert_eq!(seen.len(), plan.observed.len());
        assert!(seen.iter().all(|(_, o)| *o == Outcome::Observed));
    }

    #[tokio::test]
    async fn a_failed_suspension_is_logged_withholds_the_capacity_and_is_retried_next_tick() {
        let (view, plan, _) = starved();
        let (mut ex, fake, hub) = executor(1);
        let mut rx = hub.subscribe();
        let mut memory = Memory::default();
        let done = ex.execute(&view, &plan, now(), &mut memory).await;
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
        assert!(ex.failed_pending() >= 1);

        // Next tick the plan is empty (the policy thinks it is done): the suspension is
        // tried again and now succeeds.
        let empty = Plan {
            actions: Vec::new(),
            ..plan.clone()
        };
        ex.execute(&view, &empty, now(), &mut memory).await;
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
        ex.execute(&view, &plan, now(), &mut memory).await;
        let before = fake.calls.lock().unwrap().len();
        // The same plan again: each target is acted on once, not once for the retry and
        // once for the plan.
        ex.execute(&view, &plan, now(), &mut memory).await;
        let calls = fake.calls.lock().unwrap().clone();
        let container_actions = plan
            .actions
            .iter()
            .filter(|a| a.kind.container().is_some())
            .count();
        assert_eq!(calls.len() - before, container_actions, "{calls:?}");
    }
}
