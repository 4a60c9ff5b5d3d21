//! What every kernel shares: the run context (stop flag, threads, output), progress
//! reporting, a stable checksum, seeded random streams and a small work-sharing pool.

use std::fmt;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("stopped by a signal")]
    Stopped,
    #[error("invalid arguments: {0}")]
    InvalidArgument(String),
    #[error("cannot allocate {what}: {bytes} bytes")]
    OutOfMemory { what: &'static str, bytes: u128 },
    #[error("cannot start a worker thread: {0}")]
    Thread(std::io::Error),
    #[error("a worker thread panicked")]
    WorkerPanicked,
    #[error("self-check failed: {0}")]
    SelfCheck(String),
}

/// One kernel run: where output goes, how many workers it may use, and the flag a signal
/// handler raises to stop it.
pub struct Ctx<'a> {
    stop: &'a AtomicBool,
    threads: usize,
    out: Mutex<Box<dyn Write + Send + 'a>>,
}

impl<'a> Ctx<'a> {
    pub fn new(stop: &'a AtomicBool, threads: usize, out: Box<dyn Write + Send + 'a>) -> Self {
        Ctx {
            stop,
            threads: threads.max(1),
            out: Mutex::new(out),
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn check_stop(&self) -> Result<(), KernelError> {
        if self.stop.load(Ordering::Relaxed) {
            Err(KernelError::Stopped)
        } else {
            Ok(())
        }
    }

    /// Writes one line and flushes it, so that whoever tails the container log sees it now.
    /// A closed stdout must not stop the computation, so write errors are dropped.
    pub fn line(&self, args: fmt::Arguments<'_>) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_fmt(args);
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }

    /// Progress over `total` units of work, printed as `progress <n>%` whenever the whole
    /// percentage changes. `total == 0` means open-ended: nothing is printed.
    pub fn progress(&self, total: u64) -> Progress<'_, 'a> {
        Progress {
            ctx: self,
            total,
            done: AtomicU64::new(0),
            printed: AtomicU64::new(NOT_PRINTED),
        }
    }
}

const NOT_PRINTED: u64 = u64::MAX;

pub struct Progress<'c, 'a> {
    ctx: &'c Ctx<'a>,
    total: u64,
    done: AtomicU64,
    printed: AtomicU64,
}

impl Progress<'_, '_> {
    /// Records `units` of finished work, prints the percentage if it moved, and returns
    /// `Stopped` once a signal asked the kernel to stop: every unit boundary is a
    /// cancellation point.
    pub fn advance(&self, units: u64) -> Result<(), KernelError> {
        if self.total > 0 {
            // Count and print under one lock: a worker that counted first must also
            // print first, or readers would see a percentage skipped.
            let mut out = self.ctx.out.lock().unwrap_or_else(|e| e.into_inner());
            let done = self
                .done
                .fetch_add(units, Ordering::Relaxed)
                .saturating_add(units);
            let pct = (done.min(self.total) as u128 * 100 / self.total as u128) as u64;
            let printed = self.printed.load(Ordering::Relaxed);
            if printed == NOT_PRINTED || pct > printed {
                self.printed.store(pct, Ordering::Relaxed);
                let _ = writeln!(out, "progress {pct}%");
                let _ = out.flush();
            }
        }
        self.ctx.check_stop()
    }
}

/// A stable 64-bit checksum (not cryptographic): the same input gives the same value on
/// every build and platform, unlike `std`'s hashers.
#[derive(Clone, Copy, Debug)]
pub struct Checksum(u64);

impl Default for Checksum {
    fn default() -> Self {
        Checksum(0xcbf2_9ce4_8422_2325)
    }
}

impl Checksum {
    pub fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(29)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
    }

    pub fn write_i128(&mut self, x: i128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }

    pub fn write_f64(&mut self, x: f64) {
        self.write_u64(x.to_bits());
    }

    /// Eight bytes at a time, then the length, so that `"ab" + "c"` and `"a" + "bc"` differ.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            self.write_u64(u64::from_le_bytes(a));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(a));
        }
        self.write_u64(bytes.len() as u64);
    }

    pub fn finish(self) -> u64 {
        splitmix64(self.0)
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An independent random stream for piece `index` of the data named `stream`, so that any
/// worker can generate any piece and the data does not depend on the thread count.
pub fn rng_for(seed: u64, stream: &str, index: u64) -> Pcg64Mcg {
    let mut c = Checksum::default();
    c.write_bytes(stream.as_bytes());
    c.write_u64(seed);
    c.write_u64(index);
    Pcg64Mcg::seed_from_u64(c.finish())
}

/// An empty vector with room for `len` values, failing with a clear error instead of
/// aborting when the memory cannot be had.
pub fn with_capacity<T>(what: &'static str, len: usize) -> Result<Vec<T>, KernelError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| KernelError::OutOfMemory {
            what,
            bytes: len as u128 * std::mem::size_of::<T>() as u128,
        })?;
    Ok(v)
}

