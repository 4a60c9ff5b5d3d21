//! The control loop: observe -> decide -> act -> record, every `monitoring_interval` and
//! at once on a submission seen by the proxy or an agent event. One task owns the loop
//! and everything it remembers; the API, the proxy, lease renewal and the agents' event
//! subscriptions run beside it and talk to it through channels.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::join_all;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::agents::{Actuator, HttpAgents};
use super::capacities::{CapacityLedger, LedgerError};
use super::executor::{
    Completed, Executor, ExecutorLimits, JobDone, Trigger, TriggerKind, unix_ms,
};
use super::hub::{
    AppRow, ContainerRow, HoldOff, Hub, NodeStatus, Outcome, QueueStatus, StatusReport, TickSummary,
};
use super::operator::{self, Accepted, Operator, Reply, Request};
use super::short_label::{Readiness, ShortLabel};
use super::view::{self, Memory, SHORT_PARTITION_LABEL};
use crate::agent::api::{ActionRequest, AgentEvent, ContainerStatus, LeaseStatus};
use crate::cluster::{
    ApplicationId, ClusterView, ContainerId, ContainerState, JobClass, PolicyKind,
};
use crate::config::queues::QueueTree;
use crate::config::settings::PreemptorSettings;
use crate::config::{ConfigErrors, LoadedConfig};
use crate::policy::{self, Action, ActionKind, Amount, Before, PolicyState, Reason};
use crate::resources::{Limits, Resource};
use crate::sync::lock;
use crate::yarn::dto::{AppInfo, YarnApplicationState};
use crate::yarn::{RmClient, RmProxy, SubmissionSeen};

/// How long open API connections may take to finish once the controller stops.
const API_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Events that arrive within this long of each other make one tick.
const DEBOUNCE: Duration = Duration::from_millis(15);
/// The shortest time a tick waits for the agents' container listings.
const LISTING_DEADLINE_MIN: Duration = Duration::from_millis(250);
/// How long shutdown waits for actions still out before it resumes everything.
const SETTLE_AT_SHUTDOWN: Duration = Duration::from_secs(10);

/// Everything the controller needs, validated by [`start`].
pub struct ControllerConfig {
    pub settings: PreemptorSettings,
    pub queues: QueueTree,
    /// Where [`ControllerHandle::reload`] reads the configuration again (SIGHUP).
    pub conf_dir: Option<PathBuf>,
    /// Presented to the agents.
    pub agent_token: String,
    /// Guards the controller's API.
    pub api_token: Vec<u8>,
    /// The API, event stream and dashboard; off when `None`.
    pub api_listen: Option<SocketAddr>,
    /// The RM reverse proxy; off when `None`.
    pub proxy_listen: Option<SocketAddr>,
    /// Acts on the nodes; the agents over HTTP when `None`.
    pub actuator: Option<Arc<dyn Actuator>>,
}

