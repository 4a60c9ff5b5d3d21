//! Schedulers: names, parameters, and the dispatch that runs one over a workload.

pub mod central;
pub mod kairos;
mod lwl;
pub mod pigeon;
pub mod probe;
mod quiet;
pub mod tiresias;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cluster::{JobClass, PolicyKind};
use crate::config::settings::{LasSettings, PolicySettings};
use crate::resources::Resource;
use crate::sim::workload::{MICROS_PER_MILLI, MICROS_PER_SEC, Time, TraceFamily, Workload};

/// Every scheduler `preemptor sim` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedulerKind {
    /// One central FIFO queue, no preemption.
    Fifo,
    /// BIG-C's reserve: a static share of the cluster for short jobs only.
    Reserve,
    /// YARN's capacity scheduler with a preemption policy from src/policy/.
    Capacity(PolicyKind),
    /// Batch sampling with late binding.
    Sparrow,
    /// Hybrid: short partition, central LWL for long jobs, probes and stealing for short.
    Hawk,
    /// Hybrid: Hawk's partitions plus succinct state sharing, sticky probes and SRPT.
    Eagle,
    /// Groups with masters, reserved workers, weighted fair queues.
    Pigeon,
    /// One-node sampling with task hopping.
    Tiresias,
    /// Central N+Q admission with a variance tie-break, and LAS on every node.
    Kairos,
    /// Dice (elastic sizing and opportunistic preemption) layered on hawk.
    HawkDice,
    /// Dice layered on eagle.
    EagleDice,
}

impl SchedulerKind {
    pub fn all() -> Vec<SchedulerKind> {
        let mut v = vec![SchedulerKind::Fifo, SchedulerKind::Reserve];
        v.extend(PolicyKind::ALL.into_iter().map(SchedulerKind::Capacity));
        v.extend([
            SchedulerKind::Sparrow,
            SchedulerKind::Hawk,
            SchedulerKind::Eagle,
            SchedulerKind::Pigeon,
            SchedulerKind::Tiresias,
            SchedulerKind::Kairos,
            SchedulerKind::HawkDice,
            SchedulerKind::EagleDice,
        ]);
        v
    }

    pub fn name(&self) -> String {
        match self {
            SchedulerKind::Fifo => "fifo".into(),
            SchedulerKind::Reserve => "reserve".into(),
            SchedulerKind::Capacity(PolicyKind::None) => "capacity".into(),
            SchedulerKind::Capacity(p) => format!("capacity+{}", p.name()),
            SchedulerKind::Sparrow => "sparrow".into(),
            SchedulerKind::Hawk => "hawk".into(),
            SchedulerKind::Eagle => "eagle".into(),
            SchedulerKind::Pigeon => "pigeon".into(),
            SchedulerKind::Tiresias => "tiresias".into(),
            SchedulerKind::Kairos => "kairos".into(),
            SchedulerKind::HawkDice => "hawk+dice".into(),
            SchedulerKind::EagleDice => "eagle+dice".into(),
        }
    }

