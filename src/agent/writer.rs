//! The one handle through which the agent changes any limit.
//!
//! - Skips a write whose value is already in force (read back first).
//! - Orders writes safely: every widening write before any narrowing one; widening goes
//!   parent first and outer limit first (memory+swap before memory before memory.high),
//!   narrowing goes child first and inner limit first. The kernel rejects, for example, a
//!   v1 memory limit above memory+swap.
//! - Treats a vanished cgroup or container as a typed, expected error.
//! - Counts every write (`preemptor_agent_limit_writes_total`) and times it.
//! - Batches return one result per item instead of stopping at a log line.
//!
//! Two paths: Docker's `update_container` (the default; Docker's view stays in step with
//! the kernel) and direct cgroup-file writes (much faster; Docker's inspect data keeps the
//! original values). A container's limits always change through one path, recorded in the
//! state store, so the two never disagree about it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cgroups_rs::MaxValue;
use cgroups_rs::memory::SetMemory;
use serde::{Deserialize, Serialize};

use super::cgroup::{CgroupDirs, CgroupError};
use super::docker::{DockerClient, DockerError};
use super::limits::{CgroupLimits, CgroupVersion, DockerCpu, DockerLimits, RealTarget};
use super::metrics::{self, Metrics};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WritePath {
    /// Docker Engine API `update_container`.
    Docker,
    /// Write the cgroup files directly.
    Direct,
}

impl WritePath {
    pub fn name(&self) -> &'static str {
        match self {
            WritePath::Docker => "docker",
            WritePath::Direct => "direct",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Docker(#[from] DockerError),
    #[error("Docker accepted the {what} update but the cgroup reads {found} instead of {wanted}")]
    NotApplied {
        what: &'static str,
        found: String,
        wanted: String,
    },
    #[error("the Docker path is not available in dry-run mode")]
    NoDocker,
}

impl WriteError {
    pub fn is_busy(&self) -> bool {
        match self {
            WriteError::Cgroup(c) => c.is_busy(),
            WriteError::Docker(d) => d.is_busy(),
            _ => false,
        }
    }

    pub fn is_vanished(&self) -> bool {
        match self {
            WriteError::Cgroup(c) => c.is_vanished(),
            WriteError::Docker(DockerError::NotFound(_)) => true,
            _ => false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Written,
    Unchanged,
}

/// A limit file the direct path writes, ordered from the outermost limit to the innermost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitFile {
    MemorySwap,
    MemoryMax,
    MemoryHigh,
}

impl LimitFile {
    pub fn file_name(&self, version: CgroupVersion) -> &'static str {
        match (self, version) {
            (LimitFile::MemorySwap, CgroupVersion::V1) => "memory.memsw.limit_in_bytes",
            (LimitFile::MemorySwap, CgroupVersion::V2) => "memory.swap.max",
            (LimitFile::MemoryMax, CgroupVersion::V1) => "memory.limit_in_bytes",
            (LimitFile::MemoryMax, CgroupVersion::V2) => "memory.max",
            (LimitFile::MemoryHigh, _) => "memory.high",
        }
    }
}

/// One pending write of the direct path. `None` is "unlimited".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWrite<'a> {
    pub dirs: &'a CgroupDirs,
    pub file: LimitFile,
    pub current: Option<u64>,
    pub wanted: Option<u64>,
}

impl FileWrite<'_> {
    fn widens(&self) -> bool {
        match (self.current, self.wanted) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(c), Some(w)) => w >= c,
        }
    }

    fn depth(&self) -> usize {
        self.dirs.memory.components().count()
    }
}

/// What happened to one item of a batch.
#[derive(Debug)]
pub enum ItemResult {
    Done(Outcome),
    Failed(CgroupError),
    /// An earlier item failed, so this one was not attempted.
    NotAttempted,
}

