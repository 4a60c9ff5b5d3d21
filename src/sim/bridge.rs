//! The narrow adapter between the simulator and src/policy/: the simulator turns its state
//! into the same [`ClusterView`] the controller builds from YARN, runs the policy on it,
//! and applies the resulting actions through the cost model. "The same src/policy/ code
//! runs in the simulator" means everything policy-specific goes through this file.

use crate::cluster::{
    App, AppIdx, ApplicationAttemptId, ApplicationId, ClusterView, Container, ContainerId, Millis,
    Node, NodeId, NodeIdx, Partition, PolicyKind, Queue, QueueIdx, ResourceRequest, ViewError,
};
use crate::config::settings::PolicySettings;
use crate::policy::{self, ActionKind, PolicyState};
use crate::resources::{Limits, Resource};
use crate::sim::engine::{Core, NONE, Phase};
use crate::sim::sched::central::Leaf;
use crate::sim::workload::{MICROS_PER_MILLI, Time};

/// Cluster timestamp of the simulated RM, so ids look like YARN's.
pub const SIM_CLUSTER_TIMESTAMP: u64 = 1_700_000_000_000;

/// What a policy asked for, in simulator indices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SimAction {
    Suspend { container: u32, to: Limits },
    Shrink { container: u32, to: Limits },
    Resume { container: u32, to: Limits },
    Kill { container: u32 },
    SetNodeCapacity { node: u32, advertised: Resource },
    SetNodePartition { node: u32, partition: Partition },
}

/// A policy from src/policy/ and its state across ticks.
pub(crate) struct PolicyBridge {
    state: PolicyState,
}

impl PolicyBridge {
    pub fn new(kind: PolicyKind, mut settings: PolicySettings) -> PolicyBridge {
        settings.kind = kind;
        settings.observe_only = false;
        PolicyBridge {
            state: PolicyState::new(settings),
        }
    }

    pub fn settings(&self) -> &PolicySettings {
        self.state.settings()
    }

    /// Containers marked for killing and when (ms), in id order.
    pub fn kill_marks(&self) -> impl Iterator<Item = (ContainerId, Option<Millis>)> + '_ {
        self.state.memos.kill_marks()
    }

    /// One monitoring tick: `policy::decide` on the view, its actions in simulator
    /// indices. An action naming something not in the view is a policy bug and an error.
    pub fn decide(
        &mut self,
        view: &ClusterView,
        ids: &ViewBuilder,
        now: Millis,
    ) -> Result<Vec<SimAction>, String> {
        let plan = policy::decide(view, &mut self.state, now);
        plan.actions
            .iter()
            .map(|a| {
                let container = |id: &ContainerId| {
                    ids.container(view, id)
                        .ok_or_else(|| format!("policy acted on {id}, which is not in the view"))
                };
                let node = |id: &NodeId| {
                    ids.node(id).ok_or_else(|| {
                        format!("policy acted on node {id}, which is not in the view")
                    })
                };
                Ok(match &a.kind {
                    ActionKind::Suspend {
                        container: c,
                        footprint,
                    } => SimAction::Suspend {
                        container: container(c)?,
                        to: *footprint,
                    },
                    ActionKind::Shrink { container: c, to } => SimAction::Shrink {
                        container: container(c)?,
                        to: *to,
                    },
                    ActionKind::Resume { container: c, to } => SimAction::Resume {
                        container: container(c)?,
                        to: *to,
                    },
                    ActionKind::Kill { container: c } => SimAction::Kill {
                        container: container(c)?,
                    },
                    ActionKind::SetNodeCapacity {
                        node: n,
                        advertised,
                    } => SimAction::SetNodeCapacity {
                        node: node(n)?,
                        advertised: *advertised,
                    },
                    ActionKind::SetNodePartition { node: n, partition } => {
                        SimAction::SetNodePartition {
                            node: node(n)?,
                            partition: *partition,
                        }
                    }
                })
            })
            .collect()
    }
}

