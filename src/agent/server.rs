//! The agent's HTTP API (axum). Routes and bodies are documented in [`super::api`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::api::{
    ActionRequest, ActionResult, AgentEvent, ContainerStatus, ErrorBody, Health, LeaseRequest,
    LeaseStatus,
};
use super::cgroup::CgroupError;
use super::docker::DockerError;
use super::enforcer::{Enforcer, Error};
use super::host::HostError;
use super::lease::LeaseError;
use super::metrics;
use super::writer::WriteError;
use crate::sse::{self, StreamEvent};

pub struct AppState {
    pub enforcer: Arc<Enforcer>,
    pub token: Vec<u8>,
    /// Ends open event streams on shutdown, so that graceful shutdown can finish.
    pub shutdown: CancellationToken,
}

/// An error answer: status, stable code and a reason for the operator.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub reason: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            Json(ErrorBody {
                error: self.code.to_string(),
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

/// The one place agent errors become HTTP statuses.
pub fn error_status(e: &Error) -> StatusCode {
    match e {
        Error::BadRequest(_) | Error::Mapping(_) => StatusCode::BAD_REQUEST,
        Error::Lease(LeaseError::BadTimeout(_) | LeaseError::BadIdentity) => {
            StatusCode::BAD_REQUEST
        }
        Error::UnknownContainer(_) | Error::Docker(DockerError::NotFound(_)) => {
            StatusCode::NOT_FOUND
        }
        Error::NotYarn { .. }
        | Error::NotOnThisNode { .. }
        | Error::Host(HostError::NotOwned { .. }) => StatusCode::FORBIDDEN,
        Error::NodeManager(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::NoLease
        | Error::Lease(LeaseError::HeldByOther { .. })
        | Error::Conflict(_)
        | Error::Vanished(_)
        | Error::MemoryBusy { .. }
        | Error::Cgroup(CgroupError::Vanished { .. }) => StatusCode::CONFLICT,
        Error::Docker(DockerError::Refused { status: 409, .. }) => StatusCode::CONFLICT,
        Error::Docker(DockerError::Unreachable(_)) => StatusCode::SERVICE_UNAVAILABLE,
        Error::Docker(_) | Error::Write(WriteError::NotApplied { .. }) => StatusCode::BAD_GATEWAY,
        Error::Cgroup(_)
        | Error::Host(_)
        | Error::Write(_)
        | Error::Store(_)
        | Error::Internal(_)
        | Error::RollbackFailed { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub fn error_code(e: &Error) -> &'static str {
    match e {
        Error::BadRequest(_) | Error::Mapping(_) => "bad_request",
        Error::Lease(LeaseError::BadTimeout(_) | LeaseError::BadIdentity) => "bad_request",
        Error::UnknownContainer(_) | Error::Docker(DockerError::NotFound(_)) => "unknown_container",
        Error::NotYarn { .. } | Error::Host(HostError::NotOwned { .. }) => "not_yarn",
        Error::NotOnThisNode { .. } => "not_on_this_node",
        Error::NodeManager(_) => "unavailable",
        Error::NoLease | Error::Lease(_) => "lease",
        Error::Conflict(_)
        | Error::Vanished(_)
        | Error::MemoryBusy { .. }
        | Error::Cgroup(CgroupError::Vanished { .. }) => "conflict",
        Error::Docker(DockerError::Unreachable(_)) => "unavailable",
        Error::Docker(_) | Error::Write(WriteError::NotApplied { .. }) => "docker",
        Error::Cgroup(_)
        | Error::Host(_)
        | Error::Write(_)
        | Error::Store(_)
        | Error::Internal(_)
        | Error::RollbackFailed { .. } => "internal",
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError {
            status: error_status(&e),
            code: error_code(&e),
            reason: e.to_string(),
        }
    }
}

/// `Json<T>` whose rejections are JSON errors with a reason: 413 for an oversized body,
/// 415 without a JSON content type, 400 for anything malformed.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    let (status, code) = match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
        }
        _ => (StatusCode::BAD_REQUEST, "bad_request"),
    };
    ApiError {
        status,
        code,
        reason: r.body_text(),
    }
}

