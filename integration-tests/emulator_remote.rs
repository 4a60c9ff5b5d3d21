//! The RM and its NodeManagers as separate processes: `preemptor nodemanager` children
//! run the task containers in Docker, the in-process RM launches and follows them over
//! HTTP, survives a frozen NodeManager, and says so when the NodeManager refuses its token.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bollard::Docker;
use preemptor::cluster::{ApplicationId, ContainerId, NodeId};
use preemptor::emulator::docker::{NODE_ID_LABEL, remove_instance_containers};
use preemptor::emulator::nodemanager::{NodeManager, NodeManagerConfig};
use preemptor::emulator::runtime::RuntimeKind;
use preemptor::emulator::state::{RmContainerState, RmState, exit};
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{
    Emulator, EmulatorConfig, EmulatorHandle, RemoteNodeManagers, RuntimeChoice,
};
use preemptor::resources::Resource;

use crate::common::{TestImage, block_on_cleanup, docker_or_skip, unique_name};
use crate::emulator_support::{EmulatorGuard, get_json, instance_containers, submit, wait_until};

const CPU_SCALE: f64 = 0.1;

/// A port free at the time of asking, so that a NodeManager's node id can be its address.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A 0600 token file in `dir`.
fn token_file(dir: &Path, name: &str, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, token).expect("write token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

/// A `preemptor nodemanager` child. Dropped, it gets SIGTERM (so that it removes its
/// containers), SIGKILL if it has not exited 30 s later, and then every container still
/// carrying its instance label is removed.
struct NmProcess {
    child: Option<Child>,
    node: NodeId,
    url: String,
    instance: String,
    docker: Docker,
}

impl NmProcess {
    fn spawn(docker: &Docker, token: &Path, image: &str) -> NmProcess {
        let port = free_port();
        let node = NodeId::new(format!("127.0.0.1:{port}"));
        let instance = unique_name("nm");
        let mut child = Command::new(env!("CARGO_BIN_EXE_preemptor"))
            .args(["nodemanager", "--listen", node.as_str(), "--node-id"])
            .arg(node.as_str())
            .args([
                "--memory-mb",
                "4096",
                "--vcores",
                "4",
                "--runtime",
                "docker",
            ])
            .arg("--cpu-scale")
            .arg(CPU_SCALE.to_string())
            .args(["--image", image, "--instance", &instance, "--token-file"])
            .arg(token)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("preemptor nodemanager starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut nm = NmProcess {
            child: Some(child),
            url: format!("http://{node}"),
            node,
            instance,
            docker: docker.clone(),
        };
        // Keep draining stdout so that the child never blocks on a full pipe.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l.trim_start().starts_with("web service") => break,
                Ok(_) => {}
                Err(e) => {
                    let status = nm.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
                    panic!("nodemanager did not come up ({e}); exit status {status:?}");
                }
            }
        }
        nm
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    fn send(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// SIGTERM, and the exit status once it has cleaned up (SIGKILL after 30 s).
    fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGCONT);
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("nodemanager {} ignored SIGTERM; killing it", self.node);
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for NmProcess {
    fn drop(&mut self) {
        self.stop();
        let docker = self.docker.clone();
        let instance = self.instance.clone();
        block_on_cleanup(async move {
            if let Err(e) = remove_instance_containers(&docker, &instance, Default::default()).await
            {
                eprintln!("cleaning up nodemanager {instance}: {e}");
            }
        });
    }
}

fn remote_config(nodes: Vec<NodeId>, token: &str, node: Resource) -> EmulatorConfig {
    let mut config = EmulatorConfig::local(nodes.len(), node, RuntimeChoice::Docker);
    config.cpu_scale = CPU_SCALE;
    config.heartbeat_interval = Duration::from_millis(200);
    config.min_allocation = Resource::new(512, 1);
    config.remote = Some(RemoteNodeManagers {
        nodes,
        token: token.as_bytes().to_vec(),
        expiry: Duration::from_secs(60),
        runtime: RuntimeKind::Docker,
    });
    config
}

async fn start_rm(docker: &Docker, config: EmulatorConfig) -> EmulatorGuard {
    let h = Emulator::start(config).await.expect("RM starts");
    EmulatorGuard {
        docker: docker.clone(),
        instance: h.instance().to_string(),
        handle: Some(h),
    }
}

fn task_containers(s: &RmState, app: ApplicationId) -> Vec<ContainerId> {
    s.containers
        .values()
        .filter(|c| c.id.application() == app && !c.is_am())
        .map(|c| c.id)
        .collect()
}

/// The ids an NM's `/ws/v1/node/containers` lists, with their states.
async fn nm_containers(http: &reqwest::Client, nm: &str) -> Vec<(String, String)> {
    let v = get_json(http, &format!("{nm}/ws/v1/node/containers")).await;
    v["containers"]["container"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["id"].as_str().unwrap().to_string(),
                        c["state"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn app_state(http: &reqwest::Client, rm: &str, app: ApplicationId) -> serde_json::Value {
    get_json(http, &format!("{rm}/ws/v1/cluster/apps/{app}")).await["app"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rm_runs_an_application_on_two_nodemanager_processes() {
    let test = "an_rm_runs_an_application_on_two_nodemanager_processes";
    let Some(docker) = docker_or_skip(test).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-nm").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(dir.path(), "nm-token", "s3cret-nm-token");
    let mut nms = [
        NmProcess::spawn(&docker, &token, &image.tag),
        NmProcess::spawn(&docker, &token, &image.tag),
    ];
    let nodes: Vec<NodeId> = nms.iter().map(|n| n.node.clone()).collect();
    let mut rm = start_rm(
        &docker,
        remote_config(nodes, "s3cret-nm-token", Resource::new(4096, 4)),
    )
    .await;
    let h = rm.handle();
    // A 512 MB AM beside one 2-vcore task on one node, two tasks on the other: both
    // NodeManagers run some.
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","600","--rounds-millions","1","--memory-mb","8"],
            "tasks":3,"memoryMb":1024,"vcores":2}"#,
    )
    .unwrap();
    let app: ApplicationId = submit(h.rm_url(), "remote", "long", &spec, Resource::new(512, 1))
        .await
        .parse()
        .unwrap();
    wait_until(h, "3 running task containers", 60, |s| {
        s.containers
            .values()
            .filter(|c| {
                c.id.application() == app && !c.is_am() && c.state == RmContainerState::Running
            })
            .count()
            == 3
    })
    .await;
    let http = preemptor::tls::http_client_builder().build().unwrap();
    let mut tasks: Vec<String> = h
        .inspect(|s| task_containers(s, app))
        .iter()
        .map(|c| c.to_string())
        .collect();
    tasks.sort();
    let mut listed = Vec::new();
    for nm in &nms {
        let on_nm = nm_containers(&http, &nm.url).await;
        assert!(!on_nm.is_empty(), "{} runs none of {tasks:?}", nm.node);
        let docker_side = instance_containers(&docker, &nm.instance).await;
        assert_eq!(docker_side.len(), on_nm.len(), "{}: {on_nm:?}", nm.node);
        for (id, state) in &on_nm {
            assert_eq!(state, "RUNNING", "{id}");
            let inspect = docker.inspect_container(id, None).await.unwrap();
            let hc = inspect.host_config.unwrap();
            assert_eq!(hc.memory, Some(1024 * 1024 * 1024), "{id}");
            assert_eq!(hc.memory_swap, hc.memory, "{id}");
            let quota = (2.0 * CPU_SCALE * 100_000.0_f64).round() as i64;
            assert_eq!(hc.cpu_quota, Some(quota), "{id}: vcores x the NM's scale");
            let labels = inspect.config.unwrap().labels.unwrap();
            assert_eq!(labels[NODE_ID_LABEL], nm.node.to_string());
            let rm_node = h.inspect(|s| {
                let c = &s.containers[&id.parse::<ContainerId>().unwrap()];
                s.nodes[c.node].id.clone()
            });
            assert_eq!(rm_node, nm.node, "{id}: the RM placed it on this NM");
        }
        let xml = http
            .get(format!("{}/ws/v1/node/containers", nm.url))
            .header("Accept", "application/xml")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            xml.trim_start().starts_with('<') && xml.contains(&on_nm[0].0),
            "{xml}"
        );
        listed.extend(on_nm.into_iter().map(|(id, _)| id));
    }
    listed.sort();
    assert_eq!(
        listed, tasks,
        "the NMs list exactly the RM's task containers"
    );

    wait_until(h, "the application to finish", 120, |s| {
        s.apps[&app].is_final()
    })
    .await;
    let a = app_state(&http, h.rm_url(), app).await;
    assert_eq!(a["state"], "FINISHED", "{a}");
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    let report = rm.handle.take().unwrap().shutdown().await.unwrap();
    assert_eq!(report.containers_removed, 0, "nothing was left to kill");

    // The RM is gone; each NM still reports its finished containers from its own table.
    for nm in &mut nms {
        let on_nm = nm_containers(&http, &nm.url).await;
        assert!(!on_nm.is_empty());
        assert!(on_nm.iter().all(|(_, st)| st == "DONE"), "{on_nm:?}");
        let c = get_json(
            &http,
            &format!("{}/ws/v1/node/containers/{}", nm.url, on_nm[0].0),
        )
        .await;
        assert_eq!(c["container"]["exitCode"], 0, "{c}");
        assert!(instance_containers(&docker, &nm.instance).await.is_empty());
        let status = nm.stop().expect("was running");
        assert!(status.success(), "{}: {status}", nm.node);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_nodemanager_keeps_its_task_and_the_rm_reattaches() {
    let test = "a_frozen_nodemanager_keeps_its_task_and_the_rm_reattaches";
    let Some(docker) = docker_or_skip(test).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-nm").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(dir.path(), "nm-token", "frozen-nm-token");
    let mut nm = NmProcess::spawn(&docker, &token, &image.tag);
    let mut rm = start_rm(
        &docker,
        remote_config(
            vec![nm.node.clone()],
            "frozen-nm-token",
            Resource::new(4096, 4),
        ),
    )
    .await;
    let h = rm.handle();
    // About 8 s of work at 0.1 CPU.
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","330","--rounds-millions","1","--memory-mb","8"],
            "tasks":1,"memoryMb":1024,"vcores":1,"maxAttempts":1}"#,
    )
    .unwrap();
    let app: ApplicationId = submit(h.rm_url(), "frozen", "long", &spec, Resource::new(512, 1))
        .await
        .parse()
        .unwrap();
    wait_until(h, "the task to run", 60, |s| {
        s.containers.values().any(|c| {
            c.id.application() == app && !c.is_am() && c.state == RmContainerState::Running
        })
    })
    .await;
    let task = h.inspect(|s| task_containers(s, app))[0];
    // Longer than the RM's stream idle timeout: it sees the stream stall and re-attaches.
    nm.send(libc::SIGSTOP);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let running = docker
        .inspect_container(&task.to_string(), None)
        .await
        .unwrap()
        .state
        .and_then(|s| s.running);
    nm.send(libc::SIGCONT);
    assert_eq!(
        running,
        Some(true),
        "the task ran on while its NM was frozen"
    );
    assert!(
        h.inspect(|s| s.containers[&task].is_live()),
        "the RM did not give the task up"
    );
    wait_until(h, "the application to finish", 120, |s| {
        s.apps[&app].is_final()
    })
    .await;
    let http = preemptor::tls::http_client_builder().build().unwrap();
    let a = app_state(&http, h.rm_url(), app).await;
    assert_eq!(a["state"], "FINISHED", "{a}");
    let (tasks, status) = h.inspect(|s| (task_containers(s, app), s.containers[&task].exit_status));
    assert_eq!(tasks, vec![task], "one attempt, not lost and rerun");
    assert_eq!(status, exit::SUCCESS);
    rm.handle.take().unwrap().shutdown().await.unwrap();
    let status = nm.stop().expect("was running");
    assert!(status.success(), "{status}");
    assert!(instance_containers(&docker, &nm.instance).await.is_empty());
}

/// An RM whose token the NodeManager refuses: the launch fails with a diagnostic saying
/// so. In-process simulated NodeManager: no Docker needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_gets_401_and_the_rm_says_so() {
    let port = free_port();
    let node = NodeId::new(format!("127.0.0.1:{port}"));
    let nm = NodeManager::start(NodeManagerConfig {
        listen: format!("127.0.0.1:{port}").parse().unwrap(),
        node_id: Some(node.clone()),
        resource: Resource::new(4096, 4),
        runtime: RuntimeChoice::Simulated,
        cpu_scale: 1.0,
        image: None,
        instance: None,
        token: b"the-right-token".to_vec(),
    })
    .await
    .expect("nodemanager starts");
    let http = preemptor::tls::http_client_builder().build().unwrap();
    let launch = format!("{}/internal/v1/containers", nm.url());
    let r = http.post(&launch).body("{}").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.text().await.unwrap().contains("missing bearer token"));
    let r = http
        .post(&launch)
        .bearer_auth("the-wrong-token")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.text().await.unwrap().contains("wrong bearer token"));
    let info = get_json(&http, &format!("{}/ws/v1/node/info", nm.url())).await;
    assert_eq!(
        info["nodeInfo"]["id"],
        node.to_string(),
        "the YARN API needs no token"
    );

    let mut config = EmulatorConfig::local(1, Resource::new(4096, 4), RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    config.remote = Some(RemoteNodeManagers {
        nodes: vec![node.clone()],
        token: b"the-wrong-token".to_vec(),
        expiry: Duration::from_secs(60),
        runtime: RuntimeKind::Simulated,
    });
    let rm: EmulatorHandle = Emulator::start(config).await.expect("RM starts");
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"burn","tasks":1,"memoryMb":1024,"vcores":1,"maxAttempts":1,"simulatedDurationMs":100}"#,
    )
    .unwrap();
    let app: ApplicationId = submit(
        rm.rm_url(),
        "refused",
        "long",
        &spec,
        Resource::new(1024, 1),
    )
    .await
    .parse()
    .unwrap();
    wait_until(&rm, "the application to end", 30, |s| {
        s.apps[&app].is_final()
    })
    .await;
    let a = app_state(&http, rm.rm_url(), app).await;
    assert_eq!(a["state"], "FAILED", "{a}");
    let diagnostics = a["diagnostics"].as_str().unwrap();
    assert!(
        diagnostics.contains(&format!("NodeManager {node} refused the RM's bearer token"))
            && diagnostics.contains("401")
            && diagnostics.contains("--nm-token-file"),
        "{diagnostics}"
    );
    let nm_side = nm_containers(&http, nm.url()).await;
    assert!(nm_side.is_empty(), "nothing was launched: {nm_side:?}");
    rm.shutdown().await.unwrap();
    nm.shutdown().await.unwrap();
}
