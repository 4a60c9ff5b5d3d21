//! The controller's API served for real on 127.0.0.1:0 with a hub the test drives:
//! `preemptor logs` (library and binary), `preemptor status` and the dashboard in headless
//! Chromium.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use preemptor::cluster::{ContainerState, JobClass, Partition};
use preemptor::controller::api;
use preemptor::controller::hub::{
    ActionRecord, ContainerRow, Hub, NodeStatus, Outcome, QueueStatus, StatusReport, TickSummary,
};
use preemptor::controller::log;
use preemptor::controller::logs::{ControllerClient, Format, LogsError, Output, tail};
use preemptor::resources::{Limits, Resource};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::common::unique_name;

const TOKEN: &str = "c0ntr+ller/token=";

/// The API as the controller builds it, once: its recent log starts when it is built.
fn api_router(hub: &Hub) -> Router {
    // The test servers drop their connections themselves.
    api_router_ending_streams(hub, CancellationToken::new())
}

/// The API whose event streams end when `shutdown` is cancelled, its other routes still
/// answering.
fn api_router_ending_streams(hub: &Hub, shutdown: CancellationToken) -> Router {
    api::router(
        hub.clone(),
        Arc::new(TOKEN.as_bytes().to_vec()),
        shutdown,
        preemptor::controller::operator::Operator::channel().0,
    )
}

/// The API on a real socket, with every connection in a set the test can drop at once
/// (axum's graceful shutdown would wait for open event streams forever).
struct TestServer {
    addr: SocketAddr,
    event_streams: Arc<AtomicUsize>,
    accept: tokio::task::JoinHandle<()>,
}

