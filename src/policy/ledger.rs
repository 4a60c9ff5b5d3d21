//! The running tally of one tick: what every queue and node holds as actions are
//! planned, and the round's budget. Every policy takes through [`Ledger::take`], so the
//! invariants (never below a guarantee, never from a preemption-disabled queue, never
//! beyond the round cap) hold for all of them in one place.

use super::amount::Amount;
use crate::cluster::{ClusterView, NodeFacts};

pub(crate) struct Ledger<'a> {
    nodes: &'a [NodeFacts],
    parents: Vec<Option<usize>>,
    guaranteed: Vec<Amount>,
    disabled: Vec<bool>,
    /// Per queue, every level: what its containers hold now (YARN's used, less what
    /// was reclaimed or marked).
    pub held: Vec<Amount>,
    /// The nodes this tick changed; every other node holds what the view says it uses
    /// less its base (what LAS containers there gave up) and advertises nothing
    /// reclaimed, and is never copied (a tick touches a few of thousands of nodes).
    node: NodeBuffers,
    /// Free room on all nodes: the sum of [`Ledger::node_room`].
    room: Amount,
    /// Room that frees up once marked containers are killed.
    pub marked: Amount,
    budget: Amount,
    pub reclaimed: Amount,
    pub restored: Amount,
    pub queue_reclaimed: Vec<Amount>,
    pub queue_restored: Vec<Amount>,
}

/// Which way [`Ledger::move_room`] moves an amount: out of what a node's containers
/// hold (taken), or back into it (untaken or given back).
#[derive(Clone, Copy, Debug)]
enum Flow {
    Out,
    Back,
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

/// The per-node state of a [`Ledger`], kept from one tick for the next so that a tick
/// allocates nothing per node. A node's entries count only while its stamp is the
/// tick's generation.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeBuffers {
    /// One entry per node, its fields side by side: a tick visits thousands of nodes
    /// in no order, one cache line each.
    entries: Vec<NodeEntry>,
    generation: u32,
    /// The stamped nodes, in the order first touched.
    touched: Vec<u32>,
    /// Nodes whose advertised reclaimed room went from nothing to something (a node
    /// may be listed more than once).
    advertising: Vec<u32>,
    /// Per node, what its containers gave up before the tick and keep on the node
    /// (LAS's time sharing), set by whoever keeps count of them between ticks: an
    /// unstamped node holds the view's usage less this. Kept across ticks, unlike the
    /// entries.
    base: Vec<NodeBase>,
    /// What the bases add to the free room of all nodes.
    base_room: Amount,
    /// Whether any base is set; cleared bases cost nothing to clear again.
    based: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct NodeBase {
    reduced: Amount,
    /// What `reduced` adds to the node's free room (room never goes below zero).
    room: Amount,
}

impl NodeBuffers {
    /// No node has a base, and there are `nodes` of them.
    pub fn clear_bases(&mut self, nodes: usize) {
        if self.based || self.base.len() != nodes {
            self.base.clear();
            self.base.resize(nodes, NodeBase::default());
            self.base_room = Amount::ZERO;
            self.based = false;
        }
    }

    /// Node `n`'s containers gave up `reduced` before the tick and the node keeps it;
    /// `facts` are the view's for the node. Replaces the node's earlier base.
    pub fn set_base(&mut self, n: usize, reduced: Amount, facts: &NodeFacts) {
        let (cap, used) = (Amount::from(facts.capacity), Amount::from(facts.used));
        let Some(b) = self.base.get_mut(n) else {
            return;
        };
        let room = (cap - (used - reduced)) - (cap - used);
        self.base_room = self.base_room - b.room + room;
        *b = NodeBase { reduced, room };
        self.based |= !reduced.is_zero();
    }

    /// How many nodes the bases are laid out for.
    pub fn bases(&self) -> usize {
        self.base.len()
    }

