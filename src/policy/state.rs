//! What a policy remembers between ticks. The view is rebuilt every tick and is the
//! truth about containers; the state only adds what the view cannot say (when a
//! container was suspended, how often it was picked for resumption, LAS timers, Dice's
//! window), keyed by container id so that containers may come and go freely.
//!
//! A tick never walks all of it: memos are looked up as containers are considered
//! (by id, or by place on a view patched in place), memos of containers that left are
//! swept a slice per tick (or dropped as a patched view says they left), and the few
//! kill marks are kept in their own ordered set.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use rand::SeedableRng;
use rand_pcg::Pcg64;

use super::dice::DiceWindow;
use super::engine::TickBuffers;
use crate::cluster::{
    ClusterView, ContainerId, ContainerIdx, ContainerMove, IdMap, JournalMark, Millis, NodeId,
};
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
    /// left the view and are not dropped yet).
    pub fn remembered_containers(&self) -> usize {
        self.memos.len()
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

/// The memos, each with its container's id, found one of two ways:
/// - by id (`index`), on a view built anew (the controller's, every tick): memos of
///   containers that left are swept a slice per tick, and marked containers are found
///   where they were in the last view, checked by id, or else by id in the view;
/// - by place (`slots`: per container of the view, its memo's entry or [`NO_MEMO`]),
///   on a view patched in place since the last tick (the simulator's): the store
///   follows the view's container journal, dropping the memos of containers as they
///   leave, and a tick finds a container's memo without hashing its id (thousands a
///   tick, and a probe missed the cache twice). It is laid out by id once, on the
///   second tick that sees the same view.
///
/// Either way `entries` holds the memos and `marked` the marked containers' places.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoStore {
    entries: Vec<Entry>,
    index: IdMap<ContainerId, u32>,
    slots: Vec<u32>,
    placed: bool,
    synced: Option<JournalMark>,
    /// By id: the next entry to sweep.
    sweep: usize,
    marked: BTreeMap<ContainerId, ContainerIdx>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    id: ContainerId,
    /// By place: where its container is. By id: where it was when last seen.
    at: ContainerIdx,
    memo: Memo,
}

const NO_MEMO: u32 = u32::MAX;

