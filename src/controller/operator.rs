//! Operator commands (`preemptor resume`, `preemptor restore-capacities`): the API's write
//! routes hand them to the tick loop over a channel, and the loop carries them out as
//! actions of its own ticks, so that they stay in order with the policy's (see
//! docs/controller.md, "Operator commands").

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::view::Resuming;
use crate::cluster::{
    ClusterView, Container, ContainerIdx, ContainerState, NodeId, Partition, PolicyKind,
};
use crate::policy::{Action, ActionKind, Before, Reason};
use crate::resources::Limits;

/// How long `resume --all` and `restore-capacities` keep the controller from taking
/// anything, unless the operator says otherwise.
pub const DEFAULT_HOLD_OFF: Duration = Duration::from_secs(300);
/// The longest hold-off accepted: a day; longer is an outage of Preemptor, not an incident.
pub const MAX_HOLD_OFF: Duration = Duration::from_secs(24 * 3600);
/// How long the API waits for the loop to take a command; a tick may be running.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What an operator asks of the loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Resume one held container and never take it again.
    Resume(crate::cluster::ContainerId),
    /// Resume every held container, put every node back at its physical capacity, and
    /// take nothing new for `hold_off`. `by` names the command, for the log.
    ResumeAll {
        hold_off: Duration,
        by: &'static str,
    },
}

/// The loop's answer, given before the actions go out.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Accepted(Accepted),
    /// The controller holds no such container; why, for the operator.
    NotHeld(String),
    /// Observe-only: nothing is ever acted on.
    ObserveOnly,
}

/// The body of a 202: what will happen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    /// One line for the operator.
    pub message: String,
    /// Containers that will be resumed.
    #[serde(default)]
    pub resuming: Vec<String>,
    /// Nodes that will be put back at their physical capacity.
    #[serde(default)]
    pub restoring: Vec<String>,
    /// Nothing new is taken until then (`resume --all`, `restore-capacities`).
    #[serde(default)]
    pub hold_off_until_ms: Option<u64>,
}

pub struct Command {
    pub request: Request,
    pub reply: oneshot::Sender<Reply>,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("the controller's loop has stopped")]
    Stopped,
    #[error(
        "the controller's loop did not take the command within {0:?} (a long tick?); try again"
    )]
    Busy(Duration),
}

/// The API's end of the command channel.
#[derive(Clone)]
pub struct Operator {
    tx: mpsc::Sender<Command>,
}

impl Operator {
    /// The API's end and the loop's.
    pub fn channel() -> (Operator, mpsc::Receiver<Command>) {
        let (tx, rx) = mpsc::channel(16);
        (Operator { tx }, rx)
    }

    /// Hands `request` to the loop and waits for its answer.
    pub async fn ask(&self, request: Request) -> Result<Reply, OperatorError> {
        let (reply, answer) = oneshot::channel();
        let asked = async {
            self.tx
                .send(Command { request, reply })
                .await
                .map_err(|_| OperatorError::Stopped)?;
            answer.await.map_err(|_| OperatorError::Stopped)
        };
        tokio::time::timeout(ANSWER_TIMEOUT, asked)
            .await
            .map_err(|_| OperatorError::Busy(ANSWER_TIMEOUT))?
    }
}

fn is_held(s: ContainerState) -> bool {
    matches!(s, ContainerState::Suspended | ContainerState::Shrunk)
}

fn resume(
    view: &ClusterView,
    c: &Container,
    current: Limits,
    policy: PolicyKind,
    reason: &str,
) -> Action {
    Action {
        kind: ActionKind::Resume {
            container: c.id,
            to: Limits::from(c.allocated),
        },
        policy,
        reason: Reason::Said(reason.to_string()),
        application: Some(view.app(c.app).id),
        queue: Some(view.queue_of(c).path.as_str().into()),
        node: Some(view.node(c.node).id.clone()),
        for_queue: None,
        before: Before::Limits(current),
        place: None,
    }
}

/// The resumes of exempt containers still held: the view shows them as they will be once
/// resumed (see [`super::view::build`]); `resuming` has what their agents report now.
pub fn exempt_resumes(
    view: &ClusterView,
    resuming: &[Resuming],
    policy: PolicyKind,
    reason: &str,
) -> Vec<Action> {
    resuming
        .iter()
        .filter_map(|r| {
            let i = view.container_by_id(&r.container)?;
            Some(resume(view, view.container(i), r.current, policy, reason))
        })
        .collect()
}

