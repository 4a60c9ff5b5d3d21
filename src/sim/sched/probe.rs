//! Probe-based schedulers: Sparrow, Hawk and Eagle (thesis ch. 2-3).
//!
//! Every node keeps a queue of probes (reservations). A probe at the head of a node with
//! a free slot asks its job's scheduler for a task (late binding, one round trip); the
//! scheduler answers with the job's next task or nothing.
//! - Sparrow: `ratio x tasks` probes per job to random nodes, FIFO queues.
//! - Hawk: a short partition that takes no long tasks; long jobs placed centrally by
//!   least work left (LWL) on the general partition; short jobs probe the whole cluster;
//!   a node that runs out of work steals the short probes queued behind a long one on
//!   random general nodes.
//! - Eagle: Hawk's partitions and LWL, plus succinct state sharing (a node with long work
//!   rejects short probes and answers with the bitvector of nodes holding long work that
//!   came with its last long task; rejected probes go to nodes free of long work in the
//!   freshest bitvector, then to the short partition), sticky batch probing (a probe stays
//!   until its job has no task left), and SRPT among short probes with a bypass cap.
//!
//! Long work is known to the central scheduler the moment it assigns it, and to a node
//! once the probe arrives; the two views are kept apart, as in the papers.

use std::collections::VecDeque;
use std::rc::Rc;

use rand::RngExt;

use crate::cluster::{ContainerState, JobClass};
use crate::config::settings::DiceSettings;
use crate::policy::dice::{self, DiceNodeFacts, DiceWindow};
use crate::resources::{Limits, Resource};
use crate::sim::engine::{Core, NONE, Released, Scheduler, TaskRef};
use crate::sim::sched::lwl::LeastWorkLeft;
use crate::sim::workload::{MICROS_PER_MILLI, Time};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Sparrow,
    Hawk,
    Eagle,
}

#[derive(Clone, Debug)]
pub(crate) struct ProbeConfig {
    pub variant: Variant,
    /// Nodes `0..short_nodes` form the short partition.
    pub short_nodes: u32,
    pub probe_ratio: u32,
    pub min_probes: u32,
    pub steal_attempts: u32,
    pub steal_limit: u32,
    /// Eagle's SRPT bypass cap, in multiples of the bypassed probe's task estimate.
    pub bypass_cap: f64,
    /// Dice on top (hawk+dice, eagle+dice).
    pub dice: Option<DiceConfig>,
}

/// Dice's settings as the simulator runs them.
#[derive(Clone, Debug)]
pub(crate) struct DiceConfig {
    pub settings: DiceSettings,
    pub footprint: Limits,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Msg {
    /// A probe of `job` reaches `node`; `round` counts Eagle's placements (1..=3).
    Probe { node: u32, job: u32, round: u8 },
    /// `node` rejected a short probe of `job`; the answer reaches the job's scheduler.
    Rejected { node: u32, job: u32, round: u8 },
    /// `node` asks `job`'s scheduler for a task, holding `reserved` for it.
    GetTask {
        node: u32,
        job: u32,
        reserved: Resource,
    },
    /// The scheduler's answer reaches `node`.
    Reply {
        node: u32,
        job: u32,
        reserved: Resource,
        task: Option<TaskRef>,
    },
    /// `count` probes stolen by `node` arrive (the oldest `count` in flight).
    Stolen { node: u32, count: u32 },
    /// Dice: a window closes at the central scheduler.
    DiceWindow,
    /// Dice: an opportunistic preemption request reaches `node`.
    Preempt { node: u32 },
    /// Dice: the suspension of container `c` on `node` has lasted long enough.
    SuspensionOver { node: u32, c: u32 },
}

/// A long container Dice suspended on a node.
#[derive(Clone, Copy, Debug)]
struct Held {
    c: u32,
    since: Time,
    /// Its memory is reclaimed and its slot runs short tasks.
    slot_free: bool,
    /// Its suspension is over: it takes the next slot that frees up.
    resume: bool,
}

struct Dice {
    cfg: DiceConfig,
    static_short: u32,
    held: Vec<Option<Held>>,
    window_start: Time,
    windows: u64,
    requests: u64,
    suspended: u64,
    resumed: u64,
    candidates: Vec<u32>,
}

/// A reservation in a node's queue.
#[derive(Clone, Copy, Debug)]
struct Probe {
    job: u32,
    long: bool,
    /// Eagle: estimated work that has bypassed this probe (SRPT starvation guard).
    bypassed: Time,
    /// Eagle: this probe already ran a task (sticky).
    sticky: bool,
}

/// The central scheduler's "has long work" bitvector at some instant (Eagle SSS), with
/// the count of clear bits before each word so that drawing a random clear bit is a
/// binary search.
struct Snapshot {
    bits: Box<[u64]>,
    zeros_before: Box<[u32]>,
    at: Time,
}

impl Snapshot {
    fn new(bits: &[u64], n: u32, at: Time) -> Snapshot {
        let mut zeros_before = Vec::with_capacity(bits.len() + 1);
        let mut acc = 0u32;
        for (i, &w) in bits.iter().enumerate() {
            zeros_before.push(acc);
            acc += clear_bits(i, w, n).count_ones();
        }
        zeros_before.push(acc);
        Snapshot {
            bits: bits.into(),
            zeros_before: zeros_before.into_boxed_slice(),
            at,
        }
    }

