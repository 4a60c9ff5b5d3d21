//! What the controller tells the outside: the preemption log records, tick summaries,
//! the latest status and the counters behind `/metrics`. The tick loop writes here; the
//! API, the dashboard, `preemptor logs` and the demo read from here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::history::{History, Sample};
use super::live_queues::QueueSource;
use crate::cluster::{ContainerState, JobClass, Partition};
use crate::resources::{Limits, Resource};
use crate::sync::lock;
use crate::yarn::dto::YarnApplicationState;

/// How an action ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum Outcome {
    /// The agent or the RM confirmed the target state.
    Applied,
    /// `observe_only`: logged, not carried out.
    Observed,
    /// Not carried out; it is retried next tick while the plan still wants it.
    Failed { reason: String },
}

/// One line of the preemption log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionRecord {
    /// Unix time in milliseconds when the outcome was known.
    pub at_ms: u64,
    /// The policy that chose the action (`graceful`, `kill`, ...).
    pub policy: String,
    /// `suspend`, `shrink`, `resume`, `kill`, `set-node-capacity`, `set-node-partition`.
    pub action: String,
    pub container: Option<String>,
    pub application: Option<String>,
    pub queue: Option<String>,
    pub node: Option<String>,
    /// Rendered limits, capacity or partition before and after, e.g.
    /// `<4096 MB, 2 vcores>` -> `<64 MB, 0.010 vcores>`.
    pub before: String,
    pub after: String,
    /// `before` and `after` as numbers, for log pipelines that sum them.
    #[serde(flatten)]
    pub amounts: Amounts,
    pub reason: String,
    /// From the event that triggered the tick (a submission, an agent event, the timer)
    /// to the outcome.
    pub latency_ms: Option<u64>,
    pub outcome: Outcome,
}

/// Memory and vcores before and after an action: a container's limits (fractional
/// vcores, as a CPU quota), or a node's advertised capacity. Absent where there is no
/// amount: after a kill, and for partition changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Amounts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_vcores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_vcores: Option<f64>,
}

/// What one observe -> decide -> act round did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TickSummary {
    pub at_ms: u64,
    /// `timer`, `submission`, `rm-submission`, `agent-event`, `manual`, `reload`,
    /// `operator`, `shutdown`.
    pub trigger: String,
    pub duration_ms: f64,
    /// Actions sent out.
    pub actions: usize,
    /// Actions sent by earlier ticks that came back failed since the last summary.
    pub failed: usize,
    /// Actions sent more than a monitoring interval ago and still not back.
    #[serde(default)]
    pub late: usize,
}

/// Everything the controller streams on `/api/v1/events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ControllerEvent {
    Action(Box<ActionRecord>),
    Tick(TickSummary),
    /// A short application got its first container after waiting `wait_ms`.
    ShortWait {
        at_ms: u64,
        application: String,
        wait_ms: u64,
    },
    /// Something an operator should see that is not an action: the RM unreachable, a
    /// schema surprise, an agent down.
    Warning {
        at_ms: u64,
        message: String,
    },
}

impl ControllerEvent {
    /// The SSE `event:` name.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerEvent::Action(_) => "action",
            ControllerEvent::Tick(_) => "tick",
            ControllerEvent::ShortWait { .. } => "short-wait",
            ControllerEvent::Warning { .. } => "warning",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    pub path: String,
    pub class: Option<JobClass>,
    pub guaranteed: Resource,
    pub maximum: Resource,
    pub used: Resource,
    pub pending: Resource,
    pub preemption_disabled: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRow {
    pub id: String,
    pub application: String,
    pub queue: String,
    pub allocated: Resource,
    pub current: Limits,
    pub state: ContainerState,
    /// When a tick first saw the container suspended or shrunk (to within one monitoring
    /// interval of the action); `None` while it runs at its allocation.
    #[serde(default)]
    pub held_since_ms: Option<u64>,
}

/// The lease this controller holds on a node's agent, from its last renewal.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRow {
    /// Who the agent says holds its lease.
    pub holder: Option<String>,
    /// When the last renewal succeeded, and how long the lease had left then.
    pub renewed_at_ms: Option<u64>,
    pub remaining_ms: Option<u64>,
    /// Why the latest renewal failed; `None` once one succeeds again.
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub id: String,
    pub capacity: Resource,
    pub advertised: Resource,
    pub partition: Partition,
    /// The agent that acts on this node, if one is known.
    pub agent: Option<String>,
    pub agent_reachable: bool,
    /// Filled when the status is served (`/api/v1/status`), from the lease renewals.
    #[serde(default)]
    pub lease: Option<LeaseRow>,
    pub containers: Vec<ContainerRow>,
}

