//! Locking that survives a panicked holder.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m` even if a holder panicked. The maps and counters behind these mutexes are
/// updated in single steps, so a panic cannot leave them half-changed in a way that later
/// code would trust less than losing them.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
