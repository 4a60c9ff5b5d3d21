//! `preemptor restore-capacities`: with a controller running, asks it to put every node it
//! raised back at its physical capacity (`POST /api/v1/restore-capacities`: it resumes
//! what those nodes back, and takes nothing new for a while). With none (connection
//! refused), puts every node the capacity record lists back itself, for an operator after
//! an incident (a controller killed while it had raised nodes and not started again).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::capacities::{CapacityLedger, LedgerError};
use super::ops::{Connected, ControllerTarget, OpsError, parse_hold_off, print_accepted};
use crate::cluster::NodeId;
use crate::resources::Resource;
use crate::yarn::RmClient;

#[derive(Debug, clap::Args)]
#[command(
    long_about = "With a controller running (reached at --controller, else at the \
yarn.preemptor.controller.listen of --conf-dir, with its token), asks it to restore \
(POST /api/v1/restore-capacities): a raised node backs containers that are suspended, so the \
controller resumes every container it holds, puts every node back at its physical capacity \
and takes nothing new for --hold-off (default 5m), as `preemptor resume --all` does. YARN \
never sees room that is not there, and the next tick does not raise the nodes again. A wrong \
token is an error, never a reason to go offline.\n\n\
When no controller answers (connection refused), it says so and works offline: it sets \
every node the controller's capacity record lists back to its physical \
capacity on the ResourceManager (POST /ws/v1/cluster/nodes/<id>/resource) and removes it from \
the record. The record (node-capacities.json in yarn.preemptor.controller.state-dir) is written \
by the controller before it first raises or lowers a node, and a node leaves it once it is back. \
Neither the RM nor the NodeManager remembers a node's configured capacity after an update, so \
this record is the only source.\n\n\
Offline is for a controller that was killed and will not be started again soon: a restarted \
controller reads the same record and restores the nodes as it goes on, and a controller stopped \
with SIGTERM restores them itself. Offline refuses to run while a controller holds the state \
directory.\n\n\
--dry-run lists what would be restored (from the controller's status, or offline from the \
record) and changes nothing.\n\n\
Exit status: 0 when the controller accepted, or offline when every listed node was restored \
(or nothing was listed); 1 otherwise.",
    after_help = "Examples:\n  preemptor restore-capacities --conf-dir /etc/hadoop/conf --dry-run\n  preemptor restore-capacities --controller http://rm-host:8090 --token-file /etc/preemptor/controller.token --hold-off 10m"
)]
pub struct RestoreCapacitiesArgs {
    /// The running controller, and preemptor-site.xml (the RM's address and the state
    /// directory when offline).
    #[command(flatten)]
    pub target: ControllerTarget,
    /// The controller's state directory, overriding yarn.preemptor.controller.state-dir.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Print what would be restored and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With a running controller: how long it takes nothing new afterwards (90s, 5m, 1h;
    /// at most a day; default 5m).
    #[arg(long, value_parser = parse_hold_off)]
    pub hold_off: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("ResourceManager client: {0}")]
    Rm(#[from] crate::yarn::Error),
    #[error(transparent)]
    Controller(#[from] OpsError),
}

pub async fn run(args: RestoreCapacitiesArgs) -> Result<ExitCode, RestoreError> {
    let asked = match args.target.connect() {
        Ok(c) => ask_controller(&c, &args).await,
        Err(e) => Err(e),
    };
    match asked {
        Ok(()) => return Ok(ExitCode::SUCCESS),
        Err(e @ OpsError::NoAddress { .. }) => {
            println!("{e}; restoring offline from the capacity record");
        }
        Err(e) if e.connection_refused() => {
            println!("no controller answers ({e}); restoring offline from the capacity record");
        }
        Err(e) => return Err(e.into()),
    }
    offline(args).await
}

/// The running controller restores; with `--dry-run`, its status says what it would.
async fn ask_controller(c: &Connected, args: &RestoreCapacitiesArgs) -> Result<(), OpsError> {
    if !args.dry_run {
        let accepted = c.resume_all(args.hold_off, true).await?;
        return print_accepted(&c.url, &accepted);
    }
    let s = c.client.status().await.map_err(|e| c.explain(e))?;
    let mut out = format!("controller {}: dry run, nothing is changed\n", c.url);
    for n in s.nodes.iter().filter(|n| n.advertised != n.capacity) {
        let _ = writeln!(
            out,
            "{}: advertised {}, physical {}: would be restored",
            n.id, n.advertised, n.capacity
        );
    }
    for n in &s.nodes {
        for h in n.containers.iter().filter(|h| h.held_since_ms.is_some()) {
            let state = format!("{:?}", h.state).to_lowercase();
            let _ = writeln!(out, "{}: {state} on {}: would be resumed", h.id, n.id);
        }
    }
    use std::io::Write as _;
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(OpsError::Output)
}

/// From the capacity record, with no controller running.
async fn offline(args: RestoreCapacitiesArgs) -> Result<ExitCode, RestoreError> {
    let loaded = crate::config::load_dir(&args.target.conf_dir)?;
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
