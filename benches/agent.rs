//! `cargo bench --bench agent`: the node agent against the real Docker daemon.
//!
//! 1. Latency from the API call to the throttle being visible in the container's cgroup
//!    (cpu.cfs_quota_us / cpu.max polled from another thread), p50/p99 over 200 suspends
//!    and 200 resumes per path, the Docker path and the direct cgroup-file path
//!    interleaved in the same run, plus the API's own response time.
//! 2. The real agent binary's VmRSS/VmHWM with 50 YARN containers listed, suspended and
//!    resumed.
//! 3. Memory reclamation of a suspend, seconds per GB: a container touching a 256 MB
//!    working set, CPU-throttled, cut to 64 MB with a swap file present. The previous way
//!    (whole-address-space page-out on a normal thread, then stepped limit writes) and the
//!    agent's way (resident-only page-out and one limit write from a SCHED_FIFO thread)
//!    alternate in the same run, on an idle host and with busy-loop threads competing.
//! 4. `costs`, only when asked: the simulator's preemption cost rates (`--costs FILE`,
//!    schema `preemptor-sim-costs/1`, docs/simulator.md) measured through the real
//!    `preemptor agent` binary and its HTTP API. Over 5 rounds on a container touching a
//!    256 MB working set (512 MB allocated, swap file present): suspend to the minimum
//!    footprint, seconds per GB reclaimed (the API round trip, the agent's own `reclaim_ms`
//!    kept beside it); resume, seconds per GB until the cgroup's usage is back at the
//!    working set; and kill of a fresh container, seconds until Docker reports it stopped
//!    or its cgroup is gone. The medians are the rates; every round is kept in `samples`.
//!
//! `cargo bench --bench agent -- reclaim` runs only 3; `cargo bench --bench agent -- costs
//! [--out FILE]` runs only 4 and prints the JSON (and writes it to FILE when given).
//!
//! It shares the integration tests' support code, whose guards remove every image,
//! container, agent process, swap file and temp dir it creates, also when it fails.

#[path = "../integration-tests/common/mod.rs"]
mod common;

#[path = "../integration-tests/agent_support.rs"]
#[allow(dead_code)]
mod agent_support;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use preemptor::agent::AgentClient;
use preemptor::agent::api::ActionResult;
use preemptor::agent::cgroup::CgroupDirs;
use preemptor::agent::limits::{
    CgroupLimits, CgroupVersion, DockerLimits, OriginalLimits, RealTarget,
};
use preemptor::agent::metrics::Metrics;
use preemptor::agent::reclaim;
use preemptor::agent::writer::{LimitWriter, WritePath, WriteTarget};
use preemptor::cluster::ContainerState;
use preemptor::resources::{Limits, Resource};
use serde::Serialize;

use agent_support::{
    ChildAgent, CpuLimit, SwapFile, TOKEN, TestContainer, cgroup_dirs, run_container,
    run_working_set, start_agent, unique_cluster_ts, working_set_container,
};
use common::{TestImage, docker_or_skip};

const OPS: usize = 200;
const RSS_CONTAINERS: usize = 50;

type BenchResult<T> = Result<T, String>;

/// A YARN-named container burning one CPU (1 vcore = 1 CPU, 256 MB) until removed.
async fn burner(docker: &Docker, image: &TestImage, name: &str) -> TestContainer {
    run_container(
        docker,
        &image.tag,
        name,
        CpuLimit::Nano(1_000_000_000),
        256,
        &["--iterations", "0"],
    )
    .await
}

/// Polls the quota until it reads `quota`; returns when it did.
fn watch_quota(dirs: CgroupDirs, quota: u64, stop: Arc<AtomicBool>) -> Option<Instant> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        if let Ok((Some(q), _)) = dirs.read_cpu_max()
            && q == quota
        {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    None
}

