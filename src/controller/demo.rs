//! `preemptor demo`: emulator + agent + controller on one machine.

#[derive(Debug, clap::Args)]
pub struct DemoArgs {}

pub async fn demo(_args: DemoArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("demo"))
}