impl TestServer {
    async fn start(router: &Router, addr: &str) -> TestServer {
        let router = router.clone();
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let event_streams = Arc::new(AtomicUsize::new(0));
        let counter = event_streams.clone();
        let accept = tokio::spawn(async move {
            // Dropped with this task, which aborts every connection.
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let router = router.clone();
                let counter = counter.clone();
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            if req.uri().path() == "/api/v1/events" {
                                counter.fetch_add(1, Ordering::SeqCst);
                            }
                            router.clone().oneshot(req.map(axum::body::Body::new))
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
                while conns.try_join_next().is_some() {}
            }
        });
        TestServer {
            addr,
            event_streams,
            accept,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    async fn kill(mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
    }

    async fn wait_for_event_streams(&self, n: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while self.event_streams.load(Ordering::SeqCst) < n {
            if tokio::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn action(tag: &str, n: u64) -> ActionRecord {
    ActionRecord {
        at_ms: 1_795_000_000_000 + n,
        policy: "graceful".into(),
        action: if n.is_multiple_of(2) {
            "suspend"
        } else {
            "shrink"
        }
        .into(),
        container: Some(format!("container_{tag}_0001_01_{n:06}")),
        application: Some("application_1795000000000_0001".into()),
        queue: Some("root.long".into()),
        node: Some("nm1:8042".into()),
        before: "<4096 MB, 2 vcores>".into(),
        after: "<64 MB, 0.010 vcores>".into(),
        amounts: preemptor::controller::hub::Amounts::default(),
        reason: "root.short pending <2048 MB, 2 vcores> under guarantee".into(),
        latency_ms: Some(20 + n),
        outcome: if n == 3 {
            Outcome::Failed {
                reason: "agent nm1:8049 timed out".into(),
            }
        } else {
            Outcome::Applied
        },
    }
}

#[derive(Clone, Default)]
struct SharedOut(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOut {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }

    async fn wait_for(&self, needle: &str) {
        for _ in 0..200 {
            if self.text().contains(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{needle:?} never printed; output so far:\n{}", self.text());
    }
}

#[tokio::test]
async fn logs_follow_prints_history_then_live_records_across_a_restart() {
    let tag = unique_name("logs").replace('-', "");
    let hub = Hub::new();
    let server = TestServer::start(&api_router(&hub), "127.0.0.1:0").await;
    let addr = server.addr;
    hub.record_action(action(&tag, 1));
    let client = ControllerClient::new(&server.url(), Some(TOKEN.into())).expect("client");
    let out = SharedOut::default();
    let shutdown = CancellationToken::new();
    let how = Output {
        format: Format::Text,
        colour: false,
    };
    let follower = {
        let (out, shutdown) = (out.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut out = out;
            tail(&client, true, how, &mut out, shutdown).await
        })
    };
    out.wait_for(&log::line(&action(&tag, 1))).await;
    hub.record_action(action(&tag, 2));
    out.wait_for(&log::line(&action(&tag, 2))).await;

    // The controller restarts on the same address with a history that overlaps.
    server.kill().await;
    let hub2 = Hub::new();
    let router2 = api_router(&hub2);
    hub2.record_action(action(&tag, 2));
    hub2.record_action(action(&tag, 3));
    let server2 = TestServer::start(&router2, &addr.to_string()).await;
    out.wait_for(&log::line(&action(&tag, 3))).await;
    hub2.record_action(action(&tag, 4));
    out.wait_for(&log::line(&action(&tag, 4))).await;

    shutdown.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), follower)
        .await
        .expect("tail stops on shutdown")
        .expect("join");
    assert!(result.is_ok(), "{result:?}");
    let expected: Vec<String> = (1..=4).map(|n| log::line(&action(&tag, n))).collect();
    assert_eq!(out.text().lines().collect::<Vec<_>>(), expected);
    server2.kill().await;
}

#[tokio::test]
async fn logs_follow_fails_at_once_on_a_refused_token() {
    let hub = Hub::new();
    let server = TestServer::start(&api_router(&hub), "127.0.0.1:0").await;
    let client = ControllerClient::new(&server.url(), Some("wrong".into())).expect("client");
    let how = Output {
        format: Format::Json,
        colour: false,
    };
    let mut out = Vec::new();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        tail(&client, true, how, &mut out, CancellationToken::new()),
    )
    .await
    .expect("no retry loop on a refused token");
    assert!(
        matches!(result, Err(LogsError::Unauthorized { .. })),
        "{result:?}"
    );
    server.kill().await;
}

async fn run_logs_cli(args: &[&str]) -> std::process::Output {
    run_cli("logs", args).await
}

async fn run_cli(command: &str, args: &[&str]) -> std::process::Output {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .arg(command)
        .args(args)
        .env_remove("PREEMPTOR_CONTROLLER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn preemptor");
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("preemptor exits")
        .expect("output")
}

#[tokio::test]
async fn logs_cli_prints_the_recent_log_and_explains_failures() {
    let tag = unique_name("cli").replace('-', "");
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("token");
    let bad = dir.path().join("bad-token");
    let open = dir.path().join("open-token");
    std::fs::write(&good, format!("{TOKEN}\n")).expect("token file");
    std::fs::write(&bad, "not-it").expect("token file");
    std::fs::write(&open, format!("{TOKEN}\n")).expect("token file");
    for (path, mode) in [(&good, 0o600), (&bad, 0o600), (&open, 0o644)] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
    }
    let hub = Hub::new();
    let server = TestServer::start(&api_router(&hub), "127.0.0.1:0").await;
    for n in 1..=3 {
        hub.record_action(action(&tag, n));
    }
    let url = server.url();
    let good = good.to_string_lossy().into_owned();
    let bad = bad.to_string_lossy().into_owned();

    let text = run_logs_cli(&["--controller", &url, "--token-file", &good]).await;
    assert!(text.status.success(), "{text:?}");
    let expected: Vec<String> = (1..=3).map(|n| log::line(&action(&tag, n))).collect();
    // Not a terminal: no colour codes.
    assert_eq!(
        String::from_utf8_lossy(&text.stdout)
            .lines()
            .collect::<Vec<_>>(),
        expected
    );

    let json = run_logs_cli(&[
        "--controller",
        &url,
        "--token-file",
        &good,
        "--format",
        "json",
    ])
    .await;
    assert!(json.status.success(), "{json:?}");
    let records: Vec<ActionRecord> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON record a line"))
        .collect();
    assert_eq!(
        records,
        (1..=3).map(|n| action(&tag, n)).collect::<Vec<_>>()
    );

    let refused = run_logs_cli(&["--controller", &url, "--token-file", &bad, "--follow"]).await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("refused the token"), "{stderr}");

    // Others may read it: refused before anything is sent, as the controller would.
    let open = open.to_string_lossy().into_owned();
    let readable = run_logs_cli(&["--controller", &url, "--token-file", &open]).await;
    assert!(!readable.status.success());
    let stderr = String::from_utf8_lossy(&readable.stderr);
    assert!(stderr.contains("chmod 600"), "{stderr}");

