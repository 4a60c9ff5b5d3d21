//! Observe: one [`ClusterView`] from the RM's snapshot, the queue configuration, the
//! agents' container reports, the proxy's submission timestamps and what the controller
//! itself remembers (nodes' physical capacity, when a request started waiting).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::live_queues::{LiveQueues, QueueSource};
use crate::agent::api::ContainerStatus;
use crate::cluster::{
    App, AppIdx, ApplicationId, ClusterView, Container, ContainerId, ContainerState, JobClass,
    Millis, Node, NodeId, NodeIdx, Partition, QueueIdx, ResourceRequest, ViewError, classify,
};
use crate::config::queues::QueueTree;
use crate::resources::{Limits, Resource};
use crate::yarn::RmSnapshot;
use crate::yarn::dto::{AppInfo, NodeInfo, YarnApplicationState};

pub use crate::cluster::SHORT_PARTITION_LABEL;

/// What the controller remembers between ticks to build a view the RM alone cannot give.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// A node's physical capacity: from the capacity record for a node Preemptor
    /// changed, else its `totalResource` when first seen.
    pub physical: BTreeMap<NodeId, Resource>,
    /// Partitions Preemptor set, to undo on shutdown.
    pub partitions: BTreeMap<NodeId, Partition>,
    /// Since when an application has had outstanding requests.
    pub pending_since: HashMap<ApplicationId, Millis>,
    /// Submissions the proxy saw, by application.
    pub submitted: HashMap<ApplicationId, Millis>,
    /// When the controller first saw each live application.
    pub seen: HashMap<ApplicationId, Millis>,
}

/// The inputs of one observation besides the snapshot.
pub struct Inputs<'a> {
    pub queues: &'a QueueTree,
    pub class_cutoff_secs: f64,
    /// Every agent's report on its containers, by container.
    pub agents: &'a HashMap<ContainerId, ContainerStatus>,
    /// Containers an operator resumed (`preemptor resume`): never victims.
    pub exempt: &'a HashSet<ContainerId>,
    pub now: Millis,
}

/// An exempt container its agent still reports held: the view shows it as it will be
/// once resumed, and the controller resumes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Resuming {
    pub container: ContainerId,
    /// What its agent reports now.
    pub state: ContainerState,
    pub current: Limits,
}

/// Things the view left out, for the operator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    pub view: ClusterView,
    pub skipped: Vec<String>,
    /// Where the queue tree came from, and how capacity-scheduler.xml differs from it.
    pub queue_source: QueueSource,
    pub queue_disagreements: Vec<String>,
    /// Exempt containers still held, shown resumed in `view`.
    pub resuming: Vec<Resuming>,
}

