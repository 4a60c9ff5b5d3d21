//! `preemptor controller`, `preemptor demo` and `preemptor logs`.

#[derive(Debug, clap::Args)]
pub struct ControllerArgs {}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {}

#[derive(Debug, clap::Args)]
pub struct LogsArgs {}

pub async fn run(_args: ControllerArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("controller"))
}

pub async fn demo(_args: DemoArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("demo"))
}

pub async fn logs(_args: LogsArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("logs"))
}
