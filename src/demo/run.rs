//! One demo run: for each policy in turn, emulator + agent (or the simulated actuator) +
//! controller, the HiBench + TPC-H mix through the controller's proxy, then everything
//! stopped and the applications' records summarised.

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::agent::{AgentConfig, RunningAgent};
use crate::cluster::{JobClass, PolicyKind};
use crate::config::queues::QueueTree;
use crate::emulator::mix::{self, MixConfig};
use crate::emulator::queues::QueueSetup;
use crate::emulator::runtime::RuntimeKind;
use crate::emulator::stats::{AppRecord, app_records};
use crate::emulator::{Emulator, EmulatorConfig, EmulatorHandle};
use crate::resources::Resource;

use super::report::PolicySummary;
use super::simulated::{SimulatedActuator, SimulatedAgents};
use super::{DemoConfig, DemoError};
use crate::controller::agents::Actuator;
use crate::controller::hub::{ControllerEvent, Hub};
use crate::controller::view::SHORT_PARTITION_LABEL;
use crate::controller::{ControllerConfig, ControllerHandle};

/// How often the live progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Long jobs ask for more than the cluster, as in BIG-C's runs: every container is
/// taken, and a short job gets room only when a long task ends or is preempted.
const LONG_FILL: f64 = 1.2;

/// A long job may take every task slot: few ApplicationMasters, whose containers the
/// emulator runs in-process (no cgroup for an agent to act on).
const LONG_JOB_SHARE: f64 = 1.0;

/// What [`run`] measured.
#[derive(Clone, Debug)]
pub struct DemoReport {
    pub runtime: RuntimeKind,
    /// One per policy that ran, in order.
    pub rows: Vec<PolicySummary>,
    /// The applications of each run, for tests and further analysis.
    pub records: Vec<Vec<AppRecord>>,
    /// Ctrl-C (or the caller's cancel) cut the demo short; the last row is partial.
    pub interrupted: bool,
}

/// Runs every policy of `config` in turn. `cancel` stops the current run early (its
/// row is still reported) and skips the rest; everything started is stopped either way.
pub async fn run(config: &DemoConfig, cancel: CancellationToken) -> Result<DemoReport, DemoError> {
    let (short_queue, long_queue) = class_queues(&config.conf.queues)?;
    let mut report = DemoReport {
        runtime: RuntimeKind::Simulated,
        rows: Vec::new(),
        records: Vec::new(),
        interrupted: false,
    };
    for (i, &policy) in config.policies.iter().enumerate() {
        if cancel.is_cancelled() {
            report.interrupted = true;
            break;
        }
        let short_partition = (policy == PolicyKind::Dice).then_some(short_queue.as_str());
        let emu = start_emulator(config, short_partition).await?;
        report.runtime = emu.runtime();
        let keep_memory = emu.runtime() == RuntimeKind::Docker && !machine_has_swap();
        if i == 0 {
            say(config, &runtime_banner(emu.runtime()));
            if keep_memory {
                say(config, NO_SWAP_NOTE);
            }
        }
        say(
            config,
            &format!(
                "\n== policy {} ({}/{}) for {}s: {} x {} nodes, RM {} ==",
                policy,
                i + 1,
                config.policies.len(),
                config.per_policy.as_secs(),
                config.node_resource,
                config.nodes,
                emu.rm_url()
            ),
        );
        let queues = (short_queue.as_str(), long_queue.as_str());
        let outcome = run_policy(config, policy, &emu, queues, keep_memory, &cancel).await;
        // The emulator goes whatever happened: it owns the containers and the image.
        let shut = emu.shutdown().await;
        let (summary, records, interrupted) = outcome?;
        let removed = shut?.containers_removed;
        say(
            config,
            &format!("   emulator stopped, {removed} container(s) removed"),
        );
        report.rows.push(summary);
        report.records.push(records);
        if interrupted {
            report.interrupted = true;
            break;
        }
    }
    Ok(report)
}