impl ControllerConfig {
    /// From a loaded configuration directory, with the listen addresses it names.
    pub fn from_loaded(
        loaded: LoadedConfig,
        conf_dir: Option<PathBuf>,
        agent_token: String,
        api_token: Vec<u8>,
    ) -> ControllerConfig {
        let api_listen = Some(loaded.settings.controller.listen);
        let proxy_listen = loaded.settings.controller.proxy_listen;
        ControllerConfig {
            settings: loaded.settings,
            queues: loaded.queues,
            conf_dir,
            agent_token,
            api_token,
            api_listen,
            proxy_listen,
            actuator: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("ResourceManager client: {0}")]
    Rm(#[from] crate::yarn::Error),
    #[error("yarn.preemptor.agent.tls.ca-file: {0}")]
    AgentTls(#[from] crate::tls::TlsError),
    #[error("cannot listen on {addr} for the {what}: {error}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("the configuration in {dir} was not reloaded, the old one stays:\n{errors}")]
    Reload { dir: String, errors: ConfigErrors },
    #[error("the controller was started without a configuration directory to reload from")]
    NoConfDir,
    #[error("the controller has stopped")]
    Stopped,
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Why everything Preemptor changed goes back.
#[derive(Clone, Copy, Debug)]
enum Undo {
    Shutdown,
    /// The first tick found what an earlier run left: containers an agent still holds
    /// changed (its lease has not run out) or nodes in the capacity record. The policy
    /// state that explained them died with that run, so they go back, and the next
    /// tick decides afresh.
    Restart,
}

impl Undo {
    fn why(self) -> &'static str {
        match self {
            Undo::Shutdown => "controller shutting down",
            Undo::Restart => "controller restarted: what an earlier run changed",
        }
    }

    fn trigger(self) -> TriggerKind {
        match self {
            Undo::Shutdown => TriggerKind::Shutdown,
            Undo::Restart => TriggerKind::Restart,
        }
    }
}

/// What [`ControllerHandle::shutdown`] gave back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    pub resumed: usize,
    pub capacities_restored: usize,
    /// Resumes or restores that failed; the agents' leases undo these when they expire.
    pub failed: Vec<String>,
}

enum Command {
    Trigger(Trigger),
    Reload(Box<LoadedConfig>, oneshot::Sender<()>),
    Shutdown {
        leave_as_is: bool,
        done: oneshot::Sender<ShutdownReport>,
    },
}

/// A running controller. Dropping it stops every task at once without undoing anything,
/// as SIGKILL would: the agents resume their containers when their leases expire.
pub struct ControllerHandle {
    hub: Hub,
    api_url: Option<String>,
    proxy_url: Option<String>,
    conf_dir: Option<PathBuf>,
    commands: mpsc::Sender<Command>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl ControllerHandle {
    pub fn hub(&self) -> Hub {
        self.hub.clone()
    }

    /// `http://addr` of the API, when it is served.
    pub fn api_url(&self) -> Option<String> {
        self.api_url.clone()
    }

    /// `http://addr` of the RM reverse proxy, when it is on.
    pub fn proxy_url(&self) -> Option<String> {
        self.proxy_url.clone()
    }

    /// Ticks now.
    pub fn trigger(&self) {
        let _ = self.commands.try_send(Command::Trigger(Trigger {
            kind: TriggerKind::Manual,
            at: Instant::now(),
        }));
    }

    /// Reads the configuration directory again (like `yarn rmadmin -refreshQueues`) and
    /// applies the policy and queue settings from the next tick on. A configuration with
    /// errors is refused and the old one stays. RM, agent and listen addresses take a
    /// restart.
    pub async fn reload(&self) -> Result<Vec<String>, ControllerError> {
        let dir = self.conf_dir.as_ref().ok_or(ControllerError::NoConfDir)?;
        let loaded = crate::config::load_dir(dir).map_err(|errors| ControllerError::Reload {
            dir: dir.display().to_string(),
            errors,
        })?;
        let warnings = loaded.warnings.iter().map(|w| w.to_string()).collect();
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Reload(Box::new(loaded), tx))
            .await
            .map_err(|_| ControllerError::Stopped)?;
        rx.await.map_err(|_| ControllerError::Stopped)?;
        Ok(warnings)
    }

    /// Stops the loop. Unless `leave_as_is`, every container the agents report as
    /// changed is resumed and every node capacity or partition Preemptor set is restored
    /// first. Then the API and the proxy stop.
    pub async fn shutdown(self, leave_as_is: bool) -> Result<ShutdownReport, ControllerError> {
        let (tx, rx) = oneshot::channel();
        let sent = self
            .commands
            .send(Command::Shutdown {
                leave_as_is,
                done: tx,
            })
            .await;
        let report = match sent {
            Ok(()) => rx.await.map_err(|_| ControllerError::Stopped),
            Err(_) => Err(ControllerError::Stopped),
        };
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        report
    }

    /// Resolves when the controller stopped on its own (a server failed).
    pub async fn stopped(&self) {
        self.cancel.cancelled().await
    }
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Starts the API and the proxy (when configured), lease renewal and the loop. The
/// first tick runs at once.
pub async fn start(config: ControllerConfig) -> Result<ControllerHandle, ControllerError> {
    let hub = Hub::new();
    let rm = RmClient::new(&config.settings.rm)?;
    // First, so that a second controller on the same state directory changes nothing.
    let ledger = CapacityLedger::open(&config.settings.controller.state_dir)?;
    if !ledger.nodes().is_empty() {
        tracing::warn!(
            nodes = ledger.nodes().len(),
            record = %ledger.path().display(),
            "node capacities changed by an earlier run are taken from the record; the policy restores them as it goes on"
        );
    }
    let holder = format!(
        "controller@{}:{}",
        hostname(),
        config
            .api_listen
            .map_or_else(|| std::process::id().to_string(), |a| a.to_string())
    );
    let actuator: Arc<dyn Actuator> = match config.actuator {
        Some(a) => a,
        None => Arc::new(HttpAgents::new(
            &config.settings.agent,
            &config.agent_token,
            &holder,
        )?),
    };
    let cancel = CancellationToken::new();
    let tracker = TaskTracker::new();
    let (operator, operator_rx) = Operator::channel();

    let mut api_url = None;
    if let Some(addr) = config.api_listen {
        let listener = bind(addr, "controller API").await?;
        let local = local_addr(&listener, addr, "controller API")?;
        api_url = Some(format!("http://{local}"));
        let app = super::api::router(
            hub.clone(),
            Arc::new(config.api_token.clone()),
            cancel.clone(),
            operator.clone(),
        );
        let c = cancel.clone();
        tracker.spawn(async move {
            let serve =
                axum::serve(listener, app).with_graceful_shutdown(c.clone().cancelled_owned());
            // An open event stream (a dashboard, `preemptor logs -f`) never ends by itself,
            // so graceful shutdown gets a grace period and then the connections are dropped.
            let grace = async {
                c.cancelled().await;
                tokio::time::sleep(API_SHUTDOWN_GRACE).await;
            };
            tokio::select! {
                served = serve => {
                    if let Err(e) = served {
                        tracing::error!(error = %e, "controller API stopped");
                        c.cancel();
                    }
                }
                () = grace => tracing::debug!("controller API: open event streams dropped at shutdown"),
            }
        });
        tracing::info!(%local, "controller API listening");
    }

    let (sub_tx, sub_rx) = mpsc::channel::<SubmissionSeen>(1024);
    let mut proxy_url = None;
    if let Some(addr) = config.proxy_listen {
        let listener = bind(addr, "RM proxy").await?;
        let local = local_addr(&listener, addr, "RM proxy")?;
        proxy_url = Some(format!("http://{local}"));
        let proxy = RmProxy::new(
            rm.clone(),
            config.settings.controller.routes.clone(),
            sub_tx.clone(),
        )?;
        let c = cancel.clone();
        tracker.spawn(async move {
            if let Err(e) = proxy.serve(listener, c.clone()).await {
                tracing::error!(error = %e, "RM proxy stopped");
                c.cancel();
            }
        });
        tracing::info!(%local, "RM reverse proxy listening");
    }
    // The loop keeps a sender so the channel stays open without a proxy.
    let (event_tx, event_rx) = mpsc::channel::<Instant>(256);
    // One pending poll trigger is enough: the tick it starts lists every application.
    let (poll_tx, poll_rx) = mpsc::channel::<Instant>(1);
    if config.settings.controller.submission_poll_ms > 0 {
        let every = Duration::from_millis(config.settings.controller.submission_poll_ms);
        let (rm, c) = (rm.clone(), cancel.clone());
        tracker.spawn(async move { poll_submissions(rm, every, poll_tx, c).await });
    }
    let (cmd_tx, cmd_rx) = mpsc::channel::<Command>(64);

    let agents: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let lease_ttl = Duration::from_millis(config.settings.agent.lease_timeout_ms);
    {
        let (actuator, agents, c, hub) = (
            actuator.clone(),
            agents.clone(),
            cancel.clone(),
            hub.clone(),
        );
        let parallel = config.settings.agent.max_parallel_requests.max(1);
        tracker.spawn(async move {
            renew_leases(actuator, agents, (lease_ttl, parallel), hub, c).await
        });
    }

    let mut memory = Memory::default();
    memory
        .physical
        .extend(ledger.nodes().iter().map(|(n, r)| (n.clone(), *r)));
    let mut executor = Executor::new(
        actuator.clone(),
        rm.clone(),
        hub.clone(),
        ExecutorLimits {
            call_timeout: Duration::from_millis(config.settings.agent.request_timeout_ms),
            action_timeout: Duration::from_millis(config.settings.agent.action_timeout_ms),
            max_retries: config.settings.agent.max_retries,
            max_parallel: config.settings.agent.max_parallel_requests,
        },
        ledger,
    );
    let results = executor
        .take_results()
        .expect("a new executor has its results channel");
    let policy_settings = config.settings.policy.clone();
    let short_label = ShortLabel::new(&config.settings.controller.state_dir);
    let lp = Loop {
        hub: hub.clone(),
        rm,
        executor,
        policy: PolicyState::new(policy_settings),
        settings: config.settings,
        queues: config.queues,
        memory,
        waited: HashSet::new(),
        last_tick: None,
        rm_error: None,
        agents,
        subscribed: HashSet::new(),
        event_tx,
        cancel: cancel.clone(),
        tracker: tracker.clone(),
        last_statuses: HashMap::new(),
        reported: HashSet::new(),
        failed_since_tick: 0,
        recovered: false,
        held_since: HashMap::new(),
        exempt: HashSet::new(),
        hold_off: None,
        short_label,
        _sub_tx: sub_tx,
    };
    let c = cancel.clone();
    tracker.spawn(async move {
        lp.run(
            Inputs {
                submissions: sub_rx,
                events: event_rx,
                polls: poll_rx,
                commands: cmd_rx,
                operator: operator_rx,
                results,
            },
            c,
        )
        .await
    });

    Ok(ControllerHandle {
        hub,
        api_url,
        proxy_url,
        conf_dir: config.conf_dir,
        commands: cmd_tx,
        cancel,
        tracker,
    })
}

async fn bind(
    addr: SocketAddr,
    what: &'static str,
) -> Result<tokio::net::TcpListener, ControllerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| ControllerError::Bind { what, addr, error })
}

fn local_addr(
    l: &tokio::net::TcpListener,
    addr: SocketAddr,
    what: &'static str,
) -> Result<SocketAddr, ControllerError> {
    l.local_addr()
        .map_err(|error| ControllerError::Bind { what, addr, error })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn is_held(s: ContainerState) -> bool {
    matches!(s, ContainerState::Suspended | ContainerState::Shrunk)
}

/// An operator's `resume --all` or `restore-capacities`.
struct HoldOffState {
    until_ms: u64,
    by: &'static str,
    /// Ticks that gave everything back so far.
    ticks: u32,
}

impl HoldOffState {
    fn status(&self) -> HoldOff {
        HoldOff {
            until_ms: self.until_ms,
            by: self.by.to_string(),
        }
    }
}

/// Adds the controller's own actions to `plan`: to be carried out, or, observing only,
/// logged.
fn add_actions(plan: &mut policy::Plan, actions: Vec<Action>) {
    if plan.observe_only {
        plan.observed.extend(actions);
    } else {
        plan.actions.extend(actions);
    }
}

/// Renews every known agent's lease three times per lease period, whatever the RM does.
async fn renew_leases(
    actuator: Arc<dyn Actuator>,
    agents: Arc<Mutex<BTreeSet<String>>>,
    (ttl, parallel): (Duration, usize),
    hub: Hub,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval((ttl / 3).max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut down: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let list: Vec<String> = lock(&agents).iter().cloned().collect();
        let renewals: Vec<_> = list.iter().map(|a| actuator.renew_lease(a, ttl)).collect();
        let results: Vec<Result<LeaseStatus, String>> = futures_util::stream::iter(renewals)
            .buffered(parallel)
            .collect()
            .await;
        hub.retain_leases(&list.iter().cloned().collect());
        for (agent, r) in list.into_iter().zip(results) {
            hub.record_lease(
                &agent,
                unix_ms(),
                r.as_ref()
                    .map(|l| (l.holder.clone(), l.remaining_ms))
                    .map_err(Clone::clone),
            );
            match r {
                Ok(_) => {
                    if down.remove(&agent) {
                        tracing::info!(%agent, "agent lease renewed again");
                    }
                }
                Err(e) => {
                    if down.insert(agent.clone()) {
                        hub.warn(
                            unix_ms(),
                            format!("renewing the lease of agent {agent}: {e}"),
                        );
                    }
                }
            }
        }
    }
}

/// Reads the RM's `appsSubmitted` counter between ticks and asks for a tick when it
/// moves: `hadoop jar` and `spark-submit` submit over RPC, which the proxy never sees.
/// The counter moves just before the application is ACCEPTED, so the next poll asks
/// once more in case the first tick came too early to list it.
async fn poll_submissions(
    rm: RmClient,
    every: Duration,
    tx: mpsc::Sender<Instant>,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last: Option<i64> = None;
    let mut echo = false;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        match rm.cluster_metrics().await {
            Ok(m) => {
                let n = m.value.apps_submitted;
                let moved = last.is_some_and(|l| l != n);
                last = Some(n);
                if moved || std::mem::replace(&mut echo, moved) {
                    let _ = tx.try_send(Instant::now());
                }
            }
            // The ticks report an unreachable RM.
            Err(e) => tracing::debug!(error = %e, "submission poll"),
        }
    }
}

struct Loop {
    hub: Hub,
    rm: RmClient,
    executor: Executor,
    policy: PolicyState,
    settings: PreemptorSettings,
    queues: QueueTree,
    memory: Memory,
    /// Short applications whose wait was recorded.
    waited: HashSet<ApplicationId>,
    last_tick: Option<Instant>,
    /// Why the RM could not be read at the last tick: logged when it starts or changes,
    /// not every tick.
    rm_error: Option<String>,
    /// Agents of the nodes in the latest view, for lease renewal.
    agents: Arc<Mutex<BTreeSet<String>>>,
    subscribed: HashSet<String>,
    event_tx: mpsc::Sender<Instant>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// Each agent's latest report and when it came: for shutdown, and to stand in for an
    /// agent that stops answering until its lease has run out.
    last_statuses: HashMap<String, (Vec<ContainerStatus>, Instant)>,
    /// Skips and queue differences already warned about, while they last.
    reported: HashSet<String>,
    /// Actions that came back failed since the last tick summary.
    failed_since_tick: usize,
    /// The first tick has checked for what an earlier run left changed.
    recovered: bool,
    /// Dice's node label, checked before partition changes go out.
    short_label: ShortLabel,
    /// Suspended or shrunk containers, and when a tick first saw them so.
    held_since: HashMap<ContainerId, u64>,
    /// Containers an operator resumed: never taken again while they live.
    exempt: HashSet<ContainerId>,
    /// An operator's `resume --all` or `restore-capacities`, while it lasts.
    hold_off: Option<HoldOffState>,
    _sub_tx: mpsc::Sender<SubmissionSeen>,
}

/// What the loop listens to besides its timer.
struct Inputs {
    submissions: mpsc::Receiver<SubmissionSeen>,
    events: mpsc::Receiver<Instant>,
    polls: mpsc::Receiver<Instant>,
    commands: mpsc::Receiver<Command>,
    /// The API's write routes.
    operator: mpsc::Receiver<operator::Command>,
    /// Jobs of actions sent out by earlier ticks, back.
    results: mpsc::UnboundedReceiver<JobDone>,
}

impl Loop {
    async fn run(mut self, inputs: Inputs, cancel: CancellationToken) {
        let Inputs {
            mut submissions,
            mut events,
            mut polls,
            mut commands,
            mut operator,
            mut results,
        } = inputs;
        let mut timer = tokio::time::interval(self.interval());
        timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let trigger = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = timer.tick() => Trigger { kind: TriggerKind::Timer, at: Instant::now() },
                Some(s) = submissions.recv() => {
                    let at = s.seen_at;
                    self.memory.submitted.insert(s.application_id, s.seen_at_ms);
                    Trigger { kind: TriggerKind::Submission, at }
                }
                Some(at) = events.recv() => Trigger { kind: TriggerKind::AgentEvent, at },
                Some(at) = polls.recv() => Trigger { kind: TriggerKind::RmSubmission, at },
                Some(cmd) = operator.recv() => match self.operator(cmd) {
                    Some(t) => t,
                    None => continue,
                },
                Some(done) = results.recv() => {
                    let c = self.executor.complete(done, &mut self.memory);
                    self.took_in(c);
                    continue;
                }
                Some(cmd) = commands.recv() => match cmd {
                    Command::Trigger(t) => t,
                    Command::Reload(loaded, done) => {
                        self.reload(*loaded);
                        timer = tokio::time::interval(self.interval());
                        timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
                        let _ = done.send(());
                        Trigger { kind: TriggerKind::Reload, at: Instant::now() }
                    }
                    Command::Shutdown { leave_as_is, done } => {
                        let report = if leave_as_is {
                            tracing::info!("shutting down; containers and node capacities are left as they are");
                            ShutdownReport::default()
                        } else {
                            // Actions still out finish first, so that none lands after
                            // the resumes.
                            let c = self
                                .executor
                                .settle(&mut results, &mut self.memory, SETTLE_AT_SHUTDOWN)
                                .await;
                            self.took_in(c);
                            self.restore_all(Undo::Shutdown).await
                        };
                        let _ = done.send(report);
                        return;
                    }
                },
            };
            let trigger = if trigger.kind == TriggerKind::Timer {
                trigger
            } else {
                self.debounce(trigger, &mut submissions, &mut events).await
            };
            self.tick(trigger).await;
        }
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.settings.policy.monitoring_interval_ms.max(1))
    }

    /// Gathers what arrives shortly after the first event into the same tick; the
    /// tick's latency counts from the earliest.
    async fn debounce(
        &mut self,
        first: Trigger,
        submissions: &mut mpsc::Receiver<SubmissionSeen>,
        events: &mut mpsc::Receiver<Instant>,
    ) -> Trigger {
        tokio::time::sleep(DEBOUNCE).await;
        let mut t = first;
        while let Ok(s) = submissions.try_recv() {
            self.memory.submitted.insert(s.application_id, s.seen_at_ms);
            if s.seen_at < t.at {
                t.at = s.seen_at;
            }
            t.kind = TriggerKind::Submission;
        }
        while let Ok(at) = events.try_recv() {
            t.at = t.at.min(at);
        }
        t
    }

    fn reload(&mut self, loaded: LoadedConfig) {
        let old = &self.settings;
        if old.rm != loaded.settings.rm
            || old.agent != loaded.settings.agent
            || old.controller != loaded.settings.controller
        {
            self.hub.warn(
                unix_ms(),
                "reload: RM, agent and controller settings changed; they take effect after a restart"
                    .into(),
            );
        }
        self.policy.set_settings(loaded.settings.policy.clone());
        self.settings.policy = loaded.settings.policy;
        self.settings.log = loaded.settings.log;
        self.queues = loaded.queues;
        tracing::info!(policy = %self.settings.policy.kind, "configuration reloaded");
    }

    async fn tick(&mut self, trigger: Trigger) {
        let started = Instant::now();
        let now = unix_ms();
        let held_for = self.last_tick.map(|t| t.elapsed().as_secs_f64());
        self.last_tick = Some(started);

        let snapshot = match self.rm.snapshot().await {
            Ok(s) => {
                if self.rm_error.take().is_some() {
                    tracing::info!("the ResourceManager answers again");
                }
                s
            }
            Err(e) => {
                let why = e.to_string();
                if self.rm_error.as_deref() != Some(why.as_str()) {
                    tracing::warn!(error = %why, "ResourceManager unreachable; nothing is decided until it answers");
                    self.rm_error = Some(why);
                }
                self.hub.count_rm_error();
                self.hub.warn(
                    now,
                    format!("ResourceManager unreachable, no new preemptions this tick: {e}"),
                );
                let mut status = (*self.hub.status()).clone();
                status.at_ms = now;
                status.rm_reachable = false;
                status.policy = self.settings.policy.kind.to_string();
                status.observe_only = self.settings.policy.observe_only;
                status.hold_off = self.hold_off.as_ref().map(HoldOffState::status);
                self.hub.set_status(status);
                self.finish_tick(trigger, started, 0, 0);
                return;
            }
        };
        for w in &snapshot.warnings {
            tracing::warn!(warning = %w, "RM schema surprise");
        }

        // Agents of the nodes the RM lists, asked once each.
        let mut node_agent: HashMap<String, String> = HashMap::new();
        let mut distinct: BTreeSet<String> = BTreeSet::new();
        for n in &snapshot.nodes {
            if let Some(a) = self
                .executor
                .actuator()
                .agent_for(&crate::cluster::NodeId::new(n.id.trim()))
            {
                node_agent.insert(n.id.trim().to_string(), a.clone());
                distinct.insert(a);
            }
        }
        let newly: Vec<String> = {
            let mut known = lock(&self.agents);
            let newly = distinct
                .iter()
                .filter(|a| !known.contains(*a))
                .cloned()
                .collect();
            *known = distinct.clone();
            newly
        };
        let ttl = Duration::from_millis(self.settings.agent.lease_timeout_ms);
        // A lease first, so that a new agent accepts actions this very tick.
        let actuator = self.executor.actuator().clone();
        let parallel = self.settings.agent.max_parallel_requests.max(1);
        let renewals: Vec<_> = newly.iter().map(|a| actuator.renew_lease(a, ttl)).collect();
        futures_util::stream::iter(renewals)
            .buffer_unordered(parallel)
            .for_each(|_| async {})
            .await;
        self.subscribe(&distinct);

        // An agent that has not answered by the deadline is treated as unreachable for
        // this tick: a slow agent does not hold the others' actions.
        let deadline = Duration::from_millis(self.settings.agent.request_timeout_ms)
            .min(self.interval())
            .max(LISTING_DEADLINE_MIN);
        let list: Vec<String> = distinct.iter().cloned().collect();
        let listings: Vec<_> = list
            .iter()
            .map(|a| {
                let call = actuator.containers(a);
                async move {
                    tokio::time::timeout(deadline, call)
                        .await
                        .unwrap_or_else(|_| {
                            Err(format!(
                                "no container listing within {} ms",
                                deadline.as_millis()
                            ))
                        })
                }
            })
            .collect();
        let reports: Vec<Result<Vec<ContainerStatus>, String>> =
            futures_util::stream::iter(listings)
                .buffered(parallel)
                .collect()
                .await;
        let mut statuses: HashMap<ContainerId, ContainerStatus> = HashMap::new();
        let mut unreachable: HashSet<String> = HashSet::new();
        for (agent, r) in list.iter().zip(reports) {
            match r {
                Ok(l) => {
                    for s in &l {
                        statuses.insert(s.container, s.clone());
                    }
                    self.last_statuses
                        .insert(agent.clone(), (l, Instant::now()));
                }
                Err(e) => {
                    self.hub
                        .warn(now, format!("agent {agent} unreachable: {e}"));
                    unreachable.insert(agent.clone());
                    // Until its lease runs out the agent keeps what it changed, so its
                    // last report stands: a suspended container still frees room, and
                    // the node's advertised capacity is not given back early. Leases
                    // are renewed every third of `ttl`, so the agent resumes everything
                    // between 2/3 and 1 `ttl` after its last report: stand in until the
                    // earliest.
                    match self.last_statuses.get(agent) {
                        Some((l, at)) if at.elapsed() < ttl * 2 / 3 => {
                            for s in l {
                                statuses.insert(s.container, s.clone());
                            }
                        }
                        _ => {
                            self.last_statuses.remove(agent);
                        }
                    }
                }
            }
        }
        self.last_statuses.retain(|a, _| distinct.contains(a));
        if !self.recovered {
            self.recovered = true;
            let inherited = statuses.values().filter(|s| s.changed && s.running).count();
            let recorded = self.executor.ledger().nodes().len();
            if inherited + recorded > 0 {
                self.hub.warn(
                    now,
                    format!(
                        "an earlier run left {inherited} container(s) changed and {recorded} node(s) recorded: putting them back before deciding"
                    ),
                );
                let report = self.restore_all(Undo::Restart).await;
                for f in &report.failed {
                    self.hub.warn(now, format!("restart: not restored: {f}"));
                }
                self.finish_tick(
                    trigger,
                    started,
                    report.resumed + report.capacities_restored,
                    0,
                );
                // Decide at once on the cluster as it is now.
                let _ = self.event_tx.try_send(Instant::now());
                return;
            }
        }

        let inputs = view::Inputs {
            queues: &self.queues,
            class_cutoff_secs: self.settings.policy.class_cutoff_secs,
            agents: &statuses,
            exempt: &self.exempt,
            now,
        };
        let observation = match view::build(&snapshot, &inputs, &mut self.memory) {
            Ok(o) => o,
            Err(e) => {
                self.hub
                    .warn(now, format!("inconsistent cluster view, tick skipped: {e}"));
                self.finish_tick(trigger, started, 0, 0);
                return;
            }
        };
        self.report_once(now, &observation.skipped, &observation.queue_disagreements);
        let seen_now = unix_ms();
        for a in observation.view.apps() {
            let proxy = self.memory.submitted.get(&a.id).copied();
            let seen = self.memory.seen.entry(a.id).or_insert(seen_now);
            if let Some(p) = proxy {
                *seen = (*seen).min(p);
            }
        }
        let view::Observation {
            view,
            skipped,
            queue_source,
            queue_disagreements,
            resuming,
        } = observation;
        // An exempt container gone from the RM and its agent will not come back.
        self.exempt
            .retain(|id| view.container_by_id(id).is_some() || statuses.contains_key(id));

        for (app, wait) in view::first_containers(&view, now) {
            if self.waited.insert(app) {
                self.hub.record_short_wait(now, app.to_string(), wait);
            }
        }
        let live: HashSet<ApplicationId> = view.apps().iter().map(|a| a.id).collect();
        self.waited.retain(|a| live.contains(a));
        self.memory.seen.retain(|a, _| live.contains(a));
        // The proxy may report a submission before the RM lists it.
        self.memory
            .submitted
            .retain(|a, seen| live.contains(a) || now.saturating_sub(*seen) < 600_000);

        let kind = self.settings.policy.kind;
        let mut plan = match self.holding_off(now) {
            Some(reason) => {
                let actions = operator::give_back(&view, &self.memory.partitions, kind, &reason);
                self.plan_of(actions, now)
            }
            None => {
                let mut plan = policy::decide(&view, &mut self.policy, now);
                self.hold_back_partitions(&mut plan, &snapshot.scheduler, &view, now)
                    .await;
                plan
            }
        };
        let resumes = operator::exempt_resumes(
            &view,
            &resuming,
            kind,
            "operator resume (`preemptor resume`): never taken again",
        );
        add_actions(&mut plan, resumes);
        for n in &plan.notes {
            tracing::info!(note = %n, "policy");
        }
        tracing::debug!(
            trigger = trigger.kind.as_str(),
            since_trigger_ms = trigger.at.elapsed().as_millis() as u64,
            actions = plan.actions.len(),
            apps = view.apps().len(),
            "decided"
        );
        let sent = self.executor.dispatch(&view, &plan, trigger, &self.memory);
        let late = self.executor.report_late(self.interval());
        let held = reclaimed(&view);
        if let Some(secs) = held_for {
            self.hub.add_reclaimed(reclaimed_limits(&view), secs);
        }
        // Exempt containers being resumed are still held, whatever the view shows.
        let held_now: HashSet<ContainerId> = (view.containers().iter())
            .filter(|c| is_held(c.state))
            .map(|c| c.id)
            .chain(resuming.iter().map(|r| r.container))
            .collect();
        self.held_since.retain(|id, _| held_now.contains(id));
        for id in held_now {
            self.held_since.entry(id).or_insert(now);
        }
        let mut status = self.status(
            &view,
            &snapshot.active_rm,
            &node_agent,
            &unreachable,
            held,
            now,
        );
        status.applications = self.app_rows(&view, &snapshot.apps);
        status.queue_source = queue_source;
        status.queue_disagreements = queue_disagreements;
        status.skipped = skipped;
        status.hold_off = self.hold_off.as_ref().map(HoldOffState::status);
        let mut exempt: Vec<String> = self.exempt.iter().map(ToString::to_string).collect();
        exempt.sort_unstable();
        status.exempt = exempt;
        for r in &resuming {
            let id = r.container.to_string();
            let row = (status.nodes.iter_mut())
                .flat_map(|n| n.containers.iter_mut())
                .find(|c| c.id == id);
            if let Some(row) = row {
                row.state = r.state;
                row.current = r.current;
            }
            match r.state {
                ContainerState::Suspended => status.suspended += 1,
                ContainerState::Shrunk => status.shrunk += 1,
                _ => {}
            }
        }
        self.hub.set_status(status);
        self.finish_tick(trigger, started, sent.actions, late);
    }

    /// Answers an operator's command and arms what the ticks carry out from the next one
    /// on; `None` when there is nothing to carry out.
    fn operator(&mut self, cmd: operator::Command) -> Option<Trigger> {
        let operator::Command { request, reply } = cmd;
        if self.settings.policy.observe_only {
            let _ = reply.send(Reply::ObserveOnly);
            return None;
        }
        let accepted = match request {
            Request::Resume(id) => {
                if !self.holds(&id) {
                    let _ = reply.send(Reply::NotHeld(format!(
                        "the controller holds no container {id}: it is neither suspended nor \
                         shrunk (`preemptor status` lists what is held)"
                    )));
                    return None;
                }
                self.exempt.insert(id);
                // A retry of an earlier suspend or shrink would take it again.
                self.executor
                    .drop_retries(|a| a.kind.container() == Some(id));
                tracing::info!(container = %id, "operator: resume, and never take it again");
                Accepted {
                    message: format!("{id} will be resumed at once and never taken again"),
                    resuming: vec![id.to_string()],
                    ..Accepted::default()
                }
            }
            Request::ResumeAll { hold_off, by } => {
                let millis = u64::try_from(hold_off.as_millis()).unwrap_or(u64::MAX);
                let until_ms = unix_ms().saturating_add(millis);
                let resuming = self.held_containers();
                let restoring = self.changed_nodes();
                self.executor.drop_retries(|_| true);
                // What the policy remembered explained what now goes back: it starts
                // afresh after the hold-off, as after a restart.
                self.policy = PolicyState::new(self.settings.policy.clone());
                self.hold_off = Some(HoldOffState {
                    until_ms,
                    by,
                    ticks: 0,
                });
                tracing::info!(
                    by,
                    containers = resuming.len(),
                    nodes = restoring.len(),
                    hold_off_ms = millis,
                    "operator: everything goes back, nothing is taken until the hold-off ends"
                );
                Accepted {
                    message: format!(
                        "{} container(s) will be resumed and {} node(s) put back at their \
                         physical capacity at once; nothing new is taken until {}",
                        resuming.len(),
                        restoring.len(),
                        super::log::utc_millis(until_ms)
                    ),
                    resuming,
                    restoring,
                    hold_off_until_ms: Some(until_ms),
                }
            }
        };
        let _ = reply.send(Reply::Accepted(accepted));
        Some(Trigger {
            kind: TriggerKind::Operator,
            at: Instant::now(),
        })
    }

    /// Whether `id` is suspended or shrunk: by the last tick's view, or its agent's report.
    fn holds(&self, id: &ContainerId) -> bool {
        self.held_since.contains_key(id)
            || (self.last_statuses.values()).any(|(l, _)| {
                l.iter()
                    .any(|s| s.container == *id && s.changed && s.running)
            })
    }

    fn held_containers(&self) -> Vec<String> {
        let reported = (self.last_statuses.values())
            .flat_map(|(l, _)| l.iter())
            .filter(|s| s.changed && s.running)
            .map(|s| s.container);
        let all: BTreeSet<String> = (self.held_since.keys().copied())
            .chain(reported)
            .map(|c| c.to_string())
            .collect();
        all.into_iter().collect()
    }

    /// Nodes advertised other than their physical capacity, by the last tick or the record.
    fn changed_nodes(&self) -> Vec<String> {
        let status = self.hub.status();
        let seen = (status.nodes.iter())
            .filter(|n| n.advertised != n.capacity)
            .map(|n| n.id.clone());
        let recorded = self.executor.ledger().nodes().keys().map(|n| n.to_string());
        let all: BTreeSet<String> = seen.chain(recorded).collect();
        all.into_iter().collect()
    }

    /// The reason of this tick's give-back while an operator's hold-off lasts; `None`
    /// once it is over. The first tick after the command gives back even when the
    /// hold-off is zero.
    fn holding_off(&mut self, now: u64) -> Option<String> {
        let h = self.hold_off.as_mut()?;
        if h.ticks > 0 && now >= h.until_ms {
            tracing::info!(
                by = h.by,
                "operator's hold-off over: the policy decides again"
            );
            self.hold_off = None;
            return None;
        }
        h.ticks += 1;
        Some(format!(
            "operator {}: everything goes back, nothing is taken until {}",
            h.by,
            super::log::utc_millis(h.until_ms)
        ))
    }

    /// A plan of the controller's own actions, not the policy's.
    fn plan_of(&self, actions: Vec<Action>, now: u64) -> policy::Plan {
        let mut plan = policy::Plan {
            now,
            policy: self.settings.policy.kind,
            actions: Vec::new(),
            observe_only: self.settings.policy.observe_only,
            observed: Vec::new(),
            pending_kills: Vec::new(),
            queues: Vec::new(),
            reclaimed: Amount::ZERO,
            restored: Amount::ZERO,
            round_cap: Amount::ZERO,
            dice: None,
            notes: Vec::new(),
        };
        add_actions(&mut plan, actions);
        plan
    }

    /// Partition changes go out only once the RM has the short label and the short
    /// queues can use it; otherwise they are dropped, with one warning saying why.
    async fn hold_back_partitions(
        &mut self,
        plan: &mut policy::Plan,
        scheduler: &crate::yarn::dto::QueueInfo,
        view: &ClusterView,
        now: u64,
    ) {
        let is_partition = |a: &Action| matches!(a.kind, ActionKind::SetNodePartition { .. });
        // With Dice in use the label is made at once: a short queue whose default label
        // it is cannot take submissions before it exists.
        let dice = self.settings.policy.kind == PolicyKind::Dice
            || view
                .queues()
                .iter()
                .any(|q| q.policy == Some(PolicyKind::Dice));
        if !dice && !plan.actions.iter().any(is_partition) {
            return;
        }
        let short_queues: Vec<String> = view
            .queues()
            .iter()
            .filter(|q| q.children.is_empty() && q.job_class == Some(JobClass::Short))
            .map(|q| q.path.clone())
            .collect();
        let (now_ready, changed) = self
            .short_label
            .check(
                &self.rm,
                scheduler,
                &short_queues,
                !self.settings.policy.observe_only,
            )
            .await;
        match (now_ready, changed) {
            (Readiness::Ready, Some(_)) => {
                tracing::info!(
                    label = SHORT_PARTITION_LABEL,
                    "Dice's short partition is usable"
                )
            }
            (Readiness::Ready, None) => {}
            (Readiness::Unusable(why), changed) => {
                if changed.is_some() {
                    self.hub.warn(now, why);
                }
                plan.actions.retain(|a| !is_partition(a));
            }
        }
    }

    fn finish_tick(&mut self, trigger: Trigger, started: Instant, actions: usize, late: usize) {
        self.hub.record_tick(TickSummary {
            at_ms: unix_ms(),
            trigger: trigger.kind.as_str().to_string(),
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            actions,
            failed: std::mem::take(&mut self.failed_since_tick),
            late,
        });
    }

    /// Takes in what actions sent by earlier ticks came back with. The agents' reports
    /// predate those actions: what they answered is folded in, so that a report standing
    /// in for an agent that stops answering holds what was applied.
    fn took_in(&mut self, c: Completed) {
        self.failed_since_tick += c.failed;
        for (agent, result) in &c.applied {
            if let Some((list, _)) = self.last_statuses.get_mut(agent)
                && let Some(st) = list.iter_mut().find(|s| s.container == result.container)
            {
                st.state = result.state;
                st.limits = result.limits;
                st.changed = matches!(
                    result.state,
                    ContainerState::Suspended | ContainerState::Shrunk
                );
                st.running = result.state != ContainerState::Killed;
            }
        }
    }

    /// Warns once about each new skip and each new difference between
    /// capacity-scheduler.xml and the RM; `/api/v1/status` lists the current ones.
    fn report_once(&mut self, now: u64, skipped: &[String], disagreements: &[String]) {
        let current: HashSet<&String> = skipped.iter().chain(disagreements).collect();
        self.reported.retain(|r| current.contains(r));
        for s in skipped {
            if self.reported.insert(s.clone()) {
                self.hub.warn(now, format!("left out of the view: {s}"));
            }
        }
        for d in disagreements {
            if self.reported.insert(d.clone()) {
                self.hub.warn(
                    now,
                    format!("capacity-scheduler.xml and the RM differ: {d}"),
                );
            }
        }
    }

    fn app_rows(&self, view: &ClusterView, rm_apps: &[AppInfo]) -> Vec<AppRow> {
        let rm: HashMap<&str, &AppInfo> = rm_apps.iter().map(|a| (a.id.trim(), a)).collect();
        view.apps()
            .iter()
            .map(|a| {
                let id = a.id.to_string();
                let info = rm.get(id.as_str());
                AppRow {
                    queue: view.queue(a.queue).path.clone(),
                    class: a.class,
                    state: info.map_or(YarnApplicationState::Running, |i| i.state),
                    seen_at_ms: self.memory.seen.get(&a.id).copied().unwrap_or_default(),
                    started_time_ms: info
                        .and_then(|i| u64::try_from(i.started_time).ok())
                        .unwrap_or_default(),
                    id,
                }
            })
            .collect()
    }

    /// Subscribes once to each agent's events; each one (bar the agent's reports of our
    /// own actions) makes the loop tick.
    fn subscribe(&mut self, agents: &BTreeSet<String>) {
        for agent in agents {
            if !self.subscribed.insert(agent.clone()) {
                continue;
            }
            let actuator = self.executor.actuator().clone();
            let (agent, tx, c) = (agent.clone(), self.event_tx.clone(), self.cancel.clone());
            self.tracker.spawn(async move {
                let mut delay = Duration::from_secs(1);
                loop {
                    match actuator.events(&agent).await {
                        Ok(mut stream) => {
                            delay = Duration::from_secs(1);
                            loop {
                                tokio::select! {
                                    _ = c.cancelled() => return,
                                    item = stream.next() => match item {
                                        Some(Ok(AgentEvent::Action { .. })) => {}
                                        Some(Ok(_)) => { let _ = tx.try_send(Instant::now()); }
                                        Some(Err(e)) => {
                                            tracing::debug!(%agent, error = %e, "agent event stream broke");
                                            break;
                                        }
                                        None => break,
                                    },
                                }
                            }
                        }
                        Err(e) => tracing::debug!(%agent, error = %e, "agent events unavailable"),
                    }
                    tokio::select! {
                        _ = c.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            });
        }
    }

    fn status(
        &self,
        view: &ClusterView,
        rm: &str,
        node_agent: &HashMap<String, String>,
        unreachable: &HashSet<String>,
        held: Resource,
        now: u64,
    ) -> StatusReport {
        let queues = view
            .queues()
            .iter()
            .map(|q| QueueStatus {
                path: q.path.clone(),
                class: q.job_class,
                guaranteed: q.guaranteed,
                maximum: q.maximum,
                used: q.used,
                pending: q.pending,
                preemption_disabled: q.preemption_disabled,
            })
            .collect();
        let nodes = view
            .nodes()
            .iter()
            .map(|n| {
                let agent = node_agent.get(n.id.as_str()).cloned();
                NodeStatus {
                    id: n.id.to_string(),
                    capacity: n.capacity,
                    advertised: n.advertised,
                    partition: n.partition,
                    agent_reachable: agent.as_ref().is_some_and(|a| !unreachable.contains(a)),
                    agent,
                    lease: None,
                    containers: n
                        .containers
                        .iter()
                        .map(|&i| {
                            let c = view.container(i);
                            let app = view.app(c.app);
                            ContainerRow {
                                id: c.id.to_string(),
                                application: app.id.to_string(),
                                queue: view.queue(app.queue).path.clone(),
                                allocated: c.allocated,
                                current: c.current,
                                state: c.state,
                                held_since_ms: self.held_since.get(&c.id).copied(),
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let count = |s: ContainerState| view.containers().iter().filter(|c| c.state == s).count();
        StatusReport {
            at_ms: now,
            policy: self.settings.policy.kind.to_string(),
            observe_only: self.settings.policy.observe_only,
            rm: rm.to_string(),
            rm_reachable: true,
            queues,
            nodes,
            suspended: count(ContainerState::Suspended),
            shrunk: count(ContainerState::Shrunk),
            reclaimed: held,
            ..StatusReport::default()
        }
    }

    /// What the RM advertised for `node` at the last tick.
    fn advertised_now(&self, node: &crate::cluster::NodeId) -> Option<Resource> {
        let status = self.hub.status();
        status
            .nodes
            .iter()
            .find(|n| n.id == node.as_str())
            .map(|n| n.advertised)
    }

    /// Resumes every container an agent reports changed and restores every node
    /// capacity and partition Preemptor set.
    async fn restore_all(&mut self, undo: Undo) -> ShutdownReport {
        let trigger = Trigger {
            kind: undo.trigger(),
            at: Instant::now(),
        };
        let mut report = ShutdownReport::default();
        let actuator = self.executor.actuator().clone();
        let agents: Vec<String> = lock(&self.agents).iter().cloned().collect();
        let lists = join_all(agents.iter().map(|a| actuator.containers(a))).await;
        let policy = self.settings.policy.kind;
        let mut jobs = Vec::new();
        for (agent, r) in agents.iter().zip(lists) {
            let list = match r {
                Ok(l) => l,
                Err(e) => {
                    // Fall back on the last report; the lease covers the rest.
                    report.failed.push(format!("listing {agent}: {e}"));
                    (self.last_statuses.get(agent))
                        .map(|(l, _)| l.clone())
                        .unwrap_or_default()
                }
            };
            for s in list.into_iter().filter(|s| s.changed && s.running) {
                jobs.push((agent.clone(), s));
            }
        }
        let results = join_all(jobs.iter().map(|(agent, s)| {
            actuator.act(
                agent,
                ActionRequest {
                    container: s.container.to_string(),
                    action: crate::agent::api::Action::Resume,
                },
            )
        }))
        .await;
        for ((_, s), r) in jobs.iter().zip(results) {
            let allocated = s.allocated.map(Limits::from);
            let action = Action {
                kind: ActionKind::Resume {
                    container: s.container,
                    to: allocated.unwrap_or_default(),
                },
                policy,
                reason: Reason::Said(format!("{}: everything goes back", undo.why())),
                application: Some(s.container.application()),
                queue: None,
                node: None,
                for_queue: None,
                before: Before::Limits(s.limits.unwrap_or_default()),
                place: None,
            };
            match r {
                Ok(_) => {
                    report.resumed += 1;
                    self.executor.record(&action, trigger, Outcome::Applied);
                }
                Err(e) => {
                    report.failed.push(format!("resuming {}: {e}", s.container));
                    self.executor
                        .record(&action, trigger, Outcome::Failed { reason: e.message });
                }
            }
        }
        let recorded: Vec<(crate::cluster::NodeId, Resource)> = self
            .executor
            .ledger()
            .nodes()
            .iter()
            .map(|(n, r)| (n.clone(), *r))
            .collect();
        for (node, physical) in recorded {
            let action = Action {
                kind: ActionKind::SetNodeCapacity {
                    node: node.clone(),
                    advertised: physical,
                },
                policy,
                reason: Reason::Said(format!("{}: physical capacity again", undo.why())),
                application: None,
                queue: None,
                node: Some(node.clone()),
                for_queue: None,
                before: Before::Advertised(self.advertised_now(&node).unwrap_or(physical)),
                place: None,
            };
            match self.executor.restore_capacity(&node).await {
                Ok(_) => {
                    report.capacities_restored += 1;
                    self.executor.record(&action, trigger, Outcome::Applied);
                }
                Err(e) => {
                    report.failed.push(format!("restoring {node}: {e}"));
                    self.executor
                        .record(&action, trigger, Outcome::Failed { reason: e });
                }
            }
        }
        let partitions = std::mem::take(&mut self.memory.partitions);
        for (node, was) in partitions {
            let action = Action {
                kind: ActionKind::SetNodePartition {
                    node: node.clone(),
                    partition: crate::cluster::Partition::General,
                },
                policy: PolicyKind::Dice,
                reason: Reason::Said(format!("{}: back to the general partition", undo.why())),
                application: None,
                queue: None,
                node: Some(node.clone()),
                for_queue: None,
                before: Before::Partition(was),
                place: None,
            };
            match self
                .executor
                .set_partition(&node, crate::cluster::Partition::General)
                .await
            {
                Ok(()) => self.executor.record(&action, trigger, Outcome::Applied),
                Err(e) => {
                    report
                        .failed
                        .push(format!("restoring the partition of {node}: {e}"));
                    self.executor
                        .record(&action, trigger, Outcome::Failed { reason: e });
                }
            }
        }
        for f in self.short_label.release(&self.rm).await {
            report.failed.push(f);
        }
        tracing::info!(
            resumed = report.resumed,
            capacities_restored = report.capacities_restored,
            failed = report.failed.len(),
            "{}: containers resumed and node capacities restored",
            undo.why()
        );
        report
    }
}

/// Resources currently held back from containers below their allocation.
fn reclaimed(view: &ClusterView) -> Resource {
    view.below_allocation()
        .iter()
        .map(|&i| view.container(i))
        .filter(|c| c.is_live())
        .fold(Resource::ZERO, |acc, c| {
            acc + Limits::from(c.allocated).reclaimed_to(&c.current)
        })
}

/// [`reclaimed`] without rounding CPU down to whole vcores, for the metrics.
fn reclaimed_limits(view: &ClusterView) -> Limits {
    view.below_allocation()
        .iter()
        .map(|&i| view.container(i))
        .filter(|c| c.is_live())
        .fold(Limits::new(0, 0), |acc, c| {
            let full = Limits::from(c.allocated);
            Limits::new(
                acc.memory_mb + full.memory_mb.saturating_sub(c.current.memory_mb),
                acc.cpu_millis + full.cpu_millis.saturating_sub(c.current.cpu_millis),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::hub::ControllerEvent;

    fn conf_dir(policy: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        std::fs::copy(
            format!("{root}/hadoop-conf/capacity-scheduler.xml"),
            dir.path().join("capacity-scheduler.xml"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("preemptor-site.xml"),
            format!(
                "<configuration>\n\
                 <property><name>yarn.preemptor.rm.address</name><value>http://127.0.0.1:9</value></property>\n\
                 <property><name>yarn.preemptor.rm.request-timeout-ms</name><value>300</value></property>\n\
                 <property><name>yarn.preemptor.monitoring-interval-ms</name><value>100</value></property>\n\
                 <property><name>yarn.preemptor.policy</name><value>{policy}</value></property>\n\
                 <property><name>yarn.preemptor.controller.state-dir</name><value>{state}</value></property>\n\
                 </configuration>\n",
                state = dir.path().join("state").display()
            ),
        )
        .unwrap();
        dir
    }

    async fn started(dir: &tempfile::TempDir) -> ControllerHandle {
        started_with_api(dir, None).await
    }

    async fn started_with_api(
        dir: &tempfile::TempDir,
        api_listen: Option<std::net::SocketAddr>,
    ) -> ControllerHandle {
        let loaded = crate::config::load_dir(dir.path()).unwrap();
        let mut config = ControllerConfig::from_loaded(
            loaded,
            Some(dir.path().to_path_buf()),
            "t".into(),
            b"t".to_vec(),
        );
        config.api_listen = api_listen;
        start(config).await.unwrap()
    }

    #[tokio::test]
    async fn an_unreachable_rm_is_warned_about_counted_and_nothing_is_done() {
        let dir = conf_dir("immediate");
        let handle = started(&dir).await;
        let hub = handle.hub();
        let mut rx = hub.subscribe();
        let warning = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match rx.recv().await {
                    Ok(ControllerEvent::Warning { message, .. }) => return message,
                    Ok(ControllerEvent::Action(a)) => panic!("acted without an RM: {a:?}"),
                    Ok(_) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        })
        .await
        .unwrap();
        assert!(warning.contains("ResourceManager unreachable"), "{warning}");
        assert!(hub.metrics().rm_errors >= 1);
        assert!(!hub.status().rm_reachable);
        let report = handle.shutdown(false).await.unwrap();
        assert_eq!(report, ShutdownReport::default());
    }

    #[tokio::test]
    async fn shutdown_ends_even_with_an_event_stream_open() {
        let dir = conf_dir("none");
        let any_port = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let handle = started_with_api(&dir, Some(any_port)).await;
        let url = format!("{}/api/v1/events", handle.api_url().unwrap());
        let mut stream = crate::tls::http_client_builder()
            .build()
            .unwrap()
            .get(url)
            .bearer_auth("t")
            .send()
            .await
            .unwrap();
        assert!(stream.status().is_success());
        let stopped = tokio::time::timeout(Duration::from_secs(15), handle.shutdown(false)).await;
        assert!(stopped.is_ok(), "shutdown waited on an open event stream");
        // The server side went away, so the stream ends instead of hanging.
        let end = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(_)) = stream.chunk().await {}
        })
        .await;
        assert!(end.is_ok(), "the event stream was not closed");
    }

    #[tokio::test]
    async fn the_loop_answers_operator_commands_and_refuses_them_observing_only() {
        let dir = conf_dir("immediate");
        let any_port = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let handle = started_with_api(&dir, Some(any_port)).await;
        let http = crate::tls::http_client_builder().build().unwrap();
        let api = handle.api_url().unwrap();
        let post = |route: &str, body: &'static str| {
            http.post(format!("{api}{route}"))
                .bearer_auth("t")
                .body(body)
                .send()
        };
        let held = post(
            "/api/v1/resume",
            r#"{"container":"container_1700000000000_0001_01_000002"}"#,
        )
        .await
        .unwrap();
        assert_eq!(held.status(), 404);
        assert!(held.text().await.unwrap().contains("holds no container"));
        let all = post("/api/v1/resume", r#"{"all":true,"holdOffSeconds":120}"#)
            .await
            .unwrap();
        assert_eq!(all.status(), 202);
        let accepted: Accepted = all.json().await.unwrap();
        let until = accepted.hold_off_until_ms.unwrap();
        assert!(until >= unix_ms() + 110_000, "{accepted:?}");
        // The tick it started shows the hold-off, the RM unreachable or not.
        let hub = handle.hub();
        tokio::time::timeout(Duration::from_secs(5), async {
            while hub.status().hold_off.as_ref().map(|h| h.until_ms) != Some(until) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the hold-off in the status");
        assert_eq!(hub.status().hold_off.as_ref().unwrap().by, "resume --all");
        handle.shutdown(true).await.unwrap();

        let loaded = crate::config::load_dir(dir.path()).unwrap();
        let mut config = ControllerConfig::from_loaded(loaded, None, "t".into(), b"t".to_vec());
        config.api_listen = Some(any_port);
        config.settings.policy.observe_only = true;
        let handle = start(config).await.unwrap();
        let api = handle.api_url().unwrap();
        let refused = http
            .post(format!("{api}/api/v1/restore-capacities"))
            .bearer_auth("t")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 409);
        assert!(refused.text().await.unwrap().contains("observe-only"));
        handle.shutdown(true).await.unwrap();
    }

    #[tokio::test]
    async fn a_bad_configuration_on_reload_is_refused_and_a_good_one_applied() {
        let dir = conf_dir("graceful");
        let handle = started(&dir).await;
        let site = dir.path().join("preemptor-site.xml");
        let good = std::fs::read_to_string(&site).unwrap();
        std::fs::write(&site, good.replace("graceful", "no-such-policy")).unwrap();
        let e = handle.reload().await.unwrap_err().to_string();
        assert!(e.contains("preemptor-site.xml:"), "file:line in {e}");
        assert!(e.contains("the old one stays"), "{e}");

        std::fs::write(&site, good.replace("graceful", "none")).unwrap();
        handle.reload().await.unwrap();
        // The reload tick's status names the new policy.
        let hub = handle.hub();
        tokio::time::timeout(Duration::from_secs(5), async {
            while hub.status().policy != "none" {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the new policy is in force");
        handle.shutdown(true).await.unwrap();
    }
}
