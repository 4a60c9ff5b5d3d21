//! Kairos (thesis ch. 4): a central queue and LAS time sharing on every node, with no
//! runtime estimates.
//!
//! The central scheduler admits up to N + Q containers per node (`las::admission`) and
//! sends the next queued task to the node with the fewest containers, ties going to the
//! lowest variance of attained service (`las::place`). Each node runs `las::node_step`
//! (src/policy/) on its arrivals, finishes and quantum expiries: a new container without
//! a free core suspends the one with the most attained service, every quantum W the
//! least-attained waiting one may swap in, and a finish resumes the least attained.
//! Suspending and resuming go through the cost model like any other preemption.
//!
//! Nodes are kept ordered by (containers, variance, index) so that the shortlist handed
//! to `las::place` is the head of that order rather than every node; the variance is
//! refreshed whenever the node changes (the thesis' nodes report it in heartbeats).

use std::collections::{BTreeSet, VecDeque};

use crate::config::settings::LasSettings;
use crate::policy::Amount;
use crate::policy::las::{self, LasMove, LasScratch, LasTask, NodeLoad};
use crate::resources::{Limits, Resource};
use crate::sim::engine::{Core, NONE, Released, Scheduler, TaskRef};
use crate::sim::workload::{MICROS_PER_MILLI, Time};

#[derive(Clone, Debug)]
pub(crate) struct KairosConfig {
    pub las: LasSettings,
    pub footprint: Limits,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Msg {
    /// A job's tasks reach the central queue.
    Submit(u32),
    /// The central scheduler's next task for `node` (in its `sent` list) reaches it.
    /// Every message takes the same delay and ties keep their order, so a node's tasks
    /// arrive in the order they were sent; the task itself stays out of the event,
    /// which keeps every event the queue moves 32 bytes instead of 40.
    Assign { node: u32, task: u32 },
    /// A node tells the central scheduler a container left.
    Freed { node: u32, shape: Resource },
    /// A node's quantum timer.
    Quantum { node: u32, epoch: u32 },
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    container: u32,
    task: LasTask,
}

/// How many candidates `las::place` sees: the head of the (containers, variance, index)
/// order, which is where its answer is.
const SHORTLIST: usize = 16;

pub(crate) struct Kairos {
    cfg: KairosConfig,
    queue: VecDeque<(u32, TaskRef)>,
    /// Per node, the tasks sent to it and not yet arrived, oldest first.
    sent: Vec<VecDeque<(u32, TaskRef)>>,
    /// Central view: containers per node (sent, not yet reported gone), their
    /// allocation, and what the node admits.
    count: Vec<u32>,
    admitted: Vec<Resource>,
    admission: Vec<Resource>,
    /// Nodes with room, ordered as `las::place` prefers them: (containers, variance
    /// bits, node). The variance each node was filed with is kept to find its entry.
    order: BTreeSet<(u32, u64, u32)>,
    filed: Vec<Option<(u32, u64)>>,
    nodes: Vec<Vec<Entry>>,
    capacity: Vec<Amount>,
    /// Each node's quantum timer: generation and due time (`NONE`: not set).
    timer: Vec<u32>,
    timer_at: Vec<Time>,
    moves: Vec<LasMove>,
    scratch: Vec<LasTask>,
    step: LasScratch,
    shortlist: Vec<u32>,
    loads: Vec<NodeLoad>,
    suspensions: u64,
    resumptions: u64,
}

impl Kairos {
    pub fn new(core: &Core<'_, Msg>, cfg: KairosConfig) -> Kairos {
        let n = core.nodes.len();
        let admission: Vec<Resource> = core
            .nodes
            .iter()
            .map(|x| las::admission(x.capacity, &cfg.las))
            .collect();
        let mut k = Kairos {
            queue: VecDeque::new(),
            sent: (0..n).map(|_| VecDeque::new()).collect(),
            count: vec![0; n],
            admitted: vec![Resource::ZERO; n],
            order: BTreeSet::new(),
            filed: vec![None; n],
            nodes: (0..n).map(|_| Vec::new()).collect(),
            capacity: core
                .nodes
                .iter()
                .map(|x| Amount::from(x.capacity))
                .collect(),
            timer: vec![0; n],
            timer_at: vec![NONE; n],
            moves: Vec::new(),
            scratch: Vec::new(),
            step: LasScratch::default(),
            shortlist: Vec::new(),
            loads: Vec::new(),
            suspensions: 0,
            resumptions: 0,
            admission,
            cfg,
        };
        for node in 0..n as u32 {
            k.refile(node, 0.0);
        }
        k
    }

