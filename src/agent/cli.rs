//! `preemptor agent`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::secret::{SecretFileError, read_token_file};
use crate::resources::Limits;
use crate::text::parse_cli_duration;

use super::writer::WritePath;
use super::{AgentConfig, StartError};

#[derive(Debug, clap::Args)]
// The one-line description comes from the subcommand's doc comment in main.rs.
#[command(
    after_help = "Run with --help for how the agent works; docs/agent.md has the API.",
    after_long_help = "The agent runs on every NodeManager host and is the only part of \
Preemptor that touches containers. It finds YARN's containers (--containers: Docker \
containers named after a YARN container id, the cgroups the LinuxContainerExecutor gives \
each container, or the plain processes of the DefaultContainerExecutor, which it moves into \
a cgroup of its own per container; anything else is refused), applies suspend / shrink / \
resume / kill on request of the controller, measures attained service and detects swapping from the \
cgroups, and serves a token-protected HTTP API (docs/agent.md).\n\n\
Safety: before changing a container the agent records its original limits under \
--state-dir. If no controller renews the lease for --lease-timeout, every changed container \
is resumed (no controller, no throttling); a restarted agent recovers its records and does \
the same.\n\n\
Examples:\n  preemptor agent --token-file /etc/preemptor/agent.token --listen 0.0.0.0:8049\n  \
preemptor agent --containers process --nodemanager http://nm1:8042 \\\n      \
--nm-local-dirs /data1/yarn/local,/data2/yarn/local\n\n\
Durations take ms, s, m or h (plain numbers are seconds)."
)]
pub struct AgentArgs {
    /// Address to serve the API on. Loopback by default: expose it deliberately.
    #[arg(long, default_value = "127.0.0.1:8049", env = "PREEMPTOR_AGENT_LISTEN")]
    pub listen: SocketAddr,

