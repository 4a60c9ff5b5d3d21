//! Fuzzing ResourceManager response parsing: arbitrary bytes, XML-like text, and mutated
//! copies of Hadoop's documented and captured responses (`testdata/`), as JSON and as
//! XML, into every DTO the client, the emulator and the proxy read, and the parsed
//! snapshot into the controller's view. Nothing may panic, and any valid JSON or
//! well-formed XML must parse (the tolerant reader's promise: only bytes that are not
//! JSON, or not XML, at all are an error).

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::sample::Index;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::dto::*;
use super::snapshot::RmSnapshot;
use super::submission;
use super::tolerant::{Parsed, decode};
use super::xml;
use crate::config::queues::QueueTree;
use crate::controller::view::{self, Inputs, Memory, Observation};

macro_rules! fixtures {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("testdata/", $path)))),*]
    };
}

const FIXTURES: &[(&str, &str)] = fixtures!(
    "hadoop-2/app.json",
    "hadoop-2/appattempts.json",
    "hadoop-2/apps.json",
    "hadoop-2/cluster-info.json",
    "hadoop-2/cluster-metrics.json",
    "hadoop-2/node.json",
    "hadoop-2/nodes.json",
    "hadoop-2/scheduler-capacity.json",
    "hadoop-3/app.json",
    "hadoop-3/appattempt-containers.json",
    "hadoop-3/appattempts.json",
    "hadoop-3/apps.json",
    "hadoop-3/cluster-info.json",
    "hadoop-3/cluster-metrics.json",
    "hadoop-3/node-resource-request.json",
    "hadoop-3/node-resource-response.json",
    "hadoop-3/node.json",
    "hadoop-3/nodes.json",
    "hadoop-3/scheduler-capacity.json",
    "hadoop-3.5.0/appattempt-containers.json",
    "hadoop-3.5.0/apps.json",
    "hadoop-3.5.0/nodes.json",
    "hadoop-3.5.0/scheduler-capacity.json",
);

/// The real RM's XML answers, as captured.
const XML_FIXTURES: &[(&str, &str)] = fixtures!(
    "hadoop-3.5.0/appattempt-containers.xml",
    "hadoop-3.5.0/apps.xml",
    "hadoop-3.5.0/error-app-not-found.xml",
    "hadoop-3.5.0/node-labels.xml",
    "hadoop-3.5.0/node-resource-response.xml",
    "hadoop-3.5.0/nodes.xml",
    "hadoop-3.5.0/scheduler-capacity.xml",
);

#[derive(Clone, Copy, Debug)]
enum Format {
    Json,
    Xml,
}

/// `decode` (or `xml::decode`) as the client calls it; a `valid` document must parse.
fn read<T: DeserializeOwned + Default>(
    bytes: &[u8],
    format: Format,
    valid: bool,
) -> Result<Option<Parsed<T>>, TestCaseError> {
    let parsed = match format {
        Format::Json => decode::<T>(bytes, "GET /fuzz").map_err(|e| e.to_string()),
        Format::Xml => xml::decode::<T>(bytes, "GET /fuzz").map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(p) => Ok(Some(p)),
        Err(e) if valid => Err(TestCaseError::fail(format!(
            "{}: valid {format:?} refused: {e}",
            std::any::type_name::<T>()
        ))),
        Err(_) => Ok(None),
    }
}

/// Walks a queue tree depth-first, reading every queue's resources.
fn visit(q: &QueueInfo) -> usize {
    let _ = q.resources_used.to_resource();
    1 + q.children().iter().map(visit).sum::<usize>()
}

/// Every reader of RM (and NM) responses, JSON and XML, and of the request bodies the
/// emulator takes.
fn parse_everything(bytes: &[u8]) -> Result<(), TestCaseError> {
    let json = serde_json::from_slice::<Value>(bytes).is_ok();
    let well_formed = xml::to_value(bytes).is_ok();
    for (format, valid) in [(Format::Json, json), (Format::Xml, well_formed)] {
        parse_as(bytes, format, valid)?;
    }
    // The proxy reads client submissions, JSON or XML, and may rewrite their queue.
    for ctype in [Some("application/json"), Some("application/xml"), None] {
        if let Some((format, _)) = submission::read(bytes, ctype) {
            let _ = submission::with_queue(bytes, format, "short");
        }
    }
    Ok(())
}