    /// A uniformly random node whose bit is clear, chosen by `r`.
    fn random_zero(&self, n: u32, r: u32) -> Option<u32> {
        let total = *self.zeros_before.last()?;
        if total == 0 {
            return None;
        }
        let k = r % total;
        // The word holding the k-th clear bit: the last one with fewer clear bits before.
        let w = self.zeros_before.partition_point(|&z| z <= k) - 1;
        let mut zeros = clear_bits(w, self.bits[w], n);
        for _ in 0..k - self.zeros_before[w] {
            zeros &= zeros - 1;
        }
        Some(w as u32 * 64 + zeros.trailing_zeros())
    }
}

/// The clear bits of word `i` that stand for one of the first `n` nodes.
fn clear_bits(i: usize, w: u64, n: u32) -> u64 {
    let valid = if (i + 1) * 64 <= n as usize {
        u64::MAX
    } else {
        (1u64 << (n as usize - i * 64)) - 1
    };
    !w & valid
}

pub(crate) struct ProbeSched {
    cfg: ProbeConfig,
    n: u32,
    /// Nodes `0..short_now` are the short partition right now (Dice grows it).
    pub short_now: u32,
    pub free: Vec<Resource>,
    queue: Vec<VecDeque<Probe>>,
    /// Node-local view: long tasks running and long probes queued.
    long_running: Vec<u32>,
    long_queued: Vec<u32>,
    /// Central view of long work per node (LWL), and its bitvector.
    lwl: LeastWorkLeft,
    /// Snapshot each node got with its last long probe; snapshot each long job carries;
    /// freshest snapshot each short job's scheduler has seen.
    node_snap: Vec<Option<Rc<Snapshot>>>,
    job_snap: Vec<Option<Rc<Snapshot>>>,
    /// Scratch: nodes chosen for a long job.
    targets: Vec<u32>,
    dice: Option<Dice>,
    /// Stolen probes in flight, in the order they were sent (all take one delay).
    stolen: VecDeque<Probe>,
    c: Counters,
}

#[derive(Default)]
struct Counters {
    probes: u64,
    rejected: u64,
    replaced: u64,
    fallbacks: u64,
    noop_replies: u64,
    behind_long: u64,
    steal_attempts: u64,
    steals: u64,
    stolen: u64,
    sticky_runs: u64,
}

impl ProbeSched {
    pub fn new(core: &Core<'_, Msg>, cfg: ProbeConfig) -> ProbeSched {
        let n = core.nodes.len() as u32;
        let nn = n as usize;
        ProbeSched {
            free: core.nodes.iter().map(|x| x.capacity).collect(),
            queue: (0..n).map(|_| VecDeque::new()).collect(),
            long_running: vec![0; nn],
            long_queued: vec![0; nn],
            lwl: LeastWorkLeft::new(n, cfg.short_nodes),
            node_snap: vec![None; nn],
            job_snap: vec![None; core.wl.jobs.len()],
            targets: Vec::new(),
            dice: cfg.dice.clone().map(|d| Dice {
                cfg: d,
                static_short: cfg.short_nodes.min(n),
                held: vec![None; nn],
                window_start: 0,
                windows: 0,
                requests: 0,
                suspended: 0,
                resumed: 0,
                candidates: Vec::new(),
            }),
            stolen: VecDeque::new(),
            c: Counters::default(),
            short_now: cfg.short_nodes.min(n),
            n,
            cfg,
        }
    }

