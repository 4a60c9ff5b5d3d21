//! Why a policy chose an action, kept as values and put into words only when printed:
//! a plan holds the same whether or not anyone reads its reasons, and a simulator that
//! never prints them pays for a few copied numbers, not for formatting.

use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::amount::Amount;
use crate::cluster::{ApplicationId, ContainerId, Millis, NodeId};
use crate::resources::Resource;

/// Why an action was chosen; `Display` gives the preemption log's sentence.
#[derive(Clone, Debug, PartialEq)]
pub enum Reason {
    /// Said by whoever made the action outside a policy: the controller undoing its
    /// changes, an operator.
    Said(String),
    /// The cluster's policy is `none`.
    PolicyNone,
    /// The container's queue has policy `none`.
    QueuePolicyNone { queue: Arc<str> },
    /// Suspended as long as `yarn.preemptor.suspend.max-duration-ms` allows.
    SuspendedTooLong { suspended_ms: u64, rest_ms: u64 },
    /// BIG-C's share-based resumption, after `delay` picks (delayed resumption D).
    BelowShare {
        queue: Arc<str>,
        below: Amount,
        picks: u32,
        delay: u32,
        /// Graceful gives back one step, not all.
        step_back: bool,
    },
    /// Taken from an over-served queue (BIG-C Algorithm 2).
    Reclaim {
        why: Arc<ReclaimWhy>,
        /// Taken once only ApplicationMasters were left.
        ams_only: bool,
        /// Graceful's step, when one step was taken rather than a suspension.
        graceful_step: Option<Resource>,
    },
    /// YARN's kill path: the mark's wait is over.
    KillAfterWait { marked_at_ms: Millis, wait_ms: u64 },
    /// A shrunk container that swaps is frozen where it is.
    SwapFreeze,
    /// Dice's opportunistic preemption on a node that accepted the request.
    DiceSuspend {
        window: Arc<DiceWindowWhy>,
        job: ApplicationId,
        /// This suspension's number (1-based), of at most `max`.
        suspension: u32,
        max: u32,
    },
    /// Dice gives the room back once the suspension timeout is over.
    DiceTimeout { timeout_ms: u64 },
    /// A node's advertised capacity: physical, plus what was reclaimed on it, plus
    /// LAS's N + Q admission when `las_slots` is (N, Q).
    NodeCapacity {
        physical: Resource,
        reclaimed: Resource,
        las_slots: Option<(u32, u32)>,
    },
    /// Dice's elastic sizing put the node in the short partition.
    ToShortPartition,
    /// Dice's elastic sizing gave the node back to the general partition.
    ToGeneralPartition,
    /// Kairos: the node's quantum expired and `waiting` has less attained service.
    LasQuantumExpired {
        node: NodeId,
        quantum_ms: u64,
        waiting: ContainerId,
        waiting_attained_ms: u64,
        attained_ms: u64,
    },
    /// Kairos: a new container needs a core, and this one has the most service.
    LasNoFreeCore {
        node: NodeId,
        cap: Amount,
        attained_ms: u64,
    },
    /// Kairos resumes the waiting container with the least attained service, after a
    /// quantum expired (`quantum`) or because room is free.
    LasResume {
        node: NodeId,
        quantum: bool,
        attained_ms: u64,
    },
}

/// What one reclaim round says of every container it takes from one job.
#[derive(Clone, Debug, PartialEq)]
pub struct ReclaimWhy {
    /// The most starved queue and by how much, if any queue is.
    pub starved: Option<(Arc<str>, Amount)>,
    pub over_queue: Arc<str>,
    pub over_by: Amount,
    pub target: Amount,
    pub job: ApplicationId,
    /// The job's place among the queue's jobs by remaining time (0: longest).
    pub rank: usize,
    /// Estimated remaining time, ms (infinite: no progress reported yet).
    pub remaining_ms: f64,
}

/// A Dice window's decision, said of every suspension it requested.
#[derive(Clone, Debug, PartialEq)]
pub struct DiceWindowWhy {
    pub mean_wait_ms: f64,
    pub r: f64,
    pub model: &'static str,
    pub p_preemption: f64,
    pub requests: usize,
}

/// Something an operator should know that is not an action.
#[derive(Clone, Debug, PartialEq)]
pub enum Note {
    /// Running LAS containers exceed their node's room and none may be suspended.
    LasOverfull {
        node: NodeId,
        running: Amount,
        cap: Amount,
    },
}

