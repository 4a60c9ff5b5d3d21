//! The discrete-event engine every scheduler runs on: jobs arriving, containers running at
//! the speed their limits allow, the preemption cost model, and the bookkeeping the
//! report is built from.
//!
//! Speed comes from the layout: jobs and tasks are flat vectors indexed by `u32`, live
//! containers sit in a slab whose slots are reused, the event queue holds small `Copy`
//! events, only the next job arrival is queued at a time, and stale events (a container
//! that changed speed or ended) are skipped by a generation number instead of being
//! searched for and removed; the queue drops them in one pass whenever it has doubled
//! since the last pass ([`Core::compact_events`]).

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::cluster::{ContainerState, Partition};
use crate::resources::{Limits, Resource};
use crate::sim::costs::CostModel;
use crate::sim::queue::EventQueue;
use crate::sim::workload::{JobKind, MICROS_PER_SEC, Time, Workload};

pub const NONE: Time = Time::MAX;

/// Settings of the engine itself (schedulers have their own).
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    pub nodes: u32,
    pub node_capacity: Resource,
    /// One-way delay of every message (Hawk/Eagle/Pigeon: 0.5 ms).
    pub network_delay: Time,
    pub costs: CostModel,
    /// Attempts after which a killed task fails its job (`mapreduce.map.maxattempts`).
    /// A Spark job instead fails after `spark.yarn.max.executor.failures` lost
    /// executors, Spark's default: twice its executors, at least 3.
    pub max_task_attempts: u32,
    pub seed: u64,
    /// Utilization sampling period; `None` picks about 500 samples over the trace.
    pub sample_every: Option<Time>,
    /// Event queue length at which stale events are first dropped; after a pass the
    /// queue must double before the next. Changes only speed and memory.
    pub compact_from: usize,
}

impl EngineConfig {
    /// `nodes` nodes of `node_capacity` with the papers' defaults: 0.5 ms messages, the
    /// default cost model, 4 attempts per task, seed 1, about 500 utilization samples.
    pub fn new(nodes: u32, node_capacity: Resource) -> EngineConfig {
        EngineConfig {
            nodes,
            node_capacity,
            network_delay: crate::sim::workload::secs(0.0005),
            costs: CostModel::default(),
            max_task_attempts: 4,
            seed: 1,
            sample_every: None,
            compact_from: 1 << 16,
        }
    }
}

/// What happens next. Small and `Copy` so the queue moves no heap data.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev<M> {
    Arrival(u32),
    TaskEnd {
        c: u32,
        epoch: u32,
    },
    /// A suspend, shrink or resume finished.
    Transition {
        c: u32,
        epoch: u32,
    },
    /// A killed container's resources are free.
    Killed {
        c: u32,
        epoch: u32,
    },
    Sample,
    Sched(M),
}

/// Per-job progress. Tasks are handed out in trace order; killed ones come back through
/// `retry`.
#[derive(Clone, Debug)]
pub(crate) struct JobRun {
    pub arrived: bool,
    /// Offset of the next never-launched task.
    pub next: u32,
    pub running: u32,
    pub done: u32,
    pub first_start: Time,
    pub finish: Time,
    pub failed: bool,
    /// Killed tasks waiting to run again: (task, attempts so far, resubmitted at).
    pub retry: Vec<(u32, u8, Time)>,
    /// A Spark job's executors killed so far.
    executor_failures: u32,
}

/// A task handed to a scheduler to launch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskRef {
    pub task: u32,
    pub attempts: u8,
    pub requested: Time,
}

/// A container's cgroup transition in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Steady,
    Reducing,
    Restoring,
    Killing,
}

#[derive(Clone, Debug)]
pub(crate) struct Container {
    pub job: u32,
    pub task: u32,
    pub node: u32,
    pub epoch: u32,
    pub attempts: u8,
    pub phase: Phase,
    /// What YARN allocated, and the limits it is held to (the target once a change has
    /// been issued).
    pub allocated: Resource,
    pub current: Limits,
    pub state: ContainerState,
    pub requested: Time,
    pub started: Time,
    /// Full-speed microseconds of work left, and done (attained service).
    pub work_left: f64,
    pub attained: f64,
    pub speed: f64,
    /// What it held when its last reduction began, and when that reduction, restore or
    /// kill completes.
    reduced_from: Limits,
    transition_at: Time,
    /// When `work_left` and `attained` were last brought up to date.
    pub last: Time,
    /// Milli-vcores of effective CPU counted in the utilization sum.
    eff_milli: i64,
    pub suspensions: u32,
    live: bool,
}

impl Container {
    /// Placed and not yet gone (running, squeezed or being killed).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// What it holds of its node at `now`, as (memory MB, CPU millis). A suspend's or
    /// shrink's room is free for another container only once it completes, as the
    /// controller advertises it only when the agent has reclaimed all of it; a kill's
    /// once the container is gone.
    fn held_at(&self, now: Time) -> (u64, u64) {
        let l = match self.phase {
            Phase::Reducing if now < self.transition_at => self.reduced_from,
            Phase::Killing if now < self.transition_at => Limits::from(self.allocated),
            Phase::Killing => Limits::new(0, 0),
            _ => self.current,
        };
        (l.memory_mb, u64::from(l.cpu_millis))
    }