/// The safe order for a batch: widen (parent, outer first), then narrow (child, inner
/// first).
pub fn order_writes(writes: &mut [FileWrite<'_>]) {
    writes.sort_by_key(|w| {
        let depth = w.depth() as i64;
        let rank = w.file as i64;
        if w.widens() {
            (0, depth, rank)
        } else {
            (1, -depth, -rank)
        }
    });
}

fn to_max_value(v: Option<u64>) -> MaxValue {
    v.map_or(MaxValue::Max, |b| {
        MaxValue::Value(i64::try_from(b).unwrap_or(i64::MAX))
    })
}

fn to_i64_limit(v: Option<u64>) -> i64 {
    v.map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX))
}

fn outcome_label(r: &Result<Outcome, WriteError>) -> &'static str {
    match r {
        Ok(Outcome::Written) => "written",
        Ok(Outcome::Unchanged) => "unchanged",
        Err(e) if e.is_busy() => "busy",
        Err(e) if e.is_vanished() => "vanished",
        Err(_) => "error",
    }
}

/// The container a write is for, as seen at the start of the action.
pub struct WriteTarget<'a> {
    pub docker_id: &'a str,
    pub dirs: &'a CgroupDirs,
    pub path: WritePath,
    /// Docker's HostConfig values from the inspect at the start of the action.
    pub docker_now: &'a DockerLimits,
}

pub struct LimitWriter {
    docker: Option<DockerClient>,
    metrics: Arc<Metrics>,
    /// How long to poll the cgroup for a Docker update to show.
    readback_timeout: Duration,
}

impl LimitWriter {
    pub fn new(docker: Option<DockerClient>, metrics: Arc<Metrics>) -> LimitWriter {
        LimitWriter {
            docker,
            metrics,
            readback_timeout: Duration::from_secs(2),
        }
    }

    fn count(&self, path: WritePath, file: &str, r: &Result<Outcome, WriteError>, took: Duration) {
        let outcome = outcome_label(r);
        self.metrics.inc(
            metrics::LIMIT_WRITES,
            &[("path", path.name()), ("file", file), ("outcome", outcome)],
        );
        if matches!(r, Ok(Outcome::Written)) || r.is_err() {
            self.metrics
                .observe(metrics::LIMIT_WRITE_SECONDS, &[("path", path.name())], took);
        }
        tracing::debug!(
            path = path.name(),
            file,
            outcome,
            took_us = took.as_micros() as u64,
            "limit write"
        );
    }

    fn docker(&self) -> Result<&DockerClient, WriteError> {
        self.docker.as_ref().ok_or(WriteError::NoDocker)
    }

    /// Sets cfs quota and period to `want.cgroup`'s.
    pub async fn set_cpu(
        &self,
        t: &WriteTarget<'_>,
        want: &RealTarget,
    ) -> Result<Outcome, WriteError> {
        let started = Instant::now();
        let r = self.set_cpu_inner(t, want).await;
        let file = match t.path {
            WritePath::Docker => "update.cpu",
            WritePath::Direct => match t.dirs.version {
                CgroupVersion::V1 => "cpu.cfs_quota_us",
                CgroupVersion::V2 => "cpu.max",
            },
        };
        self.count(t.path, file, &r, started.elapsed());
        r
    }