/// Where to watch this run: the dashboard's address with its token, and the
/// `preemptor status` command, whose token file is written (mode 600) beside the
/// controller's state for as long as the run lasts.
fn watch_hint(api: &str, token: &str, dir: &std::path::Path) -> String {
    let file = dir.join("controller.token");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, token.as_bytes()));
    let status = match written {
        Ok(()) => format!(
            "preemptor status --controller {api} --token-file {}",
            file.display()
        ),
        Err(e) => format!("(cannot write {}: {e})", file.display()),
    };
    format!("   dashboard: {api}/?token={token}\n   status:    {status}")
}

fn say(config: &DemoConfig, line: &str) {
    if config.live {
        println!("{line}");
    }
}

const NO_SWAP_NOTE: &str = "memory: this machine has no swap, so a container's memory cannot go below what it uses; \
     suspend and shrink take CPU only and leave memory at the allocation (BIG-C pages it out to swap)";

/// True when the kernel has swap space (`SwapTotal` in /proc/meminfo above zero).
pub fn machine_has_swap() -> bool {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("SwapTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .is_some_and(|kb| kb > 0)
}

fn runtime_banner(kind: RuntimeKind) -> String {
    match kind {
        RuntimeKind::Docker => {
            "runtime: docker (real containers; the agent changes their cgroups)".into()
        }
        RuntimeKind::Simulated => {
            "runtime: SIMULATED (no Docker daemon answered): containers are in-process timers; \
             a CPU limit the controller sets changes a container's speed (suspend ~0, shrink in \
             proportion, resume full), memory limits have no effect"
                .into()
        }
    }
}

/// The leaf queues the mix submits to: the first with `preemptor.job-class` short, and
/// the first with long.
fn class_queues(tree: &QueueTree) -> Result<(String, String), DemoError> {
    let leaf = |class: JobClass| {
        tree.leaves()
            .find(|q| q.job_class == Some(class))
            .map(|q| q.name.clone())
    };
    match (leaf(JobClass::Short), leaf(JobClass::Long)) {
        (Some(s), Some(l)) => Ok((s, l)),
        _ => Err(DemoError::Config(
            "the demo needs a leaf queue with yarn.scheduler.capacity.<queue>.preemptor.job-class=short and one with long".into(),
        )),
    }
}

/// All of this machine's CPUs for a full cluster: the containers' quotas add up to
/// the machine, never more.
pub fn cpu_scale(cpus: usize, cluster: Resource) -> f64 {
    (cpus.max(1) as f64 / f64::from(cluster.vcores.max(1))).min(1.0)
}

/// `short_partition`: the short leaf queue, for Dice, whose partition is a node label.
async fn start_emulator(
    config: &DemoConfig,
    short_partition: Option<&str>,
) -> Result<EmulatorHandle, DemoError> {
    let cluster = config.node_resource.scale(config.nodes as f64);
    let mut ec = EmulatorConfig::local(config.nodes, config.node_resource, config.runtime);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    ec.cpu_scale = cpu_scale(cpus, cluster);
    let mut queues = QueueSetup::from_config(&config.conf.queues, cluster);
    if let Some(leaf) = short_partition {
        queues = queues.with_short_partition(leaf, SHORT_PARTITION_LABEL);
    }
    ec.queues = Some(queues);
    Ok(Emulator::start(ec).await?)
}

/// Creates `$TMPDIR/<name>`, where `{pid}` and `{ms}` in `name` become this process's id
/// and the time: a directory no other run uses.
pub(super) fn unique_temp_dir(name: &str) -> Result<PathBuf, DemoError> {
    let name = name
        .replace("{pid}", &std::process::id().to_string())
        .replace("{ms}", &crate::emulator::now_ms().to_string());
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&dir)
        .map_err(|e| DemoError::Io(format!("creating {}: {e}", dir.display())))?;
    Ok(dir)
}

/// A directory removed with everything in it when dropped.
pub(super) struct TempDir(pub(super) PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(dir = %self.0.display(), error = %e, "removing the demo's directory");
        }
    }
}

/// A random API token for one run, drawn as token files are.
pub(super) fn random_token() -> Result<String, DemoError> {
    crate::tokens::random_token().map_err(|e| DemoError::Io(format!("drawing a random token: {e}")))
}

/// An in-process node agent of the demo, with its state directory.
pub(super) struct LocalAgent {
    agent: RunningAgent,
    state_dir: PathBuf,
}

impl LocalAgent {
    async fn start(token: &str, policy: PolicyKind) -> Result<LocalAgent, DemoError> {
        Self::start_with(token, policy.name(), |_| {}).await
    }

