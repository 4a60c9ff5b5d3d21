//! `preemptor controller`; `demo` and `logs` live in their own modules.

pub use super::demo::{DemoArgs, demo};
pub use super::logs::{LogsArgs, logs};

#[derive(Debug, clap::Args)]
pub struct ControllerArgs {}

pub async fn run(_args: ControllerArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("controller"))
}