    /// Node `n`'s base.
    pub fn base(&self, n: usize) -> Amount {
        self.base.get(n).map_or(Amount::ZERO, |b| b.reduced)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct NodeEntry {
    /// What the node's live containers hold physically (YARN's used, less what was
    /// reclaimed).
    held: Amount,
    /// Reclaimed room that the node advertises to the RM.
    reclaimed: Amount,
    stamp: u32,
}

impl<'a> Ledger<'a> {
    pub fn new(view: &'a ClusterView, budget: Amount, mut node: NodeBuffers) -> Ledger<'a> {
        let nq = view.queues().len();
        let nn = view.nodes().len();
        node.generation = node.generation.wrapping_add(1);
        if node.generation == 0 || node.entries.len() != nn {
            node.entries.clear();
            node.entries.resize(nn, NodeEntry::default());
            node.generation = 1;
        }
        // Bases of another node list would be of other nodes.
        if node.base.len() != nn {
            node.clear_bases(nn);
        }
        let room = Amount::from(view.free_room()) + node.base_room;
        node.touched.clear();
        node.advertising.clear();
        Ledger {
            nodes: view.node_facts(),
            parents: view
                .queues()
                .iter()
                .map(|q| q.parent.map(|p| p.get()))
                .collect(),
            guaranteed: view
                .queues()
                .iter()
                .map(|q| Amount::from(q.guaranteed))
                .collect(),
            disabled: view
                .queues()
                .iter()
                .map(|q| q.preemption_disabled)
                .collect(),
            held: view.queues().iter().map(|q| Amount::from(q.used)).collect(),
            node,
            room,
            marked: Amount::ZERO,
            budget,
            reclaimed: Amount::ZERO,
            restored: Amount::ZERO,
            queue_reclaimed: vec![Amount::ZERO; nq],
            queue_restored: vec![Amount::ZERO; nq],
        }
    }

    /// The per-node state, for the next tick's ledger.
    pub fn take_buffers(&mut self) -> NodeBuffers {
        std::mem::take(&mut self.node)
    }

    /// Whether this tick changed node `n` (it is among [`Ledger::touched_nodes`]).
    pub fn touched(&self, n: usize) -> bool {
        self.node.entries[n].stamp == self.node.generation
    }

    /// Physical capacity of node `n`.
    pub fn node_cap(&self, n: usize) -> Amount {
        Amount::from(self.nodes[n].capacity)
    }

    /// What node `n`'s live containers hold physically now.
    pub fn node_held(&self, n: usize) -> Amount {
        if self.touched(n) {
            self.node.entries[n].held
        } else {
            self.unstamped_held(n)
        }
    }

    /// What node `n` holds before this tick changes it.
    fn unstamped_held(&self, n: usize) -> Amount {
        Amount::from(self.nodes[n].used) - self.node.base(n)
    }

    /// Reclaimed room node `n` advertises to the RM.
    pub fn node_reclaimed(&self, n: usize) -> Amount {
        if self.touched(n) {
            self.node.entries[n].reclaimed
        } else {
            Amount::ZERO
        }
    }

    /// The nodes whose holdings or reclaimed room this tick changed, in the order
    /// first changed; no other node has reclaimed room. A node holding only less by
    /// its base is not among them.
    pub fn touched_nodes(&self) -> &[u32] {
        &self.node.touched
    }

    /// Every node that has advertised reclaimed room now is among these (some may
    /// have none again, some are listed twice).
    pub fn advertising_nodes(&self) -> &[u32] {
        &self.node.advertising
    }

    /// A container on node `n` was reduced before this tick: its node holds
    /// `reclaimed` less, and advertises it.
    pub fn reduced_before(&mut self, n: usize, reclaimed: Amount) {
        self.change_node(n, |held, r| {
            *held -= reclaimed;
            *r += reclaimed;
        });
    }

    /// Change what node `n` holds and advertises as reclaimed, keeping the total room.
    fn change_node(&mut self, n: usize, change: impl FnOnce(&mut Amount, &mut Amount)) {
        if !self.touched(n) {
            self.node.entries[n] = NodeEntry {
                held: self.unstamped_held(n),
                reclaimed: Amount::ZERO,
                stamp: self.node.generation,
            };
            self.node.touched.push(n as u32);
        }
        let before = self.node_room(n);
        let e = &mut self.node.entries[n];
        let advertised = e.reclaimed.any_positive();
        change(&mut e.held, &mut e.reclaimed);
        if !advertised && e.reclaimed.any_positive() {
            self.node.advertising.push(n as u32);
        }
        self.room = self.room - before + self.node_room(n);
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
        self.node_cap(n) - self.node_held(n)
    }

    /// Free room on all nodes now.
    pub fn nodes_room(&self) -> Amount {
        self.room
    }

    /// Free room on all nodes plus what marked containers will free: what YARN can
    /// place pending demand into, counted as a whole as YARN's preemption monitor does.
    pub fn free_room(&self) -> Amount {
        self.marked + self.room
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
        self.move_room(room, amount, Flow::Out);
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
        self.move_room(room, amount, Flow::Back);
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
        self.move_room(room, amount, Flow::Back);
    }

    /// A marked container on node `n` is killed: what it held becomes free room, and
    /// what was already reclaimed from it is no longer advertised as such.
    pub fn killed(&mut self, n: usize, held: Amount, reclaimed: Amount) {
        self.marked -= held;
        self.change_node(n, |h, r| {
            *h -= held;
            *r -= reclaimed;
        });
    }

    /// Move `amount` between what a node's containers hold and its free room.
    fn move_room(&mut self, room: Room, amount: Amount, flow: Flow) {
        let n = match room {
            Room::QueueOnly => {
                match flow {
                    Flow::Out => self.marked += amount,
                    Flow::Back => self.marked -= amount,
                }
                return;
            }
            Room::Advertised(n) | Room::Local(n) => n,
        };
        let advertised = matches!(room, Room::Advertised(_));
        self.change_node(n, |held, reclaimed| match flow {
            Flow::Out => {
                *held -= amount;
                if advertised {
                    *reclaimed += amount;
                }
            }
            Flow::Back => {
                *held += amount;
                if advertised {
                    *reclaimed -= amount;
                }
            }
        });
    }
}
