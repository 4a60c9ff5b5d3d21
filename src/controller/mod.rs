//! The controller: observe YARN, decide with a policy, act through the agents.
pub mod api;
pub mod cli;
pub mod dashboard;
pub mod demo;
pub mod hub;
pub mod log;
pub mod logs;
pub mod metrics;