    /// File holding the bearer token the controller must present (whitespace trimmed;
    /// must be a regular file with mode 600 or stricter).
    #[arg(
        long,
        default_value = "/etc/preemptor/agent.token",
        env = "PREEMPTOR_AGENT_TOKEN_FILE"
    )]
    pub token_file: PathBuf,

    /// Where the agent records original limits of the containers it changes.
    #[arg(long, default_value = "/var/lib/preemptor/agent")]
    pub state_dir: PathBuf,

    /// Resume every changed container if no controller renews the lease for this long.
    #[arg(long, default_value = "30s", value_parser = parse_cli_duration)]
    pub lease_timeout: Duration,

    /// Docker Engine API socket (a unix:// prefix is accepted).
    #[arg(long, default_value = "/var/run/docker.sock")]
    pub docker_socket: String,

    /// How limits are changed: through Docker's update API, or by writing the cgroup
    /// files directly (faster; `docker inspect` then keeps showing the original limits).
    #[arg(long, value_enum, default_value_t = WritePath::Docker)]
    pub cgroup_path: WritePath,

    /// Record and report actions without touching any container or Docker (load tests).
    #[arg(long)]
    pub dry_run: bool,

    /// Major faults plus swap-ins per second above which a container counts as swapping.
    #[arg(long, default_value_t = 256)]
    pub swap_threshold: u64,

    /// How often changed containers are checked for swapping.
    #[arg(long, default_value = "1s", value_parser = parse_cli_duration)]
    pub swap_check_interval: Duration,

    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_body_bytes: usize,

    /// No target may take a container's memory below this (MB).
    #[arg(long, default_value_t = Limits::MIN_FOOTPRINT.memory_mb)]
    pub min_memory_mb: u64,

    /// No target may take a container's CPU below this (thousandths of a vcore).
    #[arg(long, default_value_t = Limits::MIN_FOOTPRINT.cpu_millis)]
    pub min_cpu_millis: u32,

    /// Longest wait for cpu.stat to show a new CPU throttle before lowering memory.
    #[arg(long, default_value = "1s", value_parser = parse_cli_duration)]
    pub throttle_wait: Duration,

    /// How long memory keeps stepping down through "device or resource busy" refusals.
    #[arg(long, default_value = "60s", value_parser = parse_cli_duration)]
    pub memory_timeout: Duration,

    /// Do not page a container's memory out (process_madvise MADV_PAGEOUT) before
    /// lowering its memory limit; let the limit write reclaim alone (slower).
    #[arg(long)]
    pub no_proactive_reclaim: bool,

    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key.
    #[arg(long, requires = "tls_key", env = "PREEMPTOR_AGENT_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// This node's NodeManager web address (e.g. http://nm1:8042). When set, the agent
    /// changes only containers that NodeManager lists in /ws/v1/node/containers: needed
    /// where several NodeManagers share one Docker daemon (the compose cluster).
    #[arg(long, env = "PREEMPTOR_AGENT_NODEMANAGER")]
    pub nodemanager: Option<String>,
    /// PEM CA certificates an https:// --nodemanager is verified against (the CA of the
    /// NodeManager's keystore under yarn.http.policy=HTTPS_ONLY); without it, the
    /// system's trust store.
    #[arg(long, env = "PREEMPTOR_AGENT_NODEMANAGER_CA_FILE")]
    pub nodemanager_ca_file: Option<PathBuf>,
    /// Kerberos principal the agent authenticates as to a NodeManager whose web app
    /// requires SPNEGO (hadoop.http.authentication.type=kerberos); needs
    /// --nodemanager-keytab. `_HOST` as the instance (nm-agent/_HOST@REALM) becomes this
    /// host's canonical name in lower case, as in Hadoop. The system's krb5.conf (or
    /// KRB5_CONFIG) names the KDC.
    #[arg(
        long,
        requires = "nodemanager_keytab",
        env = "PREEMPTOR_AGENT_NODEMANAGER_PRINCIPAL"
    )]
    pub nodemanager_principal: Option<String>,
    /// Keytab with the keys of --nodemanager-principal; must be chmod 600.
    #[arg(
        long,
        requires = "nodemanager_principal",
        env = "PREEMPTOR_AGENT_NODEMANAGER_KEYTAB"
    )]
    pub nodemanager_keytab: Option<PathBuf>,
    /// How YARN runs containers on this node: docker, yarn-cgroups (LinuxContainerExecutor
    /// with cgroups), process (DefaultContainerExecutor), or auto (Docker if its socket
    /// exists, else YARN's hierarchy if it exists, else process with --nm-local-dirs).
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        env = "PREEMPTOR_AGENT_CONTAINERS"
    )]
    pub containers: super::ContainerBackend,

    /// The NodeManager's yarn-site.xml: --nm-local-dirs, --yarn-cgroup-hierarchy and
    /// --nodemanager are read from it where not given (yarn.nodemanager.local-dirs,
    /// ...linux-container-executor.cgroups.hierarchy, yarn.nodemanager.webapp.address).
    #[arg(long, env = "PREEMPTOR_AGENT_YARN_SITE")]
    pub yarn_site: Option<PathBuf>,

    /// The NodeManager's yarn.nodemanager.local-dirs, comma-separated: where the process
    /// backend finds nmPrivate/<app>/<container>/<container>.pid.
    #[arg(long, value_delimiter = ',')]
    pub nm_local_dirs: Vec<PathBuf>,

    /// YARN's cgroup hierarchy below each controller's mount point
    /// (yarn.nodemanager.linux-container-executor.cgroups.hierarchy) [default:
    /// /hadoop-yarn].
    #[arg(long)]
    pub yarn_cgroup_hierarchy: Option<String>,

    /// Where the process backend creates its per-container cgroups, below each
    /// controller's mount point.
    #[arg(long, default_value = super::AGENT_CGROUP_PARENT)]
    pub agent_cgroup_parent: String,

    /// The PEM private key of --tls-cert (mode 600 or stricter).
    #[arg(long, requires = "tls_cert", env = "PREEMPTOR_AGENT_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Token(#[from] SecretFileError),
    #[error("--tls-cert/--tls-key: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("waiting for a shutdown signal: {0}")]
    Signal(std::io::Error),
    #[error("--yarn-site: {0}")]
    YarnSite(#[from] crate::config::error::ConfigError),
}

/// What the agent takes from the NodeManager's yarn-site.xml.
#[derive(Debug, Default, PartialEq)]
pub struct NodeManagerSite {
    pub local_dirs: Vec<PathBuf>,
    pub cgroup_hierarchy: Option<String>,
    /// `http(s)://host:port`; a wildcard host becomes loopback (the agent runs beside it).
    pub webapp: Option<String>,
}

