//! The operations command line: `preemptor resume` and the part of `preemptor status` and
//! `preemptor restore-capacities` that finds the running controller and talks to it
//! (`/api/v1/resume`, `/api/v1/restore-capacities`, see docs/dashboard.md).

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::log::utc_millis;
use super::logs::{ControllerClient, LogsError};
use super::operator::{Accepted, MAX_HOLD_OFF};
use crate::cluster::ContainerId;
use crate::config::secret::SecretFileError;

/// Where the running controller answers and its token: the flags, else
/// preemptor-site.xml in `--conf-dir`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerTarget {
    /// The controller's API address, e.g. http://rm-host:8090. Default: the
    /// yarn.preemptor.controller.listen of --conf-dir (0.0.0.0 or :: read as loopback).
    #[arg(long, env = "PREEMPTOR_CONTROLLER")]
    pub controller: Option<String>,
    /// File holding the controller's API token (whitespace trimmed); refused unless it
    /// is a private (`chmod 600`), regular, non-empty file. Default: the
    /// yarn.preemptor.controller.token-file of --conf-dir.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Directory with preemptor-site.xml, read for what the flags leave out.
    #[arg(long, default_value = "hadoop-conf", env = "PREEMPTOR_CONF_DIR")]
    pub conf_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(transparent)]
    Client(LogsError),
    #[error("no --controller given, and its address cannot be read from {dir}: {reason}")]
    NoAddress { dir: String, reason: String },
    #[error(
        "cannot reach the controller at {url}: {reason} (is it running there? the address \
         came from {from})"
    )]
    Unreachable {
        url: String,
        reason: String,
        from: String,
        refused: bool,
    },
    #[error("the controller at {url} refused the token ({reason}); {hint}")]
    WrongToken {
        url: String,
        reason: String,
        hint: String,
    },
    #[error("{0}")]
    NotHeld(String),
    #[error("the controller at {url} is observe-only and acts on nothing: {reason}")]
    ObserveOnly { url: String, reason: String },
    #[error(
        "the controller at {url} has no {route} (it answered {status}): it is older than this \
         preemptor"
    )]
    NoRoute {
        url: String,
        route: &'static str,
        status: u16,
    },
    #[error("writing the answer: {0}")]
    Output(io::Error),
}

impl OpsError {
    /// Nothing listens at the address: no controller runs there.
    pub fn connection_refused(&self) -> bool {
        matches!(self, OpsError::Unreachable { refused: true, .. })
    }
}

/// A client for the controller, with what the errors need to say where things came from.
pub struct Connected {
    pub client: ControllerClient,
    pub url: String,
    /// `--controller`, or the file and key the address came from.
    from: String,
    /// Why no token is presented, when none is.
    token_problem: Option<String>,
}

