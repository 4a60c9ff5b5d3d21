//! The agent's container backends without Docker, against real processes and real cgroup
//! files:
//! - `process`: a process tree laid out as the DefaultContainerExecutor leaves it (a
//!   session leader named in `nmPrivate/<app>/<container>/<container>.pid`), moved into a
//!   cgroup of the agent's own, including a child forked after the move;
//! - `yarn-cgroups`: a cgroup built as the LinuxContainerExecutor builds it, with a real
//!   process inside.
//!
//! Both: the throttle shows in the files, the agent is stopped with the container
//! suspended and restarted on the same state, and the lease expiry restores the exact
//! original limits. Needs root and writable cgroups: without them the tests print why and
//! pass outside CI, and fail when `CI=true`.
//!
//! The NodeManager's listing comes from a small HTTP server: the process handling is what
//! is tested here; a real NodeManager lists real containers in `hadoop_real`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use preemptor::agent::cgroup::{CgroupDirs, CgroupMounts};
use preemptor::agent::limits::CgroupLimits;
use preemptor::agent::{AgentClient, AgentConfig, ContainerBackend, RunningAgent};
use preemptor::cluster::ContainerState;
use preemptor::resources::{Limits, Resource};

use crate::agent_support::{TOKEN, unique_cluster_ts, wait_until};
use crate::hadoop_support::skip_or_fail;

const MIB: u64 = 1024 * 1024;

/// Whether this process can create cgroups; `None` (after saying why) when it cannot and
/// CI is not set; a panic under CI.
pub fn cgroups_or_skip(test: &str) -> Option<CgroupMounts> {
    let why = match CgroupMounts::read_self() {
        Ok(m) if m.version().is_some() => {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                return Some(m);
            }
            "not running as root".to_string()
        }
        Ok(_) => "no cgroup v1 cpu+memory or v2 mount".to_string(),
        Err(e) => e.to_string(),
    };
    skip_or_fail(test, &format!("cannot use cgroups here ({why})"));
    None
}

