//! The ResourceManager reverse proxy (`preemptor controller --proxy-listen :8089`).
//!
//! Every request (REST and web UI) goes to the active RM unchanged: method, path,
//! query, headers (including `Host`, `Authorization`, `Proxy-Authorization`, SPNEGO's
//! `WWW-Authenticate: Negotiate ...` and the `hadoop.auth` cookie) and body, streamed
//! both ways; only hop-by-hop headers are dropped and `X-Forwarded-For` is added. Application submissions (`POST
//! /ws/v1/cluster/apps`) are read (bounded), optionally routed to a queue, timestamped,
//! and reported on a channel the moment the RM accepts them, so that the controller
//! decides at once instead of at its next tick. Headers and query strings are never
//! logged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{
    ACCEPT, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION,
    TRANSFER_ENCODING,
};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::{RmClient, describe_reqwest, http_client};
use super::dto::{RemoteException, RemoteExceptionResponse};
use super::error::Error;
use super::submission::{self, Submission, xml_escape};
use crate::cluster::{ApplicationId, Millis};
use crate::config::settings::RouteRule;

/// Submissions larger than this are refused with 413 (the RM takes them whole too; a
/// real ApplicationSubmissionContext is a few kilobytes).
pub const DEFAULT_MAX_SUBMISSION_BYTES: usize = 1 << 20;

/// An application submission the RM accepted through the proxy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubmissionSeen {
    pub application_id: ApplicationId,
    /// The queue the RM was asked for: after routing, if a rule applied.
    pub queue: String,
    /// The queue the client asked for ("" when it named none).
    pub requested_queue: String,
    /// The rule that chose `queue`, if any.
    pub routed_by: Option<RouteRule>,
    pub tags: Vec<String>,
    pub application_type: String,
    /// When the request reached the proxy (monotonic, for latencies).
    #[serde(skip)]
    pub seen_at: Instant,
    /// The same moment in epoch milliseconds, the controller's clock.
    pub seen_at_ms: Millis,
}

/// The proxy: a router to mount, or [`RmProxy::serve`] on its own listener.
#[derive(Clone)]
pub struct RmProxy {
    client: RmClient,
    http: reqwest::Client,
    routes: Vec<RouteRule>,
    submissions: mpsc::Sender<SubmissionSeen>,
    max_submission_bytes: usize,
    response_timeout: Duration,
    dropped: Arc<AtomicU64>,
}