    fn advance(&mut self, now: Time) {
        if now > self.last {
            let done = (now - self.last) as f64 * self.speed;
            self.work_left = (self.work_left - done).max(0.0);
            self.attained += done;
            self.last = now;
        }
    }
}

/// Why a container left its node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Released {
    /// The container's slot, already free for reuse.
    pub container: u32,
    pub node: u32,
    pub job: u32,
    pub shape: Resource,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct NodeRun {
    pub capacity: Resource,
    pub partition: Partition,
    /// Live containers (running, squeezed, suspended or being killed).
    pub containers: Vec<u32>,
}

/// Counts every report needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionCounts {
    pub suspended: u64,
    pub shrunk: u64,
    pub resumed: u64,
    pub killed: u64,
    /// Tasks launched again after a kill.
    pub restarted_tasks: u64,
    /// Tasks that ran out of attempts.
    pub failed_tasks: u64,
}

pub(crate) struct Util {
    alloc_milli: i64,
    eff_milli: i64,
    capacity_milli: i64,
    pub samples: Vec<(Time, f64, f64)>,
}

/// Mean waiting time of short tasks that started in the current window (Dice).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WaitWindow {
    pub sum: f64,
    pub count: u64,
}

pub(crate) struct Core<'w, M> {
    pub now: Time,
    events: EventQueue<Ev<M>>,
    pub rng: Pcg64Mcg,
    pub cfg: &'w EngineConfig,
    pub wl: &'w Workload,
    pub jobs: Vec<JobRun>,
    pub nodes: Vec<NodeRun>,
    slab: Vec<Container>,
    free_slots: Vec<u32>,
    pub counts: PreemptionCounts,
    pub util: Util,
    pub short_wait: WaitWindow,
    next_arrival: usize,
    pub jobs_closed: usize,
    pub live_containers: usize,
    last_progress: Time,
    sample_every: Time,
    pub events_run: u64,
    /// Scheduler messages queued and not yet delivered, and whether a utilization
    /// sample is due: with neither, no live container and every job done, the rest of
    /// the queue is stale container events.
    sched_queued: usize,
    sample_queued: bool,
    /// Queue length at which stale events are next dropped.
    compact_at: usize,
    abort: Option<String>,
    /// Kept only for a scheduler that asks ([`Core::track_holdings`]).
    holdings: Option<Holdings>,
    /// Slots whose container started, changed or ended since the scheduler last took
    /// them, for one that asks ([`Core::track_changes`]).
    changed: Option<SlotSet>,
}

/// What the live containers hold, kept up to date as they start, change and end, for a
/// scheduler that reads it on every tick (the capacity scheduler's idle check) and
/// would otherwise walk every container: per job, the allocation of its live
/// containers not being killed; the squeezed (suspended or shrunk) containers; and
/// each task's latest container.
pub(crate) struct Holdings {
    /// Per job: what its live, not killed containers are allocated, and how many.
    job_alloc: Vec<(Resource, u32)>,
    /// Jobs with such a container.
    jobs: SlotSet,
    /// Squeezed containers, by slot.
    squeezed: SlotSet,
    task_slot: Vec<u32>,
}

impl Holdings {
    /// Jobs with a live container that is not being killed, and what those hold.
    pub fn jobs(&self) -> impl Iterator<Item = (u32, Resource)> + '_ {
        self.jobs
            .items
            .iter()
            .map(|&j| (j, self.job_alloc[j as usize].0))
    }

    /// Live containers below their allocation (suspended or shrunk), by slot.
    pub fn squeezed(&self) -> &[u32] {
        &self.squeezed.items
    }

    fn add(&mut self, job: u32, shape: Resource) {
        let a = &mut self.job_alloc[job as usize];
        a.0 += shape;
        a.1 += 1;
        self.jobs.insert(job);
    }

    fn drop_alloc(&mut self, job: u32, shape: Resource) {
        let a = &mut self.job_alloc[job as usize];
        a.0 -= shape;
        a.1 -= 1;
        if a.1 == 0 {
            a.0 = Resource::ZERO;
            self.jobs.remove(job);
        }
    }
}

/// A set of small indexes that lists its members densely: insert, remove and
/// iteration cost O(1) per member, never a walk of the whole index range. Members keep
/// their order except that a removal moves the last member into the gap.
#[derive(Default)]
pub(crate) struct SlotSet {
    items: Vec<u32>,
    /// Per index: its place in `items`, or `u32::MAX`.
    pos: Vec<u32>,
}

impl SlotSet {
    /// The members, in the order described above.
    pub fn items(&self) -> &[u32] {
        &self.items
    }

    pub fn insert(&mut self, i: u32) {
        if self.pos.len() <= i as usize {
            self.pos.resize(i as usize + 1, u32::MAX);
        }
        if self.pos[i as usize] == u32::MAX {
            self.pos[i as usize] = self.items.len() as u32;
            self.items.push(i);
        }
    }

    pub fn remove(&mut self, i: u32) {
        let Some(&p) = self.pos.get(i as usize) else {
            return;
        };
        if p == u32::MAX {
            return;
        }
        self.items.swap_remove(p as usize);
        if let Some(&moved) = self.items.get(p as usize) {
            self.pos[moved as usize] = p;
        }
        self.pos[i as usize] = u32::MAX;
    }

