//! A NodeManager's web service (`/ws/v1/node/...`): one per in-process emulated node, and
//! the one of a `preemptor nodemanager` process.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::yarn::dto::{
    NmAppInfo, NmAppsResponse, NmContainerResponse, NmContainersResponse, NmNodeInfoResponse,
};

use super::rest::{Format, Reply, RestError};
use super::state::RmError;
use super::{Cluster, now_ms};

/// Where a NodeManager's pages come from: the RM's state (in-process nodes) or a
/// NodeManager process's own container table.
pub(crate) trait NodeSource: Send + Sync + 'static {
    fn node_info(&self, now: u64) -> NmNodeInfoResponse;
    fn apps(&self, now: u64) -> NmAppsResponse;
    fn containers(&self, now: u64) -> NmContainersResponse;
    fn container(&self, id: &str, now: u64) -> Result<NmContainerResponse, RmError>;
}

/// Node `index` of the in-process cluster.
pub(crate) struct InProcessNode {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) index: usize,
}

impl NodeSource for InProcessNode {
    fn node_info(&self, now: u64) -> NmNodeInfoResponse {
        self.cluster.lock().nm_node_info(self.index, now)
    }
    fn apps(&self, now: u64) -> NmAppsResponse {
        self.cluster.lock().nm_apps(self.index, now)
    }
    fn containers(&self, now: u64) -> NmContainersResponse {
        self.cluster.lock().nm_containers(self.index, now)
    }
    fn container(&self, id: &str, now: u64) -> Result<NmContainerResponse, RmError> {
        self.cluster.lock().nm_container(self.index, id, now)
    }
}

type Node = Arc<dyn NodeSource>;

type RestResult = Result<Response, RestError>;

pub(crate) fn router(node: Node) -> Router {
    Router::new()
        .route("/ws/v1/node", get(info))
        .route("/ws/v1/node/info", get(info))
        .route("/ws/v1/node/apps", get(apps))
        .route("/ws/v1/node/apps/{appid}", get(app))
        .route("/ws/v1/node/containers", get(containers))
        .route("/ws/v1/node/containers/{cid}", get(container))
        .fallback(fallback)
        .with_state(node)
}

async fn fallback(headers: HeaderMap, uri: Uri) -> Response {
    RestError::not_found(format!("no resource at {}", uri.path()))
        .into_format(Format::from_headers(&headers))
        .into_response()
}

async fn info(State(n): State<Node>, headers: HeaderMap) -> Response {
    let body = n.node_info(now_ms());
    Reply::ok(Format::from_headers(&headers), "nodeInfo", &body).into_response()
}

async fn apps(State(n): State<Node>, headers: HeaderMap) -> Response {
    let body = n.apps(now_ms());
    Reply::ok(Format::from_headers(&headers), "apps", &body).into_response()
}

#[derive(serde::Serialize)]
struct NmAppResponse {
    app: NmAppInfo,
}

async fn app(State(n): State<Node>, headers: HeaderMap, Path(id): Path<String>) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let app = n
        .apps(now_ms())
        .into_list()
        .into_iter()
        .find(|a| a.id == id)
        .ok_or_else(|| {
            RestError::not_found(format!("app with id {id} not found")).into_format(fmt)
        })?;
    Ok(Reply::ok(fmt, "app", &NmAppResponse { app }).into_response())
}

async fn containers(State(n): State<Node>, headers: HeaderMap) -> Response {
    let body = n.containers(now_ms());
    Reply::ok(Format::from_headers(&headers), "containers", &body).into_response()
}

async fn container(
    State(n): State<Node>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> RestResult {
    let fmt = Format::from_headers(&headers);
    let body = n
        .container(&id, now_ms())
        .map_err(|e| RestError::from(e).into_format(fmt))?;
    Ok(Reply::ok(fmt, "container", &body).into_response())
}
