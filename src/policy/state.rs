//! What a policy remembers between ticks. The view is rebuilt every tick and is the
//! truth about containers; the state only adds what the view cannot say (when a
//! container was suspended, how often it was picked for resumption, LAS timers, Dice's
//! window), keyed by container id so that containers may come and go freely.
//!
//! A tick never walks all of it: memos are looked up by id as containers are
//! considered, memos of containers that left are swept a slice per tick, and the few
//! kill marks are kept in their own ordered set.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use rand::SeedableRng;
use rand_pcg::Pcg64;

use super::dice::DiceWindow;
use super::engine::TickBuffers;
use crate::cluster::{ClusterView, ContainerId, ContainerIdx, IdMap, Millis, NodeId};
use crate::config::settings::PolicySettings;

/// Everything a policy carries from one tick to the next. One per controller (or
/// simulator run); see [`super::decide`].
#[derive(Clone, Debug)]
pub struct PolicyState {
    pub(crate) settings: PolicySettings,
    pub(crate) rng: Pcg64,
    pub(crate) memos: MemoStore,
    pub(crate) dice: DiceState,
    /// LAS: per node, when it next needs a look even if nothing arrives or finishes
    /// there (its earliest quantum expiry while a container waits).
    pub(crate) las_checks: LasTimers,
    /// The last tick's per-node arrays, reused by the next.
    pub(crate) buffers: TickBuffers,
    /// Whether plans explain themselves ([`PolicyState::set_explain`]).
    pub(crate) explain: bool,
}

impl PolicyState {
    pub fn new(settings: PolicySettings) -> Self {
        PolicyState {
            rng: Pcg64::seed_from_u64(settings.seed),
            settings,
            memos: MemoStore::default(),
            dice: DiceState::default(),
            las_checks: LasTimers::default(),
            buffers: TickBuffers::default(),
            explain: true,
        }
    }

    pub fn settings(&self) -> &PolicySettings {
        &self.settings
    }

    /// Replace the settings (SIGHUP). Suspended containers stay where they are; the next
    /// decision applies the new policy to them, and `none` resumes them all. A new seed
    /// restarts the random sequence.
    pub fn set_settings(&mut self, s: PolicySettings) {
        if s.seed != self.settings.seed {
            self.rng = Pcg64::seed_from_u64(s.seed);
        }
        self.settings = s;
    }

    /// Off: actions carry an empty reason and name no queue, node or queue the room is
    /// for, and plans carry no notes; the actions are the same. For a caller that reads
    /// only what the actions do (the simulator, whose ticks act hundreds of thousands of
    /// times and would format and copy a log line's parts each time).
    pub fn set_explain(&mut self, on: bool) {
        self.explain = on;
    }

    /// Containers the state currently remembers something about (including some that
    /// left the view and are not swept yet).
    pub fn remembered_containers(&self) -> usize {
        self.memos.map.len()
    }
}

/// Per-container memory. `Default` means "nothing to remember".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Memo {
    /// When Preemptor first took something from it in its current suspension.
    pub suspended_at: Option<Millis>,
    /// Delayed resumption: how often it was picked since it was suspended, and when
    /// last (one pick per monitoring interval, however often `decide` runs).
    pub resume_picks: u32,
    pub last_pick_at: Option<Millis>,
    /// `graceful`: when it was last stepped down (one step per monitoring interval).
    pub last_step_at: Option<Millis>,
    /// `kill`: marked at, waiting for `max_wait_before_kill`.
    pub kill_marked_at: Option<Millis>,
    /// LAS: preemptions since it last ran a guarded quantum.
    pub las_preemptions: u32,
    /// LAS: start of its current quantum, when not its start time.
    pub quantum_start: Option<Millis>,
    /// Dice: how often it was suspended (at most `max_suspensions`).
    pub dice_suspensions: u32,
}

impl Memo {
    /// Something was taken from the container: a suspension starts, or goes on.
    pub fn suspended(&mut self, now: Millis) {
        self.suspended_at.get_or_insert(now);
        self.resume_picks = 0;
        self.last_pick_at = None;
    }

    /// It has its whole allocation back.
    pub fn resumed(&mut self) {
        self.suspended_at = None;
        self.resume_picks = 0;
        self.last_pick_at = None;
        self.last_step_at = None;
    }
}

