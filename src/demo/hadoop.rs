//! `preemptor demo --cluster hadoop`: the policy comparison on a real Hadoop YARN 3.5.0
//! that `deploy/hadoop/cluster.sh` starts. Long jobs are real MapReduce wordcounts in
//! queue `long` filling the cluster; short jobs are Spark SQL TPC-H Q1 queries in queue
//! `short`, each checked against DuckDB. Figures come from the RM's application records,
//! the MapReduce clients' counters and Spark's status tracker; preemptions from the
//! controller's action log (or, for `yarn`, the RM's preempted-container counts).

pub mod procs;
pub mod workload;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::agent::AgentClient;
use crate::agent::limits::CgroupLimits;
use crate::cluster::{ApplicationId, JobClass, PolicyKind};
use crate::config::LoadedConfig;
use crate::config::settings::RmSettings;
use crate::emulator::stats::AppRecord;
use crate::yarn::dto::{AppInfo, FinalApplicationStatus, YarnApplicationState};
use crate::yarn::{AppsQuery, RmClient};

use super::json::{ChecksJson, JobJson, Percentiles, PolicyJson, policy_json};
use super::report::PolicySummary;
use super::run::{LocalAgent, TempDir, machine_has_swap, random_token, unique_temp_dir};
use super::{DemoError, DemoPolicy};
use crate::controller::hub::{ControllerEvent, Outcome};
use crate::controller::{ControllerConfig, ControllerHandle};
use procs::{CLUSTER_MARKER, Client, Cluster, ClusterSpec};
use workload::Tools;

/// `deploy/hadoop/cluster.sh` of the checkout this binary was built from.
pub const DEFAULT_CLUSTER_SH: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/hadoop/cluster.sh");

/// The shipped queues (`short` and `long`), given to the RM when no --conf-dir is.
const SHIPPED_CAPACITY_SCHEDULER: &str = include_str!("../../hadoop-conf/capacity-scheduler.xml");

/// A MapReduce task's container (cluster.sh's `mapreduce.map.memory.mb`): the memory a
/// suspension leaves a long task on a machine without swap.
const MR_TASK_MB: u64 = 512;

const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// How long the long jobs get to take every vcore before the short queries start anyway.
const FILL_LIMIT: Duration = Duration::from_secs(240);

/// From the long job holding every vcore to the first query: its task JVMs start (and
/// write the pid files the agents find them by) within it.
const SETTLE: Duration = Duration::from_secs(10);

/// What a real-cluster demo runs.
#[derive(Clone, Debug)]
pub struct HadoopDemoConfig {
    pub policies: Vec<DemoPolicy>,
    pub nodes: usize,
    pub node_memory_mb: u64,
    pub node_vcores: u32,
    /// Queues and Preemptor's settings; the policy, interval and addresses are forced.
    pub conf: LoadedConfig,
    /// Where the RM's capacity-scheduler.xml comes from; the shipped one when `None`.
    pub conf_dir: Option<PathBuf>,
    pub seed: u64,
    pub cluster_sh: PathBuf,
    /// Python with pyspark and duckdb (tpchgen-cli beside it or on PATH).
    pub python: String,
    pub workload: HadoopWorkload,
    /// Longest a policy's run may take from the first submission; what still runs then
    /// is killed and counted unfinished.
    pub run_limit: Duration,
    pub live: bool,
}

/// The real cluster's workload.
#[derive(Clone, Debug)]
pub struct HadoopWorkload {
    /// Wordcount jobs in queue `long`; with `maps_per_job` maps each and their AMs they
    /// take every vcore.
    pub long_jobs: usize,
    pub maps_per_job: usize,
    /// Text per map (one file, one split).
    pub map_input_mb: u64,
    /// Spark SQL Q1 queries in queue `short`, `short_interval` apart, the first once the
    /// long jobs hold the cluster.
    pub short_queries: usize,
    pub short_interval: Duration,
    pub tpch_scale: f64,
}

impl HadoopWorkload {
    /// Long jobs whose AMs and maps take all `vcores` of the cluster (at least one map
    /// each).
    pub fn filling(
        vcores: usize,
        long_jobs: usize,
        map_input_mb: u64,
        short_queries: usize,
    ) -> Self {
        let long_jobs = long_jobs.max(1);
        HadoopWorkload {
            long_jobs,
            maps_per_job: (vcores / long_jobs).saturating_sub(1).max(1),
            map_input_mb,
            short_queries,
            short_interval: Duration::from_secs(15),
            tpch_scale: 0.01,
        }
    }
}

/// What [`run`] measured.
#[derive(Clone, Debug)]
pub struct HadoopReport {
    pub rows: Vec<PolicySummary>,
    pub json: Vec<PolicyJson>,
    pub interrupted: bool,
    /// Each `cluster.sh up` and `down`: what and how long.
    pub cluster_ops: Vec<(String, Duration)>,
}

fn say(config: &HadoopDemoConfig, line: &str) {
    if config.live {
        eprintln!("{line}");
    }
}

fn io_err(what: &str, p: &Path) -> impl Fn(std::io::Error) -> DemoError {
    let msg = format!("{what} {}", p.display());
    move |e| DemoError::Io(format!("{msg}: {e}"))
}

/// Inputs shared by every policy's run.
struct Inputs {
    tools: Tools,
    text: PathBuf,
    lineitem: PathBuf,
    q1_check: PathBuf,
    spark_conf: PathBuf,
    rm_conf: PathBuf,
    /// For Dice: the shipped queues with the short queue's node label keys, or the
    /// operator's own `--conf-dir` as it is.
    rm_conf_dice: PathBuf,
}

