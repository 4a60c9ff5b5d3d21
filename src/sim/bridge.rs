//! The narrow adapter between the simulator and src/policy/: the simulator turns its state
//! into the same [`ClusterView`] the controller builds from YARN, runs the policy on it,
//! and applies the resulting actions through the cost model. "The same src/policy/ code
//! runs in the simulator" means everything policy-specific goes through this file.

use crate::cluster::{
    App, AppIdx, ApplicationAttemptId, ApplicationId, ClusterView, Container, ContainerId,
    ContainerIdx, IdMap, Millis, Node, NodeId, NodeIdx, Partition, PolicyKind, Queue, QueueIdx,
    ResourceRequest, ViewError,
};
use crate::config::settings::PolicySettings;
use crate::policy::{self, ActionKind, PolicyState};
use crate::resources::{Limits, Resource};
use crate::sim::engine::{Container as SimContainer, Core, NONE, Phase};
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
        let mut out = Vec::with_capacity(plan.actions.len());
        for a in &plan.actions {
            let place = a.place;
            let container = |id: &ContainerId| {
                ids.container_at(view, id, place)
                    .ok_or_else(|| format!("policy acted on {id}, which is not in the view"))
            };
            let node = |id: &NodeId| {
                ids.node(id)
                    .ok_or_else(|| format!("policy acted on node {id}, which is not in the view"))
            };
            out.push(match &a.kind {
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
            });
        }
        Ok(out)
    }
}

/// Keeps a [`ClusterView`] of the simulated cluster and maps the policy's ids back.
///
/// The policy reads a whole cluster every tick, as in the controller, but between two
/// ticks only a few of thousands of containers change. So the view is built once and
/// then patched ([`ClusterView::add_container`] and its kin): the containers the engine
/// lists as changed ([`Core::track_changes`]) are added, updated or removed, and the
/// applications' demand is refreshed, and only the nodes whose advertised capacity or
/// partition was set are read. A tick costs O(changes + applications) of plain writes,
/// not a rebuild and re-index of every container. Attained service is not brought up
/// to now either: a container's speed changes only with a change the engine lists, so
/// each carries its attained service as of that change and the rate it grows at, which
/// the policy reads at its tick's time. Debug builds compare every patched view with
/// one built anew.
pub(crate) struct ViewBuilder {
    node_count: usize,
    view: Option<ClusterView>,
    /// View container index -> simulator slot.
    slots: Vec<u32>,
    /// Simulator slot -> view container index (`ABSENT` when not in the view).
    at_slot: Vec<u32>,
    /// Job -> view application index (`ABSENT` when not in the view), and back.
    app_of: Vec<u32>,
    job_of: Vec<u32>,
    /// Per job, the last update that found it in a leaf's queue.
    queued_at: Vec<u64>,
    updates: u64,
    changed: Vec<u32>,
    /// Nodes whose advertised capacity or partition was set since the last update.
    nodes_changed: Vec<u32>,
    requests: Vec<ResourceRequest>,
}

const ABSENT: u32 = u32::MAX;

impl ViewBuilder {
    pub fn new(nodes: usize) -> ViewBuilder {
        ViewBuilder {
            node_count: nodes,
            view: None,
            slots: Vec::new(),
            at_slot: Vec::new(),
            app_of: Vec::new(),
            job_of: Vec::new(),
            queued_at: Vec::new(),
            updates: 0,
            changed: Vec::new(),
            nodes_changed: Vec::new(),
            requests: Vec::new(),
        }
    }

    /// Node `n`'s advertised capacity or partition was set: the next update reads it.
    /// Other nodes are read only when the view is first built.
    pub fn node_changed(&mut self, n: u32) {
        self.nodes_changed.push(n);
    }

    /// The view as of the last [`ViewBuilder::update`].
    pub fn view(&self) -> Option<&ClusterView> {
        self.view.as_ref()
    }

