//! Typed settings from `preemptor-site.xml` (`yarn.preemptor.*`).
//!
//! Every field has the default documented in docs/configuration.md; defaults mirror YARN's
//! preemption monitor (`yarn.resourcemanager.monitor.capacity.preemption.*`) and the
//! papers (docs/algorithms.md) where the meaning is the same.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

use super::error::{ConfigError, ConfigErrors, ConfigWarning};
use super::values::{
    did_you_mean, parse_bool, parse_duration_ms, parse_f64, parse_f64_in, parse_list,
    parse_positive, parse_positive_duration_ms, parse_unsigned,
};
use super::xml::Configuration;
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
    /// `yarn.preemptor.rm.max-response-mb`: a larger answer is refused, not buffered.
    pub max_response_mb: u64,
    /// `yarn.preemptor.rm.tls.ca-file` and `yarn.preemptor.rm.tls.verify-hostname`: how
    /// `https://` RM addresses are verified.
    pub tls: YarnTls,
    /// `yarn.preemptor.rm.kerberos.principal` and `.keytab`: SPNEGO instead of
    /// `user.name`, for RMs with `hadoop.http.authentication.type=kerberos`.
    pub kerberos: Option<KerberosSettings>,
}

/// A Kerberos client identity: its principal and the keytab that holds its keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KerberosSettings {
    /// `name[/instance]@REALM`; `_HOST` as the instance is this host's name, as in
    /// Hadoop (`kerberos::expand_host`).
    pub principal: String,
    /// Must be private to its owner (`chmod 600`), like a token file.
    pub keytab: PathBuf,
}

/// How HTTPS to YARN's web endpoints (the RMs, a NodeManager) is verified
/// (`crate::tls::yarn_client_builder`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct YarnTls {
    /// PEM CA certificates; set, only these are trusted, else the system's trust store.
    pub ca_file: Option<PathBuf>,
    /// Off only as with Hadoop's `hadoop.ssl.hostname.verifier=ALLOW_ALL`: the chain is
    /// still verified, the name in it is not.
    pub verify_hostname: bool,
}

impl Default for YarnTls {
    fn default() -> Self {
        YarnTls {
            ca_file: None,
            verify_hostname: true,
        }
    }
}

impl RmSettings {
    /// Room for tens of thousands of applications (2-3 KB each in `/apps`).
    pub const DEFAULT_MAX_RESPONSE_MB: u64 = 64;
    /// Keeps `max-response-mb` in bytes well inside `usize`.
    pub const LARGEST_MAX_RESPONSE_MB: u64 = 4096;
}

/// Policy choice and every policy parameter of docs/algorithms.md.
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
    /// `yarn.preemptor.suspend.max-duration-ms`: a container suspended this long is
    /// resumed, before the framework's own timeout (spark.network.timeout,
    /// mapreduce.task.timeout) gives up on it; 0 for no limit.
    pub max_duration_ms: u64,
    /// `yarn.preemptor.suspend.rest-ms`: after such a resume, how long the container
    /// runs before it may be suspended again (long enough to report).
    pub rest_ms: u64,
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
    /// `yarn.preemptor.dice.min-short-nodes`: the short partition never has fewer
    /// nodes once a short application has been seen. On YARN a short queue whose
    /// default label is the partition's runs only there, so an empty partition would
    /// leave its jobs waiting.
    pub min_short_nodes: usize,
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
    /// `yarn.preemptor.agent.action-timeout-ms`: how long one suspend, shrink, resume or
    /// kill may take; reclaiming gigabytes of memory takes seconds, and the agent keeps
    /// stepping through "device or resource busy" for its --memory-timeout (60 s).
    pub action_timeout_ms: u64,
    /// `yarn.preemptor.agent.max-retries`
    pub max_retries: u32,
    /// `yarn.preemptor.agent.max-parallel-requests`: agents asked at once, for listings
    /// and for actions alike.
    pub max_parallel_requests: usize,
    /// `yarn.preemptor.agent.swap-threshold-pages-per-sec`: swap-in or major-fault rate
    /// at which a shrinking container counts as swapping.
    pub swap_threshold_pages_per_sec: u64,
    /// `yarn.preemptor.agent.tls.ca-file`: PEM CA certificates the agents' certificates
    /// chain to; set, every agent is reached over HTTPS and verified.
    pub tls_ca_file: Option<PathBuf>,
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
    /// `yarn.preemptor.controller.submission-poll-interval-ms`: how often the RM's
    /// submission counter is read between ticks, to see submissions made over RPC;
    /// 0 turns it off.
    pub submission_poll_ms: u64,
    /// `yarn.preemptor.controller.state-dir`: the durable record of the node capacities
    /// the controller changed, and its lock.
    pub state_dir: PathBuf,
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
                // Below Spark's default spark.network.timeout (120 s), the shortest; above
                // the 2W = 100 s a starved LAS task may wait by default.
                max_duration_ms: 110_000,
                // Above spark.executor.heartbeatInterval (10 s) and several MapReduce
                // status reports (3 s).
                rest_ms: 15_000,
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
                min_short_nodes: 1,
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
                max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
                tls: YarnTls::default(),
                kerberos: None,
            },
            policy: PolicySettings::default(),
            agent: AgentSettings {
                port: 8049,
                addresses: vec![],
                token_file: PathBuf::from("/etc/preemptor/agent.token"),
                lease_timeout_ms: 30_000,
                request_timeout_ms: 2_000,
                action_timeout_ms: 90_000,
                max_retries: 3,
                max_parallel_requests: 64,
                swap_threshold_pages_per_sec: 256,
                tls_ca_file: None,
            },
            controller: ControllerSettings {
                listen: SocketAddr::from(([127, 0, 0, 1], 8090)),
                token_file: PathBuf::from("/etc/preemptor/controller.token"),
                proxy_listen: None,
                routes: vec![],
                submission_poll_ms: 250,
                state_dir: PathBuf::from("/var/lib/preemptor/controller"),
            },
            log: LogSettings {
                format: LogFormat::Text,
            },
        }
    }
}

