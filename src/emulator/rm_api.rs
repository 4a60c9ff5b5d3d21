//! The ResourceManager web service (`/ws/v1/cluster/...`).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};

use crate::yarn::dto::{
    AppQueueInfo, AppResponse, AppStateInfo, ApplicationSubmissionContext, FinalApplicationStatus,
    NewApplication, NodeLabelsInfo, NodeResponse, NodeToLabelsEntryList, ResourceInfoResponse,
    ResourceOptionInfo, YarnApplicationState,
};

use super::rest::{Format, Reply, RestError, empty, json_body, query_pairs};
use super::runtime::{ContainerSignal, RuntimeError};
use super::state::{KillOutcome, RmError};
use super::timeouts::{
    AppTimeoutInfo, AppTimeoutList, AppTimeoutResponse, AppTimeoutsResponse, LIFETIME,
    parse_iso8601,
};
use super::views::AppsFilter;
use super::{Cluster, now_ms};

type Shared = State<Arc<Cluster>>;
type RestResult = Result<Response, RestError>;

pub(crate) fn router(cluster: Arc<Cluster>) -> Router {
    let c = "/ws/v1/cluster";
    Router::new()
        .route("/cluster", get(ui))
        .route(c, get(info))
        .route(&format!("{c}/info"), get(info))
        .route(&format!("{c}/metrics"), get(metrics))
        .route(&format!("{c}/scheduler"), get(scheduler))
        .route(&format!("{c}/apps"), get(apps).post(submit))
        .route(&format!("{c}/apps/new-application"), post(new_application))
        .route(&format!("{c}/apps/{{appid}}"), get(app))
        .route(&format!("{c}/apps/{{appid}}/appattempts"), get(attempts))
        .route(
            &format!("{c}/apps/{{appid}}/appattempts/{{attempt}}/containers"),
            get(attempt_containers),
        )
        .route(
            &format!("{c}/apps/{{appid}}/appattempts/{{attempt}}/containers/{{cid}}"),
            get(attempt_container),
        )
        .route(
            &format!("{c}/apps/{{appid}}/state"),
            get(app_state).put(put_app_state),
        )
        .route(&format!("{c}/apps/{{appid}}/queue"), get(app_queue))
        .route(&format!("{c}/apps/{{appid}}/timeouts"), get(app_timeouts))
        .route(
            &format!("{c}/apps/{{appid}}/timeouts/{{type}}"),
            get(app_timeout),
        )
        .route(
            &format!("{c}/apps/{{appid}}/timeout"),
            axum::routing::put(put_app_timeout),
        )
        .route(&format!("{c}/nodes"), get(nodes))
        .route(&format!("{c}/nodes/{{nodeid}}"), get(node))
        .route(
            &format!("{c}/nodes/{{nodeid}}/resource"),
            post(node_resource),
        )
        .route(
            &format!("{c}/nodes/{{nodeid}}/get-labels"),
            get(node_labels),
        )
        .route(
            &format!("{c}/containers/{{cid}}/signal/{{command}}"),
            post(signal),
        )
        .route(&format!("{c}/get-node-labels"), get(cluster_labels))
        .route(&format!("{c}/add-node-labels"), post(add_labels))
        .route(&format!("{c}/remove-node-labels"), post(remove_labels))
        .route(&format!("{c}/get-node-to-labels"), get(node_to_labels))
        .route(
            &format!("{c}/replace-node-to-labels"),
            post(replace_node_labels),
        )
        .fallback(fallback)
        .with_state(cluster)
}

fn err(format: Format) -> impl Fn(RmError) -> RestError {
    move |e| RestError::from(e).into_format(format)
}

async fn fallback(headers: HeaderMap, uri: axum::http::Uri) -> Response {
    RestError::not_found(format!("no resource at {}", uri.path()))
        .into_format(Format::from_headers(&headers))
        .into_response()
}

async fn ui(State(c): Shared) -> Html<String> {
    let (apps, nodes, runtime) = {
        let s = c.lock();
        (s.apps.len(), s.nodes.len(), s.identity.runtime)
    };
    Html(format!(
        "<!doctype html><html><head><title>Preemptor YARN emulator</title></head><body>\
         <h1>Preemptor YARN emulator</h1><p>{nodes} NodeManagers, {apps} applications, \
         {runtime} container runtime.</p><p>REST: <a href=\"/ws/v1/cluster/info\">/ws/v1/cluster/info</a>, \
         <a href=\"/ws/v1/cluster/apps\">/ws/v1/cluster/apps</a>, \
         <a href=\"/ws/v1/cluster/scheduler\">/ws/v1/cluster/scheduler</a></p></body></html>"
    ))
}