    /// An agent on loopback with the demo's lease and memory timeout, `configure`d
    /// further by the caller; `label` names its state directory.
    pub(super) async fn start_with(
        token: &str,
        label: &str,
        configure: impl FnOnce(&mut AgentConfig),
    ) -> Result<LocalAgent, DemoError> {
        let state_dir = unique_temp_dir(&format!("preemptor-demo-{{pid}}-{{ms}}-{label}"))?;
        let mut ac = AgentConfig::new(token.as_bytes().to_vec(), state_dir.clone());
        ac.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        ac.lease_timeout = super::AGENT_LEASE;
        // A memory cut the kernel keeps refusing must not hold the controller's tick.
        ac.memory_timeout = Duration::from_secs(5);
        configure(&mut ac);
        match crate::agent::start(ac).await {
            Ok(agent) => Ok(LocalAgent { agent, state_dir }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&state_dir);
                Err(DemoError::Agent(e))
            }
        }
    }

    pub(super) fn url(&self) -> String {
        self.agent.url()
    }

    pub(super) async fn stop(self) {
        self.agent.shutdown().await;
        if let Err(e) = std::fs::remove_dir_all(&self.state_dir) {
            tracing::warn!(dir = %self.state_dir.display(), error = %e, "removing the demo agent's state directory");
        }
    }
}

/// Settings for one run: this policy everywhere, a 1 s interval, the local RM and agent.
fn controller_config(
    config: &DemoConfig,
    policy: PolicyKind,
    emu: &EmulatorHandle,
    agent_url: Option<&str>,
    agent_token: &str,
    actuator: Option<Arc<dyn Actuator>>,
    keep_memory: bool,
) -> Result<ControllerConfig, DemoError> {
    let (mut settings, queues) =
        super::run_settings(&config.conf, policy, config.seed, emu.rm_url());
    if keep_memory {
        // The floor at the long tasks' allocation: the agent lowers CPU only.
        settings.policy.suspend.footprint.memory_mb =
            crate::emulator::workload::LONG_TASK.memory_mb;
    }
    settings.agent.addresses = match agent_url {
        Some(url) => emu
            .nodes()
            .iter()
            .map(|n| (n.id.as_str().to_string(), url.to_string()))
            .collect(),
        None => Vec::new(),
    };
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    Ok(ControllerConfig {
        settings,
        queues,
        conf_dir: None,
        agent_token: agent_token.to_string(),
        api_token: random_token()?.into_bytes(),
        api_listen: Some(local),
        proxy_listen: Some(local),
        actuator,
    })
}

/// Prints each preemption log line and warning as the controller records it.
fn print_events(hub: &Hub, live: bool, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    let mut rx = hub.subscribe();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                e = rx.recv() => e,
            };
            match event {
                Ok(ControllerEvent::Action(record)) if live => {
                    println!("   {}", crate::controller::log::line(&record));
                }
                Ok(ControllerEvent::Warning { message, .. }) if live => {
                    println!("   warning: {message}");
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    if live {
                        println!("   ({n} log lines skipped: the terminal fell behind)");
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    })
}

fn progress_line(
    policy: PolicyKind,
    elapsed: Duration,
    total: Duration,
    emu: &EmulatorHandle,
    hub: &Hub,
) -> String {
    let records = emu.inspect(app_records);
    let count = |class: JobClass, f: &dyn Fn(&AppRecord) -> bool| {
        records.iter().filter(|r| r.class == class && f(r)).count()
    };
    let status = hub.status();
    format!(
        "   [{policy} {}s/{}s] long: {} running, {} done | short: {} submitted, {} waiting, {} done | suspended {}, shrunk {}",
        elapsed.as_secs(),
        total.as_secs(),
        count(JobClass::Long, &|r| r.finished_ms.is_none()),
        count(JobClass::Long, &|r| r.completion_ms().is_some()),
        count(JobClass::Short, &|_| true),
        count(JobClass::Short, &|r| r.first_container_ms.is_none()),
        count(JobClass::Short, &|r| r.completion_ms().is_some()),
        status.suspended,
        status.shrunk,
    )
}

