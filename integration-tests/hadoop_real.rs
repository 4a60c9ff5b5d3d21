//! Against a real Apache Hadoop YARN started by `deploy/hadoop/cluster.sh`: its
//! ResourceManager and NodeManager JVMs, real MapReduce jobs submitted over RPC with
//! `hadoop jar`, the RM's node resource update, and the agent's `process` backend on the
//! NodeManager's real containers.
//!
//! Without Java or Maven the tests print why and pass outside CI; under `CI=true` they
//! fail. Every cluster gets its own work directory and ports, and `cluster.sh down` runs
//! when the guard drops, even on failure.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use preemptor::agent::{AgentClient, AgentConfig, ContainerBackend};
use preemptor::cluster::{ContainerState, NodeId};
use preemptor::config::queues::QueueTree;
use preemptor::config::settings::PreemptorSettings;
use preemptor::controller::controller::{ControllerConfig, start};
use preemptor::resources::{Limits, Resource};
use preemptor::yarn::RmClient;
use preemptor::yarn::dto::{
    AppInfo, ApplicationSubmissionContext, Commands, ContainerLaunchContext, ResourceInfo,
};
use serde_json::Value;

use crate::hadoop_support::{Hadoop, hadoop_tools_or_skip};

pub(crate) const SHIPPED_QUEUES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/hadoop-conf/capacity-scheduler.xml"
);

/// Queue names unlike the shipped file's (`short`, `long`), DRF so vcores count.
pub(crate) const RM_QUEUES: &str = r#"<?xml version="1.0"?>
<configuration>
  <property><name>yarn.scheduler.capacity.resource-calculator</name>
    <value>org.apache.hadoop.yarn.util.resource.DominantResourceCalculator</value></property>
  <property><name>yarn.scheduler.capacity.maximum-am-resource-percent</name><value>1.0</value></property>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>interactive,batch</value></property>
  <property><name>yarn.scheduler.capacity.root.interactive.capacity</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.interactive.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.batch.capacity</name><value>60</value></property>
  <property><name>yarn.scheduler.capacity.root.batch.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.batch.user-limit-factor</name><value>10</value></property>
</configuration>
"#;

/// A cluster in a temporary directory of its own, with `capacity_scheduler` as its
/// queues; brought down, then the directory removed, when dropped.
pub(crate) struct Cluster {
    pub(crate) h: Hadoop,
    dir: tempfile::TempDir,
}

