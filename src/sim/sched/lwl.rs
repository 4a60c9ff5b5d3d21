//! The central scheduler's view of long work per node, for least-work-left placement
//! (Hawk and Eagle place each long task on the general node expected to free up first).
//!
//! A node's expected free time is `max(end of its running long task, now) + estimates of
//! the long tasks queued behind it`. Scanning every node per long job costs O(nodes); here
//! placement is O(log nodes) per task: nodes without long work are found in the
//! "has long work" bitvector (which Eagle also shares with its schedulers), nodes whose
//! running task is expected to end in the future sit in a heap keyed by their expected
//! free time, and nodes whose task overran its estimate in a heap keyed by their backlog
//! (their free time is `now + backlog`, moving with the clock). Heap entries carry a
//! version and stale ones are dropped when met.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::sim::workload::Time;

pub(crate) struct LeastWorkLeft {
    n: u32,
    /// Nodes below this are the short partition: no long work goes there.
    first_general: u32,
    assigned: Vec<u32>,
    end: Vec<Time>,
    backlog: Vec<Time>,
    version: Vec<u32>,
    /// Bit set: long work assigned (running or queued).
    bits: Vec<u64>,
    ahead: BinaryHeap<Reverse<(Time, u32, u32)>>,
    overrun: BinaryHeap<Reverse<(Time, u32, u32)>>,
}

impl LeastWorkLeft {
    pub fn new(n: u32, first_general: u32) -> Self {
        let nn = n as usize;
        LeastWorkLeft {
            n,
            first_general: first_general.min(n),
            assigned: vec![0; nn],
            end: vec![0; nn],
            backlog: vec![0; nn],
            version: vec![0; nn],
            bits: vec![0; nn.div_ceil(64)],
            ahead: BinaryHeap::new(),
            overrun: BinaryHeap::new(),
        }
    }

    pub fn bits(&self) -> &[u64] {
        &self.bits
    }

    #[cfg(test)]
    pub fn first_general(&self) -> u32 {
        self.first_general
    }

    fn set_bit(&mut self, node: u32, on: bool) {
        let (w, b) = ((node / 64) as usize, node % 64);
        if on {
            self.bits[w] |= 1 << b;
        } else {
            self.bits[w] &= !(1 << b);
        }
    }

    /// Re-file `node` after its state changed.
    fn refile(&mut self, node: u32, now: Time) {
        let i = node as usize;
        self.version[i] = self.version[i].wrapping_add(1);
        if self.assigned[i] == 0 || node < self.first_general {
            return;
        }
        let v = self.version[i];
        if self.end[i] > now {
            self.ahead
                .push(Reverse((self.end[i] + self.backlog[i], node, v)));
        } else {
            self.overrun.push(Reverse((self.backlog[i], node, v)));
        }
    }

    /// The first general node without long work at or after word `from`.
    fn idle_from(&self, from: &mut usize) -> Option<u32> {
        let start = self.first_general as usize;
        let mut w = (*from).max(start / 64);
        while w < self.bits.len() {
            let mut free = !self.bits[w];
            if w == start / 64 {
                free &= u64::MAX << (start % 64);
            }
            if (w + 1) * 64 > self.n as usize {
                free &= (1u64 << (self.n as usize - w * 64)) - 1;
            }
            if free != 0 {
                *from = w;
                return Some(w as u32 * 64 + free.trailing_zeros());
            }
            w += 1;
        }
        *from = w;
        None
    }

    /// Place `tasks` long tasks of estimate `est`, each on the node expected to free up
    /// first (an idle node on ties), and record them. Calls `placed` for each.
    pub fn place(&mut self, tasks: u32, est: Time, now: Time, mut placed: impl FnMut(u32)) {
        // Bits only get set while placing, so idle nodes are found in one sweep.
        let mut cursor = 0usize;
        for _ in 0..tasks {
            let Some(node) = self.pick(now, &mut cursor) else {
                return;
            };
            let i = node as usize;
            self.assigned[i] += 1;
            self.backlog[i] += est;
            self.set_bit(node, true);
            self.refile(node, now);
            placed(node);
        }
    }