fn parse_as(bytes: &[u8], format: Format, valid: bool) -> Result<(), TestCaseError> {
    if let Some(p) = read::<ClusterInfoResponse>(bytes, format, valid)? {
        let _ = p.value.cluster_info.ha_state.trim();
    }
    read::<ClusterMetricsResponse>(bytes, format, valid)?;
    if let Some(p) = read::<SchedulerResponse>(bytes, format, valid)? {
        visit(&p.value.scheduler.scheduler_info);
    }
    if let Some(p) = read::<AppsResponse>(bytes, format, valid)? {
        for a in p.value.into_list() {
            let _ = a.tags().count();
            for r in a.resource_requests.iter().flatten() {
                let _ = r.capability.to_resource();
            }
        }
    }
    read::<AppResponse>(bytes, format, valid)?;
    read::<AppAttemptsResponse>(bytes, format, valid)?;
    read::<AttemptContainersResponse>(bytes, format, valid)?;
    read::<ContainerResponse>(bytes, format, valid)?;
    if let Some(p) = read::<NodesResponse>(bytes, format, valid)? {
        for n in p.value.into_list() {
            let _ = n.total_resource.to_resource();
            let _ = n.used_resource.to_resource();
        }
    }
    read::<NodeResponse>(bytes, format, valid)?;
    read::<NewApplication>(bytes, format, valid)?;
    read::<ResourceInfoResponse>(bytes, format, valid)?;
    read::<ResourceOptionInfo>(bytes, format, valid)?;
    read::<AppStateInfo>(bytes, format, valid)?;
    read::<AppQueueInfo>(bytes, format, valid)?;
    read::<ApplicationSubmissionContext>(bytes, format, valid)?;
    read::<NodeLabelsInfo>(bytes, format, valid)?;
    read::<NodeToLabelsInfo>(bytes, format, valid)?;
    read::<NodeToLabelsEntryList>(bytes, format, valid)?;
    read::<RemoteExceptionResponse>(bytes, format, valid)?;
    read::<NmNodeInfoResponse>(bytes, format, valid)?;
    read::<NmAppsResponse>(bytes, format, valid)?;
    read::<NmContainersResponse>(bytes, format, valid)?;
    read::<NmContainerResponse>(bytes, format, valid)?;
    Ok(())
}

/// Every string in the fixtures, plus names the shipped configuration knows, so that
/// mutations move real ids, queues and states between documents.
fn strings() -> Vec<String> {
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            Value::Object(m) => m.values().for_each(|x| collect(x, out)),
            _ => {}
        }
    }
    let mut out: Vec<String> = [
        "short",
        "long",
        "root.short",
        "root.long",
        "RUNNING",
        "ACCEPTED",
        "*",
        "",
        "container_1326815542473_0001_01_000002",
        "container_e17_1326815542473_0001_01_000001",
        "application_1326815542473_0001",
        "appattempt_1326815542473_0001_000001",
        "host.domain.com:8041",
        "\u{0}",
        "\u{202e}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (_, text) in FIXTURES {
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            collect(&v, &mut out);
        }
    }
    out.sort();
    out.dedup();
    out
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the value with one of another kind or an extreme number.
    Replace(Index, Value),
    /// Replace the value with a string seen elsewhere.
    Swap(Index, Index),
    Remove(Index),
    /// A list element twice, or an object as a one-element list (Jackson's quirk).
    Duplicate(Index),
    Wrap(Index),
    /// A number as a string, or a string as a number.
    Retype(Index),
}

fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            i64::MIN,
            -1,
            0,
            i64::from(i32::MAX),
            i64::from(u32::MAX),
            i64::MAX
        ])
        .prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
        Just(Value::Array(Vec::new())),
        Just(Value::Object(Default::default())),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), odd_value()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(i, s)| Mutation::Swap(i, s)),
        2 => any::<Index>().prop_map(Mutation::Remove),
        1 => any::<Index>().prop_map(Mutation::Duplicate),
        1 => any::<Index>().prop_map(Mutation::Wrap),
        1 => any::<Index>().prop_map(Mutation::Retype),
    ]
}

