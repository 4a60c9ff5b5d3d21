//! The simulator against the seed papers' results on the bundled traces: each test
//! asserts the direction and rough size of a published effect and prints the figures.

use std::path::PathBuf;

use preemptor::cluster::JobClass;
use preemptor::sim::compare::{default_threads, parallel};
use preemptor::sim::trace::{self, TraceOptions};
use preemptor::sim::workload::{SLOT, Workload};
use preemptor::sim::{EngineConfig, SchedParams, SchedulerKind, SimReport, SimSetup, simulate};

pub fn bundled(name: &str) -> PathBuf {
    trace::bundled_traces_dir().join(name)
}

pub fn yahoo(n: u32) -> Workload {
    trace::load(
        &bundled(&format!("yahoo_sub{n}.tr")),
        &TraceOptions::default(),
    )
    .unwrap()
}

pub fn slot_setup(nodes: u32, params: SchedParams) -> SimSetup {
    SimSetup {
        engine: EngineConfig::new(nodes, SLOT),
        params,
    }
}

pub fn p(r: &SimReport, class: JobClass, q: f64) -> f64 {
    r.class(class).completion.expect("finished jobs").get(q)
}

/// Dice's Table 1 (Yahoo, Hawk, 4,000 nodes): growing the static short partition from 2%
/// to 8% lowers short jobs' P50 (327.7 s -> 191.2 -> 157.0 -> 138.2 s, to 42%) and
/// raises long jobs' (3145 s -> 4654 s, +48%).
#[test]
fn a_larger_static_short_partition_lowers_hawk_short_p50() {
    let cases: Vec<(u32, f64)> = [1, 2]
        .into_iter()
        .flat_map(|t| [0.02, 0.04, 0.06, 0.08].map(move |s| (t, s)))
        .collect();
    let traces = [yahoo(1), yahoo(2)];
    let reports = parallel(&cases, default_threads(), |_, &(t, share)| {
        let params = SchedParams {
            short_partition: Some(share),
            ..SchedParams::default()
        };
        let wl = &traces[t as usize - 1];
        simulate(wl, &slot_setup(4000, params), SchedulerKind::Hawk, &|_| {}).unwrap()
    });
    for (t, rs) in [1, 2].into_iter().zip(reports.chunks(4)) {
        let short: Vec<f64> = rs.iter().map(|r| p(r, JobClass::Short, 50.0)).collect();
        let long: Vec<f64> = rs.iter().map(|r| p(r, JobClass::Long, 50.0)).collect();
        eprintln!(
            "yahoo_sub{t}, hawk, 4000 nodes, short partition 2/4/6/8%: short P50 {short:.1?} s \
             (8%/2% = {:.2}; paper 0.42), long P50 {long:.0?} s (8%/2% = {:.2}; paper 1.48)",
            short[3] / short[0],
            long[3] / long[0]
        );
        assert!(
            short.windows(2).all(|w| w[1] < w[0]),
            "short P50 must fall as the partition grows: {short:?}"
        );
        assert!(
            short[3] < 0.7 * short[0],
            "8% should cut short P50 by more than 30%: {short:?}"
        );
        assert!(long[3] > long[0], "long jobs pay for it: {long:?}");
    }
}

fn run_all(cases: &[(u32, u32, SchedulerKind)], params: &SchedParams) -> Vec<SimReport> {
    let traces = [yahoo(1), yahoo(2)];
    parallel(cases, default_threads(), |_, &(t, nodes, kind)| {
        let wl = &traces[t as usize - 1];
        simulate(wl, &slot_setup(nodes, params.clone()), kind, &|_| {}).unwrap()
    })
}

/// Kairos (thesis ch. 4): node LAS with N + Q admission beats FIFO at the median job
/// completion time (the thesis' YARN runs: 241 s vs 808 s), mostly through short jobs,
/// at the price of the longest jobs' tail.
#[test]
fn kairos_beats_fifo_at_p50() {
    let cases: Vec<(u32, u32, SchedulerKind)> = [1, 2]
        .into_iter()
        .flat_map(|t| [SchedulerKind::Fifo, SchedulerKind::Kairos].map(move |k| (t, 4000, k)))
        .collect();
    let r = run_all(&cases, &SchedParams::default());
    for (t, pair) in [1, 2].into_iter().zip(r.chunks(2)) {
        let (fifo, kairos) = (&pair[0], &pair[1]);
        let all_p50 = |r: &SimReport| {
            let mut v: Vec<f64> = [JobClass::Short, JobClass::Long]
                .iter()
                .flat_map(|&c| r.class(c).completion_samples.iter().copied())
                .collect();
            v.sort_by(f64::total_cmp);
            v[v.len().div_ceil(2) - 1]
        };
        eprintln!(
            "yahoo_sub{t}, 4000 nodes, p50 fifo vs kairos: all jobs {:.0} vs {:.0} s, short \
             {:.1} vs {:.1} s, long {:.0} vs {:.0} s; long p99 {:.0} vs {:.0} s; {} LAS suspensions",
            all_p50(fifo),
            all_p50(kairos),
            p(fifo, JobClass::Short, 50.0),
            p(kairos, JobClass::Short, 50.0),
            p(fifo, JobClass::Long, 50.0),
            p(kairos, JobClass::Long, 50.0),
            p(fifo, JobClass::Long, 99.0),
            p(kairos, JobClass::Long, 99.0),
            kairos.preemptions.suspended
        );
        assert!(all_p50(kairos) < all_p50(fifo));
        assert!(p(kairos, JobClass::Short, 50.0) < 0.5 * p(fifo, JobClass::Short, 50.0));
        assert!(kairos.preemptions.suspended > 0 && kairos.failed_jobs() == 0);
    }
}