impl ControllerTarget {
    pub fn connect(&self) -> Result<Connected, OpsError> {
        let site = self.conf_dir.join("preemptor-site.xml");
        let loaded = match (&self.controller, &self.token_file) {
            (Some(_), Some(_)) => None,
            _ => Some(crate::config::load_dir(&self.conf_dir)),
        };
        let (url, from) = match (&self.controller, &loaded) {
            (Some(c), _) => (c.trim().to_string(), "--controller".to_string()),
            (None, Some(Ok(l))) => {
                let listen = l.settings.controller.listen;
                if listen.port() == 0 {
                    return Err(OpsError::NoAddress {
                        dir: site.display().to_string(),
                        reason: "yarn.preemptor.controller.listen has port 0 (any free \
                                 port): pass --controller"
                            .into(),
                    });
                }
                let ip = match listen.ip() {
                    IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                    ip => ip,
                };
                let addr = std::net::SocketAddr::new(ip, listen.port());
                (
                    format!("http://{addr}"),
                    format!("yarn.preemptor.controller.listen in {}", site.display()),
                )
            }
            (None, loaded) => {
                let reason = match loaded {
                    Some(Err(errors)) => errors.to_string(),
                    _ => "it was not read".into(),
                };
                return Err(OpsError::NoAddress {
                    dir: self.conf_dir.display().to_string(),
                    reason,
                });
            }
        };
        let token_path: Option<(PathBuf, String)> = match (&self.token_file, &loaded) {
            (Some(p), _) => Some((p.clone(), "--token-file".into())),
            (None, Some(Ok(l))) => Some((
                l.settings.controller.token_file.clone(),
                format!("yarn.preemptor.controller.token-file in {}", site.display()),
            )),
            _ => None,
        };
        let (token, token_problem) = match token_path {
            None => (None, Some("no --token-file given".to_string())),
            Some((path, key)) => match read_token(&path) {
                Ok(t) => (Some(t), None),
                // Given on the command line: its problem is the error.
                Err(e) if self.token_file.is_some() => {
                    return Err(OpsError::Client(LogsError::TokenFile(e)));
                }
                // From the configuration: go on without; a 401 will name it.
                Err(e) => (None, Some(format!("{key}: {e}"))),
            },
        };
        let client = ControllerClient::new(&url, token).map_err(OpsError::Client)?;
        Ok(Connected {
            client,
            url: url.trim_end_matches('/').to_string(),
            from,
            token_problem,
        })
    }
}

fn read_token(path: &Path) -> Result<String, SecretFileError> {
    let bytes = crate::config::secret::read_token_file(path)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

impl Connected {
    /// Clearer errors than the client's for an operator in an incident.
    pub fn explain(&self, e: LogsError) -> OpsError {
        match e {
            LogsError::Unreachable { url, source } => {
                let root = root_cause(&source);
                OpsError::Unreachable {
                    refused: root.to_ascii_lowercase().contains("connection refused"),
                    reason: root,
                    url,
                    from: self.from.clone(),
                }
            }
            LogsError::Unauthorized { url, reason } => OpsError::WrongToken {
                url,
                reason,
                hint: match &self.token_problem {
                    Some(p) => format!("no token was sent: {p}"),
                    None => "pass the controller's token (its \
                             yarn.preemptor.controller.token-file) with --token-file"
                        .into(),
                },
            },
            e => OpsError::Client(e),
        }
    }

    /// POSTs a command; a 404 names the container the controller does not hold.
    async fn command(
        &self,
        route: &'static str,
        body: serde_json::Value,
    ) -> Result<Accepted, OpsError> {
        match self.client.post_json(route, &body, "command").await {
            Ok(a) => Ok(a),
            Err(LogsError::Status {
                url,
                status,
                reason,
            }) => Err(match status {
                409 => OpsError::ObserveOnly {
                    url: self.url.clone(),
                    reason,
                },
                404 if !reason.starts_with("no such route") => OpsError::NotHeld(reason),
                404 | 405 => OpsError::NoRoute {
                    url: self.url.clone(),
                    route,
                    status,
                },
                _ => OpsError::Client(LogsError::Status {
                    url,
                    status,
                    reason,
                }),
            }),
            Err(e) => Err(self.explain(e)),
        }
    }

    /// `POST /api/v1/resume` for one container.
    pub async fn resume(&self, container: &ContainerId) -> Result<Accepted, OpsError> {
        let body = serde_json::json!({ "container": container.to_string() });
        self.command("/api/v1/resume", body).await
    }

    /// `POST /api/v1/resume` with `all`, or `/api/v1/restore-capacities` when `restore`.
    pub async fn resume_all(
        &self,
        hold_off: Option<Duration>,
        restore: bool,
    ) -> Result<Accepted, OpsError> {
        let mut body = serde_json::Map::new();
        if !restore {
            body.insert("all".into(), true.into());
        }
        if let Some(d) = hold_off {
            body.insert("holdOffSeconds".into(), whole_seconds(d).into());
        }
        let route = if restore {
            "/api/v1/restore-capacities"
        } else {
            "/api/v1/resume"
        };
        self.command(route, body.into()).await
    }
}

/// The innermost cause: "Connection refused (os error 111)" rather than reqwest's layers.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// Rounded up: a hold-off is never shorter than asked.
fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// `--hold-off`: a duration of at most a day.
pub fn parse_hold_off(s: &str) -> Result<Duration, String> {
    let d = crate::text::parse_cli_duration(s)?;
    if d > MAX_HOLD_OFF {
        return Err(format!("{s:?} is more than a day"));
    }
    Ok(d)
}

fn parse_container(s: &str) -> Result<ContainerId, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("not a YARN container id: {e}"))
}