async fn prepare(config: &HadoopDemoConfig, root: &Path) -> Result<Inputs, DemoError> {
    let tools = Tools::find(&config.python).await?;
    let w = &config.workload;
    let started = Instant::now();
    let text = root.join("text");
    workload::write_text(
        &text,
        w.long_jobs * w.maps_per_job,
        w.map_input_mb,
        config.seed,
    )?;
    let lineitem = tools.lineitem(w.tpch_scale, &root.join("tpch")).await?;
    let scripts = root.join("scripts");
    std::fs::create_dir_all(&scripts).map_err(io_err("creating", &scripts))?;
    let q1_check = scripts.join("q1_check.py");
    std::fs::write(&q1_check, workload::Q1_CHECK_PY).map_err(io_err("writing", &q1_check))?;
    std::fs::write(scripts.join("q1.sql"), workload::Q1_SQL)
        .map_err(io_err("writing", &scripts))?;
    let spark_conf = root.join("spark-conf");
    std::fs::create_dir_all(&spark_conf).map_err(io_err("creating", &spark_conf))?;
    let defaults = spark_conf.join("spark-defaults.conf");
    std::fs::write(&defaults, tools.spark_defaults(&root.join("spark-staging")))
        .map_err(io_err("writing", &defaults))?;
    let shipped = |dir: &str, xml: &str| -> Result<PathBuf, DemoError> {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).map_err(io_err("creating", &d))?;
        let f = d.join("capacity-scheduler.xml");
        std::fs::write(&f, xml).map_err(io_err("writing", &f))?;
        Ok(d)
    };
    let (rm_conf, rm_conf_dice) = match &config.conf_dir {
        Some(d) => (d.clone(), d.clone()),
        None => (
            shipped("rm-conf", SHIPPED_CAPACITY_SCHEDULER)?,
            shipped(
                "rm-conf-dice",
                &with_short_label(SHIPPED_CAPACITY_SCHEDULER),
            )?,
        ),
    };
    say(
        config,
        &format!(
            "inputs: {} text files of {} MB, TPC-H lineitem at scale {} ({:.1} s)",
            w.long_jobs * w.maps_per_job,
            w.map_input_mb,
            w.tpch_scale,
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(Inputs {
        tools,
        text,
        lineitem,
        q1_check,
        spark_conf,
        rm_conf,
        rm_conf_dice,
    })
}

/// The shipped capacity-scheduler.xml with Dice's keys for its `short` queue
/// (docs/policies.md, "Dice on YARN").
fn with_short_label(xml: &str) -> String {
    let keys = [
        ("root.accessible-node-labels.short.capacity", "100"),
        ("root.short.accessible-node-labels", "*"),
        ("root.short.accessible-node-labels.short.capacity", "100"),
        ("root.short.default-node-label-expression", "short"),
    ];
    let mut added = String::new();
    for (k, v) in keys {
        added.push_str(&format!(
            "  <property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value></property>\n"
        ));
    }
    match xml.rfind("</configuration>") {
        Some(end) => format!("{}{added}{}", &xml[..end], &xml[end..]),
        None => xml.to_string(),
    }
}

/// Runs every policy in turn on a real cluster. The cluster is started once for the
/// policies without YARN's preemption and once for `yarn` (the setting is read when the
/// RM starts); between runs on one cluster every application has ended and every node's
/// capacity is checked back at its size, so runs are independent.
pub async fn run(
    config: &HadoopDemoConfig,
    cancel: CancellationToken,
) -> Result<HadoopReport, DemoError> {
    let root = TempDir(unique_temp_dir("preemptor-hadoop-demo-{pid}-{ms}")?);
    let inputs = prepare(config, &root.0).await?;
    let mut report = HadoopReport {
        rows: Vec::new(),
        json: Vec::new(),
        interrupted: false,
        cluster_ops: Vec::new(),
    };
    // Dropped after the cluster is down: its containers' cgroups go with it.
    let agent_cgroups = AgentCgroups(format!("/preemptor-demo-{}", std::process::id()));
    let mut cluster: Option<Cluster> = None;
    let work = root.0.join("hadoop");
    let result = async {
        for (i, &policy) in config.policies.iter().enumerate() {
            if cancel.is_cancelled() {
                report.interrupted = true;
                break;
            }
            let yarn_preemption = policy == DemoPolicy::Yarn;
            // Read when the RM starts: a cluster of its own for Dice's node label.
            let node_labels = policy == DemoPolicy::Preemptor(PolicyKind::Dice);
            let mut setup = Duration::ZERO;
            let wanted = Some((yarn_preemption, node_labels));
            if cluster.as_ref().map(|c| (c.yarn_preemption, c.node_labels)) != wanted {
                if let Some(c) = cluster.take() {
                    let took = c.down().await?;
                    say(
                        config,
                        &format!("cluster down: {:.1} s", took.as_secs_f64()),
                    );
                    report.cluster_ops.push(("down".into(), took));
                    setup += took;
                }
                say(
                    config,
                    &format!(
                        "cluster up: {} NodeManagers of {} MB and {} vcores, YARN preemption {}",
                        config.nodes,
                        config.node_memory_mb,
                        config.node_vcores,
                        if yarn_preemption { "on" } else { "off" }
                    ),
                );
                let c = Cluster::up(ClusterSpec {
                    script: &config.cluster_sh,
                    work: &work,
                    nodes: config.nodes,
                    node_memory_mb: config.node_memory_mb,
                    node_vcores: config.node_vcores,
                    conf_dir: if node_labels {
                        &inputs.rm_conf_dice
                    } else {
                        &inputs.rm_conf
                    },
                    yarn_preemption,
                    node_labels,
                })
                .await?;
                say(
                    config,
                    &format!("cluster up: {:.1} s, RM {}", c.up_took.as_secs_f64(), c.rm),
                );
                report.cluster_ops.push(("up".into(), c.up_took));
                setup += c.up_took;
                cluster = Some(c);
            }
            let Some(c) = cluster.as_ref() else {
                return Err(DemoError::Io("no cluster".into()));
            };
            say(
                config,
                &format!(
                    "\n== policy {policy} ({}/{}) on the real YARN at {} ==",
                    i + 1,
                    config.policies.len(),
                    c.rm
                ),
            );
            let run_dir = root.0.join(format!("run-{}-{policy}", i + 1));
            std::fs::create_dir_all(&run_dir).map_err(io_err("creating", &run_dir))?;
            let (summary, mut json, interrupted) = run_policy(
                config,
                policy,
                c,
                &inputs,
                &run_dir,
                &agent_cgroups.0,
                &cancel,
            )
            .await?;
            json.setup_seconds = Some(setup.as_secs_f64());
            report.rows.push(summary);
            report.json.push(json);
            if interrupted {
                report.interrupted = true;
                break;
            }
        }
        Ok(())
    }
    .await;
    if let Some(c) = cluster.take() {
        match c.down().await {
            Ok(took) => {
                say(
                    config,
                    &format!("cluster down: {:.1} s", took.as_secs_f64()),
                );
                report.cluster_ops.push(("down".into(), took));
            }
            Err(e) if result.is_ok() => return Err(e),
            Err(e) => say(config, &format!("{e}")),
        }
    }
    result.map(|()| report)
}

/// The agents' parent cgroup, removed with everything below it when dropped.
struct AgentCgroups(String);

impl Drop for AgentCgroups {
    fn drop(&mut self) {
        let removed = crate::agent::cgroup::CgroupMounts::read_self()
            .map_err(crate::agent::host::HostError::from)
            .and_then(|m| crate::agent::host::remove_tree(&m, &self.0));
        if let Err(e) = removed {
            tracing::warn!(cgroup = %self.0, error = %e, "removing the demo agents' cgroups");
        }
    }
}

/// One submitted job and what it came to.
struct Job {
    class: JobClass,
    kind: &'static str,
    client: Client,
    app: Option<String>,
}

impl Job {
    /// The application id the client printed, once it has.
    fn app_id(&mut self) -> Option<String> {
        if self.app.is_none() {
            let (text, marker) = match self.kind {
                "spark" => (self.client.stdout_text(), ", application"),
                _ => (self.client.stderr_text(), "Submitted application"),
            };
            self.app = workload::application_after(&text, marker);
        }
        self.app.clone()
    }
}

fn rm_client(url: &str) -> Result<RmClient, DemoError> {
    RmClient::new(&RmSettings {
        addresses: vec![url.to_string()],
        user_name: None,
        request_timeout_ms: 10_000,
        max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
        tls: Default::default(),
        kerberos: None,
    })
    .map_err(|e| DemoError::Io(format!("RM client: {e}")))
}

/// A reused cluster starts a run with no application left from the last one: any still
/// RUNNING or ACCEPTED is killed, and the run waits until the RM lists none.
async fn ensure_idle(config: &HadoopDemoConfig, rm: &RmClient) -> Result<(), DemoError> {
    let query = AppsQuery::states(&[
        YarnApplicationState::Running,
        YarnApplicationState::Accepted,
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let apps = rm
            .apps(&query)
            .await
            .map_err(|e| DemoError::Io(format!("listing the RM's applications: {e}")))?
            .value;
        if apps.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            let ids: Vec<&str> = apps.iter().map(|a| a.id.as_str()).collect();
            return Err(DemoError::Io(format!(
                "applications of an earlier run still on the RM after 60 s: {}",
                ids.join(", ")
            )));
        }
        for a in &apps {
            say(
                config,
                &format!("   killing {} left from an earlier run", a.id),
            );
            if let Ok(id) = a.id.parse::<ApplicationId>() {
                let _ = rm.kill_app(&id).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// RM node id (`localhost:PORT`) of each NodeManager web URL, in NodeManager order.
async fn node_ids(rm: &RmClient, webapps: &[String]) -> Result<Vec<String>, DemoError> {
    let nodes = rm
        .nodes()
        .await
        .map_err(|e| DemoError::Io(format!("listing the RM's nodes: {e}")))?
        .value;
    webapps
        .iter()
        .map(|url| {
            let port = url.rsplit(':').next().unwrap_or_default();
            nodes
                .iter()
                .find(|n| n.node_http_address.rsplit(':').next() == Some(port))
                .map(|n| n.id.clone())
                .ok_or_else(|| DemoError::Io(format!("no RM node serves {url}")))
        })
        .collect()
}

/// The agents of one run: one per NodeManager, in `process` mode.
async fn start_agents(
    cluster: &Cluster,
    token: &str,
    policy: DemoPolicy,
    cgroup_parent: &str,
) -> Result<Vec<LocalAgent>, DemoError> {
    let mut agents = Vec::new();
    for (i, nm) in cluster.nm_webapps.iter().enumerate() {
        let local = cluster.nm_local_dir(i);
        let nm = nm.clone();
        let label = format!("{policy}-nm{}", i + 1);
        let parent = cgroup_parent.to_string();
        match LocalAgent::start_with(token, &label, move |ac| {
            ac.containers = crate::agent::ContainerBackend::Process;
            ac.agent_cgroup_parent = parent;
            ac.nm_local_dirs = vec![local];
            ac.nodemanager = Some(nm);
        })
        .await
        {
            Ok(a) => agents.push(a),
            Err(e) => {
                for a in agents {
                    a.stop().await;
                }
                return Err(e);
            }
        }
    }
    Ok(agents)
}

fn controller_config(
    config: &HadoopDemoConfig,
    kind: PolicyKind,
    rm: &str,
    agents: Vec<(String, String)>,
    token: &str,
    state_dir: &Path,
) -> Result<ControllerConfig, DemoError> {
    let (mut settings, queues) = super::run_settings(&config.conf, kind, config.seed, rm);
    settings.controller.state_dir = state_dir.to_path_buf();
    if !machine_has_swap() {
        // Without swap a memory cut under use is refused: suspend takes CPU only.
        settings.policy.suspend.footprint.memory_mb = MR_TASK_MB;
    }
    settings.agent.addresses = agents;
    Ok(ControllerConfig {
        settings,
        queues,
        conf_dir: None,
        agent_token: token.to_string(),
        api_token: random_token()?.into_bytes(),
        api_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        proxy_listen: None,
        actuator: None,
    })
}

/// The controller's applied actions, and the cgroup checks made after each resume.
#[derive(Default)]
struct ActionLog {
    /// Applied suspend, shrink and kill actions.
    preemptions: u64,
    /// When each of them was applied (unix ms).
    preempted_at_ms: Vec<u64>,
    /// (node, container) of every container an action changed.
    touched: HashSet<(String, String)>,
    /// Each container's cgroup limits as first read while no agent had changed it.
    first_seen: HashMap<(String, String), CgroupLimits>,
    cgroups_checked: usize,
    problems: Vec<String>,
}

/// Is `c`'s cgroup, as the agent reads its files now, back to `before` (its limits as
/// first read, unchanged)? `Ok(false)`: nothing to check (it has ended).
fn restored(
    c: &crate::agent::api::ContainerStatus,
    before: Option<&CgroupLimits>,
) -> Result<bool, String> {
    if c.changed {
        return Err(format!("{}: the agent still has it changed", c.container));
    }
    match (c.current, before) {
        (Some(now), Some(b)) if now != *b => Err(format!(
            "{}: cgroup limits {now:?}, before the first change {b:?}",
            c.container
        )),
        (Some(_), Some(_)) => Ok(true),
        (Some(_), None) => Err(format!(
            "{}: changed before its limits were first read; cannot tell",
            c.container
        )),
        (None, _) => Ok(false),
    }
}

/// Reads every container's cgroup limits through its agent each second, and keeps the
/// first reading of each one not changed yet: what a resume must give back.
fn watch_limits(
    agents: HashMap<String, AgentClient>,
    log: Arc<Mutex<ActionLog>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            for (node, agent) in &agents {
                let Ok(list) = agent.containers().await else {
                    continue;
                };
                let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                for c in list {
                    if let (false, Some(limits)) = (c.changed, c.current) {
                        l.first_seen
                            .entry((node.clone(), c.container.to_string()))
                            .or_insert(limits);
                    }
                }
            }
        }
    })
}

/// Seconds from each short job's submission (the RM's startedTime) to the first
/// preemption applied at or after it; jobs that needed none are left out.
fn first_victim_ms(records: &[AppRecord], preempted_at_ms: &[u64]) -> Vec<u64> {
    records
        .iter()
        .filter(|r| r.class == JobClass::Short && r.submitted_ms > 0)
        .filter_map(|r| {
            preempted_at_ms
                .iter()
                .filter(|&&t| t >= r.submitted_ms)
                .min()
                .map(|t| t - r.submitted_ms)
        })
        .collect()
}

/// Prints each action as the controller records it and, after each resume, reads the
/// container back from its agent.
fn watch_actions(
    config: &HadoopDemoConfig,
    controller: &ControllerHandle,
    agents: HashMap<String, AgentClient>,
    log: Arc<Mutex<ActionLog>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mut rx = controller.hub().subscribe();
    let live = config.live;
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                e = rx.recv() => e,
            };
            let record = match event {
                Ok(ControllerEvent::Action(r)) => r,
                Ok(ControllerEvent::Warning { message, .. }) => {
                    if live {
                        eprintln!("   warning: {message}");
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    if live {
                        eprintln!("   ({n} log lines skipped)");
                    }
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if live {
                eprintln!("   {}", crate::controller::log::line(&record));
            }
            if record.outcome != Outcome::Applied {
                continue;
            }
            let (Some(node), Some(container)) = (record.node.clone(), record.container.clone())
            else {
                continue;
            };
            let before = {
                let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                if ["suspend", "shrink", "kill"].contains(&record.action.as_str()) {
                    l.preemptions += 1;
                    l.preempted_at_ms.push(record.at_ms);
                }
                l.touched.insert((node.clone(), container.clone()));
                l.first_seen
                    .get(&(node.clone(), container.clone()))
                    .copied()
            };
            if record.action != "resume" {
                continue;
            }
            let Some(agent) = agents.get(&node) else {
                continue;
            };
            // A container that ended meanwhile has nothing left to check.
            if let Ok(status) = agent.container(&container).await {
                let verdict = restored(&status, before.as_ref());
                let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                match verdict {
                    Ok(true) => l.cgroups_checked += 1,
                    Ok(false) => {}
                    Err(p) => l.problems.push(format!("after resume: {p}")),
                }
            }
        }
    })
}

/// One policy's run on a started cluster: agents and controller (unless `yarn`), the
/// long jobs, then the short queries, until every client has exited; then the records
/// and the checks.
async fn run_policy(
    config: &HadoopDemoConfig,
    policy: DemoPolicy,
    cluster: &Cluster,
    inputs: &Inputs,
    run_dir: &Path,
    cgroup_parent: &str,
    cancel: &CancellationToken,
) -> Result<(PolicySummary, PolicyJson, bool), DemoError> {
    let rm = rm_client(&cluster.rm)?;
    ensure_idle(config, &rm).await?;
    let nodes = node_ids(&rm, &cluster.nm_webapps).await?;
    let token = random_token()?;
    // `yarn` is YARN's own preemption: no controller, no agents.
    let kind = match policy {
        DemoPolicy::Preemptor(k) => Some(k),
        DemoPolicy::Yarn => None,
    };
    let agents = match kind {
        Some(_) => start_agents(cluster, &token, policy, cgroup_parent).await?,
        None => Vec::new(),
    };
    let agent_urls: Vec<(String, String)> = nodes
        .iter()
        .cloned()
        .zip(agents.iter().map(|a| a.url()))
        .collect();
    let controller = match kind {
        Some(k) => {
            let started = match controller_config(
                config,
                k,
                &cluster.rm,
                agent_urls.clone(),
                &token,
                &run_dir.join(format!("controller-{}", k.name())),
            ) {
                Ok(cc) => crate::controller::start(cc)
                    .await
                    .map_err(DemoError::Controller),
                Err(e) => Err(e),
            };
            match started {
                Ok(c) => Some(c),
                Err(e) => {
                    for a in agents {
                        a.stop().await;
                    }
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let log = Arc::new(Mutex::new(ActionLog::default()));
    let watching = CancellationToken::new();
    let mut clients = HashMap::new();
    for (node, url) in &agent_urls {
        match AgentClient::new(url, &token, Duration::from_secs(10)) {
            Ok(c) => {
                clients.insert(node.clone(), c);
            }
            Err(e) => say(config, &format!("   agent client for {url}: {e}")),
        }
    }
    let watcher = controller
        .as_ref()
        .map(|c| watch_actions(config, c, clients.clone(), log.clone(), watching.clone()));
    let limits_watcher = controller
        .is_some()
        .then(|| watch_limits(clients.clone(), log.clone(), watching.clone()));

    let outcome = drive(
        config,
        policy,
        cluster,
        &rm,
        inputs,
        run_dir,
        controller.as_ref(),
        cancel,
    )
    .await;

    let mut checks = ChecksJson {
        cgroups_restored: true,
        ..ChecksJson::default()
    };
    // The controller's own accounting (reclaimed resources, failed actions), read
    // before the shutdown resumes everything.
    let metrics = (controller.as_ref())
        .map(|c| c.hub().metrics())
        .unwrap_or_default();
    if let Some(c) = controller {
        match c.shutdown(false).await {
            Ok(r) => {
                say(
                    config,
                    &format!(
                        "   controller stopped: {} container(s) resumed, {} node capacit(ies) restored",
                        r.resumed, r.capacities_restored
                    ),
                );
                for f in r.failed {
                    checks.problems.push(format!("controller shutdown: {f}"));
                }
            }
            Err(e) => checks.problems.push(format!("controller shutdown: {e}")),
        }
    }
    watching.cancel();
    for w in [watcher, limits_watcher].into_iter().flatten() {
        let _ = w.await;
    }
    // What the agents still know of the containers they changed.
    let log = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
    checks.cgroups_checked = log.cgroups_checked;
    checks.problems.extend(log.problems);
    for (node, agent) in &clients {
        match agent.containers().await {
            Ok(list) => {
                for c in list {
                    if !log
                        .touched
                        .contains(&(node.clone(), c.container.to_string()))
                    {
                        continue;
                    }
                    let key = (node.clone(), c.container.to_string());
                    match restored(&c, log.first_seen.get(&key)) {
                        Ok(true) => checks.cgroups_checked += 1,
                        Ok(false) => {}
                        Err(p) => checks.problems.push(format!("after the run: {p}")),
                    }
                }
            }
            Err(e) => checks
                .problems
                .push(format!("agent of {node}: listing containers: {e}")),
        }
    }
    checks.cgroups_restored = checks.problems.is_empty();
    for a in agents {
        a.stop().await;
    }
    let (records, mut jobs, interrupted) = outcome?;
    let capacity_problems = capacities_restored(config, &rm).await;
    checks.capacities_restored = capacity_problems.is_empty();
    checks.problems.extend(capacity_problems);

    let name = policy.to_string();
    let preemptions = match policy {
        DemoPolicy::Yarn => jobs.iter().map(|j| j.yarn_preempted_containers).sum(),
        DemoPolicy::Preemptor(_) => log.preemptions,
    };
    let mut summary = PolicySummary::new(&name, &records, &metrics, crate::emulator::now_ms());
    summary.preemptions = preemptions;
    // A job fails if YARN says so, its client failed, or a query's answer was wrong.
    summary.failed_jobs = jobs
        .iter()
        .filter(|j| {
            j.final_status != "SUCCEEDED" || !j.client_succeeded || j.correct == Some(false)
        })
        .count();
    let mut json = policy_json(&summary, &records);
    if kind.is_some() {
        json.first_victim = Some(Percentiles::of(&first_victim_ms(
            &records,
            &log.preempted_at_ms,
        )));
    }
    jobs.sort_by(|a, b| a.application.cmp(&b.application));
    json.jobs = jobs;
    for p in &checks.problems {
        say(config, &format!("   CHECK FAILED: {p}"));
    }
    say(
        config,
        &format!(
            "   checks: node capacities {}, container cgroups {} ({} checked)",
            if checks.capacities_restored {
                "restored"
            } else {
                "NOT restored"
            },
            if checks.cgroups_restored {
                "restored"
            } else {
                "NOT restored"
            },
            checks.cgroups_checked
        ),
    );
    json.checks = Some(checks);
    Ok((summary, json, interrupted))
}

/// Every node's `totalResource` back at its configured size (updates apply
/// asynchronously: a few seconds' grace).
async fn capacities_restored(config: &HadoopDemoConfig, rm: &RmClient) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let problems = match rm.nodes().await {
            Ok(nodes) => {
                let mut p: Vec<String> = nodes
                    .value
                    .iter()
                    .filter(|n| {
                        n.total_resource.memory != config.node_memory_mb as i64
                            || n.total_resource.vcores != i64::from(config.node_vcores)
                    })
                    .map(|n| {
                        format!(
                            "node {}: totalResource <{} MB, {} vcores>, configured <{} MB, {} vcores>",
                            n.id,
                            n.total_resource.memory,
                            n.total_resource.vcores,
                            config.node_memory_mb,
                            config.node_vcores
                        )
                    })
                    .collect();
                if nodes.value.len() != config.nodes {
                    p.push(format!(
                        "the RM lists {} nodes, not {}",
                        nodes.value.len(),
                        config.nodes
                    ));
                }
                p
            }
            Err(e) => vec![format!("listing the RM's nodes: {e}")],
        };
        if problems.is_empty() || Instant::now() > deadline {
            return problems;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn spark_command(
    config: &HadoopDemoConfig,
    cluster: &Cluster,
    inputs: &Inputs,
    name: &str,
    run_dir: &Path,
    go: &Path,
) -> tokio::process::Command {
    let _ = config;
    let mut cmd = tokio::process::Command::new(inputs.tools.spark_home.join("bin/spark-submit"));
    cmd.env("SPARK_HOME", &inputs.tools.spark_home)
        .env("SPARK_CONF_DIR", &inputs.spark_conf)
        .env("HADOOP_CONF_DIR", &cluster.conf_dir)
        .env("YARN_CONF_DIR", &cluster.conf_dir)
        .env("PYSPARK_PYTHON", &inputs.tools.python)
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .env("TMPDIR", run_dir)
        // `cluster.sh down` stops whatever carries the cluster's marker.
        .env(CLUSTER_MARKER, &cluster.work)
        .current_dir(run_dir)
        .args([
            "--master",
            "yarn",
            "--deploy-mode",
            "client",
            "--queue",
            "short",
        ])
        .args(["--name", name])
        .args(["--conf", "spark.yarn.tags=preemptor.class=short,tpch=q1"])
        .arg(&inputs.q1_check)
        .arg("--lineitem")
        .arg(&inputs.lineitem)
        .arg("--start-when")
        .arg(go);
    cmd
}

fn wordcount_command(
    cluster: &Cluster,
    inputs: &Inputs,
    n: usize,
    run_dir: &Path,
    maps: usize,
) -> Result<tokio::process::Command, DemoError> {
    // Each job counts its own files: one split per file, one map per split.
    let input = run_dir.join(format!("long-{n}-in"));
    std::fs::create_dir_all(&input).map_err(io_err("creating", &input))?;
    for m in 0..maps {
        let name = format!("part-{:03}.txt", n * maps + m);
        let src = inputs.text.join(&name);
        std::os::unix::fs::symlink(&src, input.join(&name)).map_err(io_err("linking", &src))?;
    }
    let output = run_dir.join(format!("long-{n}-out"));
    let jar = cluster.examples_jar.to_string_lossy().into_owned();
    let input = input.to_string_lossy().into_owned();
    let output = output.to_string_lossy().into_owned();
    let mut cmd = cluster.hadoop(&[
        "jar",
        &jar,
        "wordcount",
        "-Dmapreduce.job.queuename=long",
        "-Dmapreduce.job.tags=preemptor.class=long",
        "-Dmapreduce.job.reduces=1",
        // Reduces ask for containers only once the maps are done: no pending long
        // request competes with a short job for room a suspension frees.
        "-Dmapreduce.job.reduce.slowstart.completedmaps=1.0",
        "-Dmapreduce.input.fileinputformat.split.minsize=1099511627776",
        &input,
        &output,
    ]);
    cmd.current_dir(run_dir);
    Ok(cmd)
}

/// Submits the workload and waits for every client; the applications' records then.
#[allow(clippy::too_many_arguments)]
async fn drive(
    config: &HadoopDemoConfig,
    policy: DemoPolicy,
    cluster: &Cluster,
    rm: &RmClient,
    inputs: &Inputs,
    run_dir: &Path,
    controller: Option<&ControllerHandle>,
    cancel: &CancellationToken,
) -> Result<(Vec<AppRecord>, Vec<JobJson>, bool), DemoError> {
    let w = &config.workload;
    let cluster_vcores = i64::from(config.node_vcores) * config.nodes as i64;
    let begin = Instant::now();
    let mut jobs: Vec<Job> = Vec::new();
    for n in 0..w.long_jobs {
        let cmd = wordcount_command(cluster, inputs, n, run_dir, w.maps_per_job)?;
        let client = Client::spawn(
            format!("wordcount {}", n + 1),
            cmd,
            &run_dir.join(format!("long-{n}")),
        )?;
        jobs.push(Job {
            class: JobClass::Long,
            kind: "mapreduce",
            client,
            app: None,
        });
    }
    say(
        config,
        &format!(
            "   {} wordcount jobs submitted to queue long ({} maps of {} MB each)",
            w.long_jobs, w.maps_per_job, w.map_input_mb
        ),
    );
    // The Spark clients start now and wait, before creating their SparkSession, for
    // their go file: a JVM and Python take 30 to 150 s to start on a busy 2-core
    // machine, so each query reaches the RM when due rather than when its client is up.
    let mut go_files = Vec::new();
    for i in 0..w.short_queries {
        let name = format!("tpch-q1-{policy}-{}", i + 1);
        let go = run_dir.join(format!("{name}.go"));
        let cmd = spark_command(config, cluster, inputs, &name, run_dir, &go);
        let client = Client::spawn(name.clone(), cmd, &run_dir.join(&name))?;
        jobs.push(Job {
            class: JobClass::Short,
            kind: "spark",
            client,
            app: None,
        });
        go_files.push((name, go));
    }
    let release = |(name, go): &(String, PathBuf)| -> Result<(), DemoError> {
        std::fs::write(go, b"").map_err(io_err("writing", go))?;
        say(config, &format!("   {name} submitted to queue short"));
        Ok(())
    };
    let mut interrupted = false;
    let mut next_progress = PROGRESS_EVERY;
    let mut short_due: Option<Instant> = None;
    let mut shorts = 0;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => {
                say(config, "   interrupted: stopping this run cleanly");
                interrupted = true;
                break;
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        let mut ids = Vec::new();
        for j in &mut jobs {
            if let Some(id) = j.app_id() {
                ids.push((id, j.class));
            }
        }
        let apps = app_infos(rm, ids.iter().map(|(id, _)| id.as_str())).await;
        if short_due.is_none() && shorts < w.short_queries {
            let held: i64 = apps
                .values()
                .filter(|a| a.queue.ends_with("long"))
                .map(|a| a.allocated_vcores.max(0))
                .sum();
            let waited = begin.elapsed();
            if held >= cluster_vcores || waited > FILL_LIMIT {
                say(
                    config,
                    &format!(
                        "   long jobs hold {held} of {cluster_vcores} vcores after {}s: short queries start in {}s",
                        waited.as_secs(),
                        SETTLE.as_secs()
                    ),
                );
                short_due = Some(Instant::now() + SETTLE);
            }
        }
        if let Some(due) = short_due
            && shorts < w.short_queries
            && Instant::now() >= due
        {
            release(&go_files[shorts])?;
            shorts += 1;
            short_due = Some(due + w.short_interval);
        }
        let long_done = jobs
            .iter_mut()
            .filter(|j| j.class == JobClass::Long)
            .all(|j| j.client.done());
        if long_done && short_due.is_none() && shorts < w.short_queries {
            say(
                config,
                "   every long job ended before the cluster was full",
            );
            for g in &go_files[shorts..] {
                release(g)?;
            }
            shorts = w.short_queries;
        }
        if shorts >= w.short_queries && jobs.iter_mut().all(|j| j.client.done()) {
            break;
        }
        if begin.elapsed() > config.run_limit {
            say(
                config,
                &format!(
                    "   run limit of {}s reached: stopping what still runs",
                    config.run_limit.as_secs()
                ),
            );
            break;
        }
        if begin.elapsed() >= next_progress {
            next_progress += PROGRESS_EVERY;
            say(
                config,
                &progress_line(policy, begin.elapsed(), &mut jobs, &apps, controller),
            );
        }
    }
    // Clients still running (limit, interrupt) are killed, and their applications.
    for j in &mut jobs {
        if !j.client.done() {
            j.client.kill();
            if let Some(id) = j.app_id().and_then(|s| s.parse::<ApplicationId>().ok()) {
                let _ = rm.kill_app(&id).await;
            }
        }
    }
    let mut records = Vec::new();
    let mut out = Vec::new();
    for j in &mut jobs {
        let (record, json) = job_record(config, rm, j).await;
        if let Some(r) = record {
            records.push(r);
        }
        out.push(json);
    }
    say(
        config,
        &format!(
            "   every client {} {:.0}s after the first submission",
            if interrupted { "stopped" } else { "ended" },
            begin.elapsed().as_secs_f64()
        ),
    );
    Ok((records, out, interrupted))
}

/// The RM's records of `ids`, by id (missing ones left out).
async fn app_infos<'a>(
    rm: &RmClient,
    ids: impl Iterator<Item = &'a str>,
) -> BTreeMap<String, AppInfo> {
    let mut out = BTreeMap::new();
    for id in ids {
        if let Ok(parsed) = id.parse::<ApplicationId>()
            && let Ok(info) = rm.app(&parsed).await
        {
            out.insert(id.to_string(), info.value);
        }
    }
    out
}

fn progress_line(
    policy: DemoPolicy,
    elapsed: Duration,
    jobs: &mut [Job],
    apps: &BTreeMap<String, AppInfo>,
    controller: Option<&ControllerHandle>,
) -> String {
    // (class, client done, at the RM, AM launched)
    let states: Vec<(JobClass, bool, bool, bool)> = jobs
        .iter_mut()
        .map(|j| {
            let app = j.app.as_ref().and_then(|id| apps.get(id));
            let launched = app.is_some_and(|a| a.launch_time > 0);
            (j.class, j.client.done(), app.is_some(), launched)
        })
        .collect();
    let count = |class: JobClass, f: &dyn Fn(bool, bool, bool) -> bool| {
        states
            .iter()
            .filter(|(c, done, at_rm, launched)| *c == class && f(*done, *at_rm, *launched))
            .count()
    };
    let held = controller.map_or_else(String::new, |c| {
        let s = c.hub().status();
        format!(" | suspended {}, shrunk {}", s.suspended, s.shrunk)
    });
    format!(
        "   [{policy} {}s] long: {} running, {} done | short: {} client(s) starting, {} waiting at the RM, {} running, {} done{held}",
        elapsed.as_secs(),
        count(JobClass::Long, &|done, _, launched| !done && launched),
        count(JobClass::Long, &|done, _, _| done),
        count(JobClass::Short, &|done, at_rm, _| !done && !at_rm),
        count(JobClass::Short, &|done, at_rm, launched| !done
            && at_rm
            && !launched),
        count(JobClass::Short, &|done, _, launched| !done && launched),
        count(JobClass::Short, &|done, _, _| done),
    )
}

fn state_name(s: &YarnApplicationState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

fn status_name(s: &FinalApplicationStatus) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

/// A job's RM record (waiting for the RM to call it ended: a client-mode Spark AM
/// unregisters just after the driver stops) with the attempts its client counted.
async fn job_record(
    config: &HadoopDemoConfig,
    rm: &RmClient,
    j: &mut Job,
) -> (Option<AppRecord>, JobJson) {
    let stdout = j.client.stdout_text();
    let stderr = j.client.stderr_text();
    let (failed, killed, correct) = match j.kind {
        "spark" => {
            let (tasks, correct) = workload::spark_outcome(&stdout);
            (tasks.map_or(0, |t| t.1), 0, Some(correct))
        }
        _ => (
            workload::counter_sum(&stderr, &["Failed map tasks", "Failed reduce tasks"]),
            workload::counter_sum(&stderr, &["Killed map tasks", "Killed reduce tasks"]),
            None,
        ),
    };
    let client_succeeded = j.client.succeeded();
    if !client_succeeded {
        let tail: String = {
            let t = if j.kind == "spark" { &stdout } else { &stderr };
            let lines: Vec<&str> = t.lines().collect();
            lines[lines.len().saturating_sub(8)..].join("\n      ")
        };
        say(
            config,
            &format!(
                "   {} exited with {:?} ({}); its output ends:\n      {tail}",
                j.client.what,
                j.client.exit,
                j.client.stderr.display()
            ),
        );
    }
    let id = j.app_id();
    let mut info = None;
    if let Some(parsed) = id.as_deref().and_then(|s| s.parse::<ApplicationId>().ok()) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(a) = rm.app(&parsed).await {
                let ended = matches!(
                    a.value.state,
                    YarnApplicationState::Finished
                        | YarnApplicationState::Failed
                        | YarnApplicationState::Killed
                );
                if ended || Instant::now() > deadline {
                    info = Some((parsed, a.value));
                    break;
                }
            } else if Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let ms = |v: i64| u64::try_from(v).ok().filter(|v| *v > 0);
    let record = info.as_ref().map(|(parsed, a)| AppRecord {
        id: *parsed,
        name: a.name.clone(),
        queue: a.queue.clone(),
        class: j.class,
        submitted_ms: ms(a.started_time).unwrap_or(0),
        first_container_ms: ms(a.launch_time),
        finished_ms: ms(a.finished_time),
        state: a.state,
        final_status: a.final_status,
        attempts: 0,
        killed: u32::try_from(killed).unwrap_or(u32::MAX),
        failed: u32::try_from(failed).unwrap_or(u32::MAX),
    });
    let secs = |v: Option<u64>| v.map(|v| v as f64 / 1000.0);
    let json = JobJson {
        application: id.unwrap_or_else(|| format!("(none: {})", j.client.what)),
        kind: j.kind.to_string(),
        class: j.class,
        queue: info
            .as_ref()
            .map_or_else(String::new, |(_, a)| a.queue.clone()),
        state: info
            .as_ref()
            .map_or_else(|| "UNKNOWN".into(), |(_, a)| state_name(&a.state)),
        final_status: info
            .as_ref()
            .map_or_else(|| "UNKNOWN".into(), |(_, a)| status_name(&a.final_status)),
        client_succeeded,
        correct,
        queueing: secs(record.as_ref().and_then(|r| r.queueing_ms())),
        completion: secs(
            record
                .as_ref()
                .and_then(|r| Some(r.finished_ms?.saturating_sub(r.submitted_ms))),
        ),
        failed_task_attempts: failed,
        killed_task_attempts: killed,
        yarn_preempted_containers: info.as_ref().map_or(0, |(_, a)| {
            u64::try_from(a.num_non_am_container_preempted.max(0)).unwrap_or(0)
                + u64::try_from(a.num_am_container_preempted.max(0)).unwrap_or(0)
        }),
    };
    (record, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::api::ContainerStatus;
    use crate::cluster::ContainerState;

    #[test]
    fn the_dice_queues_give_the_short_queue_its_label_by_default() {
        let mut conf = crate::config::xml::Configuration::new();
        conf.add_str("dice", &with_short_label(SHIPPED_CAPACITY_SCHEDULER))
            .unwrap();
        let tree = crate::config::queues::QueueTree::from_conf(&conf).unwrap();
        let short = tree.queues.iter().find(|q| q.path == "root.short").unwrap();
        assert_eq!(
            short.default_node_label_expression.as_deref(),
            Some("short")
        );
        assert_eq!(
            short.accessible_node_labels,
            crate::config::queues::NodeLabels::Any
        );
        assert!(short.labels.contains_key("short"), "{:?}", short.labels);
        let long = tree.queues.iter().find(|q| q.path == "root.long").unwrap();
        assert_eq!(long.default_node_label_expression, None);
    }

    fn record(class: JobClass, submitted_ms: u64) -> AppRecord {
        AppRecord {
            submitted_ms,
            ..super::super::report::tests::rec(1, class, None, None)
        }
    }

    #[test]
    fn first_victim_is_the_first_preemption_after_each_short_submission() {
        let records = [
            record(JobClass::Short, 1_000),
            record(JobClass::Short, 5_000),
            record(JobClass::Long, 0),
            record(JobClass::Short, 9_000),
        ];
        // The third query needed no victim.
        assert_eq!(
            first_victim_ms(&records, &[4_000, 1_300, 5_400]),
            [300, 400]
        );
    }

    #[test]
    fn restored_compares_the_files_now_with_the_first_unchanged_reading() {
        let limits = |quota| CgroupLimits {
            cpu_quota_us: quota,
            cpu_period_us: 100_000,
            cpu_shares: 1024,
            memory_bytes: None,
            memory_swap_bytes: None,
            memory_high_bytes: None,
        };
        let status = |changed, current| ContainerStatus {
            container: "container_1_0001_01_000002".parse().unwrap(),
            docker_id: String::new(),
            running: true,
            state: ContainerState::Running,
            changed,
            allocated: None,
            limits: None,
            current,
            original: current,
            attained_service_ms: None,
            memory_usage_bytes: None,
            swap_bytes: None,
            swapping: false,
            frozen: false,
            path: None,
        };
        let before = limits(None);
        assert_eq!(
            restored(&status(false, Some(before)), Some(&before)),
            Ok(true)
        );
        // The agent's own idea of "original" is not trusted: only the first reading.
        assert!(restored(&status(false, Some(limits(Some(1000)))), Some(&before)).is_err());
        assert!(restored(&status(true, Some(before)), Some(&before)).is_err());
        assert!(restored(&status(false, Some(before)), None).is_err());
        assert_eq!(restored(&status(false, None), Some(&before)), Ok(false));
    }
}
