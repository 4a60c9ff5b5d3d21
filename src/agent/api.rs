//! The agent's HTTP API: request and response bodies, shared by the server and
//! [`AgentClient`](super::client::AgentClient). JSON, camelCase, under `/v1`.
//!
//! | Route | Body | Answer |
//! |---|---|---|
//! | `POST /v1/actions` | [`ActionRequest`] | [`ActionResult`] |
//! | `GET /v1/containers` | | `[`[`ContainerStatus`]`]` |
//! | `GET /v1/containers/{id}` | | [`ContainerStatus`] |
//! | `GET /v1/events` | | SSE stream of [`AgentEvent`] (event name = `type`) |
//! | `POST /v1/lease` | [`LeaseRequest`] | [`LeaseStatus`] |
//! | `GET /v1/lease` | | [`LeaseStatus`] |
//! | `GET /healthz` (no token) | | [`Health`] |
//! | `GET /metrics` | | OpenMetrics text |
//!
//! Errors are [`ErrorBody`] with 400 (malformed), 401 (token), 403 (not a YARN container),
//! 404 (unknown container or route), 405 (method), 409 (conflict: lease, container state,
//! Docker said 409, memory could not be reclaimed), 413 (body too large), 415 (not JSON),
//! 502 (Docker refused), 503 (Docker unreachable), 500 (the agent's own failure).

use serde::{Deserialize, Serialize};

use super::limits::CgroupLimits;
use super::writer::WritePath;
use crate::cluster::{ContainerId, ContainerState};
use crate::resources::{Limits, Resource};

pub const API_PREFIX: &str = "/v1";

/// What to do to one container. Actions name their target state, so repeating one is
/// harmless.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionRequest {
    /// The YARN container id (the Docker container's name). A Docker id or name is
    /// accepted too, and refused unless the container's name is a YARN container id.
    pub container: String,
    #[serde(flatten)]
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum Action {
    /// CPU to the target first, wait until the throttle shows in cpu.stat, then memory
    /// down to the target (stepping down on EBUSY).
    Suspend {
        /// The container's YARN allocation; the target is mapped to real limits by the
        /// container's own original ratio.
        allocated: Resource,
        target: Limits,
    },
    /// One graceful step to `target` (down or back up), same ordering rules; a shrunk
    /// container that starts swapping is frozen at 1% CPU.
    Shrink { allocated: Resource, target: Limits },
    /// Memory first, then CPU, back to exactly the limits recorded before the first
    /// change. A no-op for a container the agent never changed.
    Resume,
    /// SIGKILL through Docker.
    Kill,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    Suspend,
    Shrink,
    Resume,
    Kill,
}

impl ActionKind {
    pub fn name(&self) -> &'static str {
        match self {
            ActionKind::Suspend => "suspend",
            ActionKind::Shrink => "shrink",
            ActionKind::Resume => "resume",
            ActionKind::Kill => "kill",
        }
    }
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Suspend { .. } => ActionKind::Suspend,
            Action::Shrink { .. } => ActionKind::Shrink,
            Action::Resume => ActionKind::Resume,
            Action::Kill => ActionKind::Kill,
        }
    }
}

/// Where the time of an action went, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionTimings {
    pub total_ms: f64,
    pub store_ms: f64,
    pub cpu_ms: f64,
    /// From the CPU write until cpu.stat showed the throttle (0 when CPU was not narrowed).
    pub throttle_wait_ms: f64,
    /// All of the memory phase, including `pageout_ms`.
    pub memory_ms: f64,
    /// Proactive reclaim (process_madvise MADV_PAGEOUT) before the limit write.
    pub pageout_ms: f64,
    /// From the start of the memory phase until the cgroup's memory limit stood at the
    /// target, so usage fit it: page-out plus the limit write. On the Docker path the
    /// rest of `memory_ms` is Docker recording the new limit.
    #[serde(default)]
    pub reclaim_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionResult {
    pub container: ContainerId,
    pub docker_id: String,
    pub action: ActionKind,
    pub state: ContainerState,
    /// False when the container already was in the requested state.
    pub changed: bool,
    /// YARN-unit limits in force now (the allocation after a resume); `None` after a kill
    /// or for a container the agent never changed.
    pub limits: Option<Limits>,
    /// The cgroup files read back after the action (`None` after a kill or in dry-run).
    pub cgroup: Option<CgroupLimits>,
    /// The write path used (`None` in dry-run).
    pub path: Option<WritePath>,
    /// True when the action narrowed CPU and cpu.stat confirmed it (nr_throttled grew, or
    /// the container stayed within the new quota for a full period).
    pub throttle_confirmed: bool,
    pub memory_before_bytes: Option<u64>,
    pub memory_after_bytes: Option<u64>,
    /// Memory limit writes refused with EBUSY on the way down.
    pub memory_busy_retries: u32,
    pub swapping: bool,
    pub dry_run: bool,
    pub timings: ActionTimings,
}

