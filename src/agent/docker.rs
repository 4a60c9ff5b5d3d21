//! The Docker Engine API, through bollard, reduced to what the agent needs.

use backon::{BackoffBuilder, ExponentialBuilder};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerUpdateBody, EventMessage, HostConfig, SystemInfoCgroupDriverEnum};
use bollard::query_parameters::{
    EventsOptions, InspectContainerOptions, KillContainerOptions, ListContainersOptions,
};
use futures_util::{Stream, StreamExt};

use super::api::DockerEventKind;
use super::cgroup::CgroupDriver;
use super::limits::{DockerCpu, DockerLimits};

/// Long enough for a memory limit write that makes the kernel swap out a large working set.
const REQUEST_TIMEOUT_SECS: u64 = 120;

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("Docker has no container {0}")]
    NotFound(String),
    #[error("Docker refused ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("Docker is unreachable: {0}")]
    Unreachable(String),
    #[error("unexpected answer from Docker: {0}")]
    Unexpected(String),
}

impl DockerError {
    fn from_bollard(reference: &str, e: bollard::errors::Error) -> DockerError {
        use bollard::errors::Error as B;
        match e {
            B::DockerResponseServerError {
                status_code: 404, ..
            } => DockerError::NotFound(reference.to_string()),
            B::DockerResponseServerError {
                status_code,
                message,
            } => DockerError::Refused {
                status: status_code,
                message,
            },
            B::SocketNotFoundError(_)
            | B::HyperResponseError { .. }
            | B::IOError { .. }
            | B::RequestTimeoutError => DockerError::Unreachable(e.to_string()),
            other => DockerError::Unexpected(other.to_string()),
        }
    }

    /// The kernel refused a memory limit below what it could reclaim: EBUSY, which runc
    /// 1.1 reports as "unable to set memory limit to N (current usage: ...)".
    pub fn is_busy(&self) -> bool {
        matches!(self, DockerError::Refused { message, .. }
            if message.contains("device or resource busy")
                || message.contains("unable to set memory limit"))
    }

    /// Docker sent the signal but gave up waiting for the process to exit.
    pub fn is_exit_not_seen(&self) -> bool {
        matches!(self, DockerError::Refused { message, .. } if message.contains("did not receive an exit event"))
    }

    /// Docker's 409 for a container that is not running.
    pub fn is_not_running(&self) -> bool {
        matches!(self, DockerError::Refused { status: 409, message } if message.contains("not running"))
    }
}

/// The facts about one container that the agent acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspected {
    pub docker_id: String,
    /// Without Docker's leading `/`.
    pub name: String,
    pub running: bool,
    pub pid: Option<u32>,
    pub cgroup_parent: String,
    pub limits: DockerLimits,
    pub oom_killed: bool,
}

/// A Docker event about some container (YARN or not; the caller filters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerEvent {
    pub docker_id: String,
    pub name: String,
    pub kind: DockerEventKind,
    pub exit_code: Option<i64>,
    pub time_ms: u64,
}

#[derive(Clone)]
pub struct DockerClient {
    docker: Docker,
    pub driver: CgroupDriver,
    /// Docker's own view of swap accounting (`SwapLimit` in `docker info`).
    pub swap_limit: Option<bool>,
}

