//! Finding a container's cgroup directories and reading what the kernel reports there.
//!
//! Supported: cgroup v1 (including hybrid hosts with an empty unified mount) and v2; the
//! cgroupfs and systemd drivers; Docker's default parent and YARN's
//! `--cgroup-parent=/hadoop-yarn/<containerId>`. The directories come from the container's
//! init process (`/proc/<pid>/cgroup` joined with the mount table), falling back to the
//! path Docker's cgroup driver builds from the inspect data when the process is gone.
//!
//! Limit files are read and written through cgroups-rs controllers; statistics files
//! (`cpu.stat`, `memory.stat`, usage counters) are parsed here, because cgroups-rs turns
//! read errors into zeros and would hide a vanished container.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use cgroups_rs::cpu::CpuController;
use cgroups_rs::memory::MemController;
use procfs::process::MountInfo;
use procfs::{FromBufRead, ProcessCGroup, ProcessCGroups};

use super::limits::{CgroupLimits, CgroupVersion};

/// Values at or above this are the kernel's "no limit" (v1 prints 2^63 rounded to pages).
const UNLIMITED_THRESHOLD: u64 = 1 << 62;

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("the container's cgroup is gone ({path})")]
    Vanished { path: PathBuf },
    #[error("the kernel refused {value} for {path}: device or resource busy")]
    Busy { path: PathBuf, value: String },
    #[error("reading {path}: {error}")]
    Read { path: PathBuf, error: io::Error },
    #[error("writing {value} to {path}: {reason}")]
    Write {
        path: PathBuf,
        value: String,
        reason: String,
    },
    #[error("unexpected content in {path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("cannot locate the cgroup of container {docker_id}: {reason}")]
    NotFound { docker_id: String, reason: String },
}

impl CgroupError {
    pub fn is_vanished(&self) -> bool {
        matches!(self, CgroupError::Vanished { .. })
    }

    pub fn is_busy(&self) -> bool {
        matches!(self, CgroupError::Busy { .. })
    }

    fn from_read(path: &Path, e: io::Error) -> CgroupError {
        if is_gone(&e) {
            CgroupError::Vanished {
                path: path.to_path_buf(),
            }
        } else {
            CgroupError::Read {
                path: path.to_path_buf(),
                error: e,
            }
        }
    }

    /// Classifies a cgroups-rs error by the OS error underneath it.
    pub(crate) fn from_cgroups(path: &Path, value: &str, e: cgroups_rs::error::Error) -> Self {
        let os = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<io::Error>())
            .map(|io| (io.raw_os_error(), is_gone(io)));
        match os {
            Some((_, true)) => CgroupError::Vanished {
                path: path.to_path_buf(),
            },
            Some((Some(libc::EBUSY), _)) => CgroupError::Busy {
                path: path.to_path_buf(),
                value: value.to_string(),
            },
            _ => CgroupError::Write {
                path: path.to_path_buf(),
                value: value.to_string(),
                reason: e.to_string(),
            },
        }
    }
}

fn is_gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ESRCH)
    ) || e.kind() == io::ErrorKind::NotFound
}

/// One line of `/proc/self/mountinfo` that mounts a cgroup filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    /// The hierarchy path mounted there (usually `/`).
    pub root: String,
    pub v2: bool,
    /// v1 controllers of this hierarchy (`cpu`, `cpuacct`, `memory`, `name=systemd`...).
    pub controllers: Vec<String>,
}

/// The host's cgroup mounts, as seen by the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupMounts {
    pub mounts: Vec<CgroupMount>,
}

/// Docker's cgroup driver (`docker info`), which decides the path it builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupDriver {
    Cgroupfs,
    Systemd,
}

/// The directories holding one container's CPU, CPU-accounting and memory files. On v2 all
/// three are the same directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupDirs {
    pub version: CgroupVersion,
    pub cpu: PathBuf,
    pub cpuacct: PathBuf,
    pub memory: PathBuf,
}

/// The memory limit files, in Docker's terms (`None` is unlimited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimits {
    pub memory: Option<u64>,
    /// Memory plus swap.
    pub memory_swap: Option<u64>,
    /// v2 `memory.high`.
    pub high: Option<u64>,
}