async fn info(State(c): Shared, headers: HeaderMap) -> Response {
    let body = c.lock().cluster_info();
    Reply::ok(Format::from_headers(&headers), "clusterInfo", &body).into_response()
}

async fn metrics(State(c): Shared, headers: HeaderMap) -> Response {
    let body = c.lock().cluster_metrics();
    Reply::ok(Format::from_headers(&headers), "clusterMetrics", &body).into_response()
}

async fn scheduler(State(c): Shared, headers: HeaderMap) -> Response {
    let body = c.lock().scheduler_info();
    Reply::ok(Format::from_headers(&headers), "scheduler", &body).into_response()
}

fn parse_u64(key: &str, v: &str) -> Result<u64, RestError> {
    v.trim().parse().map_err(|_| {
        RestError::bad_request(format!("{key} must be a non-negative integer, got {v:?}"))
    })
}

fn list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// The `/apps` query, as RMWebServices reads it.
fn apps_filter(raw: Option<&str>) -> Result<AppsFilter, RestError> {
    let mut f = AppsFilter::default();
    for (k, v) in query_pairs(raw) {
        match k.as_str() {
            "state" | "states" => {
                let parsed: Result<Vec<YarnApplicationState>, String> =
                    list(&v).map(str::parse).collect();
                let parsed = parsed.map_err(RestError::bad_request)?;
                f.states.get_or_insert_with(Vec::new).extend(parsed);
            }
            "finalStatus" => {
                let s: FinalApplicationStatus = serde_json::from_value(serde_json::Value::String(
                    v.trim().to_ascii_uppercase(),
                ))
                .map_err(|_| RestError::bad_request(format!("Invalid final status {v}")))?;
                f.final_status = Some(s);
            }
            "user" => f.user = Some(v),
            "queue" => f.queue = Some(v),
            "limit" => {
                let n = parse_u64(&k, &v)?;
                if n == 0 {
                    return Err(RestError::bad_request("limit value must be greater then 0"));
                }
                f.limit = Some(usize::try_from(n).unwrap_or(usize::MAX));
            }
            "startedTimeBegin" => f.started_begin = Some(parse_u64(&k, &v)?),
            "startedTimeEnd" => f.started_end = Some(parse_u64(&k, &v)?),
            "finishedTimeBegin" => f.finished_begin = Some(parse_u64(&k, &v)?),
            "finishedTimeEnd" => f.finished_end = Some(parse_u64(&k, &v)?),
            "applicationTypes" => f.application_types.extend(list(&v).map(String::from)),
            "applicationTags" => f
                .application_tags
                .extend(list(&v).map(|t| t.to_ascii_lowercase())),
            "name" => f.name = Some(v),
            "deSelects" => {
                for d in list(&v) {
                    match d {
                        "resourceRequests" => f.deselect_resource_requests = true,
                        "appNodeLabelExpression"
                        | "amNodeLabelExpression"
                        | "resourceInfo"
                        | "timeouts" => {}
                        other => {
                            return Err(RestError::bad_request(format!(
                                "Invalid deSelects string {other}"
                            )));
                        }
                    }
                }
            }
            // user.name (simple auth) and anything YARN ignores.
            _ => {}
        }
    }
    Ok(f)
}

fn user_of(raw: Option<&str>) -> String {
    query_pairs(raw)
        .into_iter()
        .find(|(k, _)| k == "user.name")
        .map(|(_, v)| v)
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "dr.who".into())
}

async fn apps(State(c): Shared, headers: HeaderMap, RawQuery(q): RawQuery) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let filter = apps_filter(q.as_deref()).map_err(|e| e.into_format(fmt))?;
    let body = c.lock().apps_info(&filter, now_ms());
    Ok(Reply::ok(fmt, "apps", &body).into_response())
}

