//! The event queue: a radix heap on event time, with events of equal time in the order
//! they were scheduled, so that every run is reproducible.
//!
//! A discrete-event simulation never schedules into the past, which is what a radix heap
//! needs: an event goes into bucket `b` = the position of the highest bit in which its
//! time differs from the time last popped (bucket 0: equal). Pushing is O(1); popping
//! refills bucket 0 from the lowest non-empty bucket, moving each event down a few times
//! over its life (at most 64). Events of equal time always share a bucket and are only
//! ever appended and moved in order, so they come out first-in, first-out: the order of
//! a (time, sequence number) binary heap, at a fraction of its cost. Events are stored in
//! the buckets themselves: a pop then reads what the last refill (or a push for the
//! current time) just wrote, where an event kept in a slab since it was scheduled, often
//! long before, was a cache miss on every pop once many events were pending.

use std::collections::VecDeque;

use crate::sim::workload::Time;

const BUCKETS: usize = 65;

pub(crate) struct EventQueue<E> {
    buckets: Vec<VecDeque<(Time, E)>>,
    last: Time,
    len: usize,
}

impl<E> EventQueue<E> {
    pub fn with_capacity(n: usize) -> Self {
        let mut buckets: Vec<VecDeque<(Time, E)>> = (0..BUCKETS).map(|_| VecDeque::new()).collect();
        buckets[0].reserve(n);
        EventQueue {
            buckets,
            last: 0,
            len: 0,
        }
    }

    fn bucket(last: Time, time: Time) -> usize {
        if time == last {
            0
        } else {
            (64 - (time ^ last).leading_zeros()) as usize
        }
    }

    /// Schedule `event` at `time`. The engine never schedules into the past; a time
    /// before the last popped one is treated as that time.
    pub fn push(&mut self, time: Time, event: E) {
        let time = time.max(self.last);
        let b = Self::bucket(self.last, time);
        self.buckets[b].push_back((time, event));
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            self.refill();
        }
        let next = self.buckets[0].pop_front()?;
        self.len -= 1;
        Some(next)
    }

    /// Spread the lowest non-empty bucket over the buckets below it, relative to its
    /// earliest time, which becomes the new `last`.
    fn refill(&mut self) {
        let Some(b) = (1..BUCKETS).find(|&b| !self.buckets[b].is_empty()) else {
            return;
        };
        let mut items = std::mem::take(&mut self.buckets[b]);
        if let Some(min) = items.iter().map(|x| x.0).min() {
            self.last = min;
        }
        for (t, e) in items.drain(..) {
            let nb = Self::bucket(self.last, t);
            self.buckets[nb].push_back((t, e));
        }
        // Keep the allocation for the next time this bucket fills.
        self.buckets[b] = items;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn earliest_first_and_ties_in_push_order() {
        let mut q = EventQueue::with_capacity(4);
        q.push(5, "c");
        q.push(1, "a");
        q.push(5, "d");
        q.push(1, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
        assert!(q.is_empty());
    }

    proptest! {
        /// Interleaved pushes (never into the past) and pops come out exactly as from a
        /// (time, sequence) binary heap.
        #[test]
        fn same_order_as_a_time_sequence_heap(
            ops in prop::collection::vec((0u8..3, 0u64..1_000_000, 0u32..5), 1..400)
        ) {
            let mut q = EventQueue::with_capacity(0);
            let mut h = BinaryHeap::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for (op, dt, spread) in ops {
                if op < 2 {
                    // Many events land on the same few times, as network delays do.
                    let t = now + dt / (1 + 10u64.pow(spread));
                    seq += 1;
                    q.push(t, seq);
                    h.push(Reverse((t, seq)));
                } else {
                    let a = q.pop();
                    let b = h.pop().map(|Reverse(x)| x);
                    prop_assert_eq!(a, b);
                    if let Some((t, _)) = a {
                        now = t;
                    }
                }
            }
            while let Some(b) = h.pop().map(|Reverse(x)| x) {
                prop_assert_eq!(q.pop(), Some(b));
            }
            prop_assert!(q.is_empty());
        }
    }
}