/// Every key of preemptor-site.xml starts with this.
pub const PREFIX: &str = "yarn.preemptor.";

impl PreemptorSettings {
    /// Reads preemptor-site.xml; unset keys keep their defaults. Warnings (unknown
    /// keys) are dropped here: use [`PreemptorSettings::from_conf_with_warnings`] to
    /// show them.
    pub fn from_conf(conf: &Configuration) -> Result<PreemptorSettings, ConfigErrors> {
        Self::from_conf_with_warnings(conf).map(|(s, _)| s)
    }

    /// Like [`PreemptorSettings::from_conf`], also returning a warning for every
    /// `yarn.preemptor.*` key that is not one of ours, with the nearest known key.
    pub fn from_conf_with_warnings(
        conf: &Configuration,
    ) -> Result<(PreemptorSettings, Vec<ConfigWarning>), ConfigErrors> {
        let mut r = Reader::new(conf);
        let settings = read(&mut r);
        let warnings = conf
            .keys_with_prefix(PREFIX)
            .filter(|k| !r.known.contains(k))
            .filter_map(|k| {
                Some(ConfigWarning::UnknownKey {
                    key: k.to_string(),
                    location: conf.location(k)?.clone(),
                    suggestion: did_you_mean(k, r.known.iter().copied()).map(str::to_string),
                })
            })
            .collect();
        if r.errors.is_empty() {
            Ok((settings, warnings))
        } else {
            let mut e = ConfigErrors {
                errors: r.errors,
                warnings,
            };
            e.sort();
            Err(e)
        }
    }

    /// Every key preemptor-site.xml understands.
    pub fn known_keys() -> Vec<&'static str> {
        let conf = Configuration::with_env(Default::default());
        let mut r = Reader::new(&conf);
        read(&mut r);
        r.known
    }
}

/// Reads keys, remembering which exist and collecting every error.
struct Reader<'a> {
    conf: &'a Configuration,
    errors: Vec<ConfigError>,
    known: Vec<&'static str>,
}

