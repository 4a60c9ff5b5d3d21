//! Reading YARN's JSON without letting one odd field fail a whole response.
//!
//! [`decode`] first tries the typed parse. Only when that fails on valid JSON does it
//! look for the cause: it probes the document with "skeletons" that keep a single field
//! (every DTO is `#[serde(default)]`, so a skeleton parses unless that field is the
//! problem), walks down to the deepest field that still fails, removes it, and tries
//! again. A removed object member reads as its default; a removed list element is an
//! item skipped. Each removal becomes a [`SchemaWarning`] naming the field by its path in
//! the document, e.g. `apps.app[3].allocatedMB: expected an integer, got string "abc"`.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// What was done about a field the client could not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// The member was ignored and the field keeps its default.
    FieldDefaulted,
    /// The list element was left out.
    ItemSkipped,
    /// Nothing in the document could be read; every field keeps its default.
    DocumentDefaulted,
}

/// A schema surprise in a ResourceManager response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SchemaWarning {
    /// The request that returned the document, e.g. `GET /ws/v1/cluster/apps`.
    pub source: String,
    /// The field's path in the document, e.g. `apps.app[3].allocatedMB`; empty for the
    /// document itself.
    pub path: String,
    pub message: String,
    pub recovery: Recovery,
}

impl fmt::Display for SchemaWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.recovery {
            Recovery::FieldDefaulted => "field ignored, default used",
            Recovery::ItemSkipped => "item skipped",
            Recovery::DocumentDefaulted => "document ignored",
        };
        let path = if self.path.is_empty() {
            "(document)"
        } else {
            &self.path
        };
        write!(f, "{}: {path}: {} ({what})", self.source, self.message)
    }
}

/// A value read from a response, with what had to be skipped to read it.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed<T> {
    pub value: T,
    pub warnings: Vec<SchemaWarning>,
}

impl<T> Parsed<T> {
    pub fn clean(value: T) -> Self {
        Parsed {
            value,
            warnings: Vec::new(),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Parsed<U> {
        Parsed {
            value: f(self.value),
            warnings: self.warnings,
        }
    }
}

/// Reads `bytes` as `T`. Only bytes that are not JSON at all are an error; any shape
/// problem is repaired and reported.
pub fn decode<T: DeserializeOwned + Default>(
    bytes: &[u8],
    source: &str,
) -> Result<Parsed<T>, serde_json::Error> {
    if let Ok(value) = serde_json::from_slice::<T>(bytes) {
        return Ok(Parsed::clean(value));
    }
    // Whether the bytes are JSON is decided on a Value: serde_json reports some shape
    // errors as syntax errors (an enum given `null` or a number: "expected value").
    let value: Value = serde_json::from_slice(bytes)?;
    Ok(from_value(value, source))
}

/// Enough for any real document; a bound so that a pathological one cannot spin.
const MAX_REPAIRS: usize = 10_000;

/// How a document value is read as `T`: serde_json's way, or the XML reader's
/// ([`super::xml::read`]).
pub type ReadFn<T> = fn(&Value) -> Result<T, serde_json::Error>;

/// Reads `value` as `T`, removing every field that cannot be read (see the module doc).
pub fn from_value<T: DeserializeOwned + Default>(value: Value, source: &str) -> Parsed<T> {
    from_value_with(value, source, |v| T::deserialize(v))
}

/// [`from_value`] with `read` deciding how a value reads as `T`.
pub fn from_value_with<T: Default>(mut value: Value, source: &str, read: ReadFn<T>) -> Parsed<T> {
    let mut warnings = Vec::new();
    let mut removed = Removed::default();
    for _ in 0..MAX_REPAIRS {
        let error = match read(&value) {
            Ok(v) => {
                return Parsed { value: v, warnings };
            }
            Err(e) => e,
        };
        let Some(path) = fault(&value, read) else {
            // No single member explains the failure; nothing sensible can be kept.
            warnings.push(warning(
                source,
                String::new(),
                &error,
                Recovery::DocumentDefaulted,
            ));
            return Parsed {
                value: T::default(),
                warnings,
            };
        };
        let message = probe(&path, leaf(&value, &path), read).unwrap_or(error);
        let recovery = match path.last() {
            Some(Seg::Index(_)) => Recovery::ItemSkipped,
            Some(Seg::Key(_)) => Recovery::FieldDefaulted,
            None => Recovery::DocumentDefaulted,
        };
        warnings.push(warning(source, removed.display(&path), &message, recovery));
        if path.is_empty() {
            value = Value::Object(Map::new());
        } else {
            removed.record(&path);
            remove(&mut value, &path);
        }
    }
    warnings.push(SchemaWarning {
        source: source.to_string(),
        path: String::new(),
        message: format!("more than {MAX_REPAIRS} unreadable fields"),
        recovery: Recovery::DocumentDefaulted,
    });
    Parsed {
        value: T::default(),
        warnings,
    }
}

fn warning(source: &str, path: String, e: &serde_json::Error, recovery: Recovery) -> SchemaWarning {
    SchemaWarning {
        source: source.to_string(),
        path,
        message: e.to_string(),
        recovery,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// The value at `path`, which [`fault`] only returns for paths that exist.
fn leaf<'a>(mut v: &'a Value, path: &[Seg]) -> &'a Value {
    for seg in path {
        let next = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get(k),
            (Seg::Index(i), Value::Array(a)) => a.get(*i),
            _ => None,
        };
        match next {
            Some(n) => v = n,
            None => return &Value::Null,
        }
    }
    v
}

/// `T` read from a document holding only `leaf` at `path` (a list holding it alone in
/// place of each index): the error if that fails.
fn probe<T>(path: &[Seg], leaf: &Value, read: ReadFn<T>) -> Option<serde_json::Error> {
    let skeleton = path
        .iter()
        .rev()
        .fold(leaf.clone(), |inner, seg| match seg {
            Seg::Key(k) => {
                let mut m = Map::new();
                m.insert(k.clone(), inner);
                Value::Object(m)
            }
            Seg::Index(_) => Value::Array(vec![inner]),
        });
    read(&skeleton).err()
}

/// The deepest path whose value alone makes `T` fail, or `None` when no single value
/// does.
fn fault<T>(root: &Value, read: ReadFn<T>) -> Option<Vec<Seg>> {
    let mut path = Vec::new();
    let mut here = root;
    if !root.is_object() {
        // Every YARN document is an object.
        return Some(path);
    }
    loop {
        let children: Vec<(Seg, &Value)> = match here {
            Value::Object(m) => m.iter().map(|(k, v)| (Seg::Key(k.clone()), v)).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| (Seg::Index(i), v))
                .collect(),
            _ => return Some(path),
        };
        let bad = children.into_iter().find(|(seg, v)| {
            path.push(seg.clone());
            let fails = probe(&path, v, read).is_some();
            path.pop();
            fails
        });
        let Some((seg, child)) = bad else {
            // The container fails only as a whole (or, at the root, not at all alone).
            return if path.is_empty() { None } else { Some(path) };
        };
        path.push(seg);
        // Descend only if the child's kind is right: an object where a number belongs
        // is the fault itself, not whichever of its members is probed first.
        let is_container = matches!(child, Value::Object(_) | Value::Array(_));
        if !is_container || probe(&path, &empty_like(child), read).is_some() {
            return Some(path);
        }
        here = child;
    }
}

