//! YARN containers without Docker: the two ways a NodeManager runs them itself.
//!
//! - `yarn-cgroups`: the LinuxContainerExecutor with cgroups gives every container its own
//!   cgroup, `<mount>/<hierarchy>/<container_id>` (hierarchy `/hadoop-yarn` by default).
//!   The agent writes those files directly.
//! - `process`: the DefaultContainerExecutor starts plain processes in no cgroup of their
//!   own. The agent finds the container's process from the pid file the NodeManager
//!   writes (`<local-dir>/nmPrivate/<app>/<container>/<container>.pid`), checks that the
//!   process names the container, and moves its whole tree into a cgroup of its own,
//!   `<mount>/<parent>/<container_id>`. Children forked later start inside it. The
//!   cgroup is removed once the container's last process has ended.
//!
//! Both are "live" runtimes for the enforcer: the same records, lease and exact restore
//! as with Docker, through direct cgroup-file writes only.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use super::cgroup::{CgroupDirs, CgroupError, CgroupMounts};
use super::docker::Inspected;
use super::limits::{CgroupVersion, DockerLimits};
use crate::cluster::ContainerId;

/// How many times the process tree is swept while moving it: a process forked by one not
/// yet moved shows up in the next sweep; one forked by a moved process starts inside.
const MOVE_SWEEPS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostBackend {
    YarnCgroups,
    Process,
}

impl HostBackend {
    pub fn name(&self) -> &'static str {
        match self {
            HostBackend::YarnCgroups => "yarn-cgroups",
            HostBackend::Process => "process",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no container {0} on this node")]
    NotFound(String),
    #[error("{0:?} is not a YARN container id; the agent never touches it")]
    NotYarn(String),
    #[error(
        "pid {pid} from {pid_file} is not a process of container {container} (its command line and environment do not name it); the agent never touches it"
    )]
    NotOwned {
        pid: u32,
        pid_file: PathBuf,
        container: ContainerId,
    },
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error("{what} {path}: {error}")]
    Io {
        what: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> HostError + 'a {
    move |error| HostError::Io {
        what,
        path: path.to_path_buf(),
        error,
    }
}

/// The containers of one NodeManager that runs them without Docker.
#[derive(Clone, Debug)]
pub struct HostContainers {
    backend: HostBackend,
    mounts: CgroupMounts,
    version: CgroupVersion,
    /// yarn-cgroups: YARN's hierarchy; process: the agent's own parent cgroup. Relative to
    /// each controller's mount point, with a leading `/`.
    parent: String,
    /// process: the NodeManager's `yarn.nodemanager.local-dirs`.
    local_dirs: Vec<PathBuf>,
}

/// A cgroup path below the mount points: absolute, no `..`, no empty parts.
fn clean_parent(parent: &str) -> Result<String, HostError> {
    let trimmed = parent.trim().trim_end_matches('/');
    let bad = |why: &str| HostError::Setup(format!("cgroup path {parent:?}: {why}"));
    if !trimmed.starts_with('/') {
        return Err(bad("must start with /"));
    }
    if trimmed.len() == 1 {
        return Err(bad("must not be the root cgroup"));
    }
    if trimmed[1..]
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad("must not contain empty, . or .. components"));
    }
    Ok(trimmed.to_string())
}

