//! Trace-driven discrete-event simulator running the same policies at datacenter scale.
pub mod cli;