    pub fn clear(&mut self) {
        for &i in &self.items {
            self.pos[i as usize] = u32::MAX;
        }
        self.items.clear();
    }
}

/// A scheduler plugs its placement logic into the engine through these callbacks.
pub(crate) trait Scheduler {
    type Msg: Copy + std::fmt::Debug;

    /// Called once before the first event (start periodic ticks here).
    fn start(&mut self, _core: &mut Core<'_, Self::Msg>) {}
    fn job_arrived(&mut self, core: &mut Core<'_, Self::Msg>, job: u32);
    fn message(&mut self, core: &mut Core<'_, Self::Msg>, msg: Self::Msg);
    /// A container finished or was killed; its resources are free on `r.node`.
    fn released(&mut self, core: &mut Core<'_, Self::Msg>, r: Released);
    /// A suspend, shrink or resume of container `c` completed.
    fn transition_done(&mut self, _core: &mut Core<'_, Self::Msg>, _c: u32) {}
    /// Scheduler-specific counters (probes, steals, hops...).
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// Raised when a run cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "the simulation stalled at {at_secs:.0} s: {stuck} jobs still have tasks that no \
         node can take and nothing is running"
    )]
    Stalled { at_secs: f64, stuck: usize },
    #[error("{0}")]
    Aborted(String),
    #[error(
        "job {job} asks for a {shape} container, larger than any node ({capacity}); \
         give nodes more capacity"
    )]
    TooLarge {
        job: usize,
        shape: Resource,
        capacity: Resource,
    },
}

/// No progress for this long with nothing running means nothing ever will.
const STALL: Time = 30 * 24 * 3600 * MICROS_PER_SEC;

impl<'w, M: Copy + std::fmt::Debug> Core<'w, M> {
    pub fn new(wl: &'w Workload, cfg: &'w EngineConfig) -> Result<Self, EngineError> {
        let max = wl.max_shape();
        if !max.fits_in(&cfg.node_capacity) {
            let job = wl
                .jobs
                .iter()
                .position(|j| {
                    wl.job_tasks(j)
                        .any(|t| !wl.shape(t).fits_in(&cfg.node_capacity))
                })
                .unwrap_or(0);
            return Err(EngineError::TooLarge {
                job,
                shape: max,
                capacity: cfg.node_capacity,
            });
        }
        let (first, last) = wl.span();
        let sample_every = cfg
            .sample_every
            .unwrap_or(((last - first) / 500).max(MICROS_PER_SEC));
        let nodes = (0..cfg.nodes)
            .map(|_| NodeRun {
                capacity: cfg.node_capacity,
                ..NodeRun::default()
            })
            .collect();
        let mut events = EventQueue::with_capacity(4096);
        let sample_queued = !wl.jobs.is_empty();
        if let Some(j) = wl.jobs.first() {
            events.push(j.arrival, Ev::Arrival(0));
            events.push(j.arrival, Ev::Sample);
        }
        Ok(Core {
            now: 0,
            events,
            rng: Pcg64Mcg::seed_from_u64(cfg.seed),
            cfg,
            wl,
            jobs: vec![
                JobRun {
                    arrived: false,
                    next: 0,
                    running: 0,
                    done: 0,
                    first_start: NONE,
                    finish: NONE,
                    failed: false,
                    retry: Vec::new(),
                    executor_failures: 0,
                };
                wl.jobs.len()
            ],
            nodes,
            slab: Vec::new(),
            free_slots: Vec::new(),
            counts: PreemptionCounts::default(),
            util: Util {
                alloc_milli: 0,
                eff_milli: 0,
                capacity_milli: cfg.nodes as i64 * cfg.node_capacity.vcores as i64 * 1000,
                samples: Vec::new(),
            },
            short_wait: WaitWindow::default(),
            next_arrival: 1,
            jobs_closed: 0,
            live_containers: 0,
            last_progress: 0,
            sample_every,
            events_run: 0,
            compact_at: cfg.compact_from,
            sched_queued: 0,
            sample_queued,
            abort: None,
            holdings: None,
            changed: None,
        })
    }

    // ---- events ----

    /// Drop the queue's stale container events (what the run loop would skip), then
    /// wait for it to double again. Each suspension leaves one behind that is never
    /// popped: the container's end at its throttled speed, far beyond the run. Left in,
    /// they would grow the queue all run long (docs/simulator.md). What remains keeps
    /// its order.
    fn compact_events(&mut self) {
        let slab = &self.slab;
        self.events.retain(|ev| !stale(slab, ev));
        self.compact_at = (2 * self.events.len()).max(self.cfg.compact_from);
    }

    pub fn at(&mut self, time: Time, msg: M) {
        self.sched_queued += 1;
        self.events.push(time, Ev::Sched(msg));
    }

    pub fn after(&mut self, delay: Time, msg: M) {
        self.sched_queued += 1;
        self.events
            .push(self.now.saturating_add(delay), Ev::Sched(msg));
    }

    /// Deliver `msg` one network delay from now.
    pub fn send(&mut self, msg: M) {
        self.after(self.cfg.network_delay, msg);
    }

    pub fn net(&self) -> Time {
        self.cfg.network_delay
    }

    /// Stop the run with an error after the current event (a scheduler cannot go on).
    pub fn abort(&mut self, why: String) {
        self.abort.get_or_insert(why);
    }

