//! The agent against real containers: CPU suspend/resume on both write paths, memory
//! reclamation into swap, and a decoy that must never be touched.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use preemptor::agent::api::{ActionKind, AgentEvent, DockerEventKind};
use preemptor::agent::limits::CgroupVersion;
use preemptor::agent::writer::WritePath;
use preemptor::cluster::ContainerState;
use preemptor::resources::{Limits, Resource};

use crate::agent_support::*;
use crate::common::{TestImage, docker_or_skip, unique_name};

async fn suspend_then_resume_cpu_bound(path: WritePath, test: &str) {
    let Some(docker) = docker_or_skip(test).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-agent-cpu").await;
    let name = format!("container_e01_{}_0001_01_000002", unique_cluster_ts());
    let c = run_container(
        &docker,
        &image.tag,
        &name,
        CpuLimit::Nano(1_000_000_000),
        512,
        &["--threads", "1", "--iterations", "0"],
    )
    .await;
    let dirs = cgroup_dirs(&docker, &name).await;
    let original_cgroup = read_limits(&dirs);
    let original_docker = docker_limits(&docker, &name).await;
    assert_eq!(original_cgroup.cpu_quota_us, Some(100_000));

    let a = start_agent(path, Duration::from_secs(300)).await;
    let mut events = a.client.events().await.expect("event stream");
    a.client.renew_lease(test, None).await.expect("lease");

    let before = cpu_fraction(&dirs, Duration::from_secs(2)).await;
    let suspend = a
        .client
        .suspend(&name, Resource::new(512, 1), Limits::MIN_FOOTPRINT)
        .await
        .expect("suspend");
    assert_eq!(suspend.state, ContainerState::Suspended);
    assert!(suspend.changed && suspend.throttle_confirmed, "{suspend:?}");
    assert_eq!(suspend.path, Some(path));
    let cg = read_limits(&dirs);
    assert_eq!((cg.cpu_quota_us, cg.cpu_period_us), (Some(1000), 100_000));
    assert_eq!(cg.memory_bytes, Some(64 << 20));
    // memory+swap keeps its budget; Docker's view follows on the Docker path only.
    assert_eq!(cg.memory_swap_bytes, original_cgroup.memory_swap_bytes);
    let during_docker = docker_limits(&docker, &name).await;
    match path {
        WritePath::Docker => assert_eq!(during_docker.nano_cpus, 10_000_000),
        WritePath::Direct => assert_eq!(during_docker, original_docker),
    }

    let suspended = cpu_fraction(&dirs, Duration::from_secs(2)).await;
    // Suspending again is a no-op.
    let again = a
        .client
        .suspend(&name, Resource::new(512, 1), Limits::MIN_FOOTPRINT)
        .await
        .expect("suspend again");
    assert!(!again.changed, "{again:?}");

    let r = a
        .client
        .resume(&c.docker_id)
        .await
        .expect("resume by Docker id");
    assert_eq!(r.state, ContainerState::Running);
    assert!(r.changed);
    let after = cpu_fraction(&dirs, Duration::from_secs(2)).await;
    println!(
        "{test}: CPU of a core before {before:.3}, suspended {suspended:.4}, after resume {after:.3}; suspend took {:.1} ms (CPU write {:.1} ms, cpu.stat showed the throttle {:.1} ms later, state store {:.1} ms)",
        suspend.timings.total_ms,
        suspend.timings.cpu_ms,
        suspend.timings.throttle_wait_ms,
        suspend.timings.store_ms
    );
    assert!(
        suspended < 0.02,
        "suspended container used {suspended:.4} of a core"
    );
    assert!(
        after > (suspended * 10.0).max(0.05),
        "CPU did not come back: {after:.3} of a core after resume (suspended {suspended:.4})"
    );
    assert!(
        before > 0.05,
        "the burner was not burning before: {before:.3}"
    );

    // Every limit is exactly the original, in the cgroup files and in Docker's view.
    assert_eq!(read_limits(&dirs), original_cgroup);
    assert_eq!(docker_limits(&docker, &name).await, original_docker);
    let status = a.client.container(&name).await.expect("status");
    assert!(!status.changed);
    assert_eq!(status.state, ContainerState::Running);
    assert!(status.attained_service_ms.unwrap_or(0) > 0);

    // The event stream carried both results.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 3 && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), events.next()).await {
            Ok(Some(Ok(AgentEvent::Action { result }))) if result.container.to_string() == name => {
                seen.push(result.action)
            }
            Ok(Some(Ok(_))) => {}
            _ => break,
        }
    }
    assert_eq!(
        seen,
        vec![ActionKind::Suspend, ActionKind::Suspend, ActionKind::Resume]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume_a_cpu_bound_container_through_docker() {
    suspend_then_resume_cpu_bound(
        WritePath::Docker,
        "suspend_and_resume_a_cpu_bound_container_through_docker",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume_a_cpu_bound_container_through_cgroup_files() {
    suspend_then_resume_cpu_bound(
        WritePath::Direct,
        "suspend_and_resume_a_cpu_bound_container_through_cgroup_files",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_reclaimed_into_swap_and_the_container_finishes() {
    const TEST: &str = "memory_is_reclaimed_into_swap_and_the_container_finishes";
    let Some(docker) = docker_or_skip(TEST).await else {
        return;
    };
    let swap = match SwapFile::create(1024) {
        Ok(s) => s,
        Err(e) => panic!(
            "{TEST}: cannot create a swap file (root and a swap-capable filesystem are required): {e}"
        ),
    };
    let ws = working_set_container(&docker, "preemptor-agent-mem", 700).await;
    let (name, dirs) = (ws.name.clone(), ws.dirs.clone());
    let accounted = dirs.swap_accounting().expect("reading the cgroup");
    println!(
        "{TEST}: swap accounting (memory+swap limits) is {}",
        if accounted {
            "available: MemorySwap is enforced"
        } else {
            "NOT available on this kernel: Docker's MemorySwap cannot be enforced, swap is unlimited per container"
        }
    );
    let a = start_agent(WritePath::Docker, Duration::from_secs(300)).await;
    let mut events = a.client.events().await.expect("event stream");
    a.client.renew_lease(TEST, None).await.expect("lease");
    let r = a
        .client
        .suspend(&name, Resource::new(512, 1), Limits::MIN_FOOTPRINT)
        .await
        .expect("suspend");
    let before = r.memory_before_bytes.expect("memory before");
    let after = r.memory_after_bytes.expect("memory after");
    let reclaimed = before.saturating_sub(after) as f64 / (1u64 << 30) as f64;
    let per_gb = |ms: f64| ms / 1000.0 / reclaimed.max(1e-9);
    println!(
        "{TEST}: reclaimed {:.0} MB in {:.0} ms (page-out {:.0} ms) = {:.2} s per GB (BIG-C ~3 s/GB, target < 1 s/GB); whole memory phase with Docker's update {:.0} ms = {:.2} s per GB; {} EBUSY refusals; CPU throttle visible after {:.0} ms",
        reclaimed * 1024.0,
        r.timings.reclaim_ms,
        r.timings.pageout_ms,
        per_gb(r.timings.reclaim_ms),
        r.timings.memory_ms,
        per_gb(r.timings.memory_ms),
        r.memory_busy_retries,
        r.timings.throttle_wait_ms
    );
    assert!(
        r.timings.reclaim_ms > 0.0 && r.timings.reclaim_ms <= r.timings.memory_ms,
        "reclaim {} ms is not part of the memory phase's {} ms",
        r.timings.reclaim_ms,
        r.timings.memory_ms
    );
    assert!(
        reclaimed * 1024.0 > 150.0,
        "only {:.0} MB reclaimed",
        reclaimed * 1024.0
    );
    let s = dirs.sample().expect("sample");
    assert!(
        s.memory_usage_bytes <= 64 << 20,
        "usage {} above the 64 MB limit",
        s.memory_usage_bytes
    );
    assert!(
        s.swap_bytes > 150 << 20 || !accounted,
        "working set not in swap: {} bytes",
        s.swap_bytes
    );
    let status = a.client.container(&name).await.expect("status");
    assert!(
        status.running && status.state == ContainerState::Suspended,
        "{status:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    a.client.resume(&name).await.expect("resume");
    let exit = tokio::time::timeout(Duration::from_secs(300), async {
        let mut wait = docker.wait_container(&name, None);
        wait.next().await
    })
    .await
    .expect("the container finishes after resume");
    let code = match exit {
        Some(Ok(w)) => w.status_code,
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
        other => panic!("waiting for {name}: {other:?}"),
    };
    let state = inspect(&docker, &name).await.state.unwrap_or_default();
    assert_eq!(
        state.oom_killed,
        Some(false),
        "the container was OOM-killed"
    );
    assert_eq!(code, 0, "the container failed after resume");
    // No oom event either.
    while let Ok(Some(Ok(ev))) =
        tokio::time::timeout(Duration::from_millis(500), events.next()).await
    {
        if let AgentEvent::Docker {
            container, kind, ..
        } = ev
        {
            assert!(
                !(container.to_string() == name && kind == DockerEventKind::Oom),
                "OOM event for {name}"
            );
        }
    }
    drop(ws);
    drop(swap);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decoy_container_is_never_touched_even_by_docker_id() {
    const TEST: &str = "a_decoy_container_is_never_touched_even_by_docker_id";
    let Some(docker) = docker_or_skip(TEST).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-agent-decoy").await;
    let name = unique_name("preemptor-decoy");
    let decoy = run_container(
        &docker,
        &image.tag,
        &name,
        CpuLimit::Quota {
            quota: 50_000,
            period: 100_000,
        },
        128,
        &["--iterations", "0", "--rounds-millions", "1"],
    )
    .await;
    let dirs = cgroup_dirs(&docker, &name).await;
    let original_cgroup = read_limits(&dirs);
    let original_docker = docker_limits(&docker, &name).await;
    let a = start_agent(WritePath::Direct, Duration::from_secs(300)).await;
    a.client.renew_lease(TEST, None).await.expect("lease");

    let short_id = &decoy.docker_id[..12];
    for reference in [name.as_str(), decoy.docker_id.as_str(), short_id] {
        for attempt in [
            a.client
                .suspend(reference, Resource::new(128, 1), Limits::MIN_FOOTPRINT)
                .await,
            a.client
                .shrink(reference, Resource::new(128, 1), Limits::new(64, 100))
                .await,
            a.client.resume(reference).await,
            a.client.kill(reference).await,
        ] {
            let err = attempt.expect_err("an action on a non-YARN container must fail");
            assert_eq!(err.status().map(|s| s.as_u16()), Some(403), "{err}");
            assert_eq!(err.code(), Some("not_yarn"), "{err}");
        }
        let err = a.client.container(reference).await.expect_err("status");
        assert_eq!(err.status().map(|s| s.as_u16()), Some(403), "{err}");
    }
    assert!(
        a.client
            .containers()
            .await
            .expect("list")
            .iter()
            .all(|c| c.docker_id != decoy.docker_id),
        "the decoy is listed"
    );
    assert_eq!(read_limits(&dirs), original_cgroup);
    assert_eq!(docker_limits(&docker, &name).await, original_docker);
    let state = inspect(&docker, &name).await.state.unwrap_or_default();
    assert_eq!(state.running, Some(true), "the decoy was stopped");
    let metrics = a.client.metrics().await.expect("metrics");
    assert!(
        metrics.contains("preemptor_agent_refused_total 15"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shrunk_container_that_swaps_is_frozen_then_killed() {
    const TEST: &str = "a_shrunk_container_that_swaps_is_frozen_then_killed";
    let Some(docker) = docker_or_skip(TEST).await else {
        return;
    };
    let swap =
        SwapFile::create(1024).unwrap_or_else(|e| panic!("{TEST}: cannot create a swap file: {e}"));
    let ws = working_set_container(&docker, "preemptor-agent-swap", 0).await;
    let (name, dirs) = (ws.name.clone(), ws.dirs.clone());
    let a = start_agent(WritePath::Docker, Duration::from_secs(300)).await;
    let mut events = a.client.events().await.expect("event stream");
    a.client.renew_lease(TEST, None).await.expect("lease");

    // A graceful step that leaves the working set no room: it keeps faulting pages back.
    let r = a
        .client
        .shrink(&name, Resource::new(512, 1), Limits::new(128, 1000))
        .await
        .expect("shrink");
    assert_eq!(r.state, ContainerState::Shrunk);
    let mut frozen_event = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while frozen_event.is_none() && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), events.next()).await {
            Ok(Some(Ok(AgentEvent::SwapDetected {
                container,
                pages_per_sec,
                frozen,
            }))) if container.to_string() == name => frozen_event = Some((pages_per_sec, frozen)),
            Ok(Some(Ok(_))) => {}
            Err(_) => eprintln!(
                "{TEST}: still waiting; status {:?}",
                a.client.container(&name).await
            ),
            Ok(other) => panic!("event stream ended: {other:?}"),
        }
    }
    let (rate, frozen) = frozen_event.expect("a swapDetected event");
    println!("{TEST}: swapping at {rate:.0} pages/s after the shrink; frozen: {frozen}");
    assert!(frozen);
    assert_eq!(read_limits(&dirs).cpu_quota_us, Some(1000));
    let status = a.client.container(&name).await.expect("status");
    assert!(status.swapping && status.frozen, "{status:?}");
    // No more memory is taken from a swapping container.
    let err = a
        .client
        .shrink(&name, Resource::new(512, 1), Limits::new(96, 1000))
        .await
        .expect_err("memory cut while swapping");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(409), "{err}");

    let r = a.client.kill(&name).await.expect("kill");
    assert_eq!(r.state, ContainerState::Killed);
    assert!(r.changed);
    let mut kinds = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !kinds.contains(&DockerEventKind::Die) && Instant::now() < deadline {
        if let Ok(Some(Ok(AgentEvent::Docker {
            container, kind, ..
        }))) = tokio::time::timeout(Duration::from_secs(5), events.next()).await
            && container.to_string() == name
        {
            kinds.push(kind);
        }
    }
    assert!(
        kinds.contains(&DockerEventKind::Kill) && kinds.contains(&DockerEventKind::Die),
        "{kinds:?}"
    );
    let again = a.client.kill(&name).await.expect("kill again");
    assert!(!again.changed);
    assert!(a.client.lease().await.expect("lease").changed_containers == 0);
    drop(ws);
    drop(swap);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_that_cannot_reclaim_memory_is_rolled_back() {
    const TEST: &str = "a_suspend_that_cannot_reclaim_memory_is_rolled_back";
    let Some(docker) = docker_or_skip(TEST).await else {
        return;
    };
    let ws = working_set_container(&docker, "preemptor-agent-rollback", 0).await;
    if ws.dirs.version != CgroupVersion::V1 {
        // v2 has no per-cgroup swappiness to make memory unreclaimable; not applicable.
        println!("{TEST}: not applicable on cgroup v2");
        return;
    }
    // Anonymous memory of a cgroup with swappiness 0 cannot be reclaimed: the kernel
    // refuses the lower limit with EBUSY, whatever swap the host has.
    std::fs::write(ws.dirs.memory.join("memory.swappiness"), "0").expect("memory.swappiness");
    let original = read_limits(&ws.dirs);
    let original_docker = docker_limits(&docker, &ws.name).await;
    let a = start_agent_with(WritePath::Docker, Duration::from_secs(300), |c| {
        c.proactive_reclaim = false;
        c.memory_timeout = Duration::from_secs(2);
    })
    .await;
    a.client.renew_lease(TEST, None).await.expect("lease");
    let err = a
        .client
        .suspend(&ws.name, Resource::new(512, 1), Limits::MIN_FOOTPRINT)
        .await
        .expect_err("memory cannot be reclaimed");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(409), "{err}");
    assert!(err.to_string().contains("device or resource busy"), "{err}");
    // The CPU throttle that went first was put back too; nothing is recorded.
    assert_eq!(read_limits(&ws.dirs), original);
    assert_eq!(docker_limits(&docker, &ws.name).await, original_docker);
    let status = a.client.container(&ws.name).await.expect("status");
    assert!(status.running && !status.changed, "{status:?}");
    assert_eq!(a.client.lease().await.expect("lease").changed_containers, 0);
}
