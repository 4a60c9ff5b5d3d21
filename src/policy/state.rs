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

use super::dice::DiceWindow;
use crate::cluster::{
    ClusterView, ContainerId, ContainerIdx, ContainerMove, IdMap, JournalMark, LineageMark, Millis,
    NodeId,
};

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
    /// Resumed because its suspension reached `suspend.max-duration-ms`: no policy takes
    /// it again before this.
    pub rest_until: Option<Millis>,
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
    layout: Option<LineageMark>,
    ids: Vec<NodeId>,
    at: Vec<Option<Millis>>,
    /// The timers by time (node places), so that a tick finds the due ones without
    /// reading every node's; an entry whose node has another time now is stale.
    by_time: BinaryHeap<Reverse<(Millis, u32)>>,
    /// The latest time [`LasTimers::due`] was asked about: entries up to it are
    /// popped, and later ones are still in `by_time`.
    popped_through: Option<Millis>,
}

impl LasTimers {
    /// When node `n` of `view` next needs a look, if it has a timer.
    pub fn get(&mut self, view: &ClusterView, n: usize) -> Option<Millis> {
        self.align(view);
        self.at[n]
    }

    pub fn set(&mut self, view: &ClusterView, n: usize, at: Option<Millis>) {
        self.align(view);
        // A LAS tick sets the timer of every node it steps, mostly to what it was: an
        // entry still queued for the same time serves, and the heap stays small.
        let queued = |t: Millis| self.popped_through.is_none_or(|p| t > p);
        if self.at[n] == at && at.is_some_and(queued) {
            return;
        }
        self.at[n] = at;
        if let Some(t) = at {
            self.by_time.push(Reverse((t, n as u32)));
        }
    }

    /// Adds to `out` the nodes whose timer is due at `now` and was not reported due
    /// before (a node may be listed twice).
    pub fn due(&mut self, view: &ClusterView, now: Millis, out: &mut Vec<u32>) {
        self.align(view);
        self.popped_through = self.popped_through.max(Some(now));
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
        // The length too: it costs nothing, and timers laid out wrong would go unseen.
        let same = self
            .layout
            .as_ref()
            .is_some_and(|m| view.has_node_layout(m));
        if !same || self.at.len() != view.nodes().len() {
            self.lay_out(view);
        }
    }

    #[cold]
    fn lay_out(&mut self, view: &ClusterView) {
        self.layout = Some(view.node_layout());
        let same = self.ids.len() == view.nodes().len()
            && self.ids.iter().zip(view.nodes()).all(|(id, n)| *id == n.id);
        if same {
            return;
        }
        let by_id: IdMap<NodeId, Millis> = self
            .ids
            .drain(..)
            .zip(self.at.drain(..))
            .filter_map(|(id, t)| Some((id, t?)))
            .collect();
        self.ids = view.nodes().iter().map(|n| n.id.clone()).collect();
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
    /// Whether a short application has been in a view: the short partition's floor
    /// (`min-short-nodes`) applies from then on.
    pub short_seen: bool,
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
/// Either way `entries` holds whose each memo is, `memos` the memos, packed and
/// apart, so that reading one misses the cache once (a LAS tick reads one per
/// container of every node it steps), and `marked` the marked containers' places.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoStore {
    entries: Vec<Entry>,
    memos: Vec<Packed>,
    index: IdMap<ContainerId, u32>,
    slots: Vec<u32>,
    placed: bool,
    synced: Option<JournalMark>,
    /// By id: the next entry to sweep.
    sweep: usize,
    marked: BTreeMap<ContainerId, ContainerIdx>,
    /// The last tick's list of memos touched, kept for its room.
    touched: Vec<ContainerIdx>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    id: ContainerId,
    /// By place: where its container is. By id: where it was when last seen.
    at: ContainerIdx,
}

const NO_MEMO: u32 = u32::MAX;

/// A [`Memo`] in one cache line: times with [`Packed::NONE`] for none (a time of
/// `u64::MAX` ms, 585 million years, is kept as one less).
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Packed {
    suspended_at: u64,
    last_pick_at: u64,
    last_step_at: u64,
    kill_marked_at: u64,
    quantum_start: u64,
    rest_until: u64,
    resume_picks: u32,
    las_preemptions: u32,
    dice_suspensions: u32,
}

impl Packed {
    const NONE: u64 = u64::MAX;
    /// [`Memo::default`]: nothing to remember.
    const EMPTY: Packed = Packed {
        suspended_at: Self::NONE,
        last_pick_at: Self::NONE,
        last_step_at: Self::NONE,
        kill_marked_at: Self::NONE,
        quantum_start: Self::NONE,
        rest_until: Self::NONE,
        resume_picks: 0,
        las_preemptions: 0,
        dice_suspensions: 0,
    };

