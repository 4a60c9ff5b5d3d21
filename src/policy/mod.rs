//! Pure preemption policies shared by the controller and the simulator.
//!
//! One entry point for both: [`decide`]`(&view, &mut state, now) -> Plan`. It does no
//! I/O, reads no clock (time comes in as `now`) and draws randomness only from the
//! seeded generator in [`PolicyState`], so the same view, state and time always give
//! the same plan. A [`Plan`] lists [`Action`]s that name target states (suspend to the
//! footprint, shrink to, resume to, kill, set a node's advertised capacity or
//! partition), each with the reason the preemption log prints, plus the per-queue
//! accounting behind them. Applying a plan twice changes nothing the second time.
//!
//! Policies (`yarn.preemptor.policy`, or per queue `preemptor.policy`):
//! - `none`: report only; as the cluster policy it switches Preemptor off and resumes
//!   every container.
//! - `kill`, `immediate`, `graceful`: YARN's capacity accounting ([`capacity`]: ideal
//!   allocation, dead zone, natural termination factor, per-round cap) with BIG-C's
//!   amount to reclaim, and BIG-C's victim order ([`victims`]); they differ in the
//!   mechanism: kill after `max_wait_before_kill`, suspend to the footprint, or shrink
//!   in steps. Suspended and shrunk containers are resumed when demand falls, after
//!   their D-th pick, oldest suspension first.
//! - `adaptive`: per victim application, immediate for MapReduce, graceful for Spark,
//!   the fallback otherwise ([`select::adaptive_choice`]).
//! - `las`: Kairos' node time sharing ([`las`]).
//! - `dice`: Dice's elastic sizing and opportunistic preemption ([`dice`]).
//!
//! Building blocks the simulator may call per event instead of rebuilding a view:
//! - [`las::node_step`] runs the Kairos node scheduler on one node's containers
//!   ([`las::LasTask`]), asking a [`las::LasGate`] callback before each suspension
//!   (a simulator without queue limits agrees to all); [`las::next_expiry`] says when
//!   to call it again,
//!   [`las::admission`] gives the N+Q capacity and [`las::place`] the central placement
//!   hint (fewest containers, then lowest variance of attained service);
//! - [`dice::DiceWindow`] collects waiting times, [`dice::window_decision`] turns a
//!   closed window into a short-partition size and a number of preemption requests
//!   (via [`dice::ratio`], [`dice::model_p`], [`dice::short_partition_size`],
//!   [`dice::preemption_requests`]), [`dice::choose_nodes`] picks nodes and
//!   [`dice::node_accepts`] is a node's four-condition check;
//! - [`capacity::account`] is the share accounting on a bare queue table.
//!
//! [`apply`] carries a plan out on a view, for tests and simulations.

pub mod amount;
mod apply;
pub mod capacity;
pub mod dice;
mod engine;
pub mod las;
mod ledger;
mod plan;
mod reason;
pub mod select;
mod state;
pub mod victims;

#[cfg(test)]
mod tests;

pub use amount::Amount;
pub use apply::apply;
pub use capacity::QueueAccount;
pub use dice::DiceReport;
pub use engine::PolicyState;
pub(crate) use engine::held_at;
pub use plan::{Action, ActionKind, Before, PendingKill, Plan};
pub use reason::{DiceWindowWhy, Note, Reason, ReclaimWhy};

use crate::cluster::{ClusterView, Millis, PolicyKind};
use crate::config::settings::PolicySettings;

/// Whether untagged applications may run under LAS with these settings alone (no
/// queue overrides): `las`, or `adaptive` mapping some application type, or falling
/// back, to it. Where it holds, nodes advertise LAS's N+Q admission whenever such an
/// application runs.
pub fn may_run_las(s: &PolicySettings) -> bool {
    match s.kind {
        PolicyKind::Las => true,
        PolicyKind::Adaptive => {
            s.adaptive.fallback == PolicyKind::Las
                || s.adaptive
                    .mapping
                    .iter()
                    .any(|(_, p)| *p == PolicyKind::Las)
        }
        _ => false,
    }
}

/// Decide one tick. In `observe_only` mode the plan carries what would have been done
/// in `observed` and no actions, and the state does not remember any of it.
pub fn decide(view: &ClusterView, state: &mut PolicyState, now: Millis) -> Plan {
    if !state.settings.observe_only {
        return engine::run(view, state, now);
    }
    let remembered = (state.memos.clone(), state.las_checks.clone());
    let mut plan = engine::run(view, state, now);
    (state.memos, state.las_checks) = remembered;
    state.buffers.forget_las();
    plan.observe_only = true;
    plan.observed = std::mem::take(&mut plan.actions);
    plan
}