/// What a hold-off tick carries out instead of the policy's plan: every held container
/// back at its allocation, every node at its physical capacity, every `short` partition
/// Preemptor set back to general. Nothing is taken.
pub fn give_back(
    view: &ClusterView,
    partitions: &BTreeMap<NodeId, Partition>,
    policy: PolicyKind,
    reason: &str,
) -> Vec<Action> {
    let node_action = |node: &NodeId, kind: ActionKind, before: Before| Action {
        kind,
        policy,
        reason: Reason::Said(reason.to_string()),
        application: None,
        queue: None,
        node: Some(node.clone()),
        for_queue: None,
        before,
        place: None,
    };
    let mut actions = Vec::new();
    for node in view.nodes().iter().filter(|n| n.advertised != n.capacity) {
        let kind = ActionKind::SetNodeCapacity {
            node: node.id.clone(),
            advertised: node.capacity,
        };
        actions.push(node_action(
            &node.id,
            kind,
            Before::Advertised(node.advertised),
        ));
    }
    let mut held: Vec<ContainerIdx> = (0..view.containers().len())
        .map(|i| ContainerIdx(i as u32))
        .filter(|&i| is_held(view.container(i).state))
        .collect();
    held.sort_unstable_by_key(|&i| view.container(i).id);
    for i in held {
        let c = view.container(i);
        actions.push(resume(view, c, c.current, policy, reason));
    }
    for node in view.nodes().iter() {
        if node.partition == Partition::Short && partitions.contains_key(&node.id) {
            let kind = ActionKind::SetNodePartition {
                node: node.id.clone(),
                partition: Partition::General,
            };
            actions.push(node_action(
                &node.id,
                kind,
                Before::Partition(Partition::Short),
            ));
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::JobClass;
    use crate::cluster::builder::ClusterBuilder;
    use crate::resources::Resource;

    fn view() -> ClusterView {
        ClusterBuilder::new()
            .nodes(2, Resource::new(8192, 8))
            .queue("root.long", 50.0, 100.0, JobClass::Long)
            .app("root.long", "MAPREDUCE")
            .containers(3, Resource::new(1024, 1))
            .build()
            .unwrap()
    }

    #[test]
    fn give_back_resumes_every_held_container_and_restores_every_node_and_takes_nothing() {
        let (queues, apps, mut nodes, mut containers) = view().into_parts();
        containers[0].state = ContainerState::Suspended;
        containers[0].current = Limits::new(64, 10);
        containers[2].state = ContainerState::Shrunk;
        containers[2].current = Limits::new(512, 500);
        nodes[1].advertised = Resource::new(9152, 8);
        let v = ClusterView::new(queues, apps, nodes, containers).unwrap();
        let actions = give_back(&v, &BTreeMap::new(), PolicyKind::Immediate, "operator");
        let verbs: Vec<&str> = actions.iter().map(|a| a.kind.verb()).collect();
        assert_eq!(
            verbs.iter().filter(|v| **v == "resume").count(),
            2,
            "{verbs:?}"
        );
        assert!(
            actions.iter().all(|a| !matches!(
                a.kind,
                ActionKind::Suspend { .. } | ActionKind::Shrink { .. } | ActionKind::Kill { .. }
            )),
            "{actions:?}"
        );
        let capacity: Vec<_> = actions
            .iter()
            .filter_map(|a| match &a.kind {
                ActionKind::SetNodeCapacity { node, advertised } => Some((node, *advertised)),
                _ => None,
            })
            .collect();
        assert_eq!(capacity, [(&v.nodes()[1].id, Resource::new(8192, 8))]);
        for a in &actions {
            if let ActionKind::Resume { container, to } = a.kind {
                let c = v.container(v.container_by_id(&container).unwrap());
                assert_eq!(to, Limits::from(c.allocated));
                assert_eq!(a.before, Before::Limits(c.current));
                assert_eq!(a.reason.to_string(), "operator");
            }
        }
    }

    #[test]
    fn give_back_on_a_cluster_holding_nothing_is_empty() {
        assert!(give_back(&view(), &BTreeMap::new(), PolicyKind::Graceful, "x").is_empty());
    }
}
