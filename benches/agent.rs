//! `cargo bench --bench agent`: the node agent against the real Docker daemon.
//!
//! 1. Latency from the API call to the throttle being visible in the container's cgroup
//!    (cpu.cfs_quota_us / cpu.max polled from another thread), p50/p99 over 200 suspends
//!    and 200 resumes per path, the Docker path and the direct cgroup-file path
//!    interleaved in the same run, plus the API's own response time.
//! 2. The real agent binary's VmRSS/VmHWM with 50 YARN containers listed, suspended and
//!    resumed.
//!
//! Everything it creates (image, containers, agent process, temp dirs) is removed on exit,
//! also when it fails.

use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, RemoveContainerOptions, RemoveImageOptions,
};
use preemptor::agent::cgroup::{CgroupDirs, CgroupMounts, read_proc_cgroup};
use preemptor::agent::writer::WritePath;
use preemptor::agent::{AgentClient, AgentConfig};
use preemptor::resources::{Limits, Resource};

const OPS: usize = 200;
const TOKEN: &str = "bench-token";
const RSS_CONTAINERS: usize = 50;

type BenchResult<T> = Result<T, String>;

/// Removes what the benchmark created, whatever happens.
struct Cleanup {
    docker: Docker,
    image: String,
    containers: Vec<String>,
    rt: tokio::runtime::Handle,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let docker = self.docker.clone();
        let image = self.image.clone();
        let containers = std::mem::take(&mut self.containers);
        let rt = self.rt.clone();
        let _ = std::thread::spawn(move || {
            rt.block_on(async move {
                for c in containers {
                    let opts = RemoveContainerOptions {
                        force: true,
                        v: true,
                        ..Default::default()
                    };
                    let _ = docker.remove_container(&c, Some(opts)).await;
                }
                let opts = RemoveImageOptions {
                    force: true,
                    ..Default::default()
                };
                let _ = docker.remove_image(&image, Some(opts), None).await;
            })
        })
        .join();
    }
}

struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cluster_ts() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    1_000_000_000_000 + (nanos / 1000 + u64::from(std::process::id())) % 8_999_999_999_999
}

async fn run_container(
    docker: &Docker,
    cleanup: &mut Cleanup,
    name: &str,
    args: &[&str],
) -> BenchResult<()> {
    cleanup.containers.push(name.to_string());
    let body = ContainerCreateBody {
        image: Some(cleanup.image.clone()),
        cmd: Some(args.iter().map(|s| s.to_string()).collect()),
        host_config: Some(HostConfig {
            nano_cpus: Some(1_000_000_000),
            memory: Some(256 << 20),
            memory_swap: Some(256 << 20),
            ..Default::default()
        }),
        ..Default::default()
    };
    docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.to_string()),
                ..Default::default()
            }),
            body,
        )
        .await
        .map_err(|e| format!("creating {name}: {e}"))?;
    docker
        .start_container(name, None)
        .await
        .map_err(|e| format!("starting {name}: {e}"))
}

async fn dirs_of(docker: &Docker, name: &str) -> BenchResult<CgroupDirs> {
    let i = docker
        .inspect_container(name, None)
        .await
        .map_err(|e| e.to_string())?;
    let pid = i
        .state
        .and_then(|s| s.pid)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or("no pid")?;
    let text = read_proc_cgroup(pid).map_err(|e| e.to_string())?;
    CgroupMounts::read_self()
        .and_then(|m| m.dirs_from_proc(&text, &i.id.unwrap_or_default()))
        .map_err(|e| e.to_string())
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

async fn latency(docker: &Docker, cleanup: &mut Cleanup) -> BenchResult<()> {
    let ts = cluster_ts();
    let mut setups = Vec::new();
    for (i, path) in [WritePath::Docker, WritePath::Direct]
        .into_iter()
        .enumerate()
    {
        let name = format!("container_e01_{ts}_0001_01_{:06}", i + 2);
        run_container(docker, cleanup, &name, &["burn", "--iterations", "0"]).await?;
        let dirs = dirs_of(docker, &name).await?;
        let original = dirs
            .read_cpu_max()
            .map_err(|e| e.to_string())?
            .0
            .ok_or("no quota")?;
        let state = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut config = AgentConfig::new(TOKEN.into(), state.path().to_path_buf());
        config.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
        config.path = path;
        config.lease_timeout = Duration::from_secs(600);
        let agent = preemptor::agent::start(config)
            .await
            .map_err(|e| e.to_string())?;
        let client = AgentClient::new(&agent.url(), TOKEN, Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        client
            .renew_lease("bench", None)
            .await
            .map_err(|e| e.to_string())?;
        setups.push((path, name, dirs, original, client, agent, state));
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
        for (k, (_, name, dirs, original, client, ..)) in setups.iter().enumerate() {
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
    for (_, _, _, _, _, agent, _) in setups {
        agent.shutdown().await;
    }
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

async fn rss(docker: &Docker, cleanup: &mut Cleanup) -> BenchResult<()> {
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let token_file = work.path().join("token");
    std::fs::write(&token_file, TOKEN).map_err(|e| e.to_string())?;
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .map_err(|e| e.to_string())?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args(["agent", "--listen", "127.0.0.1:0", "--lease-timeout", "10m"])
        .arg("--token-file")
        .arg(&token_file)
        .arg("--state-dir")
        .arg(work.path().join("state"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawning the agent: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let child = ChildGuard(child);
    let pid = child.0.id();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .map_err(|e| e.to_string())?;
    let url = line.trim().rsplit(' ').next().ok_or("no URL")?.to_string();
    let client =
        AgentClient::new(&url, TOKEN, Duration::from_secs(60)).map_err(|e| e.to_string())?;
    let idle = vm_kb(pid, "VmRSS:").unwrap_or(0);

    eprintln!("  starting {RSS_CONTAINERS} paused YARN containers...");
    let ts = cluster_ts() + 7;
    let mut names = Vec::new();
    for i in 0..RSS_CONTAINERS {
        let name = format!("container_e01_{ts}_0002_01_{:06}", i + 2);
        run_container(docker, cleanup, &name, &["burn", "--iterations", "0"]).await?;
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
    for n in &names {
        let _ = docker.unpause_container(n).await;
    }
    drop(child);
    Ok(())
}

fn main() -> ExitCode {
    // `cargo bench` passes --bench; nothing else is accepted.
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
        let docker = Docker::connect_with_unix_defaults()
            .map_err(|e| e.to_string())?
            .negotiate_version()
            .await
            .map_err(|e| format!("this benchmark needs a Docker daemon: {e}"))?;
        let image = format!("preemptor-agent-bench-{}:bench", std::process::id());
        let mut cleanup = Cleanup {
            docker: docker.clone(),
            image: image.clone(),
            containers: Vec::new(),
            rt: tokio::runtime::Handle::current(),
        };
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_preemptor-workload"));
        preemptor::emulator::image::build_workload_image(&docker, bin, &image)
            .await
            .map_err(|e| e.to_string())?;
        eprintln!(
            "agent benchmark: {OPS} operations per path, then RSS with {RSS_CONTAINERS} containers"
        );
        let r = async {
            latency(&docker, &mut cleanup).await?;
            rss(&docker, &mut cleanup).await
        }
        .await;
        // Cleanup runs on another thread against this runtime's handle.
        let c = cleanup;
        tokio::task::spawn_blocking(move || drop(c))
            .await
            .map_err(|e| e.to_string())?;
        r
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}