    /// The src/policy/ code it runs, if any.
    pub fn policy_needs(&self) -> Option<&'static str> {
        match self {
            SchedulerKind::Capacity(PolicyKind::None)
            | SchedulerKind::Fifo
            | SchedulerKind::Reserve
            | SchedulerKind::Sparrow
            | SchedulerKind::Hawk
            | SchedulerKind::Eagle
            | SchedulerKind::Pigeon
            | SchedulerKind::Tiresias => None,
            SchedulerKind::Capacity(_) => Some("policy::decide"),
            SchedulerKind::Kairos => Some("policy::las"),
            SchedulerKind::HawkDice | SchedulerKind::EagleDice => Some("policy::dice"),
        }
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for SchedulerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "capacity+none" {
            return Ok(SchedulerKind::Capacity(PolicyKind::None));
        }
        SchedulerKind::all()
            .into_iter()
            .find(|k| k.name() == t)
            .ok_or_else(|| {
                let names: Vec<String> = SchedulerKind::all().iter().map(|k| k.name()).collect();
                format!(
                    "unknown scheduler {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// A leaf queue of the simulated capacity scheduler, in shares of the cluster.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueSpec {
    pub name: String,
    pub capacity: f64,
    pub maximum: f64,
    /// Jobs of this class go here when the trace does not name a queue.
    pub class: Option<JobClass>,
}

impl QueueSpec {
    pub fn new(name: &str, capacity: f64, maximum: f64, class: Option<JobClass>) -> QueueSpec {
        QueueSpec {
            name: name.into(),
            capacity,
            maximum,
            class,
        }
    }
}

impl FromStr for QueueSpec {
    type Err = String;
    /// `NAME=CAPACITY[:MAXIMUM[:short|long]]`, in percent: `short=95:100:short`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("queue {s:?}: expected NAME=CAPACITY[:MAXIMUM[:short|long]]"))?;
        let name = name.trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("queue {s:?}: the name must be a non-empty word"));
        }
        let mut parts = rest.split(':');
        let pct = |v: Option<&str>, what: &str| -> Result<Option<f64>, String> {
            match v.map(str::trim) {
                None | Some("") => Ok(None),
                Some(v) => match v.parse::<f64>() {
                    Ok(x) if (0.0..=100.0).contains(&x) => Ok(Some(x / 100.0)),
                    _ => Err(format!(
                        "queue {s:?}: {what} must be a percentage 0-100, found {v:?}"
                    )),
                },
            }
        };
        let capacity = pct(parts.next(), "capacity")?
            .ok_or_else(|| format!("queue {s:?}: missing capacity"))?;
        let maximum = pct(parts.next(), "maximum")?.unwrap_or(1.0);
        if maximum < capacity {
            return Err(format!("queue {s:?}: maximum is below capacity"));
        }
        let class = match parts.next().map(str::trim) {
            None | Some("") => match name {
                "short" => Some(JobClass::Short),
                "long" => Some(JobClass::Long),
                _ => None,
            },
            Some(c) => Some(
                c.parse::<JobClass>()
                    .map_err(|e| format!("queue {s:?}: {e}"))?,
            ),
        };
        if parts.next().is_some() {
            return Err(format!("queue {s:?}: too many ':' fields"));
        }
        Ok(QueueSpec::new(name, capacity, maximum, class))
    }
}

/// Every scheduler parameter, with the papers' defaults (docs/algorithms.md). `None` means
/// "the trace family's value".
#[derive(Clone, Debug, PartialEq)]
pub struct SchedParams {
    /// Capacity scheduler leaf queues (default: BIG-C's short 95% / long 5%, both up to
    /// 100%).
    pub queues: Vec<QueueSpec>,
    /// reserve: share of the cluster kept for short jobs.
    pub reserve_short: f64,
    /// Hawk/Eagle short partition (share of nodes); `None`: the trace family's (Yahoo
    /// and Facebook 2%, Cloudera 9%, Google 17%), else the short jobs' share of
    /// task-seconds.
    pub short_partition: Option<f64>,
    /// Probes per task (Sparrow, Hawk, Eagle).
    pub probe_ratio: u32,
    /// Eagle's minimum probes per job (K).
    pub eagle_min_probes: u32,
    /// Hawk: nodes an idle node contacts to steal from, and probes taken at most.
    pub steal_attempts: u32,
    pub steal_limit: u32,
    /// Eagle: SRPT bypass cap, in multiples of a task estimate.
    pub bypass_cap: f64,
    /// Pigeon: workers per group, reserved share (`None`: the family's: Yahoo and
    /// Facebook 2%, Cloudera 7%, Google 9%), and the fair queueing weight W (0: strict
    /// priority).
    pub pigeon_group: u32,
    pub pigeon_reserved: Option<f64>,
    pub pigeon_weight: u32,
    /// LAS (kairos and capacity+las): quantum W (`None`: the family's, 100 s for Yahoo,
    /// else `yarn.preemptor.las.quantum-ms`) and Q extra containers per node (`None`: 2
    /// on one-core nodes as in the thesis' simulations, else
    /// `yarn.preemptor.las.extra-slots`).
    pub las_quantum: Option<Time>,
    pub las_extra_slots: Option<u32>,
    /// Tiresias: nodes a task visits before going back to its scheduler, and the retry
    /// back-off.
    pub hop_limit: u32,
    pub retry_delay: Time,
    pub max_retry_delay: Time,
    /// Policy parameters for capacity+<policy>, kairos and Dice.
    pub policy: PolicySettings,
    /// capacity+<policy>: which monitoring ticks run `policy::decide`.
    pub policy_ticks: PolicyTicks,
}

