//! ResourceManager and NodeManager REST: DTOs shared by the client and the emulator, the
//! RM client the controller observes the cluster with, and the RM reverse proxy.

pub mod client;
#[cfg(test)]
mod doc_examples;
pub mod dto;
pub mod error;
#[cfg(test)]
mod fuzz_tests;
pub mod lenient;
pub mod proxy;
#[cfg(test)]
mod real_rm_fixtures;
pub mod snapshot;
pub mod submission;
pub mod tolerant;
pub mod xml;

pub use client::{AppsQuery, ClientStats, RmClient};
pub use error::Error;
pub use proxy::{RmProxy, SubmissionSeen};
pub use snapshot::RmSnapshot;
pub use tolerant::{Parsed, Recovery, SchemaWarning};