impl MemoStore {
    /// The marked containers and when each was marked (`None` if its memo is gone),
    /// in id order; read-only, for the simulator's idle-tick check.
    pub(crate) fn kill_marks(&self) -> impl Iterator<Item = (ContainerId, Option<Millis>)> + '_ {
        self.marked.iter().map(|(id, at)| {
            let s = if self.placed {
                self.slots.get(at.get()).copied()
            } else {
                self.index.get(id).copied()
            };
            let e = s
                .and_then(|s| self.entries.get(s as usize))
                .filter(|e| e.id == *id);
            (*id, e.and_then(|e| e.memo.kill_marked_at))
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of the container at `c` of `view`, or [`NO_MEMO`].
    fn slot_of(&self, view: &ClusterView, c: ContainerIdx) -> u32 {
        if self.placed {
            self.slots[c.get()]
        } else {
            let id = view.container(c).id;
            self.index.get(&id).copied().unwrap_or(NO_MEMO)
        }
    }

    /// Finds memos in `view` by place if it is the last view patched in place, by id
    /// otherwise.
    fn sync(&mut self, view: &ClusterView) {
        match self.synced.and_then(|m| view.containers_moved_since(m)) {
            Some(moves) if self.placed => {
                for &m in moves {
                    match m {
                        ContainerMove::Added => self.slots.push(NO_MEMO),
                        ContainerMove::Removed(i) => self.removed(i),
                    }
                }
                // `containers` is public: a caller that pushed to it directly is
                // caught here.
                if self.slots.len() != view.containers.len() {
                    self.lay_out(view);
                }
            }
            Some(_) => self.lay_out(view),
            None if self.placed => self.by_id(),
            None => {}
        }
        self.synced = Some(view.container_mark());
        #[cfg(debug_assertions)]
        self.check(view);
    }

    /// By place: the container at `i` left the view, and the last one moved into
    /// its place.
    fn removed(&mut self, i: ContainerIdx) {
        let Some(&s) = self.slots.get(i.get()) else {
            return;
        };
        if s != NO_MEMO {
            let id = self.entries[s as usize].id;
            self.free(s);
            self.marked.remove(&id);
        }
        self.slots.swap_remove(i.get());
        if let Some(&s) = self.slots.get(i.get())
            && s != NO_MEMO
        {
            let e = &mut self.entries[s as usize];
            e.at = i;
            if e.memo.kill_marked_at.is_some() {
                self.marked.insert(e.id, i);
            }
        }
    }

    /// Goes over to finding memos by place in `view`, dropping those of containers
    /// no longer in it.
    #[cold]
    fn lay_out(&mut self, view: &ClusterView) {
        // Only the memos' slots can be in use: clearing those, not the whole list,
        // keeps this O(memos).
        if self.placed {
            for e in &self.entries {
                if let Some(s) = self.slots.get_mut(e.at.get()) {
                    *s = NO_MEMO;
                }
            }
        } else {
            self.slots.clear();
        }
        self.slots.resize(view.containers.len(), NO_MEMO);
        self.index = IdMap::default();
        self.placed = true;
        let marked = &mut self.marked;
        self.entries
            .retain_mut(|e| match view.container_by_id(&e.id) {
                Some(at) => {
                    e.at = at;
                    if let Some(m) = marked.get_mut(&e.id) {
                        *m = at;
                    }
                    true
                }
                None => {
                    marked.remove(&e.id);
                    false
                }
            });
        for (s, e) in self.entries.iter().enumerate() {
            self.slots[e.at.get()] = s as u32;
        }
    }

    /// Goes over to finding memos by id (the sweep drops those of containers that
    /// left).
    #[cold]
    fn by_id(&mut self) {
        self.placed = false;
        self.slots = Vec::new();
        self.index = (self.entries.iter().enumerate())
            .map(|(s, e)| (e.id, s as u32))
            .collect();
        self.sweep = 0;
    }

    /// Drops the memo in entry `s`; the last entry moves into it.
    fn free(&mut self, s: u32) {
        let gone = self.entries.swap_remove(s as usize);
        if self.placed {
            self.slots[gone.at.get()] = NO_MEMO;
        } else {
            self.index.remove(&gone.id);
        }
        if let Some(moved) = self.entries.get(s as usize) {
            if self.placed {
                self.slots[moved.at.get()] = s;
            } else {
                self.index.insert(moved.id, s);
            }
        }
    }

    /// By id: drops the memos of containers no longer live in `view`, a slice of
    /// them per tick: small enough to cost little, while the whole store is still
    /// swept every few hundred ticks, so memos of finished containers do not pile up.
    fn sweep(&mut self, view: &ClusterView) {
        let slice = 64 + self.entries.len() / 512;
        for _ in 0..slice.min(self.entries.len()) {
            if self.sweep >= self.entries.len() {
                self.sweep = 0;
            }
            let e = &mut self.entries[self.sweep];
            let hinted = (view.containers.get(e.at.get())).is_some_and(|c| c.id == e.id);
            let at = if hinted {
                Some(e.at)
            } else {
                view.container_by_id(&e.id)
            };
            match at.filter(|&c| view.container(c).is_live()) {
                Some(c) => {
                    e.at = c;
                    self.sweep += 1;
                }
                None => {
                    let id = e.id;
                    self.free(self.sweep as u32);
                    self.marked.remove(&id);
                }
            }
        }
    }

    /// Debug builds: every memo is found where it is, and only there.
    #[cfg(debug_assertions)]
    fn check(&self, view: &ClusterView) {
        if self.placed {
            for (s, e) in self.entries.iter().enumerate() {
                assert_eq!(view.containers[e.at.get()].id, e.id, "memo {s}'s place");
                assert_eq!(self.slots[e.at.get()], s as u32, "memo {s}'s slot");
            }
            let used = self.slots.iter().filter(|&&s| s != NO_MEMO).count();
            assert_eq!(used, self.entries.len(), "slots in use");
            for (id, at) in &self.marked {
                assert_eq!(view.containers[at.get()].id, *id, "marked {id}'s place");
            }
        } else {
            assert_eq!(self.index.len(), self.entries.len(), "memos by id");
            for (s, e) in self.entries.iter().enumerate() {
                assert_eq!(self.index.get(&e.id), Some(&(s as u32)), "memo {s} by id");
            }
        }
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
        store.sync(view);
        Memos {
            store,
            view,
            touched: Vec::new(),
        }
    }

    pub fn get(&self, c: ContainerIdx) -> Memo {
        match self.store.slot_of(self.view, c) {
            NO_MEMO => Memo::default(),
            s => self.store.entries[s as usize].memo,
        }
    }

    pub fn get_mut(&mut self, c: ContainerIdx, id: ContainerId) -> &mut Memo {
        self.touched.push(c);
        let store = &mut *self.store;
        let mut s = store.slot_of(self.view, c);
        if s == NO_MEMO {
            s = store.entries.len() as u32;
            store.entries.push(Entry {
                id,
                at: c,
                memo: Memo::default(),
            });
            if store.placed {
                store.slots[c.get()] = s;
            } else {
                store.index.insert(id, s);
            }
        }
        debug_assert_eq!(store.entries[s as usize].id, id);
        &mut store.entries[s as usize].memo
    }

    /// Live containers marked for killing, in id order.
    pub fn marked(&self) -> Vec<ContainerIdx> {
        let view = self.view;
        let placed = self.store.placed;
        self.store
            .marked
            .iter()
            .filter_map(|(id, &at)| {
                let hinted = placed || view.containers.get(at.get()).is_some_and(|c| c.id == *id);
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
    /// the marked set in step, and by id, sweep a slice of the rest for containers
    /// that left (by place, they are dropped as the view says they left).
    pub fn finish(self) {
        let Memos {
            store,
            view,
            touched,
        } = self;
        for c in touched {
            let s = store.slot_of(view, c);
            if s == NO_MEMO {
                continue;
            }
            let e = &mut store.entries[s as usize];
            e.at = c;
            let (id, memo) = (e.id, e.memo);
            if memo == Memo::default() || !view.container(c).is_live() {
                store.free(s);
                store.marked.remove(&id);
            } else if memo.kill_marked_at.is_some() {
                store.marked.insert(id, c);
            } else {
                store.marked.remove(&id);
            }
        }
        if !store.placed {
            store.sweep(view);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LasTimers, MemoStore, Memos};
    use crate::cluster::builder::ClusterBuilder;
    use crate::cluster::{ContainerIdx, JobClass};
    use crate::resources::Resource;

    fn view(ids: &[&str]) -> crate::cluster::ClusterView {
        ids.iter()
            .fold(ClusterBuilder::new(), |b, id| {
                b.node(id, Resource::new(8192, 4))
            })
            .build()
            .unwrap()
    }

    /// Memos follow their containers through removals of a view patched in place
    /// (by place), and through a view built anew (by id).
    #[test]
    fn memos_follow_their_containers_by_place_and_by_id() {
        let size = Resource::new(1024, 1);
        let mut view = ClusterBuilder::new()
            .nodes(2, Resource::new(8192, 8))
            .queue("root.a", 100.0, 100.0, JobClass::Long)
            .app("root.a", "MAPREDUCE")
            .containers(6, size)
            .build()
            .unwrap();
        let ids: Vec<_> = view.containers.iter().map(|c| c.id).collect();
        // Memos for the containers numbered like the last one.
        let parity = ids[ids.len() - 1].id % 2;
        let mut store = MemoStore::default();
        let tick = |store: &mut MemoStore, view: &crate::cluster::ClusterView, at: u64| {
            let mut m = Memos::new(view, store);
            for (i, c) in view.containers.iter().enumerate() {
                if c.id.id % 2 == parity {
                    m.get_mut(ContainerIdx(i as u32), c.id).suspended(at);
                }
            }
            m.finish();
        };
        let memo_of = |store: &mut MemoStore, view: &crate::cluster::ClusterView, n: u64| {
            let m = Memos::new(view, store);
            let i = view.containers.iter().position(|c| c.id.id == n).unwrap();
            m.get(ContainerIdx(i as u32)).suspended_at
        };
        tick(&mut store, &view, 7);
        assert!(!store.placed, "a view seen once is found by id");
        assert_eq!(store.len(), 3);
        // Every container in the view has a memo exactly if numbered like the last
        // one, and the store holds no other.
        let all_found = |store: &mut MemoStore, view: &crate::cluster::ClusterView| {
            let ids: Vec<_> = view.containers.iter().map(|c| c.id.id).collect();
            for n in &ids {
                let want = (n % 2 == parity).then_some(7);
                assert_eq!(memo_of(store, view, *n), want, "container {n}");
            }
            assert_eq!(store.len(), ids.iter().filter(|n| *n % 2 == parity).count());
        };
        // The same view again: laid out by place, then followed.
        all_found(&mut store, &view);
        assert!(store.placed);
        view.clear_journals();
        assert_eq!(ids[1].id % 2, parity, "a removed one has a memo");
        view.remove_container(ContainerIdx(1)).unwrap();
        view.remove_container(ContainerIdx(0)).unwrap();
        all_found(&mut store, &view);
        assert!(store.placed);
        assert!(!view.containers.iter().any(|c| c.id == ids[1]));
        // A view built anew, listing them otherwise: found by id again.
        let anew = crate::cluster::ClusterView::new(
            view.queues.clone(),
            view.apps.clone(),
            view.nodes.clone(),
            view.containers.iter().rev().cloned().collect(),
        )
        .unwrap();
        assert_eq!(memo_of(&mut store, &anew, ids[ids.len() - 1].id), Some(7));
        assert!(!store.placed);
        // And by place from its second look on.
        all_found(&mut store, &anew);
        assert!(store.placed);
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
