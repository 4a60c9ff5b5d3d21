//! The running tally of one tick: what every queue and node holds as actions are
//! planned, and the round's budget. Every policy takes through [`Ledger::take`], so the
//! invariants (never below a guarantee, never from a preemption-disabled queue, never
//! beyond the round cap) hold for all of them in one place.

use super::amount::Amount;
use crate::cluster::{ClusterView, Partition};
use crate::resources::Resource;

pub(crate) struct Ledger {
    parents: Vec<Option<usize>>,
    guaranteed: Vec<Amount>,
    disabled: Vec<bool>,
    /// Per queue, every level: what its containers hold now (YARN's used, less what
    /// was reclaimed or marked).
    pub held: Vec<Amount>,
    pub node_cap: Vec<Amount>,
    /// Per node: what its live containers hold physically (YARN's used, less what
    /// was reclaimed).
    pub node_held: Vec<Amount>,
    /// Per node: reclaimed room that the node advertises to the RM.
    pub node_reclaimed: Vec<Amount>,
    /// Per node: its partition as of the view.
    pub node_partition: Vec<Partition>,
    /// Per node: what it advertises to the RM as of the view.
    pub node_advertised: Vec<Resource>,
    /// Vcores allocated to live containers on all nodes, as of the view.
    pub used_vcores: u64,
    /// Room that frees up once marked containers are killed.
    pub marked: Amount,
    budget: Amount,
    pub reclaimed: Amount,
    pub restored: Amount,
    pub queue_reclaimed: Vec<Amount>,
    pub queue_restored: Vec<Amount>,
}

/// Where the taken amount sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Only in the queue's accounting (a kill mark: the container still runs).
    QueueOnly,
    /// Freed on the node and advertised to the RM.
    Advertised(usize),
    /// Freed on the node for the node's own use (LAS time sharing).
    Local(usize),
}

/// The per-node arrays of a [`Ledger`], kept from one tick for the next: a tick on
/// thousands of nodes would otherwise allocate and fault in fresh pages for each.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeBuffers {
    cap: Vec<Amount>,
    held: Vec<Amount>,
    reclaimed: Vec<Amount>,
    partition: Vec<Partition>,
    advertised: Vec<Resource>,
}

impl Ledger {
    pub fn new(view: &ClusterView, budget: Amount, buffers: NodeBuffers) -> Ledger {
        let nq = view.queues.len();
        let nn = view.nodes.len();
        let NodeBuffers {
            cap: mut node_cap,
            held: mut node_held,
            reclaimed: mut node_reclaimed,
            partition: mut node_partition,
            advertised: mut node_advertised,
        } = buffers;
        node_cap.clear();
        node_held.clear();
        node_partition.clear();
        node_advertised.clear();
        node_reclaimed.clear();
        node_reclaimed.resize(nn, Amount::ZERO);
        // One pass over the nodes for every copy a tick needs: the node list is the
        // largest array a tick walks more than once, and from some tens of thousands of
        // nodes on it no longer fits the core's cache, so that each further pass over it
        // costs more per node than on a small cluster.
        let mut used_vcores = 0u64;
        for n in &view.nodes {
            node_cap.push(Amount::from(n.capacity));
            node_held.push(Amount::from(n.used));
            node_partition.push(n.partition);
            node_advertised.push(n.advertised);
            used_vcores += u64::from(n.used.vcores);
        }
        Ledger {
            parents: view
                .queues
                .iter()
                .map(|q| q.parent.map(|p| p.get()))
                .collect(),
            guaranteed: view
                .queues
                .iter()
                .map(|q| Amount::from(q.guaranteed))
                .collect(),
            disabled: view.queues.iter().map(|q| q.preemption_disabled).collect(),
            held: view.queues.iter().map(|q| Amount::from(q.used)).collect(),
            node_cap,
            node_held,
            node_reclaimed,
            node_partition,
            node_advertised,
            used_vcores,
            marked: Amount::ZERO,
            budget,
            reclaimed: Amount::ZERO,
            restored: Amount::ZERO,
            queue_reclaimed: vec![Amount::ZERO; nq],
            queue_restored: vec![Amount::ZERO; nq],
        }
    }

    /// The per-node arrays, for the next tick's ledger.
    pub fn take_buffers(&mut self) -> NodeBuffers {
        NodeBuffers {
            cap: std::mem::take(&mut self.node_cap),
            held: std::mem::take(&mut self.node_held),
            reclaimed: std::mem::take(&mut self.node_reclaimed),
            partition: std::mem::take(&mut self.node_partition),
            advertised: std::mem::take(&mut self.node_advertised),
        }
    }

