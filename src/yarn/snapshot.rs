//! One observation of the cluster per controller tick: [`RmClient::snapshot`].
//!
//! Requests per snapshot: `/info`, then `/scheduler`, `/nodes` and
//! `/apps?states=RUNNING,ACCEPTED` at once, then one `/containers` call per running
//! application, all concurrently within the client's in-flight bound. The application
//! -> current attempt map is kept across snapshots: an attempt's number is read from the
//! AM container id in `amContainerLogs`, so `/appattempts` is asked only for a new
//! application or a new attempt (an AM restart), and a tick costs O(apps) calls.

use futures_util::StreamExt;
use serde::Serialize;

use super::client::{APPS_PATH, AppsQuery, NODES_PATH, RmClient, containers_path};
use super::dto::{
    AppAttemptInfo, AppInfo, ClusterInfo, ContainerInfo, NodeInfo, QueueInfo, YarnApplicationState,
};
use super::error::Error;
use super::tolerant::{Recovery, SchemaWarning};
use crate::cluster::{ApplicationAttemptId, ApplicationId, ContainerId};

/// Container listings asked of the RM at once; its web server has a small thread pool.
const RM_PARALLEL_REQUESTS: usize = 16;

/// What the ResourceManager reported in one tick.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RmSnapshot {
    /// The RM address that answered, `http://host:port`.
    pub active_rm: String,
    /// `clusterInfo`: the cluster timestamp (`id`), `haState`, versions.
    pub cluster: ClusterInfo,
    /// `schedulerInfo`: the root of the capacity scheduler's queue tree.
    pub scheduler: QueueInfo,
    /// RUNNING and ACCEPTED applications, with their outstanding resource requests.
    /// Every `id` parses as an [`ApplicationId`].
    pub apps: Vec<AppInfo>,
    /// The containers of the RUNNING applications' current attempts (and of ACCEPTED
    /// ones whose AM container is allocated) that hold resources (`containerState`
    /// NEW, i.e. allocated, or RUNNING). Every
    /// `containerId` parses as a [`ContainerId`].
    pub containers: Vec<ContainerInfo>,
    /// Every node the RM knows, with a non-empty `id`.
    pub nodes: Vec<NodeInfo>,
    /// Schema surprises met while reading this snapshot.
    pub warnings: Vec<SchemaWarning>,
}

impl RmClient {
    /// Observes the cluster. Fails only if the RM cannot be reached or answers an error;
    /// a field or item it cannot read becomes a warning instead.
    pub async fn snapshot(&self) -> Result<RmSnapshot, Error> {
        let cluster = self.cluster_info().await?;
        let mut warnings = cluster.warnings;
        let query = AppsQuery::states(&[
            YarnApplicationState::Running,
            YarnApplicationState::Accepted,
        ]);
        let (scheduler, nodes, apps) =
            tokio::try_join!(self.scheduler(), self.nodes(), self.apps(&query))?;
        warnings.extend(scheduler.warnings);
        warnings.extend(nodes.warnings);
        warnings.extend(apps.warnings);

        let apps = keep_valid(
            apps.value,
            &format!("GET {APPS_PATH}"),
            "apps.app",
            &mut warnings,
            |a| {
                a.id.parse::<ApplicationId>()
                    .map(|_| ())
                    .map_err(|e| ("id", e.to_string()))
            },
        );
        // An ACCEPTED application whose AM container is allocated (the RM names its
        // logs) holds that container until the AM registers: on a busy node a Spark AM
        // takes tens of seconds, and unseen it would look like free room.
        let running: Vec<(ApplicationId, Option<u32>)> = apps
            .iter()
            .filter(|a| {
                a.state == YarnApplicationState::Running
                    || (a.state == YarnApplicationState::Accepted
                        && attempt_of_am_logs(&a.am_container_logs).is_some())
            })
            .filter_map(|a| Some((a.id.parse().ok()?, attempt_of_am_logs(&a.am_container_logs))))
            .collect();
        // The RM has no cluster-wide container listing: one request per application
        // holding containers, a bounded number at once.
        let calls: Vec<_> = running
            .iter()
            .map(|&(app, hint)| self.current_containers(app, hint))
            .collect();
        let fetched: Vec<_> = futures_util::stream::iter(calls)
            .buffered(RM_PARALLEL_REQUESTS)
            .collect()
            .await;
        self.forget_attempts_except(&running);
        let mut containers = Vec::new();
        for result in fetched {
            let (list, w) = result?;
            warnings.extend(w);
            containers.extend(list);
        }

        let nodes = keep_valid(
            nodes.value,
            &format!("GET {NODES_PATH}"),
            "nodes.node",
            &mut warnings,
            |n| {
                if n.id.trim().is_empty() {
                    Err(("id", "no node id".to_string()))
                } else {
                    Ok(())
                }
            },
        );
        let active_rm = self.current_rm().unwrap_or_default();
        Ok(RmSnapshot {
            active_rm,
            cluster: cluster.value,
            scheduler: scheduler.value,
            apps,
            containers,
            nodes,
            warnings,
        })
    }

