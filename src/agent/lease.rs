//! The controller's lease: no controller, no throttling.
//!
//! A controller renews the lease; while it is live the agent accepts suspend and shrink.
//! When it lapses the agent resumes every container it changed. A (re)started agent opens a
//! fresh lease period, so recovered containers stay as they are for one timeout and are
//! resumed then unless a controller renews. Time is passed in.

use std::time::{Duration, Instant};

use super::api::LeaseStatus;

pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("the lease is held by {holder:?} for another {remaining_ms} ms")]
    HeldByOther { holder: String, remaining_ms: u64 },
    #[error("lease timeout {0:?} is outside 100 ms ..= 1 h")]
    BadTimeout(Duration),
    #[error("controller identity must be 1..=200 printable characters")]
    BadIdentity,
}

#[derive(Debug, Clone)]
pub struct Lease {
    holder: Option<String>,
    timeout: Duration,
    expires_at: Instant,
}

impl Lease {
    /// A fresh period of `default_timeout`, held by no one.
    pub fn new(now: Instant, default_timeout: Duration) -> Lease {
        Lease {
            holder: None,
            timeout: default_timeout,
            expires_at: now + default_timeout,
        }
    }

    pub fn is_live(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    pub fn remaining(&self, now: Instant) -> Duration {
        self.expires_at.saturating_duration_since(now)
    }

    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref()
    }

    pub fn renew(
        &mut self,
        now: Instant,
        controller: &str,
        timeout: Option<Duration>,
    ) -> Result<(), LeaseError> {
        if controller.is_empty()
            || controller.chars().count() > 200
            || controller.chars().any(char::is_control)
        {
            return Err(LeaseError::BadIdentity);
        }
        let timeout = timeout.unwrap_or(self.timeout);
        if !(MIN_TIMEOUT..=MAX_TIMEOUT).contains(&timeout) {
            return Err(LeaseError::BadTimeout(timeout));
        }
        if let Some(holder) = &self.holder
            && holder != controller
            && self.is_live(now)
        {
            return Err(LeaseError::HeldByOther {
                holder: holder.clone(),
                remaining_ms: self.remaining(now).as_millis() as u64,
            });
        }
        self.holder = Some(controller.to_string());
        self.timeout = timeout;
        self.expires_at = now + timeout;
        Ok(())
    }

    pub fn status(&self, now: Instant, changed_containers: usize) -> LeaseStatus {
        LeaseStatus {
            holder: self.holder.clone(),
            live: self.is_live(now),
            timeout_ms: self.timeout.as_millis() as u64,
            remaining_ms: self.remaining(now).as_millis() as u64,
            changed_containers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_period_expires_unless_renewed() {
        let t0 = Instant::now();
        let mut l = Lease::new(t0, Duration::from_secs(30));
        assert!(l.is_live(t0 + Duration::from_secs(29)));
        assert!(!l.is_live(t0 + Duration::from_secs(30)));
        l.renew(t0 + Duration::from_secs(20), "c1", None).unwrap();
        assert!(l.is_live(t0 + Duration::from_secs(49)));
        assert_eq!(l.holder(), Some("c1"));
        let s = l.status(t0 + Duration::from_secs(40), 3);
        assert_eq!(
            (s.live, s.remaining_ms, s.changed_containers),
            (true, 10_000, 3)
        );
    }

    #[test]
    fn another_controller_waits_for_expiry() {
        let t0 = Instant::now();
        let mut l = Lease::new(t0, Duration::from_secs(10));
        l.renew(t0, "c1", Some(Duration::from_secs(5))).unwrap();
        assert_eq!(
            l.renew(t0 + Duration::from_secs(1), "c2", None),
            Err(LeaseError::HeldByOther {
                holder: "c1".into(),
                remaining_ms: 4000
            })
        );
        l.renew(t0 + Duration::from_secs(5), "c2", None).unwrap();
        assert_eq!(l.holder(), Some("c2"));
        // The timeout a controller asked for sticks for its later renewals.
        assert!(!l.is_live(t0 + Duration::from_secs(10)));
    }

    #[test]
    fn bad_requests_are_refused() {
        let t0 = Instant::now();
        let mut l = Lease::new(t0, Duration::from_secs(10));
        assert_eq!(l.renew(t0, "", None), Err(LeaseError::BadIdentity));
        assert_eq!(l.renew(t0, "a\nb", None), Err(LeaseError::BadIdentity));
        assert!(matches!(
            l.renew(t0, "c", Some(Duration::from_millis(5))),
            Err(LeaseError::BadTimeout(_))
        ));
        assert!(l.holder().is_none());
    }
}