#[derive(Debug, clap::Args)]
#[command(
    long_about = "Asks the running controller (POST /api/v1/resume, with its API token) to \
resume containers it has suspended or shrunk. The controller carries the request out in its \
own tick loop, at once, through the node agents, and logs each resume in the preemption log \
(reason `operator resume`).\n\n\
`preemptor resume CONTAINER` resumes that container and exempts it: the controller never \
suspends, shrinks or kills it again for the rest of its life, whatever the short jobs need. \
Its node's advertised capacity goes down before the container gets its room back.\n\n\
`preemptor resume --all` resumes every container the controller holds, puts every node it \
raised back at its physical capacity and, for --hold-off (default 5m), takes nothing new: \
each tick gives back whatever is still held. `preemptor status` shows the hold-off and its \
end. After it, the policy decides afresh; the containers are not exempt.\n\n\
The controller's address and token come from --controller and --token-file, else from \
preemptor-site.xml in --conf-dir (yarn.preemptor.controller.listen and .token-file).\n\n\
Exit status: 0 when the controller accepted the request (what it will do is printed); 1 when \
it is unreachable, refuses the token, does not hold the container, or is observe-only.",
    after_help = "Examples:\n  preemptor resume container_1700000000000_0001_01_000002 --controller http://rm-host:8090 --token-file /etc/preemptor/controller.token\n  preemptor resume --all --hold-off 10m --conf-dir /etc/preemptor/conf"
)]
pub struct ResumeArgs {
    /// The container to resume and exempt, e.g. container_1700000000000_0001_01_000002.
    #[arg(required_unless_present = "all", conflicts_with = "all", value_parser = parse_container)]
    pub container: Option<ContainerId>,
    /// Resume every held container and restore every raised node; take nothing new for
    /// --hold-off.
    #[arg(long)]
    pub all: bool,
    /// With --all: how long the controller takes nothing new (90s, 5m, 1h; at most a day;
    /// default 5m).
    #[arg(long, conflicts_with = "container", value_parser = parse_hold_off)]
    pub hold_off: Option<Duration>,
    #[command(flatten)]
    pub target: ControllerTarget,
}

pub async fn resume(args: ResumeArgs) -> Result<(), OpsError> {
    let c = args.target.connect()?;
    let accepted = match &args.container {
        Some(id) => c.resume(id).await?,
        None => c.resume_all(args.hold_off, false).await?,
    };
    print_accepted(&c.url, &accepted)
}

/// What the controller said it will do, for a person.
pub fn print_accepted(url: &str, a: &Accepted) -> Result<(), OpsError> {
    io::stdout()
        .lock()
        .write_all(render_accepted(url, a).as_bytes())
        .map_err(OpsError::Output)
}