impl Cluster {
    pub(crate) fn up(test: &str, capacity_scheduler: &str, args: &[&str]) -> Option<Cluster> {
        if !hadoop_tools_or_skip(test) {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("preemptor-hadoop-test-")
            .tempdir()
            .expect("temp dir");
        let conf = dir.path().join("conf-in");
        std::fs::create_dir(&conf).expect("conf dir");
        std::fs::write(conf.join("capacity-scheduler.xml"), capacity_scheduler)
            .expect("capacity-scheduler.xml");
        let conf = conf.to_string_lossy().into_owned();
        let mut all = vec!["--conf-dir", conf.as_str()];
        all.extend_from_slice(args);
        let h = Hadoop::up(dir.path().join("work"), &all);
        Some(Cluster { h, dir })
    }

    /// One NodeManager of 8192 MB and `vcores`.
    fn one_node(test: &str, vcores: &str) -> Option<Cluster> {
        Cluster::one_node_with(test, RM_QUEUES, vcores)
    }

    fn one_node_with(test: &str, queues: &str, vcores: &str) -> Option<Cluster> {
        Cluster::up(
            test,
            queues,
            &[
                "--nodes",
                "1",
                "--node-memory-mb",
                "8192",
                "--node-vcores",
                vcores,
            ],
        )
    }

    /// An agent with the `process` backend on the (only) NodeManager, its cgroups
    /// under `parent`.
    fn process_agent(&self, state: &Path, parent: &str) -> AgentConfig {
        let mut config = AgentConfig::new(
            crate::agent_support::TOKEN.as_bytes().to_vec(),
            state.to_path_buf(),
        );
        config.listen = "127.0.0.1:0".parse().expect("addr");
        config.containers = ContainerBackend::Process;
        config.nodemanager = Some(self.h.nm_webapps[0].clone());
        config.nm_local_dirs = vec![self.h.nm_local_dir(1)];
        config.agent_cgroup_parent = parent.to_string();
        config
    }

    /// `hadoop` running SleepJob in `queue`: `maps` maps of `map_ms`, no reduce, its
    /// output in `log`. `hadoop jar` of the tests jar fails (its driver needs classes of
    /// another tests jar), so SleepJob goes by class name (docs/hadoop-local.md).
    fn sleep_job(
        &self,
        queue: &str,
        maps: &str,
        map_ms: &str,
        log: &Path,
    ) -> std::process::Command {
        let out = std::fs::File::create(log).expect("job log");
        let mut c = self.h.tool(
            "hadoop",
            &[
                "org.apache.hadoop.mapreduce.SleepJob",
                &format!("-Dmapreduce.job.queuename={queue}"),
                "-m",
                maps,
                "-r",
                "0",
                "-mt",
                map_ms,
            ],
        );
        c.env("HADOOP_CLASSPATH", &self.h.tests_jar)
            .stdout(out.try_clone().expect("log"))
            .stderr(out);
        c
    }

    fn client(&self) -> RmClient {
        let mut s = PreemptorSettings::default().rm;
        s.addresses = vec![self.h.rm.clone()];
        s.user_name = Some("preemptor".into());
        RmClient::new(&s).expect("RM client")
    }
}

/// Processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

async fn get_json(url: &str, token: Option<&str>) -> Value {
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("HTTP client");
    let mut req = http.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
    resp.json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The controller's status once it has read the RM's queues.
pub(crate) async fn status_with_queues(status_url: &str) -> Value {
    wait_for("a status with queues", Duration::from_secs(30), || async {
        let s = get_json(status_url, Some("api-token")).await;
        (s["rmReachable"] == true && s["queues"].as_array().is_some_and(|q| !q.is_empty()))
            .then_some(s)
    })
    .await
}

/// The queue paths of a controller status, in order.
pub(crate) fn queue_paths(status: &Value) -> Vec<&str> {
    status["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter_map(|q| q["path"].as_str())
        .collect()
}

/// A runtime as the agent and controller binaries run theirs.
fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A free loopback port nobody listens on: the agents the controller would call.
pub(crate) fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Percentile by nearest rank.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[test]
fn cluster_sh_up_down_leaves_no_jvm_and_a_second_up_gets_past_a_taken_port() {
    let test = "cluster_sh_up_down_leaves_no_jvm_and_a_second_up_gets_past_a_taken_port";
    let Some(c) = Cluster::up(test, RM_QUEUES, &["--nodes", "2"]) else {
        return;
    };
    let status = c.h.tool("status", &[]).output().expect("cluster.sh status");
    assert!(status.status.success(), "status: {status:?}");
    let down = c.h.down().expect("run cluster.sh down");
    assert!(down.status.success(), "down: {down:?}");
    let left = processes_naming(&c.h.work);
    assert!(left.is_empty(), "left behind after down: {left:?}");

    // The second up's first port is taken between its pick and the RM's bind, as when
    // another cluster starts at the same moment: up must pick new ports and go on.
    let conf = c.dir.path().join("conf-in").to_string_lossy().into_owned();
    let taken = closed_port();
    let yarn_site = c.h.work.join("conf").join("yarn-site.xml");
    let _ = std::fs::remove_file(&yarn_site);
    let (holding, stop) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let holder = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !yarn_site.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let listener = std::net::TcpListener::bind(("127.0.0.1", taken));
        let _ = holding.0.send(listener.is_ok());
        let _ = stop.1.recv();
    });
    let base = taken.to_string();
    let out =
        c.h.up_again(&["--conf-dir", &conf, "--nodes", "2", "--base-port", &base]);
    let _ = stop.0.send(());
    let _ = holder.join();
    assert_eq!(
        holding.1.try_recv(),
        Ok(true),
        "the test could not take port {taken} after the pick"
    );
    assert!(
        c.h.work.join("logs.port-taken").is_dir(),
        "up did not start again after port {taken} was taken"
    );
    let env = std::fs::read_to_string(c.h.work.join("cluster.env")).expect("cluster.env");
    assert!(
        !env.contains(&format!("RM_PORT={taken}\n")),
        "the RM kept the taken port: {env}"
    );
    let rm = out
        .lines()
        .find_map(|l| l.strip_prefix("RM_WEBAPP="))
        .map(|v| v.trim().trim_matches(['\'', '"']).to_string())
        .unwrap_or_else(|| panic!("second up printed no RM_WEBAPP: {out}"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let nodes = rt.block_on(get_json(&format!("{rm}/ws/v1/cluster/nodes"), None));
    let running = nodes["nodes"]["node"]
        .as_array()
        .map_or(0, |l| l.iter().filter(|n| n["state"] == "RUNNING").count());
    assert_eq!(running, 2, "{nodes}");
}

/// The controller, observe-only, pointed at an RM whose queues differ from its copy of
/// capacity-scheduler.xml, shows the RM's queues and sees `hadoop jar` submissions
/// within 1 s of their `startedTime`.
#[test]
fn the_controller_follows_the_real_rm_queues_and_rpc_submissions() {
    let test = "the_controller_follows_the_real_rm_queues_and_rpc_submissions";
    let Some(c) = Cluster::one_node(test, "4") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut conf = preemptor::config::xml::Configuration::new();
        conf.add_file(SHIPPED_QUEUES).expect("shipped file");
        let file = QueueTree::from_conf(&conf).expect("shipped queues");
        let mut settings = PreemptorSettings::default();
        settings.rm.addresses = vec![c.h.rm.clone()];
        settings.policy.observe_only = true;
        settings.agent.port = closed_port();
        let state = tempfile::tempdir().expect("controller state dir");
        settings.controller.state_dir = state.path().to_path_buf();
        let config = ControllerConfig {
            settings,
            queues: file,
            conf_dir: None,
            agent_token: "agent-token".into(),
            api_token: b"api-token".to_vec(),
            api_listen: Some("127.0.0.1:0".parse().expect("addr")),
            proxy_listen: None,
            actuator: None,
        };
        let controller = start(config).await.expect("controller starts");
        let api = controller.api_url().expect("api url");
        let status_url = format!("{api}/api/v1/status");

        let status = status_with_queues(&status_url).await;
        assert_eq!(
            queue_paths(&status),
            ["root", "root.interactive", "root.batch"],
            "{status}"
        );
        assert_eq!(status["queueSource"], "resource-manager");
        let disagreements = status["queueDisagreements"].to_string();
        for q in ["root.short", "root.long", "root.interactive", "root.batch"] {
            assert!(disagreements.contains(q), "{q} not named: {disagreements}");
        }
        let batch = &status["queues"][2];
        assert_eq!(batch["guaranteed"]["memoryMb"], 8192 * 60 / 100, "{batch}");

        // Ten real MapReduce jobs over RPC; each is killed once it was seen.
        let rm = c.client();
        let mut lags = Vec::new();
        let mut known: Vec<String> = Vec::new();
        for _ in 0..10 {
            let mut job =
                c.h.tool(
                    "hadoop",
                    &[
                        "jar",
                        &c.h.examples_jar,
                        "pi",
                        "-Dmapreduce.job.queuename=batch",
                        "1",
                        "10",
                    ],
                )
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("hadoop jar");
            // pi names its job itself: the application the RM did not list before.
            let app: AppInfo = wait_for("the job on the RM", Duration::from_secs(60), || async {
                let apps = rm.apps(&Default::default()).await.ok()?.value;
                apps.into_iter().find(|a| !known.contains(&a.id))
            })
            .await;
            known.push(app.id.clone());
            let row = wait_for("the job in the status", Duration::from_secs(10), || async {
                let s = get_json(&status_url, Some("api-token")).await;
                s["applications"]
                    .as_array()?
                    .iter()
                    .find(|a| a["id"] == app.id.as_str())
                    .cloned()
            })
            .await;
            let seen = row["seenAtMs"].as_u64().expect("seenAtMs");
            let started = u64::try_from(app.started_time).expect("startedTime");
            assert_eq!(row["queue"], "root.batch", "{row}");
            assert_eq!(row["startedTimeMs"].as_u64(), Some(started), "{row}");
            lags.push(seen.saturating_sub(started));
            let id = app.id.parse().expect("application id");
            rm.kill_app(&id).await.expect("kill the job");
            let _ = job.kill();
            let _ = job.wait();
        }
        let mut sorted = lags.clone();
        sorted.sort_unstable();
        eprintln!(
            "RPC submission to /api/v1/status, ms: {lags:?}; p50 {} p95 {}",
            percentile(&sorted, 50.0),
            percentile(&sorted, 95.0)
        );
        assert!(
            sorted.iter().all(|&l| l <= 1_000),
            "a submission was seen later than 1 s after its startedTime: {lags:?}"
        );
        controller.shutdown(true).await.expect("controller stops");
    });
}

/// Raising a node by 2 vcores lets the real capacity scheduler place a waiting
/// short-queue container there; restoring the node gives back its configured size.
#[test]
fn a_raised_node_takes_a_waiting_container_and_is_restored_exactly() {
    let test = "a_raised_node_takes_a_waiting_container_and_is_restored_exactly";
    let Some(c) = Cluster::one_node(test, "2") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let rm = c.client();
        let node = rm.nodes().await.expect("nodes").value.remove(0);
        let id = NodeId::new(node.id.trim());
        let configured = node.total_resource.to_resource();
        assert_eq!(configured, Resource::new(8192, 2), "{node:?}");

        // A plain application whose AM holds both vcores, then a short one that waits.
        let long = submit_sleeper(&rm, "batch", "preemptor-fill", 1024, 2).await;
        wait_for("the long AM allocated", Duration::from_secs(60), || async {
            let a = rm.app(&long).await.ok()?.value;
            (a.allocated_vcores >= 2).then_some(())
        })
        .await;
        let short = submit_sleeper(&rm, "interactive", "preemptor-short", 1024, 1).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let waiting = rm.app(&short).await.expect("short app").value;
        assert_eq!(waiting.allocated_vcores, 0, "{waiting:?}");

        let raised = Resource::new(8192, 4);
        rm.update_node_resource(&id, raised, None)
            .await
            .expect("node resource update");
        let placed_after = Instant::now();
        // The RM applies the update through its event dispatcher: its answer may still
        // show the old resource (seen in CI: 8192 MB, 2 vcores), its node listing soon
        // shows the new one.
        wait_for("the node raised", Duration::from_secs(10), || async {
            let n = rm.node(&id).await.ok()?.value;
            (n.total_resource.to_resource() == raised).then_some(())
        })
        .await;
        wait_for("the short AM placed", Duration::from_secs(30), || async {
            let a = rm.app(&short).await.ok()?.value;
            (a.allocated_vcores >= 1).then_some(())
        })
        .await;
        eprintln!(
            "short container placed {:.2} s after the raise",
            placed_after.elapsed().as_secs_f64()
        );

        rm.update_node_resource(&id, configured, None)
            .await
            .expect("restore");
        let now = wait_for(
            "the node back to its size",
            Duration::from_secs(10),
            || async {
                let n = rm.node(&id).await.ok()?.value;
                (n.total_resource.to_resource() == configured).then_some(n)
            },
        )
        .await;
        assert_eq!(now.total_resource.to_resource(), configured);
        // With no over-commit timeout (-1) the RM keeps the over-committed containers.
        tokio::time::sleep(Duration::from_secs(3)).await;
        for app in [long, short] {
            let a = rm.app(&app).await.expect("app").value;
            assert!(!a.state.is_final(), "{app} ended: {a:?}");
            rm.kill_app(&app).await.expect("kill");
        }
    });
}