/// Counters sampled together, for attained service, throttling and swap detection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupSample {
    pub cpu_usage_ns: u64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub memory_usage_bytes: u64,
    pub swap_bytes: u64,
    pub major_faults: u64,
    pub swap_ins: u64,
}

/// Unescapes the octal escapes (`\040` for a space) mountinfo uses in paths; procfs's
/// `MountInfo` hands them over as they are.
fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl CgroupMounts {
    /// Parses mountinfo text, one line at a time with procfs's `MountInfo::from_line`:
    /// lines that are not cgroup mounts, or are malformed, are ignored (procfs's
    /// `MountInfos` would reject the whole file for one bad line). procfs leaves the octal
    /// escapes in paths and keeps the superblock options in a map, so the paths are
    /// unescaped here and the controllers sorted (the kernel's order is lost).
    pub fn from_mountinfo(text: &str) -> CgroupMounts {
        let mounts = text
            .lines()
            .filter_map(|line| MountInfo::from_line(line).ok())
            .filter_map(|m| {
                let v2 = match m.fs_type.as_str() {
                    "cgroup2" => true,
                    "cgroup" => false,
                    _ => return None,
                };
                let mut controllers: Vec<String> = if v2 {
                    Vec::new()
                } else {
                    m.super_options
                        .iter()
                        .filter_map(|(k, v)| match v {
                            None if !matches!(k.as_str(), "rw" | "ro") => Some(k.clone()),
                            Some(v) if k == "name" => Some(format!("name={v}")),
                            _ => None,
                        })
                        .collect()
                };
                controllers.sort_unstable();
                Some(CgroupMount {
                    mount_point: PathBuf::from(unescape_mount_path(
                        &m.mount_point.to_string_lossy(),
                    )),
                    root: unescape_mount_path(&m.root),
                    v2,
                    controllers,
                })
            })
            .collect();
        CgroupMounts { mounts }
    }

    pub fn read_self() -> Result<CgroupMounts, CgroupError> {
        let path = Path::new("/proc/self/mountinfo");
        let text = std::fs::read_to_string(path).map_err(|error| CgroupError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Ok(CgroupMounts::from_mountinfo(&text))
    }

    fn v1_mount(&self, controller: &str) -> Option<&CgroupMount> {
        self.mounts
            .iter()
            .find(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))
    }

    fn v2_mount(&self) -> Option<&CgroupMount> {
        self.mounts.iter().find(|m| m.v2)
    }

    /// v1 when the cpu and memory controllers are mounted as v1 hierarchies (hybrid hosts
    /// keep an empty unified mount beside them), else v2 when a unified mount exists.
    pub fn version(&self) -> Option<CgroupVersion> {
        if self.v1_mount("cpu").is_some() && self.v1_mount("memory").is_some() {
            Some(CgroupVersion::V1)
        } else if self.v2_mount().is_some() {
            Some(CgroupVersion::V2)
        } else {
            None
        }
    }

    /// Directories from a process's `/proc/<pid>/cgroup` text. `docker_id` must appear in
    /// the final path component: a recycled pid then cannot point at another cgroup.
    pub fn dirs_from_proc(
        &self,
        proc_cgroup: &str,
        docker_id: &str,
    ) -> Result<CgroupDirs, CgroupError> {
        let not_found = |reason: String| CgroupError::NotFound {
            docker_id: docker_id.to_string(),
            reason,
        };
        // One line at a time: procfs's parser fails the whole text on a malformed line,
        // which is skipped here.
        let entries: Vec<ProcessCGroup> = proc_cgroup
            .lines()
            .filter_map(|line| ProcessCGroups::from_buf_read(line.as_bytes()).ok())
            .flatten()
            .collect();
        let mut v1_paths: HashMap<&str, &str> = HashMap::new();
        let mut v2_path = None;
        for e in &entries {
            if e.controllers.is_empty() {
                v2_path = Some(e.pathname.as_str());
            } else {
                for c in &e.controllers {
                    v1_paths.insert(c.as_str(), e.pathname.as_str());
                }
            }
        }
        let version = self
            .version()
            .ok_or_else(|| not_found("no cgroup filesystem is mounted".into()))?;
        let dir_for = |controller: &str| -> Result<PathBuf, CgroupError> {
            let (mount, path) = match version {
                CgroupVersion::V1 => (self.v1_mount(controller), v1_paths.get(controller).copied()),
                CgroupVersion::V2 => (self.v2_mount(), v2_path),
            };
            let mount = mount.ok_or_else(|| not_found(format!("no mount for {controller}")))?;
            let path =
                path.ok_or_else(|| not_found(format!("process is not in a {controller} cgroup")))?;
            let dir = join_under_mount(mount, path)
                .ok_or_else(|| not_found(format!("{path} is outside the {controller} mount")))?;
            check_owned(&dir, docker_id).map_err(not_found)?;
            Ok(dir)
        };
        Ok(CgroupDirs {
            version,
            cpu: dir_for("cpu")?,
            cpuacct: dir_for("cpuacct")?,
            memory: dir_for("memory")?,
        })
    }

    /// Directories Docker's driver creates for a container, from the inspect data.
    pub fn dirs_from_driver(
        &self,
        driver: CgroupDriver,
        cgroup_parent: &str,
        docker_id: &str,
    ) -> Result<CgroupDirs, CgroupError> {
        let not_found = |reason: String| CgroupError::NotFound {
            docker_id: docker_id.to_string(),
            reason,
        };
        let version = self
            .version()
            .ok_or_else(|| not_found("no cgroup filesystem is mounted".into()))?;
        let rel = driver_path(driver, cgroup_parent, docker_id).map_err(not_found)?;
        let dir_for = |controller: &str| -> Result<PathBuf, CgroupError> {
            let mount = match version {
                CgroupVersion::V1 => self.v1_mount(controller),
                CgroupVersion::V2 => self.v2_mount(),
            }
            .ok_or_else(|| not_found(format!("no mount for {controller}")))?;
            join_under_mount(mount, &rel)
                .ok_or_else(|| not_found(format!("{rel} is outside the {controller} mount")))
        };
        Ok(CgroupDirs {
            version,
            cpu: dir_for("cpu")?,
            cpuacct: dir_for("cpuacct")?,
            memory: dir_for("memory")?,
        })
    }
    /// Directories of the cgroup at `rel`, relative to each controller's mount point (as
    /// YARN reads its `cgroups.hierarchy`), whether or not it exists yet.
    pub fn dirs_at(&self, rel: &str) -> Result<CgroupDirs, CgroupError> {
        let not_found = |reason: String| CgroupError::NotFound {
            docker_id: rel.to_string(),
            reason,
        };
        if rel.split('/').any(|c| c == "..") {
            return Err(not_found("the path must not contain ..".into()));
        }
        let version = self
            .version()
            .ok_or_else(|| not_found("no cgroup filesystem is mounted".into()))?;
        let dir_for = |controller: &str| -> Result<PathBuf, CgroupError> {
            let mount = match version {
                CgroupVersion::V1 => self.v1_mount(controller),
                CgroupVersion::V2 => self.v2_mount(),
            }
            .ok_or_else(|| not_found(format!("no mount for {controller}")))?;
            Ok(mount.mount_point.join(rel.trim_start_matches('/')))
        };
        Ok(CgroupDirs {
            version,
            cpu: dir_for("cpu")?,
            cpuacct: dir_for("cpuacct")?,
            memory: dir_for("memory")?,
        })
    }
}