    /// Put `node` back in the placement order with its current count and `variance`.
    fn refile(&mut self, node: u32, variance: f64) {
        let i = node as usize;
        let room = self.admission[i].saturating_sub(self.admitted[i]);
        let key = (room.vcores > 0 && room.memory_mb > 0)
            .then(|| (self.count[i], variance.max(0.0).to_bits()));
        // Most steps leave a node where it was in the order.
        if key == self.filed[i] {
            return;
        }
        if let Some((c, v)) = self.filed[i].take() {
            self.order.remove(&(c, v, node));
        }
        if let Some(key) = key {
            self.order.insert((key.0, key.1, node));
            self.filed[i] = Some(key);
        }
    }

    fn variance(&self, core: &Core<'_, Msg>, node: u32) -> f64 {
        las::variance(
            self.nodes[node as usize]
                .iter()
                .map(|e| attained_ms(core, e.container)),
        )
    }

    /// Hand queued tasks to nodes while some node admits them.
    fn dispatch(&mut self, core: &mut Core<'_, Msg>) {
        while let Some(&(job, task)) = self.queue.front() {
            let shape = core.wl.shape(task.task as usize);
            self.shortlist.clear();
            self.loads.clear();
            // A node with room for this task counts as having a free slot.
            for &(count, var, n) in &self.order {
                if self.shortlist.len() == SHORTLIST {
                    break;
                }
                if (self.admitted[n as usize] + shape).fits_in(&self.admission[n as usize]) {
                    self.shortlist.push(n);
                    self.loads.push(NodeLoad {
                        containers: count,
                        slots: count + 1,
                        attained_variance: f64::from_bits(var),
                    });
                }
            }
            let Some(pick) = las::place(&self.loads) else {
                return;
            };
            let node = self.shortlist[pick];
            self.queue.pop_front();
            self.count[node as usize] += 1;
            self.admitted[node as usize] += shape;
            let v = self.filed[node as usize].map_or(0.0, |(_, v)| f64::from_bits(v));
            self.refile(node, v);
            self.sent[node as usize].push_back((job, task));
            core.send(Msg::Assign {
                node,
                task: task.task,
            });
        }
    }

    /// Run the node scheduler on `node` and carry out its moves; `arrival` is a task to
    /// start on it now.
    fn node_step(&mut self, core: &mut Core<'_, Msg>, node: u32, arrival: Option<(u32, TaskRef)>) {
        let i = node as usize;
        let now_ms = core.now / MICROS_PER_MILLI;
        let mut tasks = std::mem::take(&mut self.scratch);
        tasks.clear();
        for e in &self.nodes[i] {
            let mut t = e.task;
            t.attained_ms = attained_ms(core, e.container);
            tasks.push(t);
        }
        if let Some((_, t)) = arrival {
            tasks.push(LasTask {
                demand: Amount::from(core.wl.shape(t.task as usize)),
                attained_ms: 0,
                running: true,
                since_ms: now_ms,
                preemptions: 0,
            });
        }
        let mut moves = std::mem::take(&mut self.moves);
        moves.clear();
        las::node_step(
            self.capacity[i],
            &mut tasks,
            now_ms,
            &self.cfg.las,
            |_| true,
            &mut self.step,
            &mut moves,
        );
        // Suspensions first, so that the memory they free is what a new task waits for.
        let existing = self.nodes[i].len();
        for m in moves.iter().filter(|m| m.suspend && m.task < existing) {
            self.suspensions += 1;
            let c = self.nodes[i][m.task].container;
            core.reduce(c, self.cfg.footprint, true);
        }
        for m in moves.iter().filter(|m| !m.suspend && m.task < existing) {
            self.resumptions += 1;
            let c = self.nodes[i][m.task].container;
            let full = Limits::from(core.container(c).allocated);
            core.restore(c, full);
        }
        for (e, t) in self.nodes[i].iter_mut().zip(&tasks) {
            e.task = *t;
        }
        if let Some((job, t)) = arrival {
            let c = core.launch(job, t, node);
            let task = tasks[existing];
            if !task.running {
                self.suspensions += 1;
                core.reduce(c, self.cfg.footprint, true);
            }
            self.nodes[i].push(Entry { container: c, task });
        }
        // The next quantum expiry, if anything waits; a timer already set for that time
        // stands.
        let at = las::next_expiry(&tasks, &self.cfg.las)
            .map(|at| at.max(now_ms + 1) * MICROS_PER_MILLI)
            .unwrap_or(NONE);
        if at != self.timer_at[i] {
            self.timer[i] = self.timer[i].wrapping_add(1);
            self.timer_at[i] = at;
            if at != NONE {
                core.at(
                    at,
                    Msg::Quantum {
                        node,
                        epoch: self.timer[i],
                    },
                );
            }
        }
        self.moves = moves;
        self.scratch = tasks;
        let v = self.variance(core, node);
        self.refile(node, v);
    }
}

/// CPU time a container has consumed, in ms (attained service).
fn attained_ms(core: &Core<'_, Msg>, c: u32) -> u64 {
    let k = core.container(c);
    let elapsed = core.now.saturating_sub(k.last) as f64 * k.speed;
    ((k.attained + elapsed) * k.allocated.vcores.max(1) as f64 / MICROS_PER_MILLI as f64) as u64
}

impl Scheduler for Kairos {
    type Msg = Msg;