/// Builds [`ClusterView`]s of the simulated cluster and maps the policy's ids back.
///
/// A view is built from scratch every tick (the policy reads a whole cluster, as in the
/// controller), but into buffers kept from the last view ([`ViewBuilder::recycle`]):
/// node ids, queue paths, applications' strings and request lists are written once and
/// reused, so a tick allocates next to nothing on thousands of nodes.
pub(crate) struct ViewBuilder {
    node_count: usize,
    /// Nodes of the last view, ids made once; each tick rewrites what changes.
    nodes: Vec<Node>,
    /// Root and leaves, paths made once.
    queues: Vec<Queue>,
    /// Applications of the last view, and spare ones whose buffers wait for reuse.
    apps: Vec<App>,
    spare_apps: Vec<App>,
    view_containers: Vec<Container>,
    /// View container index -> simulator container, for the last view built.
    containers: Vec<u32>,
    /// Job -> view application index (u32::MAX when absent) for the current view.
    app_of: Vec<u32>,
}

impl ViewBuilder {
    pub fn new(nodes: usize) -> ViewBuilder {
        ViewBuilder {
            node_count: nodes,
            nodes: Vec::new(),
            queues: Vec::new(),
            apps: Vec::new(),
            spare_apps: Vec::new(),
            view_containers: Vec::new(),
            containers: Vec::new(),
            app_of: Vec::new(),
        }
    }

    /// The simulator container behind a container id of the last view.
    pub fn container(&self, view: &ClusterView, id: &ContainerId) -> Option<u32> {
        view.container_by_id(id)
            .and_then(|i| self.containers.get(i.get()).copied())
    }

    pub fn node(&self, id: &NodeId) -> Option<u32> {
        let n: u32 = id
            .as_str()
            .strip_prefix("sim-node-")?
            .strip_suffix(":8041")?
            .parse()
            .ok()?;
        ((n as usize) < self.node_count).then_some(n)
    }

    /// Take the buffers of a view built here back for the next one.
    pub fn recycle(&mut self, view: ClusterView) {
        let ClusterView {
            queues,
            apps,
            nodes,
            containers,
            ..
        } = view;
        self.queues = queues;
        self.apps = apps;
        self.view_containers = containers;
        self.nodes = nodes;
    }

    pub fn build<M: Copy + std::fmt::Debug>(
        &mut self,
        core: &mut Core<'_, M>,
        leaves: &[Leaf],
        advertised: &[Resource],
    ) -> Result<ClusterView, ViewError> {
        let cluster = core
            .nodes
            .iter()
            .fold(Resource::ZERO, |a, n| a + n.capacity);
        if self.queues.len() != leaves.len() + 1 {
            self.queues = std::iter::once("root".to_string())
                .chain(leaves.iter().map(|l| format!("root.{}", l.spec.name)))
                .map(|path| Queue {
                    path,
                    parent: None,
                    children: vec![],
                    guaranteed: Resource::ZERO,
                    maximum: Resource::ZERO,
                    preemption_disabled: false,
                    job_class: None,
                    policy: None,
                    used: Resource::ZERO,
                    pending: Resource::ZERO,
                })
                .collect();
        }
        self.queues[0].guaranteed = cluster;
        self.queues[0].maximum = cluster;
        for (q, l) in self.queues[1..].iter_mut().zip(leaves) {
            q.parent = Some(QueueIdx(0));
            q.guaranteed = l.guaranteed;
            q.maximum = l.maximum;
            q.job_class = l.spec.class;
        }
        // Bring attained service up to now before reading it; the live containers, in
        // slab order, are the view's containers.
        self.containers.clear();
        core.advance_live(&mut self.containers);
        self.app_of.clear();
        self.app_of.resize(core.jobs.len(), u32::MAX);
        let mut apps = std::mem::take(&mut self.apps);
        self.spare_apps.append(&mut apps);
        for (leaf_idx, l) in leaves.iter().enumerate() {
            for &j in &l.apps {
                self.add_app(core, j, leaf_idx, &mut apps);
            }
        }
        let mut nodes = std::mem::take(&mut self.nodes);
        if nodes.len() != core.nodes.len() {
            nodes = (0..core.nodes.len()).map(new_node).collect();
        }
        for (n, node) in nodes.iter_mut().enumerate() {
            node.capacity = core.nodes[n].capacity;
            node.advertised = advertised[n];
            node.partition = core.nodes[n].partition;
        }
        let mut containers = std::mem::take(&mut self.view_containers);
        containers.clear();
        for i in 0..self.containers.len() {
            let k = core.container(self.containers[i]);
            let spec = core.wl.jobs[k.job as usize];
            // Jobs with running containers but nothing pending are out of the queues.
            if self.app_of[k.job as usize] == u32::MAX {
                let q = leaves
                    .iter()
                    .position(|l| l.spec.class == Some(spec.class))
                    .unwrap_or(0);
                self.add_app(core, k.job, q, &mut apps);
            }
            let local = k.task - spec.first_task;
            let number = 2 + local as u64 + k.attempts as u64 * spec.num_tasks as u64;
            containers.push(Container {
                id: ContainerId::new(ApplicationAttemptId::new(app_id(k.job), 1), 0, number),
                app: AppIdx(self.app_of[k.job as usize]),
                node: NodeIdx(k.node),
                allocated: k.allocated,
                current: k.current,
                state: k.state,
                is_am: false,
                requested_ms: Some(millis(k.requested)),
                started_ms: millis(k.started),
                attained_service_ms: (k.attained * k.allocated.vcores.max(1) as f64
                    / MICROS_PER_MILLI as f64) as u64,
                swapping: k.phase == Phase::Steady
                    && core.cfg.costs.swapping(k.allocated, k.current),
                managed: true,
            });
        }
        let queues = std::mem::take(&mut self.queues);
        ClusterView::new(queues, apps, nodes, containers)
    }