/// LAS timers by node, laid out as the last view listed its nodes. A tick finds a
/// node's timer by its place instead of hashing its id (the simulator's ticks look up
/// thousands). A view with another [`ClusterView::node_layout`] is checked once against
/// the node ids the timers were laid out for, and the timers are re-laid by id if it
/// lists its nodes otherwise.
#[derive(Clone, Debug, Default)]
pub(crate) struct LasTimers {
    layout: Option<u64>,
    ids: Vec<NodeId>,
    at: Vec<Option<Millis>>,
    /// The timers by time (node places), so that a tick finds the due ones without
    /// reading every node's; an entry whose node has another time now is stale.
    by_time: BinaryHeap<Reverse<(Millis, u32)>>,
}

impl LasTimers {
    /// When node `n` of `view` next needs a look, if it has a timer.
    pub fn get(&mut self, view: &ClusterView, n: usize) -> Option<Millis> {
        self.align(view);
        self.at[n]
    }

    pub fn set(&mut self, view: &ClusterView, n: usize, at: Option<Millis>) {
        self.align(view);
        self.at[n] = at;
        if let Some(t) = at {
            self.by_time.push(Reverse((t, n as u32)));
        }
    }

    /// Adds to `out` the nodes whose timer is due at `now` and was not reported due
    /// before (a node may be listed twice).
    pub fn due(&mut self, view: &ClusterView, now: Millis, out: &mut Vec<u32>) {
        self.align(view);
        while let Some(&Reverse((t, n))) = self.by_time.peek() {
            if t > now {
                break;
            }
            self.by_time.pop();
            if self.at.get(n as usize) == Some(&Some(t)) {
                out.push(n);
            }
        }
    }

    /// Lays the timers out as `view` lists its nodes. Timers of nodes no longer in the
    /// view are dropped: a node that comes back gets a look at once, which a node
    /// without a timer always gets.
    #[inline]
    fn align(&mut self, view: &ClusterView) {
        // The length too: `nodes` is public, and a caller that edits it keeps the layout.
        if self.layout != Some(view.node_layout()) || self.at.len() != view.nodes.len() {
            self.lay_out(view);
        }
    }

    #[cold]
    fn lay_out(&mut self, view: &ClusterView) {
        self.layout = Some(view.node_layout());
        let same = self.ids.len() == view.nodes.len()
            && self.ids.iter().zip(&view.nodes).all(|(id, n)| *id == n.id);
        if same {
            return;
        }
        let by_id: IdMap<NodeId, Millis> = self
            .ids
            .drain(..)
            .zip(self.at.drain(..))
            .filter_map(|(id, t)| Some((id, t?)))
            .collect();
        self.ids = view.nodes.iter().map(|n| n.id.clone()).collect();
        self.at = self.ids.iter().map(|id| by_id.get(id).copied()).collect();
        self.by_time = (self.at.iter().enumerate())
            .filter_map(|(n, t)| Some(Reverse(((*t)?, n as u32))))
            .collect();
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct DiceState {
    pub window: Option<DiceWindow>,
    /// Samples are taken from containers started after this.
    pub last_sample_ms: Option<Millis>,
    /// Short partition size decided for the current window.
    pub short_partition: Option<usize>,
    /// The short jobs' share of task-seconds in the last window that saw any.
    pub short_share: Option<f64>,
}

/// Memos by container id, the order in which they are swept, and the marked ones with
/// where each was in the last view (checked before use: a new view may order its
/// containers differently; where it does not, a tick finds its marked containers
/// without a lookup in the view's container index, a cache miss each on a large view).
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoStore {
    map: IdMap<ContainerId, Memo>,
    sweep: VecDeque<ContainerId>,
    marked: BTreeMap<ContainerId, ContainerIdx>,
}

impl MemoStore {
    /// The marked containers and when each was marked (`None` if its memo is gone),
    /// in id order; read-only, for the simulator's idle-tick check.
    pub(crate) fn kill_marks(&self) -> impl Iterator<Item = (ContainerId, Option<Millis>)> + '_ {
        self.marked
            .keys()
            .map(|id| (*id, self.map.get(id).and_then(|m| m.kill_marked_at)))
    }
}

/// One tick's access to the memos of the containers in its view.
pub(crate) struct Memos<'a> {
    store: &'a mut MemoStore,
    view: &'a ClusterView,
    touched: Vec<ContainerIdx>,
}

impl<'a> Memos<'a> {
    pub fn new(view: &'a ClusterView, store: &'a mut MemoStore) -> Self {
        Memos {
            store,
            view,
            touched: Vec::new(),
        }
    }

    pub fn get(&self, c: ContainerIdx) -> Memo {
        let id = self.view.container(c).id;
        self.store.map.get(&id).copied().unwrap_or_default()
    }

    pub fn get_mut(&mut self, c: ContainerIdx, id: ContainerId) -> &mut Memo {
        self.touched.push(c);
        let store = &mut *self.store;
        store.map.entry(id).or_insert_with(|| {
            store.sweep.push_back(id);
            Memo::default()
        })
    }