    /// Account for `amount` a queue's containers no longer hold as of the view
    /// (reclaimed or marked before this tick).
    pub fn take_from_queue(&mut self, q: usize, amount: Amount) {
        let mut next = Some(q);
        while let Some(i) = next {
            self.held[i] -= amount;
            next = self.parent(i);
        }
    }

    /// `q`'s parent; parents come before their children, so walking up ends.
    fn parent(&self, q: usize) -> Option<usize> {
        self.parents.get(q).copied().flatten().filter(|&p| p < q)
    }

    fn lineage(&self, q: usize) -> impl Iterator<Item = usize> + '_ {
        let mut next = Some(q);
        std::iter::from_fn(move || {
            let cur = next?;
            next = self.parent(cur);
            Some(cur)
        })
    }

    pub fn node_room(&self, n: usize) -> Amount {
        self.node_cap[n] - self.node_held[n]
    }

    /// Free room on all nodes plus what marked containers will free: what YARN can
    /// place pending demand into, counted as a whole as YARN's preemption monitor does.
    pub fn free_room(&self) -> Amount {
        (0..self.node_cap.len()).fold(self.marked, |a, n| a + self.node_room(n))
    }

    /// Whether `amount` may be taken from queue `q` for queue `to` (None: unknown):
    /// the queue is not preemption-disabled, the round's budget covers it, and neither
    /// the queue nor an ancestor drops below its guarantee in a resource being taken.
    /// Ancestors shared with `to` lose nothing (the room stays inside them), so they
    /// are not checked; nor is the root when `to` is unknown; nor anything when the
    /// room stays in `q` itself (LAS time sharing within a queue).
    pub fn may_take(&self, q: usize, amount: Amount, to: Option<usize>) -> bool {
        if self.disabled.get(q).copied().unwrap_or(true) || !amount.fits_in(&self.budget) {
            return false;
        }
        let shared = |i: usize| to.is_some_and(|b| self.lineage(b).any(|j| j == i));
        self.lineage(q)
            .filter(|&i| !shared(i) && (to.is_some() || self.parents[i].is_some()))
            .all(|i| {
                let (h, g) = (self.held[i], self.guaranteed[i]);
                (amount.memory_mb == 0
                    || h.memory_mb >= g.memory_mb.saturating_add(amount.memory_mb))
                    && (amount.vcores_milli == 0
                        || h.vcores_milli >= g.vcores_milli.saturating_add(amount.vcores_milli))
            })
    }

    /// Take `amount` if [`Ledger::may_take`] allows it.
    pub fn take(&mut self, q: usize, room: Room, amount: Amount, to: Option<usize>) -> bool {
        if amount.is_zero() || !self.may_take(q, amount, to) {
            return false;
        }
        self.budget -= amount;
        self.reclaimed += amount;
        let mut next = Some(q);
        while let Some(i) = next {
            self.held[i] -= amount;
            self.queue_reclaimed[i] += amount;
            next = self.parent(i);
        }
        self.move_room(room, amount, false);
        true
    }

    /// Undo a [`Ledger::take`] of this tick that turned out unnecessary.
    pub fn untake(&mut self, q: usize, room: Room, amount: Amount) {
        self.budget += amount;
        self.reclaimed -= amount;
        let mut next = Some(q);
        while let Some(i) = next {
            self.held[i] += amount;
            self.queue_reclaimed[i] -= amount;
            next = self.parent(i);
        }
        self.move_room(room, amount, true);
    }

    /// Give `amount` back to queue `q` (a resumption or a cancelled kill mark).
    pub fn give(&mut self, q: usize, room: Room, amount: Amount) {
        self.restored += amount;
        let mut next = Some(q);
        while let Some(i) = next {
            self.held[i] += amount;
            self.queue_restored[i] += amount;
            next = self.parent(i);
        }
        self.move_room(room, amount, true);
    }

    /// A marked container on node `n` is killed: what it held becomes free room, and
    /// what was already reclaimed from it is no longer advertised as such.
    pub fn killed(&mut self, n: usize, held: Amount, reclaimed: Amount) {
        self.marked -= held;
        self.node_held[n] -= held;
        self.node_reclaimed[n] -= reclaimed;
    }

    /// Move `amount` between what a node's containers hold and its free room.
    fn move_room(&mut self, room: Room, amount: Amount, back: bool) {
        let n = match room {
            Room::QueueOnly => {
                if back {
                    self.marked -= amount;
                } else {
                    self.marked += amount;
                }
                return;
            }
            Room::Advertised(n) | Room::Local(n) => n,
        };
        let advertised = matches!(room, Room::Advertised(_));
        if back {
            self.node_held[n] += amount;
            if advertised {
                self.node_reclaimed[n] -= amount;
            }
        } else {
            self.node_held[n] -= amount;
            if advertised {
                self.node_reclaimed[n] += amount;
            }
        }
    }
}