fn join_under_mount(mount: &CgroupMount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rel = path.strip_prefix(root)?;
    if !(rel.is_empty() || rel.starts_with('/')) || rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(mount.mount_point.join(rel.trim_start_matches('/')))
}

fn check_owned(dir: &Path, docker_id: &str) -> Result<(), String> {
    let last = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !docker_id.is_empty() && last.contains(docker_id) {
        Ok(())
    } else {
        Err(format!(
            "{} does not belong to container {docker_id}",
            dir.display()
        ))
    }
}

/// The cgroup path (relative to a hierarchy root) that Docker's driver uses.
pub fn driver_path(driver: CgroupDriver, parent: &str, docker_id: &str) -> Result<String, String> {
    if docker_id.is_empty() || !docker_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{docker_id:?} is not a Docker container id"));
    }
    match driver {
        CgroupDriver::Cgroupfs => {
            let parent = if parent.is_empty() { "/docker" } else { parent };
            Ok(format!("/{}/{docker_id}", parent.trim_matches('/')))
        }
        CgroupDriver::Systemd => {
            let slice = if parent.is_empty() {
                "system.slice"
            } else {
                parent
            };
            let expanded = expand_slice(slice)?;
            Ok(format!("{expanded}/docker-{docker_id}.scope"))
        }
    }
}