    /// Live containers marked for killing, in id order.
    pub fn marked(&self) -> Vec<ContainerIdx> {
        let view = self.view;
        self.store
            .marked
            .iter()
            .filter_map(|(id, &at)| {
                let hinted = view.containers.get(at.get()).is_some_and(|c| c.id == *id);
                if hinted {
                    Some(at)
                } else {
                    view.container_by_id(id)
                }
            })
            .filter(|&c| view.container(c).is_live())
            .collect()
    }

    /// Drop what is no longer worth keeping among the memos touched this tick, keep
    /// the marked set in step, and sweep a slice of the rest for containers that left.
    pub fn finish(self) {
        let Memos {
            store,
            view,
            touched,
        } = self;
        for c in touched {
            let id = view.container(c).id;
            let memo = store.map.get(&id).copied().unwrap_or_default();
            if memo == Memo::default() || !view.container(c).is_live() {
                store.map.remove(&id);
                store.marked.remove(&id);
            } else if memo.kill_marked_at.is_some() {
                store.marked.insert(id, c);
            } else {
                store.marked.remove(&id);
            }
        }
        // Small enough to cost little per tick; the whole store is still swept every
        // few hundred ticks, so memos of finished containers do not pile up.
        let slice = 64 + store.map.len() / 512;
        for _ in 0..slice.min(store.sweep.len()) {
            let Some(id) = store.sweep.pop_front() else {
                break;
            };
            if !store.map.contains_key(&id) {
                continue;
            }
            let alive = view
                .container_by_id(&id)
                .is_some_and(|c| view.container(c).is_live());
            if alive {
                store.sweep.push_back(id);
            } else {
                store.map.remove(&id);
                store.marked.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LasTimers;
    use crate::cluster::builder::ClusterBuilder;
    use crate::resources::Resource;

    fn view(ids: &[&str]) -> crate::cluster::ClusterView {
        ids.iter()
            .fold(ClusterBuilder::new(), |b, id| {
                b.node(id, Resource::new(8192, 4))
            })
            .build()
            .unwrap()
    }

    #[test]
    fn due_las_timers_are_reported_once_and_replaced_ones_not_at_all() {
        let mut t = LasTimers::default();
        let v = view(&["a:1", "b:1", "c:1"]);
        t.set(&v, 0, Some(10));
        t.set(&v, 1, Some(20));
        t.set(&v, 2, Some(5));
        // Node 2's timer moves later before it is due: only the new time counts.
        t.set(&v, 2, Some(30));
        let mut out = Vec::new();
        t.due(&v, 4, &mut out);
        assert!(out.is_empty());
        t.due(&v, 20, &mut out);
        assert_eq!(out, [0, 1]);
        out.clear();
        t.due(&v, 25, &mut out);
        assert!(out.is_empty(), "reported before");
        t.set(&v, 2, None);
        t.due(&v, 40, &mut out);
        assert!(out.is_empty(), "cleared");
        // Re-laid for another node list, timers are found by time again.
        t.set(&v, 0, Some(50));
        let other = view(&["c:1", "a:1"]);
        t.due(&other, 60, &mut out);
        assert_eq!(out, [1]);
    }

    #[test]
    fn las_timers_follow_their_node_when_a_view_lists_nodes_otherwise() {
        let mut t = LasTimers::default();
        let first = view(&["a:1", "b:1", "c:1"]);
        t.set(&first, 0, Some(10));
        t.set(&first, 2, Some(30));
        assert_eq!(t.get(&first, 1), None);
        // The controller's next view may order, add and drop nodes.
        let next = view(&["c:1", "d:1", "a:1"]);
        assert_eq!(t.get(&next, 1), None);
        assert_eq!(t.get(&next, 0), Some(30));
        assert_eq!(t.get(&next, 2), Some(10));
        t.set(&next, 1, Some(40));
        t.set(&next, 0, None);
        // A node that left and came back has no timer: it gets a look at once.
        let last = view(&["b:1", "d:1", "c:1", "a:1"]);
        assert_eq!(t.get(&last, 0), None);
        assert_eq!(t.get(&last, 1), Some(40));
        assert_eq!(t.get(&last, 2), None);
        assert_eq!(t.get(&last, 3), Some(10));
        // A view built anew with the same nodes in the same order keeps them in place.
        let again = view(&["b:1", "d:1", "c:1", "a:1"]);
        assert_ne!(again.node_layout(), last.node_layout());
        assert_eq!(t.get(&again, 1), Some(40));
        assert_eq!(t.get(&again, 3), Some(10));
    }
}