    /// True once every job has arrived and finished or failed; periodic ticks stop then.
    pub fn all_done(&self) -> bool {
        self.jobs_closed == self.jobs.len()
    }

    // ---- jobs and tasks ----

    /// Tasks of `job` not running or done.
    pub fn pending(&self, job: u32) -> u32 {
        let r = &self.jobs[job as usize];
        if r.failed {
            return 0;
        }
        self.wl.jobs[job as usize].num_tasks - r.next + r.retry.len() as u32
    }

    /// The next task of `job` to launch: resubmitted ones first.
    pub fn take_task(&mut self, job: u32) -> Option<TaskRef> {
        let spec = self.wl.jobs[job as usize];
        let r = &mut self.jobs[job as usize];
        if r.failed {
            return None;
        }
        if let Some((task, attempts, requested)) = r.retry.pop() {
            return Some(TaskRef {
                task,
                attempts,
                requested,
            });
        }
        if r.next < spec.num_tasks {
            let task = spec.first_task + r.next;
            r.next += 1;
            return Some(TaskRef {
                task,
                attempts: 0,
                requested: spec.arrival,
            });
        }
        None
    }

    /// Shape of the task `take_task` would return, without taking it.
    pub fn peek_shape(&self, job: u32) -> Option<Resource> {
        let spec = self.wl.jobs[job as usize];
        let r = &self.jobs[job as usize];
        if r.failed {
            return None;
        }
        if let Some(&(task, _, _)) = r.retry.last() {
            return Some(self.wl.shape(task as usize));
        }
        (r.next < spec.num_tasks).then(|| self.wl.shape((spec.first_task + r.next) as usize))
    }

    /// Put a task that was taken but not launched back (a late-binding reply that found
    /// the node gone, say).
    pub fn untake(&mut self, job: u32, t: TaskRef) {
        self.jobs[job as usize]
            .retry
            .push((t.task, t.attempts, t.requested));
    }

    // ---- containers ----

    pub fn container(&self, c: u32) -> &Container {
        &self.slab[c as usize]
    }

    /// Keep [`Holdings`] from now on; call before the first container starts.
    pub fn track_holdings(&mut self) {
        let mut h = Holdings {
            job_alloc: vec![(Resource::ZERO, 0); self.wl.jobs.len()],
            jobs: SlotSet::default(),
            squeezed: SlotSet::default(),
            task_slot: vec![u32::MAX; self.wl.num_tasks()],
        };
        for (i, k) in self.slab.iter().enumerate() {
            if k.live && k.state != ContainerState::Killed {
                h.add(k.job, k.allocated);
                h.task_slot[k.task as usize] = i as u32;
                if k.state != ContainerState::Running {
                    h.squeezed.insert(i as u32);
                }
            }
        }
        self.holdings = Some(h);
    }

    pub fn holdings(&self) -> Option<&Holdings> {
        self.holdings.as_ref()
    }

    /// Whether the kept [`Holdings`] agree with a walk of every container (for debug
    /// assertions; true when none are kept).
    pub fn holdings_agree(&self) -> bool {
        let Some(h) = &self.holdings else {
            return true;
        };
        let mut alloc = vec![(Resource::ZERO, 0u32); self.wl.jobs.len()];
        let mut squeezed = Vec::new();
        for (i, k) in self.containers() {
            if k.state == ContainerState::Killed {
                continue;
            }
            let a = &mut alloc[k.job as usize];
            a.0 += k.allocated;
            a.1 += 1;
            if k.state != ContainerState::Running {
                squeezed.push(i);
            }
            if h.task_slot.get(k.task as usize) != Some(&i) {
                return false;
            }
        }
        let mut kept = h.squeezed.items.clone();
        kept.sort_unstable();
        let mut jobs = h.jobs.items.clone();
        jobs.sort_unstable();
        let holding: Vec<u32> = (0..alloc.len() as u32)
            .filter(|&j| alloc[j as usize].1 > 0)
            .collect();
        alloc == h.job_alloc && kept == squeezed && jobs == holding
    }

    /// The live, not killed container of `job` that YARN would number `number`
    /// (2 + task offset + attempts x tasks, as the views name them), if tracked.
    pub fn container_numbered(&self, job: u32, number: u64) -> Option<u32> {
        let h = self.holdings.as_ref()?;
        let spec = self.wl.jobs.get(job as usize)?;
        let n = number.checked_sub(2)?;
        let tasks = u64::from(spec.num_tasks.max(1));
        let task = spec.first_task as u64 + n % tasks;
        let c = *h.task_slot.get(usize::try_from(task).ok()?)?;
        let k = self.slab.get(c as usize)?;
        (k.live
            && k.job == job
            && u64::from(k.attempts) == n / tasks
            && k.state != ContainerState::Killed)
            .then_some(c)
    }

    /// List the slots whose container starts, changes limits, state or phase, or ends,
    /// from now on, for [`Core::take_changed`].
    pub fn track_changes(&mut self) {
        self.changed = Some(SlotSet::default());
    }

    /// The slots changed since the last call (each once, in no particular order) into
    /// `out`; a slot may have been freed and reused since.
    pub fn take_changed(&mut self, out: &mut Vec<u32>) {
        if let Some(set) = &mut self.changed {
            out.extend_from_slice(set.items());
            set.clear();
        }
    }