/// `/api/v1/status`: the latest observation and what Preemptor holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub at_ms: u64,
    pub policy: String,
    pub observe_only: bool,
    /// The RM address that answered last.
    pub rm: String,
    pub rm_reachable: bool,
    pub queues: Vec<QueueStatus>,
    pub nodes: Vec<NodeStatus>,
    /// Containers currently suspended, and shrunk, across the cluster.
    pub suspended: usize,
    pub shrunk: usize,
    /// Resources currently held back from long jobs.
    pub reclaimed: Resource,
    /// Where the queue tree came from: the RM's scheduler, or capacity-scheduler.xml
    /// when the RM listed no queue.
    #[serde(default)]
    pub queue_source: QueueSource,
    /// Where capacity-scheduler.xml and the RM's live queues differ.
    #[serde(default)]
    pub queue_disagreements: Vec<String>,
    /// RUNNING and ACCEPTED applications.
    #[serde(default)]
    pub applications: Vec<AppRow>,
    /// Applications and containers the view could not place, and why.
    #[serde(default)]
    pub skipped: Vec<String>,
    /// The latest tick's summary; filled when the status is served.
    #[serde(default)]
    pub last_tick: Option<TickSummary>,
    /// While set, nothing new is taken: an operator's `preemptor resume --all` or
    /// `restore-capacities`.
    #[serde(default)]
    pub hold_off: Option<HoldOff>,
    /// Containers an operator resumed (`preemptor resume CONTAINER`): never taken again.
    #[serde(default)]
    pub exempt: Vec<String>,
}

/// An operator's hold-off: until `until_ms`, held containers are resumed, raised nodes
/// restored, and nothing new is taken.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldOff {
    pub until_ms: u64,
    /// The command that set it: `resume --all` or `restore-capacities`.
    pub by: String,
}

/// One application of `/api/v1/status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppRow {
    pub id: String,
    pub queue: String,
    pub class: JobClass,
    pub state: YarnApplicationState,
    /// When the controller first saw the application: in a tick, or through the proxy.
    pub seen_at_ms: u64,
    /// The RM's `startedTime`, its submission time.
    pub started_time_ms: u64,
}

/// A Prometheus histogram with fixed upper bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    /// Cumulative-free counts per bucket; `counts[bounds.len()]` is `+Inf`.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &[f64]) -> Histogram {
        Histogram {
            bounds: bounds.to_vec(),
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }
}

/// Counters behind `/metrics`.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    /// Applied actions by (policy, action).
    pub actions: BTreeMap<(String, String), u64>,
    /// Failed actions by (policy, action).
    pub failures: BTreeMap<(String, String), u64>,
    /// Memory and vcores held back, integrated over time (MB·s, vcore·s).
    pub reclaimed_mb_seconds: f64,
    pub reclaimed_vcore_seconds: f64,
    /// Seconds a short application waited for its first container.
    pub short_wait_seconds: Histogram,
    /// Seconds one tick took, observe to record.
    pub tick_seconds: Histogram,
    pub ticks: u64,
    pub rm_errors: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            actions: BTreeMap::new(),
            failures: BTreeMap::new(),
            reclaimed_mb_seconds: 0.0,
            reclaimed_vcore_seconds: 0.0,
            short_wait_seconds: Histogram::new(&[
                0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
            ]),
            tick_seconds: Histogram::new(&[
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            ticks: 0,
            rm_errors: 0,
        }
    }
}