/// A listing of NodeManager containers, served like `/ws/v1/node/containers`.
struct NmListing {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl NmListing {
    async fn serve(ids: Vec<String>) -> NmListing {
        let body = serde_json::json!({
            "containers": {"container": ids.iter().map(|id| serde_json::json!({
                "id": id, "state": "RUNNING", "exitCode": -1000
            })).collect::<Vec<_>>()}
        })
        .to_string();
        let app = axum::Router::new().route(
            "/ws/v1/node/containers",
            axum::routing::get(move || {
                let body = body.clone();
                async move { ([("content-type", "application/json")], body) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        NmListing { url, task }
    }
}

impl Drop for NmListing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A shell running as a container would: its own session, CONTAINER_ID in its
/// environment. It forks `sleep` once `<dir>/fork` appears, and records that child's pid
/// in `<dir>/child`. Killed (the whole session) when dropped.
struct ContainerProcess {
    child: Child,
    dir: PathBuf,
}

impl ContainerProcess {
    fn start(container: &str, dir: &Path) -> ContainerProcess {
        let script = format!(
            "yes > /dev/null & \
             while [ ! -f {d}/fork ]; do sleep 0.05; done; \
             sleep 1000 & echo $! > {d}/child.tmp && mv {d}/child.tmp {d}/child; wait",
            d = dir.display()
        );
        let child = Command::new("setsid")
            .args(["sh", "-c", &script])
            .env("CONTAINER_ID", container)
            .stdin(Stdio::null())
            .spawn()
            .expect("setsid sh starts");
        ContainerProcess {
            child,
            dir: dir.to_path_buf(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn session(&self) -> Vec<u32> {
        let sid = self.pid().to_string();
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // Fields after the command's closing parenthesis: state ppid pgrp session.
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                continue;
            };
            if rest.split_whitespace().nth(3) == Some(sid.as_str()) {
                out.push(pid);
            }
        }
        out
    }

    /// Makes the shell fork a child now and returns the child's pid.
    async fn fork_child(&self) -> u32 {
        std::fs::write(self.dir.join("fork"), "").expect("fork trigger");
        let file = self.dir.join("child");
        wait_until(Duration::from_secs(10), "the forked child", || {
            let f = file.clone();
            async move { f.is_file() }
        })
        .await;
        std::fs::read_to_string(&file)
            .expect("child pid")
            .trim()
            .parse()
            .expect("child pid is a number")
    }

    fn kill(&mut self) {
        // The session leader's pid is the process group of the whole session.
        if let Ok(pgid) = libc::pid_t::try_from(self.pid()) {
            // SAFETY: kill(2) on our own child's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

impl Drop for ContainerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Removes a cgroup sub-tree (children first) in every hierarchy, even when the test
/// fails.
pub struct CgroupTreeGuard {
    roots: Vec<PathBuf>,
}

impl CgroupTreeGuard {
    pub fn new(mounts: &CgroupMounts, rel: &str) -> CgroupTreeGuard {
        let d = mounts.dirs_at(rel).expect("cgroup dirs");
        let mut roots = vec![d.cpu, d.cpuacct, d.memory];
        roots.dedup();
        CgroupTreeGuard { roots }
    }
}

/// Kills every process in the sub-tree, then removes it children first, retrying while
/// the killed processes are still exiting.
fn remove_tree(dir: &Path) {
    let mut dirs = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        dirs.push(d);
    }
    for d in &dirs {
        let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
        for pid in procs
            .lines()
            .filter_map(|p| p.trim().parse::<libc::pid_t>().ok())
        {
            // SAFETY: kill(2) on a process the test put in its own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    // Deepest first: children were pushed after their parents.
    for d in dirs.iter().rev() {
        for _ in 0..100 {
            match std::fs::remove_dir(d) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => break,
            }
        }
    }
}

impl Drop for CgroupTreeGuard {
    fn drop(&mut self) {
        for r in &self.roots {
            remove_tree(r);
        }
    }
}

struct Agent {
    agent: Option<RunningAgent>,
    client: AgentClient,
}

impl Agent {
    async fn start(config: AgentConfig) -> Agent {
        let agent = preemptor::agent::start(config)
            .await
            .unwrap_or_else(|e| panic!("starting the agent: {e}"));
        let client =
            AgentClient::new(&agent.url(), TOKEN, Duration::from_secs(60)).expect("client");
        Agent {
            agent: Some(agent),
            client,
        }
    }

    /// Stops the agent without resuming anything, as a crash would leave it.
    async fn stop(mut self) {
        if let Some(a) = self.agent.take() {
            a.shutdown().await;
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(a) = self.agent.take() {
            // Multi-threaded runtime: wait for the agent to stop before its files go.
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(a.shutdown());
            });
        }
    }
}

fn config(state: &Path, backend: ContainerBackend, lease: Duration) -> AgentConfig {
    let mut c = AgentConfig::new(TOKEN.as_bytes().to_vec(), state.to_path_buf());
    c.listen = "127.0.0.1:0".parse().expect("addr");
    c.containers = backend;
    c.lease_timeout = lease;
    c
}

fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

fn limits(dirs: &CgroupDirs) -> CgroupLimits {
    dirs.read_limits()
        .unwrap_or_else(|e| panic!("reading limits: {e}"))
}

/// Suspends `container` to 10 millicores and 128 MB (1% of a core whatever its
/// allocation), checks the files, stops the agent
/// without resuming, restarts it on the same state with a short lease, and waits for
/// the lease expiry to restore `original` exactly.
async fn suspend_crash_restore(
    config: AgentConfig,
    container: &str,
    allocated: Resource,
    dirs: &CgroupDirs,
    original: CgroupLimits,
) {
    let agent = Agent::start(config.clone()).await;
    agent
        .client
        .renew_lease("test", Some(Duration::from_secs(60)))
        .await
        .expect("lease");
    let r = agent
        .client
        .suspend(container, allocated, Limits::new(128, 10))
        .await
        .unwrap_or_else(|e| panic!("suspend: {e}"));
    assert_eq!(r.state, ContainerState::Suspended);
    let now = limits(dirs);
    assert_eq!(now.cpu_quota_us, Some(1_000), "1% of a core: {now:?}");
    assert_eq!(now.memory_bytes, Some(128 * MIB), "{now:?}");
    agent.stop().await;

    let mut again = config;
    again.lease_timeout = Duration::from_millis(500);
    let agent = Agent::start(again).await;
    wait_until(Duration::from_secs(15), "the lease expiry's resume", || {
        let c = agent.client.clone();
        async move { c.lease().await.is_ok_and(|l| l.changed_containers == 0) }
    })
    .await;
    let back = limits(dirs);
    assert!(
        back.same_enforcement(&original),
        "restored {back:?}, original {original:?}"
    );
    assert_eq!(back, original);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_backend_moves_the_tree_throttles_and_restores_exactly() {
    const TEST: &str = "process_backend_moves_the_tree_throttles_and_restores_exactly";
    let Some(mounts) = cgroups_or_skip(TEST) else {
        return;
    };
    let ts = unique_cluster_ts();
    let app = format!("application_{ts}_0001");
    let container = format!("container_{ts}_0001_01_000002");
    let parent = format!("/preemptor-test-{ts}");
    let _cgroups = CgroupTreeGuard::new(&mounts, &parent);
    let work = tempfile::tempdir().expect("tempdir");
    let local = work.path().join("local");
    let pid_dir = local.join("nmPrivate").join(&app).join(&container);
    std::fs::create_dir_all(&pid_dir).expect("nmPrivate");
    let mut proc = ContainerProcess::start(&container, work.path());
    std::fs::write(
        pid_dir.join(format!("{container}.pid")),
        format!("{}\n", proc.pid()),
    )
    .expect("pid file");
    let nm = NmListing::serve(vec![container.clone()]).await;

    let mut c = config(
        &work.path().join("state"),
        ContainerBackend::Process,
        Duration::from_secs(60),
    );
    c.nodemanager = Some(nm.url.clone());
    c.nm_local_dirs = vec![local.clone()];
    c.agent_cgroup_parent = parent.clone();
    let dirs = mounts
        .dirs_at(&format!("{parent}/{container}"))
        .expect("dirs");

    // Moved, unchanged, as soon as the NodeManager lists it; the whole session is
    // inside, and a child forked later starts inside too.
    wait_until(Duration::from_secs(10), "the shell and yes", || {
        let n = proc.session().len();
        async move { n >= 2 }
    })
    .await;
    let agent = Agent::start(c.clone()).await;
    let root = proc.pid();
    let path = format!("{parent}/{container}");
    wait_until(Duration::from_secs(10), "the container moved", || {
        let moved = cgroup_of(root).contains(&path);
        async move { moved }
    })
    .await;
    assert_eq!(limits(&dirs).cpu_quota_us, None, "moved, not limited");
    assert_eq!(limits(&dirs).memory_bytes, None, "moved, not limited");
    agent
        .client
        .renew_lease("test", Some(Duration::from_secs(60)))
        .await
        .expect("lease");
    agent
        .client
        .shrink(&container, Resource::new(1024, 1), Limits::new(1024, 500))
        .await
        .unwrap_or_else(|e| panic!("shrink: {e}"));
    for pid in proc.session() {
        assert!(
            cgroup_of(pid).contains(&format!("{parent}/{container}")),
            "pid {pid} not moved: {}",
            cgroup_of(pid)
        );
    }
    let forked = proc.fork_child().await;
    assert!(
        cgroup_of(forked).contains(&format!("{parent}/{container}")),
        "child forked after the move is outside: {}",
        cgroup_of(forked)
    );
    let status = agent.client.container(&container).await.expect("status");
    assert!(status.running && status.changed);
    assert!(status.attained_service_ms.is_some());
    let original = status.original.expect("original limits");
    assert_eq!(original.cpu_quota_us, None, "a fresh cgroup is unlimited");
    agent.client.resume(&container).await.expect("resume");
    assert_eq!(limits(&dirs), original);
    agent.stop().await;

    suspend_crash_restore(
        c.clone(),
        &container,
        Resource::new(1024, 1),
        &dirs,
        original,
    )
    .await;

    // The container ends: its cgroup goes with it.
    let agent = Agent::start(c).await;
    proc.kill();
    wait_until(
        Duration::from_secs(10),
        "the ended container's cgroup removed",
        || {
            let d = dirs.cpu.clone();
            async move { !d.exists() }
        },
    )
    .await;
    assert!(!dirs.memory.exists());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_backend_refuses_what_is_not_its_nodemanagers_container() {
    const TEST: &str = "process_backend_refuses_what_is_not_its_nodemanagers_container";
    let Some(mounts) = cgroups_or_skip(TEST) else {
        return;
    };
    let ts = unique_cluster_ts();
    let app = format!("application_{ts}_0001");
    let listed = format!("container_{ts}_0001_01_000002");
    let unlisted = format!("container_{ts}_0001_01_000003");
    let parent = format!("/preemptor-test-{ts}");
    let _cgroups = CgroupTreeGuard::new(&mounts, &parent);
    let work = tempfile::tempdir().expect("tempdir");
    let local = work.path().join("local");
    // A pid file naming a process that is not the container (a reused pid), and a real
    // container process the NodeManager does not list.
    let stranger = ContainerProcess::start("someone_else", work.path());
    let other_dir = work.path().join("other");
    std::fs::create_dir_all(&other_dir).expect("dir");
    let other = ContainerProcess::start(&unlisted, &other_dir);
    for (c, pid) in [(&listed, stranger.pid()), (&unlisted, other.pid())] {
        let d = local.join("nmPrivate").join(&app).join(c);
        std::fs::create_dir_all(&d).expect("nmPrivate");
        std::fs::write(d.join(format!("{c}.pid")), pid.to_string()).expect("pid");
    }
    let nm = NmListing::serve(vec![listed.clone()]).await;
    let mut c = config(
        &work.path().join("state"),
        ContainerBackend::Process,
        Duration::from_secs(60),
    );
    c.nodemanager = Some(nm.url.clone());
    c.nm_local_dirs = vec![local];
    c.agent_cgroup_parent = parent.clone();
    let agent = Agent::start(c).await;
    agent
        .client
        .renew_lease("test", Some(Duration::from_secs(60)))
        .await
        .expect("lease");
    let target = Limits::new(512, 100);
    let e = agent
        .client
        .shrink(&listed, Resource::new(1024, 1), target)
        .await
        .expect_err("a pid that is not the container's");
    assert_eq!(e.code(), Some("not_yarn"), "{e}");
    let e = agent
        .client
        .shrink(&unlisted, Resource::new(1024, 1), target)
        .await
        .expect_err("a container the NodeManager does not list");
    assert_eq!(e.code(), Some("not_on_this_node"), "{e}");
    let e = agent
        .client
        .shrink("init", Resource::new(1024, 1), target)
        .await
        .expect_err("not a container id");
    assert_eq!(e.code(), Some("not_yarn"), "{e}");
    for pid in stranger.session().into_iter().chain(other.session()) {
        assert!(
            !cgroup_of(pid).contains(&parent),
            "pid {pid} was moved: {}",
            cgroup_of(pid)
        );
    }
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yarn_cgroups_backend_throttles_yarns_cgroup_and_restores_exactly() {
    const TEST: &str = "yarn_cgroups_backend_throttles_yarns_cgroup_and_restores_exactly";
    let Some(mounts) = cgroups_or_skip(TEST) else {
        return;
    };
    let ts = unique_cluster_ts();
    let container = format!("container_{ts}_0001_01_000002");
    let hierarchy = format!("/hadoop-yarn-test-{ts}");
    let _cgroups = CgroupTreeGuard::new(&mounts, &hierarchy);
    // As the LinuxContainerExecutor builds it: <hierarchy>/<container> in every
    // controller YARN manages, cpu.shares from the vcores, a strict quota, the memory
    // limit from the allocation.
    let dirs = mounts
        .dirs_at(&format!("{hierarchy}/{container}"))
        .expect("dirs");
    let v1 = dirs.version == preemptor::agent::limits::CgroupVersion::V1;
    let mut made = vec![&dirs.cpu, &dirs.cpuacct, &dirs.memory];
    made.dedup();
    for d in made {
        std::fs::create_dir_all(d).expect("mkdir cgroup");
    }
    if !v1 {
        // v2: a controller reaches a child only through every ancestor's subtree_control.
        let mut chain: Vec<&Path> = dirs.cpu.ancestors().skip(1).take(2).collect();
        chain.reverse();
        for d in chain {
            std::fs::write(d.join("cgroup.subtree_control"), "+cpu +memory")
                .expect("delegating cpu and memory");
        }
    }
    let writes: Vec<(&PathBuf, &str, &str)> = if v1 {
        vec![
            (&dirs.cpu, "cpu.shares", "2048"),
            (&dirs.cpu, "cpu.cfs_period_us", "100000"),
            (&dirs.cpu, "cpu.cfs_quota_us", "200000"),
            (&dirs.memory, "memory.limit_in_bytes", "1073741824"),
        ]
    } else {
        vec![
            (&dirs.cpu, "cpu.max", "200000 100000"),
            (&dirs.memory, "memory.max", "1073741824"),
        ]
    };
    for (d, f, v) in writes {
        std::fs::write(d.join(f), v).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    let work = tempfile::tempdir().expect("tempdir");
    let proc = ContainerProcess::start(&container, work.path());
    // `setsid` makes the session only once it runs: wait for the shell and `yes`.
    wait_until(Duration::from_secs(10), "the shell and yes", || {
        let n = proc.session().len();
        async move { n >= 2 }
    })
    .await;
    let mut into = vec![&dirs.cpu, &dirs.cpuacct, &dirs.memory];
    into.dedup();
    for d in into {
        for pid in proc.session() {
            match std::fs::write(d.join("cgroup.procs"), pid.to_string()) {
                // The shell's short `sleep`s come and go.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                r => r.expect("cgroup.procs"),
            }
        }
    }
    let original = limits(&dirs);
    let mut c = config(
        &work.path().join("state"),
        ContainerBackend::YarnCgroups,
        Duration::from_secs(60),
    );
    c.yarn_cgroup_hierarchy = hierarchy.clone();

    // The agent lists it from YARN's hierarchy.
    let agent = Agent::start(c.clone()).await;
    let health = agent.client.health().await.expect("healthz");
    assert_eq!(health.containers, "yarn-cgroups");
    let listed = agent.client.containers().await.expect("containers");
    assert!(
        listed
            .iter()
            .any(|s| s.container.to_string() == container && s.running),
        "{listed:?}"
    );
    agent.stop().await;

    // Two vcores, a strict quota of two cores.
    suspend_crash_restore(c, &container, Resource::new(1024, 2), &dirs, original).await;
    // YARN's files, not the agent's: nothing was created or moved.
    assert!(cgroup_of(proc.pid()).contains(&format!("{hierarchy}/{container}")));
}