/// systemd's slice nesting: `a-b-c.slice` lives at `/a.slice/a-b.slice/a-b-c.slice`.
pub fn expand_slice(slice: &str) -> Result<String, String> {
    let name = slice
        .strip_suffix(".slice")
        .ok_or_else(|| format!("systemd cgroup parent {slice:?} must end in .slice"))?;
    if name == "-" {
        return Ok(String::new());
    }
    if name.is_empty()
        || name.contains('/')
        || name.starts_with('-')
        || name.ends_with('-')
        || name.contains("--")
    {
        return Err(format!("invalid systemd slice name {slice:?}"));
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for (i, part) in name.split('-').enumerate() {
        if i > 0 {
            prefix.push('-');
        }
        prefix.push_str(part);
        path.push('/');
        path.push_str(&prefix);
        path.push_str(".slice");
    }
    Ok(path)
}

/// Reads a small cgroup file, mapping a missing file or directory to `Vanished`.
fn read(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path).map_err(|e| CgroupError::from_read(path, e))
}

fn parse_u64(path: &Path, s: &str) -> Result<u64, CgroupError> {
    s.trim().parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        reason: format!("expected a number, found {:?}", s.trim()),
    })
}

/// A v1 limit: large values mean unlimited; -1 may appear in quota files.
fn parse_limit(path: &Path, s: &str) -> Result<Option<u64>, CgroupError> {
    let t = s.trim();
    if t == "max" || t == "-1" {
        return Ok(None);
    }
    let v = parse_u64(path, t)?;
    Ok((v < UNLIMITED_THRESHOLD).then_some(v))
}

/// `key value` lines, as in cpu.stat and memory.stat. Malformed lines are skipped: the
/// kernel adds keys over time and the agent only needs a few.
pub fn parse_flat_keyed(text: &str) -> HashMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k, v.trim().parse().ok()?))
        })
        .collect()
}

fn file_exists(path: &Path) -> Result<bool, CgroupError> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if is_gone(&e) => Ok(false),
        Err(error) => Err(CgroupError::Read {
            path: path.to_path_buf(),
            error,
        }),
    }
}

impl CgroupDirs {
    pub fn cpu_controller(&self) -> CpuController {
        CpuController::new(self.cpu.clone(), self.version == CgroupVersion::V2)
    }

    pub fn memory_controller(&self) -> MemController {
        MemController::new(self.memory.clone(), self.version == CgroupVersion::V2)
    }

    /// True when the directories hold the files this version should have.
    pub fn exist(&self) -> bool {
        let (cpu, mem) = match self.version {
            CgroupVersion::V1 => ("cpu.cfs_quota_us", "memory.limit_in_bytes"),
            CgroupVersion::V2 => ("cpu.max", "memory.max"),
        };
        self.cpu.join(cpu).is_file() && self.memory.join(mem).is_file()
    }

    /// Whether memory+swap is accounted (v1 `memory.memsw.*` needs swapaccount=1; v2 needs
    /// `memory.swap.max`). Without it Docker's MemorySwap cannot be enforced.
    pub fn swap_accounting(&self) -> Result<bool, CgroupError> {
        match self.version {
            CgroupVersion::V1 => file_exists(&self.memory.join("memory.memsw.limit_in_bytes")),
            CgroupVersion::V2 => file_exists(&self.memory.join("memory.swap.max")),
        }
    }