impl DockerClient {
    /// Connects over the unix socket and negotiates the API version (the daemon may be
    /// older than bollard's default).
    pub async fn connect(socket: &Path) -> Result<DockerClient, DockerError> {
        let s = socket.to_string_lossy();
        let unreachable = |e: bollard::errors::Error| DockerError::Unreachable(format!("{s}: {e}"));
        let docker =
            Docker::connect_with_unix(&s, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                .map_err(unreachable)?
                .negotiate_version()
                .await
                .map_err(unreachable)?;
        let info = docker.info().await.map_err(unreachable)?;
        let driver = match info.cgroup_driver {
            Some(SystemInfoCgroupDriverEnum::SYSTEMD) => CgroupDriver::Systemd,
            _ => CgroupDriver::Cgroupfs,
        };
        Ok(DockerClient {
            docker,
            driver,
            swap_limit: info.swap_limit,
        })
    }

    pub async fn inspect(&self, reference: &str) -> Result<Inspected, DockerError> {
        let r = self
            .docker
            .inspect_container(reference, None::<InspectContainerOptions>)
            .await
            .map_err(|e| DockerError::from_bollard(reference, e))?;
        let docker_id = r
            .id
            .ok_or_else(|| DockerError::Unexpected(format!("inspect of {reference} has no Id")))?;
        let name = r
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        let state = r.state.unwrap_or_default();
        let hc = r.host_config.unwrap_or_default();
        Ok(Inspected {
            docker_id,
            name,
            running: state.running.unwrap_or(false),
            pid: state
                .pid
                .and_then(|p| u32::try_from(p).ok())
                .filter(|p| *p > 0),
            limits: DockerLimits::from(&hc),
            cgroup_parent: hc.cgroup_parent.unwrap_or_default(),
            oom_killed: state.oom_killed.unwrap_or(false),
        })
    }

    /// (Docker id, name) of every running container.
    pub async fn list_running(&self) -> Result<Vec<(String, String)>, DockerError> {
        let list = self
            .docker
            .list_containers(Some(ListContainersOptions {
                all: false,
                ..Default::default()
            }))
            .await
            .map_err(|e| DockerError::from_bollard("(list)", e))?;
        Ok(list
            .into_iter()
            .filter_map(|c| {
                let id = c.id?;
                let name = c.names?.into_iter().next()?;
                Some((id, name.trim_start_matches('/').to_string()))
            })
            .collect())
    }

    pub async fn update_cpu(&self, docker_id: &str, cpu: DockerCpu) -> Result<(), DockerError> {
        let body = match cpu {
            DockerCpu::Nano(n) => ContainerUpdateBody {
                nano_cpus: Some(n),
                ..Default::default()
            },
            DockerCpu::Quota { quota, period } => ContainerUpdateBody {
                cpu_quota: Some(quota),
                cpu_period: Some(period),
                ..Default::default()
            },
        };
        self.update(docker_id, body).await
    }

    /// Memory and memory+swap always together: Docker rejects a memory limit above the
    /// current memory-swap unless both change at once.
    pub async fn update_memory(
        &self,
        docker_id: &str,
        memory: i64,
        memory_swap: i64,
    ) -> Result<(), DockerError> {
        let body = ContainerUpdateBody {
            memory: Some(memory),
            memory_swap: Some(memory_swap),
            ..Default::default()
        };
        self.update(docker_id, body).await
    }

    async fn update(&self, docker_id: &str, body: ContainerUpdateBody) -> Result<(), DockerError> {
        self.docker
            .update_container(docker_id, body)
            .await
            .map_err(|e| DockerError::from_bollard(docker_id, e))
    }

    pub async fn kill(&self, docker_id: &str) -> Result<(), DockerError> {
        self.docker
            .kill_container(
                docker_id,
                Some(KillContainerOptions {
                    signal: "SIGKILL".into(),
                }),
            )
            .await
            .map_err(|e| DockerError::from_bollard(docker_id, e))
    }

    /// Container events from `since_secs` (Unix seconds) on.
    pub fn events(
        &self,
        since_secs: Option<i64>,
    ) -> impl Stream<Item = Result<DockerEvent, DockerError>> + use<> {
        let filters = HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            (
                "event".to_string(),
                DockerEventKind::ALL
                    .iter()
                    .map(|k| k.name().to_string())
                    .collect(),
            ),
        ]);
        let options = EventsOptions {
            since: since_secs.map(|s| s.to_string()),
            until: None,
            filters: Some(filters),
        };
        self.docker
            .events(Some(options))
            .filter_map(|item| async move {
                match item {
                    Ok(m) => parse_event(m).map(Ok),
                    Err(e) => Some(Err(DockerError::from_bollard("(events)", e))),
                }
            })
    }
}

fn parse_event(m: EventMessage) -> Option<DockerEvent> {
    // Docker reports "exec_start: sh" and "health_status: healthy" with a suffix.
    let action = m.action?;
    let kind = DockerEventKind::parse(action.split(':').next()?.trim())?;
    let actor = m.actor?;
    let attributes = actor.attributes.unwrap_or_default();
    let time_ms = m
        .time_nano
        .map(|n| n / 1_000_000)
        .or(m.time.map(|s| s * 1000))
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(0);
    Some(DockerEvent {
        docker_id: actor.id?,
        name: attributes.get("name")?.clone(),
        kind,
        exit_code: attributes.get("exitCode").and_then(|c| c.parse().ok()),
        time_ms,
    })
}

/// Waits before reconnecting a broken event stream: 250 ms doubling to 8 s, for as long
/// as it takes.
pub fn reconnect_delays() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(8))
        .without_max_times()
        .build()
}

/// Docker's limits as `docker inspect` shows them; an unset field reads 0 ("not set").
impl From<&HostConfig> for DockerLimits {
    fn from(hc: &HostConfig) -> DockerLimits {
        DockerLimits {
            nano_cpus: hc.nano_cpus.unwrap_or(0),
            cpu_quota: hc.cpu_quota.unwrap_or(0),
            cpu_period: hc.cpu_period.unwrap_or(0),
            cpu_shares: hc.cpu_shares.unwrap_or(0),
            memory: hc.memory.unwrap_or(0),
            memory_swap: hc.memory_swap.unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::EventActor;

    #[test]
    fn events_parse_with_and_without_detail() {
        let msg = |action: &str| EventMessage {
            action: Some(action.into()),
            actor: Some(EventActor {
                id: Some("abc".into()),
                attributes: Some(HashMap::from([
                    ("name".into(), "container_1_0001_01_000002".into()),
                    ("exitCode".into(), "137".into()),
                ])),
            }),
            time_nano: Some(1_700_000_000_123_456_789),
            ..Default::default()
        };
        let e = parse_event(msg("die")).unwrap();
        assert_eq!(e.kind, DockerEventKind::Die);
        assert_eq!(e.exit_code, Some(137));
        assert_eq!(e.time_ms, 1_700_000_000_123);
        assert!(parse_event(msg("exec_start: sh -c true")).is_none());
        assert!(parse_event(msg("rename")).is_none());
    }

    #[test]
    fn busy_and_not_running_are_recognised() {
        let busy = DockerError::Refused {
            status: 500,
            message: "Cannot update container abc: failed to write \"67108864\" to \"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes\": write /sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes: device or resource busy".into(),
        };
        assert!(busy.is_busy());
        assert!(!busy.is_not_running());
        let runc = DockerError::Refused {
            status: 500,
            message: "Cannot update container 7226: runc did not terminate successfully: exit status 1: unable to set memory limit to 134217728 (current usage: 270012416, peak usage: 271646720)\n: unknown".into(),
        };
        assert!(runc.is_busy());
        let stopped = DockerError::Refused {
            status: 409,
            message: "Container abc is not running".into(),
        };
        assert!(stopped.is_not_running());
    }
}