/// A vector of `len` default values (see [`with_capacity`]).
pub fn alloc_vec<T: Clone + Default>(
    what: &'static str,
    len: usize,
) -> Result<Vec<T>, KernelError> {
    let mut v = with_capacity(what, len)?;
    v.resize(len, T::default());
    Ok(v)
}

/// `n` pieces of work of about `target` units each, at least `min_pieces` when there is
/// that much work, so that progress can move in steps of 1% or less.
pub fn piece_count(n: u64, target: u64, min_pieces: u64) -> u64 {
    n.div_ceil(target.max(1)).max(min_pieces).min(n).max(1)
}

/// The half-open range of piece `i` when `n` items are cut into `pieces` near-equal pieces.
pub fn piece_range(n: u64, pieces: u64, i: u64) -> std::ops::Range<u64> {
    let start = (n as u128 * i as u128 / pieces as u128) as u64;
    let end = (n as u128 * (i as u128 + 1) / pieces as u128) as u64;
    start..end
}

/// Groups of whole chunks for `items` items: at most `max_groups`, at least one.
pub fn group_count(items: usize, chunk: usize, max_groups: usize) -> usize {
    items.div_ceil(chunk).clamp(1, max_groups)
}

/// The items of group `g` when `items` are cut into `groups` runs of whole chunks. The
/// groups are fixed by the input's size, never by the thread count, so that reductions
/// over them always add up in the same order.
pub fn group_items(items: usize, chunk: usize, groups: usize, g: usize) -> std::ops::Range<usize> {
    let r = piece_range(items.div_ceil(chunk) as u64, groups as u64, g as u64);
    (r.start as usize * chunk).min(items)..(r.end as usize * chunk).min(items)
}

/// Cuts `v`, a run of items of `width` elements each, into the slices of `groups` groups
/// (see [`group_items`]), each with the index of its first item.
pub fn split_groups<T>(
    v: &mut [T],
    width: usize,
    chunk: usize,
    groups: usize,
) -> Vec<(usize, &mut [T])> {
    let items = v.len() / width.max(1);
    let mut out = Vec::with_capacity(groups);
    let mut rest = v;
    for g in 0..groups {
        let r = group_items(items, chunk, groups, g);
        let (slice, tail) = rest.split_at_mut(r.len() * width);
        out.push((r.start, slice));
        rest = tail;
    }
    out
}

/// Runs `job` on every item with `ctx.threads()` workers and returns the results in item
/// order, so that reductions over them do not depend on the thread count. The first error
/// stops the other workers at their next item.
pub fn par_map<I, T, F>(ctx: &Ctx<'_>, items: Vec<I>, job: F) -> Result<Vec<T>, KernelError>
where
    I: Send,
    T: Send,
    F: Fn(usize, I) -> Result<T, KernelError> + Sync,
{
    let n = items.len();
    let workers = ctx.threads().min(n);
    if workers <= 1 {
        return items
            .into_iter()
            .enumerate()
            .map(|(i, item)| job(i, item))
            .collect();
    }
    let queue = Mutex::new(items.into_iter().enumerate());
    let failed = AtomicBool::new(false);
    let worker = || -> Result<Vec<(usize, T)>, KernelError> {
        let mut done = Vec::new();
        loop {
            if failed.load(Ordering::Relaxed) {
                return Ok(done);
            }
            let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
            let Some((i, item)) = next else {
                return Ok(done);
            };
            match job(i, item) {
                Ok(t) => done.push((i, t)),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
    };
    let per_worker: Vec<Result<Vec<(usize, T)>, KernelError>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(workers);
        let mut spawn_error = None;
        for _ in 0..workers {
            match std::thread::Builder::new().spawn_scoped(s, worker) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        let mut results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(KernelError::WorkerPanicked)))
            .collect();
        if let Some(e) = spawn_error {
            results.push(Err(KernelError::Thread(e)));
        }
        results
    });
    let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    for r in per_worker {
        for (i, t) in r? {
            slots[i] = Some(t);
        }
    }
    slots
        .into_iter()
        .map(|t| t.ok_or_else(|| KernelError::SelfCheck("a work item was not run".into())))
        .collect()
}

#[cfg(test)]
pub mod testing {
    use std::io::Write;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    use super::Ctx;

    pub static NEVER: AtomicBool = AtomicBool::new(false);

