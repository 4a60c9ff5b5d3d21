//! `preemptor logs`: print a controller's preemption log, and with `--follow` tail it live
//! from `/api/v1/events`, reconnecting with backoff when the connection drops.

use backon::{BackoffBuilder, ExponentialBuilder};
use std::collections::VecDeque;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use super::api::{ErrorBody, RecentActions};
use super::hub::{ActionRecord, ControllerEvent, StatusReport};
use super::log;
use crate::agent::client::{SseError, json_events};

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// The controller's API address, e.g. http://rm-host:8090.
    #[arg(long, env = "PREEMPTOR_CONTROLLER")]
    pub controller: String,
    /// File holding the controller's API token (whitespace trimmed); like the controller,
    /// refused unless it is a private (`chmod 600`), regular, non-empty file.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Keep printing new records as they happen; reconnect when the connection drops.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// `text`: one line per action, coloured on a terminal. `json`: one JSON record a line.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error(transparent)]
    TokenFile(#[from] crate::config::secret::SecretFileError),
    #[error("bad controller address {0:?}: expected http://host:port (TLS is not supported)")]
    BadAddress(String),
    #[error("building the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("cannot reach the controller at {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error(
        "the controller at {url} refused the token ({reason}); pass the controller's token \
         with --token-file"
    )]
    Unauthorized { url: String, reason: String },
    #[error("the controller at {url} answered {status}: {reason}")]
    Status {
        url: String,
        status: u16,
        reason: String,
    },
    #[error("reading {url}: {reason}")]
    Stream { url: String, reason: String },
    #[error("writing the log: {0}")]
    Output(io::Error),
}

impl LogsError {
    /// Worth a reconnect: the controller may come back. A refused token or an answer we
    /// cannot use will not change by retrying.
    fn transient(&self) -> bool {
        match self {
            LogsError::Unreachable { .. } | LogsError::Stream { .. } => true,
            LogsError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// Reads the controller's API.
pub struct ControllerClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl ControllerClient {
    pub fn new(base: &str, token: Option<String>) -> Result<ControllerClient, LogsError> {
        let trimmed = base.trim().trim_end_matches('/');
        let rest = trimmed
            .strip_prefix("http://")
            .ok_or_else(|| LogsError::BadAddress(base.to_string()))?;
        if rest.is_empty() || rest.contains(char::is_whitespace) {
            return Err(LogsError::BadAddress(base.to_string()));
        }
        let http = crate::tls::http_client_builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(LogsError::Client)?;
        Ok(ControllerClient {
            http,
            base: trimmed.to_string(),
            token,
        })
    }

    async fn get(&self, path: &str) -> Result<(String, reqwest::Response), LogsError> {
        self.send(reqwest::Method::GET, path, None).await
    }

    /// A request with the token; an answer other than 2xx is an error.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        json: Option<Vec<u8>>,
    ) -> Result<(String, reqwest::Response), LogsError> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url);
        if let Some(body) = json {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|source| LogsError::Unreachable {
            url: url.clone(),
            source,
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok((url, resp));
        }
        let body = resp.text().await.unwrap_or_default();
        let reason = serde_json::from_str::<ErrorBody>(&body)
            .map(|e| e.reason)
            .unwrap_or_else(|_| body.chars().take(200).collect());
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(LogsError::Unauthorized { url, reason });
        }
        Err(LogsError::Status {
            url,
            status: status.as_u16(),
            reason,
        })
    }

    /// The controller's recent preemption log, oldest first.
    pub async fn recent(&self) -> Result<RecentActions, LogsError> {
        self.get_json("/api/v1/actions", "recent-actions").await
    }

    /// The controller's latest status: what it holds, nodes, leases, the last tick.
    pub async fn status(&self) -> Result<StatusReport, LogsError> {
        self.get_json("/api/v1/status", "status").await
    }

    /// POSTs `body` as JSON and reads the JSON answer: the controller's write routes.
    pub async fn post_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
        what: &str,
    ) -> Result<T, LogsError> {
        let json = body.to_string().into_bytes();
        let (url, resp) = self.send(reqwest::Method::POST, path, Some(json)).await?;
        read_json(url, resp, what).await
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        what: &str,
    ) -> Result<T, LogsError> {
        let (url, resp) = self.get(path).await?;
        read_json(url, resp, what).await
    }

    /// Subscribes to `/api/v1/events`; the subscription exists once this returns. The
    /// stream ends when the controller closes it; an error is yielded once and ends it.
    pub async fn events(
        &self,
    ) -> Result<BoxStream<'static, Result<ControllerEvent, LogsError>>, LogsError> {
        let (url, resp) = self.get("/api/v1/events").await?;
        Ok(json_events::<ControllerEvent, _, _, _>(resp.bytes_stream())
            .map(move |item| {
                item.map_err(|e| LogsError::Stream {
                    url: url.clone(),
                    reason: match e {
                        SseError::Transport(error) => error.to_string(),
                        SseError::Decode(reason) => reason,
                    },
                })
            })
            .boxed())
    }
}

