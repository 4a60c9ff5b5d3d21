//! `docker-compose.yml` end to end: the emulated RM, three NodeManager hosts (an emulated
//! NodeManager and an agent each) and the controller, as containers on a private network,
//! from the image `deploy/compose/build-image.sh` builds. A long job fills the cluster and
//! a short job makes the controller suspend a long container; then, one after another:
//! - the suspended container's agent is killed (SIGKILL) and started again: it recovers
//!   the container from its state volume, still suspended; another node's agent, which
//!   sees the container on the shared daemon, refuses to touch it;
//! - the RM is frozen (`docker pause`) for three lease timeouts: no new preemption, the
//!   suspension is kept, the controller says the RM is unreachable, and recovers after;
//! - the agent is cut off (`docker network disconnect`): it resumes the container at lease
//!   expiry; reconnected, the controller reconciles and no action fails;
//! - the controller is killed (SIGKILL) with a container suspended and a node raised: every
//!   agent resumes everything at lease expiry; started again, the controller puts the
//!   node's capacity back from its record and rebuilds its view;
//! - Docker refuses every memory cut (each long container holds 300 MB resident, and
//!   there is no swap): the suspensions fail whole and no node is raised.
//!
//! After each fault the RM's node capacities are read and checked against the cgroups: a
//! node advertises more than its configured capacity exactly while one of its long
//! containers is throttled. At the end every long container's cgroup limits are read
//! back and every node's capacity is its configured one: nothing is left behind.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use preemptor::agent::cgroup::CgroupDirs;
use preemptor::agent::limits::CgroupLimits;
use preemptor::emulator::docker::INSTANCE_LABEL;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::resources::Resource;
use serde_json::Value;

use crate::agent_support::{SwapLock, cgroup_dirs, read_limits};
use crate::common::{block_on_cleanup, docker_or_skip, unique_name};
use crate::emulator_support::submit;

/// Lease the controller gives the agents: short, so that lease expiry is quick to see.
const LEASE: Duration = Duration::from_secs(6);
const NODE_MEMORY_MB: u64 = 4096;

/// One docker-compose project, taken down with everything it made when dropped.
struct Compose {
    docker: Docker,
    project: String,
    image: String,
    /// The token files (PREEMPTOR_SECRETS).
    secrets: PathBuf,
}

