//! A typed client for the agent's API, used by the controller and the tests.

use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api::{
    Action, ActionRequest, ActionResult, AgentEvent, ContainerStatus, ErrorBody, Health,
    LeaseRequest, LeaseStatus,
};
use crate::resources::{Limits, Resource};

/// The agent's events, as [`AgentClient::events`] yields them.
pub type EventStream = BoxStream<'static, Result<AgentEvent, ClientError>>;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("agent at {url} answered {status}: {error}: {reason}")]
    Api {
        url: String,
        status: StatusCode,
        error: String,
        reason: String,
    },
    #[error("cannot reach the agent at {url}: {error}")]
    Transport { url: String, error: reqwest::Error },
    #[error("unexpected answer from the agent at {url}: {reason}")]
    Decode { url: String, reason: String },
    #[error(
        "invalid agent address {0:?}: expected http://host:port, or https://host:port \
         with a CA to verify the agent"
    )]
    BadAddress(String),
}

impl ClientError {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The stable error code (`unknown_container`, `lease`, ...) of an API error.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    base: String,
    token: String,
    timeout: Duration,
    /// Bounds [`AgentClient::act`]; the other calls get `timeout`.
    action_timeout: Duration,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("base", &self.base)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl AgentClient {
    /// `base` is the agent's URL (`http://nm-host:8049`); `timeout` bounds every call except
    /// the event stream. Actions that reclaim a lot of memory take seconds.
    pub fn new(base: &str, token: &str, timeout: Duration) -> Result<AgentClient, ClientError> {
        Self::with_tls(base, token, timeout, None)
    }

    /// Like [`AgentClient::new`]; with `tls` ([`crate::tls::client_config`]) `base` is
    /// `https://host:port` and the agent's certificate is verified against its CA.
    pub fn with_tls(
        base: &str,
        token: &str,
        timeout: Duration,
        tls: Option<rustls::ClientConfig>,
    ) -> Result<AgentClient, ClientError> {
        let base = base.trim_end_matches('/').to_string();
        let scheme = if tls.is_some() { "https://" } else { "http://" };
        if !base.starts_with(scheme) || base.len() <= scheme.len() {
            return Err(ClientError::BadAddress(base));
        }
        let mut builder = crate::tls::http_client_builder().connect_timeout(timeout);
        if let Some(config) = tls {
            builder = builder.tls_backend_preconfigured(config).https_only(true);
        }
        let http = builder.build().map_err(|error| ClientError::Transport {
            url: base.clone(),
            error,
        })?;
        Ok(AgentClient {
            http,
            base,
            token: token.trim().to_string(),
            timeout,
            action_timeout: timeout,
        })
    }

    /// How long an action may take (default: the call timeout). Actions that reclaim a lot
    /// of memory take seconds.
    pub fn with_action_timeout(mut self, timeout: Duration) -> AgentClient {
        self.action_timeout = timeout;
        self
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends with the token (and the call timeout unless `streaming`); a non-2xx answer
    /// becomes [`ClientError::Api`] with the agent's code and reason.
    async fn exchange(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
        streaming: bool,
        timeout: Duration,
    ) -> Result<reqwest::Response, ClientError> {
        let transport = |error| ClientError::Transport {
            url: url.to_string(),
            error,
        };
        let mut req = req.bearer_auth(&self.token);
        if !streaming {
            req = req.timeout(timeout);
        }
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let bytes = resp.bytes().await.map_err(transport)?;
        let (error, reason) = match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(b) => (b.error, b.reason),
            Err(_) => (
                "http".into(),
                String::from_utf8_lossy(&bytes).chars().take(500).collect(),
            ),
        };
        Err(ClientError::Api {
            url: url.to_string(),
            status,
            error,
            reason,
        })
    }

    async fn send<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        url: String,
    ) -> Result<T, ClientError> {
        self.send_within(req, url, self.timeout).await
    }

