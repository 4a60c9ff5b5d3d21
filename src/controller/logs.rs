//! `preemptor logs`: tail the preemption log from a controller's SSE stream.

#[derive(Debug, clap::Args)]
pub struct LogsArgs {}

pub async fn logs(_args: LogsArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("logs"))
}
