//! Trace-driven discrete-event simulator running the same policies at datacenter scale.
//!
//! `preemptor sim` answers "what would this policy do on my workload, on a cluster of this
//! size?" and checks our policies against the seed papers' results. Pieces:
//! - [`workload`] and [`trace`]: the jobs to replay (Eagle/Hawk `.tr`, YARN SLS JSON,
//!   BIG-C-shaped synthetic mixes, M/M/c);
//! - `engine`: events, containers running at the speed their limits allow, and the
//!   preemption [`costs`] model;
//! - [`sched`]: the schedulers (YARN's FIFO and capacity scheduler with every policy, and
//!   the papers' placement schedulers);
//! - [`report`], [`plot`] and [`compare`]: what comes out.
//!
//! Entry point: [`simulate`].

mod bridge;
pub mod cli;
pub mod compare;
pub mod costs;
mod engine;
pub mod error;
pub mod plot;
mod queue;
pub mod report;
pub mod sched;
pub mod trace;
pub mod workload;

#[cfg(test)]
pub(crate) mod testutil;

use std::time::Instant;

pub use engine::{EngineConfig, EngineError, PreemptionCounts};
pub use error::SimError;
pub use report::SimReport;
pub use sched::{PolicyTicks, QueueSpec, SchedParams, SchedulerKind};

use crate::cluster::PolicyKind;
use crate::sim::bridge::PolicyBridge;
use crate::sim::engine::{Core, Scheduler};
use crate::sim::workload::Workload;

/// Everything a run needs besides the workload and the scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSetup {
    pub engine: EngineConfig,
    pub params: SchedParams,
}

/// Run `kind` over `wl`. `progress` is called with the number of finished jobs now and
/// then (cheaply: every 65,536 events).
pub fn simulate(
    wl: &Workload,
    setup: &SimSetup,
    kind: SchedulerKind,
    progress: &dyn Fn(u64),
) -> Result<SimReport, SimError> {
    let started = Instant::now();
    let cfg = &setup.engine;
    let p = &setup.params;
    let name = kind.name();
    match kind {
        SchedulerKind::Fifo | SchedulerKind::Reserve | SchedulerKind::Capacity(_) => {
            let policy = match kind {
                SchedulerKind::Capacity(policy) if policy != PolicyKind::None => Some((
                    PolicyBridge::new(policy, p.policy_settings(wl, cfg.node_capacity)),
                    p.monitoring_interval(),
                )),
                _ => None,
            };
            let mut core = Core::new(wl, cfg)?;
            let mut s = sched::central::Central::new(&core, p.leaves_for(kind), policy);
            s.set_policy_ticks(&core, p.policy_ticks);
            drive(&mut core, &mut s, name, progress, started)
        }
        SchedulerKind::Sparrow
        | SchedulerKind::Hawk
        | SchedulerKind::Eagle
        | SchedulerKind::HawkDice
        | SchedulerKind::EagleDice => {
            let mut core = Core::new(wl, cfg)?;
            let pc = p.probe_config(kind, wl, cfg.nodes);
            let mut s = sched::probe::ProbeSched::new(&core, pc);
            drive(&mut core, &mut s, name, progress, started)
        }
        SchedulerKind::Pigeon => {
            let mut core = Core::new(wl, cfg)?;
            let mut s = sched::pigeon::Pigeon::new(&core, p.pigeon_config(wl));
            drive(&mut core, &mut s, name, progress, started)
        }
        SchedulerKind::Tiresias => {
            let mut core = Core::new(wl, cfg)?;
            let mut s = sched::tiresias::Tiresias::new(&core, p.tiresias_config());
            drive(&mut core, &mut s, name, progress, started)
        }
        SchedulerKind::Kairos => {
            let mut core = Core::new(wl, cfg)?;
            let kc = p.kairos_config(wl, cfg.node_capacity);
            let mut s = sched::kairos::Kairos::new(&core, kc);
            drive(&mut core, &mut s, name, progress, started)
        }
    }
}

fn drive<S: Scheduler>(
    core: &mut Core<'_, S::Msg>,
    s: &mut S,
    name: String,
    progress: &dyn Fn(u64),
    started: Instant,
) -> Result<SimReport, SimError> {
    engine::run(core, s, progress)?;
    let wall = started.elapsed().as_secs_f64();
    Ok(report::build(core, name, s.counters(), wall))
}