/// JSON pointers of every value under `v` (the root included).
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn apply(doc: &mut Value, m: &Mutation, pool: &[String]) {
    let mut all = Vec::new();
    pointers(doc, String::new(), &mut all);
    let at = |i: &Index| all[i.index(all.len())].clone();
    match m {
        Mutation::Replace(i, v) => {
            if let Some(x) = doc.pointer_mut(&at(i)) {
                *x = v.clone();
            }
        }
        Mutation::Swap(i, s) => {
            if let Some(x) = doc.pointer_mut(&at(i)) {
                *x = Value::String(pool[s.index(pool.len())].clone());
            }
        }
        Mutation::Remove(i) => {
            let p = at(i);
            let Some((parent, last)) = p.rsplit_once('/') else {
                return;
            };
            let key = last.replace("~1", "/").replace("~0", "~");
            match doc.pointer_mut(parent) {
                Some(Value::Object(o)) => {
                    o.remove(&key);
                }
                Some(Value::Array(a)) => {
                    if let Ok(n) = key.parse::<usize>()
                        && n < a.len()
                    {
                        a.remove(n);
                    }
                }
                _ => {}
            }
        }
        Mutation::Duplicate(i) => {
            if let Some(Value::Array(a)) = doc.pointer_mut(&at(i))
                && let Some(first) = a.first().cloned()
            {
                a.push(first);
            }
        }
        Mutation::Wrap(i) => {
            if let Some(x) = doc.pointer_mut(&at(i)) {
                *x = Value::Array(vec![x.take()]);
            }
        }
        Mutation::Retype(i) => {
            if let Some(x) = doc.pointer_mut(&at(i)) {
                *x = match x.take() {
                    Value::Number(n) => Value::String(n.to_string()),
                    Value::String(s) => s
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map_or(Value::String(s), Value::Number),
                    Value::Bool(b) => Value::String(b.to_string()),
                    other => other,
                };
            }
        }
    }
}

/// How the mutated document reaches the parsers.
#[derive(Clone, Debug)]
enum Bytes {
    Whole,
    /// Cut short, like a connection closed mid-body.
    Truncated(Index),
    /// One byte changed.
    Flipped(Index, u8),
}

fn bytes_of(doc: &Value, how: &Bytes, as_xml: bool) -> Vec<u8> {
    let mut b = if as_xml { xml_of(doc) } else { doc.to_string() }.into_bytes();
    match how {
        Bytes::Whole => {}
        Bytes::Truncated(i) => b.truncate(i.index(b.len() + 1)),
        Bytes::Flipped(i, x) => {
            if !b.is_empty() {
                let n = i.index(b.len());
                b[n] ^= *x;
            }
        }
    }
    b
}

/// A document as the RM's XML: JAXB's layout, as the emulator serves it.
fn xml_of(doc: &Value) -> String {
    match doc {
        Value::Object(m) if m.len() == 1 => {
            let root = m.keys().next().map_or("doc", String::as_str);
            crate::emulator::rest::to_xml(root, doc)
        }
        other => crate::emulator::rest::to_xml("doc", other),
    }
}

/// XML-like text: tags, attributes, entities and text of YARN's documents, in any order.
fn xml_like() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        "<apps>",
        "</apps>",
        "<app>",
        "</app>",
        "<id>",
        "</id>",
        "<apps/>",
        "<queue/>",
        "<scheduler>",
        "<schedulerInfo xsi:type=\"capacityScheduler\">",
        "</schedulerInfo>",
        "<queues>",
        "</queues>",
        "<queue xsi:type=\"capacitySchedulerLeafQueueInfo\">",
        "</queue>",
        "<capacity>",
        "</capacity>",
        "<RemoteException>",
        "</RemoteException>",
        "<?xml version=\"1.0\"?>",
        "<!DOCTYPE x>",
        "<!-- c -->",
        "<![CDATA[<]]>",
        "&amp;",
        "&#65;",
        "&#xFFFFFF;",
        "&nope;",
        "<",
        ">",
        "/>",
        "=\"",
        " a='1'",
        "\u{0}",
        "12",
        "NaN",
        "application_1_0001",
        "  \n",
    ]);
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat().into_bytes())
}

