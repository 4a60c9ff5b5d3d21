//! `preemptor sim`.

#[derive(Debug, clap::Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("sim"))
}