    fn touch(&mut self, c: u32) {
        if let Some(set) = &mut self.changed {
            set.insert(c);
        }
    }

    /// When room for `need` is free on `node`: now, or once enough of the reductions
    /// and kills in flight there have completed. Room the node cannot free at all
    /// (LAS over-admission) waits for every one of them, no longer.
    fn room_free_at(&self, node: u32, need: Resource) -> Time {
        let now = self.now;
        let n = &self.nodes[node as usize];
        let (mut mem, mut cpu) = (need.memory_mb, u64::from(need.vcores) * 1000);
        for &c in &n.containers {
            let (m, p) = self.slab[c as usize].held_at(now);
            mem += m;
            cpu += p;
        }
        let (cap_mem, cap_cpu) = (n.capacity.memory_mb, u64::from(n.capacity.vcores) * 1000);
        if mem <= cap_mem && cpu <= cap_cpu {
            return now;
        }
        let mut frees: Vec<(Time, u64, u64)> = n
            .containers
            .iter()
            .map(|&c| &self.slab[c as usize])
            .filter(|k| k.transition_at > now)
            .map(|k| {
                let (m0, p0) = k.held_at(now);
                let (m1, p1) = k.held_at(k.transition_at);
                (
                    k.transition_at,
                    m0.saturating_sub(m1),
                    p0.saturating_sub(p1),
                )
            })
            .collect();
        frees.sort_unstable();
        let mut at = now;
        for (t, m, p) in frees {
            if mem <= cap_mem && cpu <= cap_cpu {
                break;
            }
            at = t;
            mem -= m;
            cpu -= p;
        }
        at
    }

    /// Start task `t` of `job` on `node` now, or once memory reclaimed there is free.
    pub fn launch(&mut self, job: u32, t: TaskRef, node: u32) -> u32 {
        let shape = self.wl.shape(t.task as usize);
        let start = self.room_free_at(node, shape);
        let work = self.wl.durations[t.task as usize] as f64;
        let c = Container {
            job,
            task: t.task,
            node,
            epoch: 0,
            attempts: t.attempts,
            phase: Phase::Steady,
            allocated: shape,
            current: Limits::from(shape),
            state: ContainerState::Running,
            requested: t.requested,
            started: start,
            work_left: work,
            attained: 0.0,
            speed: 1.0,
            reduced_from: Limits::new(0, 0),
            transition_at: 0,
            last: start,
            eff_milli: 0,
            suspensions: 0,
            live: true,
        };
        let id = match self.free_slots.pop() {
            Some(i) => {
                let epoch = self.slab[i as usize].epoch.wrapping_add(1);
                self.slab[i as usize] = Container { epoch, ..c };
                i
            }
            None => {
                self.slab.push(c);
                (self.slab.len() - 1) as u32
            }
        };
        self.nodes[node as usize].containers.push(id);
        self.touch(id);
        if let Some(h) = &mut self.holdings {
            h.add(job, shape);
            h.task_slot[t.task as usize] = id;
        }
        self.live_containers += 1;
        self.util.alloc_milli += shape.vcores as i64 * 1000;
        self.set_eff(id);
        let epoch = self.slab[id as usize].epoch;
        self.events
            .push(start + work.ceil() as Time, Ev::TaskEnd { c: id, epoch });
        let spec = self.wl.jobs[job as usize];
        let r = &mut self.jobs[job as usize];
        r.running += 1;
        if r.first_start == NONE {
            r.first_start = start;
        }
        if t.attempts > 0 {
            self.counts.restarted_tasks += 1;
        }
        if spec.class == crate::cluster::JobClass::Short {
            self.short_wait.sum += (start - spec.arrival) as f64;
            self.short_wait.count += 1;
        }
        self.last_progress = self.now;
        id
    }

    /// Bring a container's work and attained service up to now.
    pub fn advance(&mut self, c: u32) {
        let now = self.now;
        self.slab[c as usize].advance(now);
    }

    fn set_eff(&mut self, c: u32) {
        let k = &mut self.slab[c as usize];
        let eff = (k.speed * k.allocated.vcores as f64 * 1000.0).round() as i64;
        self.util.eff_milli += eff - k.eff_milli;
        k.eff_milli = eff;
    }

    /// Change the speed of a running container and move its end.
    fn set_speed(&mut self, c: u32, speed: f64) {
        self.advance(c);
        let k = &mut self.slab[c as usize];
        k.speed = speed;
        k.epoch = k.epoch.wrapping_add(1);
        let (epoch, last, left) = (k.epoch, k.last, k.work_left);
        self.set_eff(c);
        if speed > 0.0 {
            let end = last.max(self.now) + (left / speed).ceil() as Time;
            self.events.push(end, Ev::TaskEnd { c, epoch });
        }
    }

