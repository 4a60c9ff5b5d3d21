//! Proactive reclaim before a memory limit is lowered.
//!
//! Lowering `memory.limit_in_bytes` makes the kernel reclaim by scanning the cgroup's LRU
//! lists, 32 pages at a time, in the writer's context: about 5-10 s per GB here. Asking it
//! instead to page out the container's private memory directly (`process_madvise` with
//! `MADV_PAGEOUT`, Linux 5.10+) skips the scanning and is several times faster; the limit
//! write that follows then only drops clean swap-cache pages. The advice changes no
//! semantics: a page the (throttled) task touches again is simply faulted back in.
//!
//! A suspend does it all at once ([`reclaim_for_suspend`]): page out, of what
//! `/proc/<pid>/pagemap` shows resident, as much as the cut needs (and a margin), then one
//! limit write, both from a short-lived thread at `SCHED_FIFO`, so that other load on the
//! host (and the container, already throttled) cannot stretch the reclaim. The policy is
//! dropped before the thread ends; without the privilege the thread runs at the normal
//! policy.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use procfs::process::MemoryPageFlags;

use super::cgroup::{CgroupDirs, CgroupError};
use super::limits::CgroupLimits;
use super::metrics::Metrics;
use super::writer::{LimitWriter, Outcome};

#[derive(Debug, thiserror::Error)]
pub enum PageOutError {
    #[error("process_madvise(MADV_PAGEOUT) is not available here: {0}")]
    Unsupported(io::Error),
    #[error("reading {path}: {error}")]
    Read {
        path: std::path::PathBuf,
        error: io::Error,
    },
    #[error("starting the reclaim thread: {0}")]
    Thread(io::Error),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageOutReport {
    pub processes: usize,
    /// Bytes of address space advised (for [`page_out`], not all of it was resident).
    pub advised_bytes: u64,
    pub elapsed: Duration,
}

/// Private writable mappings (`rw-p`) from `/proc/<pid>/maps`: heap, stacks, anonymous
/// mmaps and copied-on-write data, as (start, length).
///
/// Parsed by hand rather than with procfs's `MemoryMaps`, which fails the whole file on
/// one line it cannot parse (a line is skipped here) and parses the pathname, which the
/// mapped file's name controls: a short `/SYSV...` name makes it panic.
pub fn private_writable_ranges(maps: &str) -> Vec<(u64, u64)> {
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            if perms != "rw-p" {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let a = u64::from_str_radix(a, 16).ok()?;
            let b = u64::from_str_radix(b, 16).ok()?;
            (b > a).then_some((a, b - a))
        })
        .collect()
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One `process_madvise` call; returns the bytes advised.
fn pageout_range(pidfd: &OwnedFd, start: u64, len: u64) -> io::Result<u64> {
    let iov = libc::iovec {
        iov_base: start as usize as *mut libc::c_void,
        iov_len: len as usize,
    };
    // SAFETY: the iovec describes memory of another process; the kernel only reads the
    // iovec array itself, which lives on our stack for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd.as_raw_fd(),
            &iov as *const libc::iovec,
            1usize,
            libc::MADV_PAGEOUT,
            0u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as u64)
    }
}

/// A private writable mapping from `/proc/<pid>/smaps` with its resident size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub len: u64,
    pub rss: u64,
}

/// The private writable mappings of `/proc/<pid>/smaps` that have anything resident.
///
/// By hand for the reasons of [`private_writable_ranges`], and because procfs's `MemoryMaps`
/// builds a map of every field of every mapping, on the real-time reclaim thread, for the
/// one (`Rss`) needed here.
pub fn resident_private_vmas(smaps: &str) -> Vec<Vma> {
    let mut out = Vec::new();
    let mut current: Option<Vma> = None;
    for line in smaps.lines() {
        if let Some(rest) = line.strip_prefix("Rss:") {
            if let Some(v) = current.as_mut() {
                v.rss = rest
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .map_or(0, |kb| kb.saturating_mul(1024));
            }
            continue;
        }
        // A mapping's header: "start-end perms offset dev inode [path]".
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        if let Some(v) = current.take()
            && v.rss > 0
        {
            out.push(v);
        }
        if perms == "rw-p" && b > a {
            current = Some(Vma {
                start: a,
                len: b - a,
                rss: 0,
            });
        }
    }
    if let Some(v) = current.filter(|v| v.rss > 0) {
        out.push(v);
    }
    out
}