fn delivery() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        6 => Just(Bytes::Whole),
        1 => any::<Index>().prop_map(Bytes::Truncated),
        1 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Bytes::Flipped(i, x)),
    ]
}

/// Hadoop 3's documented responses, edited to describe one cluster (their examples come
/// from different clusters): the first application RUNNING in `long` and owning the
/// documented containers, the second ACCEPTED in `short`, both queues in the scheduler's
/// tree, the containers on the documented node. Mutations then start from a view with
/// applications and containers.
fn coherent_docs() -> HashMap<&'static str, Value> {
    let mut docs: HashMap<&'static str, Value> = FIXTURES
        .iter()
        .filter_map(|(n, t)| Some((*n, serde_json::from_str(t).ok()?)))
        .collect();
    let mut set = |doc: &str, pointer: &str, v: Value| {
        if let Some(x) = docs.get_mut(doc).and_then(|d| d.pointer_mut(pointer)) {
            *x = v;
        }
    };
    let apps = "hadoop-3/apps.json";
    set(
        apps,
        "/apps/app/0/id",
        "application_1531404209605_0008".into(),
    );
    set(apps, "/apps/app/0/state", "RUNNING".into());
    set(apps, "/apps/app/0/queue", "long".into());
    set(apps, "/apps/app/1/state", "ACCEPTED".into());
    set(apps, "/apps/app/1/queue", "root.short".into());
    // The view takes applications only in the RM's own leaf queues: the documented
    // tree's `a` and `b` become the shipped configuration's `short` and `long`.
    let scheduler = "hadoop-3/scheduler-capacity.json";
    for (i, name) in [(0, "short"), (1, "long")] {
        let at = format!("/scheduler/schedulerInfo/queues/queue/{i}");
        set(scheduler, &format!("{at}/queueName"), name.into());
        set(
            scheduler,
            &format!("{at}/queuePath"),
            format!("root.{name}").into(),
        );
    }
    let containers = "hadoop-3/appattempt-containers.json";
    for i in 0..4 {
        set(
            containers,
            &format!("/containers/container/{i}/nodeId"),
            "host.domain.com:54158".into(),
        );
    }
    docs
}

/// The view the controller builds from a snapshot whose parts come from `docs`, if it
/// builds one.
fn build_view(
    docs: &HashMap<&str, Vec<u8>>,
    queues: &QueueTree,
) -> Result<Option<Observation>, TestCaseError> {
    fn get<T: DeserializeOwned + Default>(docs: &HashMap<&str, Vec<u8>>, name: &str) -> T {
        let xml_body = |b: &[u8]| b.iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'<');
        docs.get(name)
            .and_then(|b| match xml_body(b) {
                true => xml::decode::<T>(b, name).ok(),
                false => decode::<T>(b, name).ok(),
            })
            .map(|p| p.value)
            .unwrap_or_default()
    }
    let snapshot = RmSnapshot {
        active_rm: "http://rm:8088".into(),
        cluster: get::<ClusterInfoResponse>(docs, "hadoop-3/cluster-info.json").cluster_info,
        scheduler: get::<SchedulerResponse>(docs, "hadoop-3/scheduler-capacity.json")
            .scheduler
            .scheduler_info,
        apps: get::<AppsResponse>(docs, "hadoop-3/apps.json").into_list(),
        containers: get::<AttemptContainersResponse>(docs, "hadoop-3/appattempt-containers.json")
            .into_list(),
        nodes: get::<NodesResponse>(docs, "hadoop-3/nodes.json").into_list(),
        warnings: Vec::new(),
    };
    let agents = HashMap::new();
    let inputs = Inputs {
        queues,
        class_cutoff_secs: 60.0,
        agents: &agents,
        exempt: &std::collections::HashSet::new(),
        now: 1_700_000_000_000,
    };
    let mut memory = Memory::default();
    let Ok(obs) = view::build(&snapshot, &inputs, &mut memory) else {
        return Ok(None);
    };
    prop_assert!(obs.view.apps().len() <= snapshot.apps.len());
    prop_assert!(obs.view.containers().len() <= snapshot.containers.len());
    prop_assert!(obs.view.nodes().len() <= snapshot.nodes.len());
    Ok(Some(obs))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_any_parser(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..512),
            ".{0,200}".prop_map(String::into_bytes),
            xml_like(),
        ],
    ) {
        parse_everything(&bytes)?;
    }

    #[test]
    fn cut_or_flipped_real_xml_never_panics(which in any::<Index>(), how in delivery()) {
        let text = XML_FIXTURES[which.index(XML_FIXTURES.len())].1;
        let mut b = text.as_bytes().to_vec();
        match how {
            Bytes::Whole => {}
            Bytes::Truncated(i) => b.truncate(i.index(b.len() + 1)),
            Bytes::Flipped(i, x) => {
                let n = i.index(b.len());
                b[n] ^= x;
            }
        }
        parse_everything(&b)?;
    }

    #[test]
    fn mutated_documented_responses_parse_and_build_a_view(
        which in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
        how in delivery(),
        as_xml in any::<bool>(),
    ) {
        let pool = strings();
        let docs = coherent_docs();
        let name = FIXTURES[which.index(FIXTURES.len())].0;
        let mut doc = docs.get(name).cloned().unwrap_or_default();
        for m in &mutations {
            apply(&mut doc, m, &pool);
        }
        let bytes = bytes_of(&doc, &how, as_xml);
        parse_everything(&bytes)?;

        let mut docs: HashMap<&str, Vec<u8>> = docs
            .iter()
            .map(|(n, v)| (*n, bytes_of(v, &Bytes::Whole, as_xml)))
            .collect();
        docs.insert(name, bytes);
        let queues = crate::config::load_embedded_default()
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .queues;
        build_view(&docs, &queues)?;
    }
}