impl RmProxy {
    /// A proxy in front of `client`'s RMs (it follows the client's choice of the
    /// active one), routing submissions by `routes` (first match wins) and reporting
    /// them on `submissions`.
    pub fn new(
        client: RmClient,
        routes: Vec<RouteRule>,
        submissions: mpsc::Sender<SubmissionSeen>,
    ) -> Result<RmProxy, Error> {
        let response_timeout = client.request_timeout();
        // No overall timeout: bodies stream for as long as they take. The RM must start
        // answering within the RM request timeout (see `forward`).
        let http = http_client(client.tls(), response_timeout, None)?;
        Ok(RmProxy {
            client,
            http,
            routes,
            submissions,
            max_submission_bytes: DEFAULT_MAX_SUBMISSION_BYTES,
            response_timeout,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    pub fn with_max_submission_bytes(mut self, limit: usize) -> RmProxy {
        self.max_submission_bytes = limit;
        self
    }

    /// Submissions the RM accepted but the channel was full for (the controller still
    /// sees them at its next tick).
    pub fn dropped_notifications(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Every path goes to the RM. Serve it with connect info
    /// (`into_make_service_with_connect_info::<SocketAddr>`) to get `X-Forwarded-For`.
    pub fn router(&self) -> Router {
        Router::new()
            .fallback(forward)
            .with_state(Arc::new(self.clone()))
    }

    /// Serves until `shutdown` is cancelled, then lets requests in flight finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        let app = self
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .map_err(Error::Serve)
    }

    /// Reads the submission, applies the routing rules, and says what to report once
    /// the RM accepts it.
    fn intercept(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        seen_at: Instant,
    ) -> (Bytes, Option<SubmissionSeen>) {
        let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let Some((format, sub)) = submission::read(&body, content_type) else {
            return (body, None);
        };
        let rule = submission::route(&self.routes, &sub);
        let (body, queue) = match rule {
            Some(rule) => match submission::with_queue(&body, format, &rule.queue) {
                Ok(rewritten) => {
                    tracing::info!(application = %sub.application_id, queue = %rule.queue,
                        rule = ?rule.matcher, "routing the submission");
                    (Bytes::from(rewritten), rule.queue.clone())
                }
                Err(e) => {
                    tracing::warn!(application = %sub.application_id, error = %e,
                        "cannot rewrite the submission's queue; forwarding it unchanged");
                    (body, sub.queue.clone())
                }
            },
            None => (body, sub.queue.clone()),
        };
        let seen = seen(sub, queue, rule.cloned(), seen_at);
        (body, seen)
    }

    /// Lets the client look for the active RM without holding up this response.
    fn spawn_report(&self, generation: u64, upstream: reqwest::Url, location: Option<String>) {
        let client = self.client.clone();
        tokio::spawn(async move {
            let _ = client
                .report_failure(generation, &upstream, location.as_deref())
                .await;
        });
    }

    fn notify(&self, seen: SubmissionSeen) {
        match self.submissions.try_send(seen) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(s)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(application = %s.application_id,
                    "the controller is not keeping up with submissions; it will see this one at its next tick");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

fn seen(
    sub: Submission,
    queue: String,
    routed_by: Option<RouteRule>,
    seen_at: Instant,
) -> Option<SubmissionSeen> {
    let application_id = sub.application_id.trim().parse().ok()?;
    let seen_at_ms = SystemTime::now()
        .checked_sub(seen_at.elapsed())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Some(SubmissionSeen {
        application_id,
        queue,
        requested_queue: sub.queue,
        routed_by,
        tags: sub.tags,
        application_type: sub.application_type,
        seen_at,
        seen_at_ms,
    })
}

/// The body to send upstream.
enum Outgoing {
    Empty,
    /// Kept, so the request can be sent again to another RM.
    Buffered(Bytes),
    /// Streamed: sent once.
    Stream(Option<Body>),
}

impl Outgoing {
    fn replayable(&self) -> bool {
        !matches!(self, Outgoing::Stream(_))
    }
}

async fn forward(State(proxy): State<Arc<RmProxy>>, req: Request) -> Response {
    let seen_at = Instant::now();
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let (parts, body) = req.into_parts();
    let xml = prefers_xml(&parts.headers);
    let mut headers = forwarded_headers(&parts.headers, peer);
    let is_submission = parts.method == Method::POST
        && matches!(
            parts.uri.path(),
            "/ws/v1/cluster/apps" | "/ws/v1/cluster/apps/"
        );
    let mut report = None;
    let mut outgoing = if is_submission {
        let bytes = match axum::body::to_bytes(body, proxy.max_submission_bytes).await {
            Ok(b) => b,
            Err(e) => {
                let message = format!(
                    "the application submission could not be read within {} bytes: {e}",
                    proxy.max_submission_bytes
                );
                return remote_error(xml, StatusCode::PAYLOAD_TOO_LARGE, BAD_REQUEST, message);
            }
        };
        let (bytes, seen) = proxy.intercept(&parts.headers, bytes, seen_at);
        report = seen;
        headers.insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        Outgoing::Buffered(bytes)
    } else if has_body(&parts.headers) {
        Outgoing::Stream(Some(body))
    } else {
        Outgoing::Empty
    };
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());

    let (mut base, mut generation) = match proxy.client.upstream().await {
        Ok(u) => u,
        Err(e) => return unreachable(xml, &e.to_string()),
    };
    for _ in 0..=proxy.client.addresses().len() {
        let url = match base.join(target) {
            Ok(u) => u,
            Err(e) => {
                let message = format!("unusable request target: {e}");
                return remote_error(xml, StatusCode::BAD_REQUEST, BAD_REQUEST, message);
            }
        };
        let mut rb = proxy
            .http
            .request(parts.method.clone(), url)
            .headers(headers.clone());
        match &mut outgoing {
            Outgoing::Empty => {}
            Outgoing::Buffered(b) => rb = rb.body(b.clone()),
            Outgoing::Stream(body) => {
                if let Some(body) = body.take() {
                    rb = rb.body(reqwest::Body::wrap_stream(body.into_data_stream()));
                }
            }
        }
        let location = match tokio::time::timeout(proxy.response_timeout, rb.send()).await {
            Err(_) => {
                let message = format!(
                    "the ResourceManager at {base} did not answer within {:?}",
                    proxy.response_timeout
                );
                return remote_error(xml, StatusCode::GATEWAY_TIMEOUT, TIMEOUT, message);
            }
            Ok(Err(e)) => {
                let detail = format!("{base}: {}", describe_reqwest(&e));
                if !e.is_connect() {
                    return unreachable(xml, &detail);
                }
                if !outgoing.replayable() {
                    // This request is lost with its body; the next one goes to the
                    // new active RM.
                    proxy.spawn_report(generation, base.clone(), None);
                    return unreachable(xml, &detail);
                }
                None
            }
            Ok(Ok(resp)) => match standby_location(&resp) {
                Some(location) if outgoing.replayable() => location,
                standby => {
                    if let Some(location) = standby {
                        proxy.spawn_report(generation, base.clone(), location);
                    }
                    tracing::debug!(method = %parts.method, path = %parts.uri.path(),
                        status = resp.status().as_u16(),
                        millis = seen_at.elapsed().as_millis() as u64, "proxied");
                    if let Some(seen) = report.take()
                        && resp.status().is_success()
                    {
                        proxy.notify(seen);
                    }
                    return stream_back(resp);
                }
            },
        };
        match proxy
            .client
            .report_failure(generation, &base, location.as_deref())
            .await
        {
            Ok(next) => (base, generation) = next,
            Err(e) => return unreachable(xml, &e.to_string()),
        }
    }
    unreachable(xml, "no ResourceManager accepted the request")
}

/// `Some(location)` when `resp` is a standby's redirect: a 307 pointing at another RM
/// (`Location`, possibly absent when the standby knows no active RM, in which case it
/// sends `Refresh`). An application-history redirect is passed to the client.
fn standby_location(resp: &reqwest::Response) -> Option<Option<String>> {
    if resp.status() != StatusCode::TEMPORARY_REDIRECT {
        return None;
    }
    let headers = resp.headers();
    let location = headers
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match &location {
        Some(l) if l.contains("/applicationhistory") => None,
        Some(_) => Some(location),
        None if headers.contains_key("refresh") => Some(None),
        None => None,
    }
}

fn stream_back(resp: reqwest::Response) -> Response {
    let status = resp.status();
    let mut headers = HeaderMap::new();
    copy_end_to_end(resp.headers(), &mut headers);
    let mut out = Response::new(Body::from_stream(resp.bytes_stream()));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// The request headers to send upstream: all end-to-end headers as they came
/// (authentication included), plus `X-Forwarded-For`.
fn forwarded_headers(incoming: &HeaderMap, peer: Option<SocketAddr>) -> HeaderMap {
    let mut out = HeaderMap::new();
    copy_end_to_end(incoming, &mut out);
    if let Some(peer) = peer {
        let xff = HeaderName::from_static("x-forwarded-for");
        let value = match incoming.get(&xff).and_then(|v| v.to_str().ok()) {
            Some(prior) => format!("{prior}, {}", peer.ip()),
            None => peer.ip().to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            out.insert(xff, v);
        }
    }
    out
}

/// RFC 9110 7.6.1: hop-by-hop headers, and any the `Connection` header names, stay
/// on their own connection. `Proxy-Authorization` and `Proxy-Authenticate` pass: this
/// proxy authenticates no one, so they are meant for a gateway in front of the RM
/// (RFC 9110 11.7 lets proxies relay them).
fn copy_end_to_end(from: &HeaderMap, to: &mut HeaderMap) {
    let named: Vec<String> = from
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    for (name, value) in from {
        let n = name.as_str();
        let hop = matches!(
            n,
            "connection"
                | "keep-alive"
                | "proxy-connection"
                | "te"
                | "trailer"
                | "transfer-encoding"
                | "upgrade"
                | "expect"
        ) || named.iter().any(|h| h == n);
        if !hop {
            to.append(name.clone(), value.clone());
        }
    }
}

fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

const BAD_REQUEST: (&str, &str) = (
    "BadRequestException",
    "org.apache.hadoop.yarn.webapp.BadRequestException",
);
const CONNECT: (&str, &str) = ("ConnectException", "java.net.ConnectException");
const TIMEOUT: (&str, &str) = ("SocketTimeoutException", "java.net.SocketTimeoutException");

fn unreachable(xml: bool, detail: &str) -> Response {
    remote_error(
        xml,
        StatusCode::BAD_GATEWAY,
        CONNECT,
        format!(
            "Preemptor's ResourceManager proxy cannot reach an active ResourceManager: {detail}"
        ),
    )
}

/// Whether the client lists XML before JSON in `Accept`, as the RM decides.
fn prefers_xml(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    match (accept.find("xml"), accept.find("json")) {
        (Some(x), Some(j)) => x < j,
        (Some(_), None) => true,
        _ => false,
    }
}

/// A YARN-style error, in XML when the client prefers it (as the RM would answer).
fn remote_error(
    xml: bool,
    status: StatusCode,
    (exception, java_class): (&str, &str),
    message: String,
) -> Response {
    tracing::warn!(status = status.as_u16(), %message, "proxy error");
    let e = RemoteException {
        exception: exception.into(),
        message,
        java_class_name: java_class.into(),
    };
    let (body, ctype) = if xml {
        (
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><RemoteException><exception>{}</exception><message>{}</message><javaClassName>{}</javaClassName></RemoteException>",
                xml_escape(&e.exception),
                xml_escape(&e.message),
                xml_escape(&e.java_class_name)
            ),
            "application/xml",
        )
    } else {
        let r = RemoteExceptionResponse {
            remote_exception: e,
        };
        (
            serde_json::to_string(&r).unwrap_or_default(),
            "application/json",
        )
    };
    (status, [(CONTENT_TYPE, ctype)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_stay_and_the_rest_pass_untouched() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Negotiate YIIC".parse().unwrap());
        h.insert("proxy-authorization", "Basic Z3c6cHc=".parse().unwrap());
        h.append(
            "cookie",
            "hadoop.auth=\"u=alice&t=kerberos\"".parse().unwrap(),
        );
        h.insert("connection", "keep-alive, x-private".parse().unwrap());
        h.insert("x-private", "1".parse().unwrap());
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        h.insert("host", "proxy:8089".parse().unwrap());
        let out = forwarded_headers(&h, Some("10.0.0.7:5000".parse().unwrap()));
        assert_eq!(out["authorization"], "Negotiate YIIC");
        assert_eq!(out["proxy-authorization"], "Basic Z3c6cHc=");
        assert_eq!(out["cookie"], "hadoop.auth=\"u=alice&t=kerberos\"");
        assert_eq!(out["host"], "proxy:8089");
        assert_eq!(out["x-forwarded-for"], "10.0.0.7");
        for gone in ["connection", "x-private", "transfer-encoding"] {
            assert!(!out.contains_key(gone), "{gone}");
        }
    }

    #[test]
    fn errors_are_remote_exceptions_in_the_format_asked_for() {
        let mut h = HeaderMap::new();
        let r = unreachable(prefers_xml(&h), "http://rm:8088: connection refused");
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/json");
        h.insert(ACCEPT, "application/xml, application/json".parse().unwrap());
        let r = unreachable(prefers_xml(&h), "x");
        assert_eq!(r.headers()[CONTENT_TYPE], "application/xml");
        h.insert(ACCEPT, "application/json, text/xml".parse().unwrap());
        assert!(!prefers_xml(&h));
    }
}