    fn is_long(core: &Core<'_, Msg>, job: u32) -> bool {
        core.wl.jobs[job as usize].class == JobClass::Long
    }

    /// The node holds long work (running, suspended or queued), as it knows itself.
    pub fn node_has_long(&self, node: u32) -> bool {
        self.long_running[node as usize] + self.long_queued[node as usize] > 0
    }

    fn random_node(core: &mut Core<'_, Msg>, from: u32, to: u32) -> u32 {
        if to <= from + 1 {
            return from;
        }
        core.rng.random_range(from..to)
    }

    // ---- placement ----

    /// Sparrow's batch sampling: `count` probes to uniformly random nodes.
    fn probe_randomly(&mut self, core: &mut Core<'_, Msg>, job: u32, count: u32) {
        for _ in 0..count {
            let node = Self::random_node(core, 0, self.n);
            self.c.probes += 1;
            core.send(Msg::Probe {
                node,
                job,
                round: 1,
            });
        }
    }

    /// Least work left: each task goes to the general node expected to free up first.
    fn place_long_lwl(&mut self, core: &mut Core<'_, Msg>, job: u32) {
        let spec = core.wl.jobs[job as usize];
        let now = core.now;
        let mut targets = std::mem::take(&mut self.targets);
        targets.clear();
        self.lwl.place(spec.num_tasks, spec.estimate, now, |node| {
            targets.push(node)
        });
        for &node in &targets {
            self.c.probes += 1;
            core.send(Msg::Probe {
                node,
                job,
                round: 1,
            });
        }
        self.targets = targets;
        if self.cfg.variant == Variant::Eagle {
            self.job_snap[job as usize] =
                Some(Rc::new(Snapshot::new(self.lwl.bits(), self.n, now)));
        }
    }

    /// Eagle: the scheduler of `job` re-places a probe `node` rejected.
    fn replace(&mut self, core: &mut Core<'_, Msg>, node: u32, job: u32, round: u8) {
        // Keep the freshest bitvector seen among the rejections.
        if let Some(s) = &self.node_snap[node as usize] {
            let fresher = self.job_snap[job as usize]
                .as_ref()
                .is_none_or(|mine| s.at > mine.at);
            if fresher {
                self.job_snap[job as usize] = Some(Rc::clone(s));
            }
        }
        let target = if round == 1 {
            self.c.replaced += 1;
            match &self.job_snap[job as usize] {
                Some(s) => {
                    let r: u32 = core.rng.random();
                    s.random_zero(self.n, r)
                        .unwrap_or_else(|| Self::random_node(core, 0, self.short_now))
                }
                None => Self::random_node(core, 0, self.n),
            }
        } else {
            self.c.fallbacks += 1;
            Self::random_node(core, 0, self.short_now)
        };
        core.send(Msg::Probe {
            node: target,
            job,
            round: round + 1,
        });
    }

    // ---- nodes ----

    fn probe_arrives(&mut self, core: &mut Core<'_, Msg>, node: u32, job: u32, round: u8) {
        let long = Self::is_long(core, job);
        let n = node as usize;
        if long {
            self.long_queued[n] += 1;
            if self.cfg.variant == Variant::Eagle {
                self.node_snap[n] = self.job_snap[job as usize].clone();
            }
        } else {
            if self.cfg.variant == Variant::Eagle && round < 3 && self.node_has_long(node) {
                self.c.rejected += 1;
                core.send(Msg::Rejected { node, job, round });
                return;
            }
            if self.node_has_long(node) {
                self.c.behind_long += 1;
            }
        }
        self.queue[n].push_back(Probe {
            job,
            long,
            bypassed: 0,
            sticky: false,
        });
        self.serve(core, node);
    }