/// Which monitoring ticks of capacity+<policy> run `policy::decide`. A tick whose plan
/// is provably empty (nothing squeezed or marked, nothing to reclaim; see
/// `sched/quiet.rs`) changes nothing, so skipping it gives the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyTicks {
    /// Skip provably idle ticks (release builds).
    SkipIdle,
    /// Run every tick and fail the run if a tick judged idle would have acted (debug
    /// builds, so that every test checks every skip).
    VerifyIdle,
    /// Run every tick, as the live controller does.
    Every,
}

impl Default for PolicyTicks {
    fn default() -> Self {
        if cfg!(debug_assertions) {
            PolicyTicks::VerifyIdle
        } else {
            PolicyTicks::SkipIdle
        }
    }
}

impl Default for SchedParams {
    fn default() -> Self {
        SchedParams {
            queues: vec![
                QueueSpec::new("short", 0.95, 1.0, Some(JobClass::Short)),
                QueueSpec::new("long", 0.05, 1.0, Some(JobClass::Long)),
            ],
            reserve_short: 0.6,
            short_partition: None,
            probe_ratio: 2,
            eagle_min_probes: 20,
            steal_attempts: 10,
            steal_limit: 10_000,
            bypass_cap: 5.0,
            pigeon_group: 100,
            pigeon_reserved: None,
            pigeon_weight: 20,
            las_quantum: None,
            las_extra_slots: None,
            hop_limit: 100,
            retry_delay: MICROS_PER_SEC,
            max_retry_delay: 64 * MICROS_PER_SEC,
            policy: PolicySettings {
                // The papers' schedulers cap no suspension: a simulated task has no
                // framework timeout to outlive.
                suspend: crate::config::settings::SuspendSettings {
                    max_duration_ms: 0,
                    ..PolicySettings::default().suspend
                },
                ..PolicySettings::default()
            },
            policy_ticks: PolicyTicks::default(),
        }
    }
}

impl SchedParams {
    /// Leaf queues a central scheduler of `kind` runs with.
    pub(crate) fn leaves_for(&self, kind: SchedulerKind) -> Vec<QueueSpec> {
        match kind {
            SchedulerKind::Fifo => vec![QueueSpec::new("default", 1.0, 1.0, None)],
            SchedulerKind::Reserve => vec![
                QueueSpec::new("short", self.reserve_short, 1.0, Some(JobClass::Short)),
                QueueSpec::new(
                    "long",
                    1.0 - self.reserve_short,
                    1.0 - self.reserve_short,
                    Some(JobClass::Long),
                ),
            ],
            _ => self.queues.clone(),
        }
    }

    /// Nodes in the short partition of an `n`-node cluster.
    pub(crate) fn short_nodes(&self, wl: &Workload, n: u32) -> u32 {
        let share = family_or(self.short_partition, wl.family, wl).clamp(0.0, 1.0);
        let k = (share * n as f64).floor() as u32;
        if share > 0.0 { k.max(1) } else { 0 }
    }

    pub(crate) fn probe_config(
        &self,
        kind: SchedulerKind,
        wl: &Workload,
        n: u32,
    ) -> probe::ProbeConfig {
        let variant = match kind {
            SchedulerKind::Hawk | SchedulerKind::HawkDice => probe::Variant::Hawk,
            SchedulerKind::Eagle | SchedulerKind::EagleDice => probe::Variant::Eagle,
            _ => probe::Variant::Sparrow,
        };
        let dice = matches!(kind, SchedulerKind::HawkDice | SchedulerKind::EagleDice).then(|| {
            probe::DiceConfig {
                settings: self.policy.dice.clone(),
                footprint: self.policy.suspend.footprint,
            }
        });
        probe::ProbeConfig {
            variant,
            short_nodes: if variant == probe::Variant::Sparrow {
                0
            } else {
                self.short_nodes(wl, n)
            },
            probe_ratio: self.probe_ratio,
            min_probes: if variant == probe::Variant::Eagle {
                self.eagle_min_probes
            } else {
                0
            },
            steal_attempts: if variant == probe::Variant::Hawk {
                self.steal_attempts
            } else {
                0
            },
            steal_limit: self.steal_limit,
            bypass_cap: self.bypass_cap,
            dice,
        }
    }

