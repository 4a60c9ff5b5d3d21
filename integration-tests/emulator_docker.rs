//! The Docker runtime: 4 NodeManagers x 4 containers run as real Docker containers named
//! after their YARN ids, in `/hadoop-yarn/<containerId>`, with the allocation's limits;
//! a container signal really kills one; shutdown leaves nothing behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::Docker;
use preemptor::cluster::ContainerId;
use preemptor::emulator::docker::{CONTAINER_ID_LABEL, NODE_ID_LABEL};
use preemptor::emulator::state::{RmContainerState, exit};
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, RuntimeChoice};
use preemptor::resources::Resource;

use crate::common::{TestImage, docker_or_skip};
use crate::emulator_support::{EmulatorGuard, instance_containers, submit, wait_until};

/// The memory limit Docker wrote into the container's own cgroup (v1 or v2).
fn cgroup_memory_limit(parent: &str, docker_id: &str) -> Option<u64> {
    let rel = format!("{}/{docker_id}", parent.trim_start_matches('/'));
    let candidates: [PathBuf; 2] = [
        Path::new("/sys/fs/cgroup/memory")
            .join(&rel)
            .join("memory.limit_in_bytes"),
        Path::new("/sys/fs/cgroup").join(&rel).join("memory.max"),
    ];
    candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|s| s.trim().parse().ok())
}

const CPU_SCALE: f64 = 0.05;