impl<'a> Reader<'a> {
    fn new(conf: &'a Configuration) -> Reader<'a> {
        Reader {
            conf,
            errors: Vec::new(),
            known: Vec::new(),
        }
    }

    /// The parsed value, `None` when unset or invalid (the error is collected).
    fn opt<T>(
        &mut self,
        key: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        self.known.push(key);
        let value = match self.conf.get(key) {
            Ok(v) => v?,
            Err(e) => {
                self.errors.push(e);
                return None;
            }
        };
        match parse(&value) {
            Ok(t) => Some(t),
            Err(expected) => {
                self.invalid(key, value, expected);
                None
            }
        }
    }

    fn get<T>(
        &mut self,
        key: &'static str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> T {
        self.opt(key, parse).unwrap_or(default)
    }

    fn invalid(&mut self, key: &str, value: String, expected: String) {
        self.errors.push(ConfigError::InvalidValue {
            key: key.to_string(),
            value,
            expected,
            location: self.conf.location(key).cloned(),
        });
    }

    /// Reports a rule over several keys against the first of them that is set.
    fn cross_check(&mut self, keys: &[&str], expected: &str) {
        let key = keys
            .iter()
            .find(|k| self.conf.get_raw(k).is_some())
            .unwrap_or(&keys[0]);
        let value = self.conf.get_raw(key).unwrap_or_default().to_string();
        self.invalid(key, value, expected.to_string());
    }
}

fn read(r: &mut Reader<'_>) -> PreemptorSettings {
    let d = PreemptorSettings::default();
    let dp = d.policy;
    let rm = RmSettings {
        addresses: r.get("yarn.preemptor.rm.address", d.rm.addresses, |s| {
            let list = parse_list(s);
            if list.is_empty() {
                return Err("expected at least one ResourceManager web address".into());
            }
            list.iter().map(|a| web_address(a)).collect()
        }),
        user_name: r
            .opt("yarn.preemptor.rm.user-name", |s| Ok(s.trim().to_string()))
            .filter(|s| !s.is_empty()),
        request_timeout_ms: r.get(
            "yarn.preemptor.rm.request-timeout-ms",
            d.rm.request_timeout_ms,
            parse_positive_duration_ms,
        ),
        max_response_mb: r.get(
            "yarn.preemptor.rm.max-response-mb",
            d.rm.max_response_mb,
            |s| match parse_unsigned::<u64>(s)? {
                n if (1..=RmSettings::LARGEST_MAX_RESPONSE_MB).contains(&n) => Ok(n),
                _ => Err(format!(
                    "expected 1 to {} (MiB)",
                    RmSettings::LARGEST_MAX_RESPONSE_MB
                )),
            },
        ),
        tls: YarnTls {
            ca_file: r.opt("yarn.preemptor.rm.tls.ca-file", parse_path),
            verify_hostname: r.get(
                "yarn.preemptor.rm.tls.verify-hostname",
                d.rm.tls.verify_hostname,
                parse_bool,
            ),
        },
        kerberos: None,
    };
    let principal = r.opt("yarn.preemptor.rm.kerberos.principal", |s| match s.trim() {
        "" => Err("expected a principal, e.g. preemptor/host@EXAMPLE.COM".into()),
        p if p.contains(char::is_whitespace) => Err("a principal has no spaces".into()),
        p => Ok(p.to_string()),
    });
    let keytab = r.opt("yarn.preemptor.rm.kerberos.keytab", parse_path);
    let rm = match (principal, keytab) {
        (Some(principal), Some(keytab)) => RmSettings {
            kerberos: Some(KerberosSettings { principal, keytab }),
            ..rm
        },
        (None, None) => rm,
        _ => {
            r.cross_check(
                &[
                    "yarn.preemptor.rm.kerberos.principal",
                    "yarn.preemptor.rm.kerberos.keytab",
                ],
                "Kerberos needs both yarn.preemptor.rm.kerberos.principal and yarn.preemptor.rm.kerberos.keytab",
            );
            rm
        }
    };
    let policy = PolicySettings {
        kind: r.get("yarn.preemptor.policy", dp.kind, |s| s.parse()),
        monitoring_interval_ms: r.get(
            "yarn.preemptor.monitoring-interval-ms",
            dp.monitoring_interval_ms,
            parse_positive_duration_ms,
        ),
        observe_only: r.get("yarn.preemptor.observe-only", dp.observe_only, parse_bool),
        max_ignored_over_capacity: r.get(
            "yarn.preemptor.max-ignored-over-capacity",
            dp.max_ignored_over_capacity,
            |s| parse_f64_in(s, 0.0, 1.0),
        ),
        natural_termination_factor: r.get(
            "yarn.preemptor.natural-termination-factor",
            dp.natural_termination_factor,
            fraction_above_zero,
        ),
        total_preemption_per_round: r.get(
            "yarn.preemptor.total-preemption-per-round",
            dp.total_preemption_per_round,
            fraction_above_zero,
        ),
        class_cutoff_secs: r.get(
            "yarn.preemptor.class.cutoff-seconds",
            dp.class_cutoff_secs,
            |s| match parse_f64(s)? {
                v if v > 0.0 => Ok(v),
                _ => Err("expected a number of seconds above zero".into()),
            },
        ),
        seed: r.get("yarn.preemptor.seed", dp.seed, parse_unsigned),
        kill: KillSettings {
            max_wait_before_kill_ms: r.get(
                "yarn.preemptor.kill.max-wait-before-kill-ms",
                dp.kill.max_wait_before_kill_ms,
                parse_duration_ms,
            ),
        },
        suspend: read_suspend(r, &dp.suspend),
        graceful: read_graceful(r, &dp.graceful),
        las: LasSettings {
            quantum_ms: r.get(
                "yarn.preemptor.las.quantum-ms",
                dp.las.quantum_ms,
                parse_positive_duration_ms,
            ),
            extra_slots: r.get(
                "yarn.preemptor.las.extra-slots",
                dp.las.extra_slots,
                parse_unsigned,
            ),
            starvation_preemptions: r.get(
                "yarn.preemptor.las.starvation-preemptions",
                dp.las.starvation_preemptions,
                parse_unsigned,
            ),
            starvation_quantum_multiplier: r.get(
                "yarn.preemptor.las.starvation-quantum-multiplier",
                dp.las.starvation_quantum_multiplier,
                parse_positive,
            ),
        },
        dice: read_dice(r, &dp.dice),
        adaptive: AdaptiveSettings {
            mapping: r.get(
                "yarn.preemptor.adaptive.mapping",
                dp.adaptive.mapping,
                parse_adaptive_mapping,
            ),
            fallback: r.get(
                "yarn.preemptor.adaptive.fallback",
                dp.adaptive.fallback,
                concrete_policy,
            ),
        },
    };
    let agent = AgentSettings {
        port: r.get("yarn.preemptor.agent.port", d.agent.port, parse_positive),
        addresses: r.get("yarn.preemptor.agent.addresses", d.agent.addresses, |s| {
            parse_list(s)
                .iter()
                .map(|pair| {
                    let (host, url) = pair
                        .split_once('=')
                        .ok_or_else(|| format!("{pair:?} is not nm-host=agent-url"))?;
                    let host = host.trim();
                    if host.is_empty() {
                        return Err(format!("{pair:?} has no NodeManager host"));
                    }
                    Ok((host.to_string(), web_address(url.trim())?))
                })
                .collect()
        }),
        token_file: r.get(
            "yarn.preemptor.agent.token-file",
            d.agent.token_file,
            parse_path,
        ),
        lease_timeout_ms: r.get(
            "yarn.preemptor.agent.lease-timeout-ms",
            d.agent.lease_timeout_ms,
            parse_positive_duration_ms,
        ),
        request_timeout_ms: r.get(
            "yarn.preemptor.agent.request-timeout-ms",
            d.agent.request_timeout_ms,
            parse_positive_duration_ms,
        ),
        action_timeout_ms: r.get(
            "yarn.preemptor.agent.action-timeout-ms",
            d.agent.action_timeout_ms,
            parse_positive_duration_ms,
        ),
        max_retries: r.get(
            "yarn.preemptor.agent.max-retries",
            d.agent.max_retries,
            parse_unsigned,
        ),
        max_parallel_requests: r.get(
            "yarn.preemptor.agent.max-parallel-requests",
            d.agent.max_parallel_requests,
            parse_positive,
        ),
        swap_threshold_pages_per_sec: r.get(
            "yarn.preemptor.agent.swap-threshold-pages-per-sec",
            d.agent.swap_threshold_pages_per_sec,
            parse_positive,
        ),
        tls_ca_file: r.opt("yarn.preemptor.agent.tls.ca-file", parse_path),
    };
    if agent.tls_ca_file.is_none()
        && agent
            .addresses
            .iter()
            .any(|(_, u)| u.starts_with("https://"))
    {
        r.cross_check(
            &["yarn.preemptor.agent.addresses"],
            "https agent addresses need yarn.preemptor.agent.tls.ca-file to verify the agents",
        );
    }
    let controller = ControllerSettings {
        listen: r.get(
            "yarn.preemptor.controller.listen",
            d.controller.listen,
            parse_socket_addr,
        ),
        token_file: r.get(
            "yarn.preemptor.controller.token-file",
            d.controller.token_file,
            parse_path,
        ),
        proxy_listen: r.opt("yarn.preemptor.proxy.listen", parse_socket_addr),
        routes: r.get("yarn.preemptor.proxy.routes", d.controller.routes, |s| {
            parse_list(s).iter().map(|rule| parse_route(rule)).collect()
        }),
        submission_poll_ms: r.get(
            "yarn.preemptor.controller.submission-poll-interval-ms",
            d.controller.submission_poll_ms,
            parse_duration_ms,
        ),
        state_dir: r.get(
            "yarn.preemptor.controller.state-dir",
            d.controller.state_dir,
            parse_path,
        ),
    };
    let log = LogSettings {
        format: r.get("yarn.preemptor.log.format", d.log.format, |s| {
            match s.trim().to_ascii_lowercase().as_str() {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected text or json".into()),
            }
        }),
    };
    PreemptorSettings {
        rm,
        policy,
        agent,
        controller,
        log,
    }
}

fn read_suspend(r: &mut Reader<'_>, d: &SuspendSettings) -> SuspendSettings {
    SuspendSettings {
        footprint: Limits {
            memory_mb: r.get(
                "yarn.preemptor.suspend.footprint-memory-mb",
                d.footprint.memory_mb,
                |s| match parse_unsigned(s)? {
                    v if v >= DOCKER_MIN_MEMORY_MB => Ok(v),
                    _ => Err(format!(
                        "expected at least {DOCKER_MIN_MEMORY_MB} (Docker's smallest memory limit)"
                    )),
                },
            ),
            cpu_millis: r.get(
                "yarn.preemptor.suspend.footprint-cpu-percent",
                d.footprint.cpu_millis,
                // One percent is the smallest CFS quota Docker takes (1000 of 100000 us).
                |s| parse_f64_in(s, 1.0, 100.0).map(|p| (p * 10.0).round() as u32),
            ),
        },
        resume_delay: r.get(
            "yarn.preemptor.suspend.resume-delay",
            d.resume_delay,
            parse_unsigned,
        ),
        max_duration_ms: r.get(
            "yarn.preemptor.suspend.max-duration-ms",
            d.max_duration_ms,
            parse_duration_ms,
        ),
        rest_ms: r.get(
            "yarn.preemptor.suspend.rest-ms",
            d.rest_ms,
            parse_duration_ms,
        ),
    }
}

fn read_graceful(r: &mut Reader<'_>, d: &GracefulSettings) -> GracefulSettings {
    const MEMORY: &str = "yarn.preemptor.graceful.step-memory-mb";
    const VCORES: &str = "yarn.preemptor.graceful.step-vcores";
    let step = Resource::new(
        r.get(MEMORY, d.step.memory_mb, parse_unsigned),
        r.get(VCORES, d.step.vcores, parse_unsigned),
    );
    if step.is_zero() {
        r.cross_check(
            &[MEMORY, VCORES],
            "the graceful step cannot be zero in both memory and vcores",
        );
    }
    GracefulSettings { step }
}

fn read_dice(r: &mut Reader<'_>, d: &DiceSettings) -> DiceSettings {
    const MIN_SHORT: &str = "yarn.preemptor.dice.min-short-fraction";
    const EXTRA: &str = "yarn.preemptor.dice.max-short-extra-fraction";
    let dice = DiceSettings {
        window_ms: r.get(
            "yarn.preemptor.dice.window-ms",
            d.window_ms,
            parse_positive_duration_ms,
        ),
        max_task_waiting_ms: r.get(
            "yarn.preemptor.dice.max-task-waiting-ms",
            d.max_task_waiting_ms,
            parse_positive_duration_ms,
        ),
        sizing_enabled: r.get(
            "yarn.preemptor.dice.sizing.enabled",
            d.sizing_enabled,
            parse_bool,
        ),
        sizing_model: r.get("yarn.preemptor.dice.sizing.model", d.sizing_model, |s| {
            s.parse()
        }),
        min_short_fraction: r
            .opt(MIN_SHORT, |s| parse_f64_in(s, 0.0, 1.0))
            .or(d.min_short_fraction),
        max_short_extra_fraction: r.get(EXTRA, d.max_short_extra_fraction, |s| {
            parse_f64_in(s, 0.0, 1.0)
        }),
        min_short_nodes: r.get(
            "yarn.preemptor.dice.min-short-nodes",
            d.min_short_nodes,
            parse_unsigned,
        ),
        preemption_enabled: r.get(
            "yarn.preemptor.dice.preemption.enabled",
            d.preemption_enabled,
            parse_bool,
        ),
        preemption_model: r.get(
            "yarn.preemptor.dice.preemption.model",
            d.preemption_model,
            |s| s.parse(),
        ),
        multiplier: r.get(
            "yarn.preemptor.dice.preemption.multiplier",
            d.multiplier,
            |s| match parse_f64(s)? {
                v if v >= 0.0 => Ok(v),
                _ => Err("expected a non-negative number".into()),
            },
        ),
        max_suspensions: r.get(
            "yarn.preemptor.dice.preemption.max-suspensions",
            d.max_suspensions,
            parse_positive,
        ),
        suspension_timeout_ms: r.get(
            "yarn.preemptor.dice.preemption.suspension-timeout-ms",
            d.suspension_timeout_ms,
            parse_positive_duration_ms,
        ),
    };
    if let Some(min) = dice.min_short_fraction
        && min + dice.max_short_extra_fraction > 1.0
    {
        r.cross_check(
            &[MIN_SHORT, EXTRA],
            "min-short-fraction plus max-short-extra-fraction cannot exceed 1 (the whole cluster)",
        );
    }
    dice
}

/// Docker refuses memory limits below 6 MB.
const DOCKER_MIN_MEMORY_MB: u64 = 6;

fn fraction_above_zero(s: &str) -> Result<f64, String> {
    match parse_f64(s)? {
        v if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("expected a fraction above 0, up to 1".into()),
    }
}

/// A policy that decides by itself (adaptive only dispatches to these).
fn concrete_policy(s: &str) -> Result<PolicyKind, String> {
    match s.parse()? {
        PolicyKind::Adaptive => Err("adaptive cannot dispatch to itself".into()),
        p => Ok(p),
    }
}

fn parse_adaptive_mapping(s: &str) -> Result<Vec<(String, PolicyKind)>, String> {
    let mut out: Vec<(String, PolicyKind)> = Vec::new();
    for pair in parse_list(s) {
        let (app_type, policy) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not applicationType=policy"))?;
        let app_type = app_type.trim();
        if app_type.is_empty() {
            return Err(format!("{pair:?} has no applicationType"));
        }
        if out.iter().any(|(t, _)| t.eq_ignore_ascii_case(app_type)) {
            return Err(format!("applicationType {app_type:?} is mapped twice"));
        }
        out.push((app_type.to_string(), concrete_policy(policy)?));
    }
    Ok(out)
}

fn parse_route(rule: &str) -> Result<RouteRule, String> {
    let shape = || format!("{rule:?} is not tag:<tag>=<queue> or type:<applicationType>=<queue>");
    let (matcher, queue) = rule.split_once('=').ok_or_else(shape)?;
    let (kind, value) = matcher.split_once(':').ok_or_else(shape)?;
    let (value, queue) = (value.trim(), queue.trim());
    if value.is_empty() || queue.is_empty() {
        return Err(shape());
    }
    let matcher = match kind.trim() {
        "tag" => RouteMatch::Tag(value.to_string()),
        "type" => RouteMatch::ApplicationType(value.to_string()),
        _ => return Err(shape()),
    };
    Ok(RouteRule {
        matcher,
        queue: queue.to_string(),
    })
}

fn parse_path(s: &str) -> Result<PathBuf, String> {
    match s.trim() {
        "" => Err("expected a file path".into()),
        p => Ok(PathBuf::from(p)),
    }
}

fn parse_socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| {
        "expected IP:port, e.g. 127.0.0.1:8090 (host names are not resolved here)".into()
    })
}

