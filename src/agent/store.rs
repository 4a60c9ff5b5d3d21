//! The agent's durable record of every container whose limits it changed.
//!
//! One small file, rewritten whole: write `agent-state.json.tmp`, fsync it, rotate the
//! current file to `agent-state.prev.json`, rename the new one into place and fsync the
//! directory. Each file starts with a header carrying a generation, the body length and an
//! FNV-1a checksum, so a torn or truncated file is recognised and the newest intact
//! generation among the three names wins. Damaged files are moved aside (`.corrupt-*`),
//! never overwritten.
//!
//! The enforcer writes twice per action (intent before touching a limit, outcome after),
//! so the previous generation always holds the originals of every changed container.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::api::ActionKind;
use super::limits::OriginalLimits;
use super::writer::WritePath;
use crate::cluster::{ContainerId, ContainerState};
use crate::resources::{Limits, Resource};

const MAGIC: &str = "preemptor-agent-state";
const FORMAT: u32 = 1;
const CURRENT: &str = "agent-state.json";
const PREVIOUS: &str = "agent-state.prev.json";
const TEMP: &str = "agent-state.json.tmp";
const LOCK: &str = "agent.lock";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state directory {path}: {error}")]
    Dir { path: PathBuf, error: io::Error },
    #[error("another agent holds the state directory {0} (lock file agent.lock)")]
    Locked(PathBuf),
    #[error("writing state file {path}: {error}")]
    Write { path: PathBuf, error: io::Error },
    #[error("encoding state: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("the agent is shutting down; its state directory {0} is released")]
    Closed(PathBuf),
}

/// One changed container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredContainer {
    pub container: ContainerId,
    pub docker_id: String,
    pub allocated: Resource,
    pub original: OriginalLimits,
    /// The path the limits were changed through; resume uses the same one.
    pub path: WritePath,
    pub state: ContainerState,
    /// The YARN-unit limits last asked for.
    pub limits: Limits,
    /// Set before a change starts and cleared when it is done: after a crash, the limits
    /// may be anywhere between the previous state and this action's target.
    pub pending: Option<ActionKind>,
    /// CPU frozen at the footprint because the container was swapping.
    pub frozen: bool,
    pub updated_unix_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Body {
    containers: Vec<StoredContainer>,
}

/// Where the loaded state came from, for the log and /healthz.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadReport {
    pub generation: u64,
    /// `current`, `previous`, `temporary` or `empty`.
    pub source: String,
    /// Files that were damaged and moved aside, with why.
    pub damaged: Vec<String>,
}

pub struct StateStore {
    dir: PathBuf,
    generation: u64,
    // Held until `close`; the kernel drops the lock if the agent dies.
    lock: Option<File>,
}

/// FNV-1a, 64 bit: detects torn and truncated files, which is all it is for.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn encode(generation: u64, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "{MAGIC} {FORMAT} {generation} {} {:016x}\n",
        body.len(),
        fnv1a(body)
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn decode(bytes: &[u8]) -> Result<(u64, Vec<StoredContainer>), String> {
    let nl = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("no header line")?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| "header is not text")?;
    let body = &bytes[nl + 1..];
    let f: Vec<&str> = header.split(' ').collect();
    if f.len() != 5 || f[0] != MAGIC {
        return Err(format!("not a state file header: {header:?}"));
    }
    if f[1] != FORMAT.to_string() {
        return Err(format!("unsupported format {}", f[1]));
    }
    let generation: u64 = f[2].parse().map_err(|_| "bad generation")?;
    let len: usize = f[3].parse().map_err(|_| "bad length")?;
    let sum = u64::from_str_radix(f[4], 16).map_err(|_| "bad checksum field")?;
    if body.len() != len {
        return Err(format!("truncated: {} of {len} body bytes", body.len()));
    }
    if fnv1a(body) != sum {
        return Err("checksum mismatch".into());
    }
    let parsed: Body = serde_json::from_slice(body).map_err(|e| format!("bad JSON: {e}"))?;
    Ok((generation, parsed.containers))
}

impl StateStore {
    /// Opens (creating) the state directory, takes its lock and loads the newest intact
    /// generation.
    pub fn open(dir: &Path) -> Result<(StateStore, Vec<StoredContainer>, LoadReport), StoreError> {
        let dir_err = |error| StoreError::Dir {
            path: dir.to_path_buf(),
            error,
        };
        crate::durable::create_private_dir(dir).map_err(dir_err)?;
        let lock = crate::durable::try_lock(&dir.join(LOCK))
            .map_err(dir_err)?
            .ok_or_else(|| StoreError::Locked(dir.to_path_buf()))?;

        let mut best: Option<(u64, Vec<StoredContainer>, &str)> = None;
        let mut report = LoadReport::default();
        for (name, label) in [
            (CURRENT, "current"),
            (PREVIOUS, "previous"),
            (TEMP, "temporary"),
        ] {
            let path = dir.join(name);
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(dir_err(e)),
            };
            match decode(&bytes) {
                Ok((generation, containers)) => {
                    if best.as_ref().is_none_or(|(g, _, _)| generation > *g) {
                        best = Some((generation, containers, label));
                    }
                }
                Err(why) => {
                    let aside = dir.join(format!("{name}.corrupt-{}", super::unix_ms()));
                    fs::rename(&path, &aside).map_err(dir_err)?;
                    report
                        .damaged
                        .push(format!("{name}: {why} (moved to {})", aside.display()));
                }
            }
        }
        // A leftover temporary file is folded into the rotation on the next save.
        let (generation, containers, source) = best.unwrap_or((0, Vec::new(), "empty"));
        report.generation = generation;
        report.source = source.to_string();
        let store = StateStore {
            dir: dir.to_path_buf(),
            generation,
            lock: Some(lock),
        };
        Ok((store, containers, report))
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Releases the directory's lock now, so that a new agent can open it at once; an
    /// HTTP connection still winding down may hold the store a little longer. Later
    /// saves are refused.
    pub fn close(&mut self) {
        self.lock = None;
    }

