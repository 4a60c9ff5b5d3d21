//! Crash safety with the real `preemptor agent` binary: SIGKILL it with three containers
//! suspended, tear its state file, restart it, and check that the lease expiry resumes all
//! three to exactly their original limits.

use std::fs::OpenOptions;
use std::time::Duration;

use preemptor::resources::{Limits, Resource};

use crate::agent_support::*;
use crate::common::{TestImage, docker_or_skip};

#[tokio::test]
async fn a_killed_agent_restarts_and_resumes_everything_at_lease_expiry() {
    const TEST: &str = "a_killed_agent_restarts_and_resumes_everything_at_lease_expiry";
    let Some(docker) = docker_or_skip(TEST).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-agent-crash").await;
    let ts = unique_cluster_ts();
    let limits = [
        CpuLimit::Nano(1_000_000_000),
        CpuLimit::Nano(500_000_000),
        CpuLimit::Quota {
            quota: 50_000,
            period: 100_000,
        },
    ];
    let mut containers = Vec::new();
    for (i, cpu) in limits.into_iter().enumerate() {
        let name = format!("container_e01_{ts}_0001_01_{:06}", i + 2);
        let c = run_container(
            &docker,
            &image.tag,
            &name,
            cpu,
            256,
            &[
                "--iterations",
                "0",
                "--rounds-millions",
                "1",
                "--memory-mb",
                "16",
            ],
        )
        .await;
        let dirs = cgroup_dirs(&docker, &name).await;
        let cgroup = read_limits(&dirs);
        let docker_view = docker_limits(&docker, &name).await;
        containers.push((c, dirs, cgroup, docker_view));
    }

    let work = tempfile::tempdir().expect("tempdir");
    let state_dir = work.path().join("state");
    let token_file = work.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("token file");
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod token file");

    let mut first = ChildAgent::spawn(&state_dir, &token_file, "60s", work.path());
    let client = first.client();
    client.renew_lease(TEST, None).await.expect("lease");
    for (c, dirs, _, _) in &containers {
        let r = client
            .suspend(&c.name, Resource::new(256, 1), Limits::MIN_FOOTPRINT)
            .await
            .unwrap_or_else(|e| panic!("suspending {}: {e}\n{}", c.name, first.log()));
        assert!(r.changed);
        assert_eq!(read_limits(dirs).memory_bytes, Some(64 << 20));
    }
    for (_, dirs, original, _) in &containers {
        let now = read_limits(dirs);
        // 1% of each container's own CPU ratio: 1 vcore = 1, 0.5 and 0.5 CPUs.
        assert!(now.cpu_quota_us.unwrap_or(u64::MAX) <= 1000, "{now:?}");
        assert_ne!(now, *original);
    }

    // Crash.
    let pid = first.pid();
    first.kill9();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}/status")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/status"))
                .map(|s| s.contains("State:\tZ"))
                .unwrap_or(true),
        "the agent survived SIGKILL"
    );
    // Still throttled: nobody restored anything.
    for (_, dirs, original, _) in &containers {
        assert_ne!(read_limits(dirs), *original);
    }

    // A torn write of the newest state file.
    let current = state_dir.join("agent-state.json");
    let len = std::fs::metadata(&current).expect("state file").len();
    OpenOptions::new()
        .write(true)
        .open(&current)
        .expect("open state")
        .set_len(len / 3)
        .expect("truncate");

    let second = ChildAgent::spawn(&state_dir, &token_file, "3s", work.path());
    let client = second.client();
    let health = client.health().await.expect("healthz");
    let store = health.store.expect("store report");
    assert_eq!(store.source, "previous", "{store:?}\n{}", second.log());
    assert_eq!(store.damaged.len(), 1, "{store:?}");
    let lease = client.lease().await.expect("lease");
    assert_eq!(lease.changed_containers, 3, "{lease:?}\n{}", second.log());
    assert!(lease.holder.is_none());

    // Nobody renews: within the 3 s lease (plus slack) all three are back.
    for (c, dirs, original, docker_original) in &containers {
        wait_until(
            Duration::from_secs(30),
            &format!("{} to be resumed", c.name),
            || async { read_limits(dirs) == *original },
        )
        .await;
        assert_eq!(
            docker_limits(&docker, &c.name).await,
            *docker_original,
            "{}",
            c.name
        );
    }
    wait_until(
        Duration::from_secs(10),
        "the agent to forget all three",
        || async {
            client
                .lease()
                .await
                .map(|l| l.changed_containers == 0)
                .unwrap_or(false)
        },
    )
    .await;
    let list = client.containers().await.expect("list");
    for (c, dirs, original, _) in &containers {
        let status = list
            .iter()
            .find(|s| s.container.to_string() == c.name)
            .unwrap_or_else(|| panic!("{} not listed", c.name));
        assert!(!status.changed && status.running, "{status:?}");
        assert_eq!(read_limits(dirs), *original, "{} left throttled", c.name);
    }
    let log = second.log();
    assert!(log.contains("lease expired"), "{log}");
}
