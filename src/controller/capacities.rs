//! The durable record of the nodes whose advertised capacity Preemptor changed, with
//! each one's physical capacity. A node is recorded before its first change and
//! forgotten once it is back at its physical capacity.
//!
//! Nothing else keeps that number once a node has been raised: the RM's
//! `totalResource` and the NodeManager's own `/ws/v1/node/info` both report the raised
//! value (checked on Hadoop 3.5.0), and only a NodeManager restart brings back its
//! configured resource. So after a controller crash this file is what a restarted
//! controller and `preemptor restore-capacities` read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::NodeId;
use crate::resources::Resource;

const FILE: &str = "node-capacities.json";
const TEMP: &str = "node-capacities.json.tmp";
const LOCK: &str = "controller.lock";
const FORMAT: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("controller state directory {path}: {error}")]
    Dir { path: PathBuf, error: io::Error },
    #[error(
        "another controller (or restore-capacities) holds the state directory {0} (lock file controller.lock); each controller needs its own yarn.preemptor.controller.state-dir"
    )]
    Locked(PathBuf),
    #[error(
        "{path} is not a node capacity record ({why}); it is left as it is: check the nodes' capacities on the RM, then move the file away"
    )]
    Corrupt { path: PathBuf, why: String },
    #[error("writing {path}: {error}")]
    Write { path: PathBuf, error: io::Error },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Body {
    format: u32,
    nodes: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    node: String,
    physical: Resource,
}

/// The record, with the state directory's lock held for as long as it lives.
pub struct CapacityLedger {
    dir: PathBuf,
    nodes: BTreeMap<NodeId, Resource>,
    _lock: File,
}

impl CapacityLedger {
    /// Creates the directory if needed, takes its lock and reads the record.
    pub fn open(dir: &Path) -> Result<CapacityLedger, LedgerError> {
        let dir_err = |error| LedgerError::Dir {
            path: dir.to_path_buf(),
            error,
        };
        crate::durable::create_private_dir(dir).map_err(dir_err)?;
        let lock = crate::durable::try_lock(&dir.join(LOCK))
            .map_err(dir_err)?
            .ok_or_else(|| LedgerError::Locked(dir.to_path_buf()))?;
        let path = dir.join(FILE);
        let nodes = match std::fs::read(&path) {
            Ok(bytes) => parse(&bytes).map_err(|why| LedgerError::Corrupt {
                path: path.clone(),
                why,
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(LedgerError::Dir { path, error }),
        };
        Ok(CapacityLedger {
            dir: dir.to_path_buf(),
            nodes,
            _lock: lock,
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Recorded nodes and their physical capacities.
    pub fn nodes(&self) -> &BTreeMap<NodeId, Resource> {
        &self.nodes
    }

    /// Records the physical capacity of each node not recorded yet, durably, before the
    /// caller changes them. A node already recorded keeps its first value.
    pub fn record(
        &mut self,
        nodes: impl IntoIterator<Item = (NodeId, Resource)>,
    ) -> Result<(), LedgerError> {
        let mut next = self.nodes.clone();
        let mut added = false;
        for (node, physical) in nodes {
            if let std::collections::btree_map::Entry::Vacant(e) = next.entry(node) {
                e.insert(physical);
                added = true;
            }
        }
        if added {
            self.write(&next)?;
            self.nodes = next;
        }
        Ok(())
    }

    /// Forgets nodes that are back at their physical capacity.
    pub fn forget<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = &'a NodeId>,
    ) -> Result<(), LedgerError> {
        let mut next = self.nodes.clone();
        let before = next.len();
        for n in nodes {
            next.remove(n);
        }
        if next.len() != before {
            self.write(&next)?;
            self.nodes = next;
        }
        Ok(())
    }

    fn write(&self, nodes: &BTreeMap<NodeId, Resource>) -> Result<(), LedgerError> {
        let body = Body {
            format: FORMAT,
            nodes: nodes
                .iter()
                .map(|(n, r)| Entry {
                    node: n.to_string(),
                    physical: *r,
                })
                .collect(),
        };
        let path = self.path();
        let mut bytes = serde_json::to_vec_pretty(&body).map_err(|e| LedgerError::Write {
            path: path.clone(),
            error: io::Error::other(e),
        })?;
        bytes.push(b'\n');
        crate::durable::replace_file(&path, &self.dir.join(TEMP), &bytes)
            .map_err(|error| LedgerError::Write { path, error })
    }
}

fn parse(bytes: &[u8]) -> Result<BTreeMap<NodeId, Resource>, String> {
    let body: Body = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if body.format != FORMAT {
        return Err(format!(
            "format {} (this version reads {FORMAT})",
            body.format
        ));
    }
    let mut out = BTreeMap::new();
    for e in body.nodes {
        let id = e.node.trim();
        if id.is_empty() {
            return Err("a node without an id".into());
        }
        if e.physical.memory_mb == 0 && e.physical.vcores == 0 {
            return Err(format!("node {id} has a physical capacity of nothing"));
        }
        if out.insert(NodeId::new(id), e.physical).is_some() {
            return Err(format!("node {id} is listed twice"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_nodes_survive_reopening_and_keep_their_first_value() {
        let dir = tempfile::tempdir().unwrap();
        let a = NodeId::new("nm1:8041");
        {
            let mut l = CapacityLedger::open(dir.path()).unwrap();
            l.record([(a.clone(), Resource::new(8192, 8))]).unwrap();
            // Raised already: the RM's figure must not replace the recorded one.
            l.record([(a.clone(), Resource::new(12288, 12))]).unwrap();
        }
        let mut l = CapacityLedger::open(dir.path()).unwrap();
        assert_eq!(l.nodes().get(&a), Some(&Resource::new(8192, 8)));
        l.forget([&a]).unwrap();
        drop(l);
        assert!(CapacityLedger::open(dir.path()).unwrap().nodes().is_empty());
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let _first = CapacityLedger::open(dir.path()).unwrap();
        let e = CapacityLedger::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("controller.lock"), "{e}");
    }

    #[test]
    fn a_damaged_record_is_refused_and_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        for (text, why) in [
            ("{\"format\":1,\"nodes\":[", "EOF"),
            ("{\"format\":2,\"nodes\":[]}", "format 2"),
            (
                "{\"format\":1,\"nodes\":[{\"node\":\"a:1\",\"physical\":{\"memoryMb\":0,\"vcores\":0}}]}",
                "nothing",
            ),
            (
                "{\"format\":1,\"nodes\":[{\"node\":\"a:1\",\"physical\":{\"memoryMb\":1,\"vcores\":1}},{\"node\":\"a:1\",\"physical\":{\"memoryMb\":1,\"vcores\":1}}]}",
                "twice",
            ),
        ] {
            std::fs::write(dir.path().join(FILE), text).unwrap();
            let e = CapacityLedger::open(dir.path()).err().unwrap().to_string();
            assert!(e.contains(why) && e.contains(FILE), "{text}: {e}");
            assert_eq!(
                std::fs::read_to_string(dir.path().join(FILE)).unwrap(),
                text
            );
        }
    }
}
