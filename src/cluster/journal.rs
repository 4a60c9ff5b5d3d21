//! The journals of a view's in-place changes.

use std::sync::{Arc, Weak};

use super::ContainerIdx;

/// An identity that needs no process-wide counter: an allocation of its own, which
/// every [`LineageMark`] keeps from being freed (by a weak reference), so that its
/// address is not reused while a mark could still be compared with it.
#[derive(Clone, Debug, Default)]
pub(super) struct Lineage(Arc<()>);

/// Which [`Lineage`] something was taken of; equal marks are of the same lineage.
#[derive(Clone, Debug)]
pub struct LineageMark(Weak<()>);

impl PartialEq for LineageMark {
    fn eq(&self, other: &Self) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl Eq for LineageMark {}

impl Lineage {
    pub(super) fn mark(&self) -> LineageMark {
        LineageMark(Arc::downgrade(&self.0))
    }

    pub(super) fn is(&self, mark: &LineageMark) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.0), mark.0.as_ptr())
    }
}

/// What in-place changes (patch.rs) did since a reader last looked, so that state
/// kept between ticks redoes only that. Two are kept:
/// - the nodes they touched, so that a policy keeping per-node state redoes only those
///   nodes: a node is listed when what is allocated there, which of its containers are
///   below their allocation and how far, its advertised room, or the queue of an
///   application with a reduced container there changes (nodes may be listed more
///   than once);
/// - how the container list was reordered ([`ContainerMove`]), so that state kept by
///   container place (the policy's memos) follows its containers.
///
/// Every view gets its own `lineage`, a clone included (the two then change apart), and the
/// list is cleared now and then (`base` counts what was cleared), so a reader holding a
/// [`JournalMark`] of another view, or of changes already cleared, learns that it must
/// start over instead of missing a change.
#[derive(Debug)]
pub(super) struct Journal<T> {
    lineage: Lineage,
    base: u64,
    entries: Vec<T>,
}

/// Where a reader of one of a view's journals got to: see
/// [`ClusterView::nodes_changed_since`] and [`ClusterView::containers_moved_since`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalMark {
    lineage: LineageMark,
    seq: u64,
}

/// How an in-place change moved containers in [`ClusterView::containers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerMove {
    /// One was appended.
    Added,
    /// The one at this index was removed, and the last one moved into its index
    /// (unless it was the last).
    Removed(ContainerIdx),
}

impl<T> Default for Journal<T> {
    fn default() -> Self {
        Journal {
            lineage: Lineage::default(),
            base: 0,
            entries: Vec::new(),
        }
    }
}

/// A clone changes apart from its original: a lineage of its own.
impl<T> Clone for Journal<T> {
    fn clone(&self) -> Self {
        Journal::default()
    }
}

/// Derived from the changes, not from what the view shows.
impl<T> PartialEq for Journal<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Journal<T> {
    pub(super) fn clear(&mut self) {
        self.base += self.entries.len() as u64;
        self.entries.clear();
    }

    pub(super) fn mark(&self) -> JournalMark {
        JournalMark {
            lineage: self.lineage.mark(),
            seq: self.base + self.entries.len() as u64,
        }
    }

    pub(super) fn since(&self, mark: &JournalMark) -> Option<&[T]> {
        let from = mark.seq.checked_sub(self.base)?;
        if !self.lineage.is(&mark.lineage) {
            return None;
        }
        self.entries.get(usize::try_from(from).ok()?..)
    }

    /// Cleared past `limit`, so that a journal nobody reads stays small.
    pub(super) fn push(&mut self, e: T, limit: usize) {
        if self.entries.len() >= limit {
            self.clear();
        }
        self.entries.push(e);
    }
}