    fn add_app<M: Copy + std::fmt::Debug>(
        &mut self,
        core: &Core<'_, M>,
        job: u32,
        leaf: usize,
        apps: &mut Vec<App>,
    ) {
        if self.app_of[job as usize] != u32::MAX {
            return;
        }
        let spec = core.wl.jobs[job as usize];
        let run = &core.jobs[job as usize];
        let mut app = self.spare_apps.pop().unwrap_or_else(|| App {
            id: app_id(job),
            // Names and users mean nothing to the policies here.
            name: String::new(),
            queue: QueueIdx(0),
            user: String::new(),
            application_type: String::new(),
            tags: vec![],
            class: spec.class,
            submitted_ms: 0,
            progress: 0.0,
            requests: vec![],
            pending_since_ms: None,
            containers: vec![],
        });
        // Outstanding requests grouped by container size, in order of first request.
        let requests = &mut app.requests;
        requests.clear();
        let mut add =
            |shape: Resource, n: u32| match requests.iter_mut().find(|r| r.capability == shape) {
                Some(r) => r.num_containers += n,
                None => requests.push(ResourceRequest {
                    capability: shape,
                    num_containers: n,
                }),
            };
        let mut oldest: Time = NONE;
        if !run.failed {
            let (from, to) = (spec.first_task + run.next, spec.first_task + spec.num_tasks);
            if from < to {
                oldest = spec.arrival;
                if core.wl.task_shape.is_empty() {
                    // Every task has the same shape: one request for all.
                    add(core.wl.shape(from as usize), to - from);
                } else {
                    for t in from..to {
                        add(core.wl.shape(t as usize), 1);
                    }
                }
            }
            for &(t, _, at) in &run.retry {
                add(core.wl.shape(t as usize), 1);
                oldest = oldest.min(at);
            }
        }
        let app_type = spec.kind.application_type();
        if app.application_type != app_type {
            app.application_type.clear();
            app.application_type.push_str(app_type);
        }
        app.id = app_id(job);
        app.name.clear();
        app.user.clear();
        app.tags.clear();
        app.queue = QueueIdx(leaf as u32 + 1);
        app.class = spec.class;
        app.submitted_ms = millis(spec.arrival);
        app.progress = run.done as f64 / spec.num_tasks.max(1) as f64;
        app.pending_since_ms = (oldest != NONE).then(|| millis(oldest));
        self.app_of[job as usize] = apps.len() as u32;
        apps.push(app);
    }
}