/// One YARN container on this host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub container: ContainerId,
    pub docker_id: String,
    pub running: bool,
    pub state: ContainerState,
    /// True when the agent changed this container's limits and has not restored them.
    pub changed: bool,
    /// The YARN allocation the controller last sent (`None` if never acted on).
    pub allocated: Option<Resource>,
    /// YARN-unit limits the agent last applied (`None` if never changed).
    pub limits: Option<Limits>,
    /// Read from the cgroup files now (`None` when the cgroup cannot be read, e.g. the
    /// container is not running).
    pub current: Option<CgroupLimits>,
    /// What resume returns to: recorded before the first change, else the current limits.
    pub original: Option<CgroupLimits>,
    /// CPU time used (cpuacct.usage / cpu.stat usage_usec), in milliseconds.
    pub attained_service_ms: Option<u64>,
    pub memory_usage_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    /// Major faults or swap-ins above the threshold at the last check.
    pub swapping: bool,
    /// CPU frozen at 1% because the container was swapping while shrunk.
    pub frozen: bool,
    pub path: Option<WritePath>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DockerEventKind {
    Start,
    Die,
    Oom,
    Kill,
    Pause,
    Unpause,
    Destroy,
}

impl DockerEventKind {
    pub const ALL: [DockerEventKind; 7] = [
        DockerEventKind::Start,
        DockerEventKind::Die,
        DockerEventKind::Oom,
        DockerEventKind::Kill,
        DockerEventKind::Pause,
        DockerEventKind::Unpause,
        DockerEventKind::Destroy,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            DockerEventKind::Start => "start",
            DockerEventKind::Die => "die",
            DockerEventKind::Oom => "oom",
            DockerEventKind::Kill => "kill",
            DockerEventKind::Pause => "pause",
            DockerEventKind::Unpause => "unpause",
            DockerEventKind::Destroy => "destroy",
        }
    }

    pub fn parse(s: &str) -> Option<DockerEventKind> {
        DockerEventKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Everything the agent reports on `GET /v1/events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    /// A Docker event for a YARN container.
    Docker {
        container: ContainerId,
        docker_id: String,
        kind: DockerEventKind,
        /// Exit code for `die`.
        exit_code: Option<i64>,
        /// Docker's timestamp, Unix ms.
        time_ms: u64,
    },
    /// An action completed (from the API, the lease expiry, or the swap monitor).
    Action { result: ActionResult },
    /// An action failed; the container's limits are where `current` says.
    ActionFailed {
        container: ContainerId,
        action: ActionKind,
        error: String,
        reason: String,
    },
    /// A shrunk container was found swapping.
    SwapDetected {
        container: ContainerId,
        pages_per_sec: f64,
        frozen: bool,
    },
    /// The lease expired; every changed container was resumed (or failed to be).
    LeaseExpired {
        resumed: Vec<ContainerId>,
        failed: Vec<ContainerId>,
    },
    /// This subscriber fell behind and missed events; re-read `/v1/containers`.
    Lagged { missed: u64 },
}

impl AgentEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            AgentEvent::Docker { .. } => "docker",
            AgentEvent::Action { .. } => "action",
            AgentEvent::ActionFailed { .. } => "actionFailed",
            AgentEvent::SwapDetected { .. } => "swapDetected",
            AgentEvent::LeaseExpired { .. } => "leaseExpired",
            AgentEvent::Lagged { .. } => "lagged",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRequest {
    /// Who holds the lease, e.g. `controller@rm1.example.com:8090`. While the lease is
    /// live, a different controller is refused (409).
    pub controller: String,
    /// Lease length; the agent's `--lease-timeout` when absent.
    pub timeout_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {
    pub holder: Option<String>,
    pub live: bool,
    pub timeout_ms: u64,
    pub remaining_ms: u64,
    /// Containers the agent would resume if the lease expired now.
    pub changed_containers: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub status: String,
    pub version: String,
    pub dry_run: bool,
    pub cgroup_version: Option<super::limits::CgroupVersion>,
    pub path: WritePath,
    /// The container backend: `docker`, `yarn-cgroups`, `process`, or `dry-run`.
    #[serde(default)]
    pub containers: String,
    /// Whether the kernel accounts memory+swap (needed to enforce Docker's MemorySwap).
    pub swap_accounting: Option<bool>,
    pub store: Option<super::store::LoadReport>,
}

/// Every error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A short stable code: `unauthorized`, `bad_request`, `payload_too_large`,
    /// `unknown_container`, `not_yarn`, `conflict`, `lease`, `docker`, `unavailable`,
    /// `internal`.
    pub error: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_requests_read_as_documented() {
        let r: ActionRequest = serde_json::from_str(
            r#"{"container":"container_1700000000000_0001_01_000002","action":"suspend",
                "allocated":{"memoryMb":2048,"vcores":2},"target":{"memoryMb":64,"cpuMillis":10}}"#,
        )
        .unwrap();
        assert_eq!(
            r.action,
            Action::Suspend {
                allocated: Resource::new(2048, 2),
                target: Limits::MIN_FOOTPRINT
            }
        );
        let r: ActionRequest =
            serde_json::from_str(r#"{"container":"x","action":"resume"}"#).unwrap();
        assert_eq!(r.action, Action::Resume);
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back["action"], "resume");
        let err = serde_json::from_str::<ActionRequest>(r#"{"container":"x","action":"shrink"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("allocated"), "{err}");
    }

    #[test]
    fn events_carry_their_type() {
        let e = AgentEvent::LeaseExpired {
            resumed: vec![],
            failed: vec![],
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], e.name());
        let e = AgentEvent::SwapDetected {
            container: "container_1700000000000_0001_01_000002".parse().unwrap(),
            pages_per_sec: 300.0,
            frozen: true,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "swapDetected");
        assert_eq!(v["pagesPerSec"], 300.0);
        assert_eq!(serde_json::from_value::<AgentEvent>(v).unwrap(), e);
    }
}