async fn require_token(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let presented = crate::auth::bearer_token(req.headers());
    let ok = presented.is_some_and(|t| crate::auth::token_matches(t.as_bytes(), &st.token));
    if ok {
        next.run(req).await
    } else {
        let reason = if presented.is_some() {
            "wrong bearer token"
        } else {
            "missing bearer token (Authorization: Bearer <token from the agent's --token-file>)"
        };
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            reason: reason.into(),
        }
        .into_response()
    }
}

async fn count_requests(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    st.enforcer.metrics().inc(
        metrics::HTTP_REQUESTS,
        &[("status", resp.status().as_str())],
    );
    resp
}

async fn health(State(st): State<Arc<AppState>>) -> Json<Health> {
    let e = &st.enforcer;
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        dry_run: e.is_dry_run(),
        cgroup_version: e.cgroup_version(),
        path: e.settings().path,
        containers: e.backend_name().into(),
        swap_accounting: e.swap_accounting(),
        store: e.store_report().cloned(),
    })
}

async fn metrics_text(State(st): State<Arc<AppState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        st.enforcer.metrics().render(),
    )
        .into_response()
}

async fn post_action(
    State(st): State<Arc<AppState>>,
    ApiJson(req): ApiJson<ActionRequest>,
) -> Result<Json<ActionResult>, ApiError> {
    Ok(Json(st.enforcer.act(req).await?))
}

async fn list_containers(
    State(st): State<Arc<AppState>>,
) -> Result<Json<Vec<ContainerStatus>>, ApiError> {
    Ok(Json(st.enforcer.containers().await?))
}

async fn get_container(
    State(st): State<Arc<AppState>>,
    reference: Result<Path<String>, PathRejection>,
) -> Result<Json<ContainerStatus>, ApiError> {
    // A segment that does not decode (e.g. `%FF`) gets a JSON 400 like any bad input.
    let Path(reference) = reference.map_err(|r| ApiError {
        status: StatusCode::BAD_REQUEST,
        code: "bad_request",
        reason: r.body_text(),
    })?;
    Ok(Json(st.enforcer.container(&reference).await?))
}

async fn post_lease(
    State(st): State<Arc<AppState>>,
    ApiJson(req): ApiJson<LeaseRequest>,
) -> Result<Json<LeaseStatus>, ApiError> {
    let timeout = req.timeout_ms.map(Duration::from_millis);
    Ok(Json(st.enforcer.renew_lease(
        Instant::now(),
        &req.controller,
        timeout,
    )?))
}

async fn get_lease(State(st): State<Arc<AppState>>) -> Json<LeaseStatus> {
    Json(st.enforcer.lease_status(Instant::now()))
}

async fn events(
    State(st): State<Arc<AppState>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    sse::broadcast_stream(st.enforcer.subscribe(), st.shutdown.clone())
}

impl StreamEvent for AgentEvent {
    fn event_name(&self) -> &'static str {
        self.name()
    }
    fn lagged(missed: u64) -> Self {
        AgentEvent::Lagged { missed }
    }
    const ENCODE_FAILURE: &'static str = "error";
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        reason: "this route does not take that method; the Allow header lists those it does".into(),
    }
}

async fn not_found() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        reason: "no such route; the API lives under /v1 (see docs/agent.md)".into(),
    }
}

