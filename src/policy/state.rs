//! What a policy remembers between ticks. The view is rebuilt every tick and is the
//! truth about containers; the state only adds what the view cannot say (when a
//! container was suspended, how often it was picked for resumption, LAS timers, Dice's
//! window), keyed by container id so that containers may come and go freely.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_pcg::Pcg64;

use super::dice::DiceWindow;
use crate::cluster::{ClusterView, ContainerId, ContainerIdx, Millis};
use crate::config::settings::PolicySettings;

/// Everything a policy carries from one tick to the next. One per controller (or
/// simulator run); see [`super::decide`].
#[derive(Clone, Debug)]
pub struct PolicyState {
    pub(crate) settings: PolicySettings,
    pub(crate) rng: Pcg64,
    /// Ordered, so that iterating it is deterministic; with each container's index in
    /// the last view, a hint that saves a hash lookup when the order is stable.
    pub(crate) memos: MemoMap,
    pub(crate) dice: DiceState,
    /// Per-tick scratch: container index -> memo slot; kept to avoid reallocating.
    pub(crate) slots: Vec<u32>,
}

impl PolicyState {
    pub fn new(settings: PolicySettings) -> Self {
        PolicyState {
            rng: Pcg64::seed_from_u64(settings.seed),
            settings,
            memos: BTreeMap::new(),
            dice: DiceState::default(),
            slots: Vec::new(),
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

    /// Containers the state currently remembers something about.
    pub fn remembered_containers(&self) -> usize {
        self.memos.len()
    }
}

/// Memos by container id, each with the container's index in the last view.
pub(crate) type MemoMap = BTreeMap<ContainerId, (u32, Memo)>;

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
    /// LAS, while it waits: when its node next needs a look even if nothing arrives or
    /// finishes there (the node's earliest quantum expiry).
    pub las_next_check: Option<Millis>,
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
        self.las_next_check = None;
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

const NO_SLOT: u32 = u32::MAX;

/// The memos of the containers in this tick's view, addressable by container index.
pub(crate) struct Memos<'s> {
    entries: Vec<(ContainerIdx, ContainerId, Memo)>,
    slots: &'s mut Vec<u32>,
}

impl<'s> Memos<'s> {
    /// Memos of containers that left the view are dropped here.
    pub fn load(view: &ClusterView, map: &MemoMap, slots: &'s mut Vec<u32>) -> Self {
        if slots.len() < view.containers.len() {
            slots.resize(view.containers.len(), NO_SLOT);
        }
        let mut entries = Vec::with_capacity(map.len());
        for (id, (hint, memo)) in map {
            let at_hint = view
                .containers
                .get(*hint as usize)
                .is_some_and(|c| c.id == *id)
                .then_some(ContainerIdx(*hint));
            if let Some(ci) = at_hint.or_else(|| view.container_by_id(id)) {
                slots[ci.get()] = entries.len() as u32;
                entries.push((ci, *id, *memo));
            }
        }
        Memos { entries, slots }
    }

    fn slot(&self, c: ContainerIdx) -> Option<usize> {
        let s = *self.slots.get(c.get())? as usize;
        (self.entries.get(s)?.0 == c).then_some(s)
    }

    pub fn get(&self, c: ContainerIdx) -> Memo {
        self.slot(c).map(|s| self.entries[s].2).unwrap_or_default()
    }

    pub fn get_mut(&mut self, c: ContainerIdx, id: ContainerId) -> &mut Memo {
        let s = match self.slot(c) {
            Some(s) => s,
            None => {
                if let Some(slot) = self.slots.get_mut(c.get()) {
                    *slot = self.entries.len() as u32;
                }
                self.entries.push((c, id, Memo::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[s].2
    }

    /// Containers with a memo, in id order.
    pub fn containers(&self) -> impl Iterator<Item = (ContainerIdx, Memo)> + '_ {
        self.entries.iter().map(|(c, _, m)| (*c, *m))
    }

    /// Write back what is worth keeping and clear the scratch slots.
    pub fn store(self, view: &ClusterView, map: &mut MemoMap) {
        let mut keep = Vec::with_capacity(self.entries.len());
        for (c, id, memo) in self.entries {
            if let Some(slot) = self.slots.get_mut(c.get()) {
                *slot = NO_SLOT;
            }
            if memo != Memo::default() && view.container(c).is_live() {
                keep.push((id, (c.0, memo)));
            }
        }
        // Bulk-built from sorted entries rather than inserted one by one.
        keep.sort_unstable_by_key(|(id, _)| *id);
        *map = keep.into_iter().collect();
    }
}
