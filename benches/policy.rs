//! One decision tick per policy on 1,000 / 10,000 / 50,000 nodes with 20 containers per
//! node and 50 queues, measured side by side with two baselines on the same view:
//! `ClusterView::new` (building the view the tick decides on) and a bare scan that
//! sums every container's allocation per queue (the least any policy looking at every
//! container must do). Prints a table and the 10k -> 50k growth ratio per policy.
//!
//! Each tick is timed twice: warm (caches as the previous run left them) and cold
//! (a buffer of twice the last-level cache sysfs reports, at least 128 MB, is written
//! first). Warm, the per-node data a 10k tick walks (about 1 MB) stays in a 2 MB L2
//! and the 50k tick's does not, so warm timings grow faster than the work does; the
//! growth ratio uses cold timings, which put both sizes under the same conditions.
//! Medians and minimums are printed: on a shared machine the minimum is the better
//! estimate of the cost itself. The growth ratio is measured apart from the table,
//! with cold runs of both sizes interleaved (the same full tick on the same clusters),
//! so that load from other work on the machine falls on both alike, in several rounds
//! whose median is reported.
//!
//! Run with `cargo bench --bench policy`; `-- --quick` for 1k and 10k only,
//! `-- --nodes N --policy P` to time one size and one policy (e.g. under `perf`),
//! `-- --full-admission` to give every node Q = 4 suspended containers beyond its
//! capacity (LAS's busy steady state). `-- --nodes N --policy P --ticks K` only builds
//! the cluster and runs K ticks untimed, for instruction counts, e.g.
//! `valgrind --tool=callgrind --toggle-collect='*counted_tick*'` (only the ticks counted,
//! not building the cluster, cloning the state or dropping the plan).

use std::hint::black_box;
use std::time::{Duration, Instant};

use preemptor::cluster::builder::ClusterBuilder;
use preemptor::cluster::{ClusterView, ContainerState, JobClass, Millis, PolicyKind};
use preemptor::config::settings::PolicySettings;
use preemptor::policy::{Plan, PolicyState, apply, decide};
use preemptor::resources::{Limits, Resource};

const CONTAINERS_PER_NODE: usize = 20;
const LONG_QUEUES: usize = 40;
const SHORT_QUEUES: usize = 10;
const APPS_PER_LONG_QUEUE: usize = 4;
const T0: Millis = 10_000_000;

/// 40 long queues whose jobs fill every node with 20 containers, 1% of them already
/// suspended; 10 short queues with 3% of the cluster pending (more than the free room,
/// so every share-based policy has to preempt); 2% of the nodes running one short
/// container beyond their capacity (LAS's N+Q admission).
///
/// With `full_admission`, every node also holds Q = 4 suspended containers beyond its
/// capacity, as under LAS's N+Q admission in a busy cluster.
fn cluster(nodes: usize, full_admission: bool) -> ClusterView {
    let node = Resource::new(20 * 4096, 20);
    let mut b = ClusterBuilder::new().nodes(nodes, node);
    for q in 0..LONG_QUEUES {
        b = b.queue(&format!("root.long{q:02}"), 2.0, 100.0, JobClass::Long);
    }
    for q in 0..SHORT_QUEUES {
        b = b.queue(&format!("root.short{q:02}"), 2.0, 100.0, JobClass::Short);
    }
    let total = nodes * CONTAINERS_PER_NODE;
    let apps = LONG_QUEUES * APPS_PER_LONG_QUEUE;
    let mut placed = 0;
    for a in 0..apps {
        let n = (total - placed) / (apps - a);
        placed += n;
        let kind = if a % 2 == 0 { "MAPREDUCE" } else { "SPARK" };
        b = b
            .app(&format!("root.long{:02}", a / APPS_PER_LONG_QUEUE), kind)
            .submitted(T0 - 3_600_000 + a as u64 * 1000)
            .progress(0.05 + (a % 19) as f64 * 0.05)
            .containers(n, Resource::new(4096, 1));
    }
    let pending = (total * 3 / 100) as u32;
    for q in 0..SHORT_QUEUES {
        b = b
            .app(&format!("root.short{q:02}"), "TEZ")
            .submitted(T0 - 20_000)
            .pending(pending / SHORT_QUEUES as u32, Resource::new(4096, 1));
        for k in (q..nodes / 50).step_by(SHORT_QUEUES) {
            b = b.containers_on(k * 50, 1, Resource::new(4096, 1));
        }
    }
    if full_admission {
        b = b.app("root.long00", "SPARK").submitted(T0 - 600_000);
        for n in 0..nodes {
            for _ in 0..4 {
                b = b
                    .containers_on(n, 1, Resource::new(4096, 1))
                    .suspended(Limits::MIN_FOOTPRINT);
            }
        }
    }
    let view = b.build().expect("benchmark cluster");
    let mut containers = view.containers().to_vec();
    for (i, c) in containers.iter_mut().enumerate() {
        c.attained_service_ms = (i as u64 * 7919) % 3_600_000;
        if i % 100 == 0 && view.app(c.app).class == JobClass::Long {
            c.state = ContainerState::Suspended;
            c.current = Limits::MIN_FOOTPRINT;
        }
    }
    ClusterView::new(
        view.queues().to_vec(),
        view.apps().to_vec(),
        view.nodes().to_vec(),
        containers,
    )
    .expect("benchmark cluster")
}