/// Appends the runs of resident pages in `[start, start + len)` to `out`, read from an
/// open `/proc/<pid>/pagemap`. Entries are decoded with procfs's pagemap flags; the file is
/// read here in 64 KiB `pread`s because procfs's `PageMap` reads through an 8 KiB buffer
/// into a new `Vec` per call (about 50% slower over a large mapping), turns a read that
/// ends early into an error, and cannot use a file already open.
pub fn resident_runs(
    pagemap: &std::fs::File,
    start: u64,
    len: u64,
    page: u64,
    out: &mut Vec<(u64, u64)>,
) -> io::Result<()> {
    const CHUNK: u64 = 8192;
    let first = start / page;
    let pages = len.div_ceil(page);
    let mut buf = vec![0u8; (CHUNK * 8) as usize];
    let mut run: Option<(u64, u64)> = None;
    let mut done = 0;
    while done < pages {
        let n = (pages - done).min(CHUNK);
        let bytes = &mut buf[..(n * 8) as usize];
        let got = pagemap.read_at(bytes, (first + done) * 8)?;
        let entries = (got / 8) as u64;
        if entries == 0 {
            break;
        }
        for (i, e) in bytes[..(entries * 8) as usize].chunks_exact(8).enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(e);
            let addr = (first + done + i as u64) * page;
            if MemoryPageFlags::from_bits_retain(u64::from_ne_bytes(word))
                .contains(MemoryPageFlags::PRESENT)
            {
                run = match run {
                    Some((s, l)) if s + l == addr => Some((s, l + page)),
                    Some(r) => {
                        out.push(r);
                        Some((addr, page))
                    }
                    None => Some((addr, page)),
                };
            }
        }
        done += entries;
    }
    out.extend(run);
    Ok(())
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).ok().filter(|p| *p > 0).unwrap_or(4096)
}

/// The resident runs of a process's private writable memory: whole mappings that are all
/// resident, the pagemap's runs for the others.
fn resident_ranges(pid: i32, page: u64) -> io::Result<Vec<(u64, u64)>> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
    let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap"))?;
    let mut out = Vec::new();
    for v in resident_private_vmas(&smaps) {
        if v.rss >= v.len {
            out.push((v.start, v.len));
        } else if resident_runs(&pagemap, v.start, v.len, page, &mut out).is_err() {
            // The mapping changed under us: advise all of it.
            out.push((v.start, v.len));
        }
    }
    Ok(out)
}

/// Many ranges in one `process_madvise` call each (at most `IOV_MAX`); returns the bytes
/// advised. A range that fails (unmapped meanwhile) is skipped, not retried.
fn pageout_ranges(pidfd: &OwnedFd, ranges: &[(u64, u64)]) -> io::Result<u64> {
    const IOV_MAX: usize = 1024;
    let mut advised = 0;
    let mut rest = ranges;
    let mut any_worked = false;
    while !rest.is_empty() {
        let batch = &rest[..rest.len().min(IOV_MAX)];
        let iov: Vec<libc::iovec> = batch
            .iter()
            .map(|(s, l)| libc::iovec {
                iov_base: *s as usize as *mut libc::c_void,
                iov_len: *l as usize,
            })
            .collect();
        // SAFETY: the iovecs describe memory of another process; the kernel only reads
        // the iovec array, which outlives the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd.as_raw_fd(),
                iov.as_ptr(),
                iov.len(),
                libc::MADV_PAGEOUT,
                0u32,
            )
        };
        let n = if r < 0 {
            let e = io::Error::last_os_error();
            if !any_worked
                && matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSYS | libc::EPERM | libc::EINVAL)
                )
            {
                return Err(e);
            }
            if e.raw_os_error() == Some(libc::ESRCH) {
                break;
            }
            0
        } else {
            any_worked = true;
            r as u64
        };
        advised += n;
        // Skip past what was advised and the range that stopped the call, if any.
        let mut left = n;
        let mut used = 0;
        for (_, l) in batch {
            if left < *l {
                break;
            }
            left -= l;
            used += 1;
        }
        let skip = if used < batch.len() { used + 1 } else { used };
        rest = &rest[skip..];
    }
    Ok(advised)
}

