//! Kairos' least-attained-service time sharing, as small pure pieces.
//!
//! [`node_step`] is the node scheduler: given one node's LAS containers it suspends and
//! resumes so that what runs fits the node, new arrivals get a core by suspending the
//! container with the most attained service, and every quantum W the least-attained
//! waiting container may take the place of a running one. `decide` calls it for nodes
//! that need it; the simulator calls it directly on arrivals, finishes and timer events
//! (use [`next_expiry`] to schedule the timer). [`admission`] is the N+Q capacity a
//! node advertises and [`place`] the central scheduler's placement hint.

use std::cmp::Ordering;

use super::amount::Amount;
use crate::cluster::{ClusterView, Millis};
use crate::config::settings::LasSettings;
use crate::resources::Resource;

/// One container as the node scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LasTask {
    pub demand: Amount,
    /// CPU time consumed (cgroup cpuacct / cpu.stat), not wall time.
    pub attained_ms: u64,
    pub running: bool,
    /// Running: start of its current quantum (its start, its last resumption, or the
    /// last restart of its timer). Waiting: when it was suspended.
    pub since_ms: Millis,
    /// Preemptions since it last ran a guarded quantum.
    pub preemptions: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LasCause {
    /// Running containers exceed the node: a new one arrived without a free core.
    NoFreeCore,
    /// A running container's quantum expired and a less-attained one was waiting.
    QuantumExpired,
    /// Room freed up (a container finished): the least-attained waiting one runs.
    RoomFreed,
}

/// What [`node_step`] asks its caller before (and after) a suspension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LasGate {
    /// May `victim` be suspended for `for_task`? Agreeing commits the suspension.
    Preempt {
        victim: usize,
        for_task: Option<usize>,
    },
    /// A suspension the gate agreed to turned out unnecessary and is withdrawn.
    Withdraw {
        victim: usize,
        for_task: Option<usize>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LasMove {
    pub task: usize,
    pub suspend: bool,
    pub cause: LasCause,
    /// The task that gets the room, when there is one.
    pub for_task: Option<usize>,
}

/// Starvation guard: after `starvation_preemptions` preemptions a container runs
/// `starvation_quantum_multiplier` x W before it may be preempted again.
pub fn is_guarded(t: &LasTask, s: &LasSettings) -> bool {
    t.preemptions >= s.starvation_preemptions
}

pub fn quantum_ms(t: &LasTask, s: &LasSettings) -> u64 {
    if is_guarded(t, s) {
        s.quantum_ms
            .saturating_mul(s.starvation_quantum_multiplier.max(1) as u64)
    } else {
        s.quantum_ms
    }
}

fn expires_at(t: &LasTask, s: &LasSettings) -> Millis {
    t.since_ms.saturating_add(quantum_ms(t, s))
}

/// A guarded container inside its guaranteed run may not be preempted.
pub fn is_protected(t: &LasTask, now: Millis, s: &LasSettings) -> bool {
    is_guarded(t, s) && now < expires_at(t, s)
}

fn suspend(t: &mut LasTask, now: Millis, s: &LasSettings) {
    t.preemptions = if is_guarded(t, s) {
        1
    } else {
        t.preemptions.saturating_add(1)
    };
    t.running = false;
    t.since_ms = now;
}

fn resume(t: &mut LasTask, now: Millis) {
    t.running = true;
    t.since_ms = now;
}

fn most_attained_first(tasks: &[LasTask], a: usize, b: usize) -> Ordering {
    tasks[b]
        .attained_ms
        .cmp(&tasks[a].attained_ms)
        .then(tasks[a].since_ms.cmp(&tasks[b].since_ms))
        .then(a.cmp(&b))
}

fn least_attained_first(tasks: &[LasTask], a: usize, b: usize) -> Ordering {
    tasks[a]
        .attained_ms
        .cmp(&tasks[b].attained_ms)
        .then(a.cmp(&b))
}

/// Lists [`node_step`] works in, kept by a caller that steps nodes often (the
/// simulator steps one on every arrival, finish and quantum expiry) so that a step
/// allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct LasScratch {
    touched: Vec<bool>,
    order: Vec<usize>,
    undo: Vec<LasTask>,
    waiting: Vec<usize>,
    expired: Vec<usize>,
}

