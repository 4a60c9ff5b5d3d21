//! Support for the agent's tests: YARN-named containers with YARN-like limits, an
//! in-process agent, the real agent binary as a child process, a swap file, and cgroup
//! readers. Everything created is removed by a guard, even when the test fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::CreateContainerOptions;
use preemptor::agent::cgroup::{CgroupDirs, CgroupMounts, read_proc_cgroup};
use preemptor::agent::limits::{CgroupLimits, DockerLimits};
use preemptor::agent::writer::WritePath;
use preemptor::agent::{AgentClient, AgentConfig, RunningAgent};

use crate::common::{ContainerGuard, TestImage, unique_name};

pub const TOKEN: &str = "agent-test-token";
pub const MIB: i64 = 1024 * 1024;

/// A cluster timestamp (13 digits) no other test or concurrent run uses.
pub fn unique_cluster_ts() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mix = nanos / 1000
        + u64::from(std::process::id()) * 1_000_003
        + COUNTER.fetch_add(1, Ordering::Relaxed) * 7_919;
    1_000_000_000_000 + mix % 8_999_999_999_999
}

/// How a test container is limited, the way YARN's Docker runtime would do it.
#[derive(Clone, Copy)]
pub enum CpuLimit {
    Nano(i64),
    Quota { quota: i64, period: i64 },
}

pub struct TestContainer {
    pub name: String,
    pub docker_id: String,
    _guard: ContainerGuard,
}

