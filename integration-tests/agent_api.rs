//! The agent's HTTP contract over a real socket, with a real Docker daemon behind it.

use std::time::Duration;

use preemptor::agent::writer::WritePath;
use preemptor::resources::{Limits, Resource};

use crate::agent_support::*;
use crate::common::{TestImage, docker_or_skip};

async fn raw(
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    body: Option<String>,
) -> (u16, serde_json::Value) {
    let mut req = preemptor::tls::http_client_builder()
        .build()
        .expect("http client")
        .request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let json = resp.json().await.unwrap_or(serde_json::Value::Null);
    (status, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_follow_the_contract() {
    const TEST: &str = "http_errors_follow_the_contract";
    let Some(_docker) = docker_or_skip(TEST).await else {
        return;
    };
    let a = start_agent(WritePath::Docker, Duration::from_secs(300)).await;
    let base = a.url.clone();
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;

    // 401 without the token and with a wrong one; /healthz needs none.
    let (s, body) = raw(get.clone(), format!("{base}/v1/containers"), None, None).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (401, Some("unauthorized")),
        "{body}"
    );
    let (s, _) = raw(
        get.clone(),
        format!("{base}/v1/containers"),
        Some("nope"),
        None,
    )
    .await;
    assert_eq!(s, 401);
    let (s, _) = raw(get.clone(), format!("{base}/metrics"), None, None).await;
    assert_eq!(s, 401);
    let (s, _) = raw(
        post.clone(),
        format!("{base}/v1/actions"),
        None,
        Some("{}".into()),
    )
    .await;
    assert_eq!(s, 401);
    let health = a.client.health().await.expect("healthz");
    assert_eq!(health.status, "ok");
    assert!(!health.dry_run);
    assert_eq!(health.containers, "docker");

    // 413 on an oversized body.
    let huge = format!(
        r#"{{"container":"container_1700000000000_0001_01_000002","action":"resume","pad":"{}"}}"#,
        "x".repeat(200 * 1024)
    );
    let (s, body) = raw(
        post.clone(),
        format!("{base}/v1/actions"),
        Some(TOKEN),
        Some(huge),
    )
    .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );

    // 400 with a reason on malformed JSON and on a body of the wrong shape.
    let (s, body) = raw(
        post.clone(),
        format!("{base}/v1/actions"),
        Some(TOKEN),
        Some("{\"container\": ".into()),
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert_eq!(body["error"], "bad_request");
    assert!(!body["reason"].as_str().unwrap_or("").is_empty(), "{body}");
    let (s, body) = raw(
        post.clone(),
        format!("{base}/v1/actions"),
        Some(TOKEN),
        Some(r#"{"container":"container_1700000000000_0001_01_000002","action":"suspend"}"#.into()),
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body["reason"].as_str().unwrap_or("").contains("allocated"),
        "{body}"
    );
    let (s, body) = raw(
        post.clone(),
        format!("{base}/v1/lease"),
        Some(TOKEN),
        Some(r#"{"controller":"t","timeoutMs":"soon"}"#.into()),
    )
    .await;
    assert_eq!(s, 400, "{body}");

    // 404 for a YARN container that is not on this node.
    let ghost = format!("container_e01_{}_0001_01_000002", unique_cluster_ts());
    a.client.renew_lease(TEST, None).await.expect("lease");
    let err = a
        .client
        .suspend(&ghost, Resource::new(1024, 1), Limits::MIN_FOOTPRINT)
        .await
        .expect_err("unknown container");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(404), "{err}");
    assert_eq!(err.code(), Some("unknown_container"));
    let err = a
        .client
        .container(&ghost)
        .await
        .expect_err("unknown container");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(404), "{err}");
    let (s, body) = raw(
        get.clone(),
        format!("{base}/v1/containers/{ghost}"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (404, Some("unknown_container")),
        "{body}"
    );

    // A reference that could escape Docker's URL space is refused before Docker sees it.
    let (s, body) = raw(
        post.clone(),
        format!("{base}/v1/actions"),
        Some(TOKEN),
        Some(r#"{"container":"../../images/json","action":"kill"}"#.into()),
    )
    .await;
    assert_eq!(s, 400, "{body}");

    // A target below the floor is refused with the reason.
    let err = a
        .client
        .suspend(&ghost, Resource::new(1024, 1), Limits::new(8, 10))
        .await
        .expect_err("below the floor");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(400), "{err}");

    // Another controller cannot take a live lease.
    let err = a
        .client
        .renew_lease("someone-else", None)
        .await
        .expect_err("lease held");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(409), "{err}");

    let metrics = a.client.metrics().await.expect("metrics");
    assert!(
        metrics.contains("preemptor_agent_http_requests_total{status=\"401\"} 4"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_controller_no_throttling() {
    const TEST: &str = "no_controller_no_throttling";
    let Some(docker) = docker_or_skip(TEST).await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-agent-lease").await;
    let name = format!("container_e01_{}_0001_01_000002", unique_cluster_ts());
    let _c = run_container(
        &docker,
        &image.tag,
        &name,
        CpuLimit::Nano(500_000_000),
        256,
        &["--iterations", "0", "--rounds-millions", "1"],
    )
    .await;
    let dirs = cgroup_dirs(&docker, &name).await;
    let original = read_limits(&dirs);
    let a = start_agent(WritePath::Docker, Duration::from_millis(300)).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!a.client.lease().await.expect("lease").live);

    // Without a live lease nothing is throttled.
    let err = a
        .client
        .suspend(&name, Resource::new(256, 1), Limits::MIN_FOOTPRINT)
        .await
        .expect_err("no lease");
    assert_eq!(err.status().map(|s| s.as_u16()), Some(409), "{err}");
    assert_eq!(err.code(), Some("lease"));
    assert_eq!(read_limits(&dirs), original);

    // With one, it is; when the controller stops renewing, the agent resumes it.
    let status = a
        .client
        .renew_lease(TEST, Some(Duration::from_millis(1500)))
        .await
        .expect("renew");
    assert!(status.live && status.holder.as_deref() == Some(TEST));
    let r = a
        .client
        .shrink(&name, Resource::new(256, 1), Limits::new(128, 250))
        .await
        .expect("shrink");
    assert_eq!(
        r.cgroup.map(|c| c.cpu_quota_us),
        Some(Some(12_500)),
        "{r:?}"
    );
    assert_eq!(a.client.lease().await.expect("lease").changed_containers, 1);
    wait_until(
        Duration::from_secs(15),
        "the lease expiry to resume the container",
        || async { read_limits(&dirs) == original },
    )
    .await;
    wait_until(
        Duration::from_secs(5),
        "the agent to forget the container",
        || async {
            a.client
                .lease()
                .await
                .map(|l| l.changed_containers == 0)
                .unwrap_or(false)
        },
    )
    .await;
}
