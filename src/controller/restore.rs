//! `preemptor restore-capacities`: puts every node the capacity record lists back at its
//! physical capacity on the RM, for an operator after an incident (a controller killed
//! while it had raised nodes and not started again). A running controller does this
//! itself at shutdown, and a restarted one carries on from the record.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use super::capacities::{CapacityLedger, LedgerError};
use crate::cluster::NodeId;
use crate::resources::Resource;
use crate::yarn::RmClient;

#[derive(Debug, clap::Args)]
#[command(
    long_about = "Sets every node the controller's capacity record lists back to its physical \
capacity on the ResourceManager (POST /ws/v1/cluster/nodes/<id>/resource) and removes it from \
the record. The record (node-capacities.json in yarn.preemptor.controller.state-dir) is written \
by the controller before it first raises or lowers a node, and a node leaves it once it is back. \
Neither the RM nor the NodeManager remembers a node's configured capacity after an update, so \
this record is the only source.\n\n\
Run it when a controller was killed and will not be started again soon: a restarted controller \
reads the same record and restores the nodes as it goes on, and a controller stopped with \
SIGTERM restores them itself. It refuses to run while a controller holds the state directory.\n\n\
Exit status: 0 when every listed node was restored (or nothing was listed), 1 otherwise.",
    after_help = "Example:\n  preemptor restore-capacities --conf-dir /etc/hadoop/conf --dry-run"
)]
pub struct RestoreCapacitiesArgs {
    /// Directory with preemptor-site.xml (the RM's address and the state directory).
    #[arg(long, default_value = "hadoop-conf", env = "PREEMPTOR_CONF_DIR")]
    pub conf_dir: PathBuf,
    /// The controller's state directory, overriding yarn.preemptor.controller.state-dir.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Print what would be restored and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("ResourceManager client: {0}")]
    Rm(#[from] crate::yarn::Error),
}

pub async fn run(args: RestoreCapacitiesArgs) -> Result<ExitCode, RestoreError> {
    let loaded = crate::config::load_dir(&args.conf_dir)?;
    let dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| loaded.settings.controller.state_dir.clone());
    let mut ledger = CapacityLedger::open(&dir)?;
    let recorded: Vec<(NodeId, Resource)> = ledger
        .nodes()
        .iter()
        .map(|(n, r)| (n.clone(), *r))
        .collect();
    if recorded.is_empty() {
        println!(
            "nothing to restore: {} lists no node",
            ledger.path().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let rm = RmClient::new(&loaded.settings.rm)?;
    let mut failed = 0;
    for (node, physical) in recorded {
        let now = match rm.node(&node).await {
            Ok(n) => n.value.total_resource.to_resource().to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        let mut line = format!("{node}: advertised {now}, physical {physical}: ");
        if args.dry_run {
            line.push_str("would be restored");
        } else {
            match rm.update_node_resource(&node, physical, None).await {
                Ok(_) => match ledger.forget([&node]) {
                    Ok(()) => line.push_str("restored"),
                    Err(e) => {
                        failed += 1;
                        let _ = write!(line, "restored, but the record kept it: {e}");
                    }
                },
                Err(e) => {
                    failed += 1;
                    let _ = write!(line, "FAILED: {e}");
                }
            }
        }
        println!("{line}");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("{failed} node(s) not restored; they stay in the record for the next try");
        ExitCode::FAILURE
    })
}
