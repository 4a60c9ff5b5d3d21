//! `cargo bench --bench controller_load`: the controller holding a large cluster at a 1 s
//! tick. For 200 and then 2,000 NodeManagers, in the same run:
//!
//! - the emulator in-process with the simulated runtime (8 GB / 8 vcores per node);
//! - one dry-run agent per node, all served from this process behind one listener, each at
//!   its own loopback address (`preemptor::emulator::agents`), recording the actions they get;
//! - the HiBench + TPC-H mix through the RM's REST API: long jobs asking for the whole
//!   cluster, and every 5 s a burst of TPC-H queries (one per 20 nodes) in queue `short`,
//!   so that the `immediate` policy suspends long containers every few ticks;
//! - the real `preemptor controller` binary as a separate process, 1 s monitoring interval.
//!
//! After a warm-up (the cluster filled), it measures for `PREEMPTOR_LOAD_SECS` seconds
//! (default 60) and reports the exact tick duration p50/p99 from every tick's own duration
//! (the controller's `/api/v1/events` stream), the actions the agents recorded, and the
//! controller's VmRSS/VmHWM from /proc; then the 2,000/200 ratios. `PREEMPTOR_LOAD_NODES`
//! (default `200,2000`) changes the sizes, `PREEMPTOR_LOAD_INTERVAL_MS` (default 1000) the
//! monitoring interval, and `PREEMPTOR_LOAD_BASELINE=/path/to/preemptor` runs that other
//! build first on each size (a fresh emulator each) and prints this/baseline ratios.
//! Every process, task and temp dir it starts is stopped or removed however it ends (the
//! controller is killed on drop).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use preemptor::controller::hub::{ControllerEvent, Outcome, TickSummary};
use preemptor::controller::logs::ControllerClient;
use preemptor::emulator::agents::DryRunAgents;
use preemptor::emulator::mix::{self, MixConfig};
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;
use tokio_util::sync::CancellationToken;

type BenchResult<T> = Result<T, String>;

const AGENT_TOKEN: &str = "controller-load-agent-token";
const API_TOKEN: &str = "controller-load-api-token";
const NODE: Resource = Resource::new(8192, 8);
const BURST_INTERVAL: Duration = Duration::from_secs(5);
/// TPC-H queries per burst: one per this many nodes, so that the load per node is the
/// same at every size.
const NODES_PER_QUERY: usize = 20;
/// Long tasks of about 50 to 100 s (the mix's sizes times this), longer than a tick.
const LONG_SCALE: f64 = 8.0;
const WARMUP_MAX: Duration = Duration::from_secs(90);
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The controller process, killed and reaped however the bench ends.
struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Controller {
    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn exited(&mut self) -> Option<String> {
        match self.0.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot wait for it: {e}")),
        }
    }
}

/// (VmRSS, VmHWM) in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Open files of a process: at thousands of agents, both the controller and this process
/// come near the open-file limit.
fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The largest open-file counts sampled, (controller, this process).
#[derive(Clone, Copy, Default)]
struct Fds {
    controller: usize,
    bench: usize,
}

impl Fds {
    fn sample(&mut self, controller: u32) {
        self.controller = self.controller.max(open_fds(controller).unwrap_or(0));
        self.bench = self.bench.max(open_fds(std::process::id()).unwrap_or(0));
    }
}

/// User + system CPU time of a process, in seconds.
fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| (utime + stime) / hz as f64)
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn write_secret(path: &Path, value: &str) -> BenchResult<()> {
    std::fs::write(path, value).map_err(|e| format!("writing {}: {e}", path.display()))?;
    // The controller refuses token files others can read.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| format!("chmod 600 {}: {e}", path.display()))
}

fn free_port() -> BenchResult<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local address: {e}"))
}

/// Which controller binary runs, at what monitoring interval.
#[derive(Clone, Debug)]
struct Run {
    label: &'static str,
    binary: std::path::PathBuf,
    interval_ms: u64,
}