/// Runs `burn <args>` in a container named `name` with the given limits and waits until
/// it runs.
pub async fn run_container(
    docker: &Docker,
    image: &str,
    name: &str,
    cpu: CpuLimit,
    memory_mb: i64,
    args: &[&str],
) -> TestContainer {
    let guard = ContainerGuard {
        docker: docker.clone(),
        name: name.to_string(),
    };
    let (nano_cpus, cpu_quota, cpu_period) = match cpu {
        CpuLimit::Nano(n) => (Some(n), None, None),
        CpuLimit::Quota { quota, period } => (None, Some(quota), Some(period)),
    };
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(
            std::iter::once("burn")
                .chain(args.iter().copied())
                .map(String::from)
                .collect(),
        ),
        host_config: Some(HostConfig {
            nano_cpus,
            cpu_quota,
            cpu_period,
            memory: Some(memory_mb * MIB),
            memory_swap: Some(memory_mb * MIB),
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
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    docker
        .start_container(name, None)
        .await
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    let docker_id = inspect(docker, name).await.id.unwrap_or_default();
    TestContainer {
        name: name.to_string(),
        docker_id,
        _guard: guard,
    }
}

/// A YARN-named container (1 vcore = 1 CPU, 512 MB) whose burner keeps touching a 256 MB
/// working set for `iterations` (0: forever), once the whole set has been touched.
pub struct WorkingSet {
    pub name: String,
    pub dirs: CgroupDirs,
    // Guards, dropped in this order: the container before its image.
    _container: TestContainer,
    _image: TestImage,
}

/// A YARN-named container of 1 CPU and 512 MB touching a 256 MB working set
/// `iterations` times (0: until removed).
pub async fn run_working_set(
    docker: &Docker,
    image: &TestImage,
    name: &str,
    iterations: u32,
) -> TestContainer {
    let iterations = iterations.to_string();
    run_container(
        docker,
        &image.tag,
        name,
        CpuLimit::Nano(1_000_000_000),
        512,
        &[
            "--memory-mb",
            "256",
            "--iterations",
            &iterations,
            "--rounds-millions",
            "1",
        ],
    )
    .await
}

pub async fn working_set_container(docker: &Docker, prefix: &str, iterations: u32) -> WorkingSet {
    let image = TestImage::build(docker, prefix).await;
    let name = format!("container_e01_{}_0001_01_000002", unique_cluster_ts());
    let container = run_working_set(docker, &image, &name, iterations).await;
    let dirs = cgroup_dirs(docker, &name).await;
    wait_until(
        Duration::from_secs(60),
        "the 256 MB working set",
        || async { dirs.sample().map(|s| s.memory_usage_bytes).unwrap_or(0) >= 250 << 20 },
    )
    .await;
    WorkingSet {
        name,
        dirs,
        _container: container,
        _image: image,
    }
}

pub async fn inspect(docker: &Docker, name: &str) -> bollard::models::ContainerInspectResponse {
    docker
        .inspect_container(name, None)
        .await
        .unwrap_or_else(|e| panic!("inspecting {name}: {e}"))
}

/// Docker's view of a container's limits.
pub async fn docker_limits(docker: &Docker, name: &str) -> DockerLimits {
    let hc = inspect(docker, name).await.host_config.unwrap_or_default();
    DockerLimits::from(&hc)
}

/// The container's cgroup directories, from its init process.
pub async fn cgroup_dirs(docker: &Docker, name: &str) -> CgroupDirs {
    let i = inspect(docker, name).await;
    let pid = i
        .state
        .and_then(|s| s.pid)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or_else(|| panic!("{name} has no pid"));
    let id = i.id.unwrap_or_default();
    let text = read_proc_cgroup(pid).unwrap_or_else(|e| panic!("{e}"));
    CgroupMounts::read_self()
        .and_then(|m| m.dirs_from_proc(&text, &id))
        .unwrap_or_else(|e| panic!("cgroup dirs of {name}: {e}"))
}

pub fn read_limits(dirs: &CgroupDirs) -> CgroupLimits {
    dirs.read_limits()
        .unwrap_or_else(|e| panic!("reading limits: {e}"))
}

/// CPU used over `window`, as a fraction of one core, from the cgroup's usage counter.
pub async fn cpu_fraction(dirs: &CgroupDirs, window: Duration) -> f64 {
    let u0 = dirs.cpu_usage_ns().expect("cpu usage");
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let u1 = dirs.cpu_usage_ns().expect("cpu usage");
    (u1.saturating_sub(u0)) as f64 / t0.elapsed().as_nanos() as f64
}

/// Polls `check` every 50 ms until it is true or `timeout` passes.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An agent running inside the test process, with its own state directory. Tests using it
/// run on a multi-threaded runtime so that dropping it can wait for the agent to stop
/// before its state directory is removed.
pub struct InProcessAgent {
    agent: Option<RunningAgent>,
    pub url: String,
    pub client: AgentClient,
    /// Removed with the agent.
    _state_dir: tempfile::TempDir,
}

pub async fn start_agent(path: WritePath, lease: Duration) -> InProcessAgent {
    start_agent_with(path, lease, |_| {}).await
}

/// [`start_agent`] with more of the configuration changed by `tune`.
pub async fn start_agent_with(
    path: WritePath,
    lease: Duration,
    tune: impl FnOnce(&mut AgentConfig),
) -> InProcessAgent {
    let state_dir = tempfile::tempdir().expect("tempdir");
    let mut config = AgentConfig::new(TOKEN.as_bytes().to_vec(), state_dir.path().to_path_buf());
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.path = path;
    config.lease_timeout = lease;
    tune(&mut config);
    let agent = preemptor::agent::start(config)
        .await
        .unwrap_or_else(|e| panic!("starting the agent: {e}"));
    let url = agent.url();
    let client = AgentClient::new(&url, TOKEN, Duration::from_secs(120)).expect("client");
    InProcessAgent {
        agent: Some(agent),
        url,
        client,
        _state_dir: state_dir,
    }
}

/// The real `preemptor agent` binary as a child process, SIGKILLed when dropped.
pub struct ChildAgent {
    child: Child,
    pub url: String,
    pub stderr_log: PathBuf,
}

impl ChildAgent {
    pub fn spawn(state_dir: &Path, token_file: &Path, lease: &str, log_dir: &Path) -> ChildAgent {
        let stderr_log = log_dir.join(format!("{}.log", unique_name("agent")));
        let stderr = std::fs::File::create(&stderr_log).expect("log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_preemptor"))
            .args(["agent", "--listen", "127.0.0.1:0", "--lease-timeout", lease])
            .arg("--token-file")
            .arg(token_file)
            .arg("--state-dir")
            .arg(state_dir)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawning preemptor agent");
        let stdout = child.stdout.take().expect("stdout");
        let mut agent = ChildAgent {
            child,
            url: String::new(),
            stderr_log,
        };
        let mut line = String::new();
        // The agent prints its URL once it listens; it exits with an error otherwise.
        let n = BufReader::new(stdout).read_line(&mut line).unwrap_or(0);
        if n == 0 {
            let log = std::fs::read_to_string(&agent.stderr_log).unwrap_or_default();
            panic!("the agent exited before listening:\n{log}");
        }
        agent.url = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        agent
    }

    pub fn client(&self) -> AgentClient {
        AgentClient::new(&self.url, TOKEN, Duration::from_secs(60)).expect("client")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }
}

impl Drop for ChildAgent {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.stderr_log);
    }
}

