//! The controller's HTTP API: status, events (SSE), metrics and the dashboard (GET), and
//! the operator's write routes (POST): resume a container, resume everything, restore
//! node capacities, carried out by the tick loop ([`super::operator`]). Documented in
//! docs/dashboard.md.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use futures_util::Stream;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::{self, error::TryRecvError};
use tokio_util::sync::CancellationToken;

use super::history::HistoryReport;
use super::hub::{ActionRecord, ControllerEvent, Hub, StatusReport};
use super::operator::{
    DEFAULT_HOLD_OFF, MAX_HOLD_OFF, Operator, OperatorError, Reply, Request as Ask,
};
use super::{dashboard, metrics};
use crate::sse::{self, StreamEvent};

/// Actions kept for the dashboard and `/api/v1/actions`.
pub const RECENT_ACTIONS: usize = 500;
/// Short-job waits kept for the dashboard's chart.
pub const RECENT_WAITS: usize = 1000;
/// The write routes' bodies are a few dozen bytes; anything larger is refused before it
/// is buffered.
const MAX_BODY_BYTES: usize = 1024;

struct ApiState {
    hub: Hub,
    token: Arc<Vec<u8>>,
    /// Ends the event streams, which would otherwise keep a graceful shutdown waiting.
    shutdown: CancellationToken,
    recent: Mutex<Recent>,
    /// Hands the write routes' commands to the tick loop.
    operator: Operator,
}

/// The tail of the event stream, caught up lazily on each read, so that a page load or
/// `preemptor logs` shows what happened before it connected.
struct Recent {
    rx: broadcast::Receiver<ControllerEvent>,
    actions: VecDeque<ActionRecord>,
    waits: VecDeque<WaitPoint>,
    /// Events that fell out of the buffer between two reads.
    missed: u64,
}

/// One short application's wait for its first container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitPoint {
    pub at_ms: u64,
    pub application: String,
    pub wait_ms: u64,
}

/// `/api/v1/actions`: the most recent preemption log records, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecentActions {
    pub actions: Vec<ActionRecord>,
    /// Events the API missed because they came faster than it read them.
    pub missed: u64,
}

/// What the dashboard renders from.
pub struct Snapshot {
    pub status: Arc<StatusReport>,
    pub actions: Vec<ActionRecord>,
    /// The last minutes: the hub's samples and the short-job waits among them.
    pub history: HistoryReport,
    pub missed: u64,
}

impl Recent {
    fn catch_up(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(ControllerEvent::Action(a)) => {
                    push_bounded(&mut self.actions, *a, RECENT_ACTIONS);
                }
                Ok(ControllerEvent::ShortWait {
                    at_ms,
                    application,
                    wait_ms,
                }) => push_bounded(
                    &mut self.waits,
                    WaitPoint {
                        at_ms,
                        application,
                        wait_ms,
                    },
                    RECENT_WAITS,
                ),
                Ok(ControllerEvent::Tick(_) | ControllerEvent::Warning { .. }) => {}
                Err(TryRecvError::Lagged(n)) => self.missed += n,
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, item: T, cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(item);
}

/// An error answer: status, stable code and a reason for the operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub reason: String,
}