#[test]
fn the_edited_fixtures_build_a_view_with_apps_and_containers() {
    let docs: HashMap<&str, Vec<u8>> = coherent_docs()
        .iter()
        .map(|(n, v)| (*n, v.to_string().into_bytes()))
        .collect();
    let queues = crate::config::load_embedded_default()
        .expect("the shipped configuration")
        .queues;
    let obs = build_view(&docs, &queues)
        .expect("no failed check")
        .expect("a view");
    assert_eq!(obs.view.apps().len(), 2, "{:?}", obs.skipped);
    assert!(!obs.view.containers().is_empty(), "{:?}", obs.skipped);
    assert!(!obs.view.nodes().is_empty());
}

/// Each documented response, written as the RM's XML, reads as the same DTO as its JSON.
#[test]
fn documented_responses_read_the_same_from_xml() {
    fn same<T: DeserializeOwned + Default + serde::Serialize>(name: &str) {
        let json = FIXTURES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("no fixture {name}"));
        let doc: Value = serde_json::from_str(json).expect("fixture JSON");
        let from_json = decode::<T>(json.as_bytes(), name).expect("JSON");
        let xml = xml_of(&doc);
        let from_xml = xml::decode::<T>(xml.as_bytes(), name).expect("XML");
        assert!(
            from_xml.warnings.is_empty(),
            "{name}: {:?}",
            from_xml.warnings
        );
        assert_eq!(
            xml::comparable(&from_xml.value),
            xml::comparable(&from_json.value),
            "{name}\n{xml}"
        );
    }
    for v in ["hadoop-2", "hadoop-3"] {
        same::<ClusterInfoResponse>(&format!("{v}/cluster-info.json"));
        same::<ClusterMetricsResponse>(&format!("{v}/cluster-metrics.json"));
        same::<SchedulerResponse>(&format!("{v}/scheduler-capacity.json"));
        same::<AppsResponse>(&format!("{v}/apps.json"));
        same::<AppResponse>(&format!("{v}/app.json"));
        same::<AppAttemptsResponse>(&format!("{v}/appattempts.json"));
        same::<NodesResponse>(&format!("{v}/nodes.json"));
        same::<NodeResponse>(&format!("{v}/node.json"));
    }
    same::<AttemptContainersResponse>("hadoop-3/appattempt-containers.json");
    same::<ResourceInfoResponse>("hadoop-3/node-resource-response.json");
}
