//! `cargo bench --bench agent`: the node agent against the real Docker daemon.
//!
//! 1. Latency from the API call to the throttle being visible in the container's cgroup
//!    (cpu.cfs_quota_us / cpu.max polled from another thread), p50/p99 over 200 suspends
//!    and 200 resumes per path, the Docker path and the direct cgroup-file path
//!    interleaved in the same run, plus the API's own response time.
//! 2. The real agent binary's VmRSS/VmHWM with 50 YARN containers listed, suspended and
//!    resumed.
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
use preemptor::agent::writer::WritePath;
use preemptor::resources::{Limits, Resource};

use agent_support::{
    ChildAgent, CpuLimit, TOKEN, TestContainer, cgroup_dirs, run_container, start_agent,
    unique_cluster_ts,
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
        if let Ok((Some(q), _)) = dirs.read_cpu_max() {
            if q == quota {
                return Some(Instant::now());
            }
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
        let image = TestImage::build(&docker, "preemptor-agent-bench").await;
        eprintln!(
            "agent benchmark: {OPS} operations per path, then RSS with {RSS_CONTAINERS} containers"
        );
        latency(&docker, &image).await?;
        rss(&docker, &image).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}