    async fn send_within<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        url: String,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let bytes = self
            .exchange(req, &url, false, timeout)
            .await?
            .bytes()
            .await
            .map_err(|error| ClientError::Transport {
                url: url.clone(),
                error,
            })?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
            url,
            reason: e.to_string(),
        })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let url = self.url(path);
        self.send(self.http.get(&url), url).await
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let url = self.url(path);
        self.send(self.http.post(&url).json(body), url).await
    }

    pub async fn act(&self, req: &ActionRequest) -> Result<ActionResult, ClientError> {
        let url = self.url("/v1/actions");
        let call = self.http.post(&url).json(req);
        self.send_within(call, url, self.action_timeout).await
    }

    async fn act_on(&self, container: &str, action: Action) -> Result<ActionResult, ClientError> {
        self.act(&ActionRequest {
            container: container.to_string(),
            action,
        })
        .await
    }

    pub async fn suspend(
        &self,
        container: &str,
        allocated: Resource,
        target: Limits,
    ) -> Result<ActionResult, ClientError> {
        self.act_on(container, Action::Suspend { allocated, target })
            .await
    }

    pub async fn shrink(
        &self,
        container: &str,
        allocated: Resource,
        target: Limits,
    ) -> Result<ActionResult, ClientError> {
        self.act_on(container, Action::Shrink { allocated, target })
            .await
    }

    pub async fn resume(&self, container: &str) -> Result<ActionResult, ClientError> {
        self.act_on(container, Action::Resume).await
    }

    pub async fn kill(&self, container: &str) -> Result<ActionResult, ClientError> {
        self.act_on(container, Action::Kill).await
    }

    pub async fn containers(&self) -> Result<Vec<ContainerStatus>, ClientError> {
        self.get("/v1/containers").await
    }

    pub async fn container(&self, container: &str) -> Result<ContainerStatus, ClientError> {
        if container.is_empty()
            || !container
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(ClientError::Api {
                url: self.url("/v1/containers/"),
                status: StatusCode::BAD_REQUEST,
                error: "bad_request".into(),
                reason: format!("{container:?} is not a container id"),
            });
        }
        self.get(&format!("/v1/containers/{container}")).await
    }

    pub async fn renew_lease(
        &self,
        controller: &str,
        timeout: Option<Duration>,
    ) -> Result<LeaseStatus, ClientError> {
        self.post(
            "/v1/lease",
            &LeaseRequest {
                controller: controller.to_string(),
                timeout_ms: timeout.map(|t| t.as_millis() as u64),
            },
        )
        .await
    }

    pub async fn lease(&self) -> Result<LeaseStatus, ClientError> {
        self.get("/v1/lease").await
    }

    pub async fn health(&self) -> Result<Health, ClientError> {
        self.get("/healthz").await
    }

    pub async fn metrics(&self) -> Result<String, ClientError> {
        let url = self.url("/metrics");
        self.exchange(self.http.get(&url), &url, false, self.timeout)
            .await?
            .text()
            .await
            .map_err(|error| ClientError::Transport { url, error })
    }

    /// Subscribes to `/v1/events`. The stream ends when the agent closes it; a transport
    /// error is yielded once and ends it.
    pub async fn events(&self) -> Result<EventStream, ClientError> {
        let url = self.url("/v1/events");
        let req = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        let resp = self.exchange(req, &url, true, self.timeout).await?;
        Ok(json_events::<AgentEvent, _, _, _>(resp.bytes_stream())
            .map(move |item| {
                item.map_err(|e| match e {
                    SseError::Transport(error) => ClientError::Transport {
                        url: url.clone(),
                        error,
                    },
                    SseError::Decode(reason) => ClientError::Decode {
                        url: url.clone(),
                        reason,
                    },
                })
            })
            .boxed())
    }
}

/// Why an event stream gave no event.
#[derive(Debug)]
pub enum SseError<E> {
    /// The connection broke: the stream ends after it.
    Transport(E),
    /// A frame that is not an event or not the JSON expected.
    Decode(String),
}

/// The JSON payloads of a `text/event-stream` body as they arrive, parsed by
/// eventsource-stream. It ends after a transport error.
pub fn json_events<T, S, B, E>(bytes: S) -> impl Stream<Item = Result<T, SseError<E>>>
where
    T: DeserializeOwned,
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    use eventsource_stream::{EventStreamError, Eventsource};
    bytes
        .eventsource()
        .map(|item| match item {
            Ok(ev) => serde_json::from_str::<T>(&ev.data)
                .map_err(|e| SseError::Decode(format!("event {:?}: {e}", ev.event))),
            Err(EventStreamError::Transport(e)) => Err(SseError::Transport(e)),
            Err(EventStreamError::Utf8(e)) => Err(SseError::Decode(format!("not UTF-8: {e}"))),
            Err(EventStreamError::Parser(e)) => {
                Err(SseError::Decode(format!("not an event stream: {e}")))
            }
        })
        .scan(false, |ended, item| {
            if *ended {
                return std::future::ready(None);
            }
            *ended = matches!(item, Err(SseError::Transport(_)));
            std::future::ready(Some(item))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON events of a body sent in `chunks`; a decode error as its message.
    async fn events_of<T: DeserializeOwned>(chunks: Vec<&'static [u8]>) -> Vec<Result<T, String>> {
        let bytes = futures_util::stream::iter(chunks.into_iter().map(Ok));
        let stream = json_events::<T, _, _, std::convert::Infallible>(bytes);
        stream
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .map(|r| {
                r.map_err(|e| match e {
                    SseError::Decode(d) => d,
                    SseError::Transport(never) => match never {},
                })
            })
            .collect()
    }

    #[tokio::test]
    async fn sse_frames_split_anywhere() {
        let text: &'static [u8] = b": keep-alive\n\nevent: lagged\ndata: {\"type\":\"lagged\",\ndata: \"missed\":3}\n\nevent: x\r\ndata: 1\r\n\r\n";
        for split in 0..text.len() {
            let got = events_of::<serde_json::Value>(vec![&text[..split], &text[split..]]).await;
            let want: Vec<Result<serde_json::Value, String>> = vec![
                Ok(serde_json::json!({"type": "lagged", "missed": 3})),
                Ok(serde_json::json!(1)),
            ];
            assert_eq!(got, want, "split at {split}");
            // The event's name reaches the error of a payload that is not the one expected.
            let typed = events_of::<AgentEvent>(vec![&text[..split], &text[split..]]).await;
            assert_eq!(
                typed[0],
                Ok(AgentEvent::Lagged { missed: 3 }),
                "split at {split}"
            );
            assert!(
                matches!(&typed[1], Err(e) if e.starts_with("event \"x\": ")),
                "split at {split}: {typed:?}"
            );
        }
    }

    #[test]
    fn addresses_are_checked() {
        assert!(AgentClient::new("nm1:8049", "t", Duration::from_secs(1)).is_err());
        assert!(AgentClient::new("http://nm1:8049/", "t", Duration::from_secs(1)).is_ok());
        assert!(AgentClient::new("https://nm1:8049", "t", Duration::from_secs(1)).is_err());
        let tls = || {
            rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        };
        let t = Duration::from_secs(1);
        assert!(AgentClient::with_tls("https://nm1:8049", "t", t, Some(tls())).is_ok());
        // With a CA, plain HTTP is refused rather than silently used.
        assert!(AgentClient::with_tls("http://nm1:8049", "t", t, Some(tls())).is_err());
    }
}