    /// Hold container `c` to `to` (suspend when `to` is the footprint, shrink otherwise):
    /// CPU is throttled at once, then memory is reclaimed at the cost model's rate.
    pub fn reduce(&mut self, c: u32, to: Limits, suspend: bool) {
        let costs = &self.cfg.costs;
        let k = &self.slab[c as usize];
        if !k.live || k.phase == Phase::Killing {
            return;
        }
        let from = k.current;
        // What a reduction still in flight has not freed yet is reclaimed too.
        let (held_mb, _) = k.held_at(self.now);
        let held = Limits::new(held_mb, from.cpu_millis);
        let delay = costs.reclaim_delay(held, to);
        let ready = self.now + delay;
        let alloc = k.allocated;
        // Until memory is gone the task is throttled but not yet swapping.
        let cpu_now = Limits::new(from.memory_mb.max(to.memory_mb), to.cpu_millis);
        let speed = costs.speed(alloc, cpu_now);
        {
            let k = &mut self.slab[c as usize];
            k.current = to;
            k.state = if suspend {
                ContainerState::Suspended
            } else {
                ContainerState::Shrunk
            };
            // Stacked on one still in flight: it held what that one started from.
            k.reduced_from = if k.phase == Phase::Reducing {
                held.component_max(k.reduced_from)
            } else {
                held
            };
            k.phase = Phase::Reducing;
            k.transition_at = ready;
            if suspend {
                k.suspensions += 1;
            }
        }
        if let Some(h) = &mut self.holdings {
            h.squeezed.insert(c);
        }
        self.touch(c);
        if suspend {
            self.counts.suspended += 1;
        } else {
            self.counts.shrunk += 1;
        }
        self.set_speed(c, speed);
        let epoch = self.slab[c as usize].epoch;
        self.events.push(ready, Ev::Transition { c, epoch });
    }

    /// Give container `c` its limits back up to `to`: memory first, then CPU once it is
    /// loaded.
    pub fn restore(&mut self, c: u32, to: Limits) {
        let k = &self.slab[c as usize];
        if !k.live || k.phase == Phase::Killing {
            return;
        }
        let delay = self.cfg.costs.reload_delay(k.current, to);
        let full = Limits::from(k.allocated);
        {
            let k = &mut self.slab[c as usize];
            k.current = to;
            k.state = if to == full {
                ContainerState::Running
            } else {
                ContainerState::Shrunk
            };
            k.phase = Phase::Restoring;
            k.epoch = k.epoch.wrapping_add(1);
            k.transition_at = self.now + delay;
        }
        if let Some(h) = &mut self.holdings {
            if to == full {
                h.squeezed.remove(c);
            } else {
                h.squeezed.insert(c);
            }
        }
        self.touch(c);
        self.counts.resumed += 1;
        let epoch = self.slab[c as usize].epoch;
        self.events
            .push(self.now + delay, Ev::Transition { c, epoch });
    }

    /// Kill container `c`: its work is lost and the task goes back to its job, or fails
    /// the job once it has used its attempts.
    pub fn kill(&mut self, c: u32) {
        let k = &self.slab[c as usize];
        if !k.live || k.phase == Phase::Killing {
            return;
        }
        let at = self.now + self.cfg.costs.kill_delay();
        self.set_speed(c, 0.0);
        let k = &mut self.slab[c as usize];
        k.phase = Phase::Killing;
        k.state = ContainerState::Killed;
        k.transition_at = at;
        let epoch = k.epoch;
        if let Some(h) = &mut self.holdings {
            h.squeezed.remove(c);
            h.drop_alloc(k.job, k.allocated);
        }
        self.touch(c);
        self.counts.killed += 1;
        self.events.push(at, Ev::Killed { c, epoch });
    }

    fn remove(&mut self, c: u32) -> Released {
        let k = &mut self.slab[c as usize];
        k.live = false;
        k.epoch = k.epoch.wrapping_add(1);
        let r = Released {
            container: c,
            node: k.node,
            job: k.job,
            shape: k.allocated,
        };
        if let Some(h) = &mut self.holdings {
            if k.state != ContainerState::Killed {
                h.squeezed.remove(c);
                h.drop_alloc(k.job, k.allocated);
            }
            if h.task_slot.get(k.task as usize) == Some(&c) {
                h.task_slot[k.task as usize] = u32::MAX;
            }
        }
        self.touch(c);
        let list = &mut self.nodes[r.node as usize].containers;
        if let Some(p) = list.iter().position(|&x| x == c) {
            list.swap_remove(p);
        }
        self.util.alloc_milli -= r.shape.vcores as i64 * 1000;
        self.util.eff_milli -= self.slab[c as usize].eff_milli;
        self.slab[c as usize].eff_milli = 0;
        self.free_slots.push(c);
        self.live_containers -= 1;
        self.jobs[r.job as usize].running -= 1;
        self.last_progress = self.now;
        r
    }

    /// A suspend, shrink or resume of `c` completed.
    fn transition_done(&mut self, c: u32) {
        let k = &self.slab[c as usize];
        let (phase, alloc, current) = (k.phase, k.allocated, k.current);
        self.slab[c as usize].phase = Phase::Steady;
        self.touch(c);
        // Reducing: memory is now gone and the container may start swapping.
        // Restoring: memory is back and the CPU limit is lifted.
        if matches!(phase, Phase::Reducing | Phase::Restoring) {
            let s = self.cfg.costs.speed(alloc, current);
            self.set_speed(c, s);
        }
    }

