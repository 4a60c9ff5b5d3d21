//! Grids of runs (schedulers x cluster sizes) in parallel, and the normalized tables the
//! papers print: every percentile divided by the baseline scheduler's at the same size.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

use crate::cluster::JobClass;
use crate::sim::report::{PERCENTILES, SimReport, fmt_secs};
use crate::sim::sched::SchedulerKind;

/// Run `f` over `items` on at most `threads` threads; results keep the items' order.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(usize, &T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(i, item);
                    if let Ok(mut o) = out.lock() {
                        o[i] = Some(r);
                    }
                }
            });
        }
    });
    out.into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}

/// The threads to use: the machine's cores.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How each scheduler is normalized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// `X+dice` to `X` when `X` is in the grid; everything else to the first scheduler.
    Auto,
    Named(SchedulerKind),
}

/// The baseline of `kind` among `kinds`.
pub fn baseline_of(kind: SchedulerKind, kinds: &[SchedulerKind], b: &Baseline) -> SchedulerKind {
    match b {
        Baseline::Named(k) => *k,
        Baseline::Auto => {
            let name = kind.name();
            if let Some(base) = name.strip_suffix("+dice")
                && let Some(k) = kinds.iter().find(|k| k.name() == base)
            {
                return *k;
            }
            kinds.first().copied().unwrap_or(kind)
        }
    }
}

/// One row of a normalized table.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NormalizedRow {
    pub nodes: u32,
    pub scheduler: String,
    pub baseline: String,
    pub class: String,
    /// Completion-time percentiles (50, 75, 90, 95, 99) divided by the baseline's.
    pub completion: Vec<Option<f64>>,
    pub utilization: f64,
}

/// Normalized rows for every (nodes, scheduler) in `grid`, short jobs then long jobs.
pub fn normalize(grid: &[(u32, SchedulerKind, SimReport)], b: &Baseline) -> Vec<NormalizedRow> {
    let kinds: Vec<SchedulerKind> = {
        let mut v: Vec<SchedulerKind> = Vec::new();
        for (_, k, _) in grid {
            if !v.contains(k) {
                v.push(*k);
            }
        }
        v
    };
    let mut rows = Vec::new();
    for class in [JobClass::Short, JobClass::Long] {
        for (nodes, kind, r) in grid {
            let base = baseline_of(*kind, &kinds, b);
            if base == *kind {
                continue;
            }
            let Some((_, _, br)) = grid.iter().find(|(n, k, _)| n == nodes && *k == base) else {
                continue;
            };
            let ratio = |p: f64| {
                let a = r.class(class).completion?.get(p);
                let b = br.class(class).completion?.get(p);
                (b > 0.0).then(|| a / b)
            };
            rows.push(NormalizedRow {
                nodes: *nodes,
                scheduler: kind.name(),
                baseline: base.name(),
                class: class.to_string(),
                completion: PERCENTILES.iter().map(|&p| ratio(p)).collect(),
                utilization: r.utilization.mean_effective,
            });
        }
    }
    rows
}

/// Absolute and normalized tables for a finished grid.
pub fn tables(grid: &[(u32, SchedulerKind, SimReport)], rows: &[NormalizedRow]) -> String {
    let mut out = String::new();
    for class in [JobClass::Short, JobClass::Long] {
        let _ = writeln!(out, "{class} jobs: completion time, seconds");
        let _ = writeln!(
            out,
            "  {:>6}  {:<20} {:>9} {:>9} {:>9} {:>9} {:>9}  {:>6}",
            "nodes", "scheduler", "p50", "p75", "p90", "p95", "p99", "util"
        );
        for (nodes, kind, r) in grid {
            let cells: String = match r.class(class).completion {
                Some(p) => PERCENTILES
                    .iter()
                    .map(|&q| format!(" {:>9}", fmt_secs(p.get(q))))
                    .collect(),
                None => format!(" {:>9}", "-").repeat(5),
            };
            let _ = writeln!(
                out,
                "  {nodes:>6}  {:<20}{cells}  {:>5.1}%",
                kind.name(),
                100.0 * r.utilization.mean_effective
            );
        }
        let _ = writeln!(out);
        let normalized: Vec<&NormalizedRow> = rows
            .iter()
            .filter(|r| r.class == class.to_string())
            .collect();
        if normalized.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "{class} jobs: completion time normalized to the baseline (lower is better)"
        );
        let _ = writeln!(
            out,
            "  {:>6}  {:<20} {:<12} {:>6} {:>6} {:>6} {:>6} {:>6}",
            "nodes", "scheduler", "baseline", "p50", "p75", "p90", "p95", "p99"
        );
        for r in normalized {
            let cells: String = r
                .completion
                .iter()
                .map(|v| match v {
                    Some(x) => format!(" {x:>6.3}"),
                    None => format!(" {:>6}", "-"),
                })
                .collect();
            let _ = writeln!(
                out,
                "  {:>6}  {:<20} {:<12}{cells}",
                r.nodes, r.scheduler, r.baseline
            );
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::report::{ClassStats, Percentiles};

    fn report(p50: f64) -> SimReport {
        let p = Percentiles {
            p50,
            p75: p50 * 2.0,
            p90: p50 * 3.0,
            p95: p50 * 4.0,
            p99: p50 * 5.0,
        };
        SimReport {
            short: ClassStats {
                completion: Some(p),
                ..ClassStats::default()
            },
            long: ClassStats {
                completion: Some(p),
                ..ClassStats::default()
            },
            ..SimReport::default()
        }
    }

    #[test]
    fn dice_is_normalized_to_its_base_scheduler() {
        let kinds = [SchedulerKind::Hawk, SchedulerKind::Eagle];
        assert_eq!(
            baseline_of(SchedulerKind::Eagle, &kinds, &Baseline::Auto),
            SchedulerKind::Hawk
        );
        let grid = vec![
            (3000, SchedulerKind::Hawk, report(10.0)),
            (3000, SchedulerKind::Eagle, report(5.0)),
            (4000, SchedulerKind::Hawk, report(4.0)),
            (4000, SchedulerKind::Eagle, report(4.0)),
        ];
        let rows = normalize(&grid, &Baseline::Auto);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].completion[0], Some(0.5));
        assert_eq!(rows[1].completion[4], Some(1.0));
        let t = tables(&grid, &rows);
        assert!(t.contains("normalized to the baseline"), "{t}");
        assert!(t.contains(" 0.500"), "{t}");
    }

    #[test]
    fn parallel_keeps_order() {
        let items: Vec<u32> = (0..20).collect();
        let out = parallel(&items, 3, |_, &x| x * 2);
        assert_eq!(out, (0..20).map(|x| x * 2).collect::<Vec<_>>());
    }
}