fn settings(kind: PolicyKind) -> PolicySettings {
    PolicySettings {
        kind,
        ..PolicySettings::default()
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The bare scan baseline: allocation per queue over every live container.
fn scan(view: &ClusterView) -> u64 {
    let mut per_queue = vec![0u64; view.queues().len()];
    for c in view.containers().iter().filter(|c| c.is_live()) {
        per_queue[view.app(c.app).queue.get()] += c.allocated.memory_mb;
    }
    per_queue.iter().sum()
}

struct Row {
    policy: String,
    tick: Duration,
    best: Duration,
    cold: Duration,
    actions: usize,
}

/// The largest CPU cache's size as sysfs reports it, if it does.
fn last_level_cache() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| cache_size(s.trim()))
        .max()
}

/// A sysfs cache size such as "2048K".
fn cache_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.strip_suffix('K') {
        Some(d) => (d, 1 << 10),
        None => match s.strip_suffix('M') {
            Some(d) => (d, 1 << 20),
            None => (s, 1),
        },
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// Push the view out of the caches: write a buffer larger than the last-level cache.
fn evict(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    black_box(&buf[..]);
}

/// The view, state and time of the measured tick: one tick decided and acted on
/// first, so the measured tick starts from steady node capacities and remembered
/// suspensions, as in a running controller; then the next monitoring interval, for
/// Dice the tick that closes its window (its most expensive one).
fn steady(view: &ClusterView, kind: PolicyKind) -> (ClusterView, PolicyState, Millis) {
    let s = settings(kind);
    let mut state = PolicyState::new(s.clone());
    let first = decide(view, &mut state, T0);
    let steady = apply(view, &first).expect("plan applies");
    let now = if kind == PolicyKind::Dice {
        T0 + s.dice.window_ms
    } else {
        T0 + s.monitoring_interval_ms
    };
    (steady, state, now)
}

/// One decide, never inlined, so that a profiler can count it alone (see `--ticks`).
#[inline(never)]
fn counted_tick(view: &ClusterView, state: &mut PolicyState, now: Millis) -> Plan {
    decide(view, state, now)
}

/// One timed decide on a clone of `state` (cloned outside the timing).
fn time_tick(view: &ClusterView, state: &PolicyState, now: Millis) -> (Duration, usize) {
    let mut st = state.clone();
    let t = Instant::now();
    let plan = decide(black_box(view), &mut st, now);
    let d = t.elapsed();
    (d, plan.actions.len())
}

fn measure(
    view: &ClusterView,
    iters: usize,
    only: Option<PolicyKind>,
    buf: &mut [u8],
) -> (Duration, Duration, Duration, Vec<Row>) {
    let build = median(
        (0..iters)
            .map(|_| {
                let parts = (
                    view.queues().to_vec(),
                    view.apps().to_vec(),
                    view.nodes().to_vec(),
                    view.containers().to_vec(),
                );
                let t = Instant::now();
                let v = ClusterView::new(parts.0, parts.1, parts.2, parts.3);
                let d = t.elapsed();
                black_box(v.is_ok());
                d
            })
            .collect(),
    );
    let scan_once = || {
        let t = Instant::now();
        black_box(scan(black_box(view)));
        t.elapsed()
    };
    let base = median((0..iters).map(|_| scan_once()).collect());
    let base_cold = (0..iters)
        .map(|_| {
            evict(buf);
            scan_once()
        })
        .min()
        .unwrap_or_default();
    let mut rows = Vec::new();
    for kind in PolicyKind::ALL
        .into_iter()
        .filter(|k| only.is_none_or(|o| o == *k))
    {
        let (steady, state, now) = steady(view, kind);
        let mut actions = 0;
        let times: Vec<Duration> = (0..iters)
            .map(|_| {
                let (d, n) = time_tick(&steady, &state, now);
                actions = n;
                d
            })
            .collect();
        let cold = (0..iters)
            .map(|_| {
                evict(buf);
                time_tick(&steady, &state, now).0
            })
            .min()
            .unwrap_or_default();
        rows.push(Row {
            policy: kind.to_string(),
            best: times.iter().copied().min().unwrap_or_default(),
            tick: median(times),
            cold,
            actions,
        });
    }
    (build, base, base_cold, rows)
}

/// Cold runs per size in each round of the growth comparison, interleaved.
const PAIRS: usize = 15;
/// Rounds of the growth comparison. A slow spell of the host (other VMs on the same
/// cores and memory) lasts seconds and would bias a single round; the median of rounds
/// spread over the run does not follow one spell.
const ROUNDS: usize = 5;

/// Cold timings of `run` on both sizes, interleaved so that both see the machine in
/// the same states (each run after the same cache eviction; which size goes first
/// alternates): the ratio `large / small` of the minimums (a run disturbed by other
/// work on the machine only ever gets slower).
fn paired(
    small: &ClusterView,
    large: &ClusterView,
    buf: &mut [u8],
    run: impl Fn(&ClusterView) -> Duration,
) -> f64 {
    let mut cold = |v: &ClusterView| {
        evict(buf);
        ms(run(v))
    };
    let (mut s_min, mut l_min) = (f64::INFINITY, f64::INFINITY);
    for i in 0..PAIRS {
        let (s, l) = if i % 2 == 0 {
            let s = cold(small);
            (s, cold(large))
        } else {
            let l = cold(large);
            (cold(small), l)
        };
        s_min = s_min.min(s);
        l_min = l_min.min(l);
    }
    l_min / s_min
}

/// The value after `--name`, parsed.
fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let full_admission = std::env::args().any(|a| a == "--full-admission");
    let only: Option<PolicyKind> = arg("--policy");
    let one: Option<usize> = arg("--nodes");
    let all: Vec<(usize, usize)> = if quick {
        vec![(1_000, 30), (10_000, 15)]
    } else {
        vec![(1_000, 30), (10_000, 15), (50_000, 7)]
    };
    if let (Some(nodes), Some(kind), Some(ticks)) = (one, only, arg::<usize>("--ticks")) {
        let view = cluster(nodes, full_admission);
        let (steady, state, now) = steady(&view, kind);
        let mut states = vec![state; ticks];
        let actions: Vec<usize> = states
            .iter_mut()
            .map(|st| counted_tick(&steady, st, now).actions.len())
            .collect();
        println!("{nodes} nodes, {kind}: {ticks} ticks, actions {actions:?}");
        return;
    }
    let sizes: Vec<(usize, usize)> = match one {
        Some(n) => vec![(n, 15)],
        None => all,
    };
    println!(
        "policy tick, one core, median of N runs; ratios against the baselines measured in the same run"
    );
    println!(
        "{:>7} {:>10} {:>11} | {:>10} {:>10} {:>10} {:>8} {:>5} {:>8} {:>11}",
        "nodes",
        "containers",
        "policy",
        "warm med",
        "warm min",
        "cold min",
        "actions",
        "runs",
        "/ scan",
        "/ view::new"
    );
    let mut by_size = Vec::new();
    // Twice the last-level cache, so that a cold run finds none of the view cached
    // (virtual machines may report a host cache of hundreds of MB: a fixed size that
    // leaves the small view cached and not the large one skews the growth ratio).
    let llc = last_level_cache();
    let evict_bytes = llc.map_or(0, |c| c.saturating_mul(2)).max(128 << 20);
    eprintln!(
        "cold runs: a {} MB buffer is written first (last-level cache: {})",
        evict_bytes >> 20,
        llc.map_or("not reported".to_string(), |c| format!("{} MB", c >> 20))
    );
    let mut buf = vec![0u8; evict_bytes];
    for &(nodes, iters) in &sizes {
        let t = Instant::now();
        let view = cluster(nodes, full_admission);
        eprintln!("built {nodes} nodes in {:.1} s", t.elapsed().as_secs_f64());
        let (build, base, base_cold, rows) = measure(&view, iters, only, &mut buf);
        for r in &rows {
            println!(
                "{:>7} {:>10} {:>11} | {:>10.3} {:>10.3} {:>10.3} {:>8} {:>5} {:>8.2} {:>11.4}",
                nodes,
                view.containers().len(),
                r.policy,
                ms(r.tick),
                ms(r.best),
                ms(r.cold),
                r.actions,
                iters,
                ms(r.cold) / ms(base_cold),
                ms(r.tick) / ms(build)
            );
        }
        println!(
            "{:>7} {:>10} {:>11} | {:>10.3} {:>10} {:>10.3} {:>8} {:>5}",
            nodes,
            view.containers().len(),
            "(scan)",
            ms(base),
            "",
            ms(base_cold),
            "",
            iters
        );
        println!(
            "{:>7} {:>10} {:>11} | {:>10.3} {:>10} {:>10} {:>8} {:>5}",
            nodes,
            view.containers().len(),
            "(view::new)",
            ms(build),
            "",
            "",
            "",
            iters
        );
        by_size.push((nodes, build, base_cold, rows, view));
    }
    if let (Some(small), Some(large)) = (
        by_size.iter().find(|s| s.0 == 10_000),
        by_size.iter().find(|s| s.0 == 50_000),
    ) {
        println!(
            "\ngrowth 10,000 -> 50,000 nodes, cold: ratio of the minimums of {PAIRS} interleaved runs per size, \
             in {ROUNDS} rounds spread over the measurement (fresh copies of the views each round): \
             median of the rounds [lowest, highest]; linear would be 5.0, target <= 5.5; then warm min, warm median"
        );
        // Each policy with its rows at both sizes, so that a row that names no policy
        // cannot shift the pairing.
        let rows: Vec<(PolicyKind, &Row, &Row)> = small
            .3
            .iter()
            .zip(&large.3)
            .filter_map(|(a, b)| Some((a.policy.parse::<PolicyKind>().ok()?, a, b)))
            .collect();
        let mut ratios = vec![Vec::new(); rows.len() + 1];
        for round in 0..ROUNDS {
            eprintln!("growth round {}/{ROUNDS}", round + 1);
            for (i, &(kind, _, _)) in rows.iter().enumerate() {
                let (vs, ss, ns) = steady(&small.4, kind);
                let (vl, sl, nl) = steady(&large.4, kind);
                let tick_of = |v: &ClusterView| {
                    if std::ptr::eq(v, &vs) {
                        time_tick(&vs, &ss, ns).0
                    } else {
                        time_tick(&vl, &sl, nl).0
                    }
                };
                ratios[i].push(paired(&vs, &vl, &mut buf, tick_of));
            }
            let scan_of = |v: &ClusterView| {
                let t = Instant::now();
                black_box(scan(black_box(v)));
                t.elapsed()
            };
            ratios[rows.len()].push(paired(&small.4, &large.4, &mut buf, scan_of));
        }
        let summary = |r: &mut Vec<f64>| {
            r.sort_by(f64::total_cmp);
            format!("{:.2} [{:.2}, {:.2}]", r[r.len() / 2], r[0], r[r.len() - 1])
        };
        for (&(kind, a, b), r) in rows.iter().zip(&mut ratios) {
            println!(
                "  {:>11}: {}; warm {:.2}, {:.2}",
                kind.to_string(),
                summary(r),
                ms(b.best) / ms(a.best),
                ms(b.tick) / ms(a.tick)
            );
        }
        if let Some(r) = ratios.last_mut() {
            println!("  {:>11}: {}", "(scan)", summary(r));
        }
        println!(
            "  {:>11}: {:.2} (warm median)",
            "(view::new)",
            ms(large.1) / ms(small.1)
        );
    }
}
