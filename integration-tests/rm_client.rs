//! The RM client against the emulator's real REST API, and against small stand-ins for
//! what cannot run here: a standby ResourceManager of an HA pair, an RM whose answers
//! hold schema surprises, and an RM that goes away mid-request.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use preemptor::cluster::{ApplicationId, ContainerId, NodeId};
use preemptor::config::settings::RmSettings;
use preemptor::emulator::state::exit;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;
use preemptor::yarn::dto::{NodeLabelInfo, SignalContainerCommand, YarnApplicationState};
use preemptor::yarn::{AppsQuery, Error, Recovery, RmClient};

use crate::emulator_support::{submit, wait_until};

const NODE: Resource = Resource::new(8192, 8);
const AM: Resource = Resource::new(1024, 1);

pub async fn start_emulator(nodes: usize) -> EmulatorHandle {
    let mut config = EmulatorConfig::local(nodes, NODE, RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    Emulator::start(config).await.expect("emulator starts")
}

pub fn client(addresses: &[&str]) -> RmClient {
    RmClient::new(&RmSettings {
        addresses: addresses.iter().map(|a| a.to_string()).collect(),
        user_name: Some("alice".into()),
        request_timeout_ms: 3000,
        max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
        tls: Default::default(),
        kerberos: None,
    })
    .expect("client")
}

/// Long-running 1 GB tasks (simulated), so containers stay put during a test.
pub fn tasks(n: u32) -> WorkloadSpec {
    WorkloadSpec::parse(&format!(
        r#"{{"kernel":"burn","args":[],"tasks":{n},"memoryMb":1024,"vcores":1,"simulatedDurationMs":600000}}"#
    ))
    .expect("workload spec")
}

/// An address nothing listens on.
pub async fn dead_address() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

// ------------------------------------------------------------------ stand-in RMs

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    /// How long the server waits before answering.
    pub delay: Duration,
}