/// One pass of the node scheduler at time `now` over the LAS containers of a node
/// whose room for them is `capacity`. Updates `tasks` in place and appends the moves.
/// `gate` is asked before every suspension and may refuse it (protected queue, round
/// budget); agreeing commits it. A simulator without such limits can agree to all.
pub fn node_step(
    capacity: Amount,
    tasks: &mut [LasTask],
    now: Millis,
    s: &LasSettings,
    mut gate: impl FnMut(LasGate) -> bool,
    scratch: &mut LasScratch,
    out: &mut Vec<LasMove>,
) {
    let n = tasks.len();
    let mut used = Amount::sum(tasks.iter().filter(|t| t.running).map(|t| t.demand));
    let LasScratch {
        touched,
        order,
        undo,
        waiting,
        expired,
    } = scratch;
    touched.clear();
    touched.resize(n, false);

    // Arrival: suspend the most attained until what runs fits; then withdraw, latest
    // first, suspensions that turned out unnecessary (containers differ in size).
    if !used.fits_in(&capacity) {
        let first = out.len();
        let arrival = (0..n)
            .filter(|&i| tasks[i].running)
            .max_by(|&a, &b| tasks[a].since_ms.cmp(&tasks[b].since_ms).then(a.cmp(&b)));
        order.clear();
        order.extend((0..n).filter(|&i| tasks[i].running));
        order.sort_by(|&a, &b| most_attained_first(tasks, a, b));
        undo.clear();
        for &v in order.iter() {
            if used.fits_in(&capacity) {
                break;
            }
            let for_task = arrival.filter(|&a| a != v);
            if is_protected(&tasks[v], now, s)
                || !gate(LasGate::Preempt {
                    victim: v,
                    for_task,
                })
            {
                continue;
            }
            let before = tasks[v];
            suspend(&mut tasks[v], now, s);
            used -= tasks[v].demand;
            touched[v] = true;
            out.push(LasMove {
                task: v,
                suspend: true,
                cause: LasCause::NoFreeCore,
                for_task,
            });
            undo.push(before);
        }
        for k in (first..out.len()).rev() {
            let mv = out[k];
            if (used + tasks[mv.task].demand).fits_in(&capacity) {
                tasks[mv.task] = undo[k - first];
                used += tasks[mv.task].demand;
                touched[mv.task] = false;
                gate(LasGate::Withdraw {
                    victim: mv.task,
                    for_task: mv.for_task,
                });
                out.remove(k);
            }
        }
    }

    // Room: the least attained waiting containers run while they fit. A container
    // suspended this very moment (by this or an earlier pass) waits at least until the
    // next one, so that passes at one instant never undo each other.
    waiting.clear();
    waiting.extend((0..n).filter(|&i| !tasks[i].running && !touched[i] && tasks[i].since_ms < now));
    waiting.sort_by(|&a, &b| least_attained_first(tasks, a, b));
    for &m in waiting.iter() {
        if (used + tasks[m].demand).fits_in(&capacity) {
            resume(&mut tasks[m], now);
            used += tasks[m].demand;
            touched[m] = true;
            out.push(LasMove {
                task: m,
                suspend: false,
                cause: LasCause::RoomFreed,
                for_task: None,
            });
        }
    }

    // Quantum expiry: swap with the least attained waiting container if it has attained
    // no more; otherwise restart the timer.
    expired.clear();
    expired.extend(
        (0..n).filter(|&i| tasks[i].running && !touched[i] && now >= expires_at(&tasks[i], s)),
    );
    expired.sort_by(|&a, &b| most_attained_first(tasks, a, b));
    let someone_waits = tasks.iter().any(|t| !t.running);
    for &t in expired.iter() {
        let mut candidates = waiting.iter().copied().filter(|&m| !touched[m]).peekable();
        if candidates.peek().is_none() {
            // Nobody to swap with now: the timer restarts (timers only matter while
            // someone waits).
            if someone_waits {
                tasks[t].since_ms = now;
            }
            continue;
        }
        let freed = used - tasks[t].demand;
        let swap = candidates.find(|&m| {
            tasks[m].attained_ms <= tasks[t].attained_ms
                && (freed + tasks[m].demand).fits_in(&capacity)
        });
        match swap {
            Some(m)
                if gate(LasGate::Preempt {
                    victim: t,
                    for_task: Some(m),
                }) =>
            {
                suspend(&mut tasks[t], now, s);
                resume(&mut tasks[m], now);
                used = freed + tasks[m].demand;
                touched[t] = true;
                touched[m] = true;
                out.push(LasMove {
                    task: t,
                    suspend: true,
                    cause: LasCause::QuantumExpired,
                    for_task: Some(m),
                });
                out.push(LasMove {
                    task: m,
                    suspend: false,
                    cause: LasCause::QuantumExpired,
                    for_task: None,
                });
            }
            _ => tasks[t].since_ms = now,
        }
    }
}

