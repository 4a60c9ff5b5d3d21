//! Test helpers shared by the simulator's unit tests.

use std::path::PathBuf;

/// A bundled trace (see [`crate::sim::trace::bundled_traces_dir`]).
pub fn bundled_trace(name: &str) -> PathBuf {
    match crate::sim::trace::bundled_traces_dir() {
        Some(d) => d.join(name),
        None => panic!("the bundled traces (shared/traces) are not next to this checkout"),
    }
}
