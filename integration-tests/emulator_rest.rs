//! The emulator's REST API against a real third-party client (`yarn-api-client` from
//! PyPI) and against the field lists of Hadoop's documentation, in JSON and XML.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use preemptor::cluster::ContainerId;
use preemptor::emulator::state::{RmContainerState, exit};
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;
use preemptor::yarn::dto::YarnApplicationState;
use serde_json::Value;

use crate::emulator_support::{get_json, run_client_script, submit, wait_running, wait_until};

const NODE: Resource = Resource::new(8192, 8);
const AM: Resource = Resource::new(1024, 1);

async fn start_simulated(nodes: usize) -> EmulatorHandle {
    let mut config = EmulatorConfig::local(nodes, NODE, RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    Emulator::start(config).await.expect("emulator starts")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("integration-tests")
        .join(name)
}

fn spec(tasks: u32, duration_ms: u64) -> WorkloadSpec {
    WorkloadSpec::parse(&format!(
        r#"{{"kernel":"burn","args":["--iterations","50"],"tasks":{tasks},"memoryMb":1024,"vcores":1,"simulatedDurationMs":{duration_ms}}}"#
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yarn_api_client_from_pypi_drives_every_endpoint() {
    let h = start_simulated(2).await;
    let out = run_client_script("drive_emulator.py", h.rm_url()).await;
    check_every_endpoint(&h, &out);
    h.shutdown().await.unwrap();
}

/// The same client run against the emulator in SPNEGO mode, with a keytab from a real
/// MIT KDC: yarn-api-client authenticates through requests-gssapi (PyPI) with a ticket
/// from `kinit`, and every call gives what it gives without Kerberos. The script also
/// checks that a client without credentials is refused with 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yarn_api_client_with_kerberos_drives_every_endpoint_in_spnego_mode() {
    let test = "yarn_api_client_with_kerberos_drives_every_endpoint_in_spnego_mode";
    let dir = tempfile::tempdir().unwrap();
    let Some(kdc) = crate::kdc_support::Kdc::up(test, &dir.path().join("kdc")) else {
        return;
    };
    let http_keytab = dir.path().join("http.keytab");
    kdc.keytab(&http_keytab, &["HTTP/localhost"]);
    let client_keytab = dir.path().join("client.keytab");
    kdc.keytab(&client_keytab, &["alice"]);
    let ccache = kdc.kinit(dir.path(), &client_keytab, &kdc.principal("alice"));

    let mut config = EmulatorConfig::local(2, NODE, RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    config.spnego = Some(std::sync::Arc::new(
        preemptor::kerberos::SpnegoAcceptor::new(&http_keytab, Duration::from_secs(3600))
            .expect("acceptor"),
    ));
    let h = Emulator::start(config).await.expect("emulator starts");
    // The service principal is HTTP/localhost: the client must ask for that host.
    let url = h.rm_url().replace("127.0.0.1", "localhost");
    let out = crate::emulator_support::run_client_script_with_env(
        "drive_emulator.py",
        &url,
        &[
            ("PREEMPTOR_SPNEGO", "1".into()),
            ("KRB5_CONFIG", kdc.krb5_conf.display().to_string()),
            ("KRB5CCNAME", ccache),
        ],
    )
    .await;
    assert_eq!(
        out["unauthenticated_status"], 401,
        "{}",
        out["unauthenticated_status"]
    );
    check_every_endpoint(&h, &out);
    h.shutdown().await.unwrap();
}

/// What `drive_emulator.py` printed, against the emulator's own state.
fn check_every_endpoint(h: &EmulatorHandle, out: &Value) {
    // cluster_information, cluster_metrics
    assert_eq!(out["info"]["clusterInfo"]["id"], h.cluster_timestamp());
    assert_eq!(out["info"]["clusterInfo"]["state"], "STARTED");
    assert_eq!(out["metrics"]["clusterMetrics"]["totalMB"], 2 * 8192);
    assert_eq!(out["metrics"]["clusterMetrics"]["totalNodes"], 2);
    assert_eq!(out["metrics"]["clusterMetrics"]["totalVirtualCores"], 16);

    // cluster_scheduler: the queue tree the emulator holds.
    let info = &out["scheduler"]["scheduler"]["schedulerInfo"];
    assert_eq!(info["type"], "capacityScheduler");
    let leaves: BTreeSet<String> = info["queues"]["queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queuePath"].as_str().unwrap().to_string())
        .collect();
    let held: BTreeSet<String> = h.inspect(|s| {
        s.tree
            .queues
            .iter()
            .filter(|q| q.is_leaf())
            .map(|q| q.path.clone())
            .collect()
    });
    assert_eq!(leaves, held);

    // cluster_new_application, cluster_submit_application, cluster_application
    let app_id = out["new"]["application-id"].as_str().unwrap().to_string();
    assert!(app_id.starts_with(&format!("application_{}_", h.cluster_timestamp())));
    assert_eq!(out["new"]["maximum-resource-capability"]["memory"], 8192);
    let app = &out["app"];
    assert_eq!(app["id"], app_id.as_str());
    assert_eq!(app["queue"], "root.long");
    assert_eq!(app["name"], "yarn-api-client-check");
    assert_eq!(app["applicationTags"], "client-test");
    assert_eq!(app["allocatedMB"], 3 * 1024);

    // cluster_applications with filters
    let running: Vec<&Value> = out["apps_running"]["apps"]["app"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0]["id"], app_id.as_str());
    assert!(running[0].get("resourceRequests").is_some());
    let deselected = &out["apps_deselected"]["apps"]["app"][0];
    assert!(deselected.get("resourceRequests").is_none());
    assert_eq!(out["apps_other_queue"], serde_json::json!({"apps": null}));

    // cluster_application_attempts, cluster_application_attempt_containers
    let id: preemptor::cluster::ApplicationId = app_id.parse().unwrap();
    let am = h.inspect(|s| s.apps[&id].am_container.unwrap());
    let attempt = &out["attempts"]["appAttempts"]["appAttempt"][0];
    assert_eq!(attempt["containerId"], am.to_string());
    assert_eq!(attempt["appAttemptState"], "RUNNING");
    let listed = out["containers"]["containers"]["container"]
        .as_array()
        .unwrap();
    assert_eq!(listed.len(), 3);
    for c in listed {
        let cid: ContainerId = c["containerId"].as_str().unwrap().parse().unwrap();
        let (mb, node) = h.inspect(|s| {
            let held = &s.containers[&cid];
            (held.resource.memory_mb, s.nodes[held.node].id.to_string())
        });
        assert_eq!(c["allocatedMB"], mb);
        assert_eq!(c["nodeId"], node.as_str());
    }

    // cluster_nodes, cluster_node, cluster_node_update_resource
    let node_ids: Vec<&str> = out["nodes"]["nodes"]["node"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    let held_ids: Vec<String> = h.nodes().iter().map(|n| n.id.to_string()).collect();
    assert_eq!(node_ids, held_ids);
    assert_eq!(out["node"]["node"]["id"], held_ids[0].as_str());
    assert_eq!(out["node"]["node"]["totalResource"]["memory"], 8192);
    assert_eq!(out["node_update"]["resourceInfo"]["memory"], 12288);
    assert_eq!(
        out["node_after_update"]["node"]["totalResource"]["vCores"],
        12
    );
    assert_eq!(h.inspect(|s| s.nodes[0].total), Resource::new(12288, 12));

    // cluster_container_signal: the task was killed and rerun from scratch; to MapReduce
    // a SIGKILL (137) is a failed attempt, one of its 4.
    let signalled: ContainerId = out["signalled"].as_str().unwrap().parse().unwrap();
    let (status, kills, failures) = h.inspect(|s| {
        let tasks = &s.apps[&id].tasks;
        (
            s.containers[&signalled].exit_status,
            tasks.iter().map(|t| t.kills).sum::<u32>(),
            tasks.iter().map(|t| t.failures).sum::<u32>(),
        )
    });
    assert_eq!(status, exit::SIGKILL);
    assert_eq!((kills, failures), (0, 1));
    let after: Vec<&str> = out["containers_after_signal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["containerId"].as_str().unwrap())
        .collect();
    assert!(!after.contains(&signalled.to_string().as_str()));

    // NodeManager: node_information, node_containers, node_container
    let nm_id = out["nm_info"]["nodeInfo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let nm_index = held_ids
        .iter()
        .position(|n| *n == nm_id)
        .expect("a known node");
    assert!(out["nm_info"]["nodeInfo"]["nodeHealthy"].as_bool().unwrap());
    let on_node = out["nm_containers"]["containers"]["container"]
        .as_array()
        .unwrap();
    assert!(!on_node.is_empty());
    for c in on_node {
        let cid: ContainerId = c["id"].as_str().unwrap().parse().unwrap();
        let node = h.inspect(|s| s.containers[&cid].node);
        assert_eq!(node, nm_index, "{cid} listed by the wrong NodeManager");
    }
    assert_eq!(out["nm_container"]["container"]["id"], on_node[0]["id"]);

    // cluster_application_kill
    assert!(out["kill_first"]["state"] == "RUNNING" || out["kill_first"]["state"] == "KILLED");
    assert_eq!(out["kill_again"]["state"], "KILLED");
    assert_eq!(out["final"]["app"]["finalStatus"], "KILLED");
    assert_eq!(
        h.inspect(|s| s.apps[&id].state),
        YarnApplicationState::Killed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_submission_runs_its_am_until_killed_or_its_lifetime_ends() {
    let h = start_simulated(1).await;
    let out = run_client_script("plain_app.py", h.rm_url()).await;

    // RUNNING with the AM container it asked for, on a node, and nothing else.
    let running = &out["running"];
    assert_eq!(running["applicationType"], "YARN");
    assert_eq!(running["allocatedMB"], 2048);
    assert_eq!(running["allocatedVCores"], 2);
    let listed = out["containers"]["containers"]["container"]
        .as_array()
        .unwrap();
    assert_eq!(listed.len(), 1);
    let am: ContainerId = listed[0]["containerId"].as_str().unwrap().parse().unwrap();
    assert!(am.is_am());
    assert_eq!(listed[0]["nodeId"], h.nodes()[0].id.to_string().as_str());
    assert_eq!(
        out["timeouts"]["timeouts"]["timeout"][0],
        serde_json::json!({"type": "LIFETIME", "expiryTime": "UNLIMITED", "remainingTimeInSeconds": -1})
    );
    assert_eq!(out["still_running"]["state"], "RUNNING");
    assert_eq!(out["still_running"]["runningContainers"], 1);

    // Killed through PUT /state: KILLED, its AM released.
    assert_eq!(out["killed"]["finalStatus"], "KILLED");
    assert!(
        out["killed"]["diagnostics"]
            .as_str()
            .unwrap()
            .starts_with("Application killed by user."),
        "{}",
        out["killed"]
    );
    let app: preemptor::cluster::ApplicationId = out["app_id"].as_str().unwrap().parse().unwrap();
    assert!(h.inspect(|s| !s.containers[&am].is_live() && s.apps[&app].is_final()));

    // A LIFETIME set through PUT /timeout ends the other one as KILLED.
    assert_eq!(out["lifetime_set"]["timeout"]["type"], "LIFETIME");
    assert!(
        out["lifetime"]["timeout"]["remainingTimeInSeconds"]
            .as_i64()
            .unwrap()
            <= 2
    );
    assert_eq!(out["expired"]["finalStatus"], "KILLED");
    assert!(
        out["expired"]["diagnostics"]
            .as_str()
            .unwrap()
            .starts_with(preemptor::emulator::state::LIFETIME_EXPIRED),
        "{}",
        out["expired"]
    );
    assert_eq!(h.inspect(|s| s.nodes[0].used), Resource::ZERO);
    h.shutdown().await.unwrap();
}

/// FORCEFUL_SHUTDOWN through the RM ends a task with 137: a failed attempt, rerun until the
/// fourth failure fails the MapReduce job, as `mapreduce.map.maxattempts`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapreduce_task_signalled_four_times_fails_its_job() {
    let h = start_simulated(1).await;
    let rm = h.rm_url().to_string();
    let wordcount = WorkloadSpec::parse(
        r#"{"kernel":"wordcount","tasks":1,"memoryMb":1024,"vcores":1,"simulatedDurationMs":300000}"#,
    )
    .unwrap();
    let app = submit(&rm, "wc", "long", &wordcount, AM).await;
    let id: preemptor::cluster::ApplicationId = app.parse().unwrap();
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let task_of = |s: &preemptor::emulator::state::RmState| {
        s.app_containers(id)
            .iter()
            .find(|c| !c.is_am() && c.state == RmContainerState::Running)
            .map(|c| c.id)
    };
    for attempt in 1..=4u32 {
        wait_until(&h, &format!("attempt {attempt} to run"), 15, |s| {
            task_of(s).is_some()
        })
        .await;
        let task = h.inspect(task_of).unwrap();
        let r = http
            .post(format!(
                "{rm}/ws/v1/cluster/containers/{task}/signal/FORCEFUL_SHUTDOWN"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        wait_until(&h, &format!("attempt {attempt} to end"), 15, |s| {
            !s.containers[&task].is_live()
        })
        .await;
        assert_eq!(
            h.inspect(|s| s.containers[&task].exit_status),
            exit::SIGKILL
        );
    }
    let app_json = get_json(&http, &format!("{rm}/ws/v1/cluster/apps/{app}")).await;
    let a = &app_json["app"];
    assert_eq!(a["state"], "FAILED", "{a}");
    assert_eq!(a["finalStatus"], "FAILED");
    assert_eq!(a["applicationType"], "MAPREDUCE");
    let diagnostics = a["diagnostics"].as_str().unwrap();
    assert!(
        diagnostics.contains(&format!("Task failed task_{}_", h.cluster_timestamp()))
            && diagnostics.contains("Job failed as tasks failed. failedMaps:1"),
        "{diagnostics}"
    );
    let t = h.inspect(|s| s.apps[&id].tasks[0].clone());
    assert_eq!((t.attempts, t.failures, t.kills), (4, 4, 0));
    h.shutdown().await.unwrap();
}

/// `[section]` lines followed by field names; `#` comments.
fn read_fields(file: &str) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(fixture(&format!("fixtures/hadoop-rest/{file}"))).unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
            out.entry(section.clone()).or_default();
        } else {
            out.entry(section.clone())
                .or_default()
                .push(line.to_string());
        }
    }
    out
}

/// A response in either format, reduced to element/field names so that one checker
/// serves both.
#[derive(Debug, Default)]
struct Node {
    fields: BTreeMap<String, Vec<Node>>,
}

impl Node {
    fn from_json(v: &Value) -> Node {
        let mut n = Node::default();
        if let Value::Object(m) = v {
            for (k, child) in m {
                let entry = n.fields.entry(k.clone()).or_default();
                match child {
                    Value::Array(items) => entry.extend(items.iter().map(Node::from_json)),
                    other => entry.push(Node::from_json(other)),
                }
            }
        }
        n
    }

    fn from_xml(text: &str) -> (String, Node) {
        use quick_xml::events::Event;
        let mut reader = quick_xml::Reader::from_str(text);
        let mut stack: Vec<(String, Node)> = vec![("#document".into(), Node::default())];
        let attrs = |e: &quick_xml::events::BytesStart| -> Vec<String> {
            e.attributes()
                .flatten()
                .filter(|a| a.key.as_ref() == "xsi:type")
                .map(|_| "type".to_string())
                .collect()
        };
        loop {
            match reader.read_event().expect("well-formed XML") {
                Event::Start(e) => {
                    let mut n = Node::default();
                    for a in attrs(&e) {
                        n.fields.entry(a).or_default().push(Node::default());
                    }
                    stack.push((e.name().as_ref().to_string(), n));
                }
                Event::Empty(e) => {
                    let mut n = Node::default();
                    for a in attrs(&e) {
                        n.fields.entry(a).or_default().push(Node::default());
                    }
                    let name = e.name().as_ref().to_string();
                    stack
                        .last_mut()
                        .unwrap()
                        .1
                        .fields
                        .entry(name)
                        .or_default()
                        .push(n);
                }
                Event::End(_) => {
                    let (name, n) = stack.pop().unwrap();
                    stack
                        .last_mut()
                        .unwrap()
                        .1
                        .fields
                        .entry(name)
                        .or_default()
                        .push(n);
                }
                Event::Eof => break,
                _ => {}
            }
        }
        let (_, doc) = stack.pop().unwrap();
        let (root, mut nodes) = doc.fields.into_iter().next().expect("a root element");
        (root, nodes.remove(0))
    }

    fn all(&self, field: &str) -> &[Node] {
        self.fields.get(field).map_or(&[], |v| v.as_slice())
    }

    fn one(&self, field: &str) -> &Node {
        self.all(field)
            .first()
            .unwrap_or_else(|| panic!("missing {field}"))
    }
}

fn check(what: &str, node: &Node, fields: &[String], skip: &[&str]) {
    for f in fields.iter().filter(|f| !skip.contains(&f.as_str())) {
        assert!(
            node.fields.contains_key(f),
            "{what}: documented field {f:?} is missing (has {:?})",
            node.fields.keys().collect::<Vec<_>>()
        );
    }
}

fn check_queue(node: &Node, doc: &BTreeMap<String, Vec<String>>, fmt: &str, leaves: &mut usize) {
    let name = "queue";
    let is_leaf = !node.fields.contains_key("queues");
    if is_leaf {
        *leaves += 1;
        check(
            &format!("{fmt} leaf {name}"),
            node,
            &doc["parentQueue"],
            &["queues"],
        );
        check(&format!("{fmt} leaf {name}"), node, &doc["leafQueue"], &[]);
        for u in node.one("users").all("user") {
            check(&format!("{fmt} user"), u, &doc["user"], &[]);
            check(
                &format!("{fmt} user resources"),
                u.one("resourcesUsed"),
                &doc["resource"],
                &[],
            );
        }
    } else {
        check(
            &format!("{fmt} parent {name}"),
            node,
            &doc["parentQueue"],
            &[],
        );
        for child in node.one("queues").all("queue") {
            check_queue(child, doc, fmt, leaves);
        }
    }
    check(
        &format!("{fmt} resourcesUsed"),
        node.one("resourcesUsed"),
        &doc["resource"],
        &[],
    );
    let caps = node.one("capacities").all("queueCapacitiesByPartition");
    assert!(!caps.is_empty(), "{fmt}: no queueCapacitiesByPartition");
    for c in caps {
        check(
            &format!("{fmt} partition capacities"),
            c,
            &doc["partitionCapacities"],
            &[],
        );
    }
    let usages = node.one("resources").all("resourceUsagesByPartition");
    assert!(!usages.is_empty(), "{fmt}: no resourceUsagesByPartition");
    for u in usages {
        check(
            &format!("{fmt} partition usage"),
            u,
            &doc["partitionUsage"],
            &[],
        );
        check(
            &format!("{fmt} pending"),
            u.one("pending"),
            &doc["resource"],
            &[],
        );
    }
}

fn check_scheduler(fmt: &str, root_name: &str, root: &Node, doc: &BTreeMap<String, Vec<String>>) {
    assert_eq!(root_name, "scheduler");
    let info = root.one("schedulerInfo");
    check(
        &format!("{fmt} schedulerInfo"),
        info,
        &doc["schedulerInfo"],
        &[],
    );
    let health = info.one("health");
    check(&format!("{fmt} health"), health, &doc["health"], &[]);
    for op in health.all("operationsInfo") {
        check(&format!("{fmt} operation"), op, &doc["operation"], &[]);
    }
    for d in health.all("lastRunDetails") {
        check(
            &format!("{fmt} lastRunDetail"),
            d,
            &doc["lastRunDetail"],
            &[],
        );
    }
    let mut leaves = 0;
    for q in info.one("queues").all("queue") {
        check_queue(q, doc, fmt, &mut leaves);
    }
    assert_eq!(
        leaves, 2,
        "{fmt}: the shipped tree's leaves, short and long"
    );
}

fn check_apps(fmt: &str, root_name: &str, root: &Node, doc: &BTreeMap<String, Vec<String>>) {
    assert_eq!(root_name, "apps");
    check(&format!("{fmt} apps"), root, &doc["apps"], &[]);
    let apps = root.all("app");
    assert_eq!(apps.len(), 2, "{fmt}: both submitted apps listed");
    let mut with_requests = 0;
    for a in apps {
        // An app with nothing outstanding has no resourceRequests elements in XML.
        let skip: &[&str] = if a.fields.contains_key("resourceRequests") {
            &[]
        } else {
            &["resourceRequests"]
        };
        check(&format!("{fmt} app"), a, &doc["app"], skip);
        for r in a.all("resourceRequests") {
            with_requests += 1;
            check(
                &format!("{fmt} resourceRequest"),
                r,
                &doc["resourceRequest"],
                &[],
            );
            check(
                &format!("{fmt} capability"),
                r.one("capability"),
                &doc["resource"],
                &[],
            );
        }
    }
    assert!(
        with_requests > 0,
        "{fmt}: the waiting app's requests are listed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_and_apps_carry_every_documented_field_in_json_and_xml() {
    let h = start_simulated(1).await;
    let rm = h.rm_url().to_string();
    // One app fills the node; the second waits with outstanding requests.
    let first = submit(&rm, "filler", "long", &spec(7, 300_000), AM).await;
    wait_running(&h, &first).await;
    let _second = submit(&rm, "waiting", "short", &spec(2, 300_000), AM).await;
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let get = |path: &str, xml: bool| {
        let mut r = http.get(format!("{rm}{path}"));
        if xml {
            r = r.header("Accept", "application/xml");
        }
        r.send()
    };
    let sched_doc = read_fields("scheduler-fields.txt");
    let apps_doc = read_fields("apps-fields.txt");

    let json: Value = get("/ws/v1/cluster/scheduler", false)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let root = Node::from_json(&json);
    check_scheduler("JSON", "scheduler", root.one("scheduler"), &sched_doc);
    let resp = get("/ws/v1/cluster/scheduler", true).await.unwrap();
    assert_eq!(resp.headers()["content-type"], "application/xml");
    let (name, xml) = Node::from_xml(&resp.text().await.unwrap());
    check_scheduler("XML", &name, &xml, &sched_doc);

    let json: Value = get("/ws/v1/cluster/apps", false)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let root = Node::from_json(&json);
    check_apps("JSON", "apps", root.one("apps"), &apps_doc);
    let text = get("/ws/v1/cluster/apps", true)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (name, xml) = Node::from_xml(&text);
    check_apps("XML", &name, &xml, &apps_doc);

    // The pending demand shows in the scheduler's partition usage of queue short.
    let short = json_queue(&json_scheduler(&http, &rm).await, "root.short");
    let pending = &short["resources"]["resourceUsagesByPartition"][0]["pending"];
    assert_eq!(pending["memory"], 1024, "the waiting app's AM request");
    h.shutdown().await.unwrap();
}

async fn json_scheduler(http: &reqwest::Client, rm: &str) -> Value {
    get_json(http, &format!("{rm}/ws/v1/cluster/scheduler")).await
}

fn json_queue(s: &Value, path: &str) -> Value {
    s["scheduler"]["schedulerInfo"]["queues"]["queue"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queuePath"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("no queue {path}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_answers_202_then_200_and_errors_are_remote_exceptions() {
    let h = start_simulated(1).await;
    let rm = h.rm_url().to_string();
    let app = submit(&rm, "victim", "long", &spec(2, 300_000), AM).await;
    let id = app.parse().unwrap();
    wait_until(&h, "AM and two tasks", 15, |s| {
        s.app_containers(id).len() == 3
    })
    .await;
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let url = format!("{rm}/ws/v1/cluster/apps/{app}/state");
    let first = http
        .put(&url)
        .json(&serde_json::json!({"state": "KILLED"}))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status().as_u16(), 202);
    assert!(first.headers().contains_key("location"));
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["state"], "RUNNING");
    let mut last = 0;
    for _ in 0..100 {
        let r = http
            .put(&url)
            .json(&serde_json::json!({"state": "KILLED"}))
            .send()
            .await
            .unwrap();
        last = r.status().as_u16();
        if last == 200 {
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["state"], "KILLED");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last, 200);
    assert_eq!(h.inspect(|s| s.nodes[0].used), Resource::ZERO);

    let r = http
        .get(format!("{rm}/ws/v1/cluster/apps/application_1_0042"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["RemoteException"]["exception"], "NotFoundException");
    assert_eq!(
        e["RemoteException"]["javaClassName"],
        "org.apache.hadoop.yarn.webapp.NotFoundException"
    );
    let r = http
        .put(&url)
        .json(&serde_json::json!({"state": "RUNNING"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = http
        .post(format!(
            "{rm}/ws/v1/cluster/containers/garbage/signal/FORCEFUL_SHUTDOWN"
        ))
        .header("Accept", "application/xml")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("<RemoteException><exception>BadRequestException</exception>"),
        "{text}"
    );
    let r = http
        .post(format!("{rm}/ws/v1/cluster/apps"))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_labels_make_an_exclusive_partition_with_its_own_capacities() {
    let h = start_simulated(2).await;
    let rm = h.rm_url().to_string();
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let labelled = h.nodes()[1].id.to_string();
    let r = http
        .post(format!("{rm}/ws/v1/cluster/add-node-labels"))
        .json(&serde_json::json!({"nodeLabelInfo": [{"name": "short", "exclusivity": true}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = http
        .post(format!("{rm}/ws/v1/cluster/replace-node-to-labels"))
        .json(&serde_json::json!({"nodeToLabels": [{"nodeId": labelled, "labels": ["short"]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let labels: Value = get_json(&http, &format!("{rm}/ws/v1/cluster/get-node-labels")).await;
    assert_eq!(labels["nodeLabelInfo"][0]["name"], "short");
    let mapping: Value = get_json(&http, &format!("{rm}/ws/v1/cluster/get-node-to-labels")).await;
    assert_eq!(
        mapping["nodeToLabels"]["entry"][0]["key"],
        labelled.as_str()
    );
    let on_node: Value = get_json(
        &http,
        &format!("{rm}/ws/v1/cluster/nodes/{labelled}/get-labels"),
    )
    .await;
    assert_eq!(on_node["nodeLabelInfo"][0]["name"], "short");
    // Unlabelled work never lands on the labelled node.
    let app = submit(&rm, "big", "long", &spec(30, 300_000), AM).await;
    wait_running(&h, &app).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(h.inspect(|s| s.nodes[1].live.is_empty()));
    // The root reaches the new partition; the scheduler reports it.
    let s = json_scheduler(&http, &rm).await;
    let parts: Vec<&str> =
        s["scheduler"]["schedulerInfo"]["capacities"]["queueCapacitiesByPartition"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["partitionName"].as_str().unwrap())
            .collect();
    assert_eq!(parts, vec!["", "short"]);
    h.shutdown().await.unwrap();
}
