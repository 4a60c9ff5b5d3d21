//! Acting on the emulator's simulated containers as the agent acts on real ones: a CPU
//! limit becomes the container's speed (suspend to 1% of a core is about 0, a shrink to
//! half its vcores is 0.5, resume is 1), kill ends it with SIGKILL. Memory limits are
//! recorded and reported but slow nothing: there is no process to page out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use crate::agent::api::{
    Action, ActionKind, ActionRequest, ActionResult, ContainerStatus, LeaseStatus,
};
use crate::agent::limits::CgroupLimits;
use crate::cluster::{ContainerId, ContainerState, NodeId};
use crate::controller::agents::{ActError, Actuator};
use crate::emulator::runtime::{
    ContainerRuntime, ContainerSignal, SimulatedContainer, SimulatedRuntime,
};
use crate::resources::{Limits, Resource};

/// CFS period the reported limits use, as Docker's default.
const CPU_PERIOD_US: u64 = 100_000;

/// Not a Docker container; the agent's API has a field for its id.
pub const SIMULATED_DOCKER_ID: &str = "simulated";

#[derive(Clone, Copy, Debug)]
struct Changed {
    allocated: Resource,
    limits: Limits,
    state: ContainerState,
}

/// Plugs [`SimulatedActuator`] into the controller: one "agent" per node, named after it.
pub struct SimulatedAgents(pub SimulatedActuator);

impl Actuator for SimulatedAgents {
    fn agent_for(&self, node: &NodeId) -> Option<String> {
        Some(node.as_str().to_string())
    }

    fn act(
        &self,
        agent: &str,
        req: ActionRequest,
    ) -> BoxFuture<'_, Result<ActionResult, ActError>> {
        let node = NodeId::new(agent);
        // The simulated runtime refuses only what no retry changes.
        Box::pin(async move { self.0.act(&node, &req).await.map_err(ActError::refused) })
    }

    fn containers(&self, agent: &str) -> BoxFuture<'_, Result<Vec<ContainerStatus>, String>> {
        let list = self.0.containers(&NodeId::new(agent));
        Box::pin(async move { Ok(list) })
    }

    fn renew_lease(
        &self,
        _agent: &str,
        ttl: Duration,
    ) -> BoxFuture<'_, Result<LeaseStatus, String>> {
        // Simulated containers live in this process: nothing outlives it to resume, and
        // this controller is the only holder there is.
        let timeout_ms = ttl.as_millis() as u64;
        Box::pin(async move {
            Ok(LeaseStatus {
                holder: Some("demo (in-process)".into()),
                live: true,
                timeout_ms,
                remaining_ms: timeout_ms,
                changed_containers: 0,
            })
        })
    }
}

/// The demo's stand-in for a node agent when the emulator runs simulated containers.
pub struct SimulatedActuator {
    runtime: SimulatedRuntime,
    /// Containers whose limits differ from their allocation.
    changed: Mutex<HashMap<ContainerId, Changed>>,
}

fn full(r: Resource) -> Limits {
    Limits::new(r.memory_mb, r.vcores.saturating_mul(1000))
}

fn cgroup(l: Limits, allocated: Resource) -> CgroupLimits {
    let bytes = l.memory_mb.saturating_mul(1024 * 1024);
    CgroupLimits {
        cpu_quota_us: Some(u64::from(l.cpu_millis) * CPU_PERIOD_US / 1000),
        cpu_period_us: CPU_PERIOD_US,
        cpu_shares: 1024 * u64::from(allocated.vcores.max(1)),
        memory_bytes: Some(bytes),
        memory_swap_bytes: Some(bytes),
        memory_high_bytes: None,
    }
}

/// The speed a CPU limit allows a task sized for `allocated`.
pub fn speed_for(target: Limits, allocated: Resource) -> f64 {
    let full = f64::from(allocated.vcores.max(1)) * 1000.0;
    (f64::from(target.cpu_millis) / full).clamp(0.0, 1.0)
}