/// When the node scheduler next has something to do on its own: the earliest quantum
/// expiry of a running container while another waits. Arrivals and finishes are events
/// of their own.
pub fn next_expiry(tasks: &[LasTask], s: &LasSettings) -> Option<Millis> {
    if !tasks.iter().any(|t| !t.running) {
        return None;
    }
    tasks
        .iter()
        .filter(|t| t.running)
        .map(|t| expires_at(t, s))
        .min()
}

/// N+Q admission: the capacity a node with N = `capacity.vcores` cores advertises so
/// that the RM places up to N + Q one-vcore containers on it (memory scaled alike).
pub fn admission(capacity: Resource, s: &LasSettings) -> Resource {
    let n = capacity.vcores;
    if n == 0 {
        return capacity;
    }
    let q = s.extra_slots;
    let scaled = capacity.memory_mb as u128 * (n as u128 + q as u128) / n as u128;
    Resource::new(
        u64::try_from(scaled).unwrap_or(u64::MAX),
        n.saturating_add(q),
    )
}

/// What a node tells the central scheduler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeLoad {
    pub containers: u32,
    /// N + Q.
    pub slots: u32,
    /// Variance of its containers' attained service.
    pub attained_variance: f64,
}

/// Kairos' central placement: among nodes with a free slot, the one with the fewest
/// containers; ties go to the lowest variance of attained service (LAS works best on
/// a mix of short and long work), then to the lowest index.
pub fn place(nodes: &[NodeLoad]) -> Option<usize> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.containers < n.slots)
        .min_by(|(ia, a), (ib, b)| {
            a.containers
                .cmp(&b.containers)
                .then(a.attained_variance.total_cmp(&b.attained_variance))
                .then(ia.cmp(ib))
        })
        .map(|(i, _)| i)
}

/// Population variance; 0 for fewer than two values.
pub fn variance(values: impl Iterator<Item = u64>) -> f64 {
    let (mut n, mut sum, mut sq) = (0u64, 0f64, 0f64);
    for v in values {
        let x = v as f64;
        n += 1;
        sum += x;
        sq += x * x;
    }
    if n < 2 {
        return 0.0;
    }
    let mean = sum / n as f64;
    (sq / n as f64 - mean * mean).max(0.0)
}