impl HostContainers {
    /// Checks the layout: YARN's hierarchy must exist; the agent's own parent is created
    /// (and, on v2, given the cpu and memory controllers).
    pub fn new(
        backend: HostBackend,
        mounts: CgroupMounts,
        parent: &str,
        local_dirs: Vec<PathBuf>,
    ) -> Result<HostContainers, HostError> {
        let version = mounts.version().ok_or_else(|| {
            HostError::Setup(
                "no cgroup v1 cpu+memory hierarchy or cgroup v2 mount in /proc/self/mountinfo"
                    .into(),
            )
        })?;
        let parent = clean_parent(parent)?;
        let host = HostContainers {
            backend,
            mounts,
            version,
            parent,
            local_dirs,
        };
        let dirs = host.mounts.dirs_at(&host.parent)?;
        match backend {
            HostBackend::YarnCgroups => {
                if !dirs.cpu.is_dir() {
                    return Err(HostError::Setup(format!(
                        "YARN's cgroup hierarchy {} does not exist: is the NodeManager running the LinuxContainerExecutor with cgroups (yarn.nodemanager.linux-container-executor.cgroups.hierarchy)?",
                        dirs.cpu.display()
                    )));
                }
            }
            HostBackend::Process => {
                if host.local_dirs.is_empty() {
                    return Err(HostError::Setup(
                        "the process backend needs the NodeManager's local dirs (--nm-local-dirs)"
                            .into(),
                    ));
                }
                if version == CgroupVersion::V2 {
                    enable_v2_controllers(&dirs.cpu)?;
                }
                for d in distinct(&dirs) {
                    std::fs::create_dir_all(d).map_err(io_err("creating", d))?;
                }
                if version == CgroupVersion::V2 {
                    let control = dirs.cpu.join("cgroup.subtree_control");
                    std::fs::write(&control, "+cpu +memory")
                        .map_err(io_err("writing", &control))?;
                }
            }
        }
        Ok(host)
    }