    /// The simulator container behind a container id of the view, looked for first
    /// at `place` when the policy said where it was.
    pub fn container_at(
        &self,
        view: &ClusterView,
        id: &ContainerId,
        place: Option<ContainerIdx>,
    ) -> Option<u32> {
        place
            .filter(|&i| view.containers().get(i.get()).is_some_and(|c| c.id == *id))
            .or_else(|| view.container_by_id(id))
            .and_then(|i| self.slots.get(i.get()).copied())
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

    /// Bring the view up to the simulator's state now. The first call builds it and
    /// asks the engine to list changes from then on.
    pub fn update<M: Copy + std::fmt::Debug>(
        &mut self,
        core: &mut Core<'_, M>,
        leaves: &[Leaf],
        advertised: &[Resource],
    ) -> Result<(), ViewError> {
        let mut view = match self.view.take() {
            Some(mut v) => {
                core.take_changed(&mut self.changed);
                // A decision follows every update: the journal holds one tick's changes.
                v.clear_journals();
                v
            }
            None => {
                let v = self.start(core, leaves)?;
                self.nodes_changed.clear();
                self.nodes_changed.extend(0..v.nodes().len() as u32);
                v
            }
        };
        // On error the view is dropped and the next update starts over.
        self.patch(&mut view, core, leaves, advertised)?;
        debug_assert!(
            view.derived_agree(),
            "a patched view's derived fields disagree with a rebuild"
        );
        debug_assert!(
            fresh_view(core, leaves, advertised).is_ok_and(|f| same_cluster(
                &view,
                &f,
                millis(core.now)
            )),
            "a patched view differs from one built anew"
        );
        self.view = Some(view);
        Ok(())
    }

    /// An empty view of the queues and nodes; every live container is listed as
    /// changed, and the engine lists changes from now on.
    fn start<M: Copy + std::fmt::Debug>(
        &mut self,
        core: &mut Core<'_, M>,
        leaves: &[Leaf],
    ) -> Result<ClusterView, ViewError> {
        core.track_changes();
        self.slots.clear();
        self.at_slot.clear();
        self.job_of.clear();
        self.app_of = vec![ABSENT; core.jobs.len()];
        self.queued_at = vec![0; core.jobs.len()];
        self.changed.clear();
        self.changed.extend(core.containers().map(|(i, _)| i));
        let nodes = (0..core.nodes.len())
            .map(|n| Node {
                capacity: core.nodes[n].capacity,
                advertised: core.nodes[n].capacity,
                ..new_node(n)
            })
            .collect();
        ClusterView::new(sim_queues(core, leaves), vec![], nodes, vec![])
    }

    fn patch<M: Copy + std::fmt::Debug>(
        &mut self,
        view: &mut ClusterView,
        core: &mut Core<'_, M>,
        leaves: &[Leaf],
        advertised: &[Resource],
    ) -> Result<(), ViewError> {
        let nodes_changed = std::mem::take(&mut self.nodes_changed);
        for &n in &nodes_changed {
            let i = n as usize;
            let (Some(&adv), Some(v), Some(k)) =
                (advertised.get(i), view.nodes().get(i), core.nodes.get(i))
            else {
                continue;
            };
            if v.advertised != adv || v.partition != k.partition {
                view.set_node(NodeIdx(n), adv, k.partition)?;
            }
        }
        self.nodes_changed = nodes_changed;
        self.nodes_changed.clear();
        let changed = std::mem::take(&mut self.changed);
        let result = self.patch_containers(view, core, leaves, &changed);
        self.changed = changed;
        self.changed.clear();
        result?;
        self.updates += 1;
        for (leaf, l) in leaves.iter().enumerate() {
            for &j in &l.apps {
                self.queued_at[j as usize] = self.updates;
                let a = self.app(view, core, j, leaf)?;
                self.set_demand(view, core, j, a, leaf)?;
            }
        }
        // Backwards, so that an application moved into a removed one's index has been
        // seen already.
        for a in (0..view.apps().len()).rev() {
            let j = self.job_of[a];
            if self.queued_at[j as usize] == self.updates {
                continue;
            }
            if view.apps()[a].containers.is_empty() {
                view.remove_app(AppIdx(a as u32))?;
                self.job_of.swap_remove(a);
                self.app_of[j as usize] = ABSENT;
                if let Some(&m) = self.job_of.get(a) {
                    self.app_of[m as usize] = a as u32;
                }
            } else {
                // Jobs with containers but nothing pending are out of the queues.
                let leaf = class_leaf(core, leaves, j);
                self.set_demand(view, core, j, AppIdx(a as u32), leaf)?;
            }
        }
        Ok(())
    }

    fn patch_containers<M: Copy + std::fmt::Debug>(
        &mut self,
        view: &mut ClusterView,
        core: &Core<'_, M>,
        leaves: &[Leaf],
        changed: &[u32],
    ) -> Result<(), ViewError> {
        for &s in changed {
            if self.at_slot.len() <= s as usize {
                self.at_slot.resize(s as usize + 1, ABSENT);
            }
            let k = core.container(s);
            let id = k.is_live().then(|| container_id(core, k));
            let at = self.at_slot[s as usize];
            if at != ABSENT {
                let i = ContainerIdx(at);
                if Some(view.container(i).id) == id {
                    view.set_container_limits(i, k.current, k.state, swapping(core, k))?;
                    let a = Attained::of(k);
                    view.set_attained_service(i, a.ms, a.as_of_ms, a.rate)?;
                    continue;
                }
                // Gone, or its slot reused by another container.
                view.remove_container(i)?;
                self.slots.swap_remove(at as usize);
                self.at_slot[s as usize] = ABSENT;
                if let Some(&m) = self.slots.get(at as usize) {
                    self.at_slot[m as usize] = at;
                }
            }
            if let Some(id) = id {
                let leaf = class_leaf(core, leaves, k.job);
                let app = self.app(view, core, k.job, leaf)?;
                let i = view.add_container(sim_container(core, k, id, app))?;
                self.slots.push(s);
                self.at_slot[s as usize] = i.0;
            }
        }
        Ok(())
    }

    /// `job`'s application, added to the view in `leaf` if it is not there.
    fn app<M: Copy + std::fmt::Debug>(
        &mut self,
        view: &mut ClusterView,
        core: &Core<'_, M>,
        job: u32,
        leaf: usize,
    ) -> Result<AppIdx, ViewError> {
        if self.app_of[job as usize] != ABSENT {
            return Ok(AppIdx(self.app_of[job as usize]));
        }
        let a = view.add_app(sim_app(core, job, leaf))?;
        self.app_of[job as usize] = a.0;
        self.job_of.push(job);
        Ok(a)
    }

    fn set_demand<M: Copy + std::fmt::Debug>(
        &mut self,
        view: &mut ClusterView,
        core: &Core<'_, M>,
        job: u32,
        app: AppIdx,
        leaf: usize,
    ) -> Result<(), ViewError> {
        let (progress, since) = demand(core, job, &mut self.requests);
        view.set_app_demand(
            app,
            QueueIdx(leaf as u32 + 1),
            progress,
            &self.requests,
            since,
        )
    }
}

/// Root and one queue per leaf, as the RM would report them.
fn sim_queues<M: Copy + std::fmt::Debug>(core: &Core<'_, M>, leaves: &[Leaf]) -> Vec<Queue> {
    let cluster = core
        .nodes
        .iter()
        .fold(Resource::ZERO, |a, n| a + n.capacity);
    let queue = |path: String, parent, guaranteed, maximum, job_class| Queue {
        path,
        parent,
        children: vec![],
        guaranteed,
        maximum,
        preemption_disabled: false,
        job_class,
        policy: None,
        confined_to: None,
        used: Resource::ZERO,
        pending: Resource::ZERO,
    };
    std::iter::once(queue("root".into(), None, cluster, cluster, None))
        .chain(leaves.iter().map(|l| {
            queue(
                format!("root.{}", l.spec.name),
                Some(QueueIdx(0)),
                l.guaranteed,
                l.maximum,
                l.spec.class,
            )
        }))
        .collect()
}

/// The leaf a job out of the queues counts against: its class' leaf, else the first.
fn class_leaf<M: Copy + std::fmt::Debug>(core: &Core<'_, M>, leaves: &[Leaf], job: u32) -> usize {
    let class = core.wl.jobs[job as usize].class;
    leaves
        .iter()
        .position(|l| l.spec.class == Some(class))
        .unwrap_or(0)
}

/// A job's application as the RM reports it, with no demand yet.
fn sim_app<M: Copy + std::fmt::Debug>(core: &Core<'_, M>, job: u32, leaf: usize) -> App {
    let spec = core.wl.jobs[job as usize];
    App {
        id: app_id(job),
        // Names and users mean nothing to the policies here.
        name: String::new(),
        queue: QueueIdx(leaf as u32 + 1),
        user: String::new(),
        application_type: spec.kind.application_type().to_string(),
        tags: vec![],
        class: spec.class,
        submitted_ms: millis(spec.arrival),
        progress: 0.0,
        requests: vec![],
        pending_since_ms: None,
        containers: vec![],
    }
}

/// A job's outstanding requests, grouped by container size in order of first request,
/// into `requests`; its progress, and when its oldest request was made.
fn demand<M: Copy + std::fmt::Debug>(
    core: &Core<'_, M>,
    job: u32,
    requests: &mut Vec<ResourceRequest>,
) -> (f64, Option<Millis>) {
    let spec = core.wl.jobs[job as usize];
    let run = &core.jobs[job as usize];
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
    let progress = run.done as f64 / spec.num_tasks.max(1) as f64;
    (progress, (oldest != NONE).then(|| millis(oldest)))
}

/// The id YARN would give a container: 2 + task offset + attempts x tasks.
fn container_id<M: Copy + std::fmt::Debug>(core: &Core<'_, M>, k: &SimContainer) -> ContainerId {
    let spec = core.wl.jobs[k.job as usize];
    let local = k.task - spec.first_task;
    let number = 2 + local as u64 + k.attempts as u64 * spec.num_tasks as u64;
    ContainerId::new(ApplicationAttemptId::new(app_id(k.job), 1), 0, number)
}

fn swapping<M: Copy + std::fmt::Debug>(core: &Core<'_, M>, k: &SimContainer) -> bool {
    k.phase == Phase::Steady && core.cfg.costs.swapping(k.allocated, k.current)
}

/// A container's attained service in vcore-milliseconds, as the agents report CPU
/// time, for the view: as of the first whole millisecond from the engine's last
/// update of it, and the rate it grows at until its next listed change.
struct Attained {
    ms: u64,
    as_of_ms: Millis,
    rate: f64,
}

impl Attained {
    fn of(k: &SimContainer) -> Attained {
        let vcores = k.allocated.vcores.max(1) as f64;
        let as_of_ms = k.last.div_ceil(MICROS_PER_MILLI);
        let work = k.attained + (as_of_ms * MICROS_PER_MILLI - k.last) as f64 * k.speed;
        Attained {
            ms: (work * vcores / MICROS_PER_MILLI as f64) as u64,
            as_of_ms,
            rate: k.speed * vcores,
        }
    }
}

fn sim_container<M: Copy + std::fmt::Debug>(
    core: &Core<'_, M>,
    k: &SimContainer,
    id: ContainerId,
    app: AppIdx,
) -> Container {
    let attained = Attained::of(k);
    Container {
        id,
        app,
        node: NodeIdx(k.node),
        allocated: k.allocated,
        current: k.current,
        state: k.state,
        is_am: false,
        requested_ms: Some(millis(k.requested)),
        started_ms: millis(k.started),
        attained_service_ms: attained.ms,
        attained_rate: attained.rate,
        attained_as_of_ms: attained.as_of_ms,
        swapping: swapping(core, k),
        managed: true,
    }
}

/// A view built anew from the simulator's state, as [`ViewBuilder::update`] keeps one
/// (for debug assertions; attained service as the containers last recorded it).
fn fresh_view<M: Copy + std::fmt::Debug>(
    core: &Core<'_, M>,
    leaves: &[Leaf],
    advertised: &[Resource],
) -> Result<ClusterView, ViewError> {
    let mut apps: Vec<App> = Vec::new();
    let mut app_of: IdMap<u32, u32> = IdMap::default();
    let mut add = |apps: &mut Vec<App>, job: u32, leaf: usize| {
        if let Some(&a) = app_of.get(&job) {
            return a;
        }
        let mut app = sim_app(core, job, leaf);
        let (progress, since) = demand(core, job, &mut app.requests);
        app.progress = progress;
        app.pending_since_ms = since;
        app_of.insert(job, apps.len() as u32);
        apps.push(app);
        apps.len() as u32 - 1
    };
    for (leaf, l) in leaves.iter().enumerate() {
        for &j in &l.apps {
            add(&mut apps, j, leaf);
        }
    }
    let mut containers = Vec::new();
    for (_, k) in core.containers() {
        let a = add(&mut apps, k.job, class_leaf(core, leaves, k.job));
        containers.push(sim_container(core, k, container_id(core, k), AppIdx(a)));
    }
    let nodes = (0..core.nodes.len())
        .map(|n| Node {
            capacity: core.nodes[n].capacity,
            advertised: advertised[n],
            partition: core.nodes[n].partition,
            ..new_node(n)
        })
        .collect();
    ClusterView::new(sim_queues(core, leaves), apps, nodes, containers)
}

/// Whether two views show the same cluster, whatever the order of their entities.
/// Attained service is compared as of `now` and to the millisecond: a container's
/// engine state may have been brought up to date between its change and now, which
/// rounds differently.
fn same_cluster(a: &ClusterView, b: &ClusterView, now: Millis) -> bool {
    let canon = |v: &ClusterView| -> Vec<String> {
        let ids = |list: &[ContainerIdx]| {
            let mut ids: Vec<ContainerId> = list.iter().map(|&c| v.container(c).id).collect();
            ids.sort_unstable();
            ids
        };
        let mut out: Vec<String> = v.queues().iter().map(|q| format!("{q:?}")).collect();
        let mut apps: Vec<String> = v
            .apps()
            .iter()
            .map(|x| {
                let y = App {
                    containers: vec![],
                    ..x.clone()
                };
                format!("{y:?} {:?}", ids(&x.containers))
            })
            .collect();
        let mut nodes: Vec<String> = v
            .nodes()
            .iter()
            .map(|n| {
                let m = Node {
                    containers: vec![],
                    ..n.clone()
                };
                format!("{m:?} {:?}", ids(&n.containers))
            })
            .collect();
        let mut containers: Vec<String> = v
            .containers()
            .iter()
            .map(|c| {
                let d = Container {
                    app: AppIdx(0),
                    attained_service_ms: 0,
                    attained_as_of_ms: 0,
                    ..c.clone()
                };
                format!("{d:?} {}", v.app(c.app).id)
            })
            .collect();
        apps.sort();
        nodes.sort();
        containers.sort();
        out.extend(apps);
        out.extend(nodes);
        out.extend(containers);
        out.push(format!("{:?}", ids(v.below_allocation())));
        out
    };
    let attained_agree = a.containers().iter().all(|c| {
        b.container_by_id(&c.id).is_some_and(|i| {
            let (x, y) = (
                c.attained_service_at(now),
                b.container(i).attained_service_at(now),
            );
            x.abs_diff(y) <= 1
        })
    });
    attained_agree && canon(a) == canon(b)
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
            compact_from: 1 << 16,
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
        b.update(&mut core, &leaves, &advertised).unwrap();
        let v = b.view().unwrap();
        assert_eq!(v.queues().len(), 3);
        assert_eq!(v.queues()[1].path, "root.short");
        assert_eq!(v.queues()[1].guaranteed, Resource::new(2048, 2));
        assert_eq!(v.apps().len(), 2);
        let short = &v.apps()[0];
        assert_eq!(short.class, JobClass::Short);
        assert_eq!(short.requests[0].num_containers, 2);
        assert_eq!(short.pending_since_ms, Some(0));
        assert_eq!(
            v.apps()[1].queue,
            QueueIdx(2),
            "a long job out of the queues keeps its class' queue"
        );
        assert_eq!(v.nodes()[0].advertised, Resource::new(4096, 3));
        let k0 = v
            .containers()
            .iter()
            .find(|k| k.node == NodeIdx(1))
            .unwrap();
        assert_eq!(k0.started_ms, 2000);
        assert_eq!(k0.attained_service_at(2000), 0);
        assert_eq!(k0.attained_service_at(4000), 2000);
        assert_eq!(k0.attained_service_at(7000), 5000);
        assert_eq!(k0.state, ContainerState::Running);
        assert_eq!(k0.id.to_string(), "container_1700000000000_0001_01_000002");
        let k1 = v
            .containers()
            .iter()
            .find(|k| k.node == NodeIdx(0))
            .unwrap();
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
