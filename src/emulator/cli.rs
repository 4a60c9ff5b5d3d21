//! `preemptor emulate`.

#[derive(Debug, clap::Args)]
pub struct EmulateArgs {}

pub async fn run(_args: EmulateArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("emulate"))
}
