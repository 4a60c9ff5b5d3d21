//! Typed settings from `preemptor-site.xml` (`yarn.preemptor.*`).
//!
//! Every field has the default documented in docs/configuration.md; defaults mirror YARN's
//! preemption monitor (`yarn.resourcemanager.monitor.capacity.preemption.*`) and the
//! papers (ALGORITHMS.md) where the meaning is the same.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

use crate::cluster::PolicyKind;
use crate::resources::{Limits, Resource};

/// Everything in `preemptor-site.xml`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreemptorSettings {
    pub rm: RmSettings,
    pub policy: PolicySettings,
    pub agent: AgentSettings,
    pub controller: ControllerSettings,
    pub log: LogSettings,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RmSettings {
    /// `yarn.preemptor.rm.address`: comma-separated RM web addresses; with RM HA, all of
    /// them, and the client follows the active one.
    pub addresses: Vec<String>,
    /// `yarn.preemptor.rm.user-name`: `?user.name=` for simple authentication.
    pub user_name: Option<String>,
    /// `yarn.preemptor.rm.request-timeout-ms`
    pub request_timeout_ms: u64,
}

/// Policy choice and every policy parameter of ALGORITHMS.md.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicySettings {
    /// `yarn.preemptor.policy`
    pub kind: PolicyKind,
    /// `yarn.preemptor.monitoring-interval-ms`
    pub monitoring_interval_ms: u64,
    /// `yarn.preemptor.observe-only`
    pub observe_only: bool,
    /// `yarn.preemptor.max-ignored-over-capacity`
    pub max_ignored_over_capacity: f64,
    /// `yarn.preemptor.natural-termination-factor`
    pub natural_termination_factor: f64,
    /// `yarn.preemptor.total-preemption-per-round`
    pub total_preemption_per_round: f64,
    /// `yarn.preemptor.class.cutoff-seconds`: mean task runtime below which an
    /// application is short, when neither its queue nor its tags say.
    pub class_cutoff_secs: f64,
    /// `yarn.preemptor.seed`: seed of the policy RNG (Dice's node choice).
    pub seed: u64,
    pub kill: KillSettings,
    pub suspend: SuspendSettings,
    pub graceful: GracefulSettings,
    pub las: LasSettings,
    pub dice: DiceSettings,
    pub adaptive: AdaptiveSettings,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KillSettings {
    /// `yarn.preemptor.kill.max-wait-before-kill-ms`
    pub max_wait_before_kill_ms: u64,
}