/// Builds the view. The queue tree is the RM's (see [`LiveQueues`]). Exempt containers
/// are unmanaged, so no policy picks them, and one still held is shown resumed (listed in
/// `resuming`): the policy decides on the cluster as it will be once it is, so that its
/// node's capacity goes down before the container takes its room back. Entities the rest
/// of the view cannot place (an application in a queue the RM did not list, a container
/// on an unknown node) are left out and named in `skipped`; they never fail the tick.
pub fn build(
    snapshot: &RmSnapshot,
    inputs: &Inputs<'_>,
    memory: &mut Memory,
) -> Result<Observation, ViewError> {
    let mut skipped = Vec::new();

    let mut nodes = Vec::new();
    let mut node_index: HashMap<&str, NodeIdx> = HashMap::new();
    for n in snapshot.nodes.iter().filter(|n| node_is_up(n)) {
        let id = NodeId::new(n.id.trim());
        let advertised = n.total_resource.to_resource();
        let physical = *memory.physical.entry(id.clone()).or_insert(advertised);
        let partition = if n
            .node_labels
            .iter()
            .any(|l| l.trim() == SHORT_PARTITION_LABEL)
        {
            Partition::Short
        } else {
            Partition::General
        };
        node_index.insert(n.id.trim(), NodeIdx(nodes.len() as u32));
        nodes.push(Node {
            id,
            capacity: physical,
            advertised,
            partition,
            used: Resource::ZERO,
            containers: Vec::new(),
        });
    }
    let capacity = nodes
        .iter()
        .fold(Resource::ZERO, |acc, n: &Node| acc + n.capacity);
    let live = LiveQueues::resolve(&snapshot.scheduler, inputs.queues, capacity);

    let mut apps = Vec::new();
    let mut app_index: HashMap<ApplicationId, AppIdx> = HashMap::new();
    let mut with_containers: std::collections::HashSet<ApplicationId> = snapshot
        .containers
        .iter()
        .filter_map(|c| c.container_id.parse::<ContainerId>().ok())
        .map(|c| c.application())
        .collect();
    for a in &snapshot.apps {
        if !matches!(
            a.state,
            YarnApplicationState::Running | YarnApplicationState::Accepted
        ) {
            continue;
        }
        let Ok(id) = a.id.parse::<ApplicationId>() else {
            continue;
        };
        let Some(q) = live.index_of(a.queue.trim()) else {
            let tree = match live.source {
                QueueSource::ResourceManager => "the RM's queue tree",
                QueueSource::CapacitySchedulerXml => "capacity-scheduler.xml",
            };
            skipped.push(format!("{id}: queue {:?} is not in {tree}", a.queue));
            with_containers.remove(&id);
            continue;
        };
        let queue = &live.queues[q];
        if !live.is_leaf(q) {
            skipped.push(format!("{id}: queue {} is not a leaf", queue.path));
            with_containers.remove(&id);
            continue;
        }
        let tags: Vec<String> = a.tags().map(str::to_string).collect();
        let class = classify(queue.job_class, &tags, None, inputs.class_cutoff_secs);
        let started = u64::try_from(a.started_time).unwrap_or(0);
        let submitted_ms = memory.submitted.get(&id).copied().unwrap_or(started);
        let requests = requests_of(a);
        let pending_since_ms = if requests.is_empty() {
            memory.pending_since.remove(&id);
            None
        } else {
            // Without containers yet, the application has waited since its submission.
            let since = if with_containers.contains(&id) {
                inputs.now
            } else {
                submitted_ms
            };
            Some(*memory.pending_since.entry(id).or_insert(since))
        };
        app_index.insert(id, AppIdx(apps.len() as u32));
        apps.push(App {
            id,
            name: a.name.clone(),
            queue: QueueIdx(q as u32),
            user: a.user.clone(),
            application_type: a.application_type.clone(),
            tags,
            class,
            submitted_ms,
            progress: (a.progress / 100.0).clamp(0.0, 1.0),
            requests,
            pending_since_ms,
            containers: Vec::new(),
        });
    }
    memory
        .pending_since
        .retain(|id, _| app_index.contains_key(id));

    let mut containers = Vec::new();
    let mut resuming = Vec::new();
    for c in &snapshot.containers {
        let Ok(id) = c.container_id.parse::<ContainerId>() else {
            continue;
        };
        let Some(&app) = app_index.get(&id.application()) else {
            continue;
        };
        let node_name = if c.node_id.trim().is_empty() {
            c.assigned_node_id.trim()
        } else {
            c.node_id.trim()
        };
        let Some(&node) = node_index.get(node_name) else {
            skipped.push(format!("{id}: node {node_name:?} is not a running node"));
            continue;
        };
        let allocated = Resource::new(
            u64::try_from(c.allocated_mb).unwrap_or(0),
            u32::try_from(c.allocated_vcores.max(0)).unwrap_or(u32::MAX),
        );
        let report = inputs.agents.get(&id);
        let (current, state) = match report {
            Some(s) if s.state == ContainerState::Killed => (Limits::from(allocated), s.state),
            Some(s) if s.changed => (s.limits.unwrap_or(Limits::from(allocated)), s.state),
            _ => (Limits::from(allocated), ContainerState::Running),
        };
        let exempt = inputs.exempt.contains(&id);
        let (current, state) = match state {
            ContainerState::Suspended | ContainerState::Shrunk if exempt => {
                resuming.push(Resuming {
                    container: id,
                    state,
                    current,
                });
                (Limits::from(allocated), ContainerState::Running)
            }
            _ => (current, state),
        };
        containers.push(Container {
            id,
            app,
            node,
            allocated,
            current,
            state,
            is_am: id.is_am(),
            requested_ms: None,
            started_ms: u64::try_from(c.started_time).unwrap_or(0),
            attained_service_ms: report.and_then(|s| s.attained_service_ms).unwrap_or(0),
            attained_rate: 0.0,
            attained_as_of_ms: 0,
            swapping: report.is_some_and(|s| s.swapping),
            managed: report.is_some() && !exempt,
        });
    }

    let LiveQueues {
        queues,
        source: queue_source,
        disagreements: queue_disagreements,
        ..
    } = live;
    let view = ClusterView::new(queues, apps, nodes, containers)?;
    Ok(Observation {
        view,
        skipped,
        queue_source,
        queue_disagreements,
        resuming,
    })
}