    pub fn read_limits(&self) -> Result<CgroupLimits, CgroupError> {
        let (cpu_quota_us, cpu_period_us) = self.read_cpu_max()?;
        let cpu_shares = match self.version {
            CgroupVersion::V1 => {
                let p = self.cpu.join("cpu.shares");
                parse_u64(&p, &read(&p)?)?
            }
            CgroupVersion::V2 => {
                let p = self.cpu.join("cpu.weight");
                parse_u64(&p, &read(&p)?)?
            }
        };
        let MemoryLimits {
            memory: memory_bytes,
            memory_swap: memory_swap_bytes,
            high: memory_high_bytes,
        } = self.read_memory_limits()?;
        Ok(CgroupLimits {
            cpu_quota_us,
            cpu_period_us,
            cpu_shares,
            memory_bytes,
            memory_swap_bytes,
            memory_high_bytes,
        })
    }

    /// (quota, period) in microseconds; quota `None` when unlimited.
    pub fn read_cpu_max(&self) -> Result<(Option<u64>, u64), CgroupError> {
        match self.version {
            CgroupVersion::V1 => {
                let q = self.cpu.join("cpu.cfs_quota_us");
                let p = self.cpu.join("cpu.cfs_period_us");
                Ok((parse_limit(&q, &read(&q)?)?, parse_u64(&p, &read(&p)?)?))
            }
            CgroupVersion::V2 => {
                let path = self.cpu.join("cpu.max");
                let text = read(&path)?;
                let mut it = text.split_whitespace();
                let (Some(q), Some(p), None) = (it.next(), it.next(), it.next()) else {
                    return Err(CgroupError::Parse {
                        path,
                        reason: format!(
                            "expected \"<quota|max> <period>\", found {:?}",
                            text.trim()
                        ),
                    });
                };
                Ok((parse_limit(&path, q)?, parse_u64(&path, p)?))
            }
        }
    }

    /// (memory, memory+swap, high). v2 reports swap alone, so it is added to memory.max
    /// to keep Docker's MemorySwap meaning.
    pub fn read_memory_limits(&self) -> Result<MemoryLimits, CgroupError> {
        match self.version {
            CgroupVersion::V1 => {
                let m = self.memory.join("memory.limit_in_bytes");
                let mem = parse_limit(&m, &read(&m)?)?;
                let s = self.memory.join("memory.memsw.limit_in_bytes");
                let swap = if file_exists(&s)? {
                    parse_limit(&s, &read(&s)?)?
                } else {
                    None
                };
                Ok(MemoryLimits {
                    memory: mem,
                    memory_swap: swap,
                    high: None,
                })
            }
            CgroupVersion::V2 => {
                let m = self.memory.join("memory.max");
                let mem = parse_limit(&m, &read(&m)?)?;
                let s = self.memory.join("memory.swap.max");
                let swap_only = if file_exists(&s)? {
                    parse_limit(&s, &read(&s)?)?
                } else {
                    None
                };
                let swap = match (mem, swap_only) {
                    (Some(m), Some(s)) => Some(m.saturating_add(s)),
                    _ => None,
                };
                let h = self.memory.join("memory.high");
                let high = if file_exists(&h)? {
                    parse_limit(&h, &read(&h)?)?
                } else {
                    None
                };
                Ok(MemoryLimits {
                    memory: mem,
                    memory_swap: swap,
                    high,
                })
            }
        }
    }

    /// CPU time used by the cgroup (cpuacct.usage / cpu.stat usage_usec), in ns.
    pub fn cpu_usage_ns(&self) -> Result<u64, CgroupError> {
        match self.version {
            CgroupVersion::V1 => {
                let p = self.cpuacct.join("cpuacct.usage");
                parse_u64(&p, &read(&p)?)
            }
            CgroupVersion::V2 => {
                let p = self.cpu.join("cpu.stat");
                let text = read(&p)?;
                let usec = *parse_flat_keyed(&text).get("usage_usec").ok_or_else(|| {
                    CgroupError::Parse {
                        path: p.clone(),
                        reason: "no usage_usec".into(),
                    }
                })?;
                Ok(usec.saturating_mul(1000))
            }
        }
    }

    /// (CPU time in ns, nr_throttled): what the throttle wait polls.
    pub fn cpu_counters(&self) -> Result<(u64, u64), CgroupError> {
        let path = self.cpu.join("cpu.stat");
        let text = read(&path)?;
        let stat = parse_flat_keyed(&text);
        let throttled = stat.get("nr_throttled").copied().unwrap_or(0);
        let usage = match self.version {
            CgroupVersion::V1 => self.cpu_usage_ns()?,
            CgroupVersion::V2 => stat
                .get("usage_usec")
                .copied()
                .unwrap_or(0)
                .saturating_mul(1000),
        };
        Ok((usage, throttled))
    }

