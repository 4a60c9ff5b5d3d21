//! The engine against queueing theory: an M/M/c workload (Poisson arrivals, exponential
//! task times, one task per job) through one central FIFO queue must match the Erlang-C
//! formulas (Pigeon's Eqs. 1-2) within 2% at loads 0.8 and 0.9 with c = 100.
//!
//! The probability of not queueing converges fast, so the debug-profile test checks it
//! on a few million jobs. The mean wait does not: at load 0.8 it is 0.1% of a task's
//! runtime and comes from rare, long congestion episodes, so one run of 2 million jobs
//! has a standard deviation of about 8% (4% at load 0.9). Checking it to 2% takes about
//! 3 x 10^8 jobs, which only the release profile simulates in reasonable time (a few
//! minutes on two cores, with about 1 GB of memory):
//! `cargo test --release --test integration mmc_mean_wait -- --ignored --nocapture`.

use preemptor::cluster::JobClass;
use preemptor::sim::compare::{default_threads, parallel};
use preemptor::sim::trace::synth::{MmcSpec, SynthSpec, generate};
use preemptor::sim::workload::SLOT;
use preemptor::sim::{EngineConfig, SchedParams, SchedulerKind, SimSetup, simulate};

const SERVERS: u32 = 100;

/// Erlang C: probability that an arrival waits, for `c` servers at offered load `a`
/// (erlangs). Terms are built iteratively so nothing overflows.
fn erlang_c(c: u32, a: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 0.0;
    for k in 0..c {
        sum += term;
        term *= a / (k + 1) as f64;
    }
    // `term` is now a^c / c!.
    let tail = term * c as f64 / (c as f64 - a);
    tail / (sum + tail)
}

/// Pigeon's Eq. 1 (probability of zero queueing) and Eq. 2 (mean queueing time), for
/// tasks of mean runtime 1 s.
fn pigeon_eqs(c: u32, rho: f64) -> (f64, f64) {
    let a = rho * c as f64;
    let wait = erlang_c(c, a);
    (1.0 - wait, wait / (c as f64 - a))
}

/// One run of `jobs` jobs: (probability of no queueing, mean wait in seconds).
fn run(load: f64, jobs: u64, seed: u64) -> (f64, f64) {
    let spec = MmcSpec {
        load,
        servers: SERVERS,
        jobs,
        mean_secs: 1.0,
    };
    let wl = generate(&SynthSpec::Mmc(spec), seed);
    let setup = SimSetup {
        engine: EngineConfig {
            // The formulas know no network.
            network_delay: 0,
            seed,
            ..EngineConfig::new(SERVERS, SLOT)
        },
        params: SchedParams::default(),
    };
    let r = simulate(&wl, &setup, SchedulerKind::Fifo, &|_| {}).unwrap();
    let s = r.class(JobClass::Short);
    assert_eq!(s.finished, jobs as usize);
    (s.zero_queueing.unwrap(), s.mean_queueing.unwrap())
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

#[test]
fn erlang_c_matches_known_values() {
    assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    assert!((erlang_c(1, 0.5) - 0.5).abs() < 1e-12);
    // Erlang C for 100 servers at 80 and 90 erlangs.
    assert!((erlang_c(100, 80.0) - 0.019_65).abs() < 1e-4);
    assert!((erlang_c(100, 90.0) - 0.216_94).abs() < 1e-4);
}

#[test]
fn mmc_zero_queueing_probability_matches_erlang_c() {
    let cases = [(0.8, 1_000_000u64, 11u64), (0.9, 2_000_000, 12)];
    let results = parallel(&cases, default_threads(), |_, &(load, jobs, seed)| {
        run(load, jobs, seed)
    });
    for (&(load, jobs, _), (p0, w)) in cases.iter().zip(results) {
        let (p0_theory, w_theory) = pigeon_eqs(SERVERS, load);
        eprintln!(
            "load {load}, {jobs} jobs: P(no queueing) {p0:.5} vs Erlang C {p0_theory:.5} \
             ({:.2}%); mean wait {w:.6} s vs {w_theory:.6} s ({:.1}%, not checked at this size)",
            100.0 * rel(p0, p0_theory),
            100.0 * rel(w, w_theory)
        );
        assert!(
            rel(p0, p0_theory) < 0.02,
            "load {load}: P0 {p0} vs {p0_theory}"
        );
    }
}

#[test]
#[ignore = "needs the release profile (3 x 10^8 jobs, a few minutes): cargo test --release \
            --test integration mmc_mean_wait -- --ignored"]
fn mmc_mean_wait_matches_erlang_c() {
    // Independent replications of 4 million jobs each, pooled; the spread between them
    // gives the standard error, which must be small enough for a 2% check to mean
    // something.
    const JOBS: u64 = 4_000_000;
    for (load, replications) in [(0.8, 64u64), (0.9, 16)] {
        let seeds: Vec<u64> = (1..=replications).collect();
        let runs = parallel(&seeds, default_threads(), |_, &seed| run(load, JOBS, seed));
        let n = runs.len() as f64;
        let p0 = runs.iter().map(|r| r.0).sum::<f64>() / n;
        let w = runs.iter().map(|r| r.1).sum::<f64>() / n;
        let var = runs.iter().map(|r| (r.1 - w).powi(2)).sum::<f64>() / (n - 1.0);
        let se = (var / n).sqrt();
        let (p0_theory, w_theory) = pigeon_eqs(SERVERS, load);
        eprintln!(
            "load {load}, {replications} x {JOBS} jobs: P(no queueing) {p0:.5} vs {p0_theory:.5} \
             ({:.3}%); mean wait {w:.7} s vs {w_theory:.7} s ({:.2}%, standard error {:.2}%)",
            100.0 * rel(p0, p0_theory),
            100.0 * rel(w, w_theory),
            100.0 * se / w_theory
        );
        assert!(se / w_theory < 0.007, "too few jobs for a 2% check");
        assert!(rel(p0, p0_theory) < 0.02);
        assert!(
            rel(w, w_theory) < 0.02,
            "load {load}: mean wait {w} vs {w_theory}"
        );
    }
}