/// Submits over REST an application whose AM only sleeps: it never registers, so it
/// stays ACCEPTED while holding its container.
async fn submit_sleeper(
    rm: &RmClient,
    queue: &str,
    name: &str,
    memory: i64,
    vcores: i64,
) -> preemptor::cluster::ApplicationId {
    let new = rm.new_application().await.expect("new application");
    let context = ApplicationSubmissionContext {
        application_id: new.application_id.clone(),
        application_name: name.into(),
        queue: queue.into(),
        am_container_spec: ContainerLaunchContext {
            commands: Commands {
                command: vec!["sleep 600".into()],
            },
            ..Default::default()
        },
        max_app_attempts: 1,
        resource: ResourceInfo { memory, vcores },
        application_type: "YARN".into(),
        ..Default::default()
    };
    rm.submit_application(&context).await.expect("submit")
}

/// The agent in `process` mode suspends a real MapReduce map task (its YarnChild JVM,
/// found from the NodeManager's pid file) to 1% of a core, resumes it, and the job still
/// succeeds with no failed attempt; the agent's cgroup goes when the container ends.
#[test]
fn the_process_backend_suspends_a_real_map_task_that_then_succeeds() {
    let test = "the_process_backend_suspends_a_real_map_task_that_then_succeeds";
    let Some(mounts) = crate::agent_host::cgroups_or_skip(test) else {
        return;
    };
    let Some(c) = Cluster::one_node(test, "4") else {
        return;
    };
    let parent = format!("/preemptor-hadoop-test-{}", std::process::id());
    let _cgroups = crate::agent_host::CgroupTreeGuard::new(&mounts, &parent);
    let rt = two_threads();
    rt.block_on(async {
        let state = tempfile::tempdir().expect("state dir");
        let config = c.process_agent(state.path(), &parent);
        let agent = preemptor::agent::start(config).await.expect("agent starts");
        let client = AgentClient::new(
            &agent.url(),
            crate::agent_support::TOKEN,
            Duration::from_secs(60),
        )
        .expect("client");

        let log = c.dir.path().join("sleepjob.log");
        let mut job = c
            .sleep_job("batch", "1", "20000", &log)
            .spawn()
            .expect("hadoop SleepJob");

        // The map task: a running container that is not the AM, whose JVM is up.
        let nm = c.h.nm_webapps[0].clone();
        let map = wait_for("a running map task", Duration::from_secs(120), || {
            let (nm, client) = (nm.clone(), client.clone());
            async move {
                let listing = get_json(&format!("{nm}/ws/v1/node/containers"), None).await;
                let ids: Vec<String> = listing["containers"]["container"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["state"] == "RUNNING")
                    .filter_map(|c| c["id"].as_str().map(str::to_string))
                    .filter(|id| !id.ends_with("_000001"))
                    .collect();
                for id in ids {
                    // The JVM itself, not only its launch script: once suspended, the
                    // script runs at 1% of a core and may take long to exec into it.
                    let jvm = processes_naming(Path::new(&id))
                        .iter()
                        .any(|p| p.contains("YarnChild"));
                    if jvm && client.container(&id).await.is_ok_and(|s| s.running) {
                        return Some(id);
                    }
                }
                None
            }
        })
        .await;
        client
            .renew_lease("test", Some(Duration::from_secs(120)))
            .await
            .expect("lease");
        let r = client
            .suspend(&map, Resource::new(1024, 1), Limits::new(1024, 10))
            .await
            .unwrap_or_else(|e| panic!("suspend {map}: {e}"));
        assert_eq!(r.state, ContainerState::Suspended);
        let dirs = mounts.dirs_at(&format!("{parent}/{map}")).expect("dirs");
        assert_eq!(
            dirs.read_limits().expect("limits").cpu_quota_us,
            Some(1_000)
        );
        let procs = std::fs::read_to_string(dirs.cpu.join("cgroup.procs")).expect("procs");
        let jvm = procs
            .lines()
            .filter_map(|p| p.trim().parse::<u32>().ok())
            .find(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("YarnChild"))
            });
        assert!(
            jvm.is_some(),
            "the YarnChild JVM is not in {}: {procs}",
            dirs.cpu.display()
        );
        let u0 = dirs.cpu_usage_ns().expect("usage");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let used = dirs.cpu_usage_ns().expect("usage").saturating_sub(u0);
        eprintln!(
            "suspended map task used {:.1} ms of CPU in 10 s",
            used as f64 / 1e6
        );
        assert!(used < 500_000_000, "used {used} ns in 10 s at 1% of a core");
        client.resume(&map).await.expect("resume");
        assert_eq!(dirs.read_limits().expect("limits").cpu_quota_us, None);

        let status = tokio::task::spawn_blocking(move || job.wait())
            .await
            .expect("join")
            .expect("wait for hadoop jar");
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(status.success(), "SleepJob failed: {output}");
        assert!(
            !output.contains("Failed map tasks=") && !output.contains("Killed map tasks="),
            "attempts failed or were killed: {output}"
        );
        wait_for(
            "the ended map's cgroup removed",
            Duration::from_secs(30),
            || {
                let d = dirs.cpu.clone();
                async move { (!d.exists()).then_some(()) }
            },
        )
        .await;
        agent.shutdown().await;
    });
}

