//! Carry a plan out on a view, purely: what the controller and agents would do, for
//! tests, benchmarks and the simulator.

use std::collections::HashMap;

use super::plan::{ActionKind, Plan};
use crate::cluster::{ClusterView, ContainerState, NodeId, ViewError};
use crate::resources::Limits;

/// The view after `plan.actions` took effect. Actions on containers or nodes that are
/// not in the view are skipped (they vanished). Killed containers stay, as `Killed`.
pub fn apply(view: &ClusterView, plan: &Plan) -> Result<ClusterView, ViewError> {
    let mut containers = view.containers().to_vec();
    let mut nodes = view.nodes().to_vec();
    let node_index: HashMap<&NodeId, usize> = view
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| (&n.id, i))
        .collect();
    for a in &plan.actions {
        if let Some(id) = a.kind.container() {
            let Some(ci) = view.container_by_id(&id) else {
                continue;
            };
            let c = &mut containers[ci.get()];
            match a.kind {
                ActionKind::Suspend { footprint, .. } => {
                    c.current = footprint;
                    c.state = ContainerState::Suspended;
                }
                ActionKind::Shrink { to, .. } => {
                    c.current = to;
                    c.state = ContainerState::Shrunk;
                }
                ActionKind::Resume { to, .. } => {
                    c.current = to;
                    c.state = if Limits::from(c.allocated).fits_in(&to) {
                        ContainerState::Running
                    } else {
                        ContainerState::Shrunk
                    };
                }
                ActionKind::Kill { .. } => c.state = ContainerState::Killed,
                ActionKind::SetNodeCapacity { .. } | ActionKind::SetNodePartition { .. } => {}
            }
            continue;
        }
        match &a.kind {
            ActionKind::SetNodeCapacity { node, advertised } => {
                if let Some(&i) = node_index.get(node) {
                    nodes[i].advertised = *advertised;
                }
            }
            ActionKind::SetNodePartition { node, partition } => {
                if let Some(&i) = node_index.get(node) {
                    nodes[i].partition = *partition;
                }
            }
            _ => {}
        }
    }
    ClusterView::new(
        view.queues().to_vec(),
        view.apps().to_vec(),
        nodes,
        containers,
    )
}
