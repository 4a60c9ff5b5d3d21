//! Tiresias: one-node sampling with task hopping. A task goes straight to a random node,
//! with no probe and no worker queue; a node without room passes it on to another random
//! node. After `hop_limit` nodes the task goes back to its scheduler, which retries
//! after a back-off (doubling from `retry_delay`, at most `max_retry_delay`).
//!
//! A round of hops is simulated in one step: visiting uniformly random nodes until one
//! has room takes a geometric number of hops, with success probability the share of
//! nodes with room, and ends on a uniformly random such node. Drawing that number and
//! that node is the same distribution as drawing the hops one by one, as long as the
//! cluster does not change during the round (a few milliseconds of network delay). When
//! tasks differ in size, "has room" depends on the task and the hops are drawn one by
//! one, still within the step.

use rand::RngExt;

use crate::resources::Resource;
use crate::sim::engine::{Core, Released, Scheduler, TaskRef};
use crate::sim::workload::Time;

#[derive(Clone, Debug)]
pub(crate) struct TiresiasConfig {
    pub hop_limit: u32,
    pub retry_delay: Time,
    pub max_retry_delay: Time,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Msg {
    /// A task starts a round of hops from its scheduler.
    Round {
        job: u32,
        task: TaskRef,
        retries: u32,
    },
    /// The node the round ended on was reserved; the task reaches it.
    Arrive { node: u32, job: u32, task: TaskRef },
    /// The retry notification reached the scheduler.
    Retry {
        job: u32,
        task: TaskRef,
        retries: u32,
    },
}

pub(crate) struct Tiresias {
    cfg: TiresiasConfig,
    n: u32,
    free: Vec<Resource>,
    /// When every task has the same size: the nodes with room for one, and where each
    /// node sits in that list.
    uniform: Option<Resource>,
    room: Vec<u32>,
    room_pos: Vec<u32>,
    hops: u64,
    max_hops: u32,
    retries: u64,
    placed: u64,
}

const NOT_IN: u32 = u32::MAX;

impl Tiresias {
    pub fn new(core: &Core<'_, Msg>, cfg: TiresiasConfig) -> Tiresias {
        let n = core.nodes.len() as u32;
        let uniform = (core.wl.shapes.len() == 1).then(|| core.wl.shapes[0]);
        let mut t = Tiresias {
            cfg,
            n,
            free: core.nodes.iter().map(|x| x.capacity).collect(),
            uniform,
            room: Vec::new(),
            room_pos: vec![NOT_IN; n as usize],
            hops: 0,
            max_hops: 0,
            retries: 0,
            placed: 0,
        };
        for node in 0..n {
            t.update_room(node);
        }
        t
    }

    fn update_room(&mut self, node: u32) {
        let Some(shape) = self.uniform else { return };
        let has = shape.fits_in(&self.free[node as usize]);
        let pos = self.room_pos[node as usize];
        if has && pos == NOT_IN {
            self.room_pos[node as usize] = self.room.len() as u32;
            self.room.push(node);
        } else if !has && pos != NOT_IN {
            let last = self.room[self.room.len() - 1];
            self.room.swap_remove(pos as usize);
            if last != node {
                self.room_pos[last as usize] = pos;
            }
            self.room_pos[node as usize] = NOT_IN;
        }
    }

    /// Hops this round takes and the node it ends on (`None`: the hop limit ran out).
    fn hop_round(&mut self, core: &mut Core<'_, Msg>, shape: Resource) -> (u32, Option<u32>) {
        let limit = self.cfg.hop_limit;
        if self.uniform.is_some() {
            let free = self.room.len() as u32;
            if free == 0 {
                return (limit, None);
            }
            let p = free as f64 / self.n as f64;
            // Hops until a node with room: geometric with success probability p.
            let hops = if p >= 1.0 {
                1
            } else {
                let u: f64 = 1.0 - core.rng.random::<f64>();
                let k = (u.ln() / (1.0 - p).ln()).floor() + 1.0;
                if k > limit as f64 {
                    limit + 1
                } else {
                    k as u32
                }
            };
            if hops > limit {
                return (limit, None);
            }
            let node = self.room[core.rng.random_range(0..free) as usize];
            (hops, Some(node))
        } else {
            for hop in 1..=limit {
                let node = core.rng.random_range(0..self.n);
                if shape.fits_in(&self.free[node as usize]) {
                    return (hop, Some(node));
                }
            }
            (limit, None)
        }
    }

    fn round(&mut self, core: &mut Core<'_, Msg>, job: u32, task: TaskRef, retries: u32) {
        let shape = core.wl.shape(task.task as usize);
        let (hops, node) = self.hop_round(core, shape);
        self.hops += hops as u64;
        self.max_hops = self.max_hops.max(hops);
        // Each hop is one message.
        let travel = core.net().saturating_mul(hops as u64);
        match node {
            Some(node) => {
                self.free[node as usize] -= shape;
                self.update_room(node);
                core.after(travel, Msg::Arrive { node, job, task });
            }
            None => {
                core.after(travel + core.net(), Msg::Retry { job, task, retries });
            }
        }
    }
}

impl Scheduler for Tiresias {
    type Msg = Msg;

    fn job_arrived(&mut self, core: &mut Core<'_, Msg>, job: u32) {
        while let Some(task) = core.take_task(job) {
            self.round(core, job, task, 0);
        }
    }

    fn message(&mut self, core: &mut Core<'_, Msg>, msg: Msg) {
        match msg {
            Msg::Round { job, task, retries } => self.round(core, job, task, retries),
            Msg::Arrive { node, job, task } => {
                self.placed += 1;
                core.launch(job, task, node);
            }
            Msg::Retry { job, task, retries } => {
                self.retries += 1;
                let backoff = self
                    .cfg
                    .retry_delay
                    .saturating_mul(1u64 << retries.min(20))
                    .min(self.cfg.max_retry_delay);
                core.after(
                    backoff,
                    Msg::Round {
                        job,
                        task,
                        retries: retries + 1,
                    },
                );
            }
        }
    }

    fn released(&mut self, _core: &mut Core<'_, Msg>, r: Released) {
        self.free[r.node as usize] += r.shape;
        self.update_room(r.node);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("hops", self.hops),
            (
                "hops per placed task (x100)",
                self.hops * 100 / self.placed.max(1),
            ),
            ("most hops in a round", self.max_hops as u64),
            ("retries", self.retries),
        ]
    }
}