/// Nodes the scheduler places containers on. An empty state (a minimal RM) counts.
fn node_is_up(n: &NodeInfo) -> bool {
    let s = n.state.trim();
    s.is_empty() || s.eq_ignore_ascii_case("RUNNING")
}

/// Outstanding requests. YARN lists one request per host, rack and `*` for the same
/// containers; the `*` (ANY) ones count each container once.
fn requests_of(a: &AppInfo) -> Vec<ResourceRequest> {
    let Some(list) = &a.resource_requests else {
        return Vec::new();
    };
    let any: Vec<_> = list
        .iter()
        .filter(|r| r.resource_name.trim() == "*")
        .collect();
    let chosen: Vec<_> = if any.is_empty() {
        list.iter().collect()
    } else {
        any
    };
    chosen
        .into_iter()
        .filter(|r| r.num_containers > 0)
        .map(|r| ResourceRequest {
            capability: r.capability.to_resource(),
            num_containers: u32::try_from(r.num_containers).unwrap_or(u32::MAX),
        })
        .filter(|r| r.capability.any_positive())
        .collect()
}

/// Short applications that hold a container for the first time, with how long they
/// waited for it (submission to the container's start, or to now when the RM gives no
/// start time).
pub fn first_containers(view: &ClusterView, now: Millis) -> Vec<(ApplicationId, Millis)> {
    view.apps()
        .iter()
        .filter(|a| a.class == JobClass::Short && !a.containers.is_empty())
        .map(|a| {
            let first = a
                .containers
                .iter()
                .map(|&c| view.container(c).started_ms)
                .filter(|&t| t > 0)
                .min()
                .unwrap_or(now);
            (a.id, first.saturating_sub(a.submitted_ms))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::PreemptorSettings;
    use crate::yarn::dto::{
        ClusterInfo, ContainerInfo, QueueInfo, ResourceInfo, ResourceRequestInfo,
    };

    fn queues() -> QueueTree {
        crate::config::load_embedded_default()
            .expect("the shipped configuration parses")
            .queues
    }

    fn node(id: &str, mem: i64, vcores: i64) -> NodeInfo {
        NodeInfo {
            id: id.into(),
            state: "RUNNING".into(),
            total_resource: ResourceInfo {
                memory: mem,
                vcores,
            },
            ..NodeInfo::default()
        }
    }

    fn app(id: &str, queue: &str, state: YarnApplicationState, started: i64) -> AppInfo {
        AppInfo {
            id: id.into(),
            queue: queue.into(),
            state,
            started_time: started,
            progress: 50.0,
            ..AppInfo::default()
        }
    }

    fn request(name: &str, mem: i64, n: i64) -> ResourceRequestInfo {
        ResourceRequestInfo {
            resource_name: name.into(),
            capability: ResourceInfo {
                memory: mem,
                vcores: 1,
            },
            num_containers: n,
            ..ResourceRequestInfo::default()
        }
    }

    fn container(id: &str, node: &str, mem: i64, vcores: i64) -> ContainerInfo {
        ContainerInfo {
            container_id: id.into(),
            allocated_mb: mem,
            allocated_vcores: vcores,
            node_id: node.into(),
            container_state: "RUNNING".into(),
            started_time: 1_000,
            ..ContainerInfo::default()
        }
    }

    fn snapshot() -> RmSnapshot {
        let mut short = app(
            "application_1700000000000_0002",
            "short",
            YarnApplicationState::Accepted,
            5_000,
        );
        short.resource_requests = Some(vec![
            request("*", 1024, 2),
            request("nm1", 1024, 2),
            request("/default-rack", 1024, 2),
        ]);
        RmSnapshot {
            active_rm: "http://rm:8088".into(),
            cluster: ClusterInfo::default(),
            scheduler: QueueInfo::default(),
            apps: vec![
                app(
                    "application_1700000000000_0001",
                    "root.long",
                    YarnApplicationState::Running,
                    1_000,
                ),
                short,
                app(
                    "application_1700000000000_0003",
                    "nosuchqueue",
                    YarnApplicationState::Running,
                    1_000,
                ),
            ],
            containers: vec![
                container(
                    "container_1700000000000_0001_01_000001",
                    "nm1:8041",
                    1024,
                    1,
                ),
                container(
                    "container_1700000000000_0001_01_000002",
                    "nm1:8041",
                    2048,
                    2,
                ),
                container(
                    "container_1700000000000_0001_01_000003",
                    "nm2:8041",
                    2048,
                    2,
                ),
                container(
                    "container_1700000000000_0003_01_000002",
                    "nm2:8041",
                    2048,
                    2,
                ),
            ],
            nodes: vec![
                node("nm1:8041", 4096, 4),
                node("nm2:8041", 4096, 4),
                NodeInfo {
                    state: "LOST".into(),
                    ..node("nm3:8041", 4096, 4)
                },
            ],
            warnings: vec![],
        }
    }

    fn status(id: &str, limits: Limits, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            container: id.parse().unwrap(),
            docker_id: "d".into(),
            running: true,
            state,
            changed: true,
            allocated: Some(Resource::new(2048, 2)),
            limits: Some(limits),
            current: None,
            original: None,
            attained_service_ms: Some(7_000),
            memory_usage_bytes: None,
            swap_bytes: None,
            swapping: true,
            frozen: false,
            path: None,
        }
    }

    #[test]
    fn the_view_joins_rm_configuration_agents_and_proxy() {
        let q = queues();
        let settings = PreemptorSettings::default();
        let mut agents = HashMap::new();
        let suspended = "container_1700000000000_0001_01_000003";
        agents.insert(
            suspended.parse().unwrap(),
            status(suspended, Limits::MIN_FOOTPRINT, ContainerState::Suspended),
        );
        let mut memory = Memory::default();
        let short_id: ApplicationId = "application_1700000000000_0002".parse().unwrap();
        memory.submitted.insert(short_id, 4_900);
        let inputs = Inputs {
            queues: &q,
            class_cutoff_secs: settings.policy.class_cutoff_secs,
            agents: &agents,
            exempt: &HashSet::new(),
            now: 10_000,
        };
        let obs = build(&snapshot(), &inputs, &mut memory).unwrap();
        let v = &obs.view;
        assert_eq!(v.nodes().len(), 2, "the LOST node is left out");
        assert_eq!(v.capacity(), Resource::new(8192, 8));
        assert_eq!(v.apps().len(), 2);
        assert_eq!(obs.skipped.len(), 1, "{:?}", obs.skipped);
        assert!(obs.skipped[0].contains("nosuchqueue"));

        let long = &v.apps()[0];
        assert_eq!(long.class, JobClass::Long);
        assert_eq!(v.queue(long.queue).path, "root.long");
        assert_eq!(long.containers.len(), 3);
        assert!((long.progress - 0.5).abs() < 1e-9);

        let short = &v.apps()[1];
        assert_eq!(short.class, JobClass::Short);
        assert_eq!(short.submitted_ms, 4_900, "the proxy's timestamp wins");
        assert_eq!(short.pending(), Resource::new(2048, 2), "ANY requests only");
        assert_eq!(short.pending_since_ms, Some(4_900));

        let c = &v.containers()[v
            .container_by_id(&suspended.parse().unwrap())
            .unwrap()
            .get()];
        assert_eq!(c.state, ContainerState::Suspended);
        assert_eq!(c.current, Limits::MIN_FOOTPRINT);
        assert_eq!(c.allocated, Resource::new(2048, 2));
        assert_eq!(c.attained_service_ms, 7_000);
        assert!(c.swapping);
        let am = &v.containers()[0];
        assert!(am.is_am);
        assert_eq!(am.state, ContainerState::Running);
        assert_eq!(am.current, Limits::from(Resource::new(1024, 1)));
        assert_eq!(v.queue(long.queue).used, Resource::new(5120, 5));
    }

    #[test]
    fn physical_capacity_is_remembered_while_the_rm_advertises_more() {
        let q = queues();
        let agents = HashMap::new();
        let mut memory = Memory::default();
        let inputs = Inputs {
            queues: &q,
            class_cutoff_secs: 90.0,
            agents: &agents,
            exempt: &HashSet::new(),
            now: 10_000,
        };
        build(&snapshot(), &inputs, &mut memory).unwrap();
        let mut raised = snapshot();
        raised.nodes[0].total_resource = ResourceInfo {
            memory: 6144,
            vcores: 6,
        };
        let v = build(&raised, &inputs, &mut memory).unwrap().view;
        assert_eq!(v.nodes()[0].capacity, Resource::new(4096, 4));
        assert_eq!(v.nodes()[0].advertised, Resource::new(6144, 6));
        assert_eq!(v.capacity(), Resource::new(8192, 8));
    }

    #[test]
    fn a_short_app_waits_from_submission_to_its_first_container() {
        let q = queues();
        let agents = HashMap::new();
        let mut memory = Memory::default();
        let mut s = snapshot();
        s.apps[1].state = YarnApplicationState::Running;
        s.apps[1].resource_requests = None;
        s.containers.push(ContainerInfo {
            started_time: 5_400,
            ..container(
                "container_1700000000000_0002_01_000001",
                "nm2:8041",
                1024,
                1,
            )
        });
        let inputs = Inputs {
            queues: &q,
            class_cutoff_secs: 90.0,
            agents: &agents,
            exempt: &HashSet::new(),
            now: 10_000,
        };
        let v = build(&s, &inputs, &mut memory).unwrap().view;
        let waits = first_containers(&v, 10_000);
        let short: ApplicationId = "application_1700000000000_0002".parse().unwrap();
        assert_eq!(waits, vec![(short, 400)]);
    }
    #[test]
    fn exempt_containers_are_never_victims_and_a_held_one_is_seen_resumed() {
        let q = queues();
        let held = "container_1700000000000_0001_01_000002";
        let other = "container_1700000000000_0001_01_000003";
        let running = |id: &str| {
            let mut r = status(
                id,
                Limits::from(Resource::new(2048, 2)),
                ContainerState::Running,
            );
            r.changed = false;
            r
        };
        let mut settings = PreemptorSettings::default().policy;
        settings.kind = crate::cluster::PolicyKind::Immediate;
        // Whole containers in one round on this small cluster.
        settings.total_preemption_per_round = 1.0;
        settings.natural_termination_factor = 1.0;
        let decide = |agents: &HashMap<ContainerId, ContainerStatus>,
                      exempt: &HashSet<ContainerId>| {
            let inputs = Inputs {
                queues: &q,
                class_cutoff_secs: 90.0,
                agents,
                exempt,
                now: 10_000,
            };
            // Nodes of 3 GB: 1 GB free, and the short job asks for 2.
            let mut full = snapshot();
            for n in &mut full.nodes {
                n.total_resource.memory = 3072;
            }
            let obs = build(&full, &inputs, &mut Memory::default()).unwrap();
            let mut state = crate::policy::PolicyState::new(settings.clone());
            let plan = crate::policy::decide(&obs.view, &mut state, 10_000);
            (obs, plan)
        };
        let takes = |plan: &crate::policy::Plan| -> Vec<ContainerId> {
            (plan.actions.iter())
                .filter(|a| {
                    matches!(
                        a.kind,
                        crate::policy::ActionKind::Suspend { .. }
                            | crate::policy::ActionKind::Shrink { .. }
                            | crate::policy::ActionKind::Kill { .. }
                    )
                })
                .filter_map(|a| a.kind.container())
                .collect()
        };
        let raises = |plan: &crate::policy::Plan| {
            plan.actions.iter().any(|a| {
                matches!(&a.kind, crate::policy::ActionKind::SetNodeCapacity { advertised, .. }
                    if advertised.memory_mb > 3072)
            })
        };
        let both: HashSet<ContainerId> = [held, other].iter().map(|c| c.parse().unwrap()).collect();

        // Both running: the short job's demand takes one, unless both are exempt.
        let agents: HashMap<ContainerId, ContainerStatus> = [held, other]
            .iter()
            .map(|c| (c.parse().unwrap(), running(c)))
            .collect();
        let (_, plan) = decide(&agents, &HashSet::new());
        assert!(!takes(&plan).is_empty(), "{:?}", plan.actions);
        let (obs, plan) = decide(&agents, &both);
        assert!(takes(&plan).is_empty(), "{:?}", plan.actions);
        assert!(obs.resuming.is_empty());

        // One still suspended: seen as resumed, its room not advertised, nothing taken.
        let mut agents = agents;
        agents.insert(
            held.parse().unwrap(),
            status(held, Limits::MIN_FOOTPRINT, ContainerState::Suspended),
        );
        let (_, plan) = decide(&agents, &HashSet::new());
        assert!(
            raises(&plan),
            "not exempt, its room is advertised: {:?}",
            plan.actions
        );
        let (obs, plan) = decide(&agents, &both);
        assert!(takes(&plan).is_empty(), "{:?}", plan.actions);
        assert!(!raises(&plan), "{:?}", plan.actions);
        for id in [held, other] {
            let c = obs
                .view
                .container(obs.view.container_by_id(&id.parse().unwrap()).unwrap());
            assert!(!c.managed, "{id} is not a candidate");
            assert_eq!(c.state, ContainerState::Running);
            assert_eq!(c.current, Limits::from(c.allocated));
        }
        assert_eq!(
            obs.resuming,
            [Resuming {
                container: held.parse().unwrap(),
                state: ContainerState::Suspended,
                current: Limits::MIN_FOOTPRINT,
            }]
        );
    }
}
