//! The event queue: a radix heap on event time, with events of equal time in the order
//! they were scheduled, so that every run is reproducible.
//!
//! A discrete-event simulation never schedules into the past, which is what a radix heap
//! needs. Times are read as 16 hex digits: an event goes into the bucket of (the highest
//! digit in which its time differs from the time last popped, its own value of that
//! digit), or into bucket 0 when the times are equal. Pushing is O(1); popping refills
//! bucket 0 from the lowest non-empty bucket, whose events then differ from its earliest
//! time only in lower digits, so each event moves down a whole digit or more per move,
//! at most 16 times over its life (a one-bit radix heap moved kairos' events 6.8 times
//! each on yahoo_sub2). Every event always sits in the bucket its time and the last
//! popped time give, so events of equal time share a bucket; they are only ever appended
//! and moved in order into buckets a refill finds empty, so they come out first-in,
//! first-out: the order of a (time, sequence number) binary heap, at a fraction of its
//! cost. Events are stored in the buckets themselves: a pop then reads what the last
//! refill (or a push for the current time) just wrote, where an event kept in a slab
//! since it was scheduled, often long before, was a cache miss on every pop once many
//! events were pending.

use std::collections::VecDeque;

use crate::sim::workload::Time;

/// Bits per digit: a bucket is (highest digit in which an event's time differs from the
/// last popped time, that digit's value), so a refill moves an event down at least one
/// whole digit, not one bit.
const DIGIT: u32 = 4;
const VALUES: usize = 1 << DIGIT;
const LEVELS: usize = 64usize.div_ceil(DIGIT as usize);

pub(crate) struct EventQueue<E> {
    /// Bucket 0 holds events at `last`; bucket 1 + level * VALUES + value the rest.
    buckets: Vec<VecDeque<(Time, E)>>,
    /// Per level, which values' buckets are non-empty; and which levels have any.
    filled: [u64; LEVELS],
    levels: u32,
    last: Time,
    len: usize,
}

impl<E> EventQueue<E> {
    pub fn with_capacity(n: usize) -> Self {
        let mut buckets: Vec<VecDeque<(Time, E)>> =
            (0..1 + LEVELS * VALUES).map(|_| VecDeque::new()).collect();
        buckets[0].reserve(n);
        EventQueue {
            buckets,
            filled: [0; LEVELS],
            levels: 0,
            last: 0,
            len: 0,
        }
    }

    /// The bucket of `time` (not before `last`), as (level, value); `None` for `last`.
    fn slot(last: Time, time: Time) -> Option<(usize, usize)> {
        if time == last {
            return None;
        }
        let level = ((63 - (time ^ last).leading_zeros()) / DIGIT) as usize;
        let value = (time >> (level as u32 * DIGIT)) as usize & (VALUES - 1);
        Some((level, value))
    }

    #[inline]
    fn put(&mut self, time: Time, event: E) {
        match Self::slot(self.last, time) {
            None => self.buckets[0].push_back((time, event)),
            Some((level, value)) => {
                self.buckets[1 + level * VALUES + value].push_back((time, event));
                self.filled[level] |= 1 << value;
                self.levels |= 1 << level;
            }
        }
    }

    /// Schedule `event` at `time`. The engine never schedules into the past; a time
    /// before the last popped one is treated as that time.
    pub fn push(&mut self, time: Time, event: E) {
        let time = time.max(self.last);
        self.put(time, event);
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
    /// earliest time, which becomes the new `last`. The buckets it fills are empty, so
    /// events keep their order.
    fn refill(&mut self) {
        if self.levels == 0 {
            return;
        }
        let level = self.levels.trailing_zeros() as usize;
        let value = self.filled[level].trailing_zeros() as usize;
        self.filled[level] &= !(1 << value);
        if self.filled[level] == 0 {
            self.levels &= !(1 << level);
        }
        let b = 1 + level * VALUES + value;
        let mut items = std::mem::take(&mut self.buckets[b]);
        if let Some(min) = items.iter().map(|x| x.0).min() {
            self.last = min;
        }
        for (t, e) in items.drain(..) {
            self.put(t, e);
        }
        // Keep the allocation for the next time this bucket fills.
        self.buckets[b] = items;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Drop the events `keep` refuses. The rest keep their buckets and their order, so
    /// they come out as they would have.
    pub fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        for (b, bucket) in self.buckets.iter_mut().enumerate() {
            if bucket.is_empty() {
                continue;
            }
            bucket.retain(|(_, e)| keep(e));
            if b > 0 && bucket.is_empty() {
                let (level, value) = ((b - 1) / VALUES, (b - 1) % VALUES);
                self.filled[level] &= !(1 << value);
                if self.filled[level] == 0 {
                    self.levels &= !(1 << level);
                }
            }
        }
        self.len = self.buckets.iter().map(VecDeque::len).sum();
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
        /// Interleaved pushes (never into the past), pops and drops of every event whose
        /// sequence number is a multiple of `dt % 5 + 2` come out exactly as from a (time,
        /// sequence) binary heap.
        #[test]
        fn same_order_as_a_time_sequence_heap(
            ops in prop::collection::vec((0u8..4, 0u64..1 << 44, 0u32..13), 1..400)
        ) {
            let mut q = EventQueue::with_capacity(0);
            let mut h = BinaryHeap::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for (op, dt, spread) in ops {
                if op < 2 {
                    // Many events land on the same few times, as network delays do;
                    // others lie days ahead, as a suspended container's end does.
                    let t = now + dt / (1 + 10u64.pow(spread));
                    seq += 1;
                    q.push(t, seq);
                    h.push(Reverse((t, seq)));
                } else if op == 3 {
                    let m = dt % 5 + 2;
                    q.retain(|s| s % m != 0);
                    h.retain(|Reverse((_, s))| s % m != 0);
                    prop_assert_eq!(q.len(), h.len());
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
