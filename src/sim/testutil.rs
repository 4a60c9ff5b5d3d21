//! Test helpers shared by the simulator's unit tests.

use std::path::PathBuf;

/// A bundled trace from `../shared/traces` (relative to the main checkout or a worktree).
pub fn bundled_trace(name: &str) -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for up in ["../shared/traces", "../../shared/traces"] {
        let p = manifest.join(up).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "bundled trace {name} not found next to {}",
        manifest.display()
    );
}