fn empty_like(v: &Value) -> Value {
    match v {
        Value::Array(_) => Value::Array(Vec::new()),
        _ => Value::Object(Map::new()),
    }
}

fn remove(root: &mut Value, path: &[Seg]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut v = root;
    for seg in parents {
        let next = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k),
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => v = n,
            None => return,
        }
    }
    match (last, v) {
        (Seg::Key(k), Value::Object(m)) => {
            m.remove(k);
        }
        (Seg::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
        }
        _ => {}
    }
}

/// Elements already removed from each list, so that later warnings still name items by
/// their index in the document as the RM sent it.
#[derive(Default)]
struct Removed(HashMap<String, Vec<usize>>);

impl Removed {
    /// Original indices along `path`, and the displayed path of each list on it.
    fn walk(&self, path: &[Seg]) -> (String, Vec<(String, usize)>) {
        let mut shown = String::new();
        let mut lists = Vec::new();
        for seg in path {
            match seg {
                Seg::Key(k) => {
                    if !shown.is_empty() {
                        shown.push('.');
                    }
                    shown.push_str(k);
                }
                Seg::Index(i) => {
                    let original = self.original(&shown, *i);
                    lists.push((shown.clone(), original));
                    shown.push_str(&format!("[{original}]"));
                }
            }
        }
        (shown, lists)
    }

    fn original(&self, list: &str, current: usize) -> usize {
        let gone = self.0.get(list).map_or(&[][..], Vec::as_slice);
        let mut original = current;
        for &g in gone {
            if g <= original {
                original += 1;
            }
        }
        original
    }

    fn display(&self, path: &[Seg]) -> String {
        self.walk(path).0
    }