    pub fn sample(&self) -> Result<CgroupSample, CgroupError> {
        let cpu_stat_path = self.cpu.join("cpu.stat");
        let cpu_stat_text = read(&cpu_stat_path)?;
        let cpu_stat = parse_flat_keyed(&cpu_stat_text);
        let cpu_usage_ns = match self.version {
            CgroupVersion::V1 => self.cpu_usage_ns()?,
            CgroupVersion::V2 => cpu_stat
                .get("usage_usec")
                .copied()
                .unwrap_or(0)
                .saturating_mul(1000),
        };
        let mem_stat_path = self.memory.join("memory.stat");
        let mem_stat_text = read(&mem_stat_path)?;
        let mem = parse_flat_keyed(&mem_stat_text);
        // v1 reports hierarchical totals with a total_ prefix.
        let key = |k: &str| -> Option<u64> {
            match self.version {
                CgroupVersion::V1 => mem
                    .get(format!("total_{k}").as_str())
                    .or_else(|| mem.get(k))
                    .copied(),
                CgroupVersion::V2 => mem.get(k).copied(),
            }
        };
        let (usage_file, swap_bytes) = match self.version {
            CgroupVersion::V1 => ("memory.usage_in_bytes", key("swap").unwrap_or(0)),
            CgroupVersion::V2 => {
                let p = self.memory.join("memory.swap.current");
                let swap = if file_exists(&p)? {
                    parse_u64(&p, &read(&p)?)?
                } else {
                    0
                };
                ("memory.current", swap)
            }
        };
        let usage_path = self.memory.join(usage_file);
        let memory_usage_bytes = parse_u64(&usage_path, &read(&usage_path)?)?;
        Ok(CgroupSample {
            cpu_usage_ns,
            nr_periods: cpu_stat.get("nr_periods").copied().unwrap_or(0),
            nr_throttled: cpu_stat.get("nr_throttled").copied().unwrap_or(0),
            memory_usage_bytes,
            swap_bytes,
            major_faults: key("pgmajfault").unwrap_or(0),
            // pswpin where the kernel has it; anonymous refaults are swap-ins otherwise.
            swap_ins: key("pswpin")
                .or_else(|| key("workingset_refault_anon"))
                .unwrap_or(0),
        })
    }
}