async fn new_application(State(c): Shared, headers: HeaderMap) -> Response {
    let body = {
        let mut s = c.lock();
        NewApplication {
            application_id: s.new_application().to_string(),
            maximum_resource_capability: s.identity.max_allocation.into(),
        }
    };
    Reply::ok(Format::from_headers(&headers), "NewApplication", &body).into_response()
}

async fn submit(
    State(c): Shared,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let ctx: ApplicationSubmissionContext =
        json_body(&headers, &body).map_err(|e| e.into_format(fmt))?;
    let user = user_of(q.as_deref());
    let (id, rm) = {
        let mut s = c.lock();
        let id = s.submit(&ctx, &user, now_ms()).map_err(err(fmt))?;
        (id, s.identity.rm_address.clone())
    };
    tracing::info!(app = %id, user, queue = %ctx.queue, name = %ctx.application_name, "application submitted");
    Ok(empty(
        StatusCode::ACCEPTED,
        Some(format!("http://{rm}/ws/v1/cluster/apps/{id}")),
    ))
}

async fn app(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let s = c.lock();
    let a = s.app_or_err(&id).map_err(err(fmt))?;
    let body = AppResponse {
        app: s.app_info(a, now_ms(), true),
    };
    Ok(Reply::ok(fmt, "app", &body).into_response())
}

async fn attempts(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let s = c.lock();
    let a = s.app_or_err(&id).map_err(err(fmt))?;
    let body = s.attempts_info(a);
    Ok(Reply::ok(fmt, "appAttempts", &body).into_response())
}

async fn attempt_containers(
    State(c): Shared,
    headers: HeaderMap,
    Path((id, attempt)): Path<(String, String)>,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let s = c.lock();
    let a = s.app_or_err(&id).map_err(err(fmt))?;
    let body = s
        .attempt_containers(a, &attempt, now_ms())
        .map_err(err(fmt))?;
    Ok(Reply::ok(fmt, "containers", &body).into_response())
}

async fn attempt_container(
    State(c): Shared,
    headers: HeaderMap,
    Path((id, attempt, cid)): Path<(String, String, String)>,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let s = c.lock();
    let a = s.app_or_err(&id).map_err(err(fmt))?;
    let body = s
        .attempt_container(a, &attempt, &cid, now_ms())
        .map_err(err(fmt))?;
    Ok(Reply::ok(fmt, "container", &body).into_response())
}

async fn app_state(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let state = c.lock().app_or_err(&id).map_err(err(fmt))?.state;
    Ok(Reply::ok(
        fmt,
        "appstate",
        &AppStateInfo {
            state: state.to_string(),
        },
    )
    .into_response())
}

/// YARN's kill: 202 with the current state while containers are being stopped, 200 with
/// KILLED (or the final state it already had) once done.
async fn put_app_state(
    State(c): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let target: AppStateInfo = json_body(&headers, &body).map_err(|e| e.into_format(fmt))?;
    let target_state: YarnApplicationState = target
        .state
        .parse()
        .map_err(|e: String| RestError::bad_request(e).into_format(fmt))?;
    let (outcome, rm) = {
        let mut s = c.lock();
        let current = s.app_or_err(&id).map_err(err(fmt))?.state;
        if current == target_state {
            return Ok(Reply::ok(
                fmt,
                "appstate",
                &AppStateInfo {
                    state: current.to_string(),
                },
            )
            .into_response());
        }
        if target_state != YarnApplicationState::Killed {
            return Err(
                RestError::bad_request("Only 'KILLED' is allowed as a target state.")
                    .into_format(fmt),
            );
        }
        (
            s.kill_app(&id, now_ms()).map_err(err(fmt))?,
            s.identity.rm_address.clone(),
        )
    };
    match outcome {
        KillOutcome::Done(state) => Ok(Reply::ok(
            fmt,
            "appstate",
            &AppStateInfo {
                state: state.to_string(),
            },
        )
        .into_response()),
        KillOutcome::Stopping {
            current,
            containers,
        } => {
            tracing::info!(app = %id, containers = containers.len(), "killing application");
            c.stop(containers, ContainerSignal::ForcefulShutdown);
            Ok(Reply::ok(
                fmt,
                "appstate",
                &AppStateInfo {
                    state: current.to_string(),
                },
            )
            .with_status(StatusCode::ACCEPTED)
            .with_location(format!("http://{rm}/ws/v1/cluster/apps/{id}"))
            .into_response())
        }
    }
}

