//! What a decision produces: target states for containers and nodes, each with the
//! reason the preemption log prints, plus the accounting behind them.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::amount::Amount;
use super::capacity::QueueAccount;
use super::dice::DiceReport;
use super::reason::{Note, Reason};
use crate::cluster::{
    ApplicationId, ContainerId, ContainerIdx, Millis, NodeId, Partition, PolicyKind,
};
use crate::resources::{Limits, Resource};

/// One decision tick's outcome. Actions name target states, so carrying out the same
/// plan twice changes nothing the second time.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub now: Millis,
    /// `yarn.preemptor.policy` at the time of the decision.
    pub policy: PolicyKind,
    /// To carry out, in order.
    pub actions: Vec<Action>,
    /// `observe_only`: `actions` is empty and what would have been done is here.
    pub observe_only: bool,
    pub observed: Vec<Action>,
    /// Containers marked by `kill`, waiting out `max_wait_before_kill`.
    pub pending_kills: Vec<PendingKill>,
    /// Per-queue accounting (every queue, in the view's order).
    pub queues: Vec<QueueAccount>,
    /// Newly taken by this plan: suspensions, shrinks and new kill marks.
    pub reclaimed: Amount,
    /// Given back by this plan's resumptions.
    pub restored: Amount,
    /// `total_preemption_per_round` of the cluster.
    pub round_cap: Amount,
    /// Dice's window decision, on the tick that closed a window.
    pub dice: Option<DiceReport>,
    /// Things an operator should know that are not actions, e.g. a node whose running
    /// containers exceed it with nothing left that may be suspended.
    pub notes: Vec<Note>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.observed.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub kind: ActionKind,
    /// The mechanism that chose this action (for `adaptive`, the one it picked).
    pub policy: PolicyKind,
    pub reason: Reason,
    /// The container's application, queue and node, where a container is involved.
    pub application: Option<ApplicationId>,
    pub queue: Option<Arc<str>>,
    pub node: Option<NodeId>,
    /// The queue the freed room is for, when one is known.
    pub for_queue: Option<Arc<str>>,
    /// The state before, so the log can print "before -> after".
    pub before: Before,
    /// Where the container is in the view the plan was decided on (None for a node
    /// action, or one the controller made itself): a caller holding that view need not
    /// look the container up by id.
    #[serde(skip)]
    pub place: Option<ContainerIdx>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ActionKind {
    /// Squeeze to the minimal footprint: CPU first, then memory (the agent's order).
    Suspend {
        container: ContainerId,
        footprint: Limits,
    },
    /// Lower the limits to `to` (graceful steps, or freezing a swapping container).
    Shrink {
        container: ContainerId,
        to: Limits,
    },
    /// Raise the limits to `to`: the full allocation, or one graceful step back.
    Resume {
        container: ContainerId,
        to: Limits,
    },
    Kill {
        container: ContainerId,
    },
    /// Make the RM believe the node has `advertised`.
    SetNodeCapacity {
        node: NodeId,
        advertised: Resource,
    },
    SetNodePartition {
        node: NodeId,
        partition: Partition,
    },
}

impl ActionKind {
    pub fn container(&self) -> Option<ContainerId> {
        match self {
            ActionKind::Suspend { container, .. }
            | ActionKind::Shrink { container, .. }
            | ActionKind::Resume { container, .. }
            | ActionKind::Kill { container } => Some(*container),
            ActionKind::SetNodeCapacity { .. } | ActionKind::SetNodePartition { .. } => None,
        }
    }

    pub fn verb(&self) -> &'static str {
        match self {
            ActionKind::Suspend { .. } => "suspend",
            ActionKind::Shrink { .. } => "shrink",
            ActionKind::Resume { .. } => "resume",
            ActionKind::Kill { .. } => "kill",
            ActionKind::SetNodeCapacity { .. } => "set-node-capacity",
            ActionKind::SetNodePartition { .. } => "set-node-partition",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "type", content = "value", rename_all = "camelCase")]
pub enum Before {
    Limits(Limits),
    Advertised(Resource),
    Partition(Partition),
}

impl fmt::Display for Before {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Before::Limits(l) => l.fmt(f),
            Before::Advertised(r) => r.fmt(f),
            Before::Partition(p) => f.write_str(partition_name(*p)),
        }
    }
}

fn partition_name(p: Partition) -> &'static str {
    match p {
        Partition::General => "general",
        Partition::Short => "short",
    }
}

/// `suspend container_… <4096 MB, 2 vcores> -> <64 MB, 0.010 vcores> [graceful]: reason`
impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.kind {
            ActionKind::Suspend {
                container,
                footprint,
            } => format!("{container} {} -> {footprint}", self.before),
            ActionKind::Shrink { container, to } | ActionKind::Resume { container, to } => {
                format!("{container} {} -> {to}", self.before)
            }
            ActionKind::Kill { container } => format!("{container} {} -> killed", self.before),
            ActionKind::SetNodeCapacity { node, advertised } => {
                format!("{node} {} -> {advertised}", self.before)
            }
            ActionKind::SetNodePartition { node, partition } => {
                format!("{node} {} -> {}", self.before, partition_name(*partition))
            }
        };
        write!(
            f,
            "{} {target} [{}]: {}",
            self.kind.verb(),
            self.policy,
            self.reason
        )
    }
}

/// A container marked for killing; it is killed once `kill_at_ms` passes, unless the
/// demand that chose it goes away first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingKill {
    pub container: ContainerId,
    pub application: ApplicationId,
    pub queue: Arc<str>,
    pub node: NodeId,
    pub marked_at_ms: Millis,
    pub kill_at_ms: Millis,
    /// True on the tick that marked it.
    pub new: bool,
    pub allocated: Resource,
    /// The queue the room is for, when known.
    pub for_queue: Option<Arc<str>>,
}
