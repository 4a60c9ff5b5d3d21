//! A NodeManager's web service (`/ws/v1/node/...`), one per emulated node.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::yarn::dto::NmAppInfo;

use super::rest::{Format, Reply, RestError};
use super::{Cluster, now_ms};

#[derive(Clone)]
struct Node {
    cluster: Arc<Cluster>,
    index: usize,
}

type RestResult = Result<Response, RestError>;

pub(crate) fn router(cluster: Arc<Cluster>, index: usize) -> Router {
    Router::new()
        .route("/ws/v1/node", get(info))
        .route("/ws/v1/node/info", get(info))
        .route("/ws/v1/node/apps", get(apps))
        .route("/ws/v1/node/apps/{appid}", get(app))
        .route("/ws/v1/node/containers", get(containers))
        .route("/ws/v1/node/containers/{cid}", get(container))
        .fallback(fallback)
        .with_state(Node { cluster, index })
}

async fn fallback(headers: HeaderMap, uri: Uri) -> Response {
    RestError::not_found(format!("no resource at {}", uri.path()))
        .into_format(Format::from_headers(&headers))
        .into_response()
}

async fn info(State(n): State<Node>, headers: HeaderMap) -> Response {
    let body = n.cluster.lock().nm_node_info(n.index, now_ms());
    Reply::ok(Format::from_headers(&headers), "nodeInfo", &body).into_response()
}

async fn apps(State(n): State<Node>, headers: HeaderMap) -> Response {
    let body = n.cluster.lock().nm_apps(n.index, now_ms());
    Reply::ok(Format::from_headers(&headers), "apps", &body).into_response()
}

#[derive(serde::Serialize)]
struct NmAppResponse {
    app: NmAppInfo,
}

async fn app(State(n): State<Node>, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let body = n.cluster.lock().nm_apps(n.index, now_ms());
    let app = body
        .into_list()
        .into_iter()
        .find(|a| a.id == id)
        .ok_or_else(|| {
            RestError::not_found(format!("app with id {id} not found")).into_format(fmt)
        })?;
    Ok(Reply::ok(fmt, "app", &NmAppResponse { app }).into_response())
}

async fn containers(State(n): State<Node>, headers: HeaderMap) -> Response {
    let body = n.cluster.lock().nm_containers(n.index, now_ms());
    Reply::ok(Format::from_headers(&headers), "containers", &body).into_response()
}

async fn container(
    State(n): State<Node>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let body = n
        .cluster
        .lock()
        .nm_container(n.index, &id, now_ms())
        .map_err(|e| RestError::from(e).into_format(fmt))?;
    Ok(Reply::ok(fmt, "container", &body).into_response())
}