    let missing = run_logs_cli(&["--controller", &url]).await;
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("missing token"),
        "{missing:?}"
    );

    server.kill().await;
    // Nothing listens there any more.
    let gone = run_logs_cli(&["--controller", &url, "--token-file", &good]).await;
    assert!(!gone.status.success());
    let stderr = String::from_utf8_lossy(&gone.stderr);
    assert!(stderr.contains("cannot reach the controller"), "{stderr}");
}

#[tokio::test]
async fn status_cli_shows_what_the_controller_holds_and_explains_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("token");
    let bad = dir.path().join("bad-token");
    std::fs::write(&good, format!("{TOKEN}\n")).expect("token file");
    std::fs::write(&bad, "not-it").expect("token file");
    for path in [&good, &bad] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
    }
    let hub = Hub::new();
    let mut status = cluster_status();
    status.nodes[0].advertised = Resource::new(22464, 17);
    hub.set_status(status);
    hub.record_tick(TickSummary {
        at_ms: 1_795_000_000_500,
        trigger: "timer".into(),
        duration_ms: 8.5,
        actions: 3,
        failed: 1,
        late: 0,
    });
    hub.record_lease(
        "http://127.0.0.1:8049",
        1_794_999_999_000,
        Ok((Some("controller@rm1:8090".into()), 30_000)),
    );
    let server = TestServer::start(&api_router(&hub), "127.0.0.1:0").await;
    let url = server.url();
    let good = good.to_string_lossy().into_owned();
    let bad = bad.to_string_lossy().into_owned();

    let text = run_cli("status", &["--controller", &url, "--token-file", &good]).await;
    assert!(text.status.success(), "{text:?}");
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains("last tick: 2026-11-18T11:06:40.500Z (timer), 8.5 ms, 3 action(s) sent, 1 failed, 0 late"),
        "{out}"
    );
    assert!(out.contains("held: 1 suspended, 1 shrunk"), "{out}");
    let node = out.lines().find(|l| l.starts_with("nm1:8042")).expect(&out);
    assert!(node.contains("<22464 MB, 17 vcores> (raised)"), "{node}");
    assert!(node.contains("held by controller@rm1:8090"), "{node}");
    // The suspended and the shrunk container with the time they were first seen so;
    // the running one is not held.
    for (id, state) in [(2, "suspended"), (3, "shrunk")] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("container_1795000000000_0001_01_{id:06}")))
            .unwrap_or_else(|| panic!("container {id} in:\n{out}"));
        assert!(line.contains(state), "{line}");
        assert!(
            line.contains("2026-11-18T11:06:30.000Z (10.0 s ago)"),
            "{line}"
        );
    }
    assert!(
        !out.contains("container_1795000000000_0001_01_000004"),
        "{out}"
    );

    let json = run_cli(
        "status",
        &[
            "--controller",
            &url,
            "--token-file",
            &good,
            "--format",
            "json",
        ],
    )
    .await;
    assert!(json.status.success(), "{json:?}");
    let served: StatusReport = serde_json::from_slice(&json.stdout).expect("the status as JSON");
    assert_eq!(served, hub.full_status());
    assert_eq!(
        served.nodes[0].lease.as_ref().and_then(|l| l.remaining_ms),
        Some(30_000)
    );

    let refused = run_cli("status", &["--controller", &url, "--token-file", &bad]).await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("refused the token"), "{stderr}");

    server.kill().await;
    let gone = run_cli("status", &["--controller", &url, "--token-file", &good]).await;
    assert!(!gone.status.success());
    let stderr = String::from_utf8_lossy(&gone.stderr);
    assert!(stderr.contains("cannot reach the controller"), "{stderr}");
}