    /// The resource-holding containers of `app`'s current attempt, with the warnings
    /// met reading them; empty if the application is gone.
    async fn current_containers(
        &self,
        app: ApplicationId,
        hint: Option<u32>,
    ) -> Result<(Vec<ContainerInfo>, Vec<SchemaWarning>), Error> {
        let mut warnings = Vec::new();
        let cached = self.attempt_cache().get(&app).copied();
        let mut attempt = match (cached, hint) {
            (Some(a), Some(h)) if a.attempt == h => Some(a),
            (Some(a), None) => Some(a),
            _ => None,
        };
        for round in 0..2 {
            let current = match attempt {
                Some(a) => a,
                None => match self.current_attempt(app, &mut warnings).await? {
                    Some(a) => a,
                    None => return Ok((Vec::new(), warnings)),
                },
            };
            match self.attempt_containers(&current).await {
                Ok(list) => {
                    self.attempt_cache().insert(app, current);
                    warnings.extend(list.warnings);
                    let source = format!("GET {}", containers_path(&current));
                    let valid = keep_valid(
                        list.value,
                        &source,
                        "containers.container",
                        &mut warnings,
                        |c| {
                            c.container_id
                                .parse::<ContainerId>()
                                .map(|_| ())
                                .map_err(|e| ("containerId", e.to_string()))
                        },
                    );
                    let held = valid
                        .into_iter()
                        .filter(|c| !c.container_state.eq_ignore_ascii_case("COMPLETE"))
                        .collect();
                    return Ok((held, warnings));
                }
                // A cached attempt may be gone (the RM restarted the AM): ask again.
                Err(e) if e.is_not_found() && round == 0 && attempt.is_some() => {
                    self.attempt_cache().remove(&app);
                    attempt = None;
                }
                // The application finished and left the RM since it was listed.
                Err(e) if e.is_not_found() => return Ok((Vec::new(), warnings)),
                Err(e) => return Err(e),
            }
        }
        Ok((Vec::new(), warnings))
    }

    /// The latest attempt of `app` from `/appattempts`, or `None` if the RM has none
    /// (or no longer knows the application).
    async fn current_attempt(
        &self,
        app: ApplicationId,
        warnings: &mut Vec<SchemaWarning>,
    ) -> Result<Option<ApplicationAttemptId>, Error> {
        let attempts = match self.app_attempts(&app).await {
            Ok(a) => a,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        warnings.extend(attempts.warnings);
        Ok(attempts
            .value
            .iter()
            .filter_map(|a| attempt_id(app, a))
            .max_by_key(|a| a.attempt))
    }

    fn forget_attempts_except(&self, running: &[(ApplicationId, Option<u32>)]) {
        let keep: std::collections::HashSet<ApplicationId> =
            running.iter().map(|(a, _)| *a).collect();
        self.attempt_cache().retain(|app, _| keep.contains(app));
    }
}

/// The attempt's id as the RM printed it (Hadoop 3), else built from its number (the
/// documented examples print only `"id": 1`).
fn attempt_id(app: ApplicationId, a: &AppAttemptInfo) -> Option<ApplicationAttemptId> {
    if let Ok(id) = a.app_attempt_id.trim().parse::<ApplicationAttemptId>()
        && id.application == app
    {
        return Some(id);
    }
    let n = u32::try_from(a.id).ok().filter(|&n| n > 0)?;
    Some(ApplicationAttemptId::new(app, n))
}

/// The attempt number in the AM container id of `amContainerLogs`
/// (`http://nm:8042/node/containerlogs/container_..._01_000001/user`).
fn attempt_of_am_logs(url: &str) -> Option<u32> {
    url.split('/')
        .find(|s| s.starts_with("container_"))
        .and_then(|s| s.parse::<ContainerId>().ok())
        .map(|c| c.attempt.attempt)
}

/// Drops the items `check` refuses (an id the rest of Preemptor cannot use), with a
/// warning naming the item by its position in the list as read.
fn keep_valid<T>(
    items: Vec<T>,
    source: &str,
    list: &str,
    warnings: &mut Vec<SchemaWarning>,
    check: impl Fn(&T) -> Result<(), (&'static str, String)>,
) -> Vec<T> {
    let mut kept = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match check(&item) {
            Ok(()) => kept.push(item),
            Err((field, message)) => warnings.push(SchemaWarning {
                source: source.to_string(),
                path: format!("{list}[{i}].{field}"),
                message,
                recovery: Recovery::ItemSkipped,
            }),
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attempt_number_is_read_from_the_am_container_logs_url() {
        assert_eq!(
            attempt_of_am_logs(
                "http://host.domain.com:8042/node/containerlogs/container_e05_1476912658570_0002_02_000001/user2"
            ),
            Some(2)
        );
        assert_eq!(attempt_of_am_logs(""), None);
        assert_eq!(
            attempt_of_am_logs("http://h:8042/node/containerlogs/x/u"),
            None
        );
    }

    #[test]
    fn attempt_ids_come_from_the_rm_or_from_the_attempt_number() {
        let app = ApplicationId::new(1326821518301, 5);
        let documented = AppAttemptInfo {
            id: 1,
            ..AppAttemptInfo::default()
        };
        assert_eq!(
            attempt_id(app, &documented).unwrap().to_string(),
            "appattempt_1326821518301_0005_000001"
        );
        let printed = AppAttemptInfo {
            id: 2,
            app_attempt_id: "appattempt_1326821518301_0005_000002".into(),
            ..AppAttemptInfo::default()
        };
        assert_eq!(attempt_id(app, &printed).unwrap().attempt, 2);
        let none = AppAttemptInfo::default();
        assert_eq!(attempt_id(app, &none), None);
    }
}