    /// Output captured from a kernel run.
    #[derive(Clone, Default)]
    pub struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        pub fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    pub fn ctx(threads: usize) -> Ctx<'static> {
        Ctx::new(&NEVER, threads, Box::new(std::io::sink()))
    }

    pub fn capturing_ctx(threads: usize) -> (Ctx<'static>, Captured) {
        let c = Captured::default();
        (Ctx::new(&NEVER, threads, Box::new(c.clone())), c)
    }

    /// The percentages of the `progress` lines, checking they rise to 100 in steps of at
    /// most `max_step`.
    pub fn assert_progress(lines: &[String], max_step: u64) {
        let pcts: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("progress "))
            .map(|p| p.trim_end_matches('%').parse().unwrap())
            .collect();
        assert_eq!(pcts.last(), Some(&100), "progress ends at 100%: {pcts:?}");
        for w in pcts.windows(2) {
            assert!(
                w[0] < w[1] && w[1] - w[0] <= max_step,
                "progress rises by at most {max_step}: {pcts:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::testing::*;
    use super::*;

    #[test]
    fn progress_prints_each_percentage_once_and_in_order() {
        let (ctx, out) = capturing_ctx(4);
        let p = ctx.progress(1000);
        par_map(&ctx, (0..1000).collect(), |_, _: u32| p.advance(1)).unwrap();
        let lines = out.lines();
        assert_progress(&lines, 1);
        assert_eq!(lines.len(), 101, "0% to 100%: {lines:?}");
    }

    #[test]
    fn open_ended_progress_prints_nothing() {
        let (ctx, out) = capturing_ctx(1);
        let p = ctx.progress(0);
        p.advance(5).unwrap();
        assert!(out.lines().is_empty());
    }

    #[test]
    fn a_raised_stop_flag_stops_at_the_next_unit() {
        let stop = AtomicBool::new(false);
        let ctx = Ctx::new(&stop, 3, Box::new(std::io::sink()));
        let p = ctx.progress(100);
        let r = par_map(&ctx, (0..100).collect(), |i, _: u32| {
            if i == 10 {
                stop.store(true, Ordering::Relaxed);
            }
            p.advance(1)
        });
        assert!(matches!(r, Err(KernelError::Stopped)));
    }

    #[test]
    fn par_map_keeps_item_order_whatever_the_thread_count() {
        for threads in [1, 2, 5] {
            let ctx = ctx(threads);
            let r = par_map(&ctx, (0..200u64).collect(), |i, x| Ok(x * 3 + i as u64)).unwrap();
            assert_eq!(r, (0..200u64).map(|x| x * 4).collect::<Vec<_>>());
        }
    }

    #[test]
    fn par_map_returns_the_first_error() {
        let ctx = ctx(3);
        let r = par_map(&ctx, (0..50u32).collect(), |_, x| {
            if x == 7 {
                Err(KernelError::SelfCheck("seven".into()))
            } else {
                Ok(x)
            }
        });
        assert!(matches!(r, Err(KernelError::SelfCheck(m)) if m == "seven"));
    }

    const PINNED_ONE: u64 = 0xd6c7_693b_2850_cfb8;

    #[test]
    fn checksum_is_stable_and_order_sensitive() {
        let mut a = Checksum::default();
        a.write_bytes(b"ab");
        a.write_bytes(b"c");
        let mut b = Checksum::default();
        b.write_bytes(b"a");
        b.write_bytes(b"bc");
        assert_ne!(a.finish(), b.finish());
        let mut c = Checksum::default();
        c.write_u64(1);
        // Pinned: a change here changes every kernel's published checksum.
        assert_eq!(c.finish(), PINNED_ONE);
    }

    #[test]
    fn pieces_cover_the_range_exactly() {
        for (n, target, min) in [(10, 3, 1), (1000, 7, 100), (5, 100, 100), (0, 4, 4)] {
            let pieces = piece_count(n, target, min);
            let mut next = 0;
            for i in 0..pieces {
                let r = piece_range(n, pieces, i);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, n);
            if n >= min {
                assert!(pieces >= min.min(n));
            }
        }
    }

    #[test]
    fn groups_are_whole_chunks_covering_every_item() {
        for (items, chunk, max) in [(10_000, 64, 7), (5, 64, 7), (640, 64, 64), (0, 8, 4)] {
            let groups = group_count(items, chunk, max);
            let mut v: Vec<u32> = (0..items as u32 * 2).collect();
            let mut next = 0;
            for (g, (first, slice)) in split_groups(&mut v, 2, chunk, groups)
                .into_iter()
                .enumerate()
            {
                let r = group_items(items, chunk, groups, g);
                assert_eq!((first, slice.len()), (r.start, r.len() * 2));
                assert_eq!(r.start, next);
                assert!(r.start.is_multiple_of(chunk));
                next = r.end;
            }
            assert_eq!(next, items);
        }
    }

    #[test]
    fn alloc_vec_reports_impossible_sizes() {
        let r = alloc_vec::<u64>("test", usize::MAX / 4);
        assert!(matches!(
            r,
            Err(KernelError::OutOfMemory { what: "test", .. })
        ));
    }
}