struct ApiError {
    status: StatusCode,
    code: &'static str,
    reason: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            Json(ErrorBody {
                error: self.code.into(),
                reason: self.reason,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

/// Every route of the controller's API. `token` guards all but `/healthz`; cancelling
/// `shutdown` ends every open event stream; `operator` takes the write routes' commands
/// to the tick loop.
pub fn router(
    hub: Hub,
    token: Arc<Vec<u8>>,
    shutdown: CancellationToken,
    operator: Operator,
) -> Router {
    let state = Arc::new(ApiState {
        recent: Mutex::new(Recent {
            rx: hub.subscribe(),
            actions: VecDeque::new(),
            waits: VecDeque::new(),
            missed: 0,
        }),
        hub,
        token,
        shutdown,
        operator,
    });
    let protected = Router::new()
        .route("/", get(dashboard_page))
        .route("/api/v1/status", get(status))
        .route("/api/v1/actions", get(actions))
        .route("/api/v1/events", get(events))
        .route("/api/v1/history", get(history))
        .route("/metrics", get(metrics_text))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let write = Router::new()
        .route("/api/v1/resume", post(resume))
        .route("/api/v1/restore-capacities", post(restore_capacities))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_header_token,
        ));
    Router::new()
        .route(
            "/healthz",
            get(|| async { Json(serde_json::json!({"status": "ok"})) }),
        )
        .merge(protected)
        .merge(write)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

impl ApiState {
    fn snapshot(&self) -> Snapshot {
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        recent.catch_up();
        Snapshot {
            status: self.hub.status(),
            actions: recent.actions.iter().cloned().collect(),
            history: HistoryReport::new(self.hub.history(), recent.waits.make_contiguous()),
            missed: recent.missed,
        }
    }
}

/// The token from `Authorization: Bearer` or, for browsers and EventSource, `?token=`.
fn presented_token(req: &Request) -> Option<Vec<u8>> {
    if let Some(t) = crate::auth::bearer_token(req.headers()) {
        return Some(t.as_bytes().to_vec());
    }
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .map(percent_decode)
}

/// `%XX` decoding only: a `+` stays a `+`, as base64 tokens need.
fn percent_decode(s: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(s).collect()
}

async fn require_token(State(st): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    let presented = presented_token(&req);
    if presented
        .as_deref()
        .is_some_and(|t| crate::auth::token_matches(t, &st.token))
    {
        return next.run(req).await;
    }
    let reason = if presented.is_some() {
        "wrong token"
    } else {
        "missing token: send `Authorization: Bearer <token>` or, from a browser, add \
         `?token=<token>` to the URL (the controller's --token-file)"
    };
    unauthorized(reason)
}

/// The write routes take the token from the header only: a URL with `?token=` (a
/// dashboard link, a browser's history) must not be able to act.
async fn require_header_token(
    State(st): State<Arc<ApiState>>,
    req: Request,
    next: Next,
) -> Response {
    let presented = crate::auth::bearer_token(req.headers()).map(|t| t.as_bytes().to_vec());
    if presented
        .as_deref()
        .is_some_and(|t| crate::auth::token_matches(t, &st.token))
    {
        return next.run(req).await;
    }
    unauthorized(if presented.is_some() {
        "wrong token"
    } else {
        "missing token: the write routes take it only as `Authorization: Bearer <token>` \
         (the controller's --token-file), never in the URL"
    })
}

fn unauthorized(reason: &str) -> Response {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        code: "unauthorized",
        reason: reason.into(),
    }
    .into_response()
}

/// `POST /api/v1/resume`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResumeBody {
    container: Option<String>,
    #[serde(default)]
    all: bool,
    hold_off_seconds: Option<u64>,
}

/// `POST /api/v1/restore-capacities`; the body may be empty.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RestoreBody {
    hold_off_seconds: Option<u64>,
}

fn bad_request(reason: String) -> ApiError {
    ApiError {
        status: StatusCode::BAD_REQUEST,
        code: "bad_request",
        reason,
    }
}

/// The JSON body, or `empty` for an empty one where that is allowed.
fn json_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    empty: Option<T>,
) -> Result<T, ApiError> {
    let body = body.map_err(|r| ApiError {
        status: r.status(),
        code: "bad_request",
        reason: r.body_text(),
    })?;
    if body.iter().all(u8::is_ascii_whitespace)
        && let Some(e) = empty
    {
        return Ok(e);
    }
    serde_json::from_slice(&body).map_err(|e| bad_request(format!("body: {e}")))
}

