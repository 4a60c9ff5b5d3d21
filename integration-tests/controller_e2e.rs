//! The controller end to end on real Docker: an emulated YARN whose task containers are
//! Docker containers, one in-process agent, and the controller with its RM proxy. Long
//! jobs fill the cluster; a short job submitted through the proxy makes the controller
//! throttle a long container (read back from its cgroup files) and gets a container;
//! shutdown puts every container back at its original limits. A controller that
//! vanishes without shutdown (as under SIGKILL) leaves nothing throttled once the
//! agent's lease expires. With two agents, one refusing a memory cut does not hold back
//! the other's actions. An operator's `preemptor resume` and `restore-capacities` (the
//! binary) give back one container for good, or everything for a hold-off.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use preemptor::agent::cgroup::CgroupDirs;
use preemptor::agent::limits::CgroupLimits;
use preemptor::agent::writer::WritePath;
use preemptor::cluster::{ApplicationId, ContainerId, PolicyKind};
use preemptor::controller::hub::{ControllerEvent, Outcome, TickSummary};
use preemptor::controller::{ControllerConfig, ControllerHandle, start};
use preemptor::emulator::state::RmContainerState;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;

use crate::agent_support::{
    InProcessAgent, SwapLock, TOKEN, cgroup_dirs, read_limits, start_agent_with,
};
use crate::common::{TestImage, docker_or_skip};
use crate::emulator_support::{EmulatorGuard, submit, wait_until};

struct Cluster {
    docker: Docker,
    emulator: EmulatorGuard,
    agent: InProcessAgent,
    /// The long job's task containers with their cgroups and original limits.
    long: BTreeMap<ContainerId, (CgroupDirs, CgroupLimits)>,
    /// The controllers' state directory, shared by a controller and its restart.
    controller_state: tempfile::TempDir,
    // Dropped last: a failed test drops the emulator's containers first, so that the
    // image is removed, not left dangling under a container that still used it.
    _image: TestImage,
}

impl Cluster {
    fn h(&self) -> &EmulatorHandle {
        self.emulator.handle.as_ref().expect("emulator running")
    }

    fn throttled(&self) -> Vec<ContainerId> {
        self.long
            .iter()
            .filter(|(_, (dirs, original))| {
                dirs.read_limits()
                    .is_ok_and(|now| now.cpu_quota_us < original.cpu_quota_us)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn controller_config(&self, lease_ms: u64) -> ControllerConfig {
        let loaded = preemptor::config::load_embedded_default().expect("shipped configuration");
        let mut config =
            ControllerConfig::from_loaded(loaded, None, TOKEN.to_string(), b"api-token".to_vec());
        let s = &mut config.settings;
        s.rm.addresses = vec![self.h().rm_url().to_string()];
        s.policy.kind = PolicyKind::Immediate;
        s.policy.monitoring_interval_ms = 1000;
        // Whole containers per round on a cluster of 14.
        s.policy.total_preemption_per_round = 1.0;
        s.policy.natural_termination_factor = 1.0;
        s.agent.addresses = vec![("127.0.0.1".into(), self.agent.url.clone())];
        s.agent.lease_timeout_ms = lease_ms;
        s.agent.request_timeout_ms = 20_000;
        s.controller.state_dir = self.controller_state.path().to_path_buf();
        config.api_listen = Some("127.0.0.1:0".parse().expect("addr"));
        config.proxy_listen = Some("127.0.0.1:0".parse().expect("addr"));
        config
    }
}

/// 2 NodeManagers of 4 GB and 8 vcores, memory-bound: a long job's 1 GB AM and seven
/// 1 GB tasks fill them.
async fn long_jobs_fill_the_cluster(test: &str) -> Option<Cluster> {
    long_jobs_fill_the_cluster_with(test, 4, |_| {}).await
}

/// [`long_jobs_fill_the_cluster`] with tasks that each keep `resident_mb` of memory
/// touched, and the agent's configuration changed by `tune`.
async fn long_jobs_fill_the_cluster_with(
    test: &str,
    resident_mb: u64,
    tune: impl FnOnce(&mut preemptor::agent::AgentConfig),
) -> Option<Cluster> {
    let docker = docker_or_skip(test).await?;
    let image = TestImage::build(&docker, "preemptor-ctl").await;
    let agent = start_agent_with(WritePath::Docker, Duration::from_secs(30), tune).await;
    let mut config = EmulatorConfig::local(2, Resource::new(4096, 8), RuntimeChoice::Docker);
    config.image = Some(image.tag.clone());
    config.heartbeat_interval = Duration::from_millis(200);
    config.cpu_scale = 0.1;
    config.min_allocation = Resource::new(64, 1);
    let started = Emulator::start(config).await.expect("emulator starts");
    let emulator = EmulatorGuard {
        docker: docker.clone(),
        instance: started.instance().to_string(),
        handle: Some(started),
    };
    let mut cluster = Cluster {
        docker,
        _image: image,
        emulator,
        agent,
        long: BTreeMap::new(),
        controller_state: tempfile::tempdir().expect("controller state dir"),
    };
    let spec = WorkloadSpec::parse(&format!(
        r#"{{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","{resident_mb}"],
            "tasks":7,"memoryMb":1024,"vcores":1}}"#
    ))
    .expect("spec");
    let app: ApplicationId = submit(
        cluster.h().rm_url(),
        "hibench-long",
        "long",
        &spec,
        Resource::new(1024, 1),
    )
    .await
    .parse()
    .expect("application id");
    wait_until(cluster.h(), "7 running long tasks", 90, |s| {
        s.containers
            .values()
            .filter(|c| {
                c.id.application() == app && !c.is_am() && c.state == RmContainerState::Running
            })
            .count()
            == 7
    })
    .await;
    let ids: Vec<ContainerId> = cluster.h().inspect(|s| {
        s.containers
            .values()
            .filter(|c| c.id.application() == app && !c.is_am())
            .map(|c| c.id)
            .collect()
    });
    for id in ids {
        let dirs = cgroup_dirs(&cluster.docker, &id.to_string()).await;
        let original = read_limits(&dirs);
        cluster.long.insert(id, (dirs, original));
    }
    Some(cluster)
}

fn short_spec() -> WorkloadSpec {
    WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","4"],
            "tasks":1,"memoryMb":448,"vcores":1}"#,
    )
    .expect("spec")
}