    pub fn backend(&self) -> HostBackend {
        self.backend
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The container's cgroup directories (YARN's, or the agent's own).
    pub fn dirs(&self, id: ContainerId) -> Result<CgroupDirs, HostError> {
        Ok(self.mounts.dirs_at(&format!("{}/{id}", self.parent))?)
    }

    fn pid_file(&self, id: ContainerId) -> Option<PathBuf> {
        self.local_dirs
            .iter()
            .map(|d| {
                d.join("nmPrivate")
                    .join(id.application().to_string())
                    .join(id.to_string())
                    .join(format!("{id}.pid"))
            })
            .find(|p| p.is_file())
    }

    /// The container's first process, checked to be the container's.
    fn root_pid(&self, id: ContainerId) -> Result<Option<u32>, HostError> {
        let Some(file) = self.pid_file(id) else {
            return Ok(None);
        };
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("reading", &file)(e)),
        };
        // The NodeManager writes the pid file only once the process has started; an
        // empty or partial file means "not yet".
        let Ok(pid) = text.trim().parse::<u32>() else {
            return Ok(None);
        };
        if pid <= 1 || !Path::new(&format!("/proc/{pid}")).exists() {
            return Ok(None);
        }
        if !process_names(pid, id) {
            return Err(HostError::NotOwned {
                pid,
                pid_file: file,
                container: id,
            });
        }
        Ok(Some(pid))
    }

    /// What the enforcer needs to know about a container, by YARN container id.
    pub fn inspect(&self, reference: &str) -> Result<Inspected, HostError> {
        let id: ContainerId = reference
            .parse()
            .map_err(|_| HostError::NotYarn(reference.to_string()))?;
        let dirs = self.dirs(id)?;
        let in_cgroup = if dirs.cpu.is_dir() {
            Some(procs(&dirs.cpu)?)
        } else {
            None
        };
        let (running, pid) = match (self.backend, in_cgroup) {
            (HostBackend::YarnCgroups, None) => {
                return Err(HostError::NotFound(reference.to_string()));
            }
            (HostBackend::YarnCgroups, Some(p)) => (!p.is_empty(), p.first().copied()),
            (HostBackend::Process, Some(p)) if !p.is_empty() => (true, p.first().copied()),
            (HostBackend::Process, adopted) => match self.root_pid(id) {
                Ok(Some(pid)) => (true, Some(pid)),
                // Adopted once, now empty: the container has ended (and its pid may
                // name another process by now).
                Ok(None) | Err(HostError::NotOwned { .. }) if adopted.is_some() => (false, None),
                Ok(None) if self.pid_file(id).is_some() => (false, None),
                Ok(None) => return Err(HostError::NotFound(reference.to_string())),
                Err(e) => return Err(e),
            },
        };
        Ok(Inspected {
            docker_id: id.to_string(),
            name: id.to_string(),
            running,
            pid,
            cgroup_parent: self.parent.clone(),
            limits: DockerLimits::default(),
            oom_killed: false,
        })
    }

    /// The container's cgroup, ready to be written: YARN's as it is, or the agent's own
    /// with the container's whole process tree moved in.
    pub fn prepare(&self, id: ContainerId) -> Result<CgroupDirs, HostError> {
        let dirs = self.dirs(id)?;
        match self.backend {
            HostBackend::YarnCgroups => {
                if !dirs.exist() {
                    return Err(HostError::Cgroup(CgroupError::NotFound {
                        docker_id: id.to_string(),
                        reason: format!(
                            "YARN's cgroup lacks its cpu or memory files ({}, {}): does the NodeManager manage memory through cgroups (yarn.nodemanager.resource.memory.enabled)?",
                            dirs.cpu.display(),
                            dirs.memory.display()
                        ),
                    }));
                }
                Ok(dirs)
            }
            HostBackend::Process => {
                self.adopt(id, &dirs)?;
                Ok(dirs)
            }
        }
    }

    /// Whether the container has a cgroup of the agent's already.
    pub fn adopted(&self, id: ContainerId) -> bool {
        self.dirs(id).is_ok_and(|d| d.cpu.is_dir())
    }

    /// process: moves the container's processes into their own cgroup if its pid file
    /// names a running process of it. Returns whether it did.
    pub fn adopt_if_running(&self, id: ContainerId) -> Result<bool, HostError> {
        if self.backend != HostBackend::Process || self.root_pid(id)?.is_none() {
            return Ok(false);
        }
        self.adopt(id, &self.dirs(id)?)?;
        Ok(true)
    }

    /// Moves the container's process tree into its own cgroup. Idempotent: later calls
    /// pick up processes that escaped (none should: children start in their parent's).
    fn adopt(&self, id: ContainerId, dirs: &CgroupDirs) -> Result<(), HostError> {
        let root = self.root_pid(id)?;
        let created = !dirs.cpu.is_dir();
        for d in distinct(dirs) {
            match std::fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err("creating", d)(e)),
            }
        }
        if created && self.version == CgroupVersion::V1 {
            // Charges follow the pages into the new cgroup, so its limit sees them. Newer
            // kernels deprecate this file; the limit still applies to new charges.
            let f = dirs.memory.join("memory.move_charge_at_immigrate");
            if let Err(e) = std::fs::write(&f, "3") {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(file = %f.display(), error = %e, "the kernel does not move memory charges with a process: pages a container touched before it was moved stay charged to its old cgroup, and a lowered limit covers only what it touches later");
                });
            }
        }
        let Some(root) = root else {
            // Nothing to move (yet, or any more).
            return Ok(());
        };
        for _ in 0..MOVE_SWEEPS {
            let inside: HashSet<u32> = procs(&dirs.cpu)?.into_iter().collect();
            let outside: Vec<u32> = tree(root)
                .into_iter()
                .filter(|p| !inside.contains(p))
                .collect();
            if outside.is_empty() {
                return Ok(());
            }
            for pid in outside {
                for d in distinct(dirs) {
                    let f = d.join("cgroup.procs");
                    match std::fs::write(&f, pid.to_string()) {
                        Ok(()) => {}
                        // Exited meanwhile.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                        Err(e) => return Err(io_err("moving a process into", &f)(e)),
                    }
                }
            }
        }
        let inside: HashSet<u32> = procs(&dirs.cpu)?.into_iter().collect();
        let left = tree(root).iter().filter(|p| !inside.contains(p)).count();
        Err(HostError::Setup(format!(
            "container {id}: {left} processes still outside {} after {MOVE_SWEEPS} sweeps (forking faster than they can be moved)",
            dirs.cpu.display()
        )))
    }

    /// SIGKILL to every process of the container.
    pub fn kill(&self, id: ContainerId) -> Result<bool, HostError> {
        let dirs = self.dirs(id)?;
        let mut pids: BTreeSet<u32> = if dirs.cpu.is_dir() {
            procs(&dirs.cpu)?.into_iter().collect()
        } else {
            BTreeSet::new()
        };
        if self.backend == HostBackend::Process
            && let Some(root) = self.root_pid(id)?
        {
            pids.extend(tree(root));
        }
        let mut any = false;
        for pid in pids {
            let Ok(p) = libc::pid_t::try_from(pid) else {
                continue;
            };
            // SAFETY: kill(2) has no memory effects; the pid comes from the container's
            // cgroup or process tree.
            if unsafe { libc::kill(p, libc::SIGKILL) } == 0 {
                any = true;
            }
        }
        Ok(any)
    }

    /// Every container this backend can see on the node.
    pub fn list(&self) -> Result<Vec<ContainerId>, HostError> {
        let mut out = BTreeSet::new();
        if self.backend == HostBackend::Process {
            for d in &self.local_dirs {
                let private = d.join("nmPrivate");
                for app in read_dir_names(&private)? {
                    for c in read_dir_names(&private.join(&app))? {
                        if let Ok(id) = c.parse::<ContainerId>()
                            && self.pid_file(id).is_some()
                        {
                            out.insert(id);
                        }
                    }
                }
            }
        }
        out.extend(self.cgroups()?);
        Ok(out.into_iter().collect())
    }

    /// Containers that have a cgroup under the parent, in any hierarchy (a removal may
    /// have left one behind in another).
    fn cgroups(&self) -> Result<Vec<ContainerId>, HostError> {
        let dirs = self.mounts.dirs_at(&self.parent)?;
        let mut out = BTreeSet::new();
        for d in distinct(&dirs) {
            out.extend(
                read_dir_names(d)?
                    .into_iter()
                    .filter_map(|n| n.parse::<ContainerId>().ok()),
            );
        }
        Ok(out.into_iter().collect())
    }

    /// process: removes the agent's cgroups whose processes have all ended. Returns the
    /// containers whose cgroup went.
    pub fn remove_ended(&self) -> Vec<ContainerId> {
        if self.backend != HostBackend::Process {
            return Vec::new();
        }
        let ids = match self.cgroups() {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "listing the agent's container cgroups");
                return Vec::new();
            }
        };
        let mut removed = Vec::new();
        for id in ids {
            let Ok(dirs) = self.dirs(id) else { continue };
            if !distinct(&dirs)
                .into_iter()
                .all(|d| matches!(procs(d), Ok(p) if p.is_empty()))
            {
                continue;
            }
            // A container whose pid file names a live process is only starting.
            if matches!(self.root_pid(id), Ok(Some(_))) {
                continue;
            }
            let mut ok = true;
            for d in distinct(&dirs) {
                match std::fs::remove_dir(d) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    // Its last processes are still exiting: the next tick tries again.
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => ok = false,
                    Err(e) => {
                        ok = false;
                        tracing::warn!(dir = %d.display(), error = %e, "removing an ended container's cgroup");
                    }
                }
            }
            if ok {
                tracing::info!(container = %id, "container ended; its cgroup is removed");
                removed.push(id);
            }
        }
        removed
    }
}

