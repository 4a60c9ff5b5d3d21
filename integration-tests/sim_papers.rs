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

/// Dice (ICPP'19, Yahoo, Figure 10): layered on Hawk and Eagle it cuts short jobs' P90
/// under heavy load (3,000 nodes: Hawk x0.256, Eagle x0.251), less as the cluster grows
/// (4,000 nodes: Hawk x0.617, Eagle x0.660), at a small cost to long jobs (3,000 nodes:
/// P50 +14.3% Hawk, +8.0% Eagle; 4,000 nodes: P90 +8.9% Hawk, +2.4% Eagle). Run with
/// the paper's MaxTaskWaitingTime of 1000 s and its other defaults (linear sizing up to
/// MinShort + 8%, square preemption model, multiplier 1, 100 s suspensions, at most 2
/// per task, suspend 3 s / resume 10 s).
///
/// Asserted: long jobs within the paper's cost + 5 points, for both; Hawk's short P90
/// within 10 points of the paper's at 3,000 nodes and improved at 4,000; Eagle's short
/// P90 improved at 3,000 nodes and no worse at 4,000. Measured, not asserted (see
/// docs/simulator.md): on `yahoo_sub2` at 4,000 nodes Hawk gains x0.88 against the
/// paper's x0.617 (Hawk alone keeps that subset's short P90 at 612 s there), and Eagle
/// gains less than the paper's everywhere.
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
            let hawk = dice.scheduler == "hawk+dice";
            let ratio = |class, q| p(dice, class, q) / p(base, class, q);
            let short_p90 = ratio(JobClass::Short, 90.0);
            // The paper's long-job figure: P50 at 3,000 nodes, P90 at 4,000.
            let (long_q, long_paper, short_paper) = match (nodes, hawk) {
                (3000, true) => (50.0, 1.143, 0.256),
                (3000, false) => (50.0, 1.080, 0.251),
                (_, true) => (90.0, 1.089, 0.617),
                (_, false) => (90.0, 1.024, 0.660),
            };
            let long = ratio(JobClass::Long, long_q);
            eprintln!(
                "yahoo_sub{t}, {nodes} nodes, {} / {}: short P90 x{short_p90:.3} (paper \
                 x{short_paper}), long P50 x{:.3} P90 x{:.3} (paper P{long_q} x{long_paper}) \
                 ({} suspensions)",
                dice.scheduler,
                base.scheduler,
                ratio(JobClass::Long, 50.0),
                ratio(JobClass::Long, 90.0),
                dice.counters.get("dice suspensions").copied().unwrap_or(0)
            );
            assert_eq!(dice.failed_jobs(), 0);
            assert!(
                long <= long_paper + 0.05,
                "{}: long P{long_q} x{long}",
                dice.scheduler
            );
            let short_bound = match (nodes, hawk) {
                (3000, true) => short_paper + 0.10,
                (3000, false) => 0.75,
                (_, true) => 0.95,
                (_, false) => 1.02,
            };
            assert!(
                short_p90 < short_bound,
                "{}: short P90 x{short_p90}",
                dice.scheduler
            );
        }
    }
}

/// Runs `kinds` over `bigc:{spec}` with the costs an agent measured on this machine
/// (traces/costs/agent-measured.json, how it was made is in its `source`).
fn bigc_runs(spec: &str, kinds: &[SchedulerKind]) -> Vec<SimReport> {
    use preemptor::sim::costs::CostModel;
    use preemptor::sim::trace::synth::{SynthSpec, generate};
    let costs = CostModel::load(&bundled("costs/agent-measured.json")).unwrap();
    let spec: SynthSpec = format!("bigc:{spec}").parse().unwrap();
    let wl = generate(&spec, 1);
    let cluster = wl.suggested_cluster.unwrap();
    let setup = SimSetup {
        engine: EngineConfig {
            costs,
            ..EngineConfig::new(cluster.nodes, cluster.node_capacity)
        },
        params: SchedParams::default(),
    };
    parallel(kinds, default_threads(), |_, &k| {
        simulate(&wl, &setup, k, &|_| {}).unwrap()
    })
}

