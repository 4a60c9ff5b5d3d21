//! What happened to each application, read from the RM state for the demo's comparison:
//! when it was submitted, got its first task container and finished, and how many of its
//! task attempts were killed and run again.

use crate::cluster::{ApplicationId, JobClass};
use crate::yarn::dto::{FinalApplicationStatus, YarnApplicationState};

use super::state::{RmApp, RmState};
use super::workload::Kernel;

/// One application's timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct AppRecord {
    pub id: ApplicationId,
    pub name: String,
    pub queue: String,
    pub class: JobClass,
    pub submitted_ms: u64,
    /// First task container allocated; `None` while it still waits.
    pub first_container_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    /// Task attempts started, in all.
    pub attempts: u32,
    /// Task attempts that ended killed (preempted, aborted) and were requested again
    /// without counting against the task's attempt limit.
    pub killed: u32,
    /// Task attempts that failed (counted against the task's attempt limit), among them
    /// those ended by a signal (137 after `docker kill` or FORCEFUL_SHUTDOWN, 143).
    pub failed: u32,
}

impl AppRecord {
    /// Submission to first task container, in milliseconds.
    pub fn queueing_ms(&self) -> Option<u64> {
        Some(self.first_container_ms?.saturating_sub(self.submitted_ms))
    }

    /// Submission to finish, for an application that succeeded.
    pub fn completion_ms(&self) -> Option<u64> {
        if self.final_status != FinalApplicationStatus::Succeeded {
            return None;
        }
        Some(self.finished_ms?.saturating_sub(self.submitted_ms))
    }

    /// Ended in FAILED (not killed by a user).
    pub fn failed_app(&self) -> bool {
        self.state == YarnApplicationState::Failed
    }
}

/// The mix tags its jobs `preemptor.class=short|long`; without a tag a TPC-H query is
/// short and anything else long, as in BIG-C's workload.
fn class_of(app: &RmApp) -> JobClass {
    for t in &app.tags {
        match t.as_str() {
            "preemptor.class=short" => return JobClass::Short,
            "preemptor.class=long" => return JobClass::Long,
            _ => {}
        }
    }
    match app.workload.as_ref().map(|w| w.kernel) {
        Some(Kernel::Tpch) => JobClass::Short,
        _ => JobClass::Long,
    }
}

/// Every application the RM still holds (the newest
/// [`MAX_COMPLETED_APPS`](super::state::MAX_COMPLETED_APPS) finished ones), in id order.
pub fn app_records(state: &RmState) -> Vec<AppRecord> {
    state
        .apps
        .values()
        .map(|a| AppRecord {
            id: a.id,
            name: a.name.clone(),
            queue: a.queue_name.clone(),
            class: class_of(a),
            submitted_ms: a.submitted_ms,
            first_container_ms: a.first_task_ms,
            finished_ms: a.finished_ms,
            state: a.state,
            final_status: a.final_status,
            attempts: a.tasks.iter().map(|t| t.attempts).sum(),
            killed: a.tasks.iter().map(|t| t.kills).sum(),
            failed: a.tasks.iter().map(|t| t.failures).sum(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::state::exit;
    use crate::emulator::state::tests::{TS, state_with, submit, two_queues};
    use crate::resources::Resource;

    #[test]
    fn records_follow_an_application_through_queueing_a_kill_and_the_finish() {
        let mut s = state_with(1, Resource::new(4096, 4), two_queues());
        let long = submit(&mut s, "long", 3, 1024, TS);
        let launched = s.heartbeat(0, TS + 1000);
        assert_eq!(launched.len(), 3);
        let short = submit(&mut s, "short", 1, 1024, TS + 2000);
        s.heartbeat(0, TS + 3000);
        let r = app_records(&s);
        assert_eq!(r[0].class, JobClass::Long, "no tag, burn kernel");
        assert_eq!(r[0].queueing_ms(), Some(1000));
        assert_eq!(r[1].first_container_ms, None, "the node is full");
        assert_eq!(r[1].queueing_ms(), None);

        // One long task preempted: its room goes to the short app, then it runs again.
        s.container_completed(
            launched[0].container,
            exit::PREEMPTED,
            "k".into(),
            TS + 4000,
        );
        s.heartbeat(0, TS + 5000);
        for l in &launched[1..] {
            s.container_completed(l.container, exit::SUCCESS, String::new(), TS + 6000);
        }
        let again = s.heartbeat(0, TS + 7000);
        let rerun = again.iter().find(|l| l.container.application() == long);
        s.container_completed(rerun.unwrap().container, 0, String::new(), TS + 9000);
        let r = app_records(&s);
        let (l, sh) = (&r[0], &r[1]);
        assert_eq!((l.attempts, l.killed, l.failed), (4, 1, 0));
        assert_eq!(l.completion_ms(), Some(9000));
        assert!(!l.failed_app());
        assert_eq!(sh.id, short);
        assert_eq!(sh.queueing_ms(), Some(5000), "AM at 5 s, its task at 7 s");
        assert_eq!(sh.completion_ms(), None, "still running");
    }
}