fn hold_off(seconds: Option<u64>) -> Result<Duration, ApiError> {
    let Some(s) = seconds else {
        return Ok(DEFAULT_HOLD_OFF);
    };
    let d = Duration::from_secs(s);
    if d > MAX_HOLD_OFF {
        return Err(bad_request(format!(
            "holdOffSeconds {s} is more than a day ({} s)",
            MAX_HOLD_OFF.as_secs()
        )));
    }
    Ok(d)
}

async fn resume(
    State(st): State<Arc<ApiState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b: ResumeBody = json_body(body, None)?;
    let ask = match (b.container, b.all) {
        (Some(_), true) => {
            return Err(bad_request(
                "give either `container` or `all`, not both".into(),
            ));
        }
        (Some(c), false) => {
            if b.hold_off_seconds.is_some() {
                return Err(bad_request(
                    "`holdOffSeconds` goes with `all`, not with one container".into(),
                ));
            }
            let id = c.trim().parse().map_err(|e| {
                bad_request(format!("container {c:?} is not a YARN container id: {e}"))
            })?;
            Ask::Resume(id)
        }
        (None, true) => Ask::ResumeAll {
            hold_off: hold_off(b.hold_off_seconds)?,
            by: "resume --all",
        },
        (None, false) => {
            return Err(bad_request(
                "expected {\"container\": \"container_...\"} or {\"all\": true}".into(),
            ));
        }
    };
    Ok(answered(st.operator.ask(ask).await))
}

async fn restore_capacities(
    State(st): State<Arc<ApiState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let b = json_body(body, Some(RestoreBody::default()))?;
    let ask = Ask::ResumeAll {
        hold_off: hold_off(b.hold_off_seconds)?,
        by: "restore-capacities",
    };
    Ok(answered(st.operator.ask(ask).await))
}

fn answered(reply: Result<Reply, OperatorError>) -> Response {
    let (status, code, reason) = match reply {
        Ok(Reply::Accepted(a)) => return (StatusCode::ACCEPTED, Json(a)).into_response(),
        Ok(Reply::NotHeld(reason)) => (StatusCode::NOT_FOUND, "not_held", reason),
        Ok(Reply::ObserveOnly) => (
            StatusCode::CONFLICT,
            "observe_only",
            "the controller is observe-only (yarn.preemptor.observe-only or --observe-only): \
             it acts on nothing, so it holds nothing to resume or restore"
                .to_string(),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
    };
    ApiError {
        status,
        code,
        reason,
    }
    .into_response()
}

async fn status(State(st): State<Arc<ApiState>>) -> Json<StatusReport> {
    Json(st.hub.full_status())
}

async fn actions(State(st): State<Arc<ApiState>>) -> Json<RecentActions> {
    let snap = st.snapshot();
    Json(RecentActions {
        actions: snap.actions,
        missed: snap.missed,
    })
}

async fn history(State(st): State<Arc<ApiState>>) -> Json<HistoryReport> {
    Json(st.snapshot().history)
}

async fn metrics_text(State(st): State<Arc<ApiState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        metrics::render_hub(&st.hub),
    )
        .into_response()
}

async fn dashboard_page(State(st): State<Arc<ApiState>>) -> Html<String> {
    Html(dashboard::page(&st.snapshot()))
}

use crate::clock::unix_ms as now_ms;

async fn events(
    State(st): State<Arc<ApiState>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    sse::broadcast_stream(st.hub.subscribe(), st.shutdown.clone())
}

impl StreamEvent for ControllerEvent {
    fn event_name(&self) -> &'static str {
        self.name()
    }
    fn lagged(missed: u64) -> Self {
        ControllerEvent::Warning {
            at_ms: now_ms(),
            message: format!(
                "this event stream fell behind and missed {missed} events; \
                 /api/v1/actions has the recent preemption log"
            ),
        }
    }
    const ENCODE_FAILURE: &'static str = "warning";
}