impl Reply {
    pub fn new(status: u16, headers: Vec<(&'static str, String)>, body: &str) -> Reply {
        Reply {
            status,
            headers,
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn json(body: &str) -> Reply {
        Reply::new(200, vec![("content-type", "application/json".into())], body)
    }
}

type Handler = dyn Fn(&str, &str) -> Reply + Send + Sync;

/// An HTTP server answering with `handler(path, query)` and recording every
/// `path?query` it was asked; stopped when dropped.
pub struct MockRm {
    pub url: String,
    pub seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MockRm {
    pub async fn start(handler: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> MockRm {
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |req: Request| {
            let handler = handler.clone();
            let log = log.clone();
            async move {
                let path = req.uri().path().to_string();
                let query = req.uri().query().unwrap_or("").to_string();
                log.lock().unwrap().push(format!("{path}?{query}"));
                let r = handler(&path, &query);
                tokio::time::sleep(r.delay).await;
                let mut resp = Response::new(Body::from(r.body));
                *resp.status_mut() = StatusCode::from_u16(r.status).unwrap();
                for (k, v) in r.headers {
                    resp.headers_mut().insert(k, v.parse().unwrap());
                }
                resp
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        MockRm { url, seen, task }
    }
}

impl Drop for MockRm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An RM that goes away mid-request, as a stopped RM behind a kept-alive connection
/// does: its k-th `/info` answers the k-th of `states` (the last one from then on); any
/// other request is read and the connection closed without an answer.
pub struct BreakingRm {
    pub url: String,
    /// Request lines of the requests it dropped.
    pub dropped: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl BreakingRm {
    pub async fn start(states: &'static [&'static str]) -> BreakingRm {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let dropped = Arc::new(Mutex::new(Vec::new()));
        let log = dropped.clone();
        let infos = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (log, infos) = (log.clone(), infos.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let line = head.lines().next().unwrap_or("").to_string();
                    if !line.contains("/ws/v1/cluster/info") {
                        log.lock().unwrap().push(line);
                        return;
                    }
                    let k = infos.fetch_add(1, Ordering::SeqCst);
                    let state = states[k.min(states.len().saturating_sub(1))];
                    let body = info_json(state);
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                });
            }
        });
        BreakingRm { url, dropped, task }
    }
}

impl Drop for BreakingRm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn info(ha_state: &str) -> Reply {
    Reply::json(&info_json(ha_state))
}

/// The body of an RM's `/ws/v1/cluster/info` in HA state `ha_state`.
pub fn info_json(ha_state: &str) -> String {
    format!(r#"{{"clusterInfo":{{"id":1,"state":"STARTED","haState":"{ha_state}"}}}}"#)
}

/// A standby as RMWebAppFilter answers: `/info` itself, everything else a 307 to the
/// active RM.
pub fn standby_of(active: String) -> impl Fn(&str, &str) -> Reply + Send + Sync {
    move |path, query| {
        if path == "/ws/v1/cluster/info" {
            return info("STANDBY");
        }
        let target = format!("{active}{path}?{query}");
        Reply::new(
            307,
            vec![
                ("location", target.clone()),
                ("content-type", "text/plain".into()),
            ],
            &format!("This is standby RM. The redirect url is: {target}\n"),
        )
    }
}

/// An RM that was active when first asked and has become a standby since.
pub fn demoted(
    then: impl Fn(&str, &str) -> Reply + Send + Sync,
) -> impl Fn(&str, &str) -> Reply + Send + Sync {
    let asked = AtomicUsize::new(0);
    move |path, query| {
        if path == "/ws/v1/cluster/info" && asked.fetch_add(1, Ordering::SeqCst) == 0 {
            return info("ACTIVE");
        }
        then(path, query)
    }
}

/// A client that found `then` (wrapped in [`demoted`]) active, just before it became a
/// standby of `rm`.
pub async fn client_before_failover(
    then: impl Fn(&str, &str) -> Reply + Send + Sync + 'static,
    rm: &str,
) -> (MockRm, RmClient) {
    let was_active = MockRm::start(demoted(then)).await;
    let c = client(&[&was_active.url, rm]);
    assert_eq!(c.active_rm().await.unwrap(), was_active.url);
    (was_active, c)
}

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_matches_the_emulator_and_costs_one_call_per_running_app() {
    let h = start_emulator(2).await;
    let rm = h.rm_url().to_string();
    // Fill the cluster (16 GB): long 7 GB, short 9 GB with 2 tasks left pending, and
    // one more application whose AM finds no room.
    let long = submit(&rm, "long-job", "long", &tasks(6), AM).await;
    let id = |s: &str| s.parse::<ApplicationId>().unwrap();
    let held = |h: &EmulatorHandle, app: ApplicationId| h.inspect(|s| s.app_containers(app).len());
    wait_until(&h, "the long job's 7 containers", 15, |s| {
        s.app_containers(id(&long)).len() == 7
    })
    .await;
    let short = submit(&rm, "short-job", "short", &tasks(10), AM).await;
    wait_until(&h, "the short job's 9 containers", 15, |s| {
        s.app_containers(id(&short)).len() == 9
    })
    .await;
    let waiting = submit(&rm, "waiting", "long", &tasks(1), AM).await;
    assert_eq!(held(&h, id(&waiting)), 0);

    let c = client(&[&rm]);
    let snap = c.snapshot().await.expect("snapshot");
    assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
    assert_eq!(snap.active_rm, rm);
    assert_eq!(snap.cluster.id, h.cluster_timestamp() as i64);
    assert_eq!(snap.cluster.ha_state, "ACTIVE");

    let apps: BTreeSet<String> = snap.apps.iter().map(|a| a.id.clone()).collect();
    assert_eq!(
        apps,
        BTreeSet::from([long.clone(), short.clone(), waiting.clone()])
    );
    let state = |app: &str| snap.apps.iter().find(|a| a.id == app).unwrap().state;
    assert_eq!(state(&long), YarnApplicationState::Running);
    assert_eq!(state(&waiting), YarnApplicationState::Accepted);
    let short_info = snap.apps.iter().find(|a| a.id == short).unwrap();
    let pending: i64 = short_info
        .resource_requests
        .as_ref()
        .expect("resource requests are asked for")
        .iter()
        .map(|r| r.num_containers)
        .sum();
    assert_eq!(pending, 2);

    let listed: BTreeSet<ContainerId> = snap
        .containers
        .iter()
        .map(|c| c.container_id.parse().unwrap())
        .collect();
    let live: BTreeSet<ContainerId> = h.inspect(|s| {
        [id(&long), id(&short)]
            .iter()
            .flat_map(|a| s.app_containers(*a).into_iter().map(|c| c.id))
            .collect()
    });
    assert_eq!(listed, live);
    assert_eq!(listed.len(), 16);

    let nodes: Vec<&str> = snap.nodes.iter().map(|n| n.id.as_str()).collect();
    let held_nodes: Vec<String> = h.nodes().iter().map(|n| n.id.to_string()).collect();
    assert_eq!(nodes, held_nodes);
    let leaves: BTreeSet<&str> = snap
        .scheduler
        .children()
        .iter()
        .filter(|q| q.is_leaf())
        .map(|q| q.queue_name.as_str())
        .collect();
    assert_eq!(leaves, BTreeSet::from(["long", "short"]));

    // First snapshot: /info, /scheduler, /nodes, /apps, then /appattempts and
    // /containers per running application. Later ones reuse the attempts.
    assert_eq!(c.stats().requests, 4 + 2 * 2);
    let again = c.snapshot().await.expect("second snapshot");
    assert_eq!(c.stats().requests, 8 + 4 + 2);
    assert_eq!(again.containers.len(), 16);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_calls_act_on_the_emulator() {
    let h = start_emulator(2).await;
    let rm = h.rm_url().to_string();
    let c = client(&[&rm]);
    let new = c.new_application().await.unwrap();
    assert_eq!(new.maximum_resource_capability.to_resource(), NODE);
    let context = tasks(2).submission(&new.application_id, "victim", "long", vec![], AM);
    let app_id = c.submit_application(&context).await.unwrap();
    assert_eq!(app_id.to_string(), new.application_id);
    let user = h.inspect(|s| s.apps[&app_id].user.clone());
    assert_eq!(user, "alice", "submitted as ?user.name=");
    wait_until(&h, "3 containers", 15, |s| {
        s.app_containers(app_id).len() == 3
    })
    .await;

    let metrics = c.cluster_metrics().await.unwrap().value;
    assert_eq!((metrics.total_mb, metrics.total_nodes), (16384, 2));
    let only_long = AppsQuery {
        queue: Some("short".into()),
        ..AppsQuery::default()
    };
    assert!(c.apps(&only_long).await.unwrap().value.is_empty());
    // The leaf's full path, as Hadoop 3.5 prints it.
    assert_eq!(c.app(&app_id).await.unwrap().value.queue, "root.long");

    // Node resource update: YARN sees the room.
    let node0 = NodeId::new(h.nodes()[0].id.to_string());
    let answered = c
        .update_node_resource(&node0, Resource::new(12288, 12), None)
        .await
        .unwrap();
    assert_eq!(answered.to_resource(), Resource::new(12288, 12));
    assert_eq!(h.inspect(|s| s.nodes[0].total), Resource::new(12288, 12));
    let node = c.node(&node0).await.unwrap().value;
    assert_eq!(node.total_resource.to_resource(), Resource::new(12288, 12));

    // Container signal: the task's container is killed.
    let attempts = c.app_attempts(&app_id).await.unwrap().value;
    assert_eq!(attempts.len(), 1);
    let attempt = attempts[0].app_attempt_id.parse().unwrap();
    let containers = c.attempt_containers(&attempt).await.unwrap().value;
    let task: ContainerId = containers
        .iter()
        .map(|c| c.container_id.parse::<ContainerId>().unwrap())
        .find(|c| !c.is_am())
        .unwrap();
    c.signal_container(&task, SignalContainerCommand::ForcefulShutdown)
        .await
        .unwrap();
    wait_until(&h, "the signalled container to die", 10, |s| {
        s.containers[&task].exit_status == exit::SIGKILL
    })
    .await;

    // Node labels.
    let gpu = NodeLabelInfo {
        name: "gpu".into(),
        exclusivity: true,
    };
    c.add_node_labels(std::slice::from_ref(&gpu)).await.unwrap();
    assert!(c.node_labels().await.unwrap().value.contains(&gpu));
    let node1 = NodeId::new(h.nodes()[1].id.to_string());
    c.replace_node_to_labels(&[(node1.clone(), vec!["gpu".into()])])
        .await
        .unwrap();
    assert_eq!(
        c.node_to_labels().await.unwrap().value,
        vec![(node1, vec!["gpu".to_string()])]
    );

    // Kill: asynchronous, repeated until the RM says KILLED.
    let mut state = String::new();
    for _ in 0..50 {
        state = c.kill_app(&app_id).await.unwrap();
        if state == "KILLED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, "KILLED");

    // YARN's RemoteException reaches the caller.
    let missing = ApplicationId::new(h.cluster_timestamp(), 9999);
    let e = c.app(&missing).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(e.remote_exception().unwrap().exception, "NotFoundException");
    assert!(e.to_string().contains("NotFoundException"), "{e}");
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_rm_is_found_among_dead_and_standby_addresses() {
    let h = start_emulator(1).await;
    let rm = h.rm_url().to_string();
    let standby = MockRm::start(standby_of(rm.clone())).await;
    let dead = dead_address().await;
    let c = client(&[&dead, &standby.url, &rm]);
    let snap = c.snapshot().await.unwrap();
    assert_eq!(snap.active_rm, rm);
    assert_eq!(c.active_rm().await.unwrap(), rm);
    // The standby was only asked who it is.
    let asked = standby.seen.lock().unwrap().clone();
    assert!(
        asked.iter().all(|p| p.starts_with("/ws/v1/cluster/info?")),
        "{asked:?}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_redirect_is_followed_to_the_active_rm() {
    let h = start_emulator(1).await;
    let rm = h.rm_url().to_string();
    let (_was_active, c) = client_before_failover(standby_of(rm.clone()), &rm).await;
    // The failover happens now: the next request meets a standby's 307.
    let snap = c.snapshot().await.unwrap();
    assert_eq!(snap.active_rm, rm);
    assert_eq!(snap.nodes.len(), 1);
    assert!(c.stats().failovers >= 1);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_page_without_a_location_makes_the_client_look_again() {
    let h = start_emulator(1).await;
    let rm = h.rm_url().to_string();
    // Older RMs, or a standby that knows no active RM, answer with a page.
    let page = |path: &str, _: &str| {
        if path == "/ws/v1/cluster/info" {
            return info("STANDBY");
        }
        Reply::new(
            200,
            vec![("content-type", "text/plain".into())],
            "This is standby RM. Redirecting to the current active RM: unknown\n",
        )
    };
    let (_was_active, c) = client_before_failover(page, &rm).await;
    let apps = c.apps(&AppsQuery::default()).await.unwrap();
    assert!(apps.value.is_empty());
    assert_eq!(c.current_rm().as_deref(), Some(rm.as_str()));
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_fails_over_when_the_active_rm_stops_answering() {
    let first = start_emulator(1).await;
    let second = start_emulator(1).await;
    let (a, b) = (first.rm_url().to_string(), second.rm_url().to_string());
    let c = client(&[&a, &b]);
    let snap = c.snapshot().await.unwrap();
    assert_eq!(snap.active_rm, a);
    first.shutdown().await.unwrap();
    let snap = c.snapshot().await.expect("fails over");
    assert_eq!(snap.active_rm, b);
    assert_eq!(snap.cluster.id, second.cluster_timestamp() as i64);
    assert_eq!(c.stats().failovers, 1);
    second.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_whose_connection_breaks_goes_to_the_rm_found_active() {
    let h = start_emulator(1).await;
    let rm = h.rm_url().to_string();
    let breaking = BreakingRm::start(&["ACTIVE", "STANDBY"]).await;
    let c = client(&[&breaking.url, &rm]);
    // Both say ACTIVE at first; the first listed is taken, and drops the request.
    let apps = c.apps(&AppsQuery::default()).await.expect("fails over");
    assert!(apps.value.is_empty());
    assert_eq!(c.current_rm().as_deref(), Some(rm.as_str()));
    assert_eq!(c.stats().failovers, 1);
    let dropped = breaking.dropped.lock().unwrap().clone();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert!(
        dropped[0].starts_with("GET /ws/v1/cluster/apps"),
        "{dropped:?}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_write_whose_connection_breaks_is_not_sent_again() {
    let h = start_emulator(1).await;
    let rm = h.rm_url().to_string();
    let breaking = BreakingRm::start(&["ACTIVE", "STANDBY"]).await;
    let c = client(&[&breaking.url, &rm]);
    // The RM may have taken an id already: asking again could take a second one.
    let e = c.new_application().await.unwrap_err();
    assert!(matches!(e, Error::Transport { .. }), "{e}");
    assert!(e.to_string().contains("new-application"), "{e}");
    let dropped = breaking.dropped.lock().unwrap().clone();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert!(
        dropped[0].starts_with("POST /ws/v1/cluster/apps/new-application"),
        "{dropped:?}"
    );
    assert_eq!(c.stats().failovers, 0);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn no_active_rm_is_a_clear_error() {
    let dead = dead_address().await;
    let standby = MockRm::start(|_: &str, _: &str| info("STANDBY")).await;
    let c = client(&[&dead, &standby.url]);
    let e = c.snapshot().await.unwrap_err();
    let Error::NoActiveRm(failures) = &e else {
        panic!("unexpected error: {e}");
    };
    assert_eq!(failures.len(), 2);
    let text = e.to_string();
    assert!(
        text.contains(&dead) && text.contains("connection"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} (haState STANDBY)", standby.url)),
        "{text}"
    );
}

#[tokio::test]
async fn schema_surprises_become_warnings_and_every_request_names_the_user() {
    // Hadoop 2.x-style RM: numbers as strings, no queue types, odd items.
    let rm = MockRm::start(|path: &str, _: &str| match path {
        "/ws/v1/cluster/info" => Reply::json(r#"{"clusterInfo":{"id":"42","haState":"ACTIVE"}}"#),
        "/ws/v1/cluster/scheduler" => Reply::json(
            r#"{"scheduler":{"schedulerInfo":{"queueName":"root","queues":{"queue":[
                {"queueName":"a","capacity":"50.0","queues":{"queue":{"queueName":"a1","capacity":"100"}}},
                {"queueName":"b","capacity":"fifty"}]}}}}"#,
        ),
        "/ws/v1/cluster/nodes" => Reply::json(r#"{"nodes":{"node":[{"id":"h1:8041","numContainers":"2"},{"id":""}]}}"#),
        "/ws/v1/cluster/apps" => Reply::json(
            r#"{"apps":{"app":[
              {"id":"application_42_0001","state":"RUNNING","allocatedMB":"abc",
               "amContainerLogs":"http://h1:8042/node/containerlogs/container_42_0001_01_000001/u"},
              {"id":"not-an-id","state":"RUNNING"},
              "junk"]}}"#,
        ),
        "/ws/v1/cluster/apps/application_42_0001/appattempts" => {
            Reply::json(r#"{"appAttempts":{"appAttempt":{"id":"1","containerId":"container_42_0001_01_000001"}}}"#)
        }
        "/ws/v1/cluster/apps/application_42_0001/appattempts/appattempt_42_0001_000001/containers" => Reply::json(
            r#"{"containers":{"container":[
              {"containerId":"container_42_0001_01_000001","allocatedMB":"1024","containerState":"RUNNING"},
              {"containerId":"container_42_0001_01_000002","allocatedMB":"1024","containerState":"COMPLETE"},
              {"containerId":"bogus","containerState":"RUNNING"}]}}"#,
        ),
        _ => Reply::new(404, vec![], ""),
    })
    .await;
    let c = client(&[&rm.url]);
    let snap = c
        .snapshot()
        .await
        .expect("a snapshot despite the surprises");
    assert_eq!(snap.cluster.id, 42);

    let shown: Vec<String> = snap
        .warnings
        .iter()
        .map(|w| format!("{} {}", w.path, w.message))
        .collect();
    let has = |needle: &str| shown.iter().any(|w| w.contains(needle));
    assert!(
        has(r#"apps.app[0].allocatedMB expected an integer, got string "abc""#),
        "{shown:#?}"
    );
    assert!(has("apps.app[2]"), "{shown:#?}");
    assert!(has("apps.app[1].id invalid application id"), "{shown:#?}");
    assert!(
        has(
            r#"scheduler.schedulerInfo.queues.queue[1].capacity expected a number, got string "fifty""#
        ),
        "{shown:#?}"
    );
    assert!(has("nodes.node[1].id"), "{shown:#?}");
    assert!(has("containers.container[2].containerId"), "{shown:#?}");
    let skipped = snap
        .warnings
        .iter()
        .filter(|w| w.recovery == Recovery::ItemSkipped)
        .count();
    assert_eq!(skipped, 4);

    assert_eq!(snap.apps.len(), 1);
    assert_eq!(snap.apps[0].allocated_mb, 0);
    assert_eq!(
        snap.containers.len(),
        1,
        "COMPLETE and unreadable containers are left out"
    );
    assert_eq!(snap.nodes.len(), 1);
    assert_eq!(snap.nodes[0].num_containers, 2);
    // Leaves without a `type`, recognised by having no children.
    let a = &snap.scheduler.children()[0];
    assert!(!a.is_leaf());
    assert!(a.children()[0].is_leaf());
    assert!(snap.scheduler.children()[1].is_leaf());

    let seen = rm.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for request in &seen {
        assert!(request.contains("user.name=alice"), "{request}");
    }
}

/// An RM whose `/nodes` answer never ends (chunked, no length) and whose `/apps`
/// answer declares a length over the limit: both are refused with `TooLarge`, the
/// endless one after the client read at most the limit, so nothing is buffered whole.
#[tokio::test]
async fn an_answer_over_the_size_limit_is_refused_not_buffered() {
    use futures_util::StreamExt;
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let endless = move || {
        let counter = counter.clone();
        async move {
            let head = futures_util::stream::once(async {
                Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{\"nodes\":{\"node\":["))
            });
            let nodes =
                axum::body::Bytes::from(r#"{"id":"nm:8041","state":"RUNNING"},"#.repeat(1000));
            let tail = futures_util::stream::repeat(nodes).map(move |b| {
                counter.fetch_add(b.len(), Ordering::Relaxed);
                Ok(b)
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(head.chain(tail)))
                .unwrap()
        }
    };
    let declared = || async {
        let body = format!("{{\"apps\":null}}{}", " ".repeat(2 << 20));
        ([("content-type", "application/json")], body)
    };
    let app = axum::Router::new()
        .route(
            "/ws/v1/cluster/info",
            axum::routing::get(|| async {
                (
                    [("content-type", "application/json")],
                    r#"{"clusterInfo":{"id":1,"haState":"ACTIVE"}}"#,
                )
            }),
        )
        .route("/ws/v1/cluster/nodes", axum::routing::get(endless))
        .route("/ws/v1/cluster/apps", axum::routing::get(declared));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let c = RmClient::new(&RmSettings {
        addresses: vec![url],
        user_name: None,
        request_timeout_ms: 20_000,
        max_response_mb: 1,
        tls: Default::default(),
        kerberos: None,
    })
    .unwrap();

    let started = std::time::Instant::now();
    let e = c.nodes().await.unwrap_err();
    assert!(
        matches!(e, Error::TooLarge { limit, .. } if limit == 1 << 20),
        "{e}"
    );
    let message = e.to_string();
    assert!(
        message.contains("/ws/v1/cluster/nodes") && message.contains("max-response-mb"),
        "{message}"
    );
    // Refused by size, long before the 20 s request timeout could end it.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    // What the server got out before the connection closed: the limit plus what the
    // kernel's socket buffers held, not an ever-growing body.
    let out = sent.load(Ordering::Relaxed);
    assert!(out < 32 << 20, "{out} bytes sent");

    let e = c.apps(&AppsQuery::default()).await.unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e}");

    // The limit is checked when the client is built.
    for bad in [0, RmSettings::LARGEST_MAX_RESPONSE_MB + 1] {
        let r = RmClient::new(&RmSettings {
            addresses: vec!["http://127.0.0.1:9".into()],
            user_name: None,
            request_timeout_ms: 1000,
            max_response_mb: bad,
            tls: Default::default(),
            kerberos: None,
        });
        assert!(matches!(r, Err(Error::Config(_))), "{bad}");
    }
    server.abort();
}

#[tokio::test]
async fn a_request_that_times_out_on_the_only_active_rm_is_not_repeated() {
    let rm = MockRm::start(|path: &str, _: &str| {
        if path == "/ws/v1/cluster/info" {
            return info("ACTIVE");
        }
        let mut slow = Reply::json(r#"{"apps":null}"#);
        slow.delay = Duration::from_secs(3);
        slow
    })
    .await;
    let c = RmClient::new(&RmSettings {
        addresses: vec![rm.url.clone()],
        user_name: None,
        request_timeout_ms: 300,
        max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
        tls: Default::default(),
        kerberos: None,
    })
    .unwrap();
    let e = c.apps(&AppsQuery::default()).await.unwrap_err();
    assert!(matches!(e, Error::Transport { .. }), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    let asked = rm.seen.lock().unwrap().clone();
    let apps = asked
        .iter()
        .filter(|p| p.starts_with("/ws/v1/cluster/apps"))
        .count();
    assert_eq!(apps, 1, "{asked:?}");
    assert!(
        asked.iter().all(|p| !p.contains("user.name")),
        "no user name configured"
    );
}