/// A web address (an RM's, an agent's): `http://` or `https://host:port`, or
/// `host:port` (http, as in yarn.resourcemanager.webapp.address), without a trailing
/// slash.
fn web_address(s: &str) -> Result<String, String> {
    let t = s.trim().trim_end_matches('/');
    match t.strip_prefix("https://") {
        Some(rest) => http_address(rest).map(|u| u.replacen("http://", "https://", 1)),
        None => http_address(t),
    }
}

fn http_address(s: &str) -> Result<String, String> {
    let t = s.trim().trim_end_matches('/');
    let rest = t.strip_prefix("http://").unwrap_or(t);
    if rest.contains("://") {
        return Err(format!(
            "{t:?}: expected host:port, http://host:port or https://host:port"
        ));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("{t:?}: expected host:port or http://host:port"))?;
    if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(format!("{t:?}: expected host:port or http://host:port"));
    }
    Ok(format!("http://{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn conf(pairs: &[(&str, &str)]) -> Configuration {
        let mut xml = String::from("<configuration>\n");
        for (k, v) in pairs {
            xml.push_str(&format!(
                "<property><name>{k}</name><value>{v}</value></property>\n"
            ));
        }
        xml.push_str("</configuration>\n");
        let mut c = Configuration::with_env(HashMap::new());
        c.add_str("preemptor-site.xml", &xml).unwrap();
        c
    }

    fn errors(pairs: &[(&str, &str)]) -> Vec<String> {
        match PreemptorSettings::from_conf(&conf(pairs)) {
            Ok(s) => panic!("accepted {pairs:?}: {s:?}"),
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let s = PreemptorSettings::from_conf(&conf(&[])).unwrap();
        assert_eq!(s, PreemptorSettings::default());
        assert_eq!(s.policy.suspend.footprint, Limits::MIN_FOOTPRINT);
    }

    #[test]
    fn every_kind_of_value_is_read() {
        let s = PreemptorSettings::from_conf(&conf(&[
            (
                "yarn.preemptor.rm.address",
                "rm1:8088, http://rm2.example.com:8088/",
            ),
            ("yarn.preemptor.rm.user-name", " yarn "),
            ("yarn.preemptor.rm.request-timeout-ms", "10s"),
            ("yarn.preemptor.rm.max-response-mb", "256"),
            ("yarn.preemptor.policy", "Immediate"),
            ("yarn.preemptor.monitoring-interval-ms", "1500"),
            ("yarn.preemptor.observe-only", "TRUE"),
            ("yarn.preemptor.max-ignored-over-capacity", "0"),
            ("yarn.preemptor.total-preemption-per-round", "1"),
            ("yarn.preemptor.seed", "0x10"),
            ("yarn.preemptor.suspend.footprint-memory-mb", "128"),
            ("yarn.preemptor.suspend.footprint-cpu-percent", "2.5"),
            ("yarn.preemptor.graceful.step-vcores", "0"),
            ("yarn.preemptor.las.quantum-ms", "1m"),
            ("yarn.preemptor.dice.sizing.model", "sqrt"),
            ("yarn.preemptor.dice.min-short-fraction", "0.02"),
            (
                "yarn.preemptor.adaptive.mapping",
                "MAPREDUCE=kill, spark=las",
            ),
            (
                "yarn.preemptor.agent.addresses",
                "nm1=10.0.0.1:8049,nm2=http://10.0.0.2:9000",
            ),
            ("yarn.preemptor.controller.listen", "0.0.0.0:9090"),
            ("yarn.preemptor.proxy.listen", "127.0.0.1:8089"),
            (
                "yarn.preemptor.proxy.routes",
                "tag:interactive=short, type:MAPREDUCE=long",
            ),
            ("yarn.preemptor.log.format", "json"),
        ]))
        .unwrap();
        assert_eq!(
            s.rm.addresses,
            ["http://rm1:8088", "http://rm2.example.com:8088"]
        );
        assert_eq!(s.rm.user_name.as_deref(), Some("yarn"));
        assert_eq!(s.rm.request_timeout_ms, 10_000);
        assert_eq!(s.rm.max_response_mb, 256);
        assert_eq!(s.policy.kind, PolicyKind::Immediate);
        assert_eq!(s.policy.monitoring_interval_ms, 1500);
        assert!(s.policy.observe_only);
        assert_eq!(s.policy.max_ignored_over_capacity, 0.0);
        assert_eq!(s.policy.total_preemption_per_round, 1.0);
        assert_eq!(s.policy.seed, 16);
        assert_eq!(s.policy.suspend.footprint, Limits::new(128, 25));
        assert_eq!(s.policy.graceful.step, Resource::new(4096, 0));
        assert_eq!(s.policy.las.quantum_ms, 60_000);
        assert_eq!(s.policy.dice.sizing_model, DiceModel::SquareRoot);
        assert_eq!(s.policy.dice.min_short_fraction, Some(0.02));
        assert_eq!(
            s.policy.adaptive.mapping,
            [
                ("MAPREDUCE".to_string(), PolicyKind::Kill),
                ("spark".to_string(), PolicyKind::Las)
            ]
        );
        assert_eq!(
            s.agent.addresses,
            [
                ("nm1".to_string(), "http://10.0.0.1:8049".to_string()),
                ("nm2".to_string(), "http://10.0.0.2:9000".to_string())
            ]
        );
        assert_eq!(s.controller.listen, SocketAddr::from(([0, 0, 0, 0], 9090)));
        assert_eq!(
            s.controller.proxy_listen,
            Some(SocketAddr::from(([127, 0, 0, 1], 8089)))
        );
        assert_eq!(
            s.controller.routes,
            [
                RouteRule {
                    matcher: RouteMatch::Tag("interactive".into()),
                    queue: "short".into()
                },
                RouteRule {
                    matcher: RouteMatch::ApplicationType("MAPREDUCE".into()),
                    queue: "long".into()
                }
            ]
        );
        assert_eq!(s.log.format, LogFormat::Json);
    }

    #[test]
    fn bad_values_are_all_reported_with_their_line() {
        let e = errors(&[
            ("yarn.preemptor.policy", "suspend"),
            ("yarn.preemptor.monitoring-interval-ms", "0"),
            ("yarn.preemptor.observe-only", "yes"),
            ("yarn.preemptor.natural-termination-factor", "0"),
            ("yarn.preemptor.agent.port", "70000"),
            ("yarn.preemptor.rm.address", "ftp://rm:8443"),
            ("yarn.preemptor.controller.listen", "localhost:8090"),
            ("yarn.preemptor.suspend.footprint-memory-mb", "4"),
            ("yarn.preemptor.suspend.footprint-cpu-percent", "0.5"),
            ("yarn.preemptor.adaptive.fallback", "adaptive"),
            ("yarn.preemptor.proxy.routes", "queue:x=y"),
            ("yarn.preemptor.log.format", "xml"),
            ("yarn.preemptor.rm.max-response-mb", "0"),
        ]);
        assert_eq!(e.len(), 13, "{e:#?}");
        for (i, msg) in e.iter().enumerate() {
            assert!(
                msg.starts_with(&format!("preemptor-site.xml:{}:", i + 2)),
                "{msg}"
            );
        }
        assert!(
            e[0].contains("yarn.preemptor.policy = \"suspend\": unknown policy"),
            "{}",
            e[0]
        );
        assert!(e[5].contains("expected host:port"), "{}", e[5]);
    }

    #[test]
    fn a_secure_rm_takes_https_a_ca_and_a_principal_with_its_keytab() {
        const PRINCIPAL: &str = "yarn.preemptor.rm.kerberos.principal";
        const KEYTAB: &str = "yarn.preemptor.rm.kerberos.keytab";
        let s = PreemptorSettings::from_conf(&conf(&[
            ("yarn.preemptor.rm.address", "https://rm1:8090, rm2:8088"),
            (
                "yarn.preemptor.rm.tls.ca-file",
                "/etc/preemptor/yarn-ca.pem",
            ),
            ("yarn.preemptor.rm.tls.verify-hostname", "false"),
            (PRINCIPAL, " preemptor/rm1@EXAMPLE.COM "),
            (KEYTAB, "/etc/preemptor/preemptor.keytab"),
        ]))
        .unwrap();
        assert_eq!(s.rm.addresses, ["https://rm1:8090", "http://rm2:8088"]);
        assert_eq!(
            s.rm.tls,
            YarnTls {
                ca_file: Some("/etc/preemptor/yarn-ca.pem".into()),
                verify_hostname: false
            }
        );
        assert_eq!(
            s.rm.kerberos,
            Some(KerberosSettings {
                principal: "preemptor/rm1@EXAMPLE.COM".into(),
                keytab: "/etc/preemptor/preemptor.keytab".into()
            })
        );
        for half in [PRINCIPAL, KEYTAB] {
            let e = errors(&[(half, "x")]);
            assert_eq!(e.len(), 1, "{e:?}");
            assert!(e[0].contains("needs both"), "{}", e[0]);
        }
        let e = errors(&[(PRINCIPAL, "pre emptor@X"), (KEYTAB, "/k")]);
        assert!(e[0].contains("no spaces"), "{e:?}");
    }

    #[test]
    fn https_agent_addresses_need_the_agents_ca() {
        const ADDRESSES: &str = "yarn.preemptor.agent.addresses";
        let e = errors(&[(ADDRESSES, "nm1=https://10.0.0.1:8049")]);
        assert_eq!(e.len(), 1);
        assert!(
            e[0].contains("yarn.preemptor.agent.tls.ca-file"),
            "{}",
            e[0]
        );
        let s = PreemptorSettings::from_conf(&conf(&[
            (ADDRESSES, "nm1=https://10.0.0.1:8049, nm2=10.0.0.2:8049"),
            ("yarn.preemptor.agent.tls.ca-file", "/etc/preemptor/ca.crt"),
        ]))
        .unwrap();
        assert_eq!(
            s.agent.addresses,
            [
                ("nm1".to_string(), "https://10.0.0.1:8049".to_string()),
                ("nm2".to_string(), "http://10.0.0.2:8049".to_string())
            ]
        );
        assert_eq!(
            s.agent.tls_ca_file.as_deref(),
            Some(std::path::Path::new("/etc/preemptor/ca.crt"))
        );
    }

    #[test]
    fn rules_across_keys_are_checked() {
        let e = errors(&[
            ("yarn.preemptor.graceful.step-memory-mb", "0"),
            ("yarn.preemptor.graceful.step-vcores", "0"),
        ]);
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("step-memory-mb"), "{}", e[0]);
        let e = errors(&[
            ("yarn.preemptor.dice.min-short-fraction", "0.95"),
            ("yarn.preemptor.dice.max-short-extra-fraction", "0.08"),
        ]);
        assert!(e[0].contains("cannot exceed 1"), "{}", e[0]);
        let e = errors(&[("yarn.preemptor.adaptive.mapping", "SPARK=kill,spark=las")]);
        assert!(e[0].contains("mapped twice"), "{}", e[0]);
    }

    #[test]
    fn unknown_keys_get_a_suggestion() {
        let c = conf(&[
            ("yarn.preemptor.monitoring-interval", "3000"),
            ("yarn.preemptor.las.quantum", "10s"),
            ("yarn.preemptor.completely.different.thing", "1"),
            ("yarn.resourcemanager.address", "not ours"),
        ]);
        let (s, w) = PreemptorSettings::from_conf_with_warnings(&c).unwrap();
        assert_eq!(s, PreemptorSettings::default());
        let w: Vec<String> = w.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(
            w.iter().any(|w| w.starts_with("preemptor-site.xml:3:")
                && w.ends_with("(did you mean yarn.preemptor.las.quantum-ms?)")),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("did you mean yarn.preemptor.monitoring-interval-ms?")),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|w| w.ends_with("unknown key yarn.preemptor.completely.different.thing")),
            "{w:#?}"
        );
    }

    #[test]
    fn variables_and_their_errors_reach_settings() {
        let mut env = HashMap::new();
        env.insert("RM_HOST".to_string(), "rm.example.com".to_string());
        let mut c = Configuration::with_env(env);
        c.add_str(
            "p.xml",
            "<configuration>\
             <property><name>yarn.preemptor.rm.address</name><value>${env.RM_HOST}:8088</value></property>\
             <property><name>yarn.preemptor.agent.token-file</name><value>${token.dir}/agent.token</value></property>\
             </configuration>",
        )
        .unwrap();
        let e = PreemptorSettings::from_conf(&c).unwrap_err();
        assert_eq!(e.errors.len(), 1);
        assert!(
            matches!(e.errors[0], ConfigError::UnresolvedVariable { ref var, .. } if var == "token.dir")
        );
    }

    #[test]
    fn known_keys_are_unique_and_prefixed() {
        let keys = PreemptorSettings::known_keys();
        let unique: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len());
        assert!(keys.iter().all(|k| k.starts_with(PREFIX)));
        assert!(keys.len() >= 40, "{}", keys.len());
    }
}
