//! The demo's policy comparison on real Docker, alone in its own test binary: cargo runs
//! test binaries one after another, so nothing else loads the machine while short-job
//! queueing is compared across policies.

mod common;
mod demo_compare;
