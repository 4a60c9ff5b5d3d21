//! Pigeon (SoCC'19): workers in groups, each group run by a master. A job's tasks are
//! spread evenly over the masters (`F / groups` each, the remainder to random masters);
//! a master sends a task to an idle worker at once or queues it. Each master keeps two
//! queues served by weighted fair queueing (one long task in every `weight` when both
//! wait), and a few workers per group are reserved for short tasks. A worker tells its
//! master when it is idle again.

use std::collections::VecDeque;

use rand::RngExt;

use crate::cluster::JobClass;
use crate::resources::Resource;
use crate::sim::engine::{Core, Released, Scheduler, TaskRef};

#[derive(Clone, Debug)]
pub(crate) struct PigeonConfig {
    pub group_size: u32,
    /// Share of each group's workers reserved for short tasks.
    pub reserved: f64,
    /// Weighted fair queueing weight W; 0 means strict priority.
    pub weight: u32,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Msg {
    /// A task reaches its master.
    ToMaster {
        master: u32,
        job: u32,
        task: TaskRef,
    },
    /// A master's task reaches its worker.
    ToWorker { node: u32, job: u32, task: TaskRef },
    /// A worker's "I freed this much" reaches its master.
    Idle { node: u32, freed: Resource },
}

struct Master {
    first: u32,
    /// Workers `first..first + reserved` take only short tasks.
    reserved: u32,
    high: VecDeque<(u32, TaskRef)>,
    low: VecDeque<(u32, TaskRef)>,
    /// Idle high-priority (reserved) and low-priority workers.
    idle_high: Vec<u32>,
    idle_low: Vec<u32>,
    /// High-priority tasks served in a row while long ones waited.
    in_a_row: u32,
}

pub(crate) struct Pigeon {
    cfg: PigeonConfig,
    masters: Vec<Master>,
    /// Room each worker has as its master sees it (what it sent minus what came back).
    room: Vec<Resource>,
    idle_listed: Vec<bool>,
    scratch: Vec<u32>,
    queued: u64,
    low_turns: u64,
}

impl Pigeon {
    pub fn new(core: &Core<'_, Msg>, cfg: PigeonConfig) -> Pigeon {
        let n = core.nodes.len() as u32;
        let size = cfg.group_size.clamp(1, n.max(1));
        let mut masters = Vec::new();
        let mut first = 0;
        while first < n {
            let end = (first + size).min(n);
            let workers = end - first;
            let reserved = if cfg.reserved > 0.0 {
                ((cfg.reserved * workers as f64).round() as u32).clamp(1, workers)
            } else {
                0
            };
            masters.push(Master {
                first,
                reserved,
                high: VecDeque::new(),
                low: VecDeque::new(),
                idle_high: (first..first + reserved).rev().collect(),
                idle_low: (first + reserved..end).rev().collect(),
                in_a_row: 0,
            });
            first = end;
        }
        Pigeon {
            room: core.nodes.iter().map(|x| x.capacity).collect(),
            idle_listed: vec![true; n as usize],
            scratch: (0..masters.len() as u32).collect(),
            masters,
            cfg,
            queued: 0,
            low_turns: 0,
        }
    }

    fn master_of(&self, node: u32) -> usize {
        (node / self.cfg.group_size.max(1)) as usize
    }

    fn is_reserved(&self, node: u32) -> bool {
        let m = &self.masters[self.master_of(node)];
        node < m.first + m.reserved
    }

    /// An idle worker of master `m` the task fits on: for short tasks a low-priority one
    /// first, then a reserved one; long tasks only low-priority ones.
    fn take_worker(&mut self, m: usize, shape: Resource, short: bool) -> Option<u32> {
        let lists: &[bool] = if short { &[false, true] } else { &[false] };
        for &high in lists {
            let list = if high {
                &mut self.masters[m].idle_high
            } else {
                &mut self.masters[m].idle_low
            };
            if let Some(pos) = list
                .iter()
                .rposition(|&w| shape.fits_in(&self.room[w as usize]))
            {
                let w = list[pos];
                self.room[w as usize] -= shape;
                let r = self.room[w as usize];
                if r.vcores == 0 || r.memory_mb == 0 {
                    list.remove(pos);
                    self.idle_listed[w as usize] = false;
                }
                return Some(w);
            }
        }
        None
    }