    fn pick(&mut self, now: Time, cursor: &mut usize) -> Option<u32> {
        if let Some(node) = self.idle_from(cursor) {
            return Some(node);
        }
        // Move tops whose running task has overrun to the overrun heap; drop stale tops.
        while let Some(&Reverse((_, node, v))) = self.ahead.peek() {
            let i = node as usize;
            if v != self.version[i] {
                self.ahead.pop();
            } else if self.end[i] <= now {
                self.ahead.pop();
                self.overrun.push(Reverse((self.backlog[i], node, v)));
            } else {
                break;
            }
        }
        while let Some(&Reverse((_, node, v))) = self.overrun.peek() {
            if v != self.version[node as usize] {
                self.overrun.pop();
            } else {
                break;
            }
        }
        let a = self.ahead.peek().map(|r| (r.0.0, r.0.1));
        let o = self.overrun.peek().map(|r| (now + r.0.0, r.0.1));
        match (a, o) {
            (Some(a), Some(o)) => Some(if o <= a { o.1 } else { a.1 }),
            (Some(a), None) => Some(a.1),
            (None, Some(o)) => Some(o.1),
            (None, None) => None,
        }
    }

    /// A long task of estimate `est` starts on `node` (it leaves the backlog).
    pub fn start(&mut self, node: u32, est: Time, now: Time, ends_at: Time) {
        let i = node as usize;
        if self.assigned[i] == 0 {
            return;
        }
        self.backlog[i] = self.backlog[i].saturating_sub(est);
        self.end[i] = ends_at;
        self.refile(node, now);
    }

    /// A long task ended on `node`.
    pub fn finish(&mut self, node: u32, now: Time) {
        let i = node as usize;
        if self.assigned[i] == 0 {
            return;
        }
        self.assigned[i] -= 1;
        self.end[i] = now;
        if self.assigned[i] == 0 {
            // Nothing assigned means nothing queued either.
            self.backlog[i] = 0;
            self.set_bit(node, false);
        }
        self.refile(node, now);
    }

    /// Nodes below `first` stop (or start again) taking long work.
    pub fn set_first_general(&mut self, first: u32, now: Time) {
        let first = first.min(self.n);
        let (old, new) = (self.first_general, first);
        self.first_general = first;
        for node in old.min(new)..old.max(new) {
            self.refile(node, now);
        }
    }

    /// Expected free time of every general node, the slow way (tests).
    #[cfg(test)]
    fn key(&self, node: u32, now: Time) -> Time {
        let i = node as usize;
        if self.assigned[i] == 0 {
            now
        } else {
            self.end[i].max(now) + self.backlog[i]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every placement goes to a node whose expected free time is the minimum, as a
        /// scan of all general nodes would choose.
        #[test]
        fn picks_a_node_with_the_least_work_left(
            ops in prop::collection::vec((0u8..4, 0u32..40, 1u64..50, 0u64..30), 1..200)
        ) {
            let n = 40;
            let mut l = LeastWorkLeft::new(n, 4);
            let mut now = 0;
            let mut running: Vec<(u32, u64)> = Vec::new();
            for (op, node, est, dt) in ops {
                now += dt;
                match op {
                    0 => {
                        let min = (l.first_general()..n).map(|x| l.key(x, now)).min().unwrap();
                        let mut got = Vec::new();
                        l.place(1, est, now, |x| got.push(x));
                        prop_assert_eq!(got.len(), 1);
                        // The node's key before this placement was the minimum.
                        let k = l.key(got[0], now) - est;
                        prop_assert_eq!(k, min, "picked {}", got[0]);
                        prop_assert!(got[0] >= l.first_general());
                    }
                    1 => {
                        // Start a queued task somewhere.
                        if l.assigned[node as usize] > 0 && l.backlog[node as usize] >= est {
                            l.start(node, est, now, now + est);
                            running.push((node, est));
                        }
                    }
                    2 => {
                        if let Some((node, _)) = running.pop() {
                            l.finish(node, now);
                        }
                    }
                    _ => l.set_first_general(node % 8, now),
                }
            }
        }
    }

    #[test]
    fn idle_nodes_first_lowest_index_then_least_work() {
        let mut l = LeastWorkLeft::new(6, 2);
        let mut got = Vec::new();
        l.place(4, 10, 0, |x| got.push(x));
        assert_eq!(got, vec![2, 3, 4, 5]);
        // All busy with 10 s of backlog each: the next goes to the lowest key, ties to
        // the overrun heap's order (equal keys: lowest node).
        got.clear();
        l.start(4, 10, 0, 5);
        l.place(1, 10, 1, |x| got.push(x));
        assert_eq!(got, vec![4], "node 4 frees at 5 s, the others at 11 s");
        l.finish(2, 2);
        l.finish(3, 2);
        got.clear();
        l.place(1, 10, 3, |x| got.push(x));
        assert_eq!(got, vec![2]);
    }
}