pub fn render_accepted(url: &str, a: &Accepted) -> String {
    let mut out = format!("controller {url}: {}\n", a.message);
    if !a.resuming.is_empty() {
        let _ = writeln!(out, "resuming: {}", a.resuming.join(" "));
    }
    if !a.restoring.is_empty() {
        let _ = writeln!(out, "restoring: {}", a.restoring.join(" "));
    }
    if let Some(until) = a.hold_off_until_ms {
        let _ = writeln!(out, "hold-off until {}", utc_millis(until));
    }
    out.push_str("follow it with `preemptor logs` or `preemptor status`\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ResumeArgs,
    }

    #[test]
    fn resume_takes_a_container_or_all_and_a_hold_off_only_with_all() {
        let parse =
            |a: &[&str]| Cli::try_parse_from(std::iter::once("resume").chain(a.iter().copied()));
        let one = parse(&["container_1700000000000_0001_01_000002"]).unwrap();
        assert_eq!(
            one.args.container.map(|c| c.to_string()).as_deref(),
            Some("container_1700000000000_0001_01_000002")
        );
        let all = parse(&["--all", "--hold-off", "90s"]).unwrap();
        assert!(all.args.all);
        assert_eq!(all.args.hold_off, Some(Duration::from_secs(90)));
        assert!(parse(&[]).is_err(), "a container or --all");
        assert!(parse(&["--all", "container_1700000000000_0001_01_000002"]).is_err());
        assert!(parse(&["container_1700000000000_0001_01_000002", "--hold-off", "1m"]).is_err());
        assert!(parse(&["application_1700000000000_0001"]).is_err());
        assert!(
            parse(&["--all", "--hold-off", "2d"]).is_err(),
            "at most a day"
        );
        assert!(parse(&["--all", "--hold-off", "soon"]).is_err());
    }

    #[test]
    fn the_address_and_token_come_from_preemptor_site_xml_when_not_given() {
        let dir = tempfile::tempdir().unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        std::fs::copy(
            format!("{root}/hadoop-conf/capacity-scheduler.xml"),
            dir.path().join("capacity-scheduler.xml"),
        )
        .unwrap();
        let token = dir.path().join("api.token");
        std::fs::write(&token, "t0k\n").unwrap();
        std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::write(
            dir.path().join("preemptor-site.xml"),
            format!(
                "<configuration>\n\
                 <property><name>yarn.preemptor.controller.listen</name><value>0.0.0.0:8123</value></property>\n\
                 <property><name>yarn.preemptor.controller.token-file</name><value>{}</value></property>\n\
                 </configuration>\n",
                token.display()
            ),
        )
        .unwrap();
        let target = |controller: Option<&str>| ControllerTarget {
            controller: controller.map(str::to_string),
            token_file: None,
            conf_dir: dir.path().to_path_buf(),
        };
        let c = target(None).connect().unwrap();
        assert_eq!(c.url, "http://127.0.0.1:8123");
        assert!(
            c.from.contains("yarn.preemptor.controller.listen"),
            "{}",
            c.from
        );
        assert_eq!(c.token_problem, None);
        let c = target(Some("http://rm:8090/")).connect().unwrap();
        assert_eq!(
            (c.url.as_str(), c.from.as_str()),
            ("http://rm:8090", "--controller")
        );

        // A configuration that cannot be read: the flags alone still work.
        let missing = ControllerTarget {
            controller: None,
            token_file: None,
            conf_dir: dir.path().join("nope"),
        };
        let e = missing.connect().err().expect("no address").to_string();
        assert!(e.contains("no --controller given"), "{e}");
        let given = ControllerTarget {
            controller: Some("http://rm:8090".into()),
            ..missing
        };
        let c = given.connect().unwrap();
        assert!(c.token_problem.is_some());
    }

    #[test]
    fn what_will_happen_is_printed_with_the_hold_off() {
        let text = render_accepted(
            "http://c:8090",
            &Accepted {
                message: "2 container(s) will be resumed".into(),
                resuming: vec![
                    "container_1_0001_01_000002".into(),
                    "container_1_0001_01_000003".into(),
                ],
                restoring: vec!["nm1:8042".into()],
                hold_off_until_ms: Some(1_795_277_610_000),
            },
        );
        assert!(
            text.starts_with("controller http://c:8090: 2 container(s) will be resumed\n"),
            "{text}"
        );
        assert!(
            text.contains("resuming: container_1_0001_01_000002 container_1_0001_01_000003\n"),
            "{text}"
        );
        assert!(text.contains("restoring: nm1:8042\n"), "{text}");
        assert!(
            text.contains("hold-off until 2026-11-21T16:13:30.000Z\n"),
            "{text}"
        );
    }
}