    fn record(&mut self, path: &[Seg]) {
        if let Some(Seg::Index(_)) = path.last() {
            let (_, lists) = self.walk(path);
            if let Some((list, original)) = lists.last() {
                let gone = self.0.entry(list.clone()).or_default();
                gone.push(*original);
                gone.sort_unstable();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yarn::dto::{AppsResponse, ClusterInfoResponse, SchedulerResponse};

    fn apps(json: &str) -> Parsed<AppsResponse> {
        decode(json.as_bytes(), "GET /ws/v1/cluster/apps").unwrap()
    }

    #[test]
    fn an_enum_given_null_or_a_number_is_a_field_not_a_broken_document() {
        // Found by the fuzz test: serde_json calls these syntax errors.
        let p = apps(
            r#"{"apps":{"app":[{"id":"a0","state":null},{"id":"a1","finalStatus":7,"state":"RUNNING"}]}}"#,
        );
        let paths: Vec<&str> = p.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["apps.app[0].state", "apps.app[1].finalStatus"]);
        let list = p.value.into_list();
        assert_eq!(list.len(), 2);
        assert_eq!(
            list[1].state,
            crate::yarn::dto::YarnApplicationState::Running
        );
        assert!(decode::<AppsResponse>(b"{\"apps\":", "x").is_err());
    }

    #[test]
    fn a_clean_document_has_no_warnings() {
        let p = apps(r#"{"apps":{"app":[{"id":"application_1_0001","allocatedMB":"512"}]}}"#);
        assert!(p.warnings.is_empty());
        assert_eq!(p.value.into_list()[0].allocated_mb, 512);
    }

    #[test]
    fn a_bad_number_is_defaulted_and_named_by_its_path() {
        let p = apps(
            r#"{"apps":{"app":[{"id":"a0"},{"id":"a1"},{"id":"a2"},
                {"id":"a3","allocatedMB":"abc","allocatedVCores":2}]}}"#,
        );
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        let w = &p.warnings[0];
        assert_eq!(w.path, "apps.app[3].allocatedMB");
        assert_eq!(w.message, r#"expected an integer, got string "abc""#);
        assert_eq!(w.recovery, Recovery::FieldDefaulted);
        assert_eq!(
            w.to_string(),
            r#"GET /ws/v1/cluster/apps: apps.app[3].allocatedMB: expected an integer, got string "abc" (field ignored, default used)"#
        );
        let list = p.value.into_list();
        assert_eq!(list.len(), 4);
        assert_eq!((list[3].allocated_mb, list[3].allocated_vcores), (0, 2));
    }

    #[test]
    fn unreadable_items_are_skipped_and_later_ones_keep_their_document_index() {
        let p = apps(
            r#"{"apps":{"app":["junk",{"id":"a1"},7,{"id":"a3","progress":true},{"id":"a4"}]}}"#,
        );
        let paths: Vec<(&str, Recovery)> = p
            .warnings
            .iter()
            .map(|w| (w.path.as_str(), w.recovery))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("apps.app[0]", Recovery::ItemSkipped),
                ("apps.app[2]", Recovery::ItemSkipped),
                ("apps.app[3].progress", Recovery::FieldDefaulted),
            ]
        );
        let ids: Vec<String> = p.value.into_list().into_iter().map(|a| a.id).collect();
        assert_eq!(ids, ["a1", "a3", "a4"]);
    }

    #[test]
    fn a_container_of_the_wrong_kind_is_the_fault_not_its_first_member() {
        let p = apps(r#"{"apps":{"app":[{"id":"a0","allocatedMB":{"value":1}}]}}"#);
        assert_eq!(p.warnings[0].path, "apps.app[0].allocatedMB");
        let p = apps(r#"{"apps":"none"}"#);
        assert_eq!(p.warnings[0].path, "apps");
        assert!(p.value.into_list().is_empty());
    }

    #[test]
    fn deep_faults_in_the_queue_tree_are_found() {
        let j = r#"{"scheduler":{"schedulerInfo":{"type":"capacityScheduler","queueName":"root",
            "queues":{"queue":[{"queueName":"a","capacity":50},
              {"queueName":"b","queues":{"queue":[{"queueName":"b1","capacity":"half",
                 "numContainers":"3","type":"capacitySchedulerLeafQueueInfo"}]}}]}}}}"#;
        let p: Parsed<SchedulerResponse> = decode(j.as_bytes(), "GET /scheduler").unwrap();
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert_eq!(
            p.warnings[0].path,
            "scheduler.schedulerInfo.queues.queue[1].queues.queue[0].capacity"
        );
        let root = p.value.scheduler.scheduler_info;
        let b1 = &root.children()[1].children()[0];
        assert_eq!(b1.queue_name, "b1");
        assert_eq!(b1.num_containers, Some(3));
        assert!(b1.is_leaf());
    }

    #[test]
    fn the_wrong_document_kind_defaults_everything_and_json_syntax_is_an_error() {
        let p: Parsed<ClusterInfoResponse> = decode(b"[1,2]", "GET /info").unwrap();
        assert_eq!(p.warnings[0].recovery, Recovery::DocumentDefaulted);
        assert_eq!(p.value, ClusterInfoResponse::default());
        assert!(decode::<ClusterInfoResponse>(b"<html>", "GET /info").is_err());
        assert!(decode::<ClusterInfoResponse>(b"{\"clusterInfo\":", "GET /info").is_err());
    }

    #[test]
    fn arbitrary_json_never_panics() {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z0-9]{0,4}".prop_map(Value::from),
        ];
        let keys = prop_oneof![
            Just("apps".to_string()),
            Just("app".to_string()),
            Just("id".to_string()),
            Just("allocatedMB".to_string()),
            Just("resourceRequests".to_string()),
            Just("priority".to_string()),
            Just("capability".to_string()),
        ];
        let tree = leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(keys.clone(), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        proptest!(|(v in tree)| {
            let p: Parsed<AppsResponse> = from_value(v, "test");
            prop_assert!(p.warnings.len() <= MAX_REPAIRS + 1);
        });
    }
}