    pub(crate) fn pigeon_config(&self, wl: &Workload) -> pigeon::PigeonConfig {
        pigeon::PigeonConfig {
            group_size: self.pigeon_group.max(1),
            reserved: self
                .pigeon_reserved
                .or(wl.family.pigeon_reserved())
                .unwrap_or_else(|| family_or(None, wl.family, wl)),
            weight: self.pigeon_weight,
        }
    }

    /// LAS's W and Q for both `kairos` and `capacity+las`, so that the two compare:
    /// the given values, else the family's W (the thesis' simulations) and Q = 2 on
    /// one-core nodes, else the policy's YARN defaults.
    pub(crate) fn las_settings(&self, wl: &Workload, node: Resource) -> LasSettings {
        let mut las = self.policy.las.clone();
        las.quantum_ms = match self.las_quantum {
            Some(q) => q / MICROS_PER_MILLI,
            None => wl
                .family
                .kairos_quantum_secs()
                .map_or(las.quantum_ms, |s| (s * 1000.0) as u64),
        }
        .max(1);
        las.extra_slots =
            self.las_extra_slots
                .unwrap_or(if node.vcores == 1 { 2 } else { las.extra_slots });
        las
    }

    pub(crate) fn kairos_config(&self, wl: &Workload, node: Resource) -> kairos::KairosConfig {
        kairos::KairosConfig {
            las: self.las_settings(wl, node),
            footprint: self.policy.suspend.footprint,
        }
    }

    /// The policy settings capacity+<policy> runs with: `policy`, with LAS's W and Q as
    /// [`Self::las_settings`] gives them.
    pub(crate) fn policy_settings(&self, wl: &Workload, node: Resource) -> PolicySettings {
        PolicySettings {
            las: self.las_settings(wl, node),
            ..self.policy.clone()
        }
    }

    pub(crate) fn tiresias_config(&self) -> tiresias::TiresiasConfig {
        tiresias::TiresiasConfig {
            hop_limit: self.hop_limit.max(1),
            retry_delay: self.retry_delay.max(1),
            max_retry_delay: self.max_retry_delay.max(self.retry_delay),
        }
    }

    pub(crate) fn monitoring_interval(&self) -> Time {
        self.policy.monitoring_interval_ms.max(1) * MICROS_PER_MILLI
    }
}

/// The trace family's value of a parameter, or a fallback computed from the workload.
pub(crate) fn family_or(v: Option<f64>, family: TraceFamily, wl: &Workload) -> f64 {
    v.or(family.short_partition())
        .unwrap_or_else(|| wl.short_task_seconds_share())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_names_round_trip() {
        for k in SchedulerKind::all() {
            assert_eq!(k.name().parse::<SchedulerKind>().unwrap(), k);
        }
        assert_eq!(
            "capacity+none".parse::<SchedulerKind>(),
            Ok(SchedulerKind::Capacity(PolicyKind::None))
        );
        let e = "hawkk".parse::<SchedulerKind>().unwrap_err();
        assert!(e.contains("fifo") && e.contains("capacity+graceful"), "{e}");
    }

    #[test]
    fn queue_specs_parse() {
        let q: QueueSpec = "short=95:100".parse().unwrap();
        assert_eq!(q, QueueSpec::new("short", 0.95, 1.0, Some(JobClass::Short)));
        let q: QueueSpec = "etl=30:60:long".parse().unwrap();
        assert_eq!(q, QueueSpec::new("etl", 0.3, 0.6, Some(JobClass::Long)));
        let q: QueueSpec = "adhoc=20".parse().unwrap();
        assert_eq!(q.class, None);
        for (bad, want) in [
            ("short", "expected NAME=CAPACITY"),
            ("a=120", "percentage 0-100"),
            ("a=50:40", "maximum is below capacity"),
            ("a=50:60:medium", "unknown job class"),
            ("=5", "non-empty word"),
        ] {
            let e = bad.parse::<QueueSpec>().unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