/// Milliseconds shown as whole seconds ("12 s"), rounded half to even as `{:.0}`
/// rounds, in integers: LAS names attained service in every move's reason.
struct Secs(u64);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (q, r) = (self.0 / 1000, self.0 % 1000);
        let q = if r > 500 || (r == 500 && q % 2 == 1) {
            q + 1
        } else {
            q
        };
        write!(f, "{q} s")
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Said(s) => f.write_str(s),
            Reason::PolicyNone => f.write_str(
                "policy is none: Preemptor is off and gives every container its allocation back",
            ),
            Reason::QueuePolicyNone { queue } => write!(
                f,
                "queue {queue} has policy none: its containers get their allocation back"
            ),
            Reason::SuspendedTooLong {
                suspended_ms,
                rest_ms,
            } => write!(
                f,
                "suspended for {}, the most yarn.preemptor.suspend.max-duration-ms allows before the framework's own timeout could give up on it; it runs at least {} before it may be taken again",
                Secs(*suspended_ms),
                Secs(*rest_ms)
            ),
            Reason::BelowShare {
                queue,
                below,
                picks,
                delay,
                step_back,
            } => {
                write!(
                    f,
                    "queue {queue} is {below} below its ideal share; picked for resumption {picks} times (delayed resumption D = {delay})"
                )?;
                if *step_back {
                    f.write_str("; one graceful step back")?;
                }
                Ok(())
            }
            Reason::Reclaim {
                why,
                ams_only,
                graceful_step,
            } => {
                write!(f, "{why}")?;
                if *ams_only {
                    f.write_str("; only ApplicationMasters are left")?;
                }
                if let Some(step) = graceful_step {
                    write!(f, "; one graceful step of {step}")?;
                }
                Ok(())
            }
            Reason::KillAfterWait {
                marked_at_ms,
                wait_ms,
            } => write!(
                f,
                "marked for preemption at {marked_at_ms} ms; the ApplicationMaster did not release it within max-wait-before-kill ({})",
                Secs(*wait_ms)
            ),
            Reason::SwapFreeze => f.write_str(
                "swapping (swap-in or major-fault rate above the threshold): frozen at the footprint CPU; no more memory is taken from it",
            ),
            Reason::DiceSuspend {
                window,
                job,
                suspension,
                max,
            } => write!(
                f,
                "{window}: long job {job} runs here, no long container is suspended here, short work is waiting (suspension {suspension} of at most {max})"
            ),
            Reason::DiceTimeout { timeout_ms } => write!(
                f,
                "suspension timeout ({}) is over and the room it lent is free again",
                Secs(*timeout_ms)
            ),
            Reason::NodeCapacity {
                physical,
                reclaimed,
                las_slots,
            } => {
                write!(f, "physical {physical}")?;
                if reclaimed.any_positive() {
                    write!(f, " + reclaimed {reclaimed}")?;
                }
                if let Some((n, q)) = las_slots {
                    write!(f, " + LAS admission of N + Q = {n} + {q} containers")?;
                }
                Ok(())
            }
            Reason::ToShortPartition => f.write_str(
                "Dice elastic sizing: converted to the short partition for this window; takes no new long containers",
            ),
            Reason::ToGeneralPartition => f.write_str("back to the general partition"),
            Reason::LasQuantumExpired {
                node,
                quantum_ms,
                waiting,
                waiting_attained_ms,
                attained_ms,
            } => write!(
                f,
                "node {node}: its quantum W = {} expired and {waiting} waits with less attained service ({} <= {})",
                Secs(*quantum_ms),
                Secs(*waiting_attained_ms),
                Secs(*attained_ms)
            ),
            Reason::LasNoFreeCore {
                node,
                cap,
                attained_ms,
            } => write!(
                f,
                "node {node}: no free core for a new container (running LAS containers need more than {cap}); it has the most attained service ({})",
                Secs(*attained_ms)
            ),
            Reason::LasResume {
                node,
                quantum: true,
                attained_ms,
            } => write!(
                f,
                "node {node}: a quantum expired and this waiting container has the least attained service ({})",
                Secs(*attained_ms)
            ),
            Reason::LasResume {
                node,
                quantum: false,
                attained_ms,
            } => write!(
                f,
                "node {node}: room is free; least attained service among waiting containers ({})",
                Secs(*attained_ms)
            ),
        }
    }
}

impl fmt::Display for ReclaimWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.starved {
            Some((queue, by)) => write!(f, "queue {queue} is {by} short of its share")?,
            None => f.write_str("starved demand")?,
        }
        write!(
            f,
            "; {} is over its share by {}, reclaiming {} this round; job {} has the {} remaining time (",
            self.over_queue,
            self.over_by,
            self.target,
            self.job,
            if self.rank == 0 {
                "longest"
            } else {
                "next-longest"
            },
        )?;
        if self.remaining_ms.is_infinite() {
            f.write_str("unknown, no progress reported yet)")
        } else {
            write!(f, "est. {:.0} s)", self.remaining_ms / 1000.0)
        }
    }
}