/// The processes in the cgroup at `memory_dir` (its `cgroup.procs`).
fn cgroup_pids(memory_dir: &Path) -> Result<Vec<i32>, PageOutError> {
    let path = memory_dir.join("cgroup.procs");
    let procs =
        std::fs::read_to_string(&path).map_err(|error| PageOutError::Read { path, error })?;
    Ok(procs
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .collect())
}

/// The first `budget` bytes of `ranges`, the last range cut at a page boundary (rounded
/// up, so that the budget is covered).
fn clip_ranges(ranges: &mut Vec<(u64, u64)>, budget: u64, page: u64) {
    let page = page.max(1);
    let mut left = budget;
    let mut keep = 0;
    for r in ranges.iter_mut() {
        if left == 0 {
            break;
        }
        if r.1 > left {
            r.1 = left.div_ceil(page).saturating_mul(page).min(r.1);
        }
        left -= r.1.min(left);
        keep += 1;
    }
    ranges.truncate(keep);
}

/// Pages out the resident private memory of every process in the cgroup at `memory_dir`,
/// up to `budget` bytes.
pub fn page_out_resident(memory_dir: &Path, budget: u64) -> Result<PageOutReport, PageOutError> {
    let started = Instant::now();
    let pids = cgroup_pids(memory_dir)?;
    let page = page_size();
    let mut report = PageOutReport::default();
    let mut remaining = budget;
    for pid in pids.iter().copied() {
        if remaining == 0 {
            break;
        }
        let pidfd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                return Err(PageOutError::Unsupported(e));
            }
            // The process exited meanwhile.
            Err(_) => continue,
        };
        let Ok(mut ranges) = resident_ranges(pid, page) else {
            continue;
        };
        clip_ranges(&mut ranges, remaining, page);
        report.processes += 1;
        let advised = pageout_ranges(&pidfd, &ranges).map_err(PageOutError::Unsupported)?;
        report.advised_bytes += advised;
        remaining = remaining.saturating_sub(advised);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// While alive, the calling thread runs at `SCHED_FIFO` priority 1 (if it was allowed to).
struct Realtime {
    entered: bool,
}

impl Realtime {
    fn enter() -> Realtime {
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: pid 0 is the calling thread; `p` is a valid sched_param.
        let r = unsafe {
            libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p)
        };
        Realtime { entered: r == 0 }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if self.entered {
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: as above; going back to the normal policy needs no privilege.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
        }
    }
}

/// Runs `f` on a new thread at `SCHED_FIFO` when allowed (normal policy otherwise);
/// returns its result and whether it ran real-time.
pub async fn on_realtime_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<(T, bool)> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("preemptor-reclaim".into())
        .spawn(move || {
            let rt = Realtime::enter();
            let entered = rt.entered;
            let r = f();
            drop(rt);
            let _ = tx.send((r, entered));
        })?;
    rx.await
        .map_err(|_| io::Error::other("the reclaim thread stopped without an answer"))
}

/// What [`reclaim_for_suspend`] did.
#[derive(Debug)]
pub struct SuspendReclaim {
    /// `None` when page-out was not asked for.
    pub page_out: Option<Result<PageOutReport, PageOutError>>,
    /// The one limit write (memory and memory+swap together, in the safe order).
    pub write: Result<Outcome, CgroupError>,
    pub realtime: bool,
    pub elapsed: Duration,
}

/// What a suspend pages out beyond usage minus target: memory the page-out cannot take
/// (page cache, kernel memory) and pages the throttled task touches meanwhile.
pub const PAGE_OUT_MARGIN: u64 = 16 << 20;

/// Bytes a suspend from `usage` down to `target` pages out: the cut and a margin. Every
/// byte goes to the swap device, whose speed bounds the reclaim, so not everything.
/// `None` when the usage already fits or either is unknown (the limit write copes).
pub fn suspend_page_out_budget(usage: Option<u64>, target: Option<u64>) -> Option<u64> {
    match (usage, target) {
        (Some(u), Some(t)) if u > t => Some((u - t).saturating_add(PAGE_OUT_MARGIN)),
        _ => None,
    }
}

