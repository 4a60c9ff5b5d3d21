//! The controller: observe YARN, decide with a policy, act through the agents.
//!
//! - [`view`]: RM snapshot + configuration + agents' reports -> `ClusterView`;
//! - [`agents`]: the [`Actuator`](agents::Actuator) trait and the HTTP agents;
//! - [`executor`]: plan actions -> agent and RM calls, retries, the preemption log;
//! - [`capacities`]: the durable record of the node capacities Preemptor changed, and
//!   [`restore`]: `preemptor restore-capacities`, which puts them back;
//! - [`controller`](mod@controller): the loop, [`start`] and [`ControllerHandle`];
//! - [`operator`]: `preemptor resume` and `restore-capacities`, from the API to the loop,
//!   and [`ops`]: their command line;
//! - [`hub`]: what the API, the dashboard and the demo read, and [`history`]: the
//!   dashboard's last minutes.
//!
//! See docs/controller.md.
pub mod agents;
pub mod api;
pub mod capacities;
pub mod cli;
#[allow(clippy::module_inception)]
pub mod controller;
pub mod dashboard;
pub mod executor;
pub mod history;
pub mod hub;
pub mod live_queues;
pub mod log;
pub mod logs;
pub mod metrics;
pub mod operator;
pub mod ops;
pub mod restore;
pub mod short_label;
pub mod status;
pub mod view;

pub use agents::{Actuator, HttpAgents};
pub use controller::{ControllerConfig, ControllerError, ControllerHandle, ShutdownReport, start};