/// BIG-C (ATC'17 §5.2, Figure 5) on its HiBench + TPC-H bursts, Spark-heavy here as
/// HiBench's vcore-seconds are:
/// - short jobs: GP beats IP ("GP had superior performance than IP as it required less
///   resource reclamation time"); under high load reserve's 60% is too small and GP
///   beats it too; under low and multi load reserve was the best;
/// - long jobs: GP's p90 beats IP's (IP "had the worst median and tail performance"),
///   and under high load it is within 10% of FIFO's (the paper: +4% on its Google
///   trace);
/// - kill fails 13%, 15% and 20% of long jobs (low, high, multi), IP and GP none.
///
/// Measured, not asserted (see docs/simulator.md): kill is the fastest for short jobs
/// on these Spark-heavy bursts, as in Figure 5 ("Kill was among the best performing
/// schedulers for all three scenarios"); BIG-C's GP < IP < kill ordering (96, 118,
/// 176 s) is from its Google-trace replay, and its MapReduce runs show it, which
/// [`bigc_kill_storms_on_mapreduce`] asserts. GP's long p90 over FIFO under low and
/// multi load is printed: the paper has +13% and +17% there.
#[test]
fn bigc_bursts_order_graceful_immediate_and_kill_as_the_paper() {
    let kinds = [
        SchedulerKind::Fifo,
        SchedulerKind::Reserve,
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Kill),
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Immediate),
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Graceful),
    ];
    for (pattern, kill_failed_paper) in [("low", 0.13), ("high", 0.15), ("multi", 0.20)] {
        let r = bigc_runs(&format!("pattern={pattern}"), &kinds);
        let (fifo, reserve, kill, ip, gp) = (&r[0], &r[1], &r[2], &r[3], &r[4]);
        let short = |r: &SimReport| p(r, JobClass::Short, 95.0);
        let long = |r: &SimReport| p(r, JobClass::Long, 90.0);
        let failed = |r: &SimReport| r.long.failed as f64 / r.long.jobs as f64;
        eprintln!(
            "bigc {pattern}: short p95 fifo {:.0} reserve {:.0} kill {:.0} immediate {:.0} \
             graceful {:.0} s; long p90 fifo {:.0} reserve {:.0} kill {:.0} immediate {:.0} \
             graceful {:.0} s (graceful x{:.2} of fifo); failed long jobs kill {:.0}% \
             (paper {:.0}%) immediate {} graceful {}",
            short(fifo),
            short(reserve),
            short(kill),
            short(ip),
            short(gp),
            long(fifo),
            long(reserve),
            long(kill),
            long(ip),
            long(gp),
            long(gp) / long(fifo),
            failed(kill) * 100.0,
            kill_failed_paper * 100.0,
            ip.failed_jobs(),
            gp.failed_jobs()
        );
        assert!(
            short(gp) < short(ip),
            "{pattern}: graceful before immediate"
        );
        assert!(short(gp) < 0.25 * short(fifo), "{pattern}: preemption pays");
        if pattern == "high" {
            assert!(
                short(gp) < short(reserve),
                "high: reserve's 60% is too small"
            );
            assert!(
                long(gp) <= 1.10 * long(fifo),
                "high: graceful costs long jobs little"
            );
        } else {
            assert!(short(reserve) < short(gp), "{pattern}: reserve is enough");
        }
        assert!(long(gp) < long(ip), "{pattern}: graceful spares long jobs");
        assert!(
            long(gp) < long(reserve),
            "{pattern}: and beats reserve's 40%"
        );
        // Within 10 points of the paper's share.
        assert!(
            (failed(kill) - kill_failed_paper).abs() <= 0.10,
            "{pattern}: kill fails {:.0}% of long jobs",
            failed(kill) * 100.0
        );
        assert_eq!(gp.failed_jobs() + ip.failed_jobs(), 0);
        assert!(gp.preemptions.shrunk > 0 && ip.preemptions.suspended > 0);
    }
}

/// BIG-C §5.2, Figure 6 (MapReduce long jobs): "kill incurred significant queuing delay
/// to short jobs while both IP and GP performed much better": killed maps are
/// resubmitted at once, placed again and killed again.
#[test]
fn bigc_kill_storms_on_mapreduce() {
    let kinds = [
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Kill),
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Immediate),
        SchedulerKind::Capacity(preemptor::cluster::PolicyKind::Graceful),
    ];
    let r = bigc_runs("pattern=high,long=mapreduce", &kinds);
    let (kill, ip, gp) = (&r[0], &r[1], &r[2]);
    let short = |r: &SimReport| p(r, JobClass::Short, 95.0);
    eprintln!(
        "bigc high, mapreduce: short p95 kill {:.0} immediate {:.0} graceful {:.0} s; \
         kills {}, failed long jobs kill {} immediate {} graceful {}",
        short(kill),
        short(ip),
        short(gp),
        kill.preemptions.killed,
        kill.long.failed,
        ip.failed_jobs(),
        gp.failed_jobs()
    );
    assert!(short(gp) <= short(ip) && 2.0 * short(ip) < short(kill));
    assert!(kill.preemptions.killed > 10 * ip.preemptions.suspended.max(1));
    assert_eq!(gp.failed_jobs() + ip.failed_jobs(), 0);
}