    #[inline]
    fn pack(m: &Memo) -> Packed {
        let t = |t: Option<Millis>| t.map_or(Self::NONE, |t| t.min(Self::NONE - 1));
        Packed {
            suspended_at: t(m.suspended_at),
            last_pick_at: t(m.last_pick_at),
            last_step_at: t(m.last_step_at),
            kill_marked_at: t(m.kill_marked_at),
            quantum_start: t(m.quantum_start),
            rest_until: t(m.rest_until),
            resume_picks: m.resume_picks,
            las_preemptions: m.las_preemptions,
            dice_suspensions: m.dice_suspensions,
        }
    }

    #[inline]
    fn unpack(&self) -> Memo {
        let t = |t: u64| (t != Self::NONE).then_some(t);
        Memo {
            suspended_at: t(self.suspended_at),
            last_pick_at: t(self.last_pick_at),
            last_step_at: t(self.last_step_at),
            kill_marked_at: t(self.kill_marked_at),
            quantum_start: t(self.quantum_start),
            rest_until: t(self.rest_until),
            resume_picks: self.resume_picks,
            las_preemptions: self.las_preemptions,
            dice_suspensions: self.dice_suspensions,
        }
    }

    fn kill_marked(&self) -> bool {
        self.kill_marked_at != Self::NONE
    }