/// Reads `/proc/<pid>/cgroup` (with std, not procfs's `Process::cgroups()`: a process
/// that is gone must read as `Vanished`, which needs the `io::Error`).
pub fn read_proc_cgroup(pid: u32) -> Result<String, CgroupError> {
    let path = PathBuf::from(format!("/proc/{pid}/cgroup"));
    read(&path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const MOUNTINFO_COMOUNTED: &str = "\
25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:8 - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory
";

    const MOUNTINFO_V2: &str = "\
29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    const ID: &str = "223eb0084fe6e627c49bd8c357ad085bd5b540cdd9289e9bf2617883b31b468f";

    #[test]
    fn v1_dirs_come_from_proc_cgroup_and_mounts() {
        let m = CgroupMounts::from_mountinfo(MOUNTINFO_V1);
        assert_eq!(m.version(), Some(CgroupVersion::V1));
        let proc = format!(
            "4:memory:/docker/{ID}\n2:cpuacct:/docker/{ID}\n1:cpu:/docker/{ID}\n0::/docker/{ID}\n"
        );
        let d = m.dirs_from_proc(&proc, ID).unwrap();
        assert_eq!(
            d.cpu,
            PathBuf::from(format!("/sys/fs/cgroup/cpu/docker/{ID}"))
        );
        assert_eq!(
            d.cpuacct,
            PathBuf::from(format!("/sys/fs/cgroup/cpuacct/docker/{ID}"))
        );
        assert_eq!(
            d.memory,
            PathBuf::from(format!("/sys/fs/cgroup/memory/docker/{ID}"))
        );
    }

    #[test]
    fn comounted_controllers_and_yarn_parent() {
        let m = CgroupMounts::from_mountinfo(MOUNTINFO_COMOUNTED);
        let cid = "container_e01_1700000000000_0001_01_000002";
        let proc =
            format!("5:memory:/hadoop-yarn/{cid}/{ID}\n4:cpu,cpuacct:/hadoop-yarn/{cid}/{ID}\n");
        let d = m.dirs_from_proc(&proc, ID).unwrap();
        let cpu = PathBuf::from(format!("/sys/fs/cgroup/cpu,cpuacct/hadoop-yarn/{cid}/{ID}"));
        assert_eq!(d.cpu, cpu);
        assert_eq!(d.cpuacct, cpu);
        let by_driver = m
            .dirs_from_driver(CgroupDriver::Cgroupfs, &format!("/hadoop-yarn/{cid}"), ID)
            .unwrap();
        assert_eq!(by_driver, d);
    }

    #[test]
    fn v2_systemd_scope() {
        let m = CgroupMounts::from_mountinfo(MOUNTINFO_V2);
        assert_eq!(m.version(), Some(CgroupVersion::V2));
        let proc = format!("0::/system.slice/docker-{ID}.scope\n");
        let d = m.dirs_from_proc(&proc, ID).unwrap();
        let dir = PathBuf::from(format!("/sys/fs/cgroup/system.slice/docker-{ID}.scope"));
        assert_eq!((d.cpu.clone(), d.memory.clone()), (dir.clone(), dir));
        assert_eq!(
            m.dirs_from_driver(CgroupDriver::Systemd, "", ID).unwrap(),
            d
        );
        let yarn = m
            .dirs_from_driver(CgroupDriver::Systemd, "hadoop-yarn.slice", ID)
            .unwrap();
        assert_eq!(
            yarn.cpu,
            PathBuf::from(format!(
                "/sys/fs/cgroup/hadoop.slice/hadoop-yarn.slice/docker-{ID}.scope"
            ))
        );
    }

    #[test]
    fn a_recycled_pid_cannot_point_elsewhere() {
        let m = CgroupMounts::from_mountinfo(MOUNTINFO_V2);
        let err = m
            .dirs_from_proc("0::/user.slice/session-3.scope\n", ID)
            .unwrap_err();
        assert!(matches!(err, CgroupError::NotFound { .. }), "{err}");
        let err = m.dirs_from_proc("garbage", ID).unwrap_err();
        assert!(matches!(err, CgroupError::NotFound { .. }), "{err}");
    }

    #[test]
    fn nested_mount_roots_are_stripped_and_escapes_refused() {
        let m = CgroupMounts::from_mountinfo(
            "30 20 0:26 /kubepods /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        );
        let d = m
            .dirs_from_proc(&format!("0::/kubepods/docker-{ID}.scope\n"), ID)
            .unwrap();
        assert_eq!(
            d.cpu,
            PathBuf::from(format!("/sys/fs/cgroup/docker-{ID}.scope"))
        );
        assert!(
            m.dirs_from_proc(&format!("0::/kubepods/../{ID}\n"), ID)
                .is_err()
        );
        assert!(driver_path(CgroupDriver::Cgroupfs, "", "../etc").is_err());
    }

    #[test]
    fn procfs_parses_line_by_line_and_keeps_v1_controller_names() {
        let m = CgroupMounts::from_mountinfo(MOUNTINFO_COMOUNTED);
        assert_eq!(m.mounts[0].controllers, ["cpu", "cpuacct"]);
        let v1 = CgroupMounts::from_mountinfo(MOUNTINFO_V1);
        assert_eq!(v1.mounts[3].controllers, ["name=systemd"]);
        assert_eq!(v1, CgroupMounts::from_mountinfo(MOUNTINFO_V1));
        // A malformed line among good ones is skipped, as before procfs.
        let proc = format!("4:cpu,cpuacct:/docker/{ID}\nnot a line\n5:memory:/docker/{ID}\n");
        assert!(m.dirs_from_proc(&proc, ID).is_ok());
    }

    #[test]
    fn slice_expansion() {
        assert_eq!(expand_slice("system.slice").unwrap(), "/system.slice");
        assert_eq!(
            expand_slice("a-b-c.slice").unwrap(),
            "/a.slice/a-b.slice/a-b-c.slice"
        );
        assert!(expand_slice("a--b.slice").is_err());
        assert!(expand_slice("/hadoop-yarn").is_err());
    }

    #[test]
    fn mountinfo_escapes() {
        let m = CgroupMounts::from_mountinfo(
            "30 20 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\nnot a mount line\n",
        );
        assert_eq!(m.mounts.len(), 1);
        assert_eq!(m.mounts[0].mount_point, PathBuf::from("/sys/fs/my cgroup"));
    }

    /// A v2 cgroup directory with the files the agent reads and writes.
    pub(crate) fn v2_fixture(dir: &Path) -> CgroupDirs {
        let files = [
            ("cpu.max", "200000 100000\n"),
            ("cpu.weight", "79\n"),
            (
                "cpu.stat",
                "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\nnr_periods 50\nnr_throttled 7\nthrottled_usec 1200\n",
            ),
            ("memory.max", "536870912\n"),
            ("memory.high", "max\n"),
            ("memory.swap.max", "0\n"),
            ("memory.current", "300000000\n"),
            ("memory.swap.current", "4096\n"),
            (
                "memory.stat",
                "anon 290000000\nfile 10000000\npgfault 1000\npgmajfault 12\nworkingset_refault_anon 3\npswpin 9\n",
            ),
        ];
        for (f, v) in files {
            std::fs::write(dir.join(f), v).unwrap();
        }
        CgroupDirs {
            version: CgroupVersion::V2,
            cpu: dir.to_path_buf(),
            cpuacct: dir.to_path_buf(),
            memory: dir.to_path_buf(),
        }
    }

    #[test]
    fn v2_fixture_files_read_as_docker_would_mean_them() {
        let tmp = tempfile::tempdir().unwrap();
        let d = v2_fixture(tmp.path());
        assert!(d.exist());
        assert!(d.swap_accounting().unwrap());
        let l = d.read_limits().unwrap();
        assert_eq!(l.cpu_quota_us, Some(200_000));
        assert_eq!(l.cpu_period_us, 100_000);
        assert_eq!(l.cpu_shares, 79);
        assert_eq!(l.cpu_millis(), Some(2000));
        assert_eq!(l.memory_bytes, Some(512 << 20));
        // memory.swap.max 0 with memory.max 512M is Docker's MemorySwap = 512M.
        assert_eq!(l.memory_swap_bytes, Some(512 << 20));
        assert_eq!(l.memory_high_bytes, None);
        let s = d.sample().unwrap();
        assert_eq!(s.cpu_usage_ns, 5_000_000_000);
        assert_eq!(s.nr_throttled, 7);
        assert_eq!(s.memory_usage_bytes, 300_000_000);
        assert_eq!(s.swap_bytes, 4096);
        assert_eq!(s.major_faults, 12);
        assert_eq!(s.swap_ins, 9);
        std::fs::write(tmp.path().join("cpu.max"), "max 100000\n").unwrap();
        assert_eq!(d.read_cpu_max().unwrap(), (None, 100_000));
        std::fs::write(tmp.path().join("cpu.max"), "lots\n").unwrap();
        assert!(matches!(d.read_cpu_max(), Err(CgroupError::Parse { .. })));
    }

    #[test]
    fn a_removed_cgroup_reads_as_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let d = v2_fixture(tmp.path());
        let gone = CgroupDirs {
            cpu: tmp.path().join("gone"),
            ..d
        };
        assert!(gone.read_cpu_max().unwrap_err().is_vanished());
        assert!(gone.sample().unwrap_err().is_vanished());
    }

    #[test]
    fn v1_live_files_parse_when_present() {
        // The machine running the tests may have a v1 hierarchy; read the root's files.
        let m = CgroupMounts::read_self().unwrap();
        if m.version() != Some(CgroupVersion::V1) {
            return;
        }
        let root = |c: &str| m.v1_mount(c).unwrap().mount_point.clone();
        let d = CgroupDirs {
            version: CgroupVersion::V1,
            cpu: root("cpu"),
            cpuacct: root("cpuacct"),
            memory: root("memory"),
        };
        let s = d.sample().unwrap();
        assert!(s.cpu_usage_ns > 0);
    }
}