impl NodeManagerSite {
    pub fn read(path: &std::path::Path) -> Result<NodeManagerSite, AgentError> {
        let mut conf = crate::config::xml::Configuration::new();
        conf.add_file(path)?;
        let local_dirs = conf
            .get("yarn.nodemanager.local-dirs")?
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(|d| PathBuf::from(d.strip_prefix("file://").unwrap_or(d)))
                    .collect()
            })
            .unwrap_or_default();
        let https = conf
            .get("yarn.http.policy")?
            .is_some_and(|p| p.trim() == "HTTPS_ONLY");
        let (key, scheme) = if https {
            ("yarn.nodemanager.webapp.https.address", "https")
        } else {
            ("yarn.nodemanager.webapp.address", "http")
        };
        let webapp = conf.get(key)?.map(|a| {
            let a = a.trim();
            let a = a
                .strip_prefix("0.0.0.0:")
                .map_or_else(|| a.to_string(), |port| format!("127.0.0.1:{port}"));
            format!("{scheme}://{a}")
        });
        Ok(NodeManagerSite {
            local_dirs,
            cgroup_hierarchy: conf
                .get("yarn.nodemanager.linux-container-executor.cgroups.hierarchy")?
                .map(|h| h.trim().to_string()),
            webapp,
        })
    }
}

impl AgentArgs {
    pub fn to_config(&self) -> Result<AgentConfig, AgentError> {
        let token = read_token_file(&self.token_file)?;
        let site = match &self.yarn_site {
            Some(p) => NodeManagerSite::read(p)?,
            None => NodeManagerSite::default(),
        };
        if !(super::lease::MIN_TIMEOUT..=super::lease::MAX_TIMEOUT).contains(&self.lease_timeout) {
            return Err(AgentError::Invalid(format!(
                "--lease-timeout {:?} is outside 100ms ..= 1h",
                self.lease_timeout
            )));
        }
        if self.swap_check_interval < Duration::from_millis(100) {
            return Err(AgentError::Invalid(
                "--swap-check-interval must be at least 100ms".into(),
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(AgentError::Invalid(
                "--max-body-bytes must be at least 1024".into(),
            ));
        }
        if self.min_cpu_millis == 0 || self.min_memory_mb == 0 {
            return Err(AgentError::Invalid(
                "--min-cpu-millis and --min-memory-mb must be positive".into(),
            ));
        }
        let socket = self
            .docker_socket
            .strip_prefix("unix://")
            .unwrap_or(&self.docker_socket);
        if socket.is_empty() {
            return Err(AgentError::Invalid("--docker-socket is empty".into()));
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(crate::tls::server_config(cert, key)?),
            _ => None,
        };
        if !self.listen.ip().is_loopback() && tls.is_none() {
            tracing::warn!(listen = %self.listen, "the agent API is reachable from other hosts; it is protected by the token only (no TLS: see --tls-cert)");
        }
        Ok(AgentConfig {
            listen: self.listen,
            token,
            state_dir: self.state_dir.clone(),
            docker_socket: PathBuf::from(socket),
            path: self.cgroup_path,
            dry_run: self.dry_run,
            lease_timeout: self.lease_timeout,
            swap_threshold_pages_per_sec: self.swap_threshold,
            swap_check_interval: self.swap_check_interval,
            max_body_bytes: self.max_body_bytes,
            floor: Limits::new(self.min_memory_mb, self.min_cpu_millis),
            throttle_wait_max: self.throttle_wait,
            memory_timeout: self.memory_timeout,
            proactive_reclaim: !self.no_proactive_reclaim,
            tls,
            nodemanager: self.nodemanager.clone().or(site.webapp),
            nodemanager_tls: crate::config::settings::YarnTls {
                ca_file: self.nodemanager_ca_file.clone(),
                verify_hostname: true,
            },
            nodemanager_kerberos: self
                .nodemanager_principal
                .clone()
                .zip(self.nodemanager_keytab.clone())
                .map(
                    |(principal, keytab)| crate::config::settings::KerberosSettings {
                        principal,
                        keytab,
                    },
                ),
            containers: self.containers,
            nm_local_dirs: if self.nm_local_dirs.is_empty() {
                site.local_dirs
            } else {
                self.nm_local_dirs.clone()
            },
            yarn_cgroup_hierarchy: self
                .yarn_cgroup_hierarchy
                .clone()
                .or(site.cgroup_hierarchy)
                .unwrap_or_else(|| super::YARN_CGROUP_HIERARCHY.to_string()),
            agent_cgroup_parent: self.agent_cgroup_parent.clone(),
        })
    }
}

async fn shutdown_signal() -> Result<&'static str, AgentError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(AgentError::Signal)?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT").map_err(AgentError::Signal),
        _ = term.recv() => Ok("SIGTERM"),
    }
}