    fn job_arrived(&mut self, core: &mut Core<'_, Msg>, job: u32) {
        core.send(Msg::Submit(job));
    }

    fn message(&mut self, core: &mut Core<'_, Msg>, msg: Msg) {
        match msg {
            Msg::Submit(job) => {
                while let Some(t) = core.take_task(job) {
                    self.queue.push_back((job, t));
                }
                self.dispatch(core);
            }
            Msg::Assign { node, task } => {
                let arrived = self.sent[node as usize].pop_front();
                debug_assert_eq!(arrived.map(|(_, t)| t.task), Some(task));
                if let Some(arrived) = arrived {
                    self.node_step(core, node, Some(arrived));
                }
            }
            Msg::Freed { node, shape } => {
                let i = node as usize;
                self.count[i] -= 1;
                self.admitted[i] -= shape;
                let v = self.variance(core, node);
                self.refile(node, v);
                self.dispatch(core);
            }
            Msg::Quantum { node, epoch } => {
                if epoch == self.timer[node as usize] {
                    self.timer_at[node as usize] = NONE;
                    self.node_step(core, node, None);
                }
            }
        }
    }

    fn released(&mut self, core: &mut Core<'_, Msg>, r: Released) {
        let list = &mut self.nodes[r.node as usize];
        if let Some(p) = list.iter().position(|e| e.container == r.container) {
            // Order matters: the node scheduler breaks ties by position.
            list.remove(p);
        }
        self.node_step(core, r.node, None);
        core.send(Msg::Freed {
            node: r.node,
            shape: r.shape,
        });
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("LAS suspensions", self.suspensions),
            ("LAS resumptions", self.resumptions),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::engine::{EngineConfig, run};
    use crate::sim::sched::SchedParams;
    use crate::sim::trace::{TraceOptions, load};
    use crate::sim::workload::SLOT;

    /// On a crowded cluster LAS preempts and resumes, every node admits N + Q
    /// containers, and every node is empty once the jobs are done.
    #[test]
    fn las_preempts_and_drains() {
        let mut wl = load(
            &crate::sim::testutil::bundled_trace("yahoo_sub1.tr"),
            &TraceOptions::default(),
        )
        .unwrap();
        wl.jobs.truncate(400);
        let cfg = EngineConfig::new(200, SLOT);
        let kc = SchedParams::default().kairos_config(&wl, SLOT);
        let slots = 1 + kc.las.extra_slots;
        let mut core: Core<'_, Msg> = Core::new(&wl, &cfg).unwrap();
        let mut s = Kairos::new(&core, kc);
        run(&mut core, &mut s, &|_| {}).unwrap();
        assert!(s.suspensions > 0 && s.resumptions > 0);
        assert!(core.all_done());
        assert!(
            s.nodes.iter().all(|n| n.is_empty()),
            "nodes still hold containers"
        );
        assert!(s.count.iter().all(|&c| c == 0));
        assert!(s.admission.iter().all(|a| a.vcores == slots));
        assert!(s.queue.is_empty());
    }
}