impl SimulatedActuator {
    pub fn new(runtime: SimulatedRuntime) -> Self {
        SimulatedActuator {
            runtime,
            changed: Mutex::new(HashMap::new()),
        }
    }

    fn changed(&self) -> std::sync::MutexGuard<'_, HashMap<ContainerId, Changed>> {
        self.changed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, node: &NodeId, id: ContainerId) -> Result<SimulatedContainer, String> {
        self.runtime
            .containers()
            .into_iter()
            .find(|c| c.container == id && &c.node == node)
            .ok_or_else(|| format!("container {id} is not running on node {node}"))
    }

    /// Carries out one action on a container of `node`.
    pub async fn act(&self, node: &NodeId, req: &ActionRequest) -> Result<ActionResult, String> {
        let started = Instant::now();
        let id: ContainerId = req
            .container
            .parse()
            .map_err(|e| format!("{:?} is not a YARN container id: {e}", req.container))?;
        let running = self.find(node, id)?;
        let kind = req.action.kind();
        let before = self.changed().get(&id).copied();
        let (state, limits, changed) = match &req.action {
            Action::Suspend { allocated, target } | Action::Shrink { allocated, target } => {
                let state = if kind == ActionKind::Suspend {
                    ContainerState::Suspended
                } else if target.fits_in(&full(*allocated)) && *target != full(*allocated) {
                    ContainerState::Shrunk
                } else {
                    ContainerState::Running
                };
                let was = before.map(|c| c.limits).unwrap_or(full(*allocated));
                self.runtime
                    .set_speed(id, speed_for(*target, *allocated))
                    .map_err(|e| e.to_string())?;
                if state == ContainerState::Running {
                    self.changed().remove(&id);
                } else {
                    self.changed().insert(
                        id,
                        Changed {
                            allocated: *allocated,
                            limits: *target,
                            state,
                        },
                    );
                }
                (state, Some(*target), was != *target)
            }
            Action::Resume => {
                self.runtime.set_speed(id, 1.0).map_err(|e| e.to_string())?;
                self.changed().remove(&id);
                (
                    ContainerState::Running,
                    Some(full(running.resource)),
                    before.is_some(),
                )
            }
            Action::Kill => {
                self.runtime
                    .signal(id, ContainerSignal::ForcefulShutdown)
                    .await
                    .map_err(|e| e.to_string())?;
                self.changed().remove(&id);
                (ContainerState::Killed, None, true)
            }
        };
        let mut result = ActionResult {
            container: id,
            docker_id: SIMULATED_DOCKER_ID.into(),
            action: kind,
            state,
            changed,
            limits,
            cgroup: limits.map(|l| cgroup(l, running.resource)),
            path: None,
            // No cpu.stat to confirm anything from.
            throttle_confirmed: false,
            memory_before_bytes: None,
            memory_after_bytes: None,
            memory_busy_retries: 0,
            swapping: false,
            dry_run: false,
            timings: Default::default(),
        };
        result.timings.total_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(result)
    }

    /// The running containers of `node`, as an agent lists them.
    pub fn containers(&self, node: &NodeId) -> Vec<ContainerStatus> {
        let changed = self.changed().clone();
        self.runtime
            .containers()
            .into_iter()
            .filter(|c| &c.node == node)
            .map(|c| {
                let ch = changed.get(&c.container);
                let original = cgroup(full(c.resource), c.resource);
                let now = ch.map_or(full(c.resource), |x| x.limits);
                let attained = c.done.as_secs_f64() * f64::from(c.resource.vcores.max(1)) * 1000.0;
                ContainerStatus {
                    container: c.container,
                    docker_id: SIMULATED_DOCKER_ID.into(),
                    running: true,
                    state: ch.map_or(ContainerState::Running, |x| x.state),
                    changed: ch.is_some(),
                    allocated: ch.map(|x| x.allocated),
                    limits: ch.map(|x| x.limits),
                    current: Some(cgroup(now, c.resource)),
                    original: Some(original),
                    attained_service_ms: Some(attained as u64),
                    memory_usage_bytes: None,
                    swap_bytes: None,
                    swapping: false,
                    frozen: false,
                    path: None,
                }
            })
            .collect()
    }

    /// Every changed container back to full speed (the controller's shutdown, or a lease
    /// that ran out). Returns the containers resumed.
    pub fn resume_all(&self) -> Vec<ContainerId> {
        let ids: Vec<ContainerId> = self.changed().drain().map(|(id, _)| id).collect();
        for id in &ids {
            // A container that exited meanwhile needs nothing.
            let _ = self.runtime.set_speed(*id, 1.0);
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ApplicationAttemptId, ApplicationId};
    use crate::emulator::runtime::{ContainerEvents, Events, LaunchSpec};
    use std::sync::Arc;
    use std::time::Duration;

    struct Quiet;
    impl ContainerEvents for Quiet {
        fn started(&self) {}
        fn progress(&self, _: f64) {}
    }

    fn id(n: u64) -> ContainerId {
        ContainerId::new(ApplicationAttemptId::new(ApplicationId::new(1, 1), 1), 1, n)
    }

    fn launch(rt: &SimulatedRuntime, n: u64, ms: u64) -> tokio::task::JoinHandle<i32> {
        let spec = LaunchSpec {
            container: id(n),
            node: NodeId::new("h:1"),
            resource: Resource::new(2048, 2),
            command: vec![],
            simulated_duration_ms: ms,
            user: "u".into(),
        };
        let events: Events = Arc::new(Quiet);
        let run = rt.run(spec, events);
        tokio::spawn(async move { run.await.exit_status })
    }

    fn req(n: u64, action: Action) -> ActionRequest {
        ActionRequest {
            container: id(n).to_string(),
            action,
        }
    }

    #[tokio::test]
    async fn suspend_shrink_resume_and_kill_change_the_simulated_container() {
        let rt = SimulatedRuntime::new();
        let act = SimulatedActuator::new(rt.clone());
        let node = NodeId::new("h:1");
        let a = launch(&rt, 2, 60_000);
        let b = launch(&rt, 3, 60_000);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let allocated = Resource::new(2048, 2);

        let r = act
            .act(
                &node,
                &req(
                    2,
                    Action::Suspend {
                        allocated,
                        target: Limits::MIN_FOOTPRINT,
                    },
                ),
            )
            .await
            .unwrap();
        assert_eq!(r.state, ContainerState::Suspended);
        assert_eq!(r.cgroup.unwrap().cpu_millis(), Some(10));
        let target = Limits::new(1024, 1000);
        let r = act
            .act(&node, &req(3, Action::Shrink { allocated, target }))
            .await
            .unwrap();
        assert_eq!((r.state, r.changed), (ContainerState::Shrunk, true));
        let speeds: Vec<f64> = rt.containers().iter().map(|c| c.speed).collect();
        assert_eq!(speeds, vec![0.005, 0.5]);
        let listed = act.containers(&node);
        assert!(listed.iter().all(|c| c.changed));
        assert_eq!(listed[1].current.unwrap().cpu_millis(), Some(1000));
        assert_eq!(listed[1].original.unwrap().cpu_millis(), Some(2000));
        assert!(act.containers(&NodeId::new("other:1")).is_empty());

        let r = act.act(&node, &req(3, Action::Resume)).await.unwrap();
        assert_eq!((r.state, r.changed), (ContainerState::Running, true));
        assert_eq!(rt.containers()[1].speed, 1.0);
        assert_eq!(act.resume_all(), vec![id(2)]);
        assert_eq!(rt.containers()[0].speed, 1.0);

        act.act(&node, &req(2, Action::Kill)).await.unwrap();
        assert_eq!(a.await.unwrap(), crate::emulator::state::exit::SIGKILL);
        let e = act
            .act(&NodeId::new("other:1"), &req(3, Action::Resume))
            .await
            .unwrap_err();
        assert!(e.contains("not running on node other:1"), "{e}");
        assert!(act.act(&node, &req(9, Action::Kill)).await.is_err());
        rt.shutdown().await.unwrap();
        assert_eq!(b.await.unwrap(), crate::emulator::state::exit::ABORTED);
    }
}