/// RM_QUEUES with Preemptor's classes: `interactive` short, `batch` long.
fn classed_queues() -> String {
    RM_QUEUES.replace(
        "</configuration>",
        "  <property><name>yarn.scheduler.capacity.root.interactive.preemptor.job-class</name><value>short</value></property>\n  <property><name>yarn.scheduler.capacity.root.batch.preemptor.job-class</name><value>long</value></property>\n</configuration>",
    )
}

/// A client process (`hadoop jar`), killed and reaped however the test ends.
struct Reaped(std::process::Child);

impl Reaped {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A `preemptor controller` process, SIGKILLed and reaped however the test ends.
pub(crate) struct ControllerProcess(pub(crate) std::process::Child);

impl ControllerProcess {
    pub(crate) fn spawn(conf: &Path, log: &Path) -> ControllerProcess {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("controller log");
        ControllerProcess(
            std::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
                .args(["controller", "--conf-dir"])
                .arg(conf)
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("spawning preemptor controller"),
        )
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The controller binary on the real RM, with the agent's `process` backend on the real
/// NodeManager: SIGKILLed while a map task is suspended and the node raised, then
/// started again. Its first tick puts every container and the node's capacity back,
/// read from the cgroup files and from the RM.
#[test]
fn a_controller_killed_on_the_real_rm_restores_containers_and_capacity_on_restart() {
    let test = "a_controller_killed_on_the_real_rm_restores_containers_and_capacity_on_restart";
    let Some(mounts) = crate::agent_host::cgroups_or_skip(test) else {
        return;
    };
    let Some(c) = Cluster::one_node_with(test, &classed_queues(), "4") else {
        return;
    };
    let parent = format!("/preemptor-hadoop-restart-{}", std::process::id());
    let _cgroups = crate::agent_host::CgroupTreeGuard::new(&mounts, &parent);
    let rt = two_threads();
    rt.block_on(async {
        let rm = c.client();
        let node = wait_for("the NodeManager", Duration::from_secs(60), || async {
            let nodes = rm.nodes().await.ok()?.value;
            nodes.into_iter().find(|n| n.state == "RUNNING")
        })
        .await;
        let configured = node.total_resource.to_resource();
        let node_id = NodeId::new(node.id.trim());
        let advertised = || async {
            rm.node(&node_id)
                .await
                .map(|n| n.value.total_resource.to_resource())
                .ok()
        };

        // The agent holds what it changed for two minutes without a controller.
        let state = tempfile::tempdir().expect("agent state dir");
        let mut config = c.process_agent(state.path(), &parent);
        config.lease_timeout = Duration::from_secs(120);
        let agent = preemptor::agent::start(config).await.expect("agent starts");
        let client = AgentClient::new(
            &agent.url(),
            crate::agent_support::TOKEN,
            Duration::from_secs(60),
        )
        .expect("client");

        let conf = c.dir.path().join("controller-conf");
        std::fs::create_dir(&conf).expect("controller conf dir");
        crate::common::controller_conf_dir(
            &conf,
            &[
                ("agent.token", crate::agent_support::TOKEN),
                ("api.token", "api-token"),
            ],
            &[
                ("yarn.preemptor.rm.address", c.h.rm.clone()),
                ("yarn.preemptor.rm.user-name", "preemptor".into()),
                ("yarn.preemptor.policy", "immediate".into()),
                ("yarn.preemptor.monitoring-interval-ms", "1000".into()),
                ("yarn.preemptor.total-preemption-per-round", "1.0".into()),
                ("yarn.preemptor.natural-termination-factor", "1.0".into()),
                // No swap here: a memory cut under use is refused, so CPU only.
                ("yarn.preemptor.suspend.footprint-memory-mb", "1024".into()),
                (
                    "yarn.preemptor.agent.addresses",
                    format!("{}={}", node_id, agent.url()),
                ),
                (
                    "yarn.preemptor.agent.token-file",
                    conf.join("agent.token").display().to_string(),
                ),
                ("yarn.preemptor.agent.lease-timeout-ms", "120000".into()),
                ("yarn.preemptor.controller.listen", "127.0.0.1:0".into()),
                (
                    "yarn.preemptor.controller.token-file",
                    conf.join("api.token").display().to_string(),
                ),
            ],
        );
        std::fs::copy(
            c.dir.path().join("conf-in").join("capacity-scheduler.xml"),
            conf.join("capacity-scheduler.xml"),
        )
        .expect("the RM's queues for the controller");
        let log = c.dir.path().join("controller.log");
        let mut controller = ControllerProcess::spawn(&conf, &log);

        // Three long maps and their AM take the node's four vcores (DRF).
        let sleep_job = |queue: &str, maps: &str, name: &str| {
            c.sleep_job(queue, maps, "600000", &c.dir.path().join(format!("{name}.log")))
                .spawn()
                .map(Reaped)
                .expect("hadoop SleepJob")
        };
        let mut long = sleep_job("batch", "3", "long");
        let apps_in = |queue: &'static str| {
            let rm = rm.clone();
            async move {
                let apps = rm.apps(&Default::default()).await.ok()?.value;
                apps.into_iter().find(|a| {
                    a.queue.ends_with(queue) && matches!(a.state.name(), "RUNNING" | "ACCEPTED")
                })
            }
        };
        wait_for("three running maps", Duration::from_secs(180), || {
            let client = client.clone();
            async move {
                let running = client.containers().await.ok()?;
                (running.iter().filter(|s| s.running).count() >= 4).then_some(())
            }
        })
        .await;
        let mut short = sleep_job("interactive", "1", "short");
        let suspended = wait_for(
            "a suspended map and the node raised",
            Duration::from_secs(120),
            || {
                let client = client.clone();
                let advertised = advertised();
                async move {
                    let s: Vec<String> = client
                        .containers()
                        .await
                        .ok()?
                        .into_iter()
                        .filter(|s| s.changed && s.running)
                        .map(|s| s.container.to_string())
                        .collect();
                    let raised = advertised.await? != configured;
                    (!s.is_empty() && raised).then_some(s)
                }
            },
        )
        .await;

        controller.kill();
        let short_app = apps_in("interactive").await.expect("the short job runs");
        let short_id = short_app.id.parse().expect("application id");
        rm.kill_app(&short_id).await.expect("kill the short job");
        short.stop();
        // The agent's lease holds: still suspended, and the RM still raised.
        for id in &suspended {
            let dirs = mounts.dirs_at(&format!("{parent}/{id}")).expect("dirs");
            assert_eq!(
                dirs.read_limits().expect("limits").cpu_quota_us,
                Some(1_000),
                "{id}"
            );
        }
        assert_ne!(advertised().await, Some(configured), "nothing left raised");

        let restarted = Instant::now();
        let _controller = ControllerProcess::spawn(&conf, &log);
        wait_for(
            "every container and the node's capacity back",
            Duration::from_secs(30),
            || {
                let advertised = advertised();
                let throttled: Vec<&String> = suspended
                    .iter()
                    .filter(|id| {
                        mounts
                            .dirs_at(&format!("{parent}/{id}"))
                            .ok()
                            .and_then(|d| d.read_limits().ok())
                            .is_some_and(|l| l.cpu_quota_us.is_some())
                    })
                    .collect();
                let none = throttled.is_empty();
                async move { (none && advertised.await == Some(configured)).then_some(()) }
            },
        )
        .await;
        let took = restarted.elapsed();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        eprintln!(
            "restarted controller: {} container(s) resumed and the node back at {configured} in {} ms from the process start",
            suspended.len(),
            took.as_millis()
        );
        assert!(
            text.contains("controller restarted: what an earlier run changed"),
            "the restart's resumes are logged:\n{text}"
        );
        // The first tick runs at once; one monitoring interval (1 s) of slack for the
        // JVM-loaded machine, plus the process start.
        assert!(took < Duration::from_secs(3), "took {took:?}:\n{text}");

        let long_app = apps_in("batch").await.expect("the long job runs");
        rm.kill_app(&long_app.id.parse().expect("application id"))
            .await
            .expect("kill the long job");
        long.stop();
        agent.shutdown().await;
    });
}

/// Dice's short partition as docs/policies.md configures it: the short queue may
/// access every label, has the whole of `short`, and asks for it by default.
pub(crate) const DICE_QUEUES: &str = r#"<?xml version="1.0"?>
<configuration>
  <property><name>yarn.scheduler.capacity.resource-calculator</name>
    <value>org.apache.hadoop.yarn.util.resource.DominantResourceCalculator</value></property>
  <property><name>yarn.scheduler.capacity.maximum-am-resource-percent</name><value>1.0</value></property>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>short,long</value></property>
  <property><name>yarn.scheduler.capacity.root.accessible-node-labels.short.capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.short.capacity</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.short.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.short.preemptor.job-class</name><value>short</value></property>
  <property><name>yarn.scheduler.capacity.root.short.accessible-node-labels</name><value>*</value></property>
  <property><name>yarn.scheduler.capacity.root.short.accessible-node-labels.short.capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.short.default-node-label-expression</name><value>short</value></property>
  <property><name>yarn.scheduler.capacity.root.long.capacity</name><value>60</value></property>
  <property><name>yarn.scheduler.capacity.root.long.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.long.preemptor.job-class</name><value>long</value></property>
</configuration>
"#;

/// Node labels as the RM lists them: each labelled node's id with its labels.
async fn labelled_nodes(rm: &RmClient) -> Vec<(String, Vec<String>)> {
    let nodes = rm.nodes().await.expect("nodes").value;
    nodes
        .into_iter()
        .filter(|n| !n.node_labels.is_empty())
        .map(|n| (n.id, n.node_labels))
        .collect()
}

/// Dice on the real RM with node labels on: the controller adds the label `short` and
/// puts one node in it; a SleepJob sent to the short queue over RPC runs its AM on that
/// node; on shutdown the label is gone from the RM and no node carries it.
#[test]
fn dice_makes_its_node_label_on_the_real_rm_and_removes_it_on_shutdown() {
    let test = "dice_makes_its_node_label_on_the_real_rm_and_removes_it_on_shutdown";
    let args = [
        "--nodes",
        "2",
        "--node-memory-mb",
        "4096",
        "--node-vcores",
        "4",
        "--set",
        "yarn.node-labels.enabled=true",
        "--set",
        "yarn.node-labels.configuration-type=centralized",
    ];
    let Some(c) = Cluster::up(test, DICE_QUEUES, &args) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let rm = c.client();
        let labels = rm.node_labels().await.expect("node labels").value;
        assert!(labels.is_empty(), "a fresh RM has no labels: {labels:?}");

        let mut conf = preemptor::config::xml::Configuration::new();
        let file = c.dir.path().join("conf-in").join("capacity-scheduler.xml");
        conf.add_file(&file).expect("the test's queues");
        let queues = QueueTree::from_conf(&conf).expect("queues");
        let mut settings = PreemptorSettings::default();
        settings.rm.addresses = vec![c.h.rm.clone()];
        settings.rm.user_name = Some("preemptor".into());
        settings.policy.kind = preemptor::cluster::PolicyKind::Dice;
        settings.policy.monitoring_interval_ms = 1000;
        // No agent answers: partitions go to the RM alone.
        settings.agent.port = closed_port();
        let state = tempfile::tempdir().expect("controller state dir");
        settings.controller.state_dir = state.path().to_path_buf();
        let controller = start(ControllerConfig {
            settings,
            queues,
            conf_dir: None,
            agent_token: "agent-token".into(),
            api_token: b"api-token".to_vec(),
            api_listen: None,
            proxy_listen: None,
            actuator: None,
        })
        .await
        .expect("controller starts");

        // The label comes first; a node joins the partition once short work comes.
        let names: Vec<String> = wait_for("the label on the RM", Duration::from_secs(30), || {
            let rm = rm.clone();
            async move {
                let labels = rm.node_labels().await.ok()?.value;
                (!labels.is_empty()).then_some(labels)
            }
        })
        .await
        .into_iter()
        .map(|l| {
            assert!(l.exclusivity, "{l:?}");
            l.name
        })
        .collect();
        assert_eq!(names, ["short"]);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            labelled_nodes(&rm).await.is_empty(),
            "no node is labelled before a short job comes"
        );