    async fn set_cpu_inner(
        &self,
        t: &WriteTarget<'_>,
        want: &RealTarget,
    ) -> Result<Outcome, WriteError> {
        let wanted = (want.cgroup.cpu_quota_us, want.cgroup.cpu_period_us);
        let now = t.dirs.read_cpu_max()?;
        let files_match = now.0 == wanted.0 && (wanted.0.is_none() || now.1 == wanted.1);
        match t.path {
            WritePath::Direct => {
                if files_match {
                    return Ok(Outcome::Unchanged);
                }
                let cpu = t.dirs.cpu_controller();
                let quota = wanted
                    .0
                    .map_or(-1, |q| i64::try_from(q).unwrap_or(i64::MAX));
                let value = format!("{quota} {}", wanted.1);
                let r = match t.dirs.version {
                    // One write of cpu.max sets both.
                    CgroupVersion::V2 => cpu.set_cfs_quota_and_period(Some(quota), Some(wanted.1)),
                    CgroupVersion::V1 if now.1 != wanted.1 => cpu
                        .set_cfs_period(wanted.1)
                        .and_then(|()| cpu.set_cfs_quota(quota)),
                    CgroupVersion::V1 => cpu.set_cfs_quota(quota),
                };
                r.map_err(|e| CgroupError::from_cgroups(&t.dirs.cpu, &value, e))?;
                Ok(Outcome::Written)
            }
            WritePath::Docker => {
                let docker_match = match want.docker_cpu {
                    DockerCpu::Nano(n) => t.docker_now.nano_cpus == n,
                    // 0 is Docker's "never set": the kernel value is then the original one.
                    DockerCpu::Quota { quota, period } => {
                        (t.docker_now.cpu_quota == quota || t.docker_now.cpu_quota == 0)
                            && (t.docker_now.cpu_period == period || t.docker_now.cpu_period == 0)
                    }
                };
                if files_match && docker_match {
                    return Ok(Outcome::Unchanged);
                }
                self.docker()?
                    .update_cpu(t.docker_id, want.docker_cpu)
                    .await?;
                self.await_readback(
                    "cpu",
                    t.dirs,
                    |d| {
                        let now = d.read_cpu_max()?;
                        Ok((
                            now.0 == wanted.0 && (wanted.0.is_none() || now.1 == wanted.1),
                            format!("{now:?}"),
                        ))
                    },
                    format!("{wanted:?}"),
                )
                .await?;
                Ok(Outcome::Written)
            }
        }
    }

    /// Sets memory, memory+swap (and v2 memory.high) to `want.cgroup`'s, in the safe order.
    pub async fn set_memory(
        &self,
        t: &WriteTarget<'_>,
        want: &RealTarget,
    ) -> Result<Outcome, WriteError> {
        match t.path {
            WritePath::Direct => Ok(self.set_memory_direct(t.dirs, &want.cgroup)?),
            WritePath::Docker => {
                let started = Instant::now();
                let r = self.set_memory_docker(t, want).await;
                self.count(t.path, "update.memory", &r, started.elapsed());
                r
            }
        }
    }

    async fn set_memory_docker(
        &self,
        t: &WriteTarget<'_>,
        want: &RealTarget,
    ) -> Result<Outcome, WriteError> {
        let now = t.dirs.read_memory_limits()?;
        let w = &want.cgroup;
        let files_match = now.memory == w.memory_bytes
            && now.memory_swap == w.memory_swap_bytes
            && now.high == w.memory_high_bytes;
        let docker_match = (t.docker_now.memory == want.docker_memory || t.docker_now.memory == 0)
            && (t.docker_now.memory_swap == want.docker_memory_swap
                || t.docker_now.memory_swap == 0);
        if files_match && docker_match {
            return Ok(Outcome::Unchanged);
        }
        // v2: Docker knows nothing of memory.high; it leads on the way down and follows on
        // the way up, so that memory.max is only ever lowered onto reclaimed memory.
        let high_first = t.dirs.version == CgroupVersion::V2
            && w.memory_high_bytes.is_some()
            && now
                .high
                .is_none_or(|h| w.memory_high_bytes.is_some_and(|wh| wh < h));
        if high_first {
            self.write_high(t.dirs, now.high, w.memory_high_bytes)?;
        }
        let mem_before = now.memory;
        self.docker()?
            .update_memory(t.docker_id, want.docker_memory, want.docker_memory_swap)
            .await?;
        if t.dirs.version == CgroupVersion::V2 && !high_first {
            self.write_high(t.dirs, now.high, w.memory_high_bytes)?;
        }
        let wanted = (w.memory_bytes, w.memory_swap_bytes);
        let swap_accounted = t.dirs.swap_accounting()?;
        self.await_readback(
            "memory",
            t.dirs,
            |d| {
                let r = d.read_memory_limits()?;
                // Without swap accounting the kernel has no memory+swap to read back.
                let ok = r.memory == wanted.0 && (!swap_accounted || r.memory_swap == wanted.1);
                Ok((ok, format!("{:?}", (r.memory, r.memory_swap))))
            },
            format!("{wanted:?} (was {mem_before:?})"),
        )
        .await?;
        Ok(Outcome::Written)
    }