/// After one tick (the lease held, the view warm), a short job through the proxy; returns
/// once it has made the controller throttle a long container.
async fn short_job_throttles(
    cluster: &Cluster,
    proxy: &str,
    name: &str,
    memory_mb: u64,
) -> ApplicationId {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let app = submit(
        proxy,
        name,
        "short",
        &short_spec(),
        Resource::new(memory_mb, 1),
    )
    .await
    .parse()
    .expect("application id");
    wait_for_more_throttled(cluster, 0, Duration::from_secs(20)).await;
    app
}

/// Polls every 2 ms until more long containers are throttled than `before`.
async fn wait_for_more_throttled(c: &Cluster, before: usize, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        if c.throttled().len() > before {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < timeout,
            "no long container was throttled within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn wait_short_running(c: &Cluster, app: ApplicationId) {
    wait_until(c.h(), &format!("{app} to get its containers"), 60, |s| {
        let mine: Vec<_> = s
            .containers
            .values()
            .filter(|x| x.id.application() == app)
            .collect();
        mine.len() >= 2 && mine.iter().all(|x| x.state == RmContainerState::Running)
    })
    .await;
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn assert_all_original(c: &Cluster) {
    for (id, (dirs, original)) in &c.long {
        let now = dirs
            .read_limits()
            .unwrap_or_else(|e| panic!("reading the cgroup of {id}: {e}"));
        assert!(
            now.same_enforcement(original),
            "{id} is not back at its original limits: {now:?} vs {original:?}"
        );
    }
}

async fn stop(c: Cluster) {
    let Cluster {
        emulator: mut guard,
        agent,
        ..
    } = c;
    if let Some(h) = guard.handle.take() {
        h.shutdown().await.expect("emulator shutdown");
    }
    drop(agent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_throttles_long_containers_for_short_jobs_and_restores_them_on_shutdown() {
    let test = "controller_throttles_long_containers_for_short_jobs_and_restores_them_on_shutdown";
    if std::env::var_os("CONTROLLER_E2E_TRACE").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("preemptor=debug")
            .with_test_writer()
            .try_init();
    }
    let Some(cluster) = long_jobs_fill_the_cluster(test).await else {
        return;
    };
    let controller: ControllerHandle = start(cluster.controller_config(30_000))
        .await
        .expect("controller starts");
    let mut events = controller.hub().subscribe();
    let proxy = controller.proxy_url().expect("proxy on");
    // One tick first so that the lease is held and the view is warm.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        cluster.throttled().is_empty(),
        "nothing to do before short work arrives"
    );

    // Each round starts from a full cluster: one short job needs exactly one suspended
    // long container (448 MB AM + 448 MB task in the 960 MB it frees), is killed once it
    // runs, and the controller resumes the container before the next round.
    let rm = preemptor::yarn::RmClient::new(&cluster.controller_config(30_000).settings.rm)
        .expect("rm client");
    let mut latencies = Vec::new();
    for i in 0..3 {
        let t0 = Instant::now();
        let app: ApplicationId = submit(
            &proxy,
            &format!("tpch-q6-{i}"),
            "short",
            &short_spec(),
            Resource::new(448, 1),
        )
        .await
        .parse()
        .expect("application id");
        wait_for_more_throttled(&cluster, 0, Duration::from_secs(20)).await;
        // From before the client's new-application call: an upper bound on the time
        // from the proxy seeing the submission.
        latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
        wait_short_running(&cluster, app).await;
        if i == 2 {
            break;
        }
        rm.kill_app(&app).await.expect("kill the short job");
        let t1 = Instant::now();
        while !cluster.throttled().is_empty() {
            assert!(
                t1.elapsed() < Duration::from_secs(20),
                "the long containers were not resumed after the short job left"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!(
            "short job gone -> long containers resumed in {:?}",
            t1.elapsed()
        );
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "proxy submission -> throttle visible in the cgroup: p50 {:.0} ms, p95 {:.0} ms (n = {}, {:?})",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        latencies.len(),
        latencies
    );

    let throttled = cluster.throttled();
    assert!(!throttled.is_empty());
    for id in &throttled {
        let limits = read_limits(&cluster.long[id].0);
        assert!(
            limits.memory_bytes.is_some_and(|m| m <= 64 * 1024 * 1024),
            "{id} suspended to the 64 MB footprint: {limits:?}"
        );
    }
    let mut suspends = 0;
    while let Ok(e) = events.try_recv() {
        if let ControllerEvent::Action(a) = e
            && a.action == "suspend"
        {
            assert_eq!(a.outcome, Outcome::Applied, "{a:?}");
            assert!(a.latency_ms.is_some());
            // The numbers beside the rendered limits: 1 GB allocated, 64 MB kept.
            assert_eq!(
                (a.amounts.before_memory_mb, a.amounts.after_memory_mb),
                (Some(1024), Some(64)),
                "{a:?}"
            );
            println!(
                "suspend {} logged {} ms after its trigger",
                a.container.as_deref().unwrap_or("-"),
                a.latency_ms.unwrap_or(0)
            );
            suspends += 1;
        }
    }
    assert!(
        suspends >= throttled.len(),
        "every suspension is in the preemption log"
    );
    // The status is the last tick's observation, taken before that tick's actions: it
    // may be one tick behind the cgroups.
    let t = Instant::now();
    while controller.hub().status().suspended == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{:?}",
            controller.hub().status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let raised = cluster.h().inspect(|s| {
        s.nodes
            .iter()
            .any(|n| n.total.memory_mb > n.capacity.memory_mb)
    });
    assert!(raised, "the reclaimed room is advertised to the RM");

    let report = controller.shutdown(false).await.expect("shutdown");
    assert!(report.failed.is_empty(), "{report:?}");
    assert!(report.resumed >= throttled.len(), "{report:?}");
    assert_all_original(&cluster);
    let restored = cluster
        .h()
        .inspect(|s| s.nodes.iter().all(|n| n.total == n.capacity));
    assert!(restored, "advertised capacities are back to physical");
    stop(cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_without_shutdown_leaves_nothing_throttled_after_the_lease() {
    let test = "a_controller_killed_without_shutdown_leaves_nothing_throttled_after_the_lease";
    let Some(cluster) = long_jobs_fill_the_cluster(test).await else {
        return;
    };
    let lease = Duration::from_secs(3);
    let config = cluster.controller_config(lease.as_millis() as u64);
    let rm = preemptor::yarn::RmClient::new(&config.settings.rm).expect("rm client");
    let controller = start(config).await.expect("controller starts");
    let proxy = controller.proxy_url().expect("proxy on");
    let short = short_job_throttles(&cluster, &proxy, "tpch-q1", 512).await;
    let raised = || {
        cluster.h().inspect(|s| {
            s.nodes
                .iter()
                .filter(|n| n.total != n.capacity)
                .map(|n| n.id.to_string())
                .collect::<Vec<_>>()
        })
    };
    let t = Instant::now();
    while raised().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10), "no node was raised");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // As SIGKILL: no shutdown, nothing restored, leases no longer renewed.
    drop(controller);
    let killed = Instant::now();
    let deadline = lease + Duration::from_secs(10);
    while !cluster.throttled().is_empty() {
        assert!(
            killed.elapsed() < deadline,
            "still throttled {:?} after the controller died: {:?}",
            killed.elapsed(),
            cluster.throttled()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "controller killed -> every container back at its limits in {:.1} s (lease {:?})",
        killed.elapsed().as_secs_f64(),
        lease
    );
    assert_all_original(&cluster);
    // The RM still advertises the raised room: only the controller's record knows the
    // physical capacity now.
    assert!(!raised().is_empty(), "nothing was left raised to restore");
    rm.kill_app(&short).await.expect("kill the short job");

    // `restore-capacities --dry-run` names the nodes and changes nothing.
    let conf = tempfile::tempdir().expect("conf dir");
    crate::common::controller_conf_dir(
        conf.path(),
        &[],
        &[
            (
                "yarn.preemptor.rm.address",
                cluster.h().rm_url().to_string(),
            ),
            (
                "yarn.preemptor.controller.state-dir",
                cluster.controller_state.path().display().to_string(),
            ),
        ],
    );
    let dry = tokio::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args(["restore-capacities", "--dry-run", "--conf-dir"])
        .arg(conf.path())
        .output()
        .await
        .expect("restore-capacities runs");
    let out = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    for node in raised() {
        assert!(out.contains(&format!("{node}: advertised ")), "{out}");
    }
    assert!(out.contains("would be restored"), "{out}");
    assert!(!raised().is_empty(), "a dry run changed the RM");

    // A restarted controller takes the physical capacity from its record, not from the
    // raised `totalResource`, and puts every node back within its first tick. The old
    // loop lets go of the state directory as it winds down.
    let t = Instant::now();
    let restarted = loop {
        match start(cluster.controller_config(lease.as_millis() as u64)).await {
            Ok(c) => break c,
            Err(e) if t.elapsed() < Duration::from_secs(5) && e.to_string().contains("holds") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("controller restarts: {e}"),
        }
    };
    let restart = Instant::now();
    while !raised().is_empty() {
        assert!(
            restart.elapsed() < Duration::from_secs(3),
            "still raised {:?} after the restart: {:?}",
            restart.elapsed(),
            raised()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "controller restarted -> every node at its physical capacity in {} ms (1 s ticks)",
        restart.elapsed().as_millis()
    );
    let report = restarted.shutdown(false).await.expect("shutdown");
    assert!(report.failed.is_empty(), "{report:?}");
    assert!(raised().is_empty());
    assert_all_original(&cluster);
    stop(cluster).await;
}

/// The real binary: SIGTERM resumes everything before the agent's lease could.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_makes_the_controller_binary_resume_everything_and_exit() {
    let test = "sigterm_makes_the_controller_binary_resume_everything_and_exit";
    let Some(cluster) = long_jobs_fill_the_cluster(test).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path();
    let props = [
        (
            "yarn.preemptor.rm.address",
            cluster.h().rm_url().to_string(),
        ),
        ("yarn.preemptor.policy", "immediate".into()),
        ("yarn.preemptor.monitoring-interval-ms", "1000".into()),
        ("yarn.preemptor.natural-termination-factor", "1.0".into()),
        ("yarn.preemptor.total-preemption-per-round", "1.0".into()),
        (
            "yarn.preemptor.agent.addresses",
            format!("127.0.0.1={}", cluster.agent.url),
        ),
        (
            "yarn.preemptor.agent.token-file",
            conf.join("agent.token").display().to_string(),
        ),
        ("yarn.preemptor.agent.lease-timeout-ms", "60000".into()),
        ("yarn.preemptor.controller.listen", "127.0.0.1:0".into()),
        (
            "yarn.preemptor.controller.token-file",
            conf.join("api.token").display().to_string(),
        ),
    ];
    crate::common::controller_conf_dir(
        conf,
        &[("agent.token", TOKEN), ("api.token", "api-token")],
        &props,
    );

    let log = conf.join("controller.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args(["controller", "--conf-dir"])
        .arg(conf)
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawning preemptor controller");
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Killed and reaped however the test ends.
    let mut child = Reap(child);
    let pid = child.0.id() as i32;
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();

    submit(
        cluster.h().rm_url(),
        "tpch-q6",
        "short",
        &short_spec(),
        Resource::new(448, 1),
    )
    .await;
    let t0 = Instant::now();
    while cluster.throttled().is_empty() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the controller exited ({status}):\n{}", read_log());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no throttle within 20 s:\n{}",
            read_log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SAFETY: signalling our own child, which has not been reaped.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill -TERM {pid}");
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(20),
            "the controller did not exit on SIGTERM:\n{}",
            read_log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "exit {status}:\n{}", read_log());
    // Well inside the 60 s lease: the controller itself put everything back.
    assert_all_original(&cluster);
    let restored = cluster
        .h()
        .inspect(|s| s.nodes.iter().all(|n| n.total == n.capacity));
    assert!(restored, "advertised capacities restored:\n{}", read_log());
    assert!(
        read_log().contains("controller shutting down"),
        "{}",
        read_log()
    );
    stop(cluster).await;
}

/// A TCP link to a server (an agent, the RM) that the test can cut (connections refused,
/// open ones dropped), turn into a server that answers every request with a 500, and
/// restore, all on the same port: a network partition or a failing server, with both
/// processes alive.
struct Link {
    port: u16,
    target: std::net::SocketAddr,
    accept: Option<tokio::task::JoinHandle<()>>,
    open: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Link {
    async fn start(target: std::net::SocketAddr) -> Link {
        let mut link = Link {
            port: 0,
            target,
            accept: None,
            open: Default::default(),
        };
        link.restore().await;
        link
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn listen(&mut self) -> tokio::net::TcpListener {
        self.cut();
        // The old listener must be gone before its port is bound again.
        if let Some(a) = self.accept.take() {
            let _ = a.await;
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("bind the link");
        self.port = listener.local_addr().expect("link address").port();
        listener
    }

    async fn restore(&mut self) {
        let listener = self.listen().await;
        let (target, open) = (self.target, self.open.clone());
        self.accept = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                open.lock().unwrap_or_else(|e| e.into_inner()).push(task);
            }
        }));
    }

    /// Every request gets `500 Internal Server Error`, as from a failing RM.
    async fn fail_with_500(&mut self) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = self.listen().await;
        let open = self.open.clone();
        self.accept = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let task = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    // One answer per request head read; enough for small GETs and POSTs.
                    while let Ok(n) = inbound.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        let body = r#"{"RemoteException":{"exception":"WebApplicationException","message":"injected failure","javaClassName":"javax.ws.rs.WebApplicationException"}}"#;
                        let reply = format!(
                            "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if inbound.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
                open.lock().unwrap_or_else(|e| e.into_inner()).push(task);
            }
        }));
    }

    fn cut(&mut self) {
        if let Some(a) = &self.accept {
            a.abort();
        }
        for t in self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.cut();
    }
}

