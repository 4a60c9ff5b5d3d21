//! Preemptor: suspend-or-shrink preemption for Hadoop YARN clusters running Docker
//! containers. See DESIGN.md in docs/ for the architecture; `main.rs` only parses the
//! command line and calls into these modules.

pub mod agent;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod emulator;
pub mod policy;
pub mod resources;
pub mod sim;
pub mod tls;
pub mod yarn;

/// Returned by subcommands that this build does not provide yet, so that none of them
/// pretends to work.
#[derive(Debug, thiserror::Error)]
#[error("`preemptor {0}` is not available in this build yet")]
pub struct NotAvailable(pub &'static str);