fn write_conf(
    dir: &Path,
    run: &Run,
    rm_url: &str,
    addresses: &str,
    api_port: u16,
) -> BenchResult<()> {
    let scheduler = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hadoop-conf/capacity-scheduler.xml"
    );
    std::fs::copy(scheduler, dir.join("capacity-scheduler.xml"))
        .map_err(|e| format!("copying {scheduler}: {e}"))?;
    write_secret(&dir.join("agent.token"), AGENT_TOKEN)?;
    write_secret(&dir.join("api.token"), API_TOKEN)?;
    let props = [
        ("yarn.preemptor.rm.address", rm_url.to_string()),
        ("yarn.preemptor.policy", "immediate".into()),
        (
            "yarn.preemptor.monitoring-interval-ms",
            run.interval_ms.to_string(),
        ),
        ("yarn.preemptor.agent.addresses", addresses.to_string()),
        (
            "yarn.preemptor.agent.token-file",
            dir.join("agent.token").display().to_string(),
        ),
        (
            "yarn.preemptor.controller.listen",
            format!("127.0.0.1:{api_port}"),
        ),
        (
            "yarn.preemptor.controller.token-file",
            dir.join("api.token").display().to_string(),
        ),
        (
            "yarn.preemptor.controller.state-dir",
            dir.join("state").display().to_string(),
        ),
    ];
    let mut xml = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (k, v) in props {
        xml.push_str(&format!(
            "  <property><name>{k}</name><value>{v}</value></property>\n"
        ));
    }
    xml.push_str("</configuration>\n");
    std::fs::write(dir.join("preemptor-site.xml"), xml)
        .map_err(|e| format!("writing preemptor-site.xml: {e}"))
}

#[derive(Default)]
struct Seen {
    /// Every tick, in order.
    ticks: Vec<TickSummary>,
    applied: u64,
    failed: u64,
    warnings: u64,
    first_warnings: Vec<String>,
}

fn lock(m: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads the controller's event stream into `seen` until `cancel`.
fn collect(
    mut events: futures_util::stream::BoxStream<
        'static,
        Result<ControllerEvent, preemptor::controller::logs::LogsError>,
    >,
    seen: Arc<Mutex<Seen>>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let ev = tokio::select! {
                _ = cancel.cancelled() => return,
                ev = events.next() => ev,
            };
            let mut s = lock(&seen);
            match ev {
                Some(Ok(ControllerEvent::Tick(t))) => s.ticks.push(t),
                Some(Ok(ControllerEvent::Action(a))) => match a.outcome {
                    Outcome::Applied => s.applied += 1,
                    Outcome::Failed { .. } => s.failed += 1,
                    Outcome::Observed => {}
                },
                Some(Ok(ControllerEvent::Warning { message, .. })) => {
                    s.warnings += 1;
                    if s.first_warnings.len() < 5 {
                        s.first_warnings.push(message);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    s.warnings += 1;
                    s.first_warnings.push(format!("event stream: {e}"));
                    return;
                }
                None => return,
            }
        }
    })
}

struct Measured {
    nodes: usize,
    secs: f64,
    ticks_ms: Vec<f64>,
    timer_ticks: usize,
    /// Ticks the controller's /metrics counted in the same window.
    metric_ticks: Option<u64>,
    slowest: Vec<TickSummary>,
    window_start_ms: u64,
    /// The controller's user + system CPU time in the window.
    cpu_secs: f64,
    /// This process's (emulator, agents, mix) in the same window.
    bench_cpu_secs: f64,
    /// The controller's first tick, which meets every agent.
    first_tick_ms: f64,
    agent_actions: u64,
    agent_refused: u64,
    by_kind: BTreeMap<&'static str, u64>,
    controller_applied: u64,
    controller_failed: u64,
    warnings: u64,
    first_warnings: Vec<String>,
    rss_kib: u64,
    rss_max_kib: u64,
    /// Largest open-file counts sampled from the controller's start to the window's end.
    fds: Fds,
    hwm_kib: u64,
    live_containers: usize,
    running_apps: usize,
}