/// `preemptor demo` prints how to watch it; `preemptor status`, run as printed while a
/// burst is on, shows the containers the controller suspended for it. Simulated
/// containers: no Docker needed, and the demo is short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_against_the_demo_shows_what_a_burst_suspended() {
    use tokio::io::AsyncBufReadExt;
    let mut demo = tokio::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args([
            "demo",
            "--runtime",
            "simulated",
            "--policy",
            "immediate",
            "--duration",
            "40s",
            "--drain",
            "10s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn preemptor demo");
    let mut lines = tokio::io::BufReader::new(demo.stdout.take().expect("stdout")).lines();
    let command = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("reading the demo") {
            if let Some(c) = line.trim().strip_prefix("status:") {
                return c.trim().to_string();
            }
        }
        panic!("the demo ended without printing its status command");
    })
    .await
    .expect("the demo prints its status command within 60 s");
    // Keep reading, so that the demo never blocks on a full pipe.
    let drain = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let args: Vec<&str> = command
        .strip_prefix("preemptor status ")
        .unwrap_or_else(|| panic!("not a status command: {command}"))
        .split_whitespace()
        .collect();
    let t0 = std::time::Instant::now();
    let held = loop {
        let out = run_cli("status", &args).await;
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // The node is raised just after the suspension, so one answer may show the
        // container held before the room is advertised: wait for both.
        if let Some(line) = text
            .lines()
            .find(|l| l.starts_with("container_") && l.contains(" suspended "))
            && text.contains("(raised)")
        {
            break line.to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "no suspended container with its node raised shown during the demo's run:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Its time: "(now)" when the status was observed in the tick that first saw it held.
    assert!(
        held.contains("root.long") && held.contains("Z (") && held.contains("<64 MB"),
        "{held}"
    );
    // Interrupted, the demo stops cleanly.
    if let Some(pid) = demo.id() {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status();
    }
    let status = tokio::time::timeout(Duration::from_secs(60), demo.wait())
        .await
        .expect("the demo stops within 60 s of SIGINT")
        .expect("wait");
    drain.abort();
    assert!(
        status.code().is_some(),
        "the demo exited by itself: {status:?}"
    );
}

/// Chromium from PATH (or `$CHROMIUM`). Missing is a failure under `CI=true`.
fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let candidates = std::env::var_os("CHROMIUM")
        .map(|c| vec![PathBuf::from(c)])
        .unwrap_or_default();
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let found = candidates.into_iter().find(|c| c.is_file()).or_else(|| {
        ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .flat_map(|name| on_path.iter().map(move |dir| dir.join(name)))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "{test}: headless Chromium is required under CI=true (apt-get install chromium)"
            );
        }
        eprintln!("SKIPPED {test}: no chromium on PATH (apt-get install chromium)");
    }
    found
}

fn cluster_status() -> StatusReport {
    let container = |id: u32, state, current| ContainerRow {
        id: format!("container_1795000000000_0001_01_{id:06}"),
        application: "application_1795000000000_0001".into(),
        queue: "root.long".into(),
        allocated: Resource::new(4096, 2),
        current,
        state,
        held_since_ms: (state != ContainerState::Running).then_some(1_794_999_990_000),
    };
    StatusReport {
        at_ms: 1_795_000_000_000,
        policy: "graceful".into(),
        observe_only: false,
        rm: "http://127.0.0.1:8088".into(),
        rm_reachable: true,
        queues: vec![
            QueueStatus {
                path: "root.short".into(),
                class: Some(JobClass::Short),
                guaranteed: Resource::new(8192, 8),
                maximum: Resource::new(16384, 16),
                // 6 of the cluster's 16 vcores but 2 of its 16 GB: vcores bind.
                used: Resource::new(2048, 6),
                pending: Resource::new(6144, 6),
                preemption_disabled: true,
            },
            QueueStatus {
                path: "root.long".into(),
                class: Some(JobClass::Long),
                guaranteed: Resource::new(8192, 8),
                maximum: Resource::new(16384, 16),
                used: Resource::new(12288, 6),
                pending: Resource::new(4096, 2),
                preemption_disabled: false,
            },
        ],
        nodes: vec![NodeStatus {
            id: "nm1:8042".into(),
            capacity: Resource::new(16384, 16),
            advertised: Resource::new(16384, 16),
            partition: Partition::General,
            agent: Some("http://127.0.0.1:8049".into()),
            agent_reachable: true,
            lease: None,
            containers: vec![
                container(2, ContainerState::Suspended, Limits::new(64, 10)),
                container(3, ContainerState::Shrunk, Limits::new(2048, 1000)),
                container(4, ContainerState::Running, Limits::new(4096, 2000)),
            ],
        }],
        suspended: 1,
        shrunk: 1,
        reclaimed: Resource::new(6144, 2),
        ..StatusReport::default()
    }
}

