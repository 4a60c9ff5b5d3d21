//! The simulator against the seed papers' results on the bundled traces: each test
//! asserts the direction and rough size of a published effect and prints the figures.

use std::path::PathBuf;

use preemptor::cluster::JobClass;
use preemptor::sim::compare::{default_threads, parallel};
use preemptor::sim::trace::{self, TraceOptions};
use preemptor::sim::workload::{SLOT, Workload, secs};
use preemptor::sim::{EngineConfig, SchedParams, SchedulerKind, SimReport, SimSetup, simulate};

pub fn bundled(name: &str) -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for up in ["../shared/traces", "../../shared/traces"] {
        let p = manifest.join(up).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "bundled trace {name} not found next to {}",
        manifest.display()
    );
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
        engine: EngineConfig {
            nodes,
            node_capacity: SLOT,
            network_delay: secs(0.0005),
            costs: Default::default(),
            max_task_attempts: 4,
            seed: 1,
            sample_every: None,
        },
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