/// `preemptor_ticks_total` from the controller's /metrics: every tick, also ones the
/// event stream could have dropped.
async fn ticks_total(http: &reqwest::Client, api: &str) -> Option<u64> {
    let text = http
        .get(format!("{api}/metrics"))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("preemptor_ticks_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

fn cluster_line(h: &EmulatorHandle) -> (f64, usize, usize) {
    h.inspect(|s| {
        let used = Resource::sum(s.nodes.iter().map(|n| &n.used));
        let live = s.containers.values().filter(|c| c.is_live()).count();
        let running = s
            .apps
            .values()
            .filter(|a| a.state == preemptor::yarn::dto::YarnApplicationState::Running)
            .count();
        (used.dominant_share(&s.cluster_total()), live, running)
    })
}

async fn run_size(nodes: usize, secs: u64, run: &Run) -> BenchResult<Measured> {
    eprintln!(
        "== {nodes} NodeManagers, {} controller ({}), {} ms ticks ==",
        run.label,
        run.binary.display(),
        run.interval_ms
    );
    let started = Instant::now();
    let mut config = EmulatorConfig::local(nodes, NODE, RuntimeChoice::Simulated);
    // One listener for every NodeManager's web service, as for the agents: at 5,000 nodes
    // a listener each leaves this process too few open files for the connections.
    config.nm_one_listener = true;
    let h = Emulator::start(config)
        .await
        .map_err(|e| format!("starting the emulator: {e}"))?;
    let result = with_emulator(&h, nodes, secs, started, run).await;
    if let Err(e) = h.shutdown().await {
        eprintln!("stopping the emulator: {e}");
    }
    result
}

async fn with_emulator(
    h: &EmulatorHandle,
    nodes: usize,
    secs: u64,
    started: Instant,
    run: &Run,
) -> BenchResult<Measured> {
    let runtime = h
        .simulated_runtime()
        .ok_or("the emulator did not start the simulated runtime")?;
    let agents = DryRunAgents::start(
        h.nodes(),
        runtime,
        AGENT_TOKEN.as_bytes(),
        Duration::from_secs(30),
    )
    .await
    .map_err(|e| format!("starting the dry-run agents: {e}"))?;
    eprintln!(
        "  emulator and {} dry-run agents up in {:.1} s",
        agents.agents().len(),
        started.elapsed().as_secs_f64()
    );
    let result = with_agents(h, &agents, nodes, secs, run).await;
    agents.shutdown().await;
    result
}

async fn with_agents(
    h: &EmulatorHandle,
    agents: &DryRunAgents,
    nodes: usize,
    secs: u64,
    run: &Run,
) -> BenchResult<Measured> {
    let dir = tempfile::Builder::new()
        .prefix("controller-load-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let api_port = free_port()?;
    write_conf(dir.path(), run, h.rm_url(), &agents.addresses(), api_port)?;
    let log_path = dir.path().join("controller.log");
    let log = std::fs::File::create(&log_path).map_err(|e| format!("log file: {e}"))?;
    let log2 = log.try_clone().map_err(|e| format!("log file: {e}"))?;
    let mut controller = Controller(
        Command::new(&run.binary)
            .args(["controller", "--conf-dir"])
            .arg(dir.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("spawning preemptor controller: {e}"))?,
    );
    let tail = || {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };

    let api = format!("http://127.0.0.1:{api_port}");
    let client = ControllerClient::new(&api, Some(API_TOKEN.into())).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let events = loop {
        if let Some(status) = controller.exited() {
            return Err(format!("the controller exited ({status}):\n{}", tail()));
        }
        match client.events().await {
            Ok(ev) => break ev,
            Err(e) if t0.elapsed() > Duration::from_secs(30) => {
                return Err(format!("controller API not up after 30 s: {e}\n{}", tail()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cancel = CancellationToken::new();
    let collector = collect(events, seen.clone(), cancel.clone());

    let mix = tokio::spawn(mix::run(
        MixConfig {
            rm_url: h.rm_url().to_string(),
            cluster: NODE.scale(nodes as f64),
            long_queue: "long".into(),
            short_queue: "short".into(),
            seed: 1,
            burst_interval: BURST_INTERVAL,
            burst_size: u32::try_from((nodes / NODES_PER_QUERY).max(1)).unwrap_or(u32::MAX),
            user: "preemptor".into(),
            tick: Duration::from_secs(1),
            // Long jobs ask for everything: short ones get room only by preemption.
            long_fill: 1.0,
            long_job_share: preemptor::emulator::workload::DEFAULT_LONG_JOB_SHARE,
            short_scale: None,
            long_scale: LONG_SCALE,
            long_kernels: preemptor::emulator::workload::LONG_KERNELS.to_vec(),
        },
        cancel.clone(),
    ));

    let result = measure(h, agents, &mut controller, &api, &seen, secs, &tail).await;
    cancel.cancel();
    let _ = collector.await;
    match mix.await {
        Ok(Ok(stats)) => eprintln!(
            "  mix: {} long jobs and {} TPC-H queries submitted, {} errors",
            stats.long_submitted, stats.short_submitted, stats.errors
        ),
        Ok(Err(e)) => eprintln!("  mix stopped: {e}"),
        Err(e) => eprintln!("  mix task: {e}"),
    }
    if let Ok(keep) = std::env::var("PREEMPTOR_LOAD_LOG_DIR") {
        let to = Path::new(&keep).join(format!("controller-{nodes}.log"));
        match std::fs::copy(&log_path, &to) {
            Ok(_) => eprintln!("  controller log kept in {}", to.display()),
            Err(e) => eprintln!("  keeping the controller log in {}: {e}", to.display()),
        }
    }
    drop(controller);
    result
}

async fn measure(
    h: &EmulatorHandle,
    agents: &DryRunAgents,
    controller: &mut Controller,
    api: &str,
    seen: &Mutex<Seen>,
    secs: u64,
    tail: &dyn Fn() -> String,
) -> BenchResult<Measured> {
    let nodes = h.nodes().len();
    // Warm-up: the long jobs fill the cluster.
    let t0 = Instant::now();
    let mut last_print = Instant::now();
    let mut fds = Fds::default();
    loop {
        if let Some(status) = controller.exited() {
            return Err(format!("the controller exited ({status}):\n{}", tail()));
        }
        let (used, live, _) = cluster_line(h);
        // The first tick meets every agent (leases, event streams, connections): not
        // the steady state.
        let ticks = lock(seen).ticks.len();
        if (used >= 0.9 && ticks >= 2) || t0.elapsed() > WARMUP_MAX {
            eprintln!(
                "  warm-up: {:.0}% allocated, {live} containers after {:.0} s",
                used * 100.0,
                t0.elapsed().as_secs_f64()
            );
            break;
        }
        if last_print.elapsed() >= PROGRESS_EVERY {
            last_print = Instant::now();
            // Sampled only here, not every loop: listing thousands of fds costs CPU.
            fds.sample(controller.pid());
            eprintln!(
                "  warm-up: {:.0}% allocated, {live} containers, {} ticks; open files: controller {}, bench {}",
                used * 100.0,
                lock(seen).ticks.len(),
                fds.controller,
                fds.bench
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let (tick0, applied0, failed0, warn0) = {
        let s = lock(seen);
        (s.ticks.len(), s.applied, s.failed, s.warnings)
    };
    let c = agents.counts();
    let kinds = || {
        use std::sync::atomic::Ordering::Relaxed;
        BTreeMap::from([
            ("suspend", c.suspend.load(Relaxed)),
            ("shrink", c.shrink.load(Relaxed)),
            ("resume", c.resume.load(Relaxed)),
            ("kill", c.kill.load(Relaxed)),
        ])
    };
    let kinds0 = kinds();
    let actions0 = c.applied();
    let refused0 = c.refused.load(std::sync::atomic::Ordering::Relaxed);
    let http = preemptor::tls::http_client_builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let metric0 = ticks_total(&http, api).await;
    let cpu0 = cpu_secs(controller.pid()).unwrap_or(f64::NAN);
    let own0 = cpu_secs(std::process::id()).unwrap_or(f64::NAN);
    let window_start_ms = unix_ms();
    let start = Instant::now();
    let window = Duration::from_secs(secs);
    let mut rss_max = 0;
    let mut last_print = Instant::now();
    while start.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(status) = controller.exited() {
            return Err(format!("the controller exited ({status}):\n{}", tail()));
        }
        let (rss, _) = rss_kib(controller.pid()).unwrap_or((0, 0));
        rss_max = rss_max.max(rss);
        if last_print.elapsed() >= PROGRESS_EVERY {
            last_print = Instant::now();
            fds.sample(controller.pid());
            let (used, live, running) = cluster_line(h);
            let s = lock(seen);
            let mut window_ticks: Vec<f64> =
                s.ticks[tick0..].iter().map(|t| t.duration_ms).collect();
            window_ticks.sort_by(f64::total_cmp);
            eprintln!(
                "  {:>3.0}/{secs} s: {} ticks (p50 {:.0} ms, last {:.0} ms), {} agent actions, \
                 {} warnings, controller RSS {} MiB, open files {} (bench {}); {:.0}% allocated, \
                 {live} containers, {running} apps",
                start.elapsed().as_secs_f64(),
                window_ticks.len(),
                percentile(&window_ticks, 0.5),
                s.ticks.last().map_or(f64::NAN, |t| t.duration_ms),
                c.applied() - actions0,
                s.warnings - warn0,
                rss / 1024,
                fds.controller,
                fds.bench,
                used * 100.0,
            );
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    fds.sample(controller.pid());
    let metric1 = ticks_total(&http, api).await;
    let (rss, hwm) = rss_kib(controller.pid())
        .ok_or_else(|| format!("cannot read /proc/{}/status", controller.pid()))?;
    let (_, live, running) = cluster_line(h);
    let s = lock(seen);
    let window: &[TickSummary] = &s.ticks[tick0..];
    let mut ticks_ms: Vec<f64> = window.iter().map(|t| t.duration_ms).collect();
    ticks_ms.sort_by(f64::total_cmp);
    let timer_ticks = window.iter().filter(|t| t.trigger == "timer").count();
    let mut slowest: Vec<TickSummary> = window.to_vec();
    slowest.sort_by(|a, b| b.duration_ms.total_cmp(&a.duration_ms));
    slowest.truncate(3);
    let cpu1 = cpu_secs(controller.pid()).unwrap_or(f64::NAN);
    let own1 = cpu_secs(std::process::id()).unwrap_or(f64::NAN);
    let kinds1 = kinds();
    Ok(Measured {
        nodes,
        secs: elapsed,
        ticks_ms,
        timer_ticks,
        slowest,
        window_start_ms,
        cpu_secs: cpu1 - cpu0,
        bench_cpu_secs: own1 - own0,
        first_tick_ms: s.ticks.first().map_or(f64::NAN, |t| t.duration_ms),
        metric_ticks: metric0.zip(metric1).map(|(a, b)| b.saturating_sub(a)),
        agent_actions: c.applied() - actions0,
        agent_refused: c.refused.load(std::sync::atomic::Ordering::Relaxed) - refused0,
        by_kind: kinds1
            .into_iter()
            .map(|(k, v)| (k, v - kinds0.get(k).copied().unwrap_or(0)))
            .collect(),
        controller_applied: s.applied - applied0,
        controller_failed: s.failed - failed0,
        warnings: s.warnings - warn0,
        first_warnings: s.first_warnings.clone(),
        rss_kib: rss,
        rss_max_kib: rss_max.max(rss),
        fds,
        hwm_kib: hwm,
        live_containers: live,
        running_apps: running,
    })
}

fn report(m: &Measured) {
    let t = &m.ticks_ms;
    let mean = t.iter().sum::<f64>() / t.len().max(1) as f64;
    println!(
        "{} nodes: {} ticks in {:.0} s ({} timer; /metrics counted {}), tick p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, mean {:.1} ms",
        m.nodes,
        t.len(),
        m.secs,
        m.timer_ticks,
        m.metric_ticks.map_or("?".to_string(), |n| n.to_string()),
        percentile(t, 0.5),
        percentile(t, 0.99),
        t.last().copied().unwrap_or(f64::NAN),
        mean
    );
    println!(
        "{} nodes: controller CPU {:.1} s in {:.0} s ({:.0} ms per tick; emulator + agents {:.1} s); first tick {:.0} ms; slowest in the window: {}",
        m.nodes,
        m.cpu_secs,
        m.secs,
        m.cpu_secs * 1000.0 / t.len().max(1) as f64,
        m.bench_cpu_secs,
        m.first_tick_ms,
        m.slowest
            .iter()
            .map(|s| format!(
                "{:.0} ms at +{:.0} s ({}, {} actions)",
                s.duration_ms,
                s.at_ms.saturating_sub(m.window_start_ms) as f64 / 1000.0,
                s.trigger,
                s.actions
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let kinds: Vec<String> = m
        .by_kind
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    println!(
        "{} nodes: agents recorded {} actions ({}), refused {}; controller logged {} applied, {} failed; {} warnings",
        m.nodes,
        m.agent_actions,
        if kinds.is_empty() {
            "none".to_string()
        } else {
            kinds.join(", ")
        },
        m.agent_refused,
        m.controller_applied,
        m.controller_failed,
        m.warnings
    );
    for w in &m.first_warnings {
        println!("  warning: {w}");
    }
    println!(
        "{} nodes: controller VmRSS {:.1} MiB at the end (max sampled {:.1} MiB), VmHWM {:.1} MiB; cluster: {} live containers, {} running apps",
        m.nodes,
        m.rss_kib as f64 / 1024.0,
        m.rss_max_kib as f64 / 1024.0,
        m.hwm_kib as f64 / 1024.0,
        m.live_containers,
        m.running_apps
    );
    println!(
        "{} nodes: open files, most sampled every 5 s: controller {}, bench process (emulator + agents) {}",
        m.nodes, m.fds.controller, m.fds.bench
    );
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> BenchResult<T> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not valid")),
        Err(_) => Ok(default),
    }
}

async fn run() -> BenchResult<()> {
    let secs: u64 = env_or("PREEMPTOR_LOAD_SECS", 60)?;
    let sizes: Vec<usize> = match std::env::var("PREEMPTOR_LOAD_NODES") {
        Ok(v) => v
            .split(',')
            .map(|s| s.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("PREEMPTOR_LOAD_NODES={v:?}: expected e.g. 200,2000"))?,
        Err(_) => vec![200, 2000],
    };
    if sizes.is_empty() || sizes.contains(&0) || secs == 0 {
        return Err("need at least one node count above 0 and PREEMPTOR_LOAD_SECS above 0".into());
    }
    let interval_ms: u64 = env_or("PREEMPTOR_LOAD_INTERVAL_MS", 1000)?;
    let current = Run {
        label: "this",
        binary: env!("CARGO_BIN_EXE_preemptor").into(),
        interval_ms,
    };
    // Another build of `preemptor` (say, the last release) measured on the same sizes in
    // the same run, each on a fresh emulator, for side-by-side ratios.
    let baseline = std::env::var_os("PREEMPTOR_LOAD_BASELINE").map(|b| Run {
        label: "baseline",
        binary: b.into(),
        interval_ms,
    });
    let mut results = Vec::new();
    for &n in &sizes {
        let base = match &baseline {
            Some(b) => {
                let m = run_size(n, secs, b).await?;
                report(&m);
                Some(m)
            }
            None => None,
        };
        let m = run_size(n, secs, &current).await?;
        report(&m);
        if m.ticks_ms.is_empty() {
            return Err(format!("{n} nodes: the controller reported no tick"));
        }
        if let Some(b) = base.filter(|b| !b.ticks_ms.is_empty()) {
            println!(
                "{n} nodes, this/baseline: tick p50 x{:.2}, tick p99 x{:.2}, VmHWM x{:.2}, VmRSS x{:.2}",
                percentile(&m.ticks_ms, 0.5) / percentile(&b.ticks_ms, 0.5),
                percentile(&m.ticks_ms, 0.99) / percentile(&b.ticks_ms, 0.99),
                m.hwm_kib as f64 / b.hwm_kib.max(1) as f64,
                m.rss_kib as f64 / b.rss_kib.max(1) as f64,
            );
        }
        results.push(m);
    }
    if let (Some(a), Some(b)) = (results.first(), results.last())
        && results.len() > 1
    {
        println!(
            "{}/{} nodes: tick p50 x{:.2}, tick p99 x{:.2}, VmHWM x{:.2}, VmRSS x{:.2}",
            b.nodes,
            a.nodes,
            percentile(&b.ticks_ms, 0.5) / percentile(&a.ticks_ms, 0.5),
            percentile(&b.ticks_ms, 0.99) / percentile(&a.ticks_ms, 0.99),
            b.hwm_kib as f64 / a.hwm_kib.max(1) as f64,
            b.rss_kib as f64 / a.rss_kib.max(1) as f64,
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("controller_load: {e}");
            ExitCode::FAILURE
        }
    }
}