    /// Start asking for tasks while the node has room and probes.
    fn serve(&mut self, core: &mut Core<'_, Msg>, node: u32) {
        let n = node as usize;
        // Room a Dice suspension lent is for short tasks only: the paper suspends a long
        // task for the short ones waiting there, and resumes it when they are done.
        let lent = self
            .dice
            .as_ref()
            .and_then(|d| d.held[n])
            .is_some_and(|h| h.slot_free);
        while let Some(mut pos) = self.pick(core, node) {
            if lent && self.queue[n][pos].long {
                match self.queue[n].iter().position(|p| !p.long) {
                    Some(short) => pos = short,
                    None => return,
                }
            }
            let p = self.queue[n][pos];
            // Sparrow and Hawk nodes do not know whether the job has tasks left and ask
            // anyway; Eagle's schedulers keep their nodes informed.
            let spec = core.wl.jobs[p.job as usize];
            let shape = core
                .peek_shape(p.job)
                .unwrap_or_else(|| core.wl.shape(spec.first_task as usize));
            if !shape.fits_in(&self.free[n]) {
                return;
            }
            self.free[n] -= shape;
            if self.cfg.variant == Variant::Eagle && !p.long {
                if p.sticky {
                    self.c.sticky_runs += 1;
                }
                self.queue[n][pos].sticky = true;
                for q in self.queue[n].range_mut(..pos) {
                    q.bypassed += spec.estimate;
                }
            } else {
                self.drop_probe(node, pos);
            }
            if p.long {
                self.long_running[n] += 1;
                // Central view: the long task leaves the backlog and starts.
                let ends = core.now + 2 * core.net() + spec.estimate;
                self.lwl.start(node, spec.estimate, core.now, ends);
            }
            core.send(Msg::GetTask {
                node,
                job: p.job,
                reserved: shape,
            });
        }
    }

    fn drop_probe(&mut self, node: u32, pos: usize) {
        if let Some(p) = self.queue[node as usize].remove(pos)
            && p.long
        {
            self.long_queued[node as usize] -= 1;
        }
    }

    /// The probe to serve next: the head (FIFO), or Eagle's SRPT choice.
    fn pick(&mut self, core: &Core<'_, Msg>, node: u32) -> Option<usize> {
        if self.cfg.variant != Variant::Eagle {
            return (!self.queue[node as usize].is_empty()).then_some(0);
        }
        // Eagle nodes know which jobs are done: their probes go.
        let q = &mut self.queue[node as usize];
        if q.iter().any(|p| !p.long && core.pending(p.job) == 0) {
            q.retain(|p| p.long || core.pending(p.job) > 0);
        }
        let q = &self.queue[node as usize];
        if q.is_empty() {
            return None;
        }
        // Algorithm 1 (SBP + SRPT): among the short probes before the first long one,
        // the job with the least estimated work left that may bypass every probe in
        // front of it; otherwise the head.
        let mut best: Option<(Time, usize)> = None;
        let mut slack = f64::INFINITY;
        for (i, p) in q.iter().enumerate() {
            if p.long {
                break;
            }
            let spec = &core.wl.jobs[p.job as usize];
            let pending = core.pending(p.job);
            let left = spec.estimate.saturating_mul(pending as u64);
            if best.is_none_or(|(b, _)| left < b) && (spec.estimate as f64) <= slack {
                best = Some((left, i));
            }
            slack = slack.min(self.cfg.bypass_cap * spec.estimate as f64 - p.bypassed as f64);
        }
        Some(best.map_or(0, |(_, i)| i))
    }

    /// Hawk: a node with nothing to do contacts random general nodes and steals the
    /// short probes queued right behind a long one.
    fn steal(&mut self, core: &mut Core<'_, Msg>, thief: u32) {
        for _ in 0..self.cfg.steal_attempts {
            self.c.steal_attempts += 1;
            let victim = Self::random_node(core, self.short_now, self.n);
            if victim == thief {
                continue;
            }
            let q = &mut self.queue[victim as usize];
            // Skip the short probes at the head unless a long task runs there, then the
            // long ones; take the run of short probes after them.
            let mut i = 0;
            if self.long_running[victim as usize] == 0 {
                while i < q.len() && !q[i].long {
                    i += 1;
                }
            }
            while i < q.len() && q[i].long {
                i += 1;
            }
            let mut end = i;
            while end < q.len() && !q[end].long && end - i < self.cfg.steal_limit as usize {
                end += 1;
            }
            if end > i {
                self.stolen.extend(q.drain(i..end));
                let count = end - i;
                self.c.steals += 1;
                self.c.stolen += count as u64;
                core.send(Msg::Stolen {
                    node: thief,
                    count: count as u32,
                });
                return;
            }
        }
    }

