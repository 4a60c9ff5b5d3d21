//! `preemptor controller`; `logs` lives in its own module, `demo` in [`crate::demo`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::signal::unix::{SignalKind, signal};

use super::controller::{ControllerConfig, ControllerError, start};
use crate::config::secret::{SecretFileError, read_token_file};

pub use super::logs::{LogsArgs, logs};

#[derive(Debug, clap::Args)]
#[command(
    long_about = "Runs beside the ResourceManager: every monitoring interval (and at once when \
the proxy sees a submission or an agent reports an event) it reads the RM's REST API, decides \
with the configured policy, and tells the node agents to suspend, shrink or resume containers. \
Every action is written to the preemption log (tracing target preemptor::preemption; \
--log-format json for machines) and streamed on the API (docs/controller.md).\n\n\
Signals: SIGTERM or Ctrl-C resumes every container Preemptor changed and restores the nodes' \
advertised capacities, then exits (unless --leave-as-is). SIGHUP reads the configuration \
directory again, like `yarn rmadmin -refreshQueues`; a configuration with errors is reported \
and the running one kept.",
    after_help = "Example:\n  preemptor controller --conf-dir /etc/hadoop/conf --proxy-listen 0.0.0.0:8089"
)]
pub struct ControllerArgs {
    /// Directory with capacity-scheduler.xml and preemptor-site.xml.
    #[arg(long, default_value = "hadoop-conf", env = "PREEMPTOR_CONF_DIR")]
    pub conf_dir: PathBuf,
    /// Serve the RM reverse proxy here, overriding yarn.preemptor.proxy.listen; point YARN
    /// clients at it so that submissions trigger a decision at once.
    #[arg(long)]
    pub proxy_listen: Option<SocketAddr>,
    /// Serve the API, event stream and dashboard here, overriding
    /// yarn.preemptor.controller.listen.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// On SIGTERM or Ctrl-C, exit without resuming containers or restoring capacities
    /// (the agents still resume them when their lease expires).
    #[arg(long)]
    pub leave_as_is: bool,
    /// Decide and log every plan but act on nothing (overrides yarn.preemptor.observe-only).
    #[arg(long)]
    pub observe_only: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    // Not a `source`: the message already includes it, and main prints the chain.
    #[error("{key}: {error}")]
    Token {
        key: &'static str,
        error: SecretFileError,
    },
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error("installing signal handlers: {0}")]
    Signals(std::io::Error),
}

fn read_token(key: &'static str, path: &Path) -> Result<Vec<u8>, CliError> {
    read_token_file(path).map_err(|error| CliError::Token { key, error })
}

/// The controller's configuration from the command line and the configuration directory.
pub fn config_from_args(args: &ControllerArgs) -> Result<ControllerConfig, CliError> {
    let mut loaded = crate::config::load_dir(&args.conf_dir)?;
    for w in &loaded.warnings {
        tracing::warn!(warning = %w, "configuration");
    }
    if args.observe_only {
        loaded.settings.policy.observe_only = true;
    }
    let agent_token = read_token(
        "yarn.preemptor.agent.token-file",
        &loaded.settings.agent.token_file,
    )?;
    let api_token = read_token(
        "yarn.preemptor.controller.token-file",
        &loaded.settings.controller.token_file,
    )?;
    let mut config = ControllerConfig::from_loaded(
        loaded,
        Some(args.conf_dir.clone()),
        String::from_utf8_lossy(&agent_token).into_owned(),
        api_token,
    );
    if let Some(l) = args.listen {
        config.api_listen = Some(l);
    }
    if let Some(p) = args.proxy_listen {
        config.proxy_listen = Some(p);
    }
    Ok(config)
}

pub async fn run(args: ControllerArgs) -> Result<(), CliError> {
    let config = config_from_args(&args)?;
    tracing::info!(
        policy = %config.settings.policy.kind,
        observe_only = config.settings.policy.observe_only,
        rm = ?config.settings.rm.addresses,
        "starting the controller"
    );
    let mut term = signal(SignalKind::terminate()).map_err(CliError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(CliError::Signals)?;
    let mut hup = signal(SignalKind::hangup()).map_err(CliError::Signals)?;
    let handle = start(config).await?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = handle.stopped() => {
                tracing::error!("a controller server stopped; shutting down");
                break;
            }
            _ = hup.recv() => match handle.reload().await {
                Ok(warnings) => {
                    for w in warnings {
                        tracing::warn!(warning = %w, "configuration");
                    }
                    tracing::info!(dir = %args.conf_dir.display(), "configuration reloaded");
                }
                Err(e) => tracing::error!("{e}"),
            },
        }
    }
    tracing::info!(leave_as_is = args.leave_as_is, "stopping");
    let report = handle.shutdown(args.leave_as_is).await?;
    for f in &report.failed {
        tracing::warn!(failure = %f, "not restored; the agent's lease restores it when it expires");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_are_trimmed_private_and_must_not_be_empty() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t");
        std::fs::write(&p, " secret\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token("k", &p).unwrap(), b"secret");
        std::fs::write(&p, "\n").unwrap();
        assert!(matches!(
            read_token("k", &p),
            Err(CliError::Token {
                error: SecretFileError::Empty { .. },
                ..
            })
        ));
        std::fs::write(&p, "secret").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_token("yarn.preemptor.controller.token-file", &p)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("yarn.preemptor.controller.token-file: ") && e.contains("0640"),
            "{e}"
        );
        let missing = read_token("yarn.preemptor.agent.token-file", &tmp.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("yarn.preemptor.agent.token-file"),
            "{missing}"
        );
    }

    #[test]
    fn a_bad_configuration_directory_is_reported_with_its_file() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("capacity-scheduler.xml"),
            "<configuration>\n<property><name>x</name>\n</configuration>\n",
        )
        .unwrap();
        let args = ControllerArgs {
            conf_dir: tmp.path().to_path_buf(),
            proxy_listen: None,
            listen: None,
            leave_as_is: false,
            observe_only: false,
        };
        let e = config_from_args(&args).err().expect("refused").to_string();
        assert!(e.contains("capacity-scheduler.xml:"), "{e}");
    }
}
