//! `preemptor check-config`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// Hadoop configuration directory holding capacity-scheduler.xml and preemptor-site.xml.
    #[arg(long, default_value = "hadoop-conf")]
    pub conf_dir: PathBuf,
}

pub fn run(_args: &CheckConfigArgs) -> ExitCode {
    eprintln!("error: {}", crate::NotAvailable("check-config"));
    ExitCode::FAILURE
}