    fn reply(
        &mut self,
        core: &mut Core<'_, Msg>,
        node: u32,
        job: u32,
        reserved: Resource,
        task: Option<TaskRef>,
    ) {
        let n = node as usize;
        match task {
            Some(t) => {
                let shape = core.wl.shape(t.task as usize);
                if shape != reserved {
                    self.free[n] += reserved;
                    if !shape.fits_in(&self.free[n]) {
                        core.untake(job, t);
                        if Self::is_long(core, job) {
                            self.long_running[n] -= 1;
                        }
                        self.after_free(core, node);
                        return;
                    }
                    self.free[n] -= shape;
                }
                core.launch(job, t, node);
            }
            None => {
                self.c.noop_replies += 1;
                self.free[n] += reserved;
                if Self::is_long(core, job) {
                    self.long_running[n] -= 1;
                }
                self.after_free(core, node);
            }
        }
    }

    /// Dice's window: mean waiting time of the short tasks that started in it ->
    /// short partition size for the next window and preemption requests.
    fn dice_window(&mut self, core: &mut Core<'_, Msg>) {
        let Some(d) = self.dice.as_mut() else { return };
        let n = self.n as usize;
        let w = std::mem::take(&mut core.short_wait);
        let mut window = DiceWindow::new(d.window_start / MICROS_PER_MILLI);
        if w.count > 0 {
            window.record_waits(
                (w.sum / w.count as f64 / MICROS_PER_MILLI as f64) as u64,
                w.count,
            );
        }
        let mut settings = d.cfg.settings.clone();
        settings.min_short_fraction = settings
            .min_short_fraction
            .or(Some(d.static_short as f64 / n.max(1) as f64));
        let report = dice::window_decision(window.mean_wait_ms(), None, n, &settings);
        d.windows += 1;
        d.window_start = core.now;
        let short_now = (report.short_partition as u32).clamp(d.static_short, self.n);
        self.short_now = short_now;
        self.lwl.set_first_general(short_now, core.now);
        let mut candidates = std::mem::take(&mut d.candidates);
        candidates.clear();
        candidates.extend(short_now..self.n);
        let chosen = dice::choose_nodes(&mut core.rng, &candidates, report.preemption_requests);
        d.candidates = candidates;
        d.requests += chosen.len() as u64;
        for node in chosen {
            core.send(Msg::Preempt { node });
        }
        if !core.all_done() {
            core.after(
                d.cfg.settings.window_ms.max(1) * MICROS_PER_MILLI,
                Msg::DiceWindow,
            );
        }
    }

    /// Dice: a node checks the four conditions and suspends its running long container.
    fn dice_preempt(&mut self, core: &mut Core<'_, Msg>, node: u32) {
        let n = node as usize;
        let Some(d) = self.dice.as_mut() else { return };
        let running_long = core.nodes[n].containers.iter().copied().find(|&c| {
            let k = core.container(c);
            k.state == ContainerState::Running
                && core.wl.jobs[k.job as usize].class == JobClass::Long
        });
        let facts = DiceNodeFacts {
            long_running: running_long.is_some(),
            long_suspended: d.held[n].is_some(),
            short_waiting: self.queue[n].iter().any(|p| !p.long),
        };
        let Some(c) = running_long else { return };
        let suspensions = core.container(c).suspensions;
        if !dice::node_accepts(&facts, suspensions, d.cfg.settings.max_suspensions) {
            return;
        }
        d.suspended += 1;
        d.held[n] = Some(Held {
            c,
            since: core.now,
            slot_free: false,
            resume: false,
        });
        core.reduce(c, d.cfg.footprint, true);
    }

    /// Dice: a held container whose suspension is over takes the slot back as soon as
    /// there is room.
    fn try_resume(&mut self, core: &mut Core<'_, Msg>, node: u32) {
        let n = node as usize;
        let Some(d) = self.dice.as_mut() else { return };
        let Some(h) = d.held[n] else { return };
        if !(h.slot_free && h.resume) {
            return;
        }
        let shape = core.container(h.c).allocated;
        if !shape.fits_in(&self.free[n]) {
            return;
        }
        self.free[n] -= shape;
        d.held[n] = None;
        d.resumed += 1;
        core.restore(h.c, Limits::from(shape));
    }