    /// Nothing to remember.
    fn is_empty(&self) -> bool {
        let none = Self::NONE;
        self.suspended_at == none
            && self.last_pick_at == none
            && self.last_step_at == none
            && self.kill_marked_at == none
            && self.quantum_start == none
            && self.rest_until == none
            && self.resume_picks == 0
            && self.las_preemptions == 0
            && self.dice_suspensions == 0
    }
}

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
            let m = s
                .filter(|&s| self.entries.get(s as usize).is_some_and(|e| e.id == *id))
                .and_then(|s| self.memos.get(s as usize));
            (*id, m.and_then(|m| m.unpack().kill_marked_at))
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
        match self
            .synced
            .as_ref()
            .and_then(|m| view.containers_moved_since(m))
        {
            Some(moves) if self.placed => {
                for &m in moves {
                    match m {
                        ContainerMove::Added => self.slots.push(NO_MEMO),
                        ContainerMove::Removed(i) => self.removed(i),
                    }
                }
                // The journal lists every move the patch API makes; the length is
                // checked all the same, as memos laid out wrong would go unseen.
                if self.slots.len() != view.containers().len() {
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
            if self.memos[s as usize].kill_marked() {
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
        self.slots.resize(view.containers().len(), NO_MEMO);
        self.index = IdMap::default();
        self.placed = true;
        let mut kept = 0;
        for s in 0..self.entries.len() {
            let e = self.entries[s];
            match view.container_by_id(&e.id) {
                Some(at) => {
                    if let Some(m) = self.marked.get_mut(&e.id) {
                        *m = at;
                    }
                    self.entries[kept] = Entry { id: e.id, at };
                    self.memos[kept] = self.memos[s];
                    kept += 1;
                }
                None => {
                    self.marked.remove(&e.id);
                }
            }
        }
        self.entries.truncate(kept);
        self.memos.truncate(kept);
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
        self.memos.swap_remove(s as usize);
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
            let hinted = (view.containers().get(e.at.get())).is_some_and(|c| c.id == e.id);
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
        assert_eq!(self.memos.len(), self.entries.len(), "a memo per entry");
        if self.placed {
            for (s, e) in self.entries.iter().enumerate() {
                assert_eq!(view.containers()[e.at.get()].id, e.id, "memo {s}'s place");
                assert_eq!(self.slots[e.at.get()], s as u32, "memo {s}'s slot");
            }
            let used = self.slots.iter().filter(|&&s| s != NO_MEMO).count();
            assert_eq!(used, self.entries.len(), "slots in use");
            for (id, at) in &self.marked {
                assert_eq!(view.containers()[at.get()].id, *id, "marked {id}'s place");
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
        let mut touched = std::mem::take(&mut store.touched);
        touched.clear();
        Memos {
            store,
            view,
            touched,
        }
    }

    #[inline]
    pub fn get(&self, c: ContainerIdx) -> Memo {
        match self.store.slot_of(self.view, c) {
            NO_MEMO => Memo::default(),
            s => self.store.memos[s as usize].unpack(),
        }
    }

    /// Changes the memo of the container at `c`, whose id is `id`, with `f`.
    pub fn update<R>(
        &mut self,
        c: ContainerIdx,
        id: ContainerId,
        f: impl FnOnce(&mut Memo) -> R,
    ) -> R {
        self.touched.push(c);
        let store = &mut *self.store;
        let mut s = store.slot_of(self.view, c);
        if s == NO_MEMO {
            s = store.entries.len() as u32;
            store.entries.push(Entry { id, at: c });
            store.memos.push(Packed::EMPTY);
            if store.placed {
                store.slots[c.get()] = s;
            } else {
                store.index.insert(id, s);
            }
        }
        debug_assert_eq!(store.entries[s as usize].id, id);
        let packed = &mut store.memos[s as usize];
        let mut memo = packed.unpack();
        let r = f(&mut memo);
        *packed = Packed::pack(&memo);
        r
    }

    /// Live containers marked for killing, in id order.
    pub fn marked(&self) -> Vec<ContainerIdx> {
        let view = self.view;
        let placed = self.store.placed;
        self.store
            .marked
            .iter()
            .filter_map(|(id, &at)| {
                let hinted = placed || view.containers().get(at.get()).is_some_and(|c| c.id == *id);
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
        for &c in &touched {
            let s = store.slot_of(view, c);
            if s == NO_MEMO {
                continue;
            }
            let e = &mut store.entries[s as usize];
            e.at = c;
            let (id, memo) = (e.id, store.memos[s as usize]);
            if memo.is_empty() || !view.container(c).is_live() {
                store.free(s);
                store.marked.remove(&id);
            } else if memo.kill_marked() {
                store.marked.insert(id, c);
            } else {
                store.marked.remove(&id);
            }
        }
        if !store.placed {
            store.sweep(view);
        }
        store.touched = touched;
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
        let ids: Vec<_> = view.containers().iter().map(|c| c.id).collect();
        // Memos for the containers numbered like the last one.
        let parity = ids[ids.len() - 1].id % 2;
        let mut store = MemoStore::default();
        let tick = |store: &mut MemoStore, view: &crate::cluster::ClusterView, at: u64| {
            let mut m = Memos::new(view, store);
            for (i, c) in view.containers().iter().enumerate() {
                if c.id.id % 2 == parity {
                    m.update(ContainerIdx(i as u32), c.id, |m| m.suspended(at));
                }
            }
            m.finish();
        };
        let memo_of = |store: &mut MemoStore, view: &crate::cluster::ClusterView, n: u64| {
            let m = Memos::new(view, store);
            let i = view.containers().iter().position(|c| c.id.id == n).unwrap();
            m.get(ContainerIdx(i as u32)).suspended_at
        };
        tick(&mut store, &view, 7);
        assert!(!store.placed, "a view seen once is found by id");
        assert_eq!(store.len(), 3);
        // Every container in the view has a memo exactly if numbered like the last
        // one, and the store holds no other.
        let all_found = |store: &mut MemoStore, view: &crate::cluster::ClusterView| {
            let ids: Vec<_> = view.containers().iter().map(|c| c.id.id).collect();
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
        assert!(!view.containers().iter().any(|c| c.id == ids[1]));
        // A view built anew, listing them otherwise: found by id again.
        let anew = crate::cluster::ClusterView::new(
            view.queues().to_vec(),
            view.apps().to_vec(),
            view.nodes().to_vec(),
            view.containers().iter().rev().cloned().collect(),
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
    fn a_packed_memo_unpacks_to_what_was_packed() {
        use super::{Memo, Packed};
        let full = Memo {
            suspended_at: Some(0),
            resume_picks: 3,
            last_pick_at: Some(7),
            last_step_at: None,
            kill_marked_at: Some(u64::MAX - 1),
            las_preemptions: u32::MAX,
            quantum_start: Some(9),
            dice_suspensions: 1,
            rest_until: Some(11),
        };
        for m in [Memo::default(), full] {
            let p = Packed::pack(&m);
            assert_eq!(p.unpack(), m);
            assert_eq!(p.is_empty(), m == Memo::default());
            assert_eq!(p.kill_marked(), m.kill_marked_at.is_some());
        }
        assert!(Packed::EMPTY.is_empty());
        // The one time a packed memo cannot hold is kept as one less.
        let last = Memo {
            quantum_start: Some(u64::MAX),
            ..Memo::default()
        };
        assert_eq!(
            Packed::pack(&last).unpack().quantum_start,
            Some(u64::MAX - 1)
        );
    }

    /// Setting a timer to the time it has queues nothing more, yet a timer set again
    /// to a time already reported is reported again.
    #[test]
    fn a_timer_set_to_the_same_time_is_queued_once() {
        let mut t = LasTimers::default();
        let v = view(&["a:1", "b:1"]);
        for _ in 0..5 {
            t.set(&v, 0, Some(10));
        }
        assert_eq!(t.by_time.len(), 1);
        let mut out = Vec::new();
        t.due(&v, 10, &mut out);
        assert_eq!(out, [0]);
        out.clear();
        t.set(&v, 0, Some(10));
        t.due(&v, 12, &mut out);
        assert_eq!(out, [0], "set again after it was reported");
        // Later than anything asked about: still queued, so not queued twice.
        t.set(&v, 1, Some(20));
        t.set(&v, 1, Some(20));
        assert_eq!(t.by_time.len(), 1);
        out.clear();
        t.due(&v, 20, &mut out);
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