impl Compose {
    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PREEMPTOR_IMAGE", self.image.clone()),
            ("PREEMPTOR_PROJECT", self.project.clone()),
            ("PREEMPTOR_SECRETS", self.secrets.display().to_string()),
            ("PREEMPTOR_POLICY", "immediate".into()),
            ("PREEMPTOR_LEASE_MS", LEASE.as_millis().to_string()),
            // A refused memory cut fails after 5 s, not the default 60 s.
            ("PREEMPTOR_MEMORY_TIMEOUT", "5s".into()),
            ("PREEMPTOR_WORKLOAD_MIX", "none".into()),
            ("PREEMPTOR_NODE_MEMORY_MB", NODE_MEMORY_MB.to_string()),
            // Six busy task containers take 0.3 of a CPU, not 1.5, beside other tests.
            ("PREEMPTOR_CPU_SCALE", "0.05".into()),
            // A free port on the host's loopback.
            ("PREEMPTOR_DASHBOARD", "127.0.0.1:".into()),
            ("RUST_LOG", "info".into()),
        ]
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new("docker-compose");
        c.current_dir(Self::root())
            .args(["-p", &self.project, "-f", "docker-compose.yml"])
            .args(args)
            .envs(self.env());
        c
    }

    /// Runs `docker-compose <args>`; its stdout, or its stderr as the error.
    async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut c = tokio::process::Command::from(self.command(args));
        c.kill_on_drop(true);
        let out = c
            .output()
            .await
            .map_err(|e| format!("running docker-compose {args:?}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "docker-compose {args:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The Docker name of `service`'s container (docker-compose 1.x naming).
    fn container(&self, service: &str) -> String {
        format!("{}_{service}_1", self.project)
    }

    fn network(&self) -> String {
        format!("{}_yarn", self.project)
    }

    /// `service`'s address on the compose network, reachable from this host.
    async fn ip(&self, service: &str) -> String {
        let name = self.container(service);
        let i = self
            .docker
            .inspect_container(&name, None)
            .await
            .unwrap_or_else(|e| panic!("inspecting {name}: {e}"));
        i.network_settings
            .and_then(|n| n.networks)
            .and_then(|mut n| n.remove(&self.network()))
            .and_then(|n| n.ip_address)
            .filter(|ip| !ip.is_empty())
            .unwrap_or_else(|| panic!("{name} has no address on {}", self.network()))
    }

    fn token(&self, file: &str) -> String {
        std::fs::read_to_string(self.secrets.join(file))
            .unwrap_or_else(|e| panic!("reading {file}: {e}"))
            .trim()
            .to_string()
    }

    async fn docker_cli(&self, args: &[&str]) {
        let out = tokio::process::Command::new("docker")
            .args(args)
            .output()
            .await
            .unwrap_or_else(|e| panic!("docker {args:?}: {e}"));
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Task containers the project's NodeManagers launched, by name, with the
    /// NodeManager (service) each is on.
    async fn task_containers(&self) -> BTreeMap<String, String> {
        let list = self
            .docker
            .list_containers(Some(bollard::query_parameters::ListContainersOptions {
                all: true,
                filters: Some([("label".to_string(), vec![INSTANCE_LABEL.to_string()])].into()),
                ..Default::default()
            }))
            .await
            .expect("listing containers");
        let prefix = format!("{}-", self.project);
        list.into_iter()
            .filter_map(|c| {
                let nm = c
                    .labels?
                    .get(INSTANCE_LABEL)?
                    .strip_prefix(&prefix)?
                    .to_string();
                let name = c
                    .names?
                    .into_iter()
                    .next()?
                    .trim_start_matches('/')
                    .to_string();
                Some((name, nm))
            })
            .collect()
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (service, tail) in [("controller", "--tail=300"), ("rm", "--tail=40")]
                .into_iter()
                .chain(
                    ["nm1", "nm2", "nm3", "agent1", "agent2", "agent3"].map(|s| (s, "--tail=25")),
                )
            {
                if let Ok(out) = self
                    .command(&["logs", "--no-color", tail, service])
                    .output()
                {
                    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
                }
            }
        }
        match self
            .command(&["down", "--volumes", "--remove-orphans", "--timeout", "20"])
            .output()
        {
            Ok(o) if !o.status.success() => {
                eprintln!(
                    "docker-compose down: {}",
                    String::from_utf8_lossy(&o.stderr)
                )
            }
            Err(e) => eprintln!("docker-compose down: {e}"),
            Ok(_) => {}
        }
        let docker = self.docker.clone();
        let project = self.project.clone();
        let image = self.image.clone();
        block_on_cleanup(async move {
            // Task containers of NodeManagers that did not get to clean up themselves.
            for nm in ["nm1", "nm2", "nm3"] {
                let instance = format!("{project}-{nm}");
                if let Err(e) = preemptor::emulator::docker::remove_instance_containers(
                    &docker,
                    &instance,
                    Default::default(),
                )
                .await
                {
                    eprintln!("removing the task containers of {instance}: {e}");
                }
            }
            let opts = bollard::query_parameters::RemoveImageOptions {
                force: true,
                ..Default::default()
            };
            if let Err(e) = docker.remove_image(&image, Some(opts), None).await {
                eprintln!("removing image {image}: {e}");
            }
        });
        let _ = std::fs::remove_dir_all(&self.secrets);
    }
}

/// HTTP with a bearer token.
struct Api {
    http: reqwest::Client,
}

impl Api {
    fn new() -> Api {
        Api {
            http: preemptor::tls::http_client_builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("http client"),
        }
    }

    /// The controller's `/api/v1/status`.
    async fn status(&self, controller: &str, token: &str) -> Result<Value, String> {
        self.get(&format!("{controller}/api/v1/status"), Some(token))
            .await
    }

    async fn get(&self, url: &str, token: Option<&str>) -> Result<Value, String> {
        let mut req = self.http.get(url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| format!("GET {url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("GET {url}: {}", resp.status()));
        }
        resp.json().await.map_err(|e| format!("GET {url}: {e}"))
    }
}

/// Each node's `totalResource` as the RM reports it: (memory MB, vcores) by node id.
async fn rm_capacities(api: &Api, rm: &str) -> Result<BTreeMap<String, (u64, u64)>, String> {
    let v = api
        .get(
            &format!("{rm}/ws/v1/cluster/nodes?user.name=preemptor"),
            None,
        )
        .await?;
    let nodes = v["nodes"]["node"]
        .as_array()
        .ok_or_else(|| format!("no nodes in {v}"))?;
    nodes
        .iter()
        .map(|n| {
            let t = &n["totalResource"];
            match (n["id"].as_str(), t["memory"].as_u64(), t["vCores"].as_u64()) {
                (Some(id), Some(m), Some(c)) => Ok((id.to_string(), (m, c))),
                _ => Err(format!("node without id or totalResource: {n}")),
            }
        })
        .collect()
}

/// The RM agrees with the cgroups: each node advertises more than its configured capacity
/// exactly while one of its long containers is throttled, and never less.
async fn capacities_agree(
    api: &Api,
    rm: &str,
    configured: &BTreeMap<String, (u64, u64)>,
    long: &Long,
) -> Option<()> {
    let now = rm_capacities(api, rm).await.ok()?;
    let throttled: BTreeSet<String> = long.throttled().into_iter().map(|(_, nm)| nm).collect();
    configured
        .iter()
        .all(|(id, base)| {
            let nm = id.split(':').next().unwrap_or(id);
            now.get(id).is_some_and(|cap| {
                cap.0 >= base.0 && cap.1 >= base.1 && (cap != base) == throttled.contains(nm)
            })
        })
        .then_some(())
}

/// Polls `check` every 250 ms until it returns `Some`, for at most `timeout`.
async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The long job's task containers, with their cgroups and the limits they started with.
struct Long {
    containers: BTreeMap<String, (String, CgroupDirs, CgroupLimits)>,
}

impl Long {
    /// Names (and NodeManagers) of the containers whose CPU is below their start.
    fn throttled(&self) -> Vec<(String, String)> {
        self.containers
            .iter()
            .filter(|(_, (_, dirs, original))| {
                dirs.read_limits()
                    .is_ok_and(|now| now.cpu_quota_us < original.cpu_quota_us)
            })
            .map(|(name, (nm, _, _))| (name.clone(), nm.clone()))
            .collect()
    }

    fn is_original(&self, name: &str) -> bool {
        let (_, dirs, original) = &self.containers[name];
        dirs.read_limits()
            .is_ok_and(|now| now.same_enforcement(original))
    }

    fn assert_all_original(&self) {
        for (name, (_, dirs, original)) in &self.containers {
            let now = dirs
                .read_limits()
                .unwrap_or_else(|e| panic!("reading the cgroup of {name}: {e}"));
            assert!(
                now.same_enforcement(original),
                "{name} is not back at its original limits: {now:?} vs {original:?}"
            );
        }
    }
}

fn long_spec() -> WorkloadSpec {
    WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","4"],
            "tasks":5,"memoryMb":2048,"vcores":1}"#,
    )
    .expect("spec")
}

fn short_spec() -> WorkloadSpec {
    WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","4"],
            "tasks":1,"memoryMb":1024,"vcores":1}"#,
    )
    .expect("spec")
}