    /// A slot came free: serve the queue, or steal (Hawk) when there is nothing to serve.
    fn after_free(&mut self, core: &mut Core<'_, Msg>, node: u32) {
        self.try_resume(core, node);
        self.serve(core, node);
        let idle = self.queue[node as usize].is_empty();
        if idle && self.cfg.variant == Variant::Hawk && self.cfg.steal_attempts > 0 {
            self.steal(core, node);
        }
    }
}

impl Scheduler for ProbeSched {
    type Msg = Msg;

    fn start(&mut self, core: &mut Core<'_, Msg>) {
        if let Some(d) = self.dice.as_mut() {
            d.window_start = core.wl.span().0;
            let first = d.window_start + d.cfg.settings.window_ms.max(1) * MICROS_PER_MILLI;
            core.at(first, Msg::DiceWindow);
        }
    }

    fn transition_done(&mut self, core: &mut Core<'_, Msg>, c: u32) {
        let k = core.container(c);
        let n = k.node as usize;
        let Some(d) = self.dice.as_mut() else { return };
        let Some(h) = d.held[n].filter(|h| h.c == c && !h.slot_free) else {
            return;
        };
        if k.state != ContainerState::Suspended {
            return;
        }
        // Memory reclaimed: the slot runs short tasks until the suspension is over.
        d.held[n] = Some(Held {
            slot_free: true,
            ..h
        });
        self.free[n] += k.allocated;
        let over = h.since + d.cfg.settings.suspension_timeout_ms * MICROS_PER_MILLI;
        core.at(
            over.max(core.now),
            Msg::SuspensionOver { node: n as u32, c },
        );
        self.serve(core, n as u32);
    }

    fn job_arrived(&mut self, core: &mut Core<'_, Msg>, job: u32) {
        let tasks = core.wl.jobs[job as usize].num_tasks;
        let probes = tasks.saturating_mul(self.cfg.probe_ratio);
        match (Self::is_long(core, job), self.cfg.variant) {
            (true, Variant::Sparrow) => self.probe_randomly(core, job, probes),
            (true, Variant::Hawk | Variant::Eagle) => self.place_long_lwl(core, job),
            (false, _) => self.probe_randomly(core, job, probes.max(self.cfg.min_probes)),
        }
    }

    fn message(&mut self, core: &mut Core<'_, Msg>, msg: Msg) {
        match msg {
            Msg::Probe { node, job, round } => self.probe_arrives(core, node, job, round),
            Msg::Rejected { node, job, round } => self.replace(core, node, job, round),
            Msg::GetTask {
                node,
                job,
                reserved,
            } => {
                let task = core.take_task(job);
                core.send(Msg::Reply {
                    node,
                    job,
                    reserved,
                    task,
                });
            }
            Msg::Reply {
                node,
                job,
                reserved,
                task,
            } => self.reply(core, node, job, reserved, task),
            Msg::Stolen { node, count } => {
                let q = &mut self.queue[node as usize];
                q.extend(self.stolen.drain(..count as usize));
                self.serve(core, node);
            }
            Msg::DiceWindow => self.dice_window(core),
            Msg::Preempt { node } => self.dice_preempt(core, node),
            Msg::SuspensionOver { node, c } => {
                if let Some(d) = self.dice.as_mut()
                    && let Some(h) = d.held[node as usize].filter(|h| h.c == c)
                    && dice::suspension_over(
                        Some(h.since / MICROS_PER_MILLI),
                        core.now / MICROS_PER_MILLI,
                        &d.cfg.settings,
                    )
                {
                    d.held[node as usize] = Some(Held { resume: true, ..h });
                    self.try_resume(core, node);
                }
            }
        }
    }