/// Shared between the tick loop (writer) and every reader. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    events: broadcast::Sender<ControllerEvent>,
    status: RwLock<Arc<StatusReport>>,
    metrics: Mutex<Metrics>,
    last_tick: Mutex<Option<TickSummary>>,
    /// By agent.
    leases: Mutex<BTreeMap<String, LeaseRow>>,
    history: Mutex<History>,
}

/// Events a slow SSE reader may fall behind by before it misses some.
const EVENT_BUFFER: usize = 4096;

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    pub fn new() -> Hub {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        Hub {
            inner: Arc::new(Inner {
                events,
                status: RwLock::new(Arc::new(StatusReport::default())),
                metrics: Mutex::new(Metrics::default()),
                last_tick: Mutex::new(None),
                leases: Mutex::new(BTreeMap::new()),
                history: Mutex::new(History::default()),
            }),
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<ControllerEvent> {
        self.inner.events.subscribe()
    }

    /// Counts the action, writes it to the preemption log target and streams it.
    pub fn record_action(&self, record: ActionRecord) {
        super::log::emit(&record);
        {
            let mut m = self.metrics_lock();
            let key = (record.policy.clone(), record.action.clone());
            match record.outcome {
                Outcome::Applied => *m.actions.entry(key).or_insert(0) += 1,
                Outcome::Failed { .. } => *m.failures.entry(key).or_insert(0) += 1,
                Outcome::Observed => {}
            }
        }
        self.publish(ControllerEvent::Action(Box::new(record)));
    }

    pub fn record_tick(&self, summary: TickSummary) {
        {
            let mut m = self.metrics_lock();
            m.tick_seconds.observe(summary.duration_ms / 1000.0);
            m.ticks += 1;
        }
        *lock(&self.inner.last_tick) = Some(summary.clone());
        self.publish(ControllerEvent::Tick(summary));
    }

    pub fn record_short_wait(&self, at_ms: u64, application: String, wait_ms: u64) {
        self.metrics_lock()
            .short_wait_seconds
            .observe(wait_ms as f64 / 1000.0);
        self.publish(ControllerEvent::ShortWait {
            at_ms,
            application,
            wait_ms,
        });
    }

    pub fn warn(&self, at_ms: u64, message: String) {
        self.publish(ControllerEvent::Warning { at_ms, message });
    }

    /// Adds `held` (what is reclaimed right now, as limits so that a suspension's 0.99
    /// vcore counts) integrated over `seconds`.
    pub fn add_reclaimed(&self, held: Limits, seconds: f64) {
        let mut m = self.metrics_lock();
        m.reclaimed_mb_seconds += held.memory_mb as f64 * seconds;
        m.reclaimed_vcore_seconds += f64::from(held.cpu_millis) / 1000.0 * seconds;
    }

    pub fn count_rm_error(&self) {
        self.metrics_lock().rm_errors += 1;
    }

    /// The tick's observation; also a sample of the dashboard's history.
    pub fn set_status(&self, status: StatusReport) {
        lock(&self.inner.history).record(&status);
        let mut s = self
            .inner
            .status
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *s = Arc::new(status);
    }

    /// The history's samples, oldest first.
    pub fn history(&self) -> Vec<Sample> {
        lock(&self.inner.history).samples()
    }

    pub fn status(&self) -> Arc<StatusReport> {
        self.inner
            .status
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The latest status with the latest tick and each node's lease: what
    /// `/api/v1/status` serves.
    pub fn full_status(&self) -> StatusReport {
        let mut s = self.status().as_ref().clone();
        s.last_tick = lock(&self.inner.last_tick).clone();
        let leases = lock(&self.inner.leases);
        for n in &mut s.nodes {
            n.lease = n.agent.as_ref().and_then(|a| leases.get(a)).cloned();
        }
        s
    }

    /// Records how renewing `agent`'s lease went.
    pub fn record_lease(
        &self,
        agent: &str,
        at_ms: u64,
        outcome: Result<(Option<String>, u64), String>,
    ) {
        let mut leases = lock(&self.inner.leases);
        let row = leases.entry(agent.to_string()).or_default();
        match outcome {
            Ok((holder, remaining_ms)) => {
                *row = LeaseRow {
                    holder,
                    renewed_at_ms: Some(at_ms),
                    remaining_ms: Some(remaining_ms),
                    error: None,
                }
            }
            Err(e) => row.error = Some(e),
        }
    }

    /// Forgets the leases of agents no longer in the view.
    pub fn retain_leases(&self, agents: &std::collections::BTreeSet<String>) {
        lock(&self.inner.leases).retain(|a, _| agents.contains(a));
    }

    pub fn metrics(&self) -> Metrics {
        self.metrics_lock().clone()
    }

    fn publish(&self, event: ControllerEvent) {
        // No subscriber is not an error: the log goes to tracing regardless.
        let _ = self.inner.events.send(event);
    }

    fn metrics_lock(&self) -> std::sync::MutexGuard<'_, Metrics> {
        lock(&self.inner.metrics)
    }
}

/// One preemption log record for tests of the hub, the log and the dashboard.
#[cfg(test)]
pub(crate) fn sample_record(outcome: Outcome) -> ActionRecord {
    ActionRecord {
        at_ms: 1_795_277_607_123,
        policy: "graceful".into(),
        action: "shrink".into(),
        container: Some("container_1_0001_01_000002".into()),
        application: Some("application_1_0001".into()),
        queue: Some("root.long".into()),
        node: Some("nm1:8042".into()),
        before: "<4096 MB, 2 vcores>".into(),
        after: "<2048 MB, 1 vcores>".into(),
        amounts: Amounts {
            before_memory_mb: Some(4096),
            before_vcores: Some(2.0),
            after_memory_mb: Some(2048),
            after_vcores: Some(1.0),
        },
        reason: "queue root.short under guarantee".into(),
        latency_ms: Some(12),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::sample_record as record;
    use super::*;

    #[test]
    fn actions_are_counted_by_outcome_and_streamed() {
        let hub = Hub::new();
        let mut rx = hub.subscribe();
        hub.record_action(record(Outcome::Applied));
        hub.record_action(record(Outcome::Failed {
            reason: "agent timed out".into(),
        }));
        hub.record_action(record(Outcome::Observed));
        let m = hub.metrics();
        let key = ("graceful".to_string(), "shrink".to_string());
        assert_eq!(m.actions.get(&key), Some(&1));
        assert_eq!(m.failures.get(&key), Some(&1));
        for _ in 0..3 {
            assert_eq!(rx.try_recv().map(|e| e.name()), Ok("action"));
        }
    }

    #[test]
    fn reclaimed_cpu_counts_fractions_of_a_vcore() {
        let hub = Hub::new();
        // Two containers suspended from 1 vcore to 0.01 for 10 s.
        hub.add_reclaimed(Limits::new(0, 1980), 10.0);
        let m = hub.metrics();
        assert!((m.reclaimed_vcore_seconds - 19.8).abs() < 1e-9);
        assert_eq!(m.reclaimed_mb_seconds, 0.0);
    }

    #[test]
    fn histogram_puts_values_in_the_first_bucket_that_holds_them() {
        let mut h = Histogram::new(&[1.0, 5.0]);
        h.observe(0.5);
        h.observe(1.0);
        h.observe(3.0);
        h.observe(60.0);
        assert_eq!(h.counts, vec![2, 1, 1]);
        assert_eq!(h.count, 4);
        assert!((h.sum - 64.5).abs() < 1e-9);
    }

    #[test]
    fn events_round_trip_as_tagged_json() {
        let e = ControllerEvent::Action(Box::new(record(Outcome::Failed {
            reason: "busy".into(),
        })));
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""type":"action""#), "{json}");
        let back: ControllerEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
    }
}
