//! The preemption log: one line per action, through tracing, on its own target so an
//! operator can route or filter it (`RUST_LOG=preemptor::preemption=info`).

use super::hub::ActionRecord;

/// The tracing target of the preemption log.
pub const TARGET: &str = "preemptor::preemption";

/// Writes one preemption log line.
pub fn emit(record: &ActionRecord) {
    tracing::info!(
        target: TARGET,
        policy = %record.policy,
        action = %record.action,
        container = record.container.as_deref().unwrap_or("-"),
        node = record.node.as_deref().unwrap_or("-"),
        "{} -> {}: {}",
        record.before,
        record.after,
        record.reason
    );
}