/// Shared by every policy that suspends (immediate, graceful's floor, las, dice).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SuspendSettings {
    /// `yarn.preemptor.suspend.footprint-memory-mb` and
    /// `yarn.preemptor.suspend.footprint-cpu-percent` (percent of one vcore).
    pub footprint: Limits,
    /// `yarn.preemptor.suspend.resume-delay`: D, how many times a suspended container
    /// must be picked for resumption before it really resumes.
    pub resume_delay: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GracefulSettings {
    /// `yarn.preemptor.graceful.step-memory-mb`, `yarn.preemptor.graceful.step-vcores`
    pub step: Resource,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LasSettings {
    /// `yarn.preemptor.las.quantum-ms`: W.
    pub quantum_ms: u64,
    /// `yarn.preemptor.las.extra-slots`: Q, containers admitted beyond one per core.
    pub extra_slots: u32,
    /// `yarn.preemptor.las.starvation-preemptions`: preemptions after which the guard
    /// applies.
    pub starvation_preemptions: u32,
    /// `yarn.preemptor.las.starvation-quantum-multiplier`
    pub starvation_quantum_multiplier: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiceModel {
    Linear,
    Square,
    SquareRoot,
}

impl DiceModel {
    pub fn name(&self) -> &'static str {
        match self {
            DiceModel::Linear => "linear",
            DiceModel::Square => "square",
            DiceModel::SquareRoot => "square-root",
        }
    }
}

impl std::str::FromStr for DiceModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "linear" => Ok(DiceModel::Linear),
            "square" => Ok(DiceModel::Square),
            "square-root" | "sqrt" => Ok(DiceModel::SquareRoot),
            other => Err(format!(
                "unknown Dice model {other:?} (expected linear, square or square-root)"
            )),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiceSettings {
    /// `yarn.preemptor.dice.window-ms`
    pub window_ms: u64,
    /// `yarn.preemptor.dice.max-task-waiting-ms`: MaxTaskWaitingTime.
    pub max_task_waiting_ms: u64,
    /// `yarn.preemptor.dice.sizing.enabled`
    pub sizing_enabled: bool,
    /// `yarn.preemptor.dice.sizing.model`
    pub sizing_model: DiceModel,
    /// `yarn.preemptor.dice.min-short-fraction`: MinShort as a fraction of the nodes; when
    /// unset, the short jobs' share of task-seconds as observed.
    pub min_short_fraction: Option<f64>,
    /// `yarn.preemptor.dice.max-short-extra-fraction`: MaxShort - MinShort.
    pub max_short_extra_fraction: f64,
    /// `yarn.preemptor.dice.preemption.enabled`
    pub preemption_enabled: bool,
    /// `yarn.preemptor.dice.preemption.model`
    pub preemption_model: DiceModel,
    /// `yarn.preemptor.dice.preemption.multiplier`
    pub multiplier: f64,
    /// `yarn.preemptor.dice.preemption.max-suspensions`
    pub max_suspensions: u32,
    /// `yarn.preemptor.dice.preemption.suspension-timeout-ms`
    pub suspension_timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AdaptiveSettings {
    /// `yarn.preemptor.adaptive.mapping`: `applicationType=policy` pairs, comma-separated,
    /// matched case-insensitively; an application tag `preemptor.policy=<name>` wins.
    pub mapping: Vec<(String, PolicyKind)>,
    /// `yarn.preemptor.adaptive.fallback`
    pub fallback: PolicyKind,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentSettings {
    /// `yarn.preemptor.agent.port`: the agents' port, on each NodeManager host.
    pub port: u16,
    /// `yarn.preemptor.agent.addresses`: explicit `nm-host=agent-url` pairs overriding
    /// `http://<nm-host>:<port>`.
    pub addresses: Vec<(String, String)>,
    /// `yarn.preemptor.agent.token-file`
    pub token_file: PathBuf,
    /// `yarn.preemptor.agent.lease-timeout-ms`
    pub lease_timeout_ms: u64,
    /// `yarn.preemptor.agent.request-timeout-ms`
    pub request_timeout_ms: u64,
    /// `yarn.preemptor.agent.max-retries`
    pub max_retries: u32,
    /// `yarn.preemptor.agent.swap-threshold-pages-per-sec`: swap-in or major-fault rate
    /// at which a shrinking container counts as swapping.
    pub swap_threshold_pages_per_sec: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ControllerSettings {
    /// `yarn.preemptor.controller.listen`: API, SSE and dashboard.
    pub listen: SocketAddr,
    /// `yarn.preemptor.controller.token-file`
    pub token_file: PathBuf,
    /// `yarn.preemptor.proxy.listen`: the RM reverse proxy, off when unset.
    pub proxy_listen: Option<SocketAddr>,
    /// `yarn.preemptor.proxy.routes`: `tag:<tag>=<queue>` or `type:<applicationType>=<queue>`
    /// rules, comma-separated, first match wins.
    pub routes: Vec<RouteRule>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteRule {
    pub matcher: RouteMatch,
    pub queue: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RouteMatch {
    Tag(String),
    ApplicationType(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogSettings {
    /// `yarn.preemptor.log.format`: text or json.
    pub format: LogFormat,
}

impl Default for PolicySettings {
    fn default() -> Self {
        PolicySettings {
            kind: PolicyKind::Graceful,
            monitoring_interval_ms: 3000,
            observe_only: false,
            max_ignored_over_capacity: 0.1,
            natural_termination_factor: 0.2,
            total_preemption_per_round: 0.1,
            class_cutoff_secs: 90.5811,
            seed: 0x5eed,
            kill: KillSettings {
                max_wait_before_kill_ms: 15_000,
            },
            suspend: SuspendSettings {
                footprint: Limits::MIN_FOOTPRINT,
                resume_delay: 3,
            },
            graceful: GracefulSettings {
                step: Resource::new(4096, 2),
            },
            las: LasSettings {
                quantum_ms: 50_000,
                extra_slots: 4,
                starvation_preemptions: 3,
                starvation_quantum_multiplier: 2,
            },
            dice: DiceSettings {
                window_ms: 60_000,
                max_task_waiting_ms: 30_000,
                sizing_enabled: true,
                sizing_model: DiceModel::Linear,
                min_short_fraction: None,
                max_short_extra_fraction: 0.08,
                preemption_enabled: true,
                preemption_model: DiceModel::Square,
                multiplier: 1.0,
                max_suspensions: 2,
                suspension_timeout_ms: 100_000,
            },
            adaptive: AdaptiveSettings {
                mapping: vec![
                    ("MAPREDUCE".into(), PolicyKind::Immediate),
                    ("SPARK".into(), PolicyKind::Graceful),
                ],
                fallback: PolicyKind::Graceful,
            },
        }
    }
}

impl Default for PreemptorSettings {
    fn default() -> Self {
        PreemptorSettings {
            rm: RmSettings {
                addresses: vec!["http://localhost:8088".into()],
                user_name: None,
                request_timeout_ms: 5_000,
            },
            policy: PolicySettings::default(),
            agent: AgentSettings {
                port: 8049,
                addresses: vec![],
                token_file: PathBuf::from("/etc/preemptor/agent.token"),
                lease_timeout_ms: 30_000,
                request_timeout_ms: 2_000,
                max_retries: 3,
                swap_threshold_pages_per_sec: 256,
            },
            controller: ControllerSettings {
                listen: SocketAddr::from(([127, 0, 0, 1], 8090)),
                token_file: PathBuf::from("/etc/preemptor/controller.token"),
                proxy_listen: None,
                routes: vec![],
            },
            log: LogSettings {
                format: LogFormat::Text,
            },
        }
    }
}