async fn app_queue(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let queue = c
        .lock()
        .app_or_err(&id)
        .map_err(err(fmt))?
        .queue_name
        .clone();
    Ok(Reply::ok(fmt, "appqueue", &AppQueueInfo { queue }).into_response())
}

fn lifetime_of(c: &Cluster, id: &str, fmt: Format) -> Result<AppTimeoutInfo, RestError> {
    let s = c.lock();
    let a = s.app_or_err(id).map_err(err(fmt))?;
    Ok(AppTimeoutInfo::lifetime(
        a.lifetime_expiry_ms,
        a.is_final(),
        now_ms(),
    ))
}

fn check_timeout_type(t: &str, fmt: Format) -> Result<(), RestError> {
    if t == LIFETIME {
        return Ok(());
    }
    Err(RestError::bad_request(format!(
        "No enum constant org.apache.hadoop.yarn.api.records.ApplicationTimeoutType.{t}"
    ))
    .into_format(fmt))
}

async fn app_timeouts(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let body = AppTimeoutsResponse {
        timeouts: AppTimeoutList {
            timeout: vec![lifetime_of(&c, &id, fmt)?],
        },
    };
    Ok(Reply::ok(fmt, "timeouts", &body).into_response())
}

async fn app_timeout(
    State(c): Shared,
    headers: HeaderMap,
    Path((id, kind)): Path<(String, String)>,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    check_timeout_type(&kind, fmt)?;
    let body = AppTimeoutResponse {
        timeout: lifetime_of(&c, &id, fmt)?,
    };
    Ok(Reply::ok(fmt, "timeout", &body).into_response())
}

/// `{"timeout":{"type":"LIFETIME","expiryTime":"2016-12-05T22:51:00.104+0530"}}`: the
/// application is killed at that time (RMAppLifetimeMonitor).
async fn put_app_timeout(
    State(c): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let asked: AppTimeoutResponse = json_body(&headers, &body).map_err(|e| e.into_format(fmt))?;
    let t = asked.timeout;
    if t.timeout_type.is_empty() || t.expiry_time.is_empty() {
        return Err(RestError::bad_request("Timeout type or ExpiryTime is null.").into_format(fmt));
    }
    check_timeout_type(&t.timeout_type, fmt)?;
    let expiry =
        parse_iso8601(&t.expiry_time).map_err(|e| RestError::bad_request(e).into_format(fmt))?;
    c.lock()
        .update_lifetime(&id, expiry, now_ms())
        .map_err(err(fmt))?;
    tracing::info!(app = %id, expiry = %t.expiry_time, "application lifetime set");
    let body = AppTimeoutResponse {
        timeout: lifetime_of(&c, &id, fmt)?,
    };
    Ok(Reply::ok(fmt, "timeout", &body).into_response())
}

async fn nodes(State(c): Shared, headers: HeaderMap, RawQuery(q): RawQuery) -> Response {
    let states: Option<Vec<String>> = query_pairs(q.as_deref())
        .into_iter()
        .find(|(k, _)| k == "states")
        .map(|(_, v)| list(&v).map(String::from).collect());
    let body = c.lock().nodes_info(states.as_deref());
    Reply::ok(Format::from_headers(&headers), "nodes", &body).into_response()
}

async fn node(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let s = c.lock();
    let i = s.node_index_or_err(&id).map_err(err(fmt))?;
    Ok(Reply::ok(
        fmt,
        "node",
        &NodeResponse {
            node: s.node_info(i),
        },
    )
    .into_response())
}

async fn node_resource(
    State(c): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let opt: ResourceOptionInfo = json_body(&headers, &body).map_err(|e| e.into_format(fmt))?;
    if opt.resource.memory < 0 || opt.resource.vcores < 0 {
        return Err(RestError::bad_request(format!(
            "resource must not be negative, got memory {} and vCores {}",
            opt.resource.memory, opt.resource.vcores
        ))
        .into_format(fmt));
    }
    let total = c
        .lock()
        .update_node_resource(&id, opt.resource.to_resource())
        .map_err(err(fmt))?;
    tracing::info!(node = %id, total = %total, "node resource updated");
    Ok(Reply::ok(
        fmt,
        "resourceInfo",
        &ResourceInfoResponse {
            resource_info: total.into(),
        },
    )
    .into_response())
}