async fn not_found() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        reason: "no such route; see docs/dashboard.md (GET /, /api/v1/status, \
                 /api/v1/actions, /api/v1/history, /api/v1/events, /metrics, /healthz; \
                 POST /api/v1/resume, /api/v1/restore-capacities)"
            .into(),
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        reason: "/api/v1/resume and /api/v1/restore-capacities take POST, every other \
                 route GET"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::hub::Outcome;
    use crate::controller::operator::Accepted;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    type Asked = Arc<Mutex<Vec<Ask>>>;

    /// The router with a stand-in for the tick loop that answers each command with
    /// `answer` and keeps what it was asked.
    fn app_with(hub: &Hub, answer: impl Fn(&Ask) -> Reply + Send + 'static) -> (Router, Asked) {
        let (operator, mut rx) = Operator::channel();
        let asked: Asked = Arc::default();
        let kept = asked.clone();
        tokio::spawn(async move {
            while let Some(cmd) = rx.recv().await {
                let reply = answer(&cmd.request);
                kept.lock().unwrap().push(cmd.request);
                let _ = cmd.reply.send(reply);
            }
        });
        let app = router(
            hub.clone(),
            Arc::new(b"s3cr+t/=".to_vec()),
            CancellationToken::new(),
            operator,
        );
        (app, asked)
    }

    fn app(hub: &Hub) -> Router {
        app_with(hub, |_| Reply::ObserveOnly).0
    }

    async fn post(
        app: &Router,
        uri: &str,
        bearer: Option<&str>,
        body: impl Into<Body>,
    ) -> (StatusCode, String) {
        let mut req =
            axum::http::Request::post(uri).header(header::CONTENT_TYPE, "application/json");
        if let Some(t) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let resp = app
            .clone()
            .oneshot(req.body(body.into()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    const HELD: &str = "container_1700000000000_0001_01_000002";

    /// Like the loop: `HELD` is held, nothing else.
    fn holds_one(ask: &Ask) -> Reply {
        match ask {
            Ask::Resume(id) if id.to_string() == HELD => Reply::Accepted(Accepted {
                message: format!("{id} will be resumed"),
                resuming: vec![id.to_string()],
                ..Accepted::default()
            }),
            Ask::Resume(id) => Reply::NotHeld(format!("the controller holds no container {id}")),
            Ask::ResumeAll { hold_off, .. } => Reply::Accepted(Accepted {
                message: "everything goes back".into(),
                resuming: vec![HELD.into()],
                restoring: vec!["nm1:8042".into()],
                hold_off_until_ms: Some(hold_off.as_secs()),
            }),
        }
    }

    #[tokio::test]
    async fn write_routes_take_the_token_only_from_the_header() {
        let (app, asked) = app_with(&Hub::new(), holds_one);
        let body = format!(r#"{{"container":"{HELD}"}}"#);
        for (uri, bearer, why) in [
            ("/api/v1/resume", None, "missing token"),
            ("/api/v1/resume", Some("nope"), "wrong token"),
            ("/api/v1/resume?token=s3cr%2Bt/=", None, "never in the URL"),
            ("/api/v1/restore-capacities", Some("s3cr+t/"), "wrong token"),
        ] {
            let (code, text) = post(&app, uri, bearer, body.clone()).await;
            assert_eq!(code, StatusCode::UNAUTHORIZED, "{uri} {bearer:?}");
            let err: ErrorBody = serde_json::from_str(&text).unwrap();
            assert!(err.reason.contains(why), "{text}");
        }
        assert!(asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn resume_is_handed_to_the_loop_and_its_answer_becomes_202_or_404() {
        let (app, asked) = app_with(&Hub::new(), holds_one);
        let (code, text) = post(
            &app,
            "/api/v1/resume",
            Some("s3cr+t/="),
            format!(r#"{{"container":" {HELD} "}}"#),
        )
        .await;
        assert_eq!(code, StatusCode::ACCEPTED, "{text}");
        let a: Accepted = serde_json::from_str(&text).unwrap();
        assert_eq!(a.resuming, [HELD]);

        let other = "container_1700000000000_0001_01_000009";
        let (code, text) = post(
            &app,
            "/api/v1/resume",
            Some("s3cr+t/="),
            format!(r#"{{"container":"{other}"}}"#),
        )
        .await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{text}");
        let err: ErrorBody = serde_json::from_str(&text).unwrap();
        assert_eq!(err.error, "not_held");
        assert!(err.reason.contains(other), "{text}");
        assert_eq!(
            *asked.lock().unwrap(),
            [
                Ask::Resume(HELD.parse().unwrap()),
                Ask::Resume(other.parse().unwrap())
            ]
        );
    }

    #[tokio::test]
    async fn resume_all_and_restore_capacities_carry_their_hold_off() {
        let (app, asked) = app_with(&Hub::new(), holds_one);
        for (uri, body) in [
            ("/api/v1/resume", r#"{"all":true}"#),
            ("/api/v1/resume", r#"{"all":true,"holdOffSeconds":60}"#),
            ("/api/v1/restore-capacities", ""),
            ("/api/v1/restore-capacities", r#"{"holdOffSeconds":0}"#),
        ] {
            let (code, text) = post(&app, uri, Some("s3cr+t/="), body).await;
            assert_eq!(code, StatusCode::ACCEPTED, "{uri} {body}: {text}");
            let a: Accepted = serde_json::from_str(&text).unwrap();
            assert_eq!(a.restoring, ["nm1:8042"]);
        }
        assert_eq!(
            *asked.lock().unwrap(),
            [
                Ask::ResumeAll {
                    hold_off: DEFAULT_HOLD_OFF,
                    by: "resume --all"
                },
                Ask::ResumeAll {
                    hold_off: Duration::from_secs(60),
                    by: "resume --all"
                },
                Ask::ResumeAll {
                    hold_off: DEFAULT_HOLD_OFF,
                    by: "restore-capacities"
                },
                Ask::ResumeAll {
                    hold_off: Duration::ZERO,
                    by: "restore-capacities"
                },
            ]
        );
    }

    #[tokio::test]
    async fn malformed_bodies_are_400s_that_never_reach_the_loop() {
        let (app, asked) = app_with(&Hub::new(), holds_one);
        let resume = "/api/v1/resume";
        let restore = "/api/v1/restore-capacities";
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (resume, b"".to_vec()),
            (resume, b"{".to_vec()),
            (resume, b"[]".to_vec()),
            (resume, b"null".to_vec()),
            (resume, b"{}".to_vec()),
            (resume, br#"{"all":false}"#.to_vec()),
            (resume, br#"{"container":1}"#.to_vec()),
            (resume, br#"{"container":"nope"}"#.to_vec()),
            (
                resume,
                br#"{"container":"container_1_0001_01_000002","all":true}"#.to_vec(),
            ),
            (
                resume,
                br#"{"container":"container_1_0001_01_000002","holdOffSeconds":5}"#.to_vec(),
            ),
            (resume, br#"{"all":true,"holdOffSeconds":-1}"#.to_vec()),
            (resume, br#"{"all":true,"holdOffSeconds":1.5}"#.to_vec()),
            (
                resume,
                br#"{"all":true,"holdOffSeconds":18446744073709551615}"#.to_vec(),
            ),
            (
                resume,
                br#"{"all":true,"holdOffSeconds":99999999999999999999999}"#.to_vec(),
            ),
            (resume, br#"{"all":true,"extra":1}"#.to_vec()),
            (resume, b"\xff\xfe{\"all\":true}".to_vec()),
            (restore, br#"{"all":true}"#.to_vec()),
            (restore, b"not json".to_vec()),
        ];
        for (uri, body) in cases {
            let shown = String::from_utf8_lossy(&body).into_owned();
            let (code, text) = post(&app, uri, Some("s3cr+t/="), body).await;
            assert_eq!(code, StatusCode::BAD_REQUEST, "{uri} {shown}: {text}");
            let err: ErrorBody = serde_json::from_str(&text).expect(&text);
            assert_eq!(err.error, "bad_request");
            assert!(!err.reason.is_empty());
        }
        // Larger than any command: refused before it is read.
        let (code, _) = post(&app, resume, Some("s3cr+t/="), vec![b' '; 4096]).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
        // Arbitrary bytes never panic the handler.
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(37);
        for _ in 0..300 {
            let len = rng.random_range(0..64);
            let body: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let (code, _) = post(&app, resume, Some("s3cr+t/="), body).await;
            assert_eq!(code, StatusCode::BAD_REQUEST);
        }
        assert!(asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn observe_only_is_409_and_a_stopped_loop_503() {
        let (app, _) = app_with(&Hub::new(), |_| Reply::ObserveOnly);
        let (code, text) = post(&app, "/api/v1/restore-capacities", Some("s3cr+t/="), "").await;
        assert_eq!(code, StatusCode::CONFLICT, "{text}");
        assert!(
            text.contains("observe_only") && text.contains("acts on nothing"),
            "{text}"
        );

        let (operator, rx) = Operator::channel();
        drop(rx);
        let app = router(
            Hub::new(),
            Arc::new(b"s3cr+t/=".to_vec()),
            CancellationToken::new(),
            operator,
        );
        let (code, text) = post(&app, "/api/v1/resume", Some("s3cr+t/="), r#"{"all":true}"#).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{text}");
        // GET on a write route, POST on a read route.
        let (code, _) = get(&app, "/api/v1/resume", Some("s3cr+t/=")).await;
        assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    }

    async fn get(app: &Router, uri: &str, bearer: Option<&str>) -> (StatusCode, String) {
        let mut req = axum::http::Request::get(uri);
        if let Some(t) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let resp = app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn action(n: u64) -> ActionRecord {
        ActionRecord {
            at_ms: 1_700_000_000_000 + n,
            policy: "graceful".into(),
            action: "suspend".into(),
            container: Some(format!("container_1_0001_01_{n:06}")),
            application: Some("application_1_0001".into()),
            queue: Some("root.long".into()),
            node: Some("nm1:8042".into()),
            before: "<1024 MB, 1 vcores>".into(),
            after: "<64 MB, 0.010 vcores>".into(),
            amounts: crate::controller::hub::Amounts::default(),
            reason: "root.short under guarantee".into(),
            latency_ms: Some(40),
            outcome: Outcome::Applied,
        }
    }

    #[tokio::test]
    async fn everything_but_healthz_needs_the_token() {
        let hub = Hub::new();
        let app = app(&hub);
        assert_eq!(get(&app, "/healthz", None).await.0, StatusCode::OK);
        for uri in [
            "/",
            "/api/v1/status",
            "/api/v1/actions",
            "/api/v1/history",
            "/metrics",
        ] {
            let (code, body) = get(&app, uri, None).await;
            assert_eq!(code, StatusCode::UNAUTHORIZED, "{uri}");
            let err: ErrorBody = serde_json::from_str(&body).unwrap();
            assert_eq!(err.error, "unauthorized");
            assert_eq!(
                get(&app, uri, Some("nope")).await.0,
                StatusCode::UNAUTHORIZED
            );
            assert_eq!(get(&app, uri, Some("s3cr+t/=")).await.0, StatusCode::OK);
        }
        // The query form, percent-encoded or raw; `+` is not a space.
        assert_eq!(
            get(&app, "/api/v1/status?token=s3cr%2Bt%2F%3D", None)
                .await
                .0,
            StatusCode::OK
        );
        assert_eq!(
            get(&app, "/api/v1/status?x=1&token=s3cr+t/=", None).await.0,
            StatusCode::OK
        );
        assert_eq!(
            get(&app, "/api/v1/status?token=s3cr%20t/=", None).await.0,
            StatusCode::UNAUTHORIZED
        );
    }

    #[tokio::test]
    async fn only_get_and_errors_are_json() {
        let app = app(&Hub::new());
        let resp = app
            .clone()
            .oneshot(
                axum::http::Request::post("/api/v1/status")
                    .header(header::AUTHORIZATION, "Bearer s3cr+t/=")
                    .body(Body::from("{}"))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
        let (code, body) = get(&app, "/api/v2/nothing", Some("s3cr+t/=")).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert!(body.contains("\"reason\""), "{body}");
    }

    #[tokio::test]
    async fn recent_actions_include_what_happened_before_the_request() {
        let hub = Hub::new();
        let app = app(&hub);
        for n in 0..3 {
            hub.record_action(action(n));
        }
        hub.record_short_wait(5, "application_1_0002".into(), 900);
        let (code, body) = get(&app, "/api/v1/actions", Some("s3cr+t/=")).await;
        assert_eq!(code, StatusCode::OK);
        let recent: RecentActions = serde_json::from_str(&body).unwrap();
        assert_eq!(recent.actions, (0..3).map(action).collect::<Vec<_>>());
        assert_eq!(recent.missed, 0);
    }

    #[tokio::test]
    async fn a_lagging_event_stream_is_told_what_it_missed() {
        let hub = Hub::new();
        let resp = app(&hub)
            .oneshot(
                axum::http::Request::get("/api/v1/events?token=s3cr%2Bt/=")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        // Subscribed when the handler answered; now overflow the hub's buffer unread.
        for n in 0..5000 {
            hub.record_action(action(n));
        }
        let mut body = resp.into_body();
        let mut text = String::new();
        while !text.contains("\n\n") {
            let frame = body.frame().await.unwrap().unwrap();
            if let Ok(data) = frame.into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
            }
        }
        let first = text.split("\n\n").next().unwrap_or_default();
        assert!(first.starts_with("event: warning\n"), "{first}");
        assert!(first.contains("missed 904 events"), "{first}");
    }

    #[tokio::test]
    async fn history_holds_the_ticks_and_waits_of_the_last_minutes() {
        let hub = Hub::new();
        let app = app(&hub);
        for (n, suspended) in [0, 2, 1].into_iter().enumerate() {
            hub.set_status(StatusReport {
                at_ms: 1_700_000_000_000 + 3000 * n as u64,
                rm_reachable: true,
                suspended,
                ..StatusReport::default()
            });
        }
        hub.record_short_wait(1_700_000_001_000, "application_1_0002".into(), 900);
        let (code, body) = get(&app, "/api/v1/history", Some("s3cr+t/=")).await;
        assert_eq!(code, StatusCode::OK);
        assert!(body.contains("\"windowMs\":600000"), "{body}");
        let h: HistoryReport = serde_json::from_str(&body).unwrap();
        let suspended: Vec<usize> = h.samples.iter().map(|s| s.suspended).collect();
        assert_eq!(suspended, [0, 2, 1]);
        assert_eq!(h.waits.len(), 1);
        assert_eq!(h.waits[0].wait_ms, 900);
    }

    #[test]
    fn recent_keeps_the_newest_and_counts_what_it_missed() {
        let hub = Hub::new();
        let mut recent = Recent {
            rx: hub.subscribe(),
            actions: VecDeque::new(),
            waits: VecDeque::new(),
            missed: 0,
        };
        // More than the hub's buffer between two reads.
        for n in 0..5000 {
            hub.record_action(action(n));
        }
        recent.catch_up();
        assert!(recent.missed > 0);
        assert_eq!(recent.actions.len(), RECENT_ACTIONS);
        assert_eq!(recent.actions.back(), Some(&action(4999)));
    }
}