/// A Docker-runtime emulator on the test workload image, or `None` (said) without Docker.
async fn start_docker(
    test: &str,
    nodes: usize,
    node: Resource,
    configure: impl FnOnce(&mut EmulatorConfig),
) -> Option<(Docker, TestImage, EmulatorGuard)> {
    let docker = docker_or_skip(test).await?;
    let image = TestImage::build(&docker, "preemptor-emulator").await;
    let mut config = EmulatorConfig::local(nodes, node, RuntimeChoice::Docker);
    config.image = Some(image.tag.clone());
    config.heartbeat_interval = Duration::from_millis(200);
    configure(&mut config);
    let started = Emulator::start(config).await.expect("emulator starts");
    let guard = EmulatorGuard {
        docker: docker.clone(),
        instance: started.instance().to_string(),
        handle: Some(started),
    };
    Some((docker, image, guard))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_nodemanagers_run_four_docker_containers_each_with_yarn_limits() {
    // 4.5 GB and 5 vcores per node: a 512 MB AM beside four 1 GB tasks on one node, and
    // room for exactly four tasks on every other.
    let Some((docker, _image, mut guard)) = start_docker(
        "four_nodemanagers_run_four_docker_containers_each_with_yarn_limits",
        4,
        Resource::new(4608, 5),
        |c| {
            c.cpu_scale = CPU_SCALE;
            c.min_allocation = Resource::new(512, 1);
        },
    )
    .await
    else {
        return;
    };
    let h = guard.handle();
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","0","--rounds-millions","1","--memory-mb","4"],
            "tasks":16,"memoryMb":1024,"vcores":1}"#,
    )
    .unwrap();
    let app = submit(
        h.rm_url(),
        "docker-4x4",
        "long",
        &spec,
        Resource::new(512, 1),
    )
    .await;
    let app_id = app.parse().unwrap();
    wait_until(h, "16 running task containers", 60, |s| {
        s.containers
            .values()
            .filter(|c| {
                c.id.application() == app_id && !c.is_am() && c.state == RmContainerState::Running
            })
            .count()
            == 16
    })
    .await;

    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let listed = instance_containers(&docker, h.instance()).await;
    assert_eq!(listed.len(), 16, "one Docker container per task container");
    for summary in &listed {
        let name = summary.names.as_ref().unwrap()[0]
            .trim_start_matches('/')
            .to_string();
        let cid: ContainerId = name
            .parse()
            .expect("named exactly after a YARN container id");
        assert_eq!(cid.epoch, 1);
        assert_eq!(cid.application(), app_id);
        let (allocated, node) = h.inspect(|s| {
            let c = &s.containers[&cid];
            (c.resource, s.nodes[c.node].id.to_string())
        });
        let inspect = docker.inspect_container(&name, None).await.unwrap();
        let hc = inspect.host_config.unwrap();
        let mib = 1024 * 1024;
        assert_eq!(hc.memory, Some(allocated.memory_mb as i64 * mib), "{name}");
        assert_eq!(
            hc.memory_swap, hc.memory,
            "{name}: no swap beyond the limit"
        );
        assert_eq!(hc.cpu_period, Some(100_000));
        let quota = (f64::from(allocated.vcores) * CPU_SCALE * 100_000.0).round() as i64;
        assert_eq!(hc.cpu_quota, Some(quota), "{name}: vcores x scale");
        assert_eq!(hc.cpu_shares, Some(1024 * i64::from(allocated.vcores)));
        let parent = format!("/hadoop-yarn/{cid}");
        assert_eq!(hc.cgroup_parent.as_deref(), Some(parent.as_str()));
        let labels = inspect.config.unwrap().labels.unwrap();
        assert_eq!(labels[CONTAINER_ID_LABEL], name);
        assert_eq!(labels[NODE_ID_LABEL], node);
        let limit = cgroup_memory_limit(&parent, inspect.id.as_deref().unwrap())
            .expect("the container's memory cgroup under /hadoop-yarn/<containerId>");
        assert_eq!(
            limit,
            allocated.memory_mb * 1024 * 1024,
            "{name}: cgroup file"
        );
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.len(), 4, "{per_node:?}");
    assert!(per_node.values().all(|&n| n == 4), "{per_node:?}");

    // FORCEFUL_SHUTDOWN through the RM kills the real process (137) and the AM reruns
    // the task in a new container.
    let victim = listed[0].names.as_ref().unwrap()[0]
        .trim_start_matches('/')
        .to_string();
    let r = preemptor::tls::http_client_builder()
        .build()
        .expect("http client")
        .post(format!(
            "{}/ws/v1/cluster/containers/{victim}/signal/FORCEFUL_SHUTDOWN",
            h.rm_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let victim_id: ContainerId = victim.parse().unwrap();
    wait_until(h, "the killed container to be replaced", 60, |s| {
        s.containers[&victim_id].exit_status == exit::SIGKILL
            && s.containers
                .values()
                .filter(|c| {
                    c.id.application() == app_id
                        && !c.is_am()
                        && c.state == RmContainerState::Running
                })
                .count()
                == 16
    })
    .await;
    assert!(
        docker.inspect_container(&victim, None).await.is_err(),
        "the exited container was removed"
    );

    let report = guard.handle.take().unwrap().shutdown().await.unwrap();
    assert!(report.containers_removed >= 16, "{report:?}");
    assert!(
        instance_containers(&docker, &guard.instance)
            .await
            .is_empty()
    );
    for summary in &listed {
        let name = summary.names.as_ref().unwrap()[0]
            .trim_start_matches('/')
            .to_string();
        assert!(
            !Path::new("/sys/fs/cgroup/memory/hadoop-yarn")
                .join(&name)
                .exists()
                && !Path::new("/sys/fs/cgroup/hadoop-yarn").join(&name).exists(),
            "cgroup parent of {name} left behind"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_tasks_finish_the_application_and_failing_ones_fail_it() {
    let Some((docker, _image, mut guard)) = start_docker(
        "real_tasks_finish_the_application_and_failing_ones_fail_it",
        2,
        Resource::new(4096, 4),
        |c| c.cpu_scale = 0.1,
    )
    .await
    else {
        return;
    };
    let h = guard.handle();
    let ok = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--iterations","4","--rounds-millions","1"],"tasks":2,"memoryMb":512,"vcores":1}"#,
    )
    .unwrap();
    let bad = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":["--no-such-flag"],"tasks":1,"memoryMb":512,"vcores":1,"maxAttempts":2}"#,
    )
    .unwrap();
    let am = Resource::new(1024, 1);
    let ok_app: preemptor::cluster::ApplicationId = submit(h.rm_url(), "ok", "long", &ok, am)
        .await
        .parse()
        .unwrap();
    let bad_app: preemptor::cluster::ApplicationId = submit(h.rm_url(), "bad", "long", &bad, am)
        .await
        .parse()
        .unwrap();
    wait_until(h, "both applications to end", 60, |s| {
        s.apps[&ok_app].is_final() && s.apps[&bad_app].is_final()
    })
    .await;
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let app = crate::emulator_support::get_json(
        &http,
        &format!("{}/ws/v1/cluster/apps/{ok_app}", h.rm_url()),
    )
    .await;
    assert_eq!(app["app"]["state"], "FINISHED");
    assert_eq!(app["app"]["finalStatus"], "SUCCEEDED");
    assert_eq!(app["app"]["progress"], 100.0);
    let app = crate::emulator_support::get_json(
        &http,
        &format!("{}/ws/v1/cluster/apps/{bad_app}", h.rm_url()),
    )
    .await;
    assert_eq!(app["app"]["state"], "FAILED");
    let diagnostics = app["app"]["diagnostics"].as_str().unwrap();
    // MapReduce's wording (a burn job is a MAPREDUCE application), both attempts failed.
    assert!(
        diagnostics.contains("Job failed as tasks failed")
            && diagnostics.contains("the last of 2 attempts"),
        "{diagnostics}"
    );
    assert!(diagnostics.contains("Exit code: 2"), "{diagnostics}");
    let report = guard.handle.take().unwrap().shutdown().await.unwrap();
    assert_eq!(
        report.containers_removed, 0,
        "finished containers were removed as they exited"
    );
    assert!(
        instance_containers(&docker, &guard.instance)
            .await
            .is_empty()
    );
}