    /// A killed container's resources are free. Its task goes back to its job, or
    /// fails the job once out of attempts: a MapReduce task after
    /// `mapreduce.map.maxattempts`, a Spark job after `spark.yarn.max.executor.failures`
    /// lost executors (twice its executors, at least 3).
    fn killed(&mut self, c: u32) -> Released {
        let k = &self.slab[c as usize];
        let (job, task, attempts) = (k.job, k.task, k.attempts);
        let r = self.remove(c);
        let attempts = attempts.saturating_add(1);
        let spec = &self.wl.jobs[job as usize];
        let jr = &mut self.jobs[job as usize];
        if jr.failed {
            return r;
        }
        let out_of_attempts = if spec.kind == JobKind::Spark {
            jr.executor_failures += 1;
            jr.executor_failures >= (2 * spec.num_tasks).max(3)
        } else {
            u32::from(attempts) >= self.cfg.max_task_attempts
        };
        if out_of_attempts {
            self.counts.failed_tasks += 1;
            self.fail_job(job);
        } else {
            jr.retry.push((task, attempts, self.now));
        }
        r
    }

    fn close_job(&mut self, job: u32) {
        let r = &mut self.jobs[job as usize];
        if r.finish == NONE {
            r.finish = self.now;
            self.jobs_closed += 1;
        }
    }

    /// Fail `job`: drop its pending tasks and kill what still runs, as YARN does when an
    /// application fails.
    fn fail_job(&mut self, job: u32) {
        self.jobs[job as usize].failed = true;
        self.jobs[job as usize].retry.clear();
        self.close_job(job);
        let victims: Vec<u32> = (0..self.slab.len() as u32)
            .filter(|&c| {
                let k = &self.slab[c as usize];
                k.live && k.job == job && k.phase != Phase::Killing
            })
            .collect();
        for c in victims {
            self.kill(c);
        }
    }

    /// Effective and allocated shares of the cluster's vcores right now.
    pub fn utilization(&self) -> (f64, f64) {
        let cap = self.util.capacity_milli.max(1) as f64;
        (
            self.util.alloc_milli as f64 / cap,
            self.util.eff_milli as f64 / cap,
        )
    }