/// Removes the cgroup at `rel` and every cgroup below it, children first, in every
/// hierarchy: for whoever created an agent's parent cgroup (the demo, tests) once its
/// containers have ended. A cgroup whose processes are still exiting gets 2 s.
pub fn remove_tree(mounts: &CgroupMounts, rel: &str) -> Result<(), HostError> {
    let rel = clean_parent(rel)?;
    let dirs = mounts.dirs_at(&rel)?;
    for top in distinct(&dirs) {
        let mut all = Vec::new();
        let mut stack = vec![top.to_path_buf()];
        while let Some(d) = stack.pop() {
            stack.extend(read_dir_names(&d)?.into_iter().map(|n| d.join(n)));
            all.push(d);
        }
        // Children were pushed after their parents.
        for d in all.iter().rev() {
            let mut tries = 0;
            loop {
                match std::fs::remove_dir(d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 40 => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    Err(e) => return Err(io_err("removing", d)(e)),
                }
            }
        }
    }
    Ok(())
}

/// The distinct directories of a cgroup (v1 may co-mount cpu and cpuacct; v2 has one).
fn distinct(dirs: &CgroupDirs) -> Vec<&Path> {
    let mut out: Vec<&Path> = Vec::with_capacity(3);
    for d in [&dirs.cpu, &dirs.cpuacct, &dirs.memory] {
        if !out.contains(&d.as_path()) {
            out.push(d);
        }
    }
    out
}