/// One policy's run on a started emulator. Stops the controller and the agent before
/// returning, whatever happened.
async fn run_policy(
    config: &DemoConfig,
    policy: PolicyKind,
    emu: &EmulatorHandle,
    (short_queue, long_queue): (&str, &str),
    keep_memory: bool,
    cancel: &CancellationToken,
) -> Result<(PolicySummary, Vec<AppRecord>, bool), DemoError> {
    let token = random_token()?;
    let (agent, actuator): (Option<LocalAgent>, Option<Arc<dyn Actuator>>) =
        match emu.simulated_runtime() {
            Some(rt) => (
                None,
                Some(Arc::new(SimulatedAgents(SimulatedActuator::new(rt)))),
            ),
            None => (Some(LocalAgent::start(&token, policy).await?), None),
        };
    let agent_url = agent.as_ref().map(|a| a.agent.url());
    let state = match unique_temp_dir(&format!(
        "preemptor-demo-{{pid}}-{{ms}}-controller-{}",
        policy.name()
    )) {
        Ok(d) => TempDir(d),
        Err(e) => {
            if let Some(a) = agent {
                a.stop().await;
            }
            return Err(e);
        }
    };
    let mut api_token = String::new();
    let started = match controller_config(
        config,
        policy,
        emu,
        agent_url.as_deref(),
        &token,
        actuator,
        keep_memory,
    ) {
        Ok(mut cc) => {
            cc.settings.controller.state_dir = state.0.clone();
            api_token = String::from_utf8_lossy(&cc.api_token).into_owned();
            crate::controller::start(cc)
                .await
                .map_err(DemoError::Controller)
        }
        Err(e) => Err(e),
    };
    let controller = match started {
        Ok(c) => c,
        Err(e) => {
            if let Some(a) = agent {
                a.stop().await;
            }
            return Err(e);
        }
    };
    if let Some(api) = controller.api_url() {
        say(config, &watch_hint(&api, &api_token, &state.0));
    }
    let result = drive(
        config,
        policy,
        emu,
        &controller,
        (short_queue, long_queue),
        cancel,
    )
    .await;
    match controller.shutdown(false).await {
        Ok(r) => {
            say(
                config,
                &format!(
                    "   controller stopped: {} container(s) resumed, {} node capacit(ies) restored",
                    r.resumed, r.capacities_restored
                ),
            );
            for f in &r.failed {
                say(
                    config,
                    &format!("   not undone (the agent's lease will): {f}"),
                );
            }
        }
        Err(e) => say(config, &format!("   controller shutdown: {e}")),
    }
    if let Some(a) = agent {
        a.stop().await;
    }
    result
}

/// Replays the mix through the proxy for the policy's time and summarises.
async fn drive(
    config: &DemoConfig,
    policy: PolicyKind,
    emu: &EmulatorHandle,
    controller: &ControllerHandle,
    (short_queue, long_queue): (&str, &str),
    cancel: &CancellationToken,
) -> Result<(PolicySummary, Vec<AppRecord>, bool), DemoError> {
    let hub = controller.hub();
    let proxy = controller
        .proxy_url()
        .ok_or_else(|| DemoError::Io("the controller started without its proxy".into()))?;
    let stop = CancellationToken::new();
    // The log keeps printing through the drain; it stops once the run's records are read.
    let printing = CancellationToken::new();
    let printer = print_events(&hub, config.live, printing.clone());
    let mix_task = tokio::spawn(mix::run(
        MixConfig {
            rm_url: proxy,
            cluster: config.node_resource.scale(config.nodes as f64),
            long_queue: long_queue.to_string(),
            short_queue: short_queue.to_string(),
            seed: config.seed,
            burst_interval: config.burst_interval,
            burst_size: config.burst_size,
            user: "demo".into(),
            tick: Duration::from_secs(2),
            long_fill: LONG_FILL,
            long_job_share: LONG_JOB_SHARE,
            short_scale: config.short_scale,
            long_scale: config.long_scale,
            long_kernels: config.long_kernels.clone(),
        },
        stop.clone(),
    ));
    let begin = Instant::now();
    let mut interrupted = false;
    let mut next_progress = PROGRESS_EVERY;
    loop {
        let elapsed = begin.elapsed();
        if elapsed >= config.per_policy {
            break;
        }
        let wake = next_progress.min(config.per_policy) - elapsed.min(next_progress);
        tokio::select! {
            _ = cancel.cancelled() => {
                interrupted = true;
                say(config, "   interrupted: stopping this run cleanly");
                break;
            }
            _ = tokio::time::sleep(wake) => {}
        }
        if begin.elapsed() >= next_progress && begin.elapsed() < config.per_policy {
            say(
                config,
                &progress_line(policy, begin.elapsed(), config.per_policy, emu, &hub),
            );
            next_progress += PROGRESS_EVERY;
        }
    }
    stop.cancel();
    let mix_stats = mix_task.await;
    if !interrupted && !config.drain.is_zero() {
        interrupted = drain(config, policy, emu, &hub, cancel).await;
    }
    // Read before anything stops: the shutdown aborts what still runs.
    let end_ms = crate::emulator::now_ms();
    let records = emu.inspect(app_records);
    let metrics = hub.metrics();
    let mix_stats = match mix_stats {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            say(config, &format!("   mix stopped with an error: {e}"));
            None
        }
        Err(e) => {
            say(config, &format!("   mix task failed: {e}"));
            None
        }
    };
    printing.cancel();
    let _ = printer.await;
    if let Some(s) = mix_stats
        && s.errors > 0
    {
        say(
            config,
            &format!(
                "   the mix saw {} submission error(s) (see the log)",
                s.errors
            ),
        );
    }
    let summary = PolicySummary::new(policy.name(), &records, &metrics, end_ms);
    Ok((summary, records, interrupted))
}