    fn released(&mut self, core: &mut Core<'_, Msg>, r: Released) {
        let n = r.node as usize;
        let held_slot_free = match self
            .dice
            .as_mut()
            .and_then(|d| d.held[n].filter(|h| h.c == r.container).map(|h| (d, h)))
        {
            Some((d, h)) => {
                d.held[n] = None;
                h.slot_free
            }
            None => false,
        };
        // A held container's slot was handed to short tasks when it was suspended.
        if !held_slot_free {
            self.free[n] += r.shape;
        }
        if Self::is_long(core, r.job) {
            self.long_running[n] -= 1;
            self.lwl.finish(r.node, core.now);
        }
        if core.jobs[r.job as usize].finish != NONE {
            self.job_snap[r.job as usize] = None;
        }
        self.after_free(core, r.node);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.c;
        let mut v = vec![("probes", c.probes), ("no-task replies", c.noop_replies)];
        match self.cfg.variant {
            Variant::Sparrow => {}
            Variant::Hawk => v.extend([
                ("short probes behind long", c.behind_long),
                ("steal attempts", c.steal_attempts),
                ("successful steals", c.steals),
                ("stolen probes", c.stolen),
            ]),
            Variant::Eagle => v.extend([
                ("rejected probes", c.rejected),
                ("re-placed probes", c.replaced),
                ("short-partition fallbacks", c.fallbacks),
                ("sticky runs", c.sticky_runs),
            ]),
        }
        if let Some(d) = &self.dice {
            v.extend([
                ("dice windows", d.windows),
                ("dice preemption requests", d.requests),
                ("dice suspensions", d.suspended),
                ("dice resumptions", d.resumed),
            ]);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_zero_picks_only_clear_bits_uniformly() {
        // 130 nodes; bits set on all but 3, 64, 69 and 129.
        let mut bits = vec![u64::MAX, u64::MAX, u64::MAX];
        for node in [3u32, 64, 69, 129] {
            bits[(node / 64) as usize] &= !(1 << (node % 64));
        }
        let s = Snapshot::new(&bits, 130, 0);
        let mut seen = std::collections::BTreeMap::new();
        for r in 0..400u32 {
            *seen.entry(s.random_zero(130, r).unwrap()).or_insert(0) += 1;
        }
        assert_eq!(
            seen.keys().copied().collect::<Vec<_>>(),
            vec![3, 64, 69, 129]
        );
        assert!(seen.values().all(|&c| c == 100));
        assert_eq!(Snapshot::new(&[u64::MAX], 64, 0).random_zero(64, 5), None);
        // Bits past `n` do not count as clear.
        assert_eq!(Snapshot::new(&[0b0111], 3, 0).random_zero(3, 0), None);
    }
}

#[cfg(test)]
mod dice_tests {
    use super::*;
    use crate::sim::engine::{EngineConfig, run};
    use crate::sim::sched::{SchedParams, SchedulerKind};
    use crate::sim::trace::{TraceOptions, load};
    use crate::sim::workload::SLOT;

    /// Hawk and Eagle with Dice acting hard (MaxTaskWaitingTime 1 s) on a crowded
    /// cluster: suspensions happen, every slot handed to short tasks comes back, and the
    /// run ends with every node empty and every job done.
    #[test]
    fn dice_gives_every_slot_back() {
        let mut wl = load(
            &crate::sim::testutil::bundled_trace("yahoo_sub1.tr"),
            &TraceOptions::default(),
        )
        .unwrap();
        wl.jobs.truncate(600);
        let cfg = EngineConfig::new(300, SLOT);
        let mut params = SchedParams::default();
        params.policy.dice.max_task_waiting_ms = 1000;
        for kind in [SchedulerKind::HawkDice, SchedulerKind::EagleDice] {
            let mut core: Core<'_, Msg> = Core::new(&wl, &cfg).unwrap();
            let mut s = ProbeSched::new(&core, params.probe_config(kind, &wl, 300));
            run(&mut core, &mut s, &|_| {}).unwrap();
            let d = s.dice.as_ref().unwrap();
            assert!(d.windows > 10 && d.requests > 0, "{kind}: Dice never acted");
            if kind == SchedulerKind::HawkDice {
                assert!(d.suspended > 0, "hawk+dice suspended nothing");
            }
            assert_eq!(
                d.suspended,
                d.resumed + d.held.iter().flatten().count() as u64
            );
            assert!(core.all_done(), "{kind}: jobs left unfinished");
            assert!(s.free.iter().all(|f| *f == SLOT), "{kind}: a slot was lost");
            assert!(s.long_running.iter().chain(&s.long_queued).all(|&x| x == 0));
            assert!(s.queue.iter().all(|q| q.iter().all(|p| !p.long)));
            assert_eq!(core.live_containers, 0);
        }
    }
}