    pub fn containers(&self) -> impl Iterator<Item = (u32, &Container)> {
        self.slab
            .iter()
            .enumerate()
            .filter(|(_, k)| k.live)
            .map(|(i, k)| (i as u32, k))
    }
}

/// Run a scheduler over the whole workload. `progress` is told the number of finished
/// jobs every so often.
/// An event of a container that has since changed speed or ended: the run loop skips
/// it, and [`Core::compact_events`] drops it.
fn stale<M>(slab: &[Container], ev: &Ev<M>) -> bool {
    match *ev {
        Ev::TaskEnd { c, epoch } | Ev::Transition { c, epoch } | Ev::Killed { c, epoch } => slab
            .get(c as usize)
            .is_none_or(|k| !k.live || k.epoch != epoch),
        _ => false,
    }
}

pub(crate) fn run<S: Scheduler>(
    core: &mut Core<'_, S::Msg>,
    sched: &mut S,
    progress: &dyn Fn(u64),
) -> Result<(), EngineError> {
    sched.start(core);
    while let Some((t, ev)) = core.events.pop() {
        debug_assert!(t >= core.now, "time went backwards");
        // A container that changed speed or ended leaves its old events behind; they must
        // not move the clock (a throttled container's end can lie far in the future).
        if stale(&core.slab, &ev) {
            continue;
        }
        core.now = t;
        core.events_run += 1;
        if core.events_run & 0xffff == 0 {
            progress(core.jobs_closed as u64);
        }
        match ev {
            Ev::Arrival(j) => {
                core.jobs[j as usize].arrived = true;
                if let Some(next) = core.wl.jobs.get(core.next_arrival) {
                    let at = next.arrival;
                    core.events.push(at, Ev::Arrival(core.next_arrival as u32));
                    core.next_arrival += 1;
                }
                sched.job_arrived(core, j);
            }
            Ev::TaskEnd { c, .. } => {
                core.advance(c);
                let job = core.slab[c as usize].job;
                let r = core.remove(c);
                let jr = &mut core.jobs[job as usize];
                jr.done += 1;
                if jr.done == core.wl.jobs[job as usize].num_tasks && !jr.failed {
                    core.close_job(job);
                }
                sched.released(core, r);
            }
            Ev::Transition { c, .. } => {
                core.transition_done(c);
                sched.transition_done(core, c);
            }
            Ev::Killed { c, .. } => {
                let r = core.killed(c);
                sched.released(core, r);
            }
            Ev::Sample => {
                core.sample_queued = false;
                let (alloc, eff) = core.utilization();
                core.util.samples.push((core.now, alloc, eff));
                if !core.all_done() {
                    // Nothing runs, nothing is due, or nothing happened for a month:
                    // nothing ever will.
                    if core.live_containers == 0
                        && core.next_arrival >= core.wl.jobs.len()
                        && (core.events.is_empty() || core.now - core.last_progress > STALL)
                    {
                        return Err(EngineError::Stalled {
                            at_secs: crate::sim::workload::to_secs(core.now),
                            stuck: core.jobs.len() - core.jobs_closed,
                        });
                    }
                    let at = core.now + core.sample_every;
                    core.events.push(at, Ev::Sample);
                    core.sample_queued = true;
                }
            }
            Ev::Sched(m) => {
                core.sched_queued -= 1;
                sched.message(core, m);
                if let Some(why) = core.abort.take() {
                    return Err(EngineError::Aborted(why));
                }
            }
        }
        if core.events.len() > core.compact_at {
            core.compact_events();
        }
        // Popping the stale events left (a suspended container's far-off end, say)
        // would change nothing but cost time.
        if core.all_done()
            && core.live_containers == 0
            && core.sched_queued == 0
            && !core.sample_queued
        {
            break;
        }
    }
    progress(core.jobs_closed as u64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Core;
    use crate::cluster::PolicyKind;
    use crate::resources::{Limits, Resource};
    use crate::sim::trace::synth::{SynthSpec, generate};
    use crate::sim::workload::tests::slot_workload;
    use crate::sim::workload::{JobKind, secs};
    use crate::sim::{EngineConfig, SchedParams, SchedulerKind, SimSetup, simulate};

    /// A job of two 1,000 s tasks of 2 GB and 2 vcores (a Spark job's executors if
    /// `spark`) and a job of one 10 s task, on two nodes of that size, with the
    /// default costs (3 s per GB reclaimed, 10 s per GB reloaded, kills at once).
    fn two_nodes(spark: bool) -> (crate::sim::Workload, EngineConfig) {
        let mut wl = slot_workload(&[(0.0, &[1000.0, 1000.0]), (0.0, &[10.0])], 90.0);
        if spark {
            wl.jobs[0].kind = JobKind::Spark;
        }
        wl.shapes = vec![Resource::new(2048, 2)];
        (wl, EngineConfig::new(2, Resource::new(2048, 2)))
    }

    /// Launch every task of job 0, the n-th on node n.
    fn launch_first_job(core: &mut Core<'_, ()>) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(t) = core.take_task(0) {
            let node = out.len() as u32;
            out.push(core.launch(0, t, node));
        }
        out
    }

    #[test]
    fn room_a_reduction_frees_is_usable_only_once_it_completes() {
        let (wl, cfg) = two_nodes(false);
        let mut core: Core<'_, ()> = Core::new(&wl, &cfg).unwrap();
        let cs = launch_first_job(&mut core);
        core.now = secs(5.0);
        // Shrinking to 1 GB and 1 vcore reclaims 1 GB: 3 s at the default rate.
        core.reduce(cs[0], Limits::new(1024, 1000), false);
        assert_eq!(core.room_free_at(0, Resource::new(1024, 1)), secs(8.0));
        assert_eq!(
            core.room_free_at(0, Resource::new(2048, 2)),
            secs(8.0),
            "more than the node can free waits for all it frees, no longer"
        );
        let t = core.take_task(1).unwrap();
        let c = core.launch(1, t, 0);
        assert_eq!(core.container(c).started, secs(8.0));
        // A kill's room is free when the kill completes: at once by default.
        core.kill(cs[1]);
        assert_eq!(core.room_free_at(1, Resource::new(2048, 2)), secs(5.0));
    }

    #[test]
    fn a_spark_job_fails_once_twice_its_executors_are_lost() {
        for (spark, kills, failed) in [(true, 3, false), (true, 4, true), (false, 6, false)] {
            let (wl, cfg) = two_nodes(spark);
            let mut core: Core<'_, ()> = Core::new(&wl, &cfg).unwrap();
            for _ in 0..kills / 2 {
                for c in launch_first_job(&mut core) {
                    core.kill(c);
                    core.killed(c);
                }
            }
            if kills % 2 == 1 {
                let c = launch_first_job(&mut core)[0];
                core.kill(c);
                core.killed(c);
            }
            // Two executors: spark.yarn.max.executor.failures = max(2 x 2, 3) = 4. A
            // MapReduce task fails its job at its fourth attempt; three each is fine.
            assert_eq!(core.jobs[0].failed, failed, "spark {spark}, {kills} kills");
        }
    }

    /// Dropping stale events as often as possible gives the very run that never
    /// dropping them gives, for schedulers that suspend, shrink and kill.
    #[test]
    fn dropping_stale_events_changes_no_report() {
        let spec: SynthSpec = "bigc:pattern=high,nodes=8,seconds=900".parse().unwrap();
        let wl = generate(&spec, 5);
        let cluster = wl.suggested_cluster.unwrap();
        for kind in [
            SchedulerKind::Capacity(PolicyKind::Las),
            SchedulerKind::Capacity(PolicyKind::Graceful),
            SchedulerKind::Capacity(PolicyKind::Kill),
            SchedulerKind::Kairos,
            SchedulerKind::HawkDice,
        ] {
            let run = |compact_from| {
                let setup = SimSetup {
                    engine: EngineConfig {
                        compact_from,
                        ..EngineConfig::new(cluster.nodes, cluster.node_capacity)
                    },
                    params: SchedParams::default(),
                };
                let mut r = simulate(&wl, &setup, kind, &|_| {}).unwrap();
                (r.run.wall_secs, r.run.jobs_per_sec) = (0.0, 0.0);
                r
            };
            let never = run(usize::MAX);
            assert!(
                never.preemptions.suspended + never.preemptions.shrunk + never.preemptions.killed
                    > 0,
                "{kind:?}: nothing to leave stale events"
            );
            assert_eq!(run(1), never, "{kind:?}");
        }
    }
}