async fn kill_app(rm: &str, app: &str) {
    let resp = Api::new()
        .http
        .put(format!(
            "{rm}/ws/v1/cluster/apps/{app}/state?user.name=tester"
        ))
        .json(&serde_json::json!({"state": "KILLED"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("killing {app}: {e}"));
    assert!(
        resp.status().is_success(),
        "killing {app}: {}",
        resp.status()
    );
}

/// The controller's preemption log: (action, container, outcome status).
async fn actions(api: &Api, controller: &str, token: &str) -> Vec<(String, String, String)> {
    let v = api
        .get(&format!("{controller}/api/v1/actions"), Some(token))
        .await
        .expect("the controller's actions");
    v["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x["action"].as_str().unwrap_or_default().to_string(),
                        x["container"].as_str().unwrap_or_default().to_string(),
                        x["outcome"]["status"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_survives_agent_rm_network_controller_and_docker_faults() {
    let test = "the_compose_cluster_survives_agent_rm_network_controller_and_docker_faults";
    let Some(docker) = docker_or_skip(test).await else {
        return;
    };
    let project = unique_name("pcompose").replace('-', "");
    let secrets = std::env::temp_dir().join(format!("{project}-secrets"));
    let compose = Compose {
        docker: docker.clone(),
        image: format!("{project}:test"),
        project,
        secrets,
    };
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_preemptor"))
        .parent()
        .expect("binary directory")
        .to_path_buf();
    let built = tokio::process::Command::new(Compose::root().join("deploy/compose/build-image.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg(&compose.image)
        .output()
        .await
        .expect("running build-image.sh");
    assert!(
        built.status.success(),
        "build-image.sh: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    compose.run(&["up", "-d"]).await.expect("docker-compose up");

    let api = Api::new();
    let rm = format!("http://{}:8088", compose.ip("rm").await);
    let port = compose
        .run(&["port", "controller", "8090"])
        .await
        .expect("the dashboard's published port");
    let controller = format!("http://{}", port.trim());
    let ctl_token = compose.token("controller.token");
    let agent_token = compose.token("agent.token");

    // The controller sees the RM and three nodes, each with its agent.
    eventually(
        Duration::from_secs(120),
        "the controller to see 3 nodes with agents",
        || async {
            let s = api.status(&controller, &ctl_token).await.ok()?;
            let nodes = s["nodes"].as_array()?;
            (s["rmReachable"] == true
                && nodes.len() == 3
                && nodes.iter().all(|n| n["agentReachable"] == true))
            .then_some(())
        },
    )
    .await;
    // Before anything is preempted: the nodes' configured capacities, as registered.
    let configured = rm_capacities(&api, &rm).await.expect("the RM's nodes");
    assert_eq!(configured.len(), 3, "{configured:?}");
    // The dashboard is served without changing anything: every route is a GET.
    let page = api
        .http
        .get(format!("{controller}/?token={ctl_token}"))
        .send()
        .await
        .expect("dashboard");
    assert!(page.status().is_success());
    let post = api
        .http
        .post(format!("{controller}/api/v1/status"))
        .bearer_auth(&ctl_token)
        .send()
        .await
        .expect("POST");
    assert_eq!(
        post.status().as_u16(),
        405,
        "the dashboard API is read-only"
    );

    // A long job of five 2 GB tasks and a 1 GB AM: 11 of the 12 GB.
    let long_app = submit(
        &rm,
        "hibench-long",
        "long",
        &long_spec(),
        Resource::new(1024, 1),
    )
    .await;
    // The AM lives in the emulated RM; the five tasks are Docker containers.
    let tasks = eventually(
        Duration::from_secs(120),
        "5 running task containers",
        || async {
            let t = compose.task_containers().await;
            let running = eventually_running(&docker, &t).await;
            (running.len() == 5).then_some(running)
        },
    )
    .await;
    let mut long = Long {
        containers: BTreeMap::new(),
    };
    for (name, nm) in &tasks {
        let dirs = cgroup_dirs(&docker, name).await;
        let original = read_limits(&dirs);
        assert_eq!(
            original.memory_bytes,
            Some(2048 << 20),
            "{name}: {original:?}"
        );
        long.containers
            .insert(name.clone(), (nm.clone(), dirs, original));
    }
    assert_eq!(
        long.containers.len(),
        5,
        "five 2 GB task containers: {tasks:?}"
    );

    // A short job: its AM fits in the free 1 GB, its task needs a suspension.
    let short1 = submit(
        &rm,
        "tpch-q6",
        "short",
        &short_spec(),
        Resource::new(1024, 1),
    )
    .await;
    let (victim, victim_nm) = eventually(
        Duration::from_secs(60),
        "a suspended long container",
        || async { long.throttled().into_iter().next() },
    )
    .await;
    let agent_service = victim_nm.replace("nm", "agent");
    // CPU goes first: the suspension is whole once the agent says so.
    let agent = format!("http://{}:8049", compose.ip(&agent_service).await);
    eventually(
        Duration::from_secs(30),
        "the agent to report the suspension",
        || async {
            let c = api
                .get(
                    &format!("{agent}/v1/containers/{victim}"),
                    Some(&agent_token),
                )
                .await
                .ok()?;
            (c["state"] == "suspended").then_some(())
        },
    )
    .await;
    let suspended_limits = long.containers[&victim].1.read_limits().expect("cgroup");

    // 1. The agent killed and started again recovers the suspended container.
    compose
        .docker_cli(&[
            "kill",
            "--signal",
            "KILL",
            &compose.container(&agent_service),
        ])
        .await;
    compose
        .docker_cli(&["start", &compose.container(&agent_service)])
        .await;
    let entry = eventually(
        Duration::from_secs(30),
        "the restarted agent to answer",
        || async {
            api.get(
                &format!("{agent}/v1/containers/{victim}"),
                Some(&agent_token),
            )
            .await
            .ok()
        },
    )
    .await;
    assert_eq!(entry["changed"], true, "{entry}");
    assert_eq!(entry["state"], "suspended", "{entry}");
    assert!(
        long.containers[&victim]
            .1
            .read_limits()
            .is_ok_and(|l| l == suspended_limits),
        "the suspension survived the agent's restart"
    );
    eventually(
        Duration::from_secs(30),
        "after the agent's restart, the RM's capacities to agree with the cgroups",
        || capacities_agree(&api, &rm, &configured, &long),
    )
    .await;

    // Another node's agent sees the container on the shared Docker daemon but refuses it:
    // its NodeManager does not list it.
    let other = ["agent1", "agent2", "agent3"]
        .into_iter()
        .find(|a| *a != agent_service)
        .expect("another agent");
    let other_url = format!("http://{}:8049", compose.ip(other).await);
    let refused = preemptor::agent::AgentClient::new(&other_url, &agent_token, LEASE)
        .expect("agent client")
        .kill(&victim)
        .await;
    match refused {
        Err(preemptor::agent::client::ClientError::Api { status, error, .. }) => {
            assert_eq!((status.as_u16(), error.as_str()), (403, "not_on_this_node"))
        }
        unexpected => panic!("{other_url} acted on {victim} of {victim_nm}: {unexpected:?}"),
    }
    assert!(
        long.containers[&victim]
            .1
            .read_limits()
            .is_ok_and(|l| l == suspended_limits),
        "the refused kill left {victim} as it was"
    );

    // 2. The RM frozen for three lease timeouts: leases are kept, nothing new happens.
    let before = actions(&api, &controller, &ctl_token).await.len();
    compose
        .docker_cli(&["pause", &compose.container("rm")])
        .await;
    let paused_at = Instant::now();
    let mut saw_unreachable = false;
    while paused_at.elapsed() < LEASE * 3 {
        assert!(
            long.containers[&victim]
                .1
                .read_limits()
                .is_ok_and(|l| l == suspended_limits),
            "{victim} stayed suspended while the RM was unreachable"
        );
        if let Ok(s) = api.status(&controller, &ctl_token).await {
            saw_unreachable |= s["rmReachable"] == false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let during = actions(&api, &controller, &ctl_token).await;
    assert_eq!(
        during.len(),
        before,
        "no action while the RM was unreachable: {during:?}"
    );
    assert!(
        saw_unreachable,
        "the controller's status said the RM was unreachable"
    );
    compose
        .docker_cli(&["unpause", &compose.container("rm")])
        .await;
    eventually(
        Duration::from_secs(30),
        "the controller to reach the RM again",
        || async {
            let s = api.status(&controller, &ctl_token).await.ok()?;
            (s["rmReachable"] == true).then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "after the RM's pause, its capacities to agree with the cgroups",
        || capacities_agree(&api, &rm, &configured, &long),
    )
    .await;

    // 3. The agent cut off from the network resumes the container at lease expiry.
    let agent_container = compose.container(&agent_service);
    compose
        .docker_cli(&[
            "network",
            "disconnect",
            &compose.network(),
            &agent_container,
        ])
        .await;
    let cut = Instant::now();
    eventually(
        LEASE * 3,
        "the cut-off agent to resume the container",
        || async { long.is_original(&victim).then_some(()) },
    )
    .await;
    let resumed_after = cut.elapsed();
    assert!(
        resumed_after >= LEASE / 2,
        "resumed by the lease, not at once: {resumed_after:?}"
    );
    // The controller stops counting on the cut-off agent's last report once its lease
    // may have run out, and gives the node's raised capacity back: the RM must not place
    // work in room that the resumed container holds again.
    eventually(
        LEASE * 2,
        "during the partition, the RM's capacities to agree with the cgroups",
        || capacities_agree(&api, &rm, &configured, &long),
    )
    .await;
    compose
        .docker_cli(&["network", "connect", &compose.network(), &agent_container])
        .await;
    let reconnected = actions(&api, &controller, &ctl_token).await.len();
    eventually(
        Duration::from_secs(60),
        "the controller to reach the agent again",
        || async {
            let s = api.status(&controller, &ctl_token).await.ok()?;
            s["nodes"]
                .as_array()?
                .iter()
                .all(|n| n["agentReachable"] == true)
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(LEASE).await;
    let after: Vec<_> = actions(&api, &controller, &ctl_token)
        .await
        .split_off(reconnected);
    assert!(
        after.iter().all(|(_, _, outcome)| outcome != "failed"),
        "after reconnection the controller reconciles, no action fails: {after:?}"
    );
    eventually(
        Duration::from_secs(30),
        "after the partition, the RM's capacities to agree with the cgroups",
        || capacities_agree(&api, &rm, &configured, &long),
    )
    .await;

    // The preemption log as docs/compose.md reads it, from the host.
    let logs = tokio::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args(["logs", "--controller", &controller, "--token-file"])
        .arg(compose.secrets.join("controller.token"))
        .output()
        .await
        .expect("preemptor logs");
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.status.success(), "preemptor logs: {logs:?}");
    assert!(
        text.lines()
            .any(|l| l.contains("suspend") && l.contains(&victim)),
        "the log shows the suspension of {victim}:\n{text}"
    );

    // 4. The controller killed with a container suspended: the agents resume everything.
    kill_app(&rm, &short1).await;
    eventually(
        Duration::from_secs(60),
        "every long container back at its limits",
        || async { long.throttled().is_empty().then_some(()) },
    )
    .await;
    let _short2 = submit(
        &rm,
        "tpch-q1",
        "short",
        &short_spec(),
        Resource::new(1024, 1),
    )
    .await;
    eventually(Duration::from_secs(60), "a second suspension", || async {
        (!long.throttled().is_empty()).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "a node raised", || async {
        let now = rm_capacities(&api, &rm).await.ok()?;
        (now != configured).then_some(())
    })
    .await;
    compose
        .docker_cli(&["kill", "--signal", "KILL", &compose.container("controller")])
        .await;
    eventually(
        LEASE * 3,
        "the agents to resume everything after the controller died",
        || async { long.throttled().is_empty().then_some(()) },
    )
    .await;
    // Only the controller's record knows the physical capacities now.
    assert_ne!(
        rm_capacities(&api, &rm).await.expect("the RM's nodes"),
        configured,
        "the kill left nothing raised"
    );
    compose
        .docker_cli(&["start", &compose.container("controller")])
        .await;
    let port = compose
        .run(&["port", "controller", "8090"])
        .await
        .expect("the dashboard's published port");
    let controller = format!("http://{}", port.trim());
    eventually(
        Duration::from_secs(30),
        "after the controller's restart, the RM's capacities to agree with the cgroups",
        || capacities_agree(&api, &rm, &configured, &long),
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "the restarted controller to see the cluster",
        || async {
            let s = api.status(&controller, &ctl_token).await.ok()?;
            let nodes = s["nodes"].as_array()?;
            let containers: usize = nodes
                .iter()
                .map(|n| n["containers"].as_array().map_or(0, Vec::len))
                .sum();
            (nodes.len() == 3
                && nodes.iter().all(|n| n["agentReachable"] == true)
                && containers >= 8)
                .then_some(())
        },
    )
    .await;

    // The end: short work gone, nothing left throttled.
    kill_app(&rm, &_short2).await;
    tokio::time::sleep(LEASE).await;
    eventually(
        Duration::from_secs(60),
        "nothing throttled at the end",
        || async { long.throttled().is_empty().then_some(()) },
    )
    .await;
    long.assert_all_original();
    // And every node advertises its configured capacity again, read from the RM: the
    // restarted controller took the physical capacities from its record.
    eventually(
        Duration::from_secs(30),
        "every node back at its configured capacity",
        || async { (rm_capacities(&api, &rm).await.ok()? == configured).then_some(()) },
    )
    .await;

    // 5. Docker refusing an update: every memory cut is refused, so nothing is suspended
    // and no node is raised.
    docker_refuses_every_memory_cut(&compose, &api, (&rm, &controller, &ctl_token), &long).await;
    long.assert_all_original();
    eventually(
        Duration::from_secs(30),
        "after Docker's refusals, every node at its configured capacity",
        || async { (rm_capacities(&api, &rm).await.ok()? == configured).then_some(()) },
    )
    .await;
    kill_app(&rm, &long_app).await;
}

/// Makes each long container hold 300 MB resident (a second workload process started in
/// it with `docker exec`), so that with no swap the kernel refuses every cut to the
/// 64 MB footprint. A short job then asks for room: the agents step through "device or
/// resource busy" for their memory timeout and give up, the controller logs the
/// suspensions as failed with Docker's or the kernel's reason, and no node is raised,
/// read from the RM all along. Returns once the short job is gone and every container is
/// back at its limits.
async fn docker_refuses_every_memory_cut(
    compose: &Compose,
    api: &Api,
    (rm, controller, ctl_token): (&str, &str, &str),
    long: &Long,
) {
    let _no_swap = SwapLock::acquire().expect("swap lock");
    let swaps = std::fs::read_to_string("/proc/swaps").expect("/proc/swaps");
    if swaps.lines().count() > 1 {
        eprintln!(
            "SKIPPED Docker's refusal: this machine has swap, so Docker would not refuse:\n{swaps}"
        );
        return;
    }
    if long
        .containers
        .values()
        .any(|(_, dirs, _)| dirs.version == preemptor::agent::limits::CgroupVersion::V2)
    {
        eprintln!(
            "SKIPPED Docker's refusal: cgroup v2 OOM-kills on memory.max instead of refusing"
        );
        return;
    }
    let configured = rm_capacities(api, rm).await.expect("the RM's nodes");
    for name in long.containers.keys() {
        compose
            .docker_cli(&[
                "exec",
                "-d",
                name,
                preemptor::emulator::image::WORKLOAD_PATH,
                "burn",
                "--iterations",
                "0",
                "--rounds-millions",
                "1",
                "--memory-mb",
                "300",
            ])
            .await;
    }
    eventually(
        Duration::from_secs(120),
        "300 MB resident in every long container",
        || async {
            long.containers
                .values()
                .all(|(_, dirs, _)| {
                    dirs.sample()
                        .is_ok_and(|s| s.memory_usage_bytes >= 280 << 20)
                })
                .then_some(())
        },
    )
    .await;
    let before = actions(api, controller, ctl_token).await.len();
    let short = submit(
        rm,
        "tpch-q3",
        "short",
        &short_spec(),
        Resource::new(1024, 1),
    )
    .await;
    let t0 = Instant::now();
    let failed = loop {
        assert_eq!(
            rm_capacities(api, rm).await.expect("the RM's nodes"),
            configured,
            "a node was raised although no memory cut was applied"
        );
        let since = actions(api, controller, ctl_token).await.split_off(before);
        assert!(
            !since
                .iter()
                .any(|(action, _, outcome)| action == "suspend" && outcome == "applied"),
            "a suspension was applied although Docker refuses every memory cut: {since:?}"
        );
        let failed: Vec<_> = since
            .into_iter()
            .filter(|(action, _, outcome)| action == "suspend" && outcome == "failed")
            .collect();
        if failed.len() >= 2 {
            break failed;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "fewer than 2 failed suspensions within 90 s: {failed:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!(
        "Docker refused {} suspensions in {:.1} s: {failed:?}",
        failed.len(),
        t0.elapsed().as_secs_f64()
    );
    kill_app(rm, &short).await;
    eventually(
        Duration::from_secs(60),
        "every long container back at its limits after the refusals",
        || async {
            long.containers
                .keys()
                .all(|name| long.is_original(name))
                .then_some(())
        },
    )
    .await;
}

/// The containers of `t` that are running, by name, with their NodeManager.
async fn eventually_running(
    docker: &Docker,
    t: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, nm) in t {
        let running = docker
            .inspect_container(name, None)
            .await
            .ok()
            .and_then(|i| i.state?.running)
            .unwrap_or(false);
        if running {
            out.insert(name.clone(), nm.clone());
        }
    }
    out
}
