//! Hadoop `<configuration>` files: the XML reader, the capacity scheduler's queue tree and
//! Preemptor's own typed settings. Reads files; does nothing else.

pub mod cli;
pub mod error;
pub mod queues;
pub mod settings;
pub mod values;
pub mod xml;

pub use error::{ConfigError, ConfigErrors, ConfigWarning, Location, QueueProblem};
pub use xml::{Configuration, Env};