/// With the mix stopped, waits until every application has ended, `config.drain` has
/// passed, or `cancel`; true if cancelled. The controller keeps acting meanwhile.
async fn drain(
    config: &DemoConfig,
    policy: PolicyKind,
    emu: &EmulatorHandle,
    hub: &Hub,
    cancel: &CancellationToken,
) -> bool {
    let begin = Instant::now();
    let mut next_progress = PROGRESS_EVERY;
    let unfinished = || {
        emu.inspect(app_records)
            .iter()
            .filter(|r| r.finished_ms.is_none())
            .count()
    };
    say(
        config,
        &format!(
            "   submissions stopped; waiting up to {}s for {} unfinished job(s)",
            config.drain.as_secs(),
            unfinished()
        ),
    );
    while begin.elapsed() < config.drain {
        if unfinished() == 0 {
            say(
                config,
                &format!(
                    "   every job ended {}s after submissions stopped",
                    begin.elapsed().as_secs()
                ),
            );
            return false;
        }
        tokio::select! {
            _ = cancel.cancelled() => {
                say(config, "   interrupted: stopping this run cleanly");
                return true;
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        if begin.elapsed() >= next_progress {
            let total = config.per_policy + config.drain;
            let elapsed = config.per_policy + begin.elapsed();
            say(config, &progress_line(policy, elapsed, total, emu, hub));
            next_progress += PROGRESS_EVERY;
        }
    }
    say(
        config,
        &format!(
            "   drain over: {} job(s) still unfinished after {}s",
            unfinished(),
            config.drain.as_secs()
        ),
    );
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_temp_dirs_name_the_process_and_time() {
        let a = unique_temp_dir("preemptor-test-{pid}-{ms}-x").unwrap();
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(a.is_dir());
        assert!(
            name.starts_with(&format!("preemptor-test-{}-", std::process::id()))
                && name.ends_with("-x"),
            "{name}"
        );
        assert!(!name.contains('{'), "{name}");
        std::fs::remove_dir(&a).unwrap();
    }

    #[test]
    fn containers_never_get_more_cpu_than_the_machine_has() {
        assert_eq!(cpu_scale(2, Resource::new(16384, 8)), 0.25);
        assert_eq!(cpu_scale(16, Resource::new(8192, 4)), 1.0);
        assert_eq!(cpu_scale(0, Resource::new(8192, 0)), 1.0);
    }

    #[test]
    fn the_shipped_queues_name_a_short_and_a_long_leaf() {
        let conf = crate::config::load_embedded_default().unwrap();
        assert_eq!(
            class_queues(&conf.queues).unwrap(),
            ("short".to_string(), "long".to_string())
        );
    }
}