pub fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    let protected = Router::new()
        .route("/v1/actions", post(post_action))
        .route("/v1/containers", get(list_containers))
        .route("/v1/containers/{container}", get(get_container))
        .route("/v1/events", get(events))
        .route("/v1/lease", get(get_lease).post(post_lease))
        .route("/metrics", get(metrics_text))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(health))
        .merge(protected)
        // After the routes: it applies to those already registered.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::enforcer::{EnforcerSettings, Runtime};
    use crate::agent::metrics::Metrics;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    fn app() -> Router {
        let enforcer = Enforcer::new(
            Runtime::DryRun,
            EnforcerSettings::default(),
            None,
            Arc::new(Metrics::new()),
            Instant::now(),
        );
        router(
            Arc::new(AppState {
                enforcer: Arc::new(enforcer),
                token: b"s3cret".to_vec(),
                shutdown: CancellationToken::new(),
            }),
            1024,
        )
    }

    async fn call(
        app: &Router,
        method: &str,
        uri: &str,
        token: Option<&str>,
        body: &str,
    ) -> (StatusCode, serde_json::Value) {
        let mut b = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        if !body.is_empty() {
            b = b.header("content-type", "application/json");
        }
        let resp = app
            .clone()
            .oneshot(b.body(Body::from(body.to_string())).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    #[tokio::test]
    async fn token_is_required_except_for_healthz() {
        let app = app();
        assert_eq!(
            call(&app, "GET", "/healthz", None, "").await.0,
            StatusCode::OK
        );
        let (s, body) = call(&app, "GET", "/v1/containers", None, "").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"], "unauthorized");
        assert_eq!(
            call(&app, "GET", "/v1/containers", Some("s3cre"), "")
                .await
                .0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            call(&app, "GET", "/metrics", Some("wrong!"), "").await.0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            call(&app, "GET", "/v1/containers", Some("s3cret"), "")
                .await
                .0,
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn bodies_are_checked_with_reasons() {
        let app = app();
        let big = format!("{{\"container\":\"{}\"}}", "x".repeat(4096));
        let (s, body) = call(&app, "POST", "/v1/actions", Some("s3cret"), &big).await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
        assert_eq!(body["error"], "payload_too_large");
        let (s, body) = call(&app, "POST", "/v1/actions", Some("s3cret"), "{not json").await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(body["reason"].as_str().unwrap().contains("parse"), "{body}");
        let (s, body) = call(
            &app,
            "POST",
            "/v1/actions",
            Some("s3cret"),
            r#"{"container":"c","action":"explode"}"#,
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(
            body["reason"].as_str().unwrap().contains("explode"),
            "{body}"
        );
        let (s, body) = call(
            &app,
            "POST",
            "/v1/actions",
            Some("s3cret"),
            r#"{"container":"nginx","action":"kill"}"#,
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"], "not_yarn");
        let (s, _) = call(
            &app,
            "GET",
            "/v1/containers/container_1700000000000_0001_01_000009",
            Some("s3cret"),
            "",
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (s, body) = call(&app, "GET", "/nowhere", Some("s3cret"), "").await;
        assert_eq!(
            (s, body["error"].as_str()),
            (StatusCode::NOT_FOUND, Some("not_found"))
        );
    }

    #[tokio::test]
    async fn lease_and_metrics_routes() {
        let app = app();
        let (s, body) = call(
            &app,
            "POST",
            "/v1/lease",
            Some("s3cret"),
            r#"{"controller":"c1","timeoutMs":5000}"#,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_eq!(body["holder"], "c1");
        assert_eq!(body["live"], true);
        let (s, body) = call(
            &app,
            "POST",
            "/v1/lease",
            Some("s3cret"),
            r#"{"controller":"c2"}"#,
        )
        .await;
        assert_eq!(
            (s, body["error"].as_str()),
            (StatusCode::CONFLICT, Some("lease"))
        );
        let (s, body) = call(
            &app,
            "POST",
            "/v1/lease",
            Some("s3cret"),
            r#"{"controller":"c1","timeoutMs":1}"#,
        )
        .await;
        assert_eq!(
            (s, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("bad_request"))
        );
        let resp = app
            .clone()
            .oneshot(
                Request::builder()
                    .uri("/metrics")
                    .header("authorization", "Bearer s3cret")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let text = String::from_utf8(
            resp.into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec(),
        )
        .unwrap();
        assert!(
            text.contains("preemptor_agent_lease_renewals_total 1"),
            "{text}"
        );
        assert!(
            text.contains("preemptor_agent_http_requests_total{status=\"409\"} 1"),
            "{text}"
        );
    }
}