/// (API call → quota visible, API response) for one action.
async fn timed(
    client: &AgentClient,
    dirs: &CgroupDirs,
    name: &str,
    suspend: bool,
    original_quota: u64,
) -> BenchResult<(Duration, Duration)> {
    let stop = Arc::new(AtomicBool::new(false));
    let want = if suspend { 1000 } else { original_quota };
    let (d, s) = (dirs.clone(), stop.clone());
    let watcher = tokio::task::spawn_blocking(move || watch_quota(d, want, s));
    let t0 = Instant::now();
    let r = if suspend {
        // Memory stays at the allocation: this measures the CPU throttle.
        client
            .suspend(name, Resource::new(256, 1), Limits::new(256, 10))
            .await
    } else {
        client.resume(name).await
    };
    let responded = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    r.map_err(|e| e.to_string())?;
    let visible = watcher
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{name}: the quota never read {want}"))?;
    Ok((
        visible.saturating_duration_since(t0).min(responded),
        responded,
    ))
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

struct Series {
    label: String,
    samples: Vec<Duration>,
}

impl Series {
    fn new(label: &str) -> Series {
        Series {
            label: label.into(),
            samples: Vec::with_capacity(OPS),
        }
    }
    fn p(&self, p: f64) -> f64 {
        let mut s = self.samples.clone();
        s.sort();
        pct(&s, p)
    }
}

async fn latency(docker: &Docker, image: &TestImage) -> BenchResult<()> {
    let ts = unique_cluster_ts();
    let mut setups = Vec::new();
    for (i, path) in [WritePath::Docker, WritePath::Direct]
        .into_iter()
        .enumerate()
    {
        let name = format!("container_e01_{ts}_0001_01_{:06}", i + 2);
        let container = burner(docker, image, &name).await;
        let dirs = cgroup_dirs(docker, &name).await;
        let original = dirs
            .read_cpu_max()
            .map_err(|e| e.to_string())?
            .0
            .ok_or("no quota")?;
        let agent = start_agent(path, Duration::from_secs(600)).await;
        agent
            .client
            .renew_lease("bench", None)
            .await
            .map_err(|e| e.to_string())?;
        setups.push((path, name, dirs, original, agent, container));
    }
    let mut series: Vec<[Series; 4]> = setups
        .iter()
        .map(|(p, ..)| {
            [
                Series::new(&format!("{} suspend: call -> quota visible", p.name())),
                Series::new(&format!("{} suspend: API response", p.name())),
                Series::new(&format!("{} resume:  call -> quota visible", p.name())),
                Series::new(&format!("{} resume:  API response", p.name())),
            ]
        })
        .collect();
    let started = Instant::now();
    for op in 0..OPS {
        // Interleaved, so both paths see the same machine.
        for (k, (_, name, dirs, original, agent, _)) in setups.iter().enumerate() {
            let client = &agent.client;
            let (v, r) = timed(client, dirs, name, true, *original).await?;
            series[k][0].samples.push(v);
            series[k][1].samples.push(r);
            let (v, r) = timed(client, dirs, name, false, *original).await?;
            series[k][2].samples.push(v);
            series[k][3].samples.push(r);
        }
        if (op + 1) % 50 == 0 {
            eprintln!(
                "  {}/{OPS} operations per path ({:.0} s)",
                op + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!("\nLatency over {OPS} operations per path (ms):");
    println!("  {:<42} {:>8} {:>8}", "", "p50", "p99");
    for s in series.iter().flatten() {
        println!("  {:<42} {:>8.2} {:>8.2}", s.label, s.p(0.5), s.p(0.99));
    }
    let (d, f) = (&series[0], &series[1]);
    println!(
        "  docker/direct ratio, suspend visible: p50 {:.1}x, p99 {:.1}x; resume visible: p50 {:.1}x, p99 {:.1}x",
        d[0].p(0.5) / f[0].p(0.5),
        d[0].p(0.99) / f[0].p(0.99),
        d[2].p(0.5) / f[2].p(0.5),
        d[2].p(0.99) / f[2].p(0.99),
    );
    println!(
        "  target: p99 < 100 ms on the Docker path -> {}",
        if d[0].p(0.99) < 100.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}

fn vm_kb(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

async fn rss(docker: &Docker, image: &TestImage) -> BenchResult<()> {
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let agent = real_agent(work.path())?;
    let pid = agent.pid();
    let client = agent.client();
    let idle = vm_kb(pid, "VmRSS:").unwrap_or(0);

    eprintln!("  starting {RSS_CONTAINERS} paused YARN containers...");
    let ts = unique_cluster_ts();
    let mut names = Vec::new();
    let mut containers = Vec::new();
    for i in 0..RSS_CONTAINERS {
        let name = format!("container_e01_{ts}_0002_01_{:06}", i + 2);
        containers.push(burner(docker, image, &name).await);
        // Paused, so that 50 burners do not swamp the machine; the cgroups stay in place.
        docker
            .pause_container(&name)
            .await
            .map_err(|e| e.to_string())?;
        names.push(name);
    }
    let listed = client.containers().await.map_err(|e| e.to_string())?;
    let yarn = listed
        .iter()
        .filter(|c| names.contains(&c.container.to_string()))
        .count();
    let _events = client.events().await.map_err(|e| e.to_string())?;
    client
        .renew_lease("bench", None)
        .await
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    for n in &names {
        client
            .suspend(n, Resource::new(256, 1), Limits::MIN_FOOTPRINT)
            .await
            .map_err(|e| format!("suspend {n}: {e}"))?;
    }
    let suspend_all = t0.elapsed();
    let _ = client.containers().await.map_err(|e| e.to_string())?;
    let suspended = vm_kb(pid, "VmRSS:").unwrap_or(0);
    for n in &names {
        client
            .resume(n)
            .await
            .map_err(|e| format!("resume {n}: {e}"))?;
    }
    let resumed = vm_kb(pid, "VmRSS:").unwrap_or(0);
    let peak = vm_kb(pid, "VmHWM:").unwrap_or(0);
    println!("\nAgent memory (real `preemptor agent` process, /proc/{pid}/status):");
    println!(
        "  idle                                 VmRSS {:>6.1} MB",
        idle as f64 / 1024.0
    );
    println!(
        "  {yarn} containers listed and suspended   VmRSS {:>6.1} MB (suspending all took {:.1} s)",
        suspended as f64 / 1024.0,
        suspend_all.as_secs_f64()
    );
    println!(
        "  after resuming all                   VmRSS {:>6.1} MB",
        resumed as f64 / 1024.0
    );
    println!(
        "  peak                                 VmHWM {:>6.1} MB (target < 30 MB -> {})",
        peak as f64 / 1024.0,
        if peak < 30 * 1024 { "met" } else { "NOT met" }
    );
    drop(agent);
    drop(containers);
    Ok(())
}

const RECLAIM_ROUNDS: usize = 5;
const SUSPENDED_MEMORY: u64 = 64 << 20;

/// The previous suspend: page out the whole private address space from a blocking-pool
/// thread, then write the limit, stepping halfway down on each EBUSY.
async fn reclaim_old(w: &LimitWriter, dirs: &CgroupDirs, want: CgroupLimits) -> BenchResult<()> {
    let dir = dirs.memory.clone();
    tokio::task::spawn_blocking(move || reclaim::page_out(&dir, None))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    step_down(w, dirs, want).await
}

/// The agent's suspend today: one real-time page-out and write; the steps only on EBUSY.
async fn reclaim_new(
    w: &LimitWriter,
    dirs: &CgroupDirs,
    want: CgroupLimits,
    metrics: Arc<Metrics>,
) -> BenchResult<bool> {
    let usage = dirs.sample().ok().map(|s| s.memory_usage_bytes);
    let budget = reclaim::suspend_page_out_budget(usage, want.memory_bytes);
    let r = reclaim::reclaim_for_suspend(dirs.clone(), want, budget, metrics)
        .await
        .map_err(|e| e.to_string())?;
    if r.write.is_err() {
        step_down(w, dirs, want).await?;
    }
    if let Some(Ok(p)) = &r.page_out {
        eprintln!(
            "         page-out {:.1} ms, then the write {:.1} ms",
            p.elapsed.as_secs_f64() * 1000.0,
            r.elapsed.saturating_sub(p.elapsed).as_secs_f64() * 1000.0
        );
    }
    Ok(r.realtime)
}

async fn step_down(w: &LimitWriter, dirs: &CgroupDirs, want: CgroupLimits) -> BenchResult<()> {
    let target = want.memory_bytes.ok_or("no memory target")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempt = target;
    let mut reached = dirs
        .read_memory_limits()
        .map_err(|e| e.to_string())?
        .memory
        .unwrap_or(u64::MAX);
    loop {
        let mut level = want;
        level.memory_bytes = Some(attempt);
        level.memory_high_bytes = want.memory_high_bytes.map(|_| attempt);
        match w.set_memory_direct(dirs, &level) {
            Ok(_) if attempt == target => return Ok(()),
            Ok(_) => {
                reached = attempt;
                attempt = target;
            }
            Err(e) if e.is_busy() && Instant::now() < deadline => {
                let mid = (attempt / 2 + reached / 2) >> 20 << 20;
                if mid > attempt && mid < reached {
                    attempt = mid;
                } else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

async fn restore(w: &LimitWriter, dirs: &CgroupDirs, original: &RealTarget) -> BenchResult<()> {
    w.set_memory_direct(dirs, &original.cgroup)
        .map_err(|e| e.to_string())?;
    let t = WriteTarget {
        docker_id: "",
        dirs,
        path: WritePath::Direct,
        docker_now: &DockerLimits::default(),
    };
    w.set_cpu(&t, original).await.map_err(|e| e.to_string())?;
    Ok(())
}

fn usage(dirs: &CgroupDirs) -> BenchResult<u64> {
    dirs.sample()
        .map(|s| s.memory_usage_bytes)
        .map_err(|e| e.to_string())
}

/// Seconds per GB of each way over `RECLAIM_ROUNDS` alternating rounds each.
async fn reclaim_rounds(
    dirs: &CgroupDirs,
    original: &RealTarget,
    metrics: &Arc<Metrics>,
) -> BenchResult<[Vec<f64>; 2]> {
    let w = LimitWriter::new(None, metrics.clone());
    let mut throttled = *original;
    throttled.cgroup.cpu_quota_us = Some(1000);
    let mut want = original.cgroup;
    want.memory_bytes = Some(SUSPENDED_MEMORY);
    want.memory_high_bytes = want.memory_high_bytes.map(|_| SUSPENDED_MEMORY);
    let mut out = [Vec::new(), Vec::new()];
    let t = WriteTarget {
        docker_id: "",
        dirs,
        path: WritePath::Direct,
        docker_now: &DockerLimits::default(),
    };
    for round in 0..RECLAIM_ROUNDS * 2 {
        let new = round % 2 == 1;
        restore(&w, dirs, original).await?;
        // The burner faults its working set back in.
        let deadline = Instant::now() + Duration::from_secs(120);
        while usage(dirs)? < 250 << 20 {
            if Instant::now() > deadline {
                return Err("the working set did not come back within 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        w.set_cpu(&t, &throttled).await.map_err(|e| e.to_string())?;
        // A few periods, so the throttle is in force as after a real suspend's wait.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = usage(dirs)?;
        let t0 = Instant::now();
        let realtime = if new {
            reclaim_new(&w, dirs, want, metrics.clone()).await?
        } else {
            reclaim_old(&w, dirs, want).await?;
            false
        };
        let took = t0.elapsed().as_secs_f64();
        let after = usage(dirs)?;
        let gb = before.saturating_sub(after) as f64 / (1u64 << 30) as f64;
        if gb <= 0.0 {
            return Err(format!("nothing reclaimed ({before} -> {after} bytes)"));
        }
        eprintln!(
            "    {:<4} {:>4.0} MB in {:>6.1} ms = {:.2} s/GB{}",
            if new { "new" } else { "old" },
            gb * 1024.0,
            took * 1000.0,
            took / gb,
            if realtime { " (SCHED_FIFO)" } else { "" }
        );
        out[usize::from(new)].push(took / gb);
    }
    restore(&w, dirs, original).await?;
    Ok(out)
}

async fn reclaim_speed(docker: &Docker) -> BenchResult<()> {
    let swap = SwapFile::create(1024)?;
    let ws = working_set_container(docker, "preemptor-agent-bench-mem", 0).await;
    let dirs = ws.dirs.clone();
    let original = RealTarget::original(&OriginalLimits {
        version: dirs.version,
        docker: DockerLimits::default(),
        cgroup: dirs.read_limits().map_err(|e| e.to_string())?,
    });
    let metrics = Arc::new(Metrics::new());
    println!(
        "\nMemory reclaim of a suspend (256 MB working set -> 64 MB, swap file), s per GB, {RECLAIM_ROUNDS} rounds each:"
    );
    println!(
        "  {:<34} {:>8} {:>8} {:>8} {:>8}",
        "", "old min", "old med", "new min", "new med"
    );
    for spinners in [0usize, 4] {
        eprintln!("  with {spinners} busy-loop threads:");
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..spinners)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let r = reclaim_rounds(&dirs, &original, &metrics).await;
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        let [mut old, mut new] = r?;
        old.sort_by(f64::total_cmp);
        new.sort_by(f64::total_cmp);
        let med = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        let min = |v: &[f64]| v.first().copied().unwrap_or(f64::NAN);
        println!(
            "  {:<34} {:>8.2} {:>8.2} {:>8.2} {:>8.2}   old/new median {:.1}x; target < 1 s/GB -> {}",
            format!("{spinners} busy-loop threads competing"),
            min(&old),
            med(&old),
            min(&new),
            med(&new),
            med(&old) / med(&new),
            if med(&new) < 1.0 { "met" } else { "NOT met" }
        );
    }
    drop(ws);
    drop(swap);
    Ok(())
}

const COST_ROUNDS: usize = 5;
const COST_SWAP_MB: u64 = 1024;
/// The working set counts as back once the usage reaches this, as `working_set_container`
/// waits for.
const WORKING_SET_BACK: u64 = 250 << 20;
/// The cgroup (and Docker) polling interval of the costs mode.
const POLL: Duration = Duration::from_millis(20);
const BYTES_PER_GB: f64 = (1u64 << 30) as f64;
const BYTES_PER_MB: f64 = (1u64 << 20) as f64;

/// The real `preemptor agent` binary, with its token, state dir and log in `work`.
fn real_agent(work: &Path) -> BenchResult<ChildAgent> {
    let token_file = work.join("token");
    std::fs::write(&token_file, TOKEN).map_err(|e| e.to_string())?;
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .map_err(|e| e.to_string())?;
    Ok(ChildAgent::spawn(
        &work.join("state"),
        &token_file,
        "10m",
        work,
    ))
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (x * f).round() / f
}

fn ms(d: Duration) -> f64 {
    round_to(d.as_secs_f64() * 1000.0, 1)
}

fn mb(bytes: u64) -> f64 {
    round_to(bytes as f64 / BYTES_PER_MB, 1)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Polls the cgroup's memory usage every [`POLL`] until it reaches `bytes`; returns when
/// it did and the usage read, or `None` once `timeout` has passed.
async fn usage_reaches(
    dirs: &CgroupDirs,
    bytes: u64,
    timeout: Duration,
) -> BenchResult<Option<(Instant, u64)>> {
    let deadline = Instant::now() + timeout;
    loop {
        let u = usage(dirs)?;
        if u >= bytes {
            return Ok(Some((Instant::now(), u)));
        }
        if Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The file `costs` writes: the fields `CostModel::parse` reads, in this order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CostsFile {
    schema: &'static str,
    source: String,
    measured_at: String,
    reclaim_secs_per_gb: f64,
    reload_secs_per_gb: f64,
    kill_secs: f64,
    samples: Vec<Sample>,
}

/// One round as kept in `samples`: MB are MiB of the cgroup's memory usage.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Sample {
    round: usize,
    reclaim: ReclaimSample,
    reload: ReloadSample,
    kill: KillSample,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReclaimSample {
    usage_before_mb: f64,
    usage_after_mb: f64,
    reclaimed_mb: f64,
    /// The suspend's API round trip; `secs_per_gb` is this per GB reclaimed.
    api_ms: f64,
    secs_per_gb: f64,
    agent: AgentReclaimSample,
}

/// The suspend's own account (`ActionResult`): its before/after readings and timings.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentReclaimSample {
    memory_before_mb: Option<f64>,
    memory_after_mb: Option<f64>,
    reclaim_ms: f64,
    /// `reclaim_ms` per GB by the agent's own readings.
    secs_per_gb: Option<f64>,
    pageout_ms: f64,
    memory_ms: f64,
    throttle_wait_ms: f64,
    cpu_ms: f64,
    store_ms: f64,
    total_ms: f64,
    busy_retries: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReloadSample {
    usage_suspended_mb: f64,
    usage_back_mb: f64,
    reloaded_mb: f64,
    resume_api_ms: f64,
    /// From the resume call until the usage was back at the working set.
    secs: f64,
    secs_per_gb: f64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KillSample {
    usage_before_mb: f64,
    api_ms: f64,
    docker_stopped_secs: Option<f64>,
    cgroup_gone_secs: Option<f64>,
    /// The first of the two.
    secs: Option<f64>,
}

/// One suspend (the reclaim) and resume (the reload) of the working-set container.
struct SuspendResume {
    before: u64,
    after: u64,
    suspend_api: Duration,
    suspend: ActionResult,
    suspended: u64,
    back: u64,
    resume_api: Duration,
    reload: Duration,
}

impl SuspendResume {
    fn reclaimed_gb(&self) -> f64 {
        self.before.saturating_sub(self.after) as f64 / BYTES_PER_GB
    }

    /// The rate: the suspend's API round trip per GB reclaimed.
    fn reclaim_secs_per_gb(&self) -> f64 {
        self.suspend_api.as_secs_f64() / self.reclaimed_gb()
    }

    /// The agent's own figure: `reclaim_ms` per GB by its own before/after readings.
    fn agent_reclaim_secs_per_gb(&self) -> Option<f64> {
        let (b, a) = (
            self.suspend.memory_before_bytes?,
            self.suspend.memory_after_bytes?,
        );
        let gb = b.saturating_sub(a) as f64 / BYTES_PER_GB;
        (gb > 0.0).then(|| self.suspend.timings.reclaim_ms / 1000.0 / gb)
    }

    fn reloaded_gb(&self) -> f64 {
        self.back.saturating_sub(self.suspended) as f64 / BYTES_PER_GB
    }

    fn reload_secs_per_gb(&self) -> f64 {
        self.reload.as_secs_f64() / self.reloaded_gb()
    }

    fn sample(&self, round: usize, kill: &Killed) -> Sample {
        let r = &self.suspend;
        let t = &r.timings;
        Sample {
            round,
            reclaim: ReclaimSample {
                usage_before_mb: mb(self.before),
                usage_after_mb: mb(self.after),
                reclaimed_mb: mb(self.before.saturating_sub(self.after)),
                api_ms: ms(self.suspend_api),
                secs_per_gb: round_to(self.reclaim_secs_per_gb(), 3),
                agent: AgentReclaimSample {
                    memory_before_mb: r.memory_before_bytes.map(mb),
                    memory_after_mb: r.memory_after_bytes.map(mb),
                    reclaim_ms: round_to(t.reclaim_ms, 1),
                    secs_per_gb: self.agent_reclaim_secs_per_gb().map(|x| round_to(x, 3)),
                    pageout_ms: round_to(t.pageout_ms, 1),
                    memory_ms: round_to(t.memory_ms, 1),
                    throttle_wait_ms: round_to(t.throttle_wait_ms, 1),
                    cpu_ms: round_to(t.cpu_ms, 1),
                    store_ms: round_to(t.store_ms, 1),
                    total_ms: round_to(t.total_ms, 1),
                    busy_retries: r.memory_busy_retries,
                },
            },
            reload: ReloadSample {
                usage_suspended_mb: mb(self.suspended),
                usage_back_mb: mb(self.back),
                reloaded_mb: mb(self.back.saturating_sub(self.suspended)),
                resume_api_ms: ms(self.resume_api),
                secs: round_to(self.reload.as_secs_f64(), 3),
                secs_per_gb: round_to(self.reload_secs_per_gb(), 3),
            },
            kill: kill.sample(),
        }
    }
}

async fn suspend_resume(
    client: &AgentClient,
    dirs: &CgroupDirs,
    name: &str,
) -> BenchResult<SuspendResume> {
    if usage_reaches(dirs, WORKING_SET_BACK, Duration::from_secs(120))
        .await?
        .is_none()
    {
        return Err("the working set was not resident within 120 s".into());
    }
    client
        .renew_lease("bench", None)
        .await
        .map_err(|e| e.to_string())?;
    let before = usage(dirs)?;
    let t0 = Instant::now();
    let suspend = client
        .suspend(name, Resource::new(512, 1), Limits::MIN_FOOTPRINT)
        .await
        .map_err(|e| format!("suspend: {e}"))?;
    let suspend_api = t0.elapsed();
    let after = usage(dirs)?;
    if suspend.state != ContainerState::Suspended || !suspend.changed {
        return Err(format!(
            "suspend answered {:?}, changed {}",
            suspend.state, suspend.changed
        ));
    }
    if after >= before {
        return Err(format!("nothing reclaimed ({before} -> {after} bytes)"));
    }
    // Suspended for a while, as a preempted container is.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let suspended = usage(dirs)?;
    let t0 = Instant::now();
    // Polled from the call on: memory comes back as soon as the limit is lifted.
    let (resumed, back) = tokio::join!(
        async {
            let r = client.resume(name).await;
            (r, t0.elapsed())
        },
        usage_reaches(dirs, WORKING_SET_BACK, Duration::from_secs(120))
    );
    let (resumed, resume_api) = resumed;
    resumed.map_err(|e| format!("resume: {e}"))?;
    let (at, back) = back?.ok_or("the working set did not come back within 120 s of the resume")?;
    if back <= suspended {
        return Err(format!("nothing reloaded ({suspended} -> {back} bytes)"));
    }
    Ok(SuspendResume {
        before,
        after,
        suspend_api,
        suspend,
        suspended,
        back,
        resume_api,
        reload: at.saturating_duration_since(t0),
    })
}

/// A kill through the agent and what was observed after it.
struct Killed {
    usage_before: u64,
    api: Duration,
    docker_stopped: Option<Duration>,
    cgroup_gone: Option<Duration>,
}

impl Killed {
    /// Until the first sign of the resources being free: Docker reports the container
    /// stopped, or its memory cgroup directory is gone.
    fn secs(&self) -> Option<f64> {
        match (self.docker_stopped, self.cgroup_gone) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|d| d.as_secs_f64())
    }

    fn sample(&self) -> KillSample {
        let secs = |d: Option<Duration>| d.map(|d| round_to(d.as_secs_f64(), 3));
        KillSample {
            usage_before_mb: mb(self.usage_before),
            api_ms: ms(self.api),
            docker_stopped_secs: secs(self.docker_stopped),
            cgroup_gone_secs: secs(self.cgroup_gone),
            secs: self.secs().map(|s| round_to(s, 3)),
        }
    }
}

/// From `t0`, every [`POLL`] for at most 30 s: when Docker first reported `name` not
/// running (or no longer knew it), and, polled on its own (an inspect can wait for the
/// kill), when `memory_dir` was first gone.
async fn watch_exit(
    docker: &Docker,
    name: &str,
    memory_dir: &Path,
    t0: Instant,
) -> (Option<Duration>, Option<Duration>) {
    const LIMIT: Duration = Duration::from_secs(30);
    let stopped = async {
        while t0.elapsed() < LIMIT {
            match docker.inspect_container(name, None).await {
                Ok(i) if i.state.as_ref().and_then(|s| s.running) == Some(false) => {
                    return Some(t0.elapsed());
                }
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => return Some(t0.elapsed()),
                // Running, or a transient error: ask again.
                _ => {}
            }
            tokio::time::sleep(POLL).await;
        }
        None
    };
    let gone = async {
        while t0.elapsed() < LIMIT {
            if !memory_dir.exists() {
                return Some(t0.elapsed());
            }
            tokio::time::sleep(POLL).await;
        }
        None
    };
    tokio::join!(stopped, gone)
}

/// Kills a fresh YARN-named container holding the same 256 MB working set.
async fn kill_round(
    docker: &Docker,
    client: &AgentClient,
    image: &TestImage,
) -> BenchResult<Killed> {
    let name = format!("container_e01_{}_0003_01_000002", unique_cluster_ts());
    let container = run_working_set(docker, image, &name, 0).await;
    let dirs = cgroup_dirs(docker, &name).await;
    if usage_reaches(&dirs, WORKING_SET_BACK, Duration::from_secs(60))
        .await?
        .is_none()
    {
        return Err(format!(
            "{name}: the working set was not resident within 60 s"
        ));
    }
    client
        .renew_lease("bench", None)
        .await
        .map_err(|e| e.to_string())?;
    let usage_before = usage(&dirs)?;
    let t0 = Instant::now();
    let (killed, (docker_stopped, cgroup_gone)) = tokio::join!(
        async {
            let r = client.kill(&name).await;
            (r, t0.elapsed())
        },
        watch_exit(docker, &name, &dirs.memory, t0)
    );
    let (killed, api) = killed;
    let r = killed.map_err(|e| format!("kill {name}: {e}"))?;
    if r.state != ContainerState::Killed {
        return Err(format!("kill {name} answered {:?}", r.state));
    }
    let k = Killed {
        usage_before,
        api,
        docker_stopped,
        cgroup_gone,
    };
    if k.secs().is_none() {
        return Err(format!("{name} was still running 30 s after the kill"));
    }
    drop(container);
    Ok(k)
}

/// `costs`: the simulator's cost rates through the real agent; see the module doc.
async fn costs(docker: &Docker, out: Option<&Path>) -> BenchResult<()> {
    let measured_at = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| e.to_string())?;
    let docker_version = docker
        .version()
        .await
        .map_err(|e| format!("docker version: {e}"))?
        .version
        .unwrap_or_else(|| "(version not reported)".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_err(|e| format!("/proc/sys/kernel/osrelease: {e}"))?
        .trim()
        .to_string();
    // Other work on the host slows the reclaim: the load it started under goes with it.
    let load = std::fs::read_to_string("/proc/loadavg")
        .map_err(|e| format!("/proc/loadavg: {e}"))?
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string();
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let agent = real_agent(work.path())?;
    let client = agent.client();
    eprintln!(
        "agent benchmark, costs: real agent at {}, {COST_ROUNDS} rounds of suspend/resume, then {COST_ROUNDS} kills",
        agent.url
    );

    let swap = SwapFile::create(COST_SWAP_MB)?;
    let ws = working_set_container(docker, "preemptor-agent-bench-costs", 0).await;
    let cgroup = match ws.dirs.version {
        CgroupVersion::V1 => "cgroup v1",
        CgroupVersion::V2 => "cgroup v2",
    };
    let mut rounds = Vec::with_capacity(COST_ROUNDS);
    for round in 1..=COST_ROUNDS {
        let r = suspend_resume(&client, &ws.dirs, &ws.name)
            .await
            .map_err(|e| format!("round {round}: {e}"))?;
        eprintln!(
            "  round {round}: reclaim {:.0} MB in {:.0} ms (API) = {:.2} s/GB, agent reclaim_ms {:.0} = {}; reload {:.0} MB in {:.2} s = {:.2} s/GB (resume API {:.0} ms)",
            r.reclaimed_gb() * 1024.0,
            r.suspend_api.as_secs_f64() * 1000.0,
            r.reclaim_secs_per_gb(),
            r.suspend.timings.reclaim_ms,
            r.agent_reclaim_secs_per_gb()
                .map_or("n/a".to_string(), |x| format!("{x:.2} s/GB")),
            r.reloaded_gb() * 1024.0,
            r.reload.as_secs_f64(),
            r.reload_secs_per_gb(),
            r.resume_api.as_secs_f64() * 1000.0,
        );
        rounds.push(r);
    }
    let path = rounds
        .first()
        .and_then(|r| r.suspend.path)
        .map_or("no", |p| p.name());
    drop(ws);
    drop(swap);

    let image = TestImage::build(docker, "preemptor-agent-bench-kill").await;
    let mut kills = Vec::with_capacity(COST_ROUNDS);
    for round in 1..=COST_ROUNDS {
        let k = kill_round(docker, &client, &image)
            .await
            .map_err(|e| format!("kill round {round}: {e}"))?;
        let secs = |d: Option<Duration>| {
            d.map_or("-".to_string(), |d| format!("{:.3} s", d.as_secs_f64()))
        };
        eprintln!(
            "  kill {round}: API {:.0} ms, Docker stopped {}, cgroup gone {}",
            k.api.as_secs_f64() * 1000.0,
            secs(k.docker_stopped),
            secs(k.cgroup_gone)
        );
        kills.push(k);
    }
    drop(image);
    drop(agent);

    let reclaim = median(
        &rounds
            .iter()
            .map(SuspendResume::reclaim_secs_per_gb)
            .collect::<Vec<_>>(),
    );
    let reload = median(
        &rounds
            .iter()
            .map(SuspendResume::reload_secs_per_gb)
            .collect::<Vec<_>>(),
    );
    let kill = median(&kills.iter().filter_map(Killed::secs).collect::<Vec<_>>());
    let samples = rounds
        .iter()
        .zip(&kills)
        .enumerate()
        .map(|(i, (r, k))| r.sample(i + 1, k))
        .collect();
    // Printed in every report that uses the file: one sentence, what and how.
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let source = format!(
        "cargo bench --bench agent -- costs: real agent ({path} write path), Docker \
         {docker_version}, {cgroup}, kernel {kernel}, {cpus} CPUs at load {load} when it \
         began, 256 MB working set suspended to 64 MB, {COST_SWAP_MB} MB swap file; reclaim = the suspend's API round trip per GB (the \
         agent's reclaim_ms is in samples), reload = resume call until the working set is \
         back, kill = call until the cgroup is gone or Docker reports it stopped; medians of \
         {COST_ROUNDS} rounds"
    );
    let doc = CostsFile {
        schema: preemptor::sim::costs::COSTS_SCHEMA,
        source,
        measured_at,
        reclaim_secs_per_gb: round_to(reclaim, 3),
        reload_secs_per_gb: round_to(reload, 3),
        kill_secs: round_to(kill, 3),
        samples,
    };
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    // What the simulator will read must load.
    let check = out.unwrap_or(Path::new("costs.json"));
    preemptor::sim::costs::CostModel::parse(check, &text)
        .map_err(|e| format!("the simulator would not load the result: {e}"))?;
    println!("{text}");
    if let Some(out) = out {
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(out, format!("{text}\n")).map_err(|e| format!("{}: {e}", out.display()))?;
        eprintln!("wrote {}", out.display());
    }
    eprintln!("  medians: reclaim {reclaim:.2} s/GB, reload {reload:.2} s/GB, kill {kill:.3} s");
    Ok(())
}

enum Mode {
    All,
    Reclaim,
    Costs { out: Option<PathBuf> },
}

/// The arguments after the program name. Anything else (cargo's own `--bench`) is
/// ignored.
fn parse_args(args: &[String]) -> BenchResult<Mode> {
    let (mut reclaim, mut costs, mut out) = (false, false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "reclaim" => reclaim = true,
            "costs" => costs = true,
            "--out" => {
                let f = it
                    .next()
                    .filter(|f| !f.is_empty() && !f.starts_with("--"))
                    .ok_or("--out needs a file name")?;
                out = Some(PathBuf::from(f));
            }
            _ => {
                if let Some(f) = a.strip_prefix("--out=") {
                    if f.is_empty() {
                        return Err("--out needs a file name".into());
                    }
                    out = Some(PathBuf::from(f));
                }
            }
        }
    }
    match (reclaim, costs, out) {
        (true, true, _) => Err("reclaim and costs are separate runs: give one".into()),
        (_, true, out) => Ok(Mode::Costs { out }),
        (_, false, Some(_)) => Err("--out is for `costs`".into()),
        (true, false, None) => Ok(Mode::Reclaim),
        (false, false, None) => Ok(Mode::All),
    }
}

fn main() -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mode = parse_args(&args)?;
        let docker = docker_or_skip("agent benchmark")
            .await
            .ok_or("this benchmark needs a Docker daemon")?;
        match mode {
            Mode::Reclaim => return reclaim_speed(&docker).await,
            Mode::Costs { out } => return costs(&docker, out.as_deref()).await,
            Mode::All => {}
        }
        let image = TestImage::build(&docker, "preemptor-agent-bench").await;
        eprintln!(
            "agent benchmark: {OPS} operations per path, then RSS with {RSS_CONTAINERS} containers, then memory reclaim"
        );
        latency(&docker, &image).await?;
        rss(&docker, &image).await?;
        drop(image);
        reclaim_speed(&docker).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}
