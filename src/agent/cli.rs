//! `preemptor agent`.

#[derive(Debug, clap::Args)]
pub struct AgentArgs {}

pub async fn run(_args: AgentArgs) -> Result<(), crate::NotAvailable> {
    Err(crate::NotAvailable("agent"))
}