/// Runs Chromium on the dashboard. Chromium's virtual time stands still while the page's
/// event stream is open, so once the page connected and `live` ran its steps (200 ms
/// apart), `end_streams` ends the stream: the page's pending refresh then runs against
/// the still-serving API, and Chromium finishes when its time budget runs out.
async fn chromium_on_dashboard(
    chromium: &Path,
    router: &Router,
    end_streams: &CancellationToken,
    profile: &Path,
    mode: &[String],
    live: impl Fn(u64),
) -> std::process::Output {
    let server = TestServer::start(router, "127.0.0.1:0").await;
    let url = format!(
        "{}/?token={}",
        server.url(),
        TOKEN
            .replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    );
    let child = tokio::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,960",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(mode)
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn chromium");
    let connected = server
        .wait_for_event_streams(1, Duration::from_secs(60))
        .await;
    if connected {
        for n in 0..6 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            live(n);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    end_streams.cancel();
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium exits once the event stream is gone")
        .expect("chromium output");
    server.kill().await;
    assert!(
        connected,
        "the page never opened /api/v1/events; chromium said:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Three minutes of ticks 3 s apart ending in `cluster_status()`: the long queue over
/// its guarantee until short jobs arrive, then containers suspended and shrunk.
fn record_ticks(hub: &Hub) {
    let last = cluster_status();
    for n in 0..60u64 {
        let mut s = last.clone();
        s.at_ms = last.at_ms - (59 - n) * 3000;
        let (short, long, suspended, shrunk) = match n {
            0..20 => (Resource::ZERO, Resource::new(14336, 7), 0, 0),
            20..26 => (Resource::new(1024, 2), Resource::new(14336, 7), 0, 0),
            26..32 => (Resource::new(1024, 4), Resource::new(12288, 6), 2, 0),
            32..44 => (Resource::new(2048, 6), Resource::new(12288, 6), 3, 0),
            _ => (last.queues[0].used, last.queues[1].used, 1, 1),
        };
        s.queues[0].used = short;
        s.queues[1].used = long;
        s.suspended = suspended;
        s.shrunk = shrunk;
        // The RM did not answer for two ticks.
        s.rm_reachable = !(38..40).contains(&n);
        hub.set_status(s);
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 24 || !bytes.starts_with(SIGNATURE) || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&bytes[16..20]), be(&bytes[20..24])))
}

#[tokio::test]
async fn dashboard_in_headless_chromium_shows_queues_nodes_and_live_preemptions() {
    let test = "dashboard_in_headless_chromium";
    let Some(chromium) = chromium_or_skip(test) else {
        return;
    };
    let tag = unique_name("dash").replace('-', "");
    let live_tag = format!("{tag}live");
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = Hub::new();
    // One API per Chromium run, each built before anything happened and each ending
    // its event streams on its own.
    let (shot_end, dom_end) = (CancellationToken::new(), CancellationToken::new());
    let shot_router = api_router_ending_streams(&hub, shot_end.clone());
    let dom_router = api_router_ending_streams(&hub, dom_end.clone());
    record_ticks(&hub);
    let last_at = cluster_status().at_ms;
    for (i, wait) in [8200u64, 5100, 900, 350, 420].iter().enumerate() {
        hub.record_short_wait(
            last_at - 100_000 + 12_000 * i as u64,
            format!("application_1795000000000_{:04}", i + 10),
            *wait,
        );
    }
    let before = action(&tag, 1);
    hub.record_action(before.clone());
    hub.record_action(action(&tag, 3));

    // The screenshot: right size, and not a blank page.
    let shot = dir.path().join("dashboard.png");
    let blank = dir.path().join("blank.png");
    chromium_on_dashboard(
        &chromium,
        &shot_router,
        &shot_end,
        &dir.path().join("profile-shot"),
        &[format!("--screenshot={}", shot.display())],
        |n| hub.record_action(action(&format!("{tag}shot"), n)),
    )
    .await;
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    // For a human look: PREEMPTOR_DASHBOARD_PNG=/tmp/dashboard.png cargo test ...
    if let Some(keep) = std::env::var_os("PREEMPTOR_DASHBOARD_PNG") {
        std::fs::write(&keep, &png).expect("copy of the screenshot");
    }
    assert_eq!(png_size(&png), Some((1280, 960)));
    let blank_run = tokio::process::Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,960",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile-blank").display()
        ))
        .arg(format!("--screenshot={}", blank.display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    let blank_ok = tokio::time::timeout(Duration::from_secs(60), blank_run)
        .await
        .is_ok_and(|s| s.is_ok_and(|s| s.success()));
    let blank_png = std::fs::read(&blank).ok().filter(|_| blank_ok);
    let blank_len = blank_png.as_ref().map_or(0, Vec::len);
    // Compressed size tracks content: the dashboard's PNG is many times a blank page's.
    assert!(
        png.len() > 4 * blank_len.max(2000),
        "screenshot looks blank: {} bytes (blank page: {blank_len})",
        png.len()
    );
    let distinct = {
        let mut seen = [false; 256];
        png.iter().for_each(|b| seen[*b as usize] = true);
        seen.iter().filter(|s| **s).count()
    };
    assert!(distinct > 200, "{distinct} distinct byte values");

    // The DOM after live events: the earlier action server-rendered, later ones appended
    // by the page's script from the SSE stream, and a tick with 4 containers suspended
    // swapped into the charts by the page's refresh.
    let dump = chromium_on_dashboard(
        &chromium,
        &dom_router,
        &dom_end,
        &dir.path().join("profile-dom"),
        &["--dump-dom".to_string()],
        |n| {
            hub.record_action(action(&live_tag, n));
            if n == 2 {
                let mut s = cluster_status();
                s.at_ms += 3000;
                s.suspended = 4;
                hub.set_status(s);
                hub.record_tick(TickSummary {
                    at_ms: last_at + 3000,
                    trigger: "timer".into(),
                    duration_ms: 4.0,
                    actions: 3,
                    failed: 0,
                    late: 0,
                });
            }
        },
    )
    .await;
    let dom = String::from_utf8_lossy(&dump.stdout);
    // Top to bottom: summary strip, charts of the last minutes, then the tables.
    let at = |id: &str| dom.find(&format!("id=\"{id}\"")).unwrap_or(usize::MAX);
    let order = [
        "summary", "shares", "held", "waits", "queues", "log", "apps", "nodes",
    ];
    assert!(
        order.windows(2).all(|w| at(w[0]) < at(w[1])),
        "sections out of order or missing:\n{dom}"
    );
    // Each leaf queue's chart names the resource that binds it.
    let chart = |queue: &str| {
        let from = dom
            .find(&format!("data-queue=\"{queue}\""))
            .unwrap_or_else(|| panic!("no chart of {queue}:\n{dom}"));
        let len = dom[from..].find("</figure>").unwrap_or(0);
        dom[from..from + len].to_string()
    };
    let short = chart("root.short");
    assert!(short.contains("data-binds=\"vcores\""), "{short}");
    assert!(short.contains(">vcores bind<"), "{short}");
    assert!(short.contains("<polyline class=\"used\""), "{short}");
    assert!(short.contains("<polyline class=\"guaranteed\""), "{short}");
    assert!(short.contains("RM unreachable"), "{short}");
    assert!(chart("root.long").contains(">memory binds<"));
    // The tick streamed while the page was open reached the held chart; the peak of
    // the recorded ticks was 3.
    let held = &dom[at("held")..at("waits")];
    assert!(
        held.contains("data-suspended=\"4\""),
        "the live tick did not reach the chart:\n{held}"
    );
    assert!(held.contains("suspended: <b>4</b> now, peak 4"), "{held}");
    assert!(held.contains("<polyline class=\"suspended\""), "{held}");
    assert!(
        dom.contains("5 short jobs started"),
        "waits missing:\n{dom}"
    );
    assert!(dom.contains("class=\"wait\""));
    // The queues now, in the dominant resource with both resources in text.
    assert!(dom.contains("root.short"), "queues missing:\n{dom}");
    assert!(
        dom.contains(
            "38% used / 50% guaranteed</td><td>vcores bind</td><td>2048 MB, 6 vcores</td>"
        ),
        "queue table:\n{dom}"
    );
    assert!(dom.contains("<td>8192 MB, 8 vcores</td>"));
    assert!(dom.contains("container_1795000000000_0001_01_000002"));
    assert!(dom.contains("64 / 4096 MB"));
    assert!(
        dom.contains(before.container.as_deref().unwrap_or("")),
        "server-rendered action missing"
    );
    assert!(dom.contains("failed: agent nm1:8049 timed out"));
    let live_rows: Vec<&str> = dom
        .split("<tr ")
        .filter(|row| row.contains("live\"") && row.contains(&live_tag))
        .collect();
    assert!(
        !live_rows.is_empty(),
        "no action arrived through the event stream:\n{dom}"
    );
    assert!(
        live_rows[0].contains("&lt;4096 MB, 2 vcores&gt; → &lt;64 MB, 0.010 vcores&gt;"),
        "{}",
        live_rows[0]
    );
}