/// A suspend's memory cut in one go, from one real-time thread: page out up to
/// `page_out` bytes of what is resident (none when `None`), then write `want`'s memory
/// limits straight to the cgroup files once.
pub async fn reclaim_for_suspend(
    dirs: CgroupDirs,
    want: CgroupLimits,
    page_out: Option<u64>,
    metrics: Arc<Metrics>,
) -> Result<SuspendReclaim, PageOutError> {
    let work = move || {
        let started = Instant::now();
        let paged = page_out.map(|budget| page_out_resident(&dirs.memory, budget));
        let write = LimitWriter::new(None, metrics).set_memory_direct(&dirs, &want);
        (paged, write, started.elapsed())
    };
    let ((page_out, write, elapsed), realtime) = on_realtime_thread(work)
        .await
        .map_err(PageOutError::Thread)?;
    Ok(SuspendReclaim {
        page_out,
        write,
        realtime,
        elapsed,
    })
}

/// Pages out the private memory of every process in the cgroup at `memory_dir`, up to
/// `budget` bytes of address space (all of it when `None`).
pub fn page_out(memory_dir: &Path, budget: Option<u64>) -> Result<PageOutReport, PageOutError> {
    let started = Instant::now();
    let pids = cgroup_pids(memory_dir)?;
    let mut report = PageOutReport::default();
    let mut remaining = budget.unwrap_or(u64::MAX);
    let mut any_call_worked = false;
    for pid in pids.iter().copied() {
        if remaining == 0 {
            break;
        }
        let pidfd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                return Err(PageOutError::Unsupported(e));
            }
            // The process exited meanwhile.
            Err(_) => continue,
        };
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        report.processes += 1;
        'ranges: for (start, len) in private_writable_ranges(&maps) {
            let mut off = 0;
            while off < len && remaining > 0 {
                let chunk = (len - off).min(remaining);
                match pageout_range(&pidfd, start + off, chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        any_call_worked = true;
                        off += n;
                        report.advised_bytes += n;
                        remaining = remaining.saturating_sub(n);
                    }
                    Err(e)
                        if !any_call_worked
                            && matches!(
                                e.raw_os_error(),
                                Some(libc::ENOSYS | libc::EPERM | libc::EINVAL)
                            ) =>
                    {
                        return Err(PageOutError::Unsupported(e));
                    }
                    // The mapping changed or the process exited: move on.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break 'ranges,
                    Err(_) => break,
                }
            }
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_keeps_the_first_ranges_and_cuts_the_last_at_a_page() {
        let all = vec![(0x1000, 0x3000), (0x10000, 0x2000), (0x20000, 0x1000)];
        let clip = |budget| {
            let mut r = all.clone();
            clip_ranges(&mut r, budget, 0x1000);
            r
        };
        assert_eq!(clip(u64::MAX), all);
        assert_eq!(clip(0), vec![]);
        assert_eq!(clip(0x3000), vec![(0x1000, 0x3000)]);
        // Rounded up to whole pages, so the budget is covered.
        assert_eq!(clip(0x3001), vec![(0x1000, 0x3000), (0x10000, 0x1000)]);
        assert_eq!(clip(0x4800), vec![(0x1000, 0x3000), (0x10000, 0x2000)]);
        assert_eq!(clip(0x1_0000_0000), all);
    }

    #[test]
    fn a_suspend_pages_out_the_cut_and_a_margin() {
        const MB: u64 = 1 << 20;
        assert_eq!(
            suspend_page_out_budget(Some(260 * MB), Some(64 * MB)),
            Some(196 * MB + PAGE_OUT_MARGIN)
        );
        assert_eq!(suspend_page_out_budget(Some(64 * MB), Some(64 * MB)), None);
        assert_eq!(suspend_page_out_budget(Some(10 * MB), Some(64 * MB)), None);
        assert_eq!(suspend_page_out_budget(None, Some(64 * MB)), None);
        assert_eq!(
            suspend_page_out_budget(Some(u64::MAX), Some(0)),
            Some(u64::MAX)
        );
    }

    #[test]
    fn only_private_writable_mappings_are_paged_out() {
        let maps = "\
00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/java
00651000-00652000 rw-p 00051000 08:02 173521 /usr/bin/java
7f2c00000000-7f2c10000000 rw-p 00000000 00:00 0
7f2c10000000-7f2c10001000 rw-s 00000000 00:05 1 /dev/shm/x
7ffd4a2b9000-7ffd4a2da000 rw-p 00000000 00:00 0 [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
garbage line
";
        assert_eq!(
            private_writable_ranges(maps),
            vec![
                (0x651000, 0x1000),
                (0x7f2c00000000, 0x10000000),
                (0x7ffd4a2b9000, 0x21000)
            ]
        );
    }

    #[test]
    fn paging_out_our_own_cgroup_is_harmless() {
        // Advise a small budget of this test process's own memory: it must keep working.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("cgroup.procs"),
            format!("{}\n", std::process::id()),
        )
        .unwrap();
        let data = vec![7u8; 1 << 20];
        match page_out(tmp.path(), Some(1 << 20)) {
            Ok(r) => assert_eq!(r.processes, 1),
            Err(PageOutError::Unsupported(_)) => {}
            Err(e) => panic!("{e}"),
        }
        assert!(data.iter().all(|b| *b == 7));
        assert!(matches!(
            page_out(&tmp.path().join("missing"), None),
            Err(PageOutError::Read { .. })
        ));
    }

    #[test]
    fn only_resident_private_writable_mappings_are_targeted() {
        let smaps = "\
00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/java
Size:                328 kB
Rss:                 300 kB
00651000-00652000 rw-p 00051000 08:02 173521 /usr/bin/java
Size:                  4 kB
Rss:                   4 kB
7f2c00000000-7f2c10000000 rw-p 00000000 00:00 0
Size:             262144 kB
Rss:                   0 kB
7f2c10000000-7f2c20000000 rw-p 00000000 00:00 0
Size:             262144 kB
Rss:              131072 kB
VmFlags: rd wr mr mw me ac
7f2c20000000-7f2c20001000 rw-s 00000000 00:05 1 /dev/shm/x
Rss:                   4 kB
";
        assert_eq!(
            resident_private_vmas(smaps),
            vec![
                Vma {
                    start: 0x651000,
                    len: 0x1000,
                    rss: 4096
                },
                Vma {
                    start: 0x7f2c10000000,
                    len: 0x10000000,
                    rss: 128 << 20
                },
            ]
        );
    }

    #[test]
    fn pagemap_runs_are_the_pages_touched() {
        let page = page_size() as usize;
        let pages = 64;
        // A fresh anonymous mapping: nothing resident until touched.
        // SAFETY: a private anonymous mapping we unmap below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let touched = [(4usize, 8usize), (20, 1), (40, 24)];
        for (first, n) in touched {
            for p in first..first + n {
                // SAFETY: inside the mapping.
                unsafe { *(base as *mut u8).add(p * page) = 1 };
            }
        }
        let pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut runs = Vec::new();
        resident_runs(
            &pagemap,
            base as u64,
            (pages * page) as u64,
            page as u64,
            &mut runs,
        )
        .unwrap();
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base, pages * page) };
        let want: Vec<(u64, u64)> = touched
            .iter()
            .map(|(f, n)| (base as u64 + (f * page) as u64, (n * page) as u64))
            .collect();
        assert_eq!(runs, want);
    }

    fn policy() -> i32 {
        // SAFETY: no preconditions; 0 is the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[tokio::test]
    async fn the_reclaim_thread_is_real_time_only_while_it_works() {
        let outside = policy();
        let ((inside, tid), realtime) = on_realtime_thread(|| {
            // SAFETY: gettid has no preconditions.
            (policy() & !libc::SCHED_RESET_ON_FORK, unsafe {
                libc::gettid()
            })
        })
        .await
        .unwrap();
        // Root gets SCHED_FIFO; without the privilege the thread silently keeps the
        // normal policy.
        let want = if realtime {
            libc::SCHED_FIFO
        } else {
            libc::SCHED_OTHER
        };
        assert_eq!(inside, want);
        // SAFETY: as above.
        assert_ne!(tid, unsafe { libc::gettid() });
        // The caller's policy is untouched.
        assert_eq!(policy(), outside);
        // The guard gives the policy back on the thread itself.
        let after = std::thread::spawn(|| {
            let rt = Realtime::enter();
            let during = policy() & !libc::SCHED_RESET_ON_FORK;
            let entered = rt.entered;
            drop(rt);
            (entered, during, policy())
        })
        .join()
        .unwrap();
        assert_eq!(after.0, after.1 == libc::SCHED_FIFO);
        assert_eq!(after.2, libc::SCHED_OTHER);
    }
}