impl fmt::Display for DiceWindowWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Dice window: short tasks waited {} on average (r = {:.2}, {} model p = {:.2}); opportunistic preemption request to this node, one of {}",
            Secs(self.mean_wait_ms as u64),
            self.r,
            self.model,
            self.p_preemption,
            self.requests
        )
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::LasOverfull { node, running, cap } => write!(
                f,
                "node {node}: running LAS containers need {running} but only {cap} is theirs; none may be suspended now (starvation guard, protected queue or round budget)"
            ),
        }
    }
}

/// As the sentence the log prints.
impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Serialize for Note {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentences the preemption log printed when reasons were formatted in place.
    #[test]
    fn reasons_read_as_the_log_printed_them() {
        let app: ApplicationId = "application_1700000000000_0001".parse().unwrap();
        let why = Arc::new(ReclaimWhy {
            starved: Some(("root.short".into(), Amount::new(8192, 4000))),
            over_queue: "root.long".into(),
            over_by: Amount::new(4096, 2000),
            target: Amount::new(2048, 1000),
            job: app,
            rank: 1,
            remaining_ms: 480_000.0,
        });
        let reclaim = Reason::Reclaim {
            why: why.clone(),
            ams_only: true,
            graceful_step: Some(Resource::new(1024, 1)),
        };
        assert_eq!(
            reclaim.to_string(),
            format!(
                "queue root.short is {} short of its share; root.long is over its share by {}, \
                 reclaiming {} this round; job {app} has the next-longest remaining time \
                 (est. 480 s); only ApplicationMasters are left; one graceful step of {}",
                Amount::new(8192, 4000),
                Amount::new(4096, 2000),
                Amount::new(2048, 1000),
                Resource::new(1024, 1)
            )
        );
        let unknown = ReclaimWhy {
            starved: None,
            rank: 0,
            remaining_ms: f64::INFINITY,
            ..(*why).clone()
        };
        assert!(unknown.to_string().starts_with("starved demand; "));
        assert!(
            unknown
                .to_string()
                .ends_with("has the longest remaining time (unknown, no progress reported yet)")
        );
        let share = Reason::BelowShare {
            queue: "root.long".into(),
            below: Amount::new(0, 1000),
            picks: 3,
            delay: 3,
            step_back: true,
        };
        assert_eq!(
            share.to_string(),
            format!(
                "queue root.long is {} below its ideal share; picked for resumption 3 times \
                 (delayed resumption D = 3); one graceful step back",
                Amount::new(0, 1000)
            )
        );
        let capacity = Reason::NodeCapacity {
            physical: Resource::new(6144, 4),
            reclaimed: Resource::new(0, 1),
            las_slots: Some((4, 2)),
        };
        assert_eq!(
            capacity.to_string(),
            format!(
                "physical {} + reclaimed {} + LAS admission of N + Q = 4 + 2 containers",
                Resource::new(6144, 4),
                Resource::new(0, 1)
            )
        );
        let node = NodeId::new("nm1:8042");
        let quantum = Reason::LasQuantumExpired {
            node: node.clone(),
            quantum_ms: 50_000,
            waiting: "container_1700000000000_0001_01_000002".parse().unwrap(),
            waiting_attained_ms: 1_400,
            attained_ms: 61_500,
        };
        assert_eq!(
            quantum.to_string(),
            "node nm1:8042: its quantum W = 50 s expired and \
             container_1700000000000_0001_01_000002 waits with less attained service \
             (1 s <= 62 s)"
        );
        let dice = Reason::DiceSuspend {
            window: Arc::new(DiceWindowWhy {
                mean_wait_ms: 2_400.0,
                r: 1.5,
                model: "linear",
                p_preemption: 0.25,
                requests: 3,
            }),
            job: app,
            suspension: 1,
            max: 2,
        };
        assert_eq!(
            dice.to_string(),
            format!(
                "Dice window: short tasks waited 2 s on average (r = 1.50, linear model \
                 p = 0.25); opportunistic preemption request to this node, one of 3: long job \
                 {app} runs here, no long container is suspended here, short work is waiting \
                 (suspension 1 of at most 2)"
            )
        );
        // Serialized as the sentence, as the API and the JSON log carry it.
        assert_eq!(
            serde_json::to_value(&Reason::ToGeneralPartition).unwrap(),
            "back to the general partition"
        );
    }

    #[test]
    fn whole_seconds_round_as_float_formatting_does() {
        let edges = (0..5u64).flat_map(|q| [q * 1000 + 499, q * 1000 + 500, q * 1000 + 501]);
        for ms in (0..20_000u64)
            .step_by(7)
            .chain(edges)
            .chain([u32::MAX as u64])
        {
            assert_eq!(
                Secs(ms).to_string(),
                format!("{:.0} s", ms as f64 / 1000.0),
                "{ms} ms"
            );
        }
    }
}