async fn node_labels(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let s = c.lock();
    let i = s.node_index_or_err(&id).map_err(err(fmt))?;
    Ok(Reply::ok(fmt, "nodeLabelsInfo", &s.labels_of_node(i)).into_response())
}

async fn signal(
    State(c): Shared,
    headers: HeaderMap,
    Path((cid, command)): Path<(String, String)>,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let sig: ContainerSignal = command
        .parse()
        .map_err(|e: String| RestError::bad_request(e).into_format(fmt))?;
    let (id, _) = c.lock().container_for_signal(&cid).map_err(err(fmt))?;
    if id.is_am() {
        return Err(RestError::bad_request(format!(
            "{cid} is an ApplicationMaster container; the emulator runs AMs in-process and cannot signal them"
        ))
        .into_format(fmt));
    }
    match c.signal(id, sig).await {
        Ok(()) => {
            tracing::info!(container = %id, signal = sig.unix_name(), "container signalled");
            Ok(empty(StatusCode::OK, None))
        }
        Err(RuntimeError::NotRunning(_)) => Err(RestError::not_found(format!(
            "container {cid} is not running yet or has exited"
        ))
        .into_format(fmt)),
        Err(e) => Err(RestError::internal(e.to_string()).into_format(fmt)),
    }
}

async fn cluster_labels(State(c): Shared, headers: HeaderMap) -> Response {
    let body = c.lock().node_labels_info();
    Reply::ok(Format::from_headers(&headers), "nodeLabelsInfo", &body).into_response()
}

async fn add_labels(State(c): Shared, headers: HeaderMap, body: Bytes) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let labels: NodeLabelsInfo = json_body(&headers, &body).map_err(|e| e.into_format(fmt))?;
    let labels: Vec<(String, bool)> = labels
        .node_label_info
        .into_iter()
        .map(|l| (l.name.trim().to_string(), l.exclusivity))
        .collect();
    c.lock().add_labels(&labels).map_err(err(fmt))?;
    Ok(empty(StatusCode::OK, None))
}

/// `?labels=a&labels=b`, as the RM's `@QueryParam("labels") Set<String>`.
async fn remove_labels(State(c): Shared, headers: HeaderMap, RawQuery(q): RawQuery) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let labels: Vec<String> = query_pairs(q.as_deref())
        .into_iter()
        .filter(|(k, _)| k == "labels")
        .map(|(_, v)| v.trim().to_string())
        .collect();
    c.lock().remove_labels(&labels).map_err(err(fmt))?;
    Ok(empty(StatusCode::OK, None))
}

async fn node_to_labels(State(c): Shared, headers: HeaderMap) -> Response {
    let body = c.lock().node_to_labels_info();
    Reply::ok(Format::from_headers(&headers), "nodeToLabelsInfo", &body).into_response()
}

async fn replace_node_labels(State(c): Shared, headers: HeaderMap, body: Bytes) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let list: NodeToLabelsEntryList = json_body(&headers, &body).map_err(|e| e.into_format(fmt))?;
    let mapping: Vec<(String, Vec<String>)> = list
        .node_to_labels
        .into_iter()
        .map(|e| (e.node_id, e.labels))
        .collect();
    c.lock().replace_node_labels(&mapping).map_err(err(fmt))?;
    Ok(empty(StatusCode::OK, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_filter_reads_yarns_parameters() {
        let f = apps_filter(Some(
            "states=running,ACCEPTED&queue=long&limit=5&applicationTags=Preemptor.Class%3DShort&deSelects=resourceRequests&user.name=bob",
        ))
        .unwrap();
        assert_eq!(
            f.states,
            Some(vec![
                YarnApplicationState::Running,
                YarnApplicationState::Accepted
            ])
        );
        assert_eq!(f.queue.as_deref(), Some("long"));
        assert_eq!(f.limit, Some(5));
        assert_eq!(f.application_tags, vec!["preemptor.class=short"]);
        assert!(f.deselect_resource_requests);
        for bad in [
            "states=BOGUS",
            "limit=0",
            "limit=x",
            "deSelects=everything",
            "finalStatus=MAYBE",
        ] {
            let e = apps_filter(Some(bad)).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}");
        }
        assert_eq!(user_of(Some("user.name=alice")), "alice");
        assert_eq!(user_of(None), "dr.who");
    }
}