    /// Replaces the stored state with `containers`, durably.
    pub fn save(&mut self, containers: &[StoredContainer]) -> Result<(), StoreError> {
        if self.lock.is_none() {
            return Err(StoreError::Closed(self.dir.clone()));
        }
        let body = serde_json::to_vec_pretty(&BodyRef { containers })?;
        let generation = self.generation + 1;
        let bytes = encode(generation, &body);
        let tmp = self.dir.join(TEMP);
        let current = self.dir.join(CURRENT);
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |error| StoreError::Write { path, error }
        };
        {
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(write_err(&tmp))?;
            f.write_all(&bytes).map_err(write_err(&tmp))?;
            f.sync_all().map_err(write_err(&tmp))?;
        }
        match fs::rename(&current, self.dir.join(PREVIOUS)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(write_err(&current)(e)),
        }
        fs::rename(&tmp, &current).map_err(write_err(&current))?;
        crate::durable::fsync_dir(&self.dir).map_err(write_err(&self.dir))?;
        self.generation = generation;
        Ok(())
    }
}

#[derive(Serialize)]
struct BodyRef<'a> {
    containers: &'a [StoredContainer],
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::agent::limits::{CgroupLimits, CgroupVersion, DockerLimits};

    pub(crate) fn record(n: u64) -> StoredContainer {
        StoredContainer {
            container: format!("container_e01_1700000000000_0001_01_{n:06}")
                .parse()
                .unwrap(),
            docker_id: format!("{n:064x}"),
            allocated: Resource::new(2048, 2),
            original: OriginalLimits {
                version: CgroupVersion::V1,
                docker: DockerLimits {
                    nano_cpus: 2_000_000_000,
                    memory: 2048 << 20,
                    memory_swap: 2048 << 20,
                    ..Default::default()
                },
                cgroup: CgroupLimits {
                    cpu_quota_us: Some(200_000),
                    cpu_period_us: 100_000,
                    cpu_shares: 1024,
                    memory_bytes: Some(2048 << 20),
                    memory_swap_bytes: Some(2048 << 20),
                    memory_high_bytes: None,
                },
            },
            path: WritePath::Docker,
            state: ContainerState::Suspended,
            limits: Limits::MIN_FOOTPRINT,
            pending: None,
            frozen: false,
            updated_unix_ms: 1,
        }
    }

    #[test]
    fn round_trip_and_generations() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let (mut s, loaded, report) = StateStore::open(tmp.path()).unwrap();
            assert!(loaded.is_empty());
            assert_eq!(report.source, "empty");
            s.save(&[record(2)]).unwrap();
            s.save(&[record(2), record(3)]).unwrap();
            assert_eq!(s.generation(), 2);
        }
        let (s, loaded, report) = StateStore::open(tmp.path()).unwrap();
        assert_eq!(loaded, vec![record(2), record(3)]);
        assert_eq!((report.generation, report.source.as_str()), (2, "current"));
        assert_eq!(s.generation(), 2);
    }

    #[test]
    fn a_truncated_current_file_falls_back_to_the_previous_generation() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let (mut s, _, _) = StateStore::open(tmp.path()).unwrap();
            s.save(&[record(2)]).unwrap();
            s.save(&[record(2), record(3)]).unwrap();
        }
        let cur = tmp.path().join(CURRENT);
        let len = fs::metadata(&cur).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&cur)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        let (mut s, loaded, report) = StateStore::open(tmp.path()).unwrap();
        assert_eq!(loaded, vec![record(2)]);
        assert_eq!(report.source, "previous");
        assert_eq!(report.damaged.len(), 1, "{report:?}");
        assert!(report.damaged[0].contains("truncated"), "{report:?}");
        // The good previous generation survives the next save.
        s.save(&[record(2), record(4)]).unwrap();
        drop(s);
        let (_, loaded, report) = StateStore::open(tmp.path()).unwrap();
        assert_eq!(loaded, vec![record(2), record(4)]);
        assert_eq!(report.generation, 2);
    }

    #[test]
    fn flipped_bytes_and_garbage_are_detected() {
        let body = serde_json::to_vec(&Body {
            containers: vec![record(5)],
        })
        .unwrap();
        let mut bytes = encode(7, &body);
        assert_eq!(decode(&bytes).unwrap().0, 7);
        let last = bytes.len() - 3;
        bytes[last] ^= 0x20;
        assert_eq!(decode(&bytes).unwrap_err(), "checksum mismatch");
        assert!(decode(b"").is_err());
        assert!(decode(b"hello\nworld").is_err());
        assert!(decode(b"preemptor-agent-state 9 1 0 0\n").is_err());
    }

    #[test]
    fn a_complete_temporary_file_wins_when_the_rename_was_interrupted() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let (mut s, _, _) = StateStore::open(tmp.path()).unwrap();
            s.save(&[record(2)]).unwrap();
            s.save(&[record(2), record(3)]).unwrap();
        }
        // A crash between rotating current to prev and renaming tmp into place.
        fs::rename(tmp.path().join(CURRENT), tmp.path().join(TEMP)).unwrap();
        let (_, loaded, report) = StateStore::open(tmp.path()).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(report.source, "temporary");
    }

    #[test]
    fn one_agent_per_state_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let first = StateStore::open(tmp.path()).unwrap();
        assert!(matches!(
            StateStore::open(tmp.path()),
            Err(StoreError::Locked(_))
        ));
        drop(first);
        assert!(StateStore::open(tmp.path()).is_ok());
    }
}