/// The JSON answer of `url`, read within 30 s.
async fn read_json<T: serde::de::DeserializeOwned>(
    url: String,
    resp: reqwest::Response,
    what: &str,
) -> Result<T, LogsError> {
    let body = tokio::time::timeout(Duration::from_secs(30), resp.bytes())
        .await
        .map_err(|_| LogsError::Stream {
            url: url.clone(),
            reason: "timed out reading the answer".into(),
        })?
        .map_err(|e| LogsError::Stream {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    serde_json::from_slice(&body).map_err(|e| LogsError::Stream {
        url,
        reason: format!("not a {what} answer: {e}"),
    })
}

/// How records are written.
#[derive(Clone, Copy, Debug)]
pub struct Output {
    pub format: Format,
    pub colour: bool,
}

/// Remembers the last records printed so a reconnect does not print them twice.
struct Printed {
    recent: VecDeque<ActionRecord>,
}

const REMEMBERED: usize = 2 * super::api::RECENT_ACTIONS;
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Waits between reconnections: 250 ms doubling to 10 s, for as long as it takes.
fn reconnect_delays() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(BACKOFF_START)
        .with_max_delay(BACKOFF_MAX)
        .without_max_times()
        .build()
}

impl Printed {
    fn print(
        &mut self,
        out: &mut impl Write,
        how: Output,
        record: ActionRecord,
    ) -> Result<(), LogsError> {
        if self.recent.contains(&record) {
            return Ok(());
        }
        let text = match how.format {
            Format::Text => log::render(&record, how.colour),
            Format::Json => serde_json::to_string(&record)
                .map_err(|e| LogsError::Output(io::Error::new(io::ErrorKind::InvalidData, e)))?,
        };
        writeln!(out, "{text}")
            .and_then(|_| out.flush())
            .map_err(LogsError::Output)?;
        if self.recent.len() == REMEMBERED {
            self.recent.pop_front();
        }
        self.recent.push_back(record);
        Ok(())
    }
}

/// Prints the recent log; with `follow`, keeps printing until `shutdown`.
pub async fn tail(
    client: &ControllerClient,
    follow: bool,
    how: Output,
    out: &mut impl Write,
    shutdown: CancellationToken,
) -> Result<(), LogsError> {
    let mut printed = Printed {
        recent: VecDeque::new(),
    };
    if !follow {
        let recent = client.recent().await?;
        warn_missed(recent.missed);
        for r in recent.actions {
            printed.print(out, how, r)?;
        }
        return Ok(());
    }
    let mut connected_once = false;
    let mut delays = reconnect_delays();
    loop {
        let mut connected = false;
        let session = session(client, how, out, &mut printed, &mut connected);
        let result = tokio::select! {
            r = session => r,
            () = shutdown.cancelled() => return Ok(()),
        };
        if connected {
            connected_once = true;
            delays = reconnect_delays();
        }
        let backoff = delays.next().unwrap_or(BACKOFF_MAX);
        // A typo in the address fails at once; a controller that goes away is waited for.
        match result {
            Err(e) if !connected_once || !e.transient() => return Err(e),
            Err(e) => eprintln!(
                "preemptor logs: {}; reconnecting in {backoff:?}",
                crate::error_chain(&e)
            ),
            Ok(()) => eprintln!(
                "preemptor logs: the controller closed the event stream; reconnecting in \
                 {backoff:?}"
            ),
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shutdown.cancelled() => return Ok(()),
        }
    }
}

/// One connection: subscribe first, then print what happened before it, then stream.
async fn session(
    client: &ControllerClient,
    how: Output,
    out: &mut impl Write,
    printed: &mut Printed,
    connected: &mut bool,
) -> Result<(), LogsError> {
    let mut events = client.events().await?;
    let recent = client.recent().await?;
    *connected = true;
    warn_missed(recent.missed);
    for r in recent.actions {
        printed.print(out, how, r)?;
    }
    while let Some(event) = events.next().await {
        match event? {
            ControllerEvent::Action(a) => printed.print(out, how, *a)?,
            ControllerEvent::Warning { message, .. } => {
                eprintln!("preemptor logs: controller warning: {message}");
            }
            ControllerEvent::Tick(_) | ControllerEvent::ShortWait { .. } => {}
        }
    }
    Ok(())
}

fn warn_missed(missed: u64) {
    if missed > 0 {
        eprintln!("preemptor logs: the controller's recent log is missing {missed} events");
    }
}

/// A client for the controller at `controller`, with the token read from `token_file`
/// under the same checks as the controller's own: private, regular, non-empty.
pub fn connect(
    controller: &str,
    token_file: Option<&std::path::Path>,
) -> Result<ControllerClient, LogsError> {
    let token = match token_file {
        Some(path) => Some(
            String::from_utf8_lossy(&crate::config::secret::read_token_file(path)?).into_owned(),
        ),
        None => None,
    };
    ControllerClient::new(controller, token)
}

pub async fn logs(args: LogsArgs) -> Result<(), LogsError> {
    let client = connect(&args.controller, args.token_file.as_deref())?;
    let stdout = io::stdout();
    let how = Output {
        format: args.format,
        colour: stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    let mut out = stdout.lock();
    match tail(&client, args.follow, how, &mut out, shutdown).await {
        // `preemptor logs | head` closes the pipe: that is the reader's choice, not an error.
        Err(LogsError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked() {
        for bad in ["rm:8090", "https://rm:8090", "http://", "http://a b"] {
            assert!(
                matches!(
                    ControllerClient::new(bad, None),
                    Err(LogsError::BadAddress(_))
                ),
                "{bad}"
            );
        }
        let c = ControllerClient::new("http://rm:8090/", None).unwrap();
        assert_eq!(c.base, "http://rm:8090");
    }
}