        // A YarnClient leaves the label unset: the queue's default puts the AM there.
        let known: Vec<String> = rm
            .apps(&Default::default())
            .await
            .expect("apps")
            .value
            .into_iter()
            .map(|a| a.id)
            .collect();
        let log = c.dir.path().join("dice-sleepjob.log");
        let mut job = c
            .sleep_job("short", "1", "60000", &log)
            .spawn()
            .expect("hadoop SleepJob");
        let labelled = wait_for(
            "one node in the short partition",
            Duration::from_secs(90),
            || {
                let rm = rm.clone();
                async move {
                    let l = labelled_nodes(&rm).await;
                    (l.len() == 1).then_some(l)
                }
            },
        )
        .await;
        assert_eq!(labelled[0].1, ["short"], "{labelled:?}");
        let short_node = rm
            .node(&NodeId::new(&labelled[0].0))
            .await
            .expect("the labelled node")
            .value;
        let app: AppInfo = wait_for("the short AM placed", Duration::from_secs(90), || async {
            let apps = rm.apps(&Default::default()).await.ok()?.value;
            apps.into_iter()
                .find(|a| !known.contains(&a.id) && !a.am_host_http_address.is_empty())
        })
        .await;
        assert_eq!(app.am_node_label_expression, "short", "{app:?}");
        assert_eq!(
            app.am_host_http_address, short_node.node_http_address,
            "the short AM is not on the labelled node"
        );
        let id = app.id.parse().expect("application id");
        rm.kill_app(&id).await.expect("kill the job");
        let _ = job.kill();
        let _ = job.wait();

        let report = controller.shutdown(false).await.expect("controller stops");
        crate::dice_live::assert_no_partition_failures(&report);
        let labels = rm.node_labels().await.expect("node labels").value;
        assert!(
            labels.is_empty(),
            "the label outlived the controller: {labels:?}"
        );
        assert!(labelled_nodes(&rm).await.is_empty());
        assert!(
            !state.path().join("short-label-added").exists(),
            "the ownership marker is gone with the label"
        );
    });
}