fn raised(c: &Cluster) -> bool {
    c.h().inspect(|s| {
        s.nodes
            .iter()
            .any(|n| n.total.memory_mb > n.capacity.memory_mb)
    })
}

/// An agent cut off from the controller keeps what it changed until its lease runs
/// out, so the controller keeps standing on the agent's last report: the node's
/// reclaimed room stays advertised instead of being given back while the container is
/// still suspended. At lease expiry the agent resumes everything; the controller then
/// gives the room back. Once the link returns, the controller reconciles from the
/// agent's report: nothing is applied twice and no action fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cut_off_resumes_at_lease_expiry_and_the_controller_reconciles_after() {
    let test = "an_agent_cut_off_resumes_at_lease_expiry_and_the_controller_reconciles_after";
    let Some(cluster) = long_jobs_fill_the_cluster(test).await else {
        return;
    };
    let agent_addr: std::net::SocketAddr = cluster
        .agent
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("agent address");
    let mut link = Link::start(agent_addr).await;
    let lease = Duration::from_secs(6);
    let mut config = cluster.controller_config(lease.as_millis() as u64);
    config.settings.agent.addresses = vec![("127.0.0.1".into(), link.url())];
    config.settings.agent.request_timeout_ms = 2000;
    let controller = start(config).await.expect("controller starts");
    let mut events = controller.hub().subscribe();
    let proxy = controller.proxy_url().expect("proxy on");
    short_job_throttles(&cluster, &proxy, "tpch-q1", 448).await;
    let t = Instant::now();
    while !raised(&cluster) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the reclaimed room was never advertised"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    link.cut();
    let cut = Instant::now();
    // Within the lease, the agent keeps the container suspended and the controller keeps
    // the room advertised.
    while cut.elapsed() < lease * 2 / 3 - Duration::from_millis(500) {
        assert!(
            !cluster.throttled().is_empty(),
            "resumed {:?} after the cut, within the lease",
            cut.elapsed()
        );
        if !raised(&cluster) {
            let mut log = Vec::new();
            while let Ok(e) = events.try_recv() {
                log.push(format!("{e:?}"));
            }
            panic!(
                "the room was given back {:?} after the cut, while the container was still suspended; events: {log:#?}",
                cut.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // At lease expiry the agent resumes everything by itself ...
    while !cluster.throttled().is_empty() {
        assert!(
            cut.elapsed() < lease + Duration::from_secs(10),
            "still throttled {:?} after the cut: {:?}",
            cut.elapsed(),
            cluster.throttled()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resumed = cut.elapsed();
    assert_all_original(&cluster);
    // ... and the controller stops standing in for it and gives the room back.
    while raised(&cluster) {
        assert!(
            cut.elapsed() < lease + Duration::from_secs(15),
            "capacity still raised {:?} after the cut",
            cut.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "cut off: agent resumed everything {:.1} s after the cut, capacity back {:.1} s after (lease {lease:?})",
        resumed.as_secs_f64(),
        cut.elapsed().as_secs_f64()
    );

    while events.try_recv().is_ok() {}
    link.restore().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut after = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let ControllerEvent::Action(a) = e {
            after.push(a);
        }
    }
    for a in &after {
        assert_eq!(a.outcome, Outcome::Applied, "after reconnection: {a:?}");
    }
    // Anything throttled now was throttled anew, by an action logged after reconnection.
    for id in cluster.throttled() {
        assert!(
            after.iter().any(|a| a.action == "suspend"
                && a.container.as_deref() == Some(id.to_string().as_str())),
            "{id} is throttled without a new suspension: {after:?}"
        );
    }
    let status = controller.hub().status();
    assert!(status.nodes.iter().all(|n| n.agent_reachable), "{status:?}");
    controller.shutdown(false).await.expect("shutdown");
    assert_all_original(&cluster);
    drop(link);
    stop(cluster).await;
}

/// An RM that answers every request with a 500 for three lease timeouts: the controller
/// starts no preemption, says why, and keeps the agents' leases, so the suspended
/// container stays suspended. When the RM answers again the controller recovers by
/// itself and acts again: the short job leaves and the long container is resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rm_answering_500s_stops_new_preemptions_keeps_leases_and_the_controller_recovers() {
    let test =
        "an_rm_answering_500s_stops_new_preemptions_keeps_leases_and_the_controller_recovers";
    let Some(cluster) = long_jobs_fill_the_cluster(test).await else {
        return;
    };
    let rm_addr: std::net::SocketAddr = cluster
        .h()
        .rm_url()
        .trim_start_matches("http://")
        .parse()
        .expect("RM address");
    let mut link = Link::start(rm_addr).await;
    let lease = Duration::from_secs(3);
    let mut config = cluster.controller_config(lease.as_millis() as u64);
    let direct = config.settings.rm.clone();
    config.settings.rm.addresses = vec![link.url()];
    let controller = start(config).await.expect("controller starts");
    let mut events = controller.hub().subscribe();
    let proxy = controller.proxy_url().expect("proxy on");
    let app = short_job_throttles(&cluster, &proxy, "tpch-q6", 448).await;
    wait_short_running(&cluster, app).await;
    let throttled = cluster.throttled();

    link.fail_with_500().await;
    while events.try_recv().is_ok() {}
    let failing = Instant::now();
    while failing.elapsed() < lease * 3 {
        assert_eq!(
            cluster.throttled(),
            throttled,
            "{:?} into the RM outage the suspended containers changed (lease lost?)",
            failing.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut warnings = Vec::new();
    while let Ok(e) = events.try_recv() {
        match e {
            ControllerEvent::Action(a) => panic!("acted while the RM failed: {a:?}"),
            ControllerEvent::Warning { message, .. } => warnings.push(message),
            _ => {}
        }
    }
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("ResourceManager unreachable") && w.contains("500")),
        "{warnings:?}"
    );
    assert!(!controller.hub().status().rm_reachable);

    link.restore().await;
    let back = Instant::now();
    while !controller.hub().status().rm_reachable {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the controller did not see the RM again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Acting again: once the short job leaves, the long containers are resumed.
    let rm = preemptor::yarn::RmClient::new(&direct).expect("rm client");
    rm.kill_app(&app).await.expect("kill the short job");
    while !cluster.throttled().is_empty() {
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "not resumed after the RM came back: {:?}",
            cluster.throttled()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "RM failing for {:?}: {} warnings, nothing acted on, leases kept; resumed {:.1} s after it came back",
        lease * 3,
        warnings.len(),
        back.elapsed().as_secs_f64()
    );
    controller.shutdown(false).await.expect("shutdown");
    assert_all_original(&cluster);
    drop(link);
    stop(cluster).await;
}

/// Docker refusing a memory update (the kernel cannot take a container's resident memory
/// below the suspend footprint: no swap) fails the controller's action with Docker's reason;
/// the agent puts the CPU back, so no container is left half-changed, and the controller
/// tries again at later ticks while the short job waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_refusing_an_update_fails_the_action_with_its_reason_and_leaves_nothing_half_changed()
 {
    let test = "docker_refusing_an_update_fails_the_action_with_its_reason_and_leaves_nothing_half_changed";
    // No swap-using test may add swap meanwhile: without swap the refusal is certain.
    let _no_swap = SwapLock::acquire().expect("swap lock");
    let swaps = std::fs::read_to_string("/proc/swaps").expect("/proc/swaps");
    if swaps.lines().count() > 1 {
        // With swap the kernel can page the memory out and Docker does not refuse.
        eprintln!("SKIPPED {test}: this machine has swap, so Docker would not refuse:\n{swaps}");
        return;
    }
    let Some(cluster) = long_jobs_fill_the_cluster_with(test, 200, |c| {
        c.memory_timeout = Duration::from_secs(2);
    })
    .await
    else {
        return;
    };
    if cluster
        .long
        .values()
        .next()
        .is_some_and(|(dirs, _)| dirs.version == preemptor::agent::limits::CgroupVersion::V2)
    {
        eprintln!("SKIPPED {test}: cgroup v2 OOM-kills on memory.max instead of refusing");
        stop(cluster).await;
        return;
    }
    // The tasks touch their memory after their first round of work: wait until it is
    // resident in every one, or a suspension would find little to refuse.
    let t = Instant::now();
    while !cluster.long.values().all(|(dirs, _)| {
        dirs.sample()
            .is_ok_and(|s| s.memory_usage_bytes >= 150 << 20)
    }) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the long tasks did not touch their 200 MB within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let controller = start(cluster.controller_config(30_000))
        .await
        .expect("controller starts");
    let mut events = controller.hub().subscribe();
    let proxy = controller.proxy_url().expect("proxy on");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let app: ApplicationId = submit(
        &proxy,
        "tpch-q6",
        "short",
        &short_spec(),
        Resource::new(448, 1),
    )
    .await
    .parse()
    .expect("application id");

    let t0 = Instant::now();
    let mut failed = Vec::new();
    while failed.len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "fewer than 2 failed suspensions within 60 s: {failed:?}"
        );
        let Ok(Ok(e)) = tokio::time::timeout(Duration::from_secs(1), events.recv()).await else {
            continue;
        };
        let ControllerEvent::Action(a) = e else {
            continue;
        };
        match (&a.action[..], &a.outcome) {
            ("suspend", Outcome::Failed { reason }) => {
                let id: ContainerId = a
                    .container
                    .as_deref()
                    .and_then(|c| c.parse().ok())
                    .expect("the action names its container");
                // Whole: CPU and memory as they were, not CPU lowered with memory kept.
                let (dirs, original) = &cluster.long[&id];
                let now = read_limits(dirs);
                assert!(
                    now.same_enforcement(original),
                    "{id} left half-changed after the failed suspension: {now:?} vs {original:?}"
                );
                failed.push(reason.clone());
            }
            ("suspend", Outcome::Applied) => {
                panic!("a suspension was applied although Docker cannot lower the memory: {a:?}")
            }
            _ => {}
        }
    }
    for reason in &failed {
        // Docker's words (runc's "unable to set memory limit ... (current usage ...)"), or
        // the agent's after its stepped retries met the kernel's "device or resource busy".
        assert!(
            reason.contains("unable to set memory limit")
                || reason.contains("device or resource busy"),
            "the failure carries Docker's reason: {reason}"
        );
    }
    println!(
        "Docker refused: {} failed suspensions in {:.1} s, each rolled back whole: {}",
        failed.len(),
        t0.elapsed().as_secs_f64(),
        failed[0]
    );
    let rm = preemptor::yarn::RmClient::new(&cluster.controller_config(30_000).settings.rm)
        .expect("rm client");
    rm.kill_app(&app).await.expect("kill the short job");
    controller.shutdown(false).await.expect("shutdown");
    assert_all_original(&cluster);
    stop(cluster).await;
}

/// Two nodes, each with its own agent. Node 0's long tasks keep 200 MB resident, so with
/// no swap the kernel refuses their memory cut and agent A steps through "device or
/// resource busy" for its whole memory timeout. Node 1's tasks keep 4 MB, and agent B
/// suspends them at once. A's refusals must not hold back B's actions: B's are applied
/// within one monitoring interval of the tick that sent them, and ticks keep their pace
/// while A's are still out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_cut_refused_on_one_agent_does_not_delay_another_agents_actions() {
    let test = "a_memory_cut_refused_on_one_agent_does_not_delay_another_agents_actions";
    const MEMORY_TIMEOUT: Duration = Duration::from_secs(20);
    const INTERVAL_MS: u64 = 1000;
    if std::env::var_os("CONTROLLER_E2E_TRACE").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("preemptor=debug")
            .with_test_writer()
            .try_init();
    }
    let _no_swap = SwapLock::acquire().expect("swap lock");
    let swaps = std::fs::read_to_string("/proc/swaps").expect("/proc/swaps");
    if swaps.lines().count() > 1 {
        eprintln!(
            "SKIPPED {test}: this machine has swap, so the kernel would not refuse:\n{swaps}"
        );
        return;
    }
    let Some(docker) = docker_or_skip(test).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-2ag").await;
    let mut config = EmulatorConfig::local(2, Resource::new(4096, 8), RuntimeChoice::Docker);
    config.image = Some(image.tag.clone());
    config.heartbeat_interval = Duration::from_millis(200);
    config.cpu_scale = 0.1;
    config.min_allocation = Resource::new(64, 1);
    let started = Emulator::start(config).await.expect("emulator starts");
    let mut guard = EmulatorGuard {
        docker: docker.clone(),
        instance: started.instance().to_string(),
        handle: Some(started),
    };
    let h = guard.handle.as_ref().expect("emulator running");
    let nodes = h.nodes().to_vec();
    let [refusing, quick] = [&nodes[0], &nodes[1]];
    // Each agent serves only its own NodeManager's containers.
    let agent_a = start_agent_with(WritePath::Docker, Duration::from_secs(30), |c| {
        c.memory_timeout = MEMORY_TIMEOUT;
        c.nodemanager = Some(refusing.url.clone());
    })
    .await;
    let agent_b = start_agent_with(WritePath::Docker, Duration::from_secs(30), |c| {
        c.nodemanager = Some(quick.url.clone());
    })
    .await;
    let controller_state = tempfile::tempdir().expect("controller state dir");
    let loaded = preemptor::config::load_embedded_default().expect("shipped configuration");
    let mut cc =
        ControllerConfig::from_loaded(loaded, None, TOKEN.to_string(), b"api-token".to_vec());
    let s = &mut cc.settings;
    s.rm.addresses = vec![h.rm_url().to_string()];
    s.policy.kind = PolicyKind::Immediate;
    s.policy.monitoring_interval_ms = INTERVAL_MS;
    s.policy.total_preemption_per_round = 1.0;
    s.policy.natural_termination_factor = 1.0;
    s.agent.addresses = vec![
        (refusing.id.to_string(), agent_a.url.clone()),
        (quick.id.to_string(), agent_b.url.clone()),
    ];
    s.agent.lease_timeout_ms = 30_000;
    s.agent.request_timeout_ms = 20_000;
    // Longer than A's memory timeout: A's refusal comes back as the agent's own answer.
    s.agent.action_timeout_ms = 60_000;
    s.controller.state_dir = controller_state.path().to_path_buf();
    let rm = preemptor::yarn::RmClient::new(&s.rm).expect("rm client");

    // The resident job on node 0 only: node 1 is shrunk to nothing while it is placed.
    // It reports progress; the light one (endless) does not, so the light one comes first
    // in victim order and node 1 is not left waiting behind node 0's first refusal.
    let long = |iterations: u64, resident_mb: u64| {
        WorkloadSpec::parse(&format!(
            r#"{{"kernel":"burn","args":["--iterations","{iterations}","--rounds-millions","1","--memory-mb","{resident_mb}"],
                "tasks":3,"memoryMb":1024,"vcores":1}}"#
        ))
        .expect("spec")
    };
    rm.update_node_resource(&quick.id, Resource::new(64, 1), None)
        .await
        .expect("shrink node 1");
    let resident = place_long(h, "hibench-resident", &long(1000, 200), 0).await;
    rm.update_node_resource(&quick.id, Resource::new(4096, 8), None)
        .await
        .expect("restore node 1");
    let light = place_long(h, "hibench-light", &long(0, 4), 1).await;
    let mut originals = BTreeMap::new();
    for id in resident.iter().chain(&light) {
        let dirs = cgroup_dirs(&docker, &id.to_string()).await;
        let original = read_limits(&dirs);
        originals.insert(*id, (dirs, original));
    }
    // The resident tasks touch their memory after their first round of work.
    let t = Instant::now();
    while !resident.iter().all(|id| {
        originals[id]
            .0
            .sample()
            .is_ok_and(|s| s.memory_usage_bytes >= 150 << 20)
    }) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the resident tasks did not touch their 200 MB within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resident_app = resident[0].application();
    wait_until(h, "the resident job's first progress", 60, |s| {
        s.apps
            .get(&resident_app)
            .is_some_and(|a| a.progress() > 0.0)
    })
    .await;

    let controller = start(cc).await.expect("controller starts");
    let mut events = controller.hub().subscribe();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Five 1 GB tasks: more than one node's three long tasks, so both agents get work.
    let short = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","4"],
            "tasks":5,"memoryMb":1024,"vcores":1}"#,
    )
    .expect("spec");
    let app: ApplicationId = submit(
        h.rm_url(),
        "tpch-q9",
        "short",
        &short,
        Resource::new(448, 1),
    )
    .await
    .parse()
    .expect("application id");

    let on_node = |c: &str, ids: &[ContainerId]| ids.iter().any(|id| id.to_string() == c);
    let mut ticks: Vec<TickSummary> = Vec::new();
    let mut quick_applied: Vec<u64> = Vec::new();
    let mut refused: Option<(u64, String)> = None;
    let t0 = Instant::now();
    while refused.is_none() {
        assert!(
            t0.elapsed() < MEMORY_TIMEOUT + Duration::from_secs(40),
            "no suspension on node 0 came back refused; node 1 applied {quick_applied:?}"
        );
        let Ok(Ok(e)) = tokio::time::timeout(Duration::from_secs(1), events.recv()).await else {
            continue;
        };
        match e {
            ControllerEvent::Tick(t) => ticks.push(t),
            ControllerEvent::Action(a) if a.action == "suspend" => {
                let c = a.container.clone().unwrap_or_default();
                match &a.outcome {
                    Outcome::Applied if on_node(&c, &light) => quick_applied.push(a.at_ms),
                    Outcome::Applied => panic!("node 0's memory cut was applied: {a:?}"),
                    Outcome::Failed { reason } if on_node(&c, &resident) => {
                        refused = Some((a.at_ms, reason.clone()))
                    }
                    Outcome::Failed { reason } => panic!("node 1's suspension failed: {reason}"),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let (refused_at, reason) = refused.expect("a refusal");
    assert!(
        reason.contains("device or resource busy") || reason.contains("unable to set memory limit"),
        "the refusal carries the kernel's reason: {reason}"
    );
    let start_ms = |t: &TickSummary| t.at_ms.saturating_sub(t.duration_ms as u64);
    // The tick that sent the refused cut: the last one with actions that ended at least
    // the memory timeout before the refusal came back.
    let timeout_ms = MEMORY_TIMEOUT.as_millis() as u64;
    let sent = ticks
        .iter()
        .rfind(|t| t.actions > 0 && t.at_ms + timeout_ms <= refused_at)
        .unwrap_or_else(|| panic!("no tick sent node 0's cut: {ticks:?}"));
    // Node 1's suspensions sent while node 0's cut was out, each against the start of the
    // last tick with actions before it.
    let concurrent: Vec<u64> = quick_applied
        .iter()
        .filter(|&&x| x >= start_ms(sent) && x < refused_at)
        .map(|&x| {
            let by = ticks
                .iter()
                .rfind(|t| t.actions > 0 && start_ms(t) <= x)
                .expect("the tick that sent it");
            x - start_ms(by)
        })
        .collect();
    let during: Vec<&TickSummary> = ticks
        .iter()
        .filter(|t| t.at_ms > sent.at_ms && t.at_ms < refused_at)
        .collect();
    let slowest = during.iter().map(|t| t.duration_ms).fold(0.0, f64::max);
    let refused_ms = refused_at - start_ms(sent);
    println!(
        "node 0's cut came back refused {refused_ms} ms after the tick that sent it; meanwhile node 1 applied {} suspensions, {concurrent:?} ms after their ticks began; {} ticks, slowest {slowest:.0} ms, most late {}",
        concurrent.len(),
        during.len(),
        during.iter().map(|t| t.late).max().unwrap_or(0)
    );
    assert!(
        !concurrent.is_empty(),
        "node 1 got no suspension while node 0's cut was out (node 1 applied at {quick_applied:?}, node 0 sent by the tick ending {}, refused at {refused_at})",
        sent.at_ms
    );
    assert!(
        concurrent.iter().all(|&ms| ms <= INTERVAL_MS),
        "a suspension on node 1 took more than one tick: {concurrent:?} ms"
    );
    // Ticks went on at their interval while node 0's cut was out.
    assert!(
        during.len() as u64 >= refused_ms / INTERVAL_MS / 2,
        "only {} ticks in {refused_ms} ms",
        during.len()
    );
    assert!(slowest < INTERVAL_MS as f64, "a tick took {slowest} ms");
    assert!(
        during.iter().any(|t| t.late > 0),
        "the ticks reported node 0's cut as late"
    );

    rm.kill_app(&app).await.expect("kill the short job");
    controller.shutdown(false).await.expect("shutdown");
    for (id, (dirs, original)) in &originals {
        let now = read_limits(dirs);
        assert!(
            now.same_enforcement(original),
            "{id} is not back at its original limits: {now:?} vs {original:?}"
        );
    }
    let restored = h.inspect(|s| s.nodes.iter().all(|n| n.total == n.capacity));
    assert!(restored, "advertised capacities are back to physical");
    if let Some(h) = guard.handle.take() {
        h.shutdown().await.expect("emulator shutdown");
    }
    drop((agent_a, agent_b, image));
}

/// Submits a long job of the given spec and waits until its tasks all run on `node`.
async fn place_long(
    h: &EmulatorHandle,
    name: &str,
    spec: &WorkloadSpec,
    node: usize,
) -> Vec<ContainerId> {
    let app: ApplicationId = submit(h.rm_url(), name, "long", spec, Resource::new(1024, 1))
        .await
        .parse()
        .expect("application id");
    let tasks = |s: &preemptor::emulator::state::RmState| -> Vec<(ContainerId, usize, bool)> {
        s.containers
            .values()
            .filter(|c| c.id.application() == app && !c.is_am())
            .map(|c| (c.id, c.node, c.state == RmContainerState::Running))
            .collect()
    };
    wait_until(h, &format!("{name}'s 3 tasks running"), 90, |s| {
        let t = tasks(s);
        t.len() == 3 && t.iter().all(|(_, _, running)| *running)
    })
    .await;
    let placed = h.inspect(tasks);
    assert!(
        placed.iter().all(|(_, n, _)| *n == node),
        "{name}'s tasks are not all on node {node}: {placed:?}"
    );
    placed.into_iter().map(|(id, _, _)| id).collect()
}

/// A short job that always waits: more 1.5 GB tasks than suspending every long task can
/// make room for (two suspensions per task, on one node).
fn wide_short_spec() -> WorkloadSpec {
    WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","4"],
            "tasks":8,"memoryMb":1536,"vcores":1}"#,
    )
    .expect("spec")
}

/// Runs the `preemptor` binary with `args`, nothing taken from the environment.
async fn preemptor_cli(args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args(args)
        .env_remove("PREEMPTOR_CONTROLLER")
        .env_remove("PREEMPTOR_CONF_DIR")
        .kill_on_drop(true)
        .output()
        .await
        .expect("running preemptor");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The operations CLI against a running controller: `preemptor resume CONTAINER` makes a
/// suspended container run again (its cgroup) and the controller never takes it again,
/// though the short job still waits; `resume --all` resumes everything and puts the
/// nodes back at their physical capacity on the RM, and nothing is taken during the
/// hold-off; a wrong token, an unknown container and an unreachable controller are
/// refused with one clear line; `restore-capacities` falls back to the record only when
/// nothing listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_resume_a_container_or_everything_with_the_cli() {
    let test = "operators_resume_a_container_or_everything_with_the_cli";
    let Some(cluster) = long_jobs_fill_the_cluster(test).await else {
        return;
    };
    let t0 = Instant::now();
    let config = cluster.controller_config(30_000);
    let rm = preemptor::yarn::RmClient::new(&config.settings.rm).expect("rm client");
    let controller = start(config).await.expect("controller starts");
    let url = controller.api_url().expect("api on");
    let proxy = controller.proxy_url().expect("proxy on");
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = |name: &str, token: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, token).expect("token file");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
        path.display().to_string()
    };
    let good = token_file("api.token", "api-token\n");
    let bad = token_file("bad.token", "not-it");
    let at = ["--controller", url.as_str(), "--token-file", good.as_str()];

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let short: ApplicationId = submit(
        &proxy,
        "tpch-wide",
        "short",
        &wide_short_spec(),
        Resource::new(448, 1),
    )
    .await
    .parse()
    .expect("application id");
    wait_for_more_throttled(&cluster, 0, Duration::from_secs(20)).await;
    // Two ticks: the policy takes what the short job's demand asks for.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let x = cluster.throttled()[0];
    let xs = x.to_string();
    let waiting = || {
        cluster
            .h()
            .inspect(|s| s.apps.get(&short).is_some_and(|a| !a.pending.is_empty()))
    };
    assert!(waiting(), "the short job asks for more than there is");

    let (ok, out, err) =
        preemptor_cli(&["resume", &xs, "--controller", &url, "--token-file", &bad]).await;
    assert!(!ok, "{out}");
    assert!(err.contains("refused the token (wrong token)"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        cluster.throttled().contains(&x),
        "a refused request changed nothing"
    );

    let unknown = format!("{}_{:06}", &xs[..xs.len() - 7], 99);
    let (ok, _, err) = preemptor_cli(&[&["resume", unknown.as_str()][..], &at[..]].concat()).await;
    assert!(!ok);
    assert!(
        err.contains(&format!("holds no container {unknown}")),
        "{err}"
    );

    let (ok, out, err) = preemptor_cli(&[&["resume", xs.as_str()][..], &at[..]].concat()).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("never taken again"), "{out}");
    let t = Instant::now();
    while cluster.throttled().contains(&x) {
        assert!(t.elapsed() < Duration::from_secs(10), "{x} was not resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (dirs, original) = &cluster.long[&x];
    assert!(
        read_limits(dirs).same_enforcement(original),
        "{x} back at its limits"
    );
    // Five ticks with the short job still waiting: the policy would take it again.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        assert!(!cluster.throttled().contains(&x), "{x} was taken again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(waiting(), "the short job still waits");
    assert!(!cluster.throttled().is_empty(), "the others stay suspended");
    let (ok, out, _) = preemptor_cli(&[&["status"][..], &at[..]].concat()).await;
    assert!(ok);
    assert!(out.contains(&format!("never taken again): {xs}")), "{out}");

    let (ok, _, err) = preemptor_cli(&[
        "resume",
        "--all",
        "--controller",
        "http://127.0.0.1:1",
        "--token-file",
        &good,
    ])
    .await;
    assert!(!ok);
    assert!(
        err.contains("cannot reach the controller at http://127.0.0.1:1"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");

    let (ok, out, err) =
        preemptor_cli(&[&["resume", "--all", "--hold-off", "60s"][..], &at[..]].concat()).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("hold-off until"), "{out}");
    let capacities = || {
        let rm = rm.clone();
        let physical: Vec<_> = cluster
            .h()
            .inspect(|s| s.nodes.iter().map(|n| (n.id.clone(), n.capacity)).collect());
        async move {
            let mut back = true;
            for (node, capacity) in physical {
                let on_rm = rm.node(&node).await.expect("node from the RM");
                back &= on_rm.value.total_resource.to_resource() == capacity;
            }
            back
        }
    };
    let t = Instant::now();
    while !cluster.throttled().is_empty() || !capacities().await {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "not everything went back: {:?}",
            cluster.throttled()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_all_original(&cluster);
    // The hold-off: nothing is taken though the short job still waits.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        assert!(cluster.throttled().is_empty(), "taken during the hold-off");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(waiting());
    assert!(capacities().await);
    let (ok, out, _) = preemptor_cli(&[&["status"][..], &at[..]].concat()).await;
    assert!(ok);
    assert!(
        out.contains("hold-off: nothing new is taken until"),
        "{out}"
    );
    assert!(out.contains("set by `preemptor resume --all`"), "{out}");

    // restore-capacities: through the controller; a wrong token is an error, never the
    // offline path; with nothing listening, the record (empty here).
    let (ok, out, err) =
        preemptor_cli(&[&["restore-capacities", "--hold-off", "30s"][..], &at[..]].concat()).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("hold-off until"), "{out}");
    let conf = tempfile::tempdir().expect("conf dir");
    crate::common::controller_conf_dir(
        conf.path(),
        &[],
        &[(
            "yarn.preemptor.rm.address",
            cluster.h().rm_url().to_string(),
        )],
    );
    let conf_dir = conf.path().display().to_string();
    let (ok, out, err) = preemptor_cli(&[
        "restore-capacities",
        "--controller",
        &url,
        "--token-file",
        &bad,
        "--conf-dir",
        &conf_dir,
    ])
    .await;
    assert!(!ok, "{out}");
    assert!(err.contains("refused the token"), "{err}");
    assert!(!out.contains("offline"), "{out}");
    let (ok, out, err) = preemptor_cli(&[
        "restore-capacities",
        "--controller",
        "http://127.0.0.1:1",
        "--token-file",
        &good,
        "--conf-dir",
        &conf_dir,
    ])
    .await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("no controller answers"), "{out}");
    assert!(out.contains("restoring offline"), "{out}");
    assert!(out.contains("nothing to restore"), "{out}");
    println!(
        "operator commands checked in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    rm.kill_app(&short).await.expect("kill the short job");
    let report = controller.shutdown(false).await.expect("shutdown");
    assert!(report.failed.is_empty(), "{report:?}");
    assert_all_original(&cluster);
    stop(cluster).await;
}