/// Swap, the disk and the kernel's reclaim are the host's: one swap-using test at a time
/// (across test processes too), so that one test's reclaim I/O cannot decide whether
/// another's thrashing container is OOM-killed. The lock is an abstract unix socket:
/// released when closed, also if the process dies, and it leaves no file behind.
pub struct SwapLock {
    _socket: std::os::unix::net::UnixListener,
}

impl SwapLock {
    pub fn acquire() -> Result<SwapLock, String> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener};
        let addr = SocketAddr::from_abstract_name(b"preemptor-test-swap-lock")
            .map_err(|e| format!("swap lock address: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            match UnixListener::bind_addr(&addr) {
                Ok(socket) => return Ok(SwapLock { _socket: socket }),
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(format!("waiting for the other swap-using test: {e}")),
            }
        }
    }
}

/// A swap file made with fallocate/mkswap/swapon, swapped off and removed when dropped.
/// Only one exists at a time (see [`SwapLock`]).
pub struct SwapFile {
    path: PathBuf,
    active: bool,
    // Dropped after `Drop::drop` has swapped off and removed the file.
    _lock: SwapLock,
}

impl SwapFile {
    pub fn create(size_mb: u64) -> Result<SwapFile, String> {
        let lock = SwapLock::acquire()?;
        let path = PathBuf::from(format!("/var/tmp/{}.swap", unique_name("preemptor-test")));
        let mut swap = SwapFile {
            path,
            active: false,
            _lock: lock,
        };
        let p = swap.path.to_string_lossy().to_string();
        let run = |cmd: &str, args: &[&str]| -> Result<(), String> {
            let out = Command::new(cmd)
                .args(args)
                .output()
                .map_err(|e| format!("{cmd}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{cmd} {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        run("fallocate", &["-l", &format!("{size_mb}M"), &p])?;
        run("chmod", &["600", &p])?;
        run("mkswap", &[&p])?;
        run("swapon", &[&p])?;
        swap.active = true;
        Ok(swap)
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        if self.active {
            // Swapping off pages a container still has in swap can take a moment.
            match Command::new("swapoff").arg(&self.path).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "swapoff {}: {}",
                    self.path.display(),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => eprintln!("swapoff {}: {e}", self.path.display()),
            }
        }
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("removing {}: {e}", self.path.display());
        }
    }
}

/// Stops the agent (and waits for it) before the state directory goes, even if the test
/// panicked.
impl Drop for InProcessAgent {
    fn drop(&mut self) {
        let Some(agent) = self.agent.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| h.block_on(agent.shutdown()));
            }
            _ => agent.cancel_token().cancel(),
        }
    }
}