    fn write_high(
        &self,
        dirs: &CgroupDirs,
        current: Option<u64>,
        wanted: Option<u64>,
    ) -> Result<(), WriteError> {
        let results = self.apply_files(vec![FileWrite {
            dirs,
            file: LimitFile::MemoryHigh,
            current,
            wanted,
        }]);
        for (_, r) in results {
            if let ItemResult::Failed(e) = r {
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// The direct path for memory as one result: the first failure, else whether anything
    /// was written.
    pub fn set_memory_direct(
        &self,
        dirs: &CgroupDirs,
        want: &CgroupLimits,
    ) -> Result<Outcome, CgroupError> {
        let mut written = false;
        for (_, r) in self.set_memory_files(dirs, want) {
            match r {
                ItemResult::Done(Outcome::Written) => written = true,
                ItemResult::Done(Outcome::Unchanged) | ItemResult::NotAttempted => {}
                ItemResult::Failed(e) => return Err(e),
            }
        }
        Ok(if written {
            Outcome::Written
        } else {
            Outcome::Unchanged
        })
    }

    /// The direct path for memory: one batch, ordered.
    pub fn set_memory_files(
        &self,
        dirs: &CgroupDirs,
        want: &CgroupLimits,
    ) -> Vec<(LimitFile, ItemResult)> {
        let now = match dirs.read_memory_limits() {
            Ok(n) => n,
            Err(e) => return vec![(LimitFile::MemoryMax, ItemResult::Failed(e))],
        };
        let swap_accounted = match dirs.swap_accounting() {
            Ok(s) => s,
            Err(e) => return vec![(LimitFile::MemorySwap, ItemResult::Failed(e))],
        };
        let mut writes = vec![FileWrite {
            dirs,
            file: LimitFile::MemoryMax,
            current: now.memory,
            wanted: want.memory_bytes,
        }];
        if swap_accounted {
            // v2's file holds swap alone; Docker's MemorySwap (and ours) is memory+swap.
            let swap_only = |total: Option<u64>, mem: Option<u64>| match (total, mem) {
                (Some(t), Some(m)) => Some(t.saturating_sub(m)),
                (t, _) => t,
            };
            let (current, wanted) = match dirs.version {
                CgroupVersion::V1 => (now.memory_swap, want.memory_swap_bytes),
                CgroupVersion::V2 => (
                    swap_only(now.memory_swap, now.memory),
                    swap_only(want.memory_swap_bytes, want.memory_bytes),
                ),
            };
            writes.push(FileWrite {
                dirs,
                file: LimitFile::MemorySwap,
                current,
                wanted,
            });
        }
        if dirs.version == CgroupVersion::V2 {
            writes.push(FileWrite {
                dirs,
                file: LimitFile::MemoryHigh,
                current: now.high,
                wanted: want.memory_high_bytes,
            });
        }
        self.apply_files(writes)
    }

    /// Applies a batch of direct writes in the safe order; stops at the first failure and
    /// reports the rest as not attempted.
    pub fn apply_files(&self, mut writes: Vec<FileWrite<'_>>) -> Vec<(LimitFile, ItemResult)> {
        order_writes(&mut writes);
        let mut failed = false;
        writes
            .iter()
            .map(|w| {
                if failed {
                    return (w.file, ItemResult::NotAttempted);
                }
                let started = Instant::now();
                let r = if w.current == w.wanted {
                    Ok(Outcome::Unchanged)
                } else {
                    self.write_file(w).map(|()| Outcome::Written)
                };
                let r = r.map_err(WriteError::from);
                self.count(
                    WritePath::Direct,
                    w.file.file_name(w.dirs.version),
                    &r,
                    started.elapsed(),
                );
                match r {
                    Ok(o) => (w.file, ItemResult::Done(o)),
                    Err(WriteError::Cgroup(e)) => {
                        failed = true;
                        (w.file, ItemResult::Failed(e))
                    }
                    Err(other) => {
                        failed = true;
                        (
                            w.file,
                            ItemResult::Failed(CgroupError::Write {
                                path: w.dirs.memory.clone(),
                                value: format!("{:?}", w.wanted),
                                reason: other.to_string(),
                            }),
                        )
                    }
                }
            })
            .collect()
    }

    fn write_file(&self, w: &FileWrite<'_>) -> Result<(), CgroupError> {
        let mem = w.dirs.memory_controller();
        let (value, r) = match w.file {
            LimitFile::MemoryMax => {
                let v = to_i64_limit(w.wanted);
                (v.to_string(), mem.set_limit(v))
            }
            LimitFile::MemorySwap => {
                let v = to_i64_limit(w.wanted);
                (v.to_string(), mem.set_memswap_limit(v))
            }
            LimitFile::MemoryHigh => {
                let v = to_max_value(w.wanted);
                (
                    v.to_string(),
                    mem.set_mem(SetMemory {
                        high: Some(v),
                        ..Default::default()
                    }),
                )
            }
        };
        let path = w.dirs.memory.join(w.file.file_name(w.dirs.version));
        r.map_err(|e| CgroupError::from_cgroups(&path, &value, e))
    }

    async fn await_readback(
        &self,
        what: &'static str,
        dirs: &CgroupDirs,
        check: impl Fn(&CgroupDirs) -> Result<(bool, String), CgroupError>,
        wanted: String,
    ) -> Result<(), WriteError> {
        let deadline = Instant::now() + self.readback_timeout;
        loop {
            let (ok, found) = check(dirs)?;
            if ok {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(WriteError::NotApplied {
                    what,
                    found,
                    wanted,
                });
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::cgroup::tests::v2_fixture;
    use crate::agent::limits::MIB;

    fn read(dirs: &CgroupDirs, f: &str) -> String {
        std::fs::read_to_string(dirs.memory.join(f))
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn safe_order_widens_outer_first_and_narrows_inner_first() {
        let parent = CgroupDirs {
            version: CgroupVersion::V1,
            cpu: "/c/yarn".into(),
            cpuacct: "/c/yarn".into(),
            memory: "/m/yarn".into(),
        };
        let child = CgroupDirs {
            memory: "/m/yarn/abc".into(),
            ..parent.clone()
        };
        let w = |dirs, file, current: u64, wanted: u64| FileWrite {
            dirs,
            file,
            current: Some(current),
            wanted: Some(wanted),
        };
        let mut writes = vec![
            w(&child, LimitFile::MemoryMax, 512, 64),
            w(&child, LimitFile::MemorySwap, 512, 1024),
            w(&parent, LimitFile::MemoryMax, 512, 2048),
            w(&child, LimitFile::MemoryHigh, 512, 64),
            w(&parent, LimitFile::MemorySwap, 512, 256),
        ];
        order_writes(&mut writes);
        let order: Vec<_> = writes
            .iter()
            .map(|w| (w.dirs.memory.to_str().unwrap(), w.file))
            .collect();
        assert_eq!(
            order,
            vec![
                ("/m/yarn", LimitFile::MemoryMax),
                ("/m/yarn/abc", LimitFile::MemorySwap),
                ("/m/yarn/abc", LimitFile::MemoryHigh),
                ("/m/yarn/abc", LimitFile::MemoryMax),
                ("/m/yarn", LimitFile::MemorySwap),
            ]
        );
    }

    #[test]
    fn v2_memory_writes_follow_docker_semantics_and_skip_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = v2_fixture(tmp.path());
        let metrics = Arc::new(Metrics::new());
        let w = LimitWriter::new(None, metrics.clone());
        let mut want = dirs.read_limits().unwrap();
        // Suspend to 64 MiB, keeping the 512 MiB memory+swap budget.
        want.memory_bytes = Some(64 * MIB);
        want.memory_high_bytes = Some(64 * MIB);
        let results = w.set_memory_files(&dirs, &want);
        let files: Vec<_> = results.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            files,
            vec![
                LimitFile::MemorySwap,
                LimitFile::MemoryHigh,
                LimitFile::MemoryMax
            ]
        );
        assert!(
            results
                .iter()
                .all(|(_, r)| matches!(r, ItemResult::Done(Outcome::Written)))
        );
        assert_eq!(read(&dirs, "memory.max"), (64 * MIB).to_string());
        assert_eq!(read(&dirs, "memory.high"), (64 * MIB).to_string());
        // memory+swap stays 512 MiB: 64 MiB of memory and 448 MiB of swap.
        assert_eq!(read(&dirs, "memory.swap.max"), (448 * MIB).to_string());
        let l = dirs.read_limits().unwrap();
        assert_eq!(l.memory_bytes, Some(64 * MIB));
        assert_eq!(l.memory_swap_bytes, Some(512 * MIB));

        // The same target again writes nothing.
        let again = w.set_memory_files(&dirs, &l);
        assert!(
            again
                .iter()
                .all(|(_, r)| matches!(r, ItemResult::Done(Outcome::Unchanged)))
        );
        assert!(
            metrics.value(
                metrics::LIMIT_WRITES,
                &[
                    ("path", "direct"),
                    ("file", "memory.max"),
                    ("outcome", "unchanged")
                ]
            ) >= 1.0
        );
    }

    #[tokio::test]
    async fn v2_cpu_max_is_one_write() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = v2_fixture(tmp.path());
        let w = LimitWriter::new(None, Arc::new(Metrics::new()));
        let mut want = RealTarget::original(&crate::agent::limits::OriginalLimits {
            version: CgroupVersion::V2,
            docker: DockerLimits::default(),
            cgroup: dirs.read_limits().unwrap(),
        });
        want.cgroup.cpu_quota_us = Some(1000);
        let t = WriteTarget {
            docker_id: "abc",
            dirs: &dirs,
            path: WritePath::Direct,
            docker_now: &DockerLimits::default(),
        };
        assert_eq!(w.set_cpu(&t, &want).await.unwrap(), Outcome::Written);
        assert_eq!(read(&dirs, "cpu.max"), "1000 100000");
        assert_eq!(w.set_cpu(&t, &want).await.unwrap(), Outcome::Unchanged);
        want.cgroup.cpu_quota_us = None;
        assert_eq!(w.set_cpu(&t, &want).await.unwrap(), Outcome::Written);
        assert_eq!(read(&dirs, "cpu.max"), "max 100000");
        // Without Docker, the Docker path says so instead of pretending.
        let t = WriteTarget {
            path: WritePath::Docker,
            ..t
        };
        want.cgroup.cpu_quota_us = Some(5000);
        assert!(matches!(
            w.set_cpu(&t, &want).await,
            Err(WriteError::NoDocker)
        ));
    }

    #[test]
    fn a_vanished_cgroup_is_typed() {
        let tmp = tempfile::tempdir().unwrap();
        let mut dirs = v2_fixture(tmp.path());
        dirs.memory = tmp.path().join("gone");
        let w = LimitWriter::new(None, Arc::new(Metrics::new()));
        let want = CgroupLimits {
            cpu_quota_us: None,
            cpu_period_us: 100_000,
            cpu_shares: 1,
            memory_bytes: Some(MIB),
            memory_swap_bytes: None,
            memory_high_bytes: None,
        };
        let r = w.set_memory_files(&dirs, &want);
        assert!(matches!(&r[0].1, ItemResult::Failed(e) if e.is_vanished()));
    }
}