fn new_node(n: usize) -> Node {
    Node {
        id: node_id(n),
        capacity: Resource::ZERO,
        advertised: Resource::ZERO,
        partition: Partition::General,
        used: Resource::ZERO,
        containers: vec![],
    }
}

pub(crate) fn app_id(job: u32) -> ApplicationId {
    ApplicationId::new(SIM_CLUSTER_TIMESTAMP, job + 1)
}

fn millis(t: Time) -> Millis {
    t / MICROS_PER_MILLI
}

pub(crate) fn node_id(n: usize) -> NodeId {
    NodeId::new(format!("sim-node-{n:05}:8041"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ContainerState, JobClass};
    use crate::sim::engine::EngineConfig;
    use crate::sim::sched::QueueSpec;
    use crate::sim::workload::secs;
    use crate::sim::workload::tests::slot_workload;

    #[test]
    fn views_show_queues_apps_and_containers_as_yarn_would() {
        let wl = slot_workload(&[(0.0, &[10.0, 10.0, 10.0]), (1.0, &[500.0])], 90.0);
        let cfg = EngineConfig {
            nodes: 2,
            node_capacity: Resource::new(2048, 2),
            network_delay: 0,
            costs: Default::default(),
            max_task_attempts: 4,
            seed: 1,
            sample_every: None,
        };
        let mut core: Core<'_, ()> = Core::new(&wl, &cfg).unwrap();
        core.now = secs(2.0);
        let t = core.take_task(0).unwrap();
        core.launch(0, t, 1);
        let t = core.take_task(1).unwrap();
        let c1 = core.launch(1, t, 0);
        core.now = secs(4.0);
        core.reduce(c1, Limits::MIN_FOOTPRINT, true);
        let leaves = vec![
            leaf(
                QueueSpec::new("short", 0.5, 1.0, Some(JobClass::Short)),
                &[0],
            ),
            leaf(QueueSpec::new("long", 0.5, 1.0, Some(JobClass::Long)), &[]),
        ];
        let mut b = ViewBuilder::new(2);
        let advertised = vec![Resource::new(4096, 3), Resource::new(2048, 2)];
        let v = b.build(&mut core, &leaves, &advertised).unwrap();
        assert_eq!(v.queues.len(), 3);
        assert_eq!(v.queues[1].path, "root.short");
        assert_eq!(v.queues[1].guaranteed, Resource::new(2048, 2));
        assert_eq!(v.apps.len(), 2);
        let short = &v.apps[0];
        assert_eq!(short.class, JobClass::Short);
        assert_eq!(short.requests[0].num_containers, 2);
        assert_eq!(short.pending_since_ms, Some(0));
        assert_eq!(
            v.apps[1].queue,
            QueueIdx(2),
            "a long job out of the queues keeps its class' queue"
        );
        assert_eq!(v.nodes[0].advertised, Resource::new(4096, 3));
        let k0 = v.containers.iter().find(|k| k.node == NodeIdx(1)).unwrap();
        assert_eq!(k0.started_ms, 2000);
        assert_eq!(k0.attained_service_ms, 2000);
        assert_eq!(k0.state, ContainerState::Running);
        assert_eq!(k0.id.to_string(), "container_1700000000000_0001_01_000002");
        let k1 = v.containers.iter().find(|k| k.node == NodeIdx(0)).unwrap();
        assert_eq!(k1.state, ContainerState::Suspended);
        assert_eq!(k1.current, Limits::MIN_FOOTPRINT);
        assert!(
            !k1.swapping,
            "not swapping while memory is still being reclaimed"
        );
    }

    fn leaf(spec: QueueSpec, apps: &[u32]) -> Leaf {
        let cluster = Resource::new(4096, 4);
        Leaf {
            guaranteed: cluster.scale(spec.capacity),
            maximum: cluster.scale(spec.maximum),
            spec,
            used: Resource::ZERO,
            apps: apps.iter().copied().collect(),
        }
    }
}