pub async fn run(args: AgentArgs) -> Result<(), AgentError> {
    let config = args.to_config()?;
    let agent = super::start(config).await?;
    // On stdout, for scripts and tests that start the agent on port 0.
    println!("preemptor agent listening on {}", agent.url());
    let cancel = agent.cancel_token();
    tokio::select! {
        signal = shutdown_signal() => {
            tracing::info!(signal = signal?, "shutting down; changed containers stay recorded");
        }
        _ = cancel.cancelled() => {}
    }
    agent.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::os::unix::fs::PermissionsExt;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: AgentArgs,
    }

    #[test]
    fn the_nodemanagers_yarn_site_fills_what_flags_leave_out() {
        let tmp = tempfile::tempdir().unwrap();
        let token = tmp.path().join("token");
        std::fs::write(&token, "abc123").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let site = tmp.path().join("yarn-site.xml");
        std::fs::write(
            &site,
            r#"<?xml version="1.0"?>
<configuration>
  <property><name>yarn.nodemanager.hostname</name><value>0.0.0.0</value></property>
  <property><name>yarn.nodemanager.webapp.address</name><value>${yarn.nodemanager.hostname}:8042</value></property>
  <property><name>yarn.nodemanager.local-dirs</name><value>file:///data1/yarn/local, /data2/yarn/local</value></property>
  <property><name>yarn.nodemanager.linux-container-executor.cgroups.hierarchy</name><value>/yarn</value></property>
</configuration>
"#,
        )
        .unwrap();
        let args = |extra: &[&str]| {
            let mut v = vec![
                "agent",
                "--token-file",
                token.to_str().unwrap(),
                "--yarn-site",
                site.to_str().unwrap(),
            ];
            v.extend_from_slice(extra);
            Wrap::try_parse_from(v).unwrap().args.to_config().unwrap()
        };
        let c = args(&[]);
        assert_eq!(c.nodemanager.as_deref(), Some("http://127.0.0.1:8042"));
        assert_eq!(
            c.nm_local_dirs,
            [
                PathBuf::from("/data1/yarn/local"),
                PathBuf::from("/data2/yarn/local")
            ]
        );
        assert_eq!(c.yarn_cgroup_hierarchy, "/yarn");
        let c = args(&[
            "--nodemanager",
            "http://nm1:8042",
            "--nm-local-dirs",
            "/x",
            "--yarn-cgroup-hierarchy",
            "/y",
        ]);
        assert_eq!(c.nodemanager.as_deref(), Some("http://nm1:8042"));
        assert_eq!(c.nm_local_dirs, [PathBuf::from("/x")]);
        assert_eq!(c.yarn_cgroup_hierarchy, "/y");

        std::fs::write(&site, "<configuration><property><name>a</name>").unwrap();
        let w = Wrap::try_parse_from([
            "agent",
            "--token-file",
            token.to_str().unwrap(),
            "--yarn-site",
            site.to_str().unwrap(),
        ])
        .unwrap();
        let e = w.args.to_config().unwrap_err().to_string();
        assert!(e.starts_with("--yarn-site: "), "{e}");
        assert!(e.contains("yarn-site.xml"), "{e}");
    }

    #[test]
    fn config_from_args_checks_the_token_file() {
        let tmp = tempfile::tempdir().unwrap();
        let token = tmp.path().join("token");
        std::fs::write(&token, "  abc123\n").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let w = Wrap::try_parse_from([
            "agent",
            "--token-file",
            token.to_str().unwrap(),
            "--lease-timeout",
            "5s",
            "--cgroup-path",
            "direct",
            "--docker-socket",
            "unix:///run/docker.sock",
        ])
        .unwrap();
        let c = w.args.to_config().unwrap();
        assert_eq!(c.token, b"abc123");
        assert_eq!(c.lease_timeout, Duration::from_secs(5));
        assert_eq!(c.path, WritePath::Direct);
        assert_eq!(c.docker_socket, PathBuf::from("/run/docker.sock"));
        assert!(c.listen.ip().is_loopback());

        std::fs::write(&token, "\n").unwrap();
        assert!(matches!(
            w.args.to_config(),
            Err(AgentError::Token(SecretFileError::Empty { .. }))
        ));
        std::fs::write(&token, "abc123").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            w.args.to_config(),
            Err(AgentError::Token(SecretFileError::Permissions { .. }))
        ));
        let w = Wrap::try_parse_from(["agent", "--token-file", "/nonexistent/token"]).unwrap();
        assert!(matches!(
            w.args.to_config(),
            Err(AgentError::Token(SecretFileError::Read { .. }))
        ));
    }
}