/// Every node's load as the central scheduler wants it, from a view at `now`.
pub fn node_loads(view: &ClusterView, s: &LasSettings, now: Millis) -> Vec<NodeLoad> {
    view.nodes()
        .iter()
        .map(|node| {
            let live = || {
                node.containers
                    .iter()
                    .map(|&c| view.container(c))
                    .filter(|c| c.is_live())
            };
            NodeLoad {
                containers: live().count() as u32,
                slots: node.capacity.vcores.saturating_add(s.extra_slots),
                attained_variance: variance(live().map(|c| c.attained_service_at(now))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::PolicySettings;

    fn settings() -> LasSettings {
        PolicySettings::default().las
    }

    fn task(attained_ms: u64, running: bool, start: Millis) -> LasTask {
        LasTask {
            demand: Amount::new(1024, 1000),
            attained_ms,
            running,
            since_ms: start,
            preemptions: 0,
        }
    }

    fn step(cores: u64, tasks: &mut [LasTask], now: Millis) -> Vec<LasMove> {
        let mut out = Vec::new();
        node_step(
            Amount::new(1024 * cores, 1000 * cores),
            tasks,
            now,
            &settings(),
            |_| true,
            &mut LasScratch::default(),
            &mut out,
        );
        out
    }

    #[test]
    fn arrival_without_a_free_core_suspends_the_most_attained() {
        let mut tasks = [task(500, true, 0), task(900, true, 0), task(0, true, 10)];
        let moves = step(2, &mut tasks, 10);
        assert_eq!(
            moves,
            [LasMove {
                task: 1,
                suspend: true,
                cause: LasCause::NoFreeCore,
                for_task: Some(2)
            }]
        );
        assert!(!tasks[1].running && tasks[1].preemptions == 1);
    }

    #[test]
    fn finish_resumes_the_least_attained() {
        let mut tasks = [task(500, false, 0), task(100, false, 0), task(50, true, 0)];
        let moves = step(2, &mut tasks, 1000);
        assert_eq!(moves.len(), 1);
        assert_eq!((moves[0].task, moves[0].cause), (1, LasCause::RoomFreed));
        assert_eq!(tasks[1].since_ms, 1000);
    }

    #[test]
    fn quantum_expiry_swaps_or_restarts_the_timer() {
        let w = settings().quantum_ms;
        let mut tasks = [task(800, true, 0), task(300, false, 0)];
        assert!(step(1, &mut tasks, w - 1).is_empty());
        let moves = step(1, &mut tasks, w);
        assert_eq!(moves.len(), 2);
        assert!(tasks[1].running && !tasks[0].running);
        // The waiting one has attained more: keep running, restart the timer.
        let mut tasks = [task(100, true, 0), task(300, false, 0)];
        assert!(step(1, &mut tasks, w).is_empty());
        assert_eq!(tasks[0].since_ms, w);
        assert_eq!(next_expiry(&tasks, &settings()), Some(2 * w));
    }

    #[test]
    fn admission_and_placement_hint() {
        let s = settings();
        assert_eq!(
            admission(Resource::new(8192, 4), &s),
            Resource::new(16384, 8)
        );
        assert_eq!(
            admission(Resource::new(8192, 0), &s),
            Resource::new(8192, 0)
        );
        let nodes = [
            NodeLoad {
                containers: 3,
                slots: 8,
                attained_variance: 0.0,
            },
            NodeLoad {
                containers: 2,
                slots: 8,
                attained_variance: 9.0,
            },
            NodeLoad {
                containers: 2,
                slots: 8,
                attained_variance: 1.0,
            },
            NodeLoad {
                containers: 1,
                slots: 1,
                attained_variance: 0.0,
            },
        ];
        assert_eq!(place(&nodes), Some(2));
        assert_eq!(place(&nodes[3..]), None);
        assert_eq!(variance([1u64, 3].into_iter()), 1.0);
        let view = crate::cluster::builder::ClusterBuilder::new()
            .nodes(2, Resource::new(8192, 4))
            .queue("root.q", 100.0, 100.0, crate::cluster::JobClass::Long)
            .app("root.q", "SPARK")
            .containers_on(0, 1, Resource::new(1024, 1))
            .with_last(|c| c.attained_service_ms = 1000)
            .containers_on(0, 1, Resource::new(1024, 1))
            .with_last(|c| {
                c.attained_service_ms = 2000;
                c.attained_rate = 2.0;
                c.attained_as_of_ms = 500;
            })
            .build()
            .unwrap();
        let loads = node_loads(&view, &s, 1000);
        assert_eq!(
            loads[0],
            NodeLoad {
                containers: 2,
                slots: 8,
                attained_variance: 1_000_000.0
            }
        );
        assert_eq!(place(&loads), Some(1));
        assert_eq!(variance([5u64].into_iter()), 0.0);
    }
}