/// Dice (ICPP'19, Yahoo): layered on Hawk and Eagle it cuts short jobs' P90 under heavy
/// load (3,000 nodes: 74.4% and 74.9% better), less as the cluster grows, while long
/// jobs' P50 grows little (3,000 nodes: +14.3% Hawk, +8.0% Eagle). Run with the Dice
/// paper's MaxTaskWaitingTime of 1000 s and its other defaults (linear sizing up to
/// MinShort + 8%, square preemption model, multiplier 1, 100 s suspensions, at most 2 per
/// task, suspend 3 s / resume 10 s).
#[test]
fn dice_improves_short_p90_over_hawk_and_eagle_under_heavy_load() {
    let kinds = [
        SchedulerKind::Hawk,
        SchedulerKind::HawkDice,
        SchedulerKind::Eagle,
        SchedulerKind::EagleDice,
    ];
    let cases: Vec<(u32, u32, SchedulerKind)> = [1, 2]
        .into_iter()
        .flat_map(|t| [3000, 4000].map(move |n| (t, n)))
        .flat_map(|(t, n)| kinds.map(move |k| (t, n, k)))
        .collect();
    let mut params = SchedParams::default();
    params.policy.dice.max_task_waiting_ms = 1_000_000;
    let r = run_all(&cases, &params);
    for (i, group) in r.chunks(4).enumerate() {
        let (t, nodes, _) = cases[i * 4];
        for (base, dice) in [(&group[0], &group[1]), (&group[2], &group[3])] {
            let short_p90 = p(dice, JobClass::Short, 90.0) / p(base, JobClass::Short, 90.0);
            let long_p50 = p(dice, JobClass::Long, 50.0) / p(base, JobClass::Long, 50.0);
            eprintln!(
                "yahoo_sub{t}, {nodes} nodes, {} / {}: short P90 x{short_p90:.3}, long P50 \
                 x{long_p50:.3} ({} suspensions)",
                dice.scheduler,
                base.scheduler,
                dice.counters.get("dice suspensions").copied().unwrap_or(0)
            );
            assert_eq!(dice.failed_jobs(), 0);
            if nodes == 3000 {
                assert!(
                    short_p90 < 0.75,
                    "{}: short P90 x{short_p90}",
                    dice.scheduler
                );
            } else {
                assert!(
                    short_p90 < 1.02,
                    "{}: short P90 x{short_p90}",
                    dice.scheduler
                );
            }
            // Eagle keeps long jobs within 15% everywhere; Hawk does at 4,000 nodes and
            // pays 15-21% at 3,000 (the paper: 14.3%), see docs/simulator.md.
            let bound = if dice.scheduler == "hawk+dice" && nodes == 3000 {
                1.25
            } else {
                1.15
            };
            assert!(
                long_p50 <= bound,
                "{}: long P50 x{long_p50}",
                dice.scheduler
            );
        }
    }
}

/// BIG-C (ATC'17): on a burst of TPC-H queries over a cluster busy with HiBench jobs,
/// graceful preemption gets short jobs through faster than immediate preemption (it
/// reclaims 4 GB steps instead of whole 16-32 GB executors), fails no long job where
/// kill does, and costs long jobs little against FIFO.
#[test]
fn graceful_beats_immediate_without_failing_jobs_on_a_bigc_burst() {
    use preemptor::sim::trace::synth::{SynthSpec, generate};
    let kinds = [
        SchedulerKind::Fifo,
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Kill),
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Immediate),
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Graceful),
    ];
    for pattern in ["low", "high", "multi"] {
        let spec: SynthSpec = format!("bigc:pattern={pattern}").parse().unwrap();
        let wl = generate(&spec, 1);
        let cluster = wl.suggested_cluster.unwrap();
        let setup = SimSetup {
            engine: EngineConfig::new(cluster.nodes, cluster.node_capacity),
            params: SchedParams::default(),
        };
        let r: Vec<SimReport> = kinds
            .iter()
            .map(|&k| simulate(&wl, &setup, k, &|_| {}).unwrap())
            .collect();
        let (fifo, kill, ip, gp) = (&r[0], &r[1], &r[2], &r[3]);
        eprintln!(
            "bigc {pattern}: short p95 fifo {:.0} kill {:.0} immediate {:.0} graceful {:.0} s; \
             long p90 fifo {:.0} kill {:.0} immediate {:.0} graceful {:.0} s (graceful x{:.2} \
             of fifo); failed long jobs kill {} immediate {} graceful {}",
            p(fifo, JobClass::Short, 95.0),
            p(kill, JobClass::Short, 95.0),
            p(ip, JobClass::Short, 95.0),
            p(gp, JobClass::Short, 95.0),
            p(fifo, JobClass::Long, 90.0),
            p(kill, JobClass::Long, 90.0),
            p(ip, JobClass::Long, 90.0),
            p(gp, JobClass::Long, 90.0),
            p(gp, JobClass::Long, 90.0) / p(fifo, JobClass::Long, 90.0),
            kill.failed_jobs(),
            ip.failed_jobs(),
            gp.failed_jobs()
        );
        assert!(p(gp, JobClass::Short, 95.0) < p(ip, JobClass::Short, 95.0));
        assert!(p(gp, JobClass::Short, 95.0) < 0.25 * p(fifo, JobClass::Short, 95.0));
        assert!(p(gp, JobClass::Long, 90.0) < p(ip, JobClass::Long, 90.0));
        assert!(p(gp, JobClass::Long, 90.0) < 1.2 * p(fifo, JobClass::Long, 90.0));
        assert_eq!(gp.failed_jobs(), 0);
        assert_eq!(ip.failed_jobs(), 0);
        assert!(gp.preemptions.shrunk > 0);
    }
}
