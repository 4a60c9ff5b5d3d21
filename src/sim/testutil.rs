//! Test helpers shared by the simulator's unit tests.

use std::path::PathBuf;

/// A bundled trace (see [`crate::sim::trace::bundled_traces_dir`]).
pub fn bundled_trace(name: &str) -> PathBuf {
    crate::sim::trace::bundled_traces_dir().join(name)
}
