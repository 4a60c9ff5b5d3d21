//! "Which containers": BIG-C Algorithm 2's order of victims. Jobs with the longest
//! estimated remaining time go first; within a job, the newest containers; the
//! ApplicationMaster only once nothing else of any candidate job is left.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::cluster::{
    App, AppIdx, ClusterView, Container, ContainerId, ContainerIdx, Millis, QueueIdx,
};

/// BIG-C's estimate of a job's remaining time: elapsed x (1 - progress) / progress.
/// Without progress yet, the job looks endless (it is the best victim); a finished job
/// has nothing left.
pub fn remaining_ms(app: &App, now: Millis) -> f64 {
    let elapsed = now.saturating_sub(app.submitted_ms) as f64;
    let p = app.progress;
    if !p.is_finite() || p <= 0.0 {
        f64::INFINITY
    } else if p >= 1.0 {
        0.0
    } else {
        elapsed * (1.0 - p) / p
    }
}

/// The applications of `queue` that `eligible` admits, longest remaining time first;
/// ties go to the newest application (the capacity scheduler's reverse FIFO).
pub fn jobs_by_remaining_time(
    view: &ClusterView,
    queue: QueueIdx,
    now: Millis,
    eligible: impl Fn(AppIdx, &App) -> bool,
) -> Vec<(AppIdx, f64)> {
    let mut jobs: Vec<(AppIdx, f64)> = view
        .apps()
        .iter()
        .enumerate()
        .map(|(i, a)| (AppIdx(i as u32), a))
        .filter(|(i, a)| a.queue == queue && eligible(*i, a))
        .map(|(i, a)| (i, remaining_ms(a, now)))
        .collect();
    jobs.sort_by(|(ia, ra), (ib, rb)| {
        rb.partial_cmp(ra)
            .unwrap_or(Ordering::Equal)
            .then_with(|| newest_app_first(view.app(*ia), view.app(*ib)))
    });
    jobs
}

fn newest_app_first(a: &App, b: &App) -> Ordering {
    b.submitted_ms
        .cmp(&a.submitted_ms)
        .then_with(|| b.id.cmp(&a.id))
}

/// Newest first: latest start, then highest container id.
pub fn newest_first(a: &Container, b: &Container) -> Ordering {
    b.started_ms
        .cmp(&a.started_ms)
        .then_with(|| b.id.cmp(&a.id))
}

/// The sort key behind [`newest_first`]: smaller is newer.
pub fn newest_key(c: &Container) -> (Reverse<Millis>, Reverse<ContainerId>) {
    (Reverse(c.started_ms), Reverse(c.id))
}

/// A job's non-AM containers that `eligible` admits, and its AM containers separately
/// (the caller reaches them last). Unordered: see [`smallest_first`].
pub fn job_containers(
    view: &ClusterView,
    app: AppIdx,
    eligible: impl Fn(ContainerIdx, &Container) -> bool,
) -> (Vec<ContainerIdx>, Vec<ContainerIdx>) {
    view.app(app)
        .containers
        .iter()
        .copied()
        .filter(|&c| eligible(c, view.container(c)))
        .partition(|&c| !view.container(c).is_am)
}

/// `items` in increasing `key` order, sorted lazily (a heap): taking the first few of
/// a job's thousands of containers costs O(n + k log n), not a full sort.
pub fn smallest_first<K: Ord>(
    items: Vec<ContainerIdx>,
    key: impl Fn(ContainerIdx) -> K,
) -> impl Iterator<Item = ContainerIdx> {
    let mut heap: BinaryHeap<Reverse<(K, ContainerIdx)>> =
        items.into_iter().map(|c| Reverse((key(c), c))).collect();
    std::iter::from_fn(move || heap.pop().map(|Reverse((_, c))| c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::JobClass;
    use crate::cluster::builder::ClusterBuilder;
    use crate::resources::Resource;

    #[test]
    fn remaining_time_follows_bigc() {
        let v = ClusterBuilder::new()
            .nodes(1, Resource::new(8192, 8))
            .queue("root.q", 100.0, 100.0, JobClass::Long)
            .app("root.q", "MAPREDUCE")
            .submitted(0)
            .progress(0.25)
            .build()
            .unwrap();
        assert_eq!(remaining_ms(&v.apps()[0], 1000), 3000.0);
        let mut a = v.apps()[0].clone();
        a.progress = 0.0;
        assert!(remaining_ms(&a, 1000).is_infinite());
        a.progress = f64::NAN;
        assert!(remaining_ms(&a, 1000).is_infinite());
        a.progress = 1.5;
        assert_eq!(remaining_ms(&a, 1000), 0.0);
    }

    #[test]
    fn order_is_longest_job_first_newest_container_first_am_last() {
        let v = ClusterBuilder::new()
            .nodes(2, Resource::new(16384, 16))
            .queue("root.q", 100.0, 100.0, JobClass::Long)
            .app("root.q", "MAPREDUCE")
            .submitted(0)
            .progress(0.9)
            .am(Resource::new(1024, 1))
            .containers(2, Resource::new(1024, 1))
            .app("root.q", "SPARK")
            .submitted(10)
            .progress(0.1)
            .am(Resource::new(1024, 1))
            .containers(3, Resource::new(1024, 1))
            .build()
            .unwrap();
        let jobs = jobs_by_remaining_time(&v, QueueIdx(1), 100_000, |_, _| true);
        assert_eq!(
            jobs.iter().map(|j| j.0).collect::<Vec<_>>(),
            [AppIdx(1), AppIdx(0)]
        );
        let (tasks, ams) = job_containers(&v, AppIdx(1), |_, _| true);
        let ids: Vec<u64> = smallest_first(tasks, |c| newest_key(v.container(c)))
            .map(|c| v.container(c).id.id)
            .collect();
        assert_eq!(ids, [4, 3, 2]);
        assert_eq!(ams.len(), 1);
        assert!(v.container(ams[0]).is_am);
    }
}
