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
//!
//! `cargo bench --bench agent -- reclaim` runs only 3.
//!
//! It shares the integration tests' support code, whose guards remove every image,
//! container, agent process and temp dir it creates, also when it fails.

#[path = "../integration-tests/common/mod.rs"]
mod common;

#[path = "../integration-tests/agent_support.rs"]
#[allow(dead_code)]
mod agent_support;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use preemptor::agent::AgentClient;
use preemptor::agent::cgroup::CgroupDirs;
use preemptor::agent::limits::{CgroupLimits, DockerLimits, OriginalLimits, RealTarget};
use preemptor::agent::metrics::Metrics;
use preemptor::agent::reclaim;
use preemptor::agent::writer::{LimitWriter, WritePath, WriteTarget};
use preemptor::resources::{Limits, Resource};

use agent_support::{
    ChildAgent, CpuLimit, SwapFile, TOKEN, TestContainer, cgroup_dirs, run_container, start_agent,
    unique_cluster_ts, working_set_container,
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
    let token_file = work.path().join("token");
    std::fs::write(&token_file, TOKEN).map_err(|e| e.to_string())?;
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .map_err(|e| e.to_string())?;
    let agent = ChildAgent::spawn(&work.path().join("state"), &token_file, "10m", work.path());
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
        let docker = docker_or_skip("agent benchmark")
            .await
            .ok_or("this benchmark needs a Docker daemon")?;
        if std::env::args().any(|a| a == "reclaim") {
            return reclaim_speed(&docker).await;
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