/// On v2 a child gets a controller only if every ancestor delegates it.
fn enable_v2_controllers(parent: &Path) -> Result<(), HostError> {
    let mut chain: Vec<&Path> = parent.ancestors().skip(1).collect();
    chain.reverse();
    for dir in chain {
        let control = dir.join("cgroup.subtree_control");
        if !control.is_file() {
            continue;
        }
        let current = std::fs::read_to_string(&control).map_err(io_err("reading", &control))?;
        let has = |c: &str| current.split_whitespace().any(|w| w == c);
        if has("cpu") && has("memory") {
            continue;
        }
        std::fs::write(&control, "+cpu +memory").map_err(|e| {
            HostError::Setup(format!(
                "cannot delegate the cpu and memory controllers in {}: {e}",
                control.display()
            ))
        })?;
    }
    Ok(())
}

fn procs(dir: &Path) -> Result<Vec<u32>, HostError> {
    let f = dir.join("cgroup.procs");
    match std::fs::read_to_string(&f) {
        Ok(t) => Ok(t.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err("reading", &f)(e)),
    }
}

fn read_dir_names(dir: &Path) -> Result<Vec<String>, HostError> {
    match std::fs::read_dir(dir) {
        Ok(rd) => Ok(rd
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err("listing", dir)(e)),
    }
}

/// Whether the process's command line or environment names the container: the
/// NodeManager passes CONTAINER_ID, and the launch script's path holds the id. Guards
/// against a pid file whose pid was reused.
fn process_names(pid: u32, id: ContainerId) -> bool {
    let needle = id.to_string();
    ["cmdline", "environ"].iter().any(|f| {
        std::fs::read(format!("/proc/{pid}/{f}"))
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    })
}

/// `root` and every live process below it: its descendants, and the members of its
/// session (the DefaultContainerExecutor starts the container with setsid). A zombie is
/// left out: it cannot be moved into a cgroup (the kernel takes the write and moves
/// nothing), so counting it would fail every sweep until its parent reaps it.
fn tree(root: u32) -> Vec<u32> {
    let Ok(all) = procfs::process::all_processes() else {
        return vec![root];
    };
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut out = BTreeSet::from([root]);
    for p in all.flatten() {
        let Ok(stat) = p.stat() else { continue };
        if matches!(stat.state, 'Z' | 'X') {
            continue;
        }
        let (Ok(pid), Ok(ppid), Ok(sid)) = (
            u32::try_from(stat.pid),
            u32::try_from(stat.ppid),
            u32::try_from(stat.session),
        ) else {
            continue;
        };
        if sid == root {
            out.insert(pid);
        }
        children.entry(ppid).or_default().push(pid);
    }
    let mut stack: Vec<u32> = out.iter().copied().collect();
    while let Some(p) = stack.pop() {
        for c in children.get(&p).into_iter().flatten() {
            if out.insert(*c) {
                stack.push(*c);
            }
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::tree;

    /// A child that exited and is not reaped yet is a zombie; a live one is counted.
    #[test]
    fn a_tree_counts_live_children_and_not_zombies() {
        let me = std::process::id();
        let mut live = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts");
        let mut done = Command::new("true")
            .stdin(Stdio::null())
            .spawn()
            .expect("true starts");
        let zombie = |pid: u32| {
            procfs::process::Process::new(pid as i32)
                .and_then(|p| p.stat())
                .is_ok_and(|s| s.state == 'Z')
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !zombie(done.id()) {
            assert!(Instant::now() < deadline, "`true` never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        let t = tree(me);
        let (live_in, zombie_in) = (t.contains(&live.id()), t.contains(&done.id()));
        live.kill().expect("kill sleep");
        live.wait().expect("reap sleep");
        done.wait().expect("reap true");
        assert!(live_in, "a live child is in the tree");
        assert!(!zombie_in, "a zombie is not");
    }
}