    fn dispatch(&mut self, core: &mut Core<'_, Msg>, m: usize, job: u32, task: TaskRef) {
        let short = core.wl.jobs[job as usize].class == JobClass::Short;
        let shape = core.wl.shape(task.task as usize);
        match self.take_worker(m, shape, short) {
            Some(node) => core.send(Msg::ToWorker { node, job, task }),
            None => {
                self.queued += 1;
                let q = if short {
                    &mut self.masters[m].high
                } else {
                    &mut self.masters[m].low
                };
                q.push_back((job, task));
            }
        }
    }

    /// Worker `node` has room again: give it queued work, else list it as idle.
    fn worker_idle(&mut self, core: &mut Core<'_, Msg>, node: u32, freed: Resource) {
        self.room[node as usize] += freed;
        let m = self.master_of(node);
        let reserved = self.is_reserved(node);
        loop {
            let master = &mut self.masters[m];
            let take_low = if reserved {
                false
            } else {
                match (master.high.is_empty(), master.low.is_empty()) {
                    (true, true) => break,
                    (false, true) => false,
                    (true, false) => true,
                    // Both wait: one long task in every W.
                    (false, false) => self.cfg.weight > 0 && master.in_a_row + 1 >= self.cfg.weight,
                }
            };
            let q = if take_low {
                &mut master.low
            } else {
                &mut master.high
            };
            let Some(&(job, task)) = q.front() else { break };
            let shape = core.wl.shape(task.task as usize);
            if !shape.fits_in(&self.room[node as usize]) {
                break;
            }
            q.pop_front();
            if take_low {
                if !master.high.is_empty() {
                    self.low_turns += 1;
                }
                master.in_a_row = 0;
            } else if !master.low.is_empty() {
                master.in_a_row += 1;
            }
            self.room[node as usize] -= shape;
            core.send(Msg::ToWorker { node, job, task });
        }
        let r = self.room[node as usize];
        if r.vcores > 0 && r.memory_mb > 0 && !self.idle_listed[node as usize] {
            self.idle_listed[node as usize] = true;
            let master = &mut self.masters[m];
            if reserved {
                master.idle_high.push(node);
            } else {
                master.idle_low.push(node);
            }
        }
    }
}

impl Scheduler for Pigeon {
    type Msg = Msg;

    fn job_arrived(&mut self, core: &mut Core<'_, Msg>, job: u32) {
        let g = self.masters.len() as u32;
        let f = core.wl.jobs[job as usize].num_tasks;
        let (each, rest) = (f / g, f % g);
        // The remainder goes to `rest` distinct random masters (partial shuffle).
        for i in 0..rest {
            let j = core.rng.random_range(i..g);
            self.scratch.swap(i as usize, j as usize);
        }
        for m in 0..g {
            let extra = self.scratch[..rest as usize].contains(&m) as u32;
            for _ in 0..each + extra {
                if let Some(task) = core.take_task(job) {
                    core.send(Msg::ToMaster {
                        master: m,
                        job,
                        task,
                    });
                }
            }
        }
    }

    fn message(&mut self, core: &mut Core<'_, Msg>, msg: Msg) {
        match msg {
            Msg::ToMaster { master, job, task } => self.dispatch(core, master as usize, job, task),
            Msg::ToWorker { node, job, task } => {
                core.launch(job, task, node);
            }
            Msg::Idle { node, freed } => self.worker_idle(core, node, freed),
        }
    }

    fn released(&mut self, core: &mut Core<'_, Msg>, r: Released) {
        core.send(Msg::Idle {
            node: r.node,
            freed: r.shape,
        });
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("masters", self.masters.len() as u64),
            ("tasks queued at masters", self.queued),
            ("long tasks served by fair queueing", self.low_turns),
        ]
    }
}
