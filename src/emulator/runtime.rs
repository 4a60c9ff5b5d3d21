//! How a NodeManager runs a task container: through Docker (real processes, real
//! cgroups) or simulated (an in-process timer, nothing real).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::cluster::{ContainerId, NodeId};
use crate::resources::Resource;

use super::state::exit;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    Docker,
    Simulated,
}

impl RuntimeKind {
    pub fn name(&self) -> &'static str {
        match self {
            RuntimeKind::Docker => "docker",
            RuntimeKind::Simulated => "simulated",
        }
    }
}

impl fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SignalContainerCommand of the RM's container signal API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerSignal {
    /// SIGQUIT (a JVM prints its threads; the workload binary ignores it).
    OutputThreadDump,
    /// SIGTERM.
    GracefulShutdown,
    /// SIGKILL.
    ForcefulShutdown,
}

impl ContainerSignal {
    /// The SignalContainerCommand name (what [`FromStr`] parses).
    pub fn yarn_name(&self) -> &'static str {
        match self {
            ContainerSignal::OutputThreadDump => "OUTPUT_THREAD_DUMP",
            ContainerSignal::GracefulShutdown => "GRACEFUL_SHUTDOWN",
            ContainerSignal::ForcefulShutdown => "FORCEFUL_SHUTDOWN",
        }
    }

    pub fn unix_name(&self) -> &'static str {
        match self {
            ContainerSignal::OutputThreadDump => "SIGQUIT",
            ContainerSignal::GracefulShutdown => "SIGTERM",
            ContainerSignal::ForcefulShutdown => "SIGKILL",
        }
    }
}

impl FromStr for ContainerSignal {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "OUTPUT_THREAD_DUMP" => Ok(ContainerSignal::OutputThreadDump),
            "GRACEFUL_SHUTDOWN" => Ok(ContainerSignal::GracefulShutdown),
            "FORCEFUL_SHUTDOWN" => Ok(ContainerSignal::ForcefulShutdown),
            other => Err(format!(
                "Invalid command: {other}. Valid commands are OUTPUT_THREAD_DUMP, GRACEFUL_SHUTDOWN, FORCEFUL_SHUTDOWN"
            )),
        }
    }
}

/// Everything a runtime needs to start one task container (also the body of a
/// NodeManager process's launch request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub container: ContainerId,
    pub node: NodeId,
    pub resource: Resource,
    /// `preemptor-workload` arguments (kernel first).
    pub command: Vec<String>,
    /// How long the simulated runtime lets the task run.
    pub simulated_duration_ms: u64,
    pub user: String,
}

/// What a runtime reports about a container while it runs.
pub trait ContainerEvents: Send + Sync {
    /// The process is running (YARN's RUNNING).
    fn started(&self);
    /// The task's progress in [0, 1].
    fn progress(&self, fraction: f64);
}

pub type Events = Arc<dyn ContainerEvents>;

/// How a container ended, in YARN's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitInfo {
    pub exit_status: i32,
    pub diagnostics: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("container {0} is not running on this NodeManager")]
    NotRunning(ContainerId),
    #[error("Docker: {0}")]
    Docker(String),
    /// A remote NodeManager (`preemptor nodemanager`) refused or could not be reached.
    #[error("NodeManager {node}: {reason}")]
    NodeManager { node: NodeId, reason: String },
    #[error(transparent)]
    Image(#[from] super::image::ImageError),
}

/// Exit status of a container that could not be started (YARN reports the launch
/// script's status; there is none here).
pub const LAUNCH_FAILED: i32 = -1;

pub trait ContainerRuntime: Send + Sync {
    fn kind(&self) -> RuntimeKind;

    /// Starts the container and resolves when it has exited and been cleaned up. A launch
    /// failure is an exit too ([`LAUNCH_FAILED`] with the reason), as in YARN.
    fn run(&self, spec: LaunchSpec, events: Events) -> BoxFuture<'static, ExitInfo>;

    fn signal(
        &self,
        container: ContainerId,
        signal: ContainerSignal,
    ) -> BoxFuture<'static, Result<(), RuntimeError>>;

    /// Removes every container (and image, cgroup) this runtime created. Returns how many
    /// containers it removed.
    fn shutdown(&self) -> BoxFuture<'static, Result<usize, RuntimeError>>;
}

/// In-process containers: a timer per container, no process, no cgroup. Every output of
/// an emulator using it says "simulated".
///
/// A container's speed stands in for its CPU quota: at speed 1 it finishes in its
/// simulated duration; [`SimulatedRuntime::set_speed`] slows it (a shrink to half its
/// vcores is speed 0.5, a suspend to 1% of a core is about 0), as a CFS quota slows a
/// CPU-bound task. Memory limits have no simulated effect.
#[derive(Clone, Default)]
pub struct SimulatedRuntime {
    running: Arc<Mutex<HashMap<ContainerId, Simulated>>>,
}

struct Simulated {
    control: mpsc::UnboundedSender<Control>,
    node: NodeId,
    resource: Resource,
    speed: f64,
    /// Seconds of work done at full speed.
    done_secs: f64,
}

enum Control {
    Signal(ContainerSignal),
    Speed(f64),
}

/// One running simulated container, as [`SimulatedRuntime::containers`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimulatedContainer {
    pub container: ContainerId,
    pub node: NodeId,
    pub resource: Resource,
    /// Fraction of full speed in [0, 1].
    pub speed: f64,
    /// Work done so far, in seconds at full speed (its attained service per vcore).
    pub done: Duration,
}

impl SimulatedRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how fast a running container progresses, as a fraction of full speed
    /// (clamped to [0, 1]; NaN is refused).
    pub fn set_speed(&self, container: ContainerId, speed: f64) -> Result<(), RuntimeError> {
        if speed.is_nan() {
            return Err(RuntimeError::NotRunning(container));
        }
        let speed = speed.clamp(0.0, 1.0);
        let mut m = crate::sync::lock(&self.running);
        let entry = m
            .get_mut(&container)
            .ok_or(RuntimeError::NotRunning(container))?;
        entry
            .control
            .send(Control::Speed(speed))
            .map_err(|_| RuntimeError::NotRunning(container))?;
        entry.speed = speed;
        Ok(())
    }

    /// Every running simulated container, in id order.
    pub fn containers(&self) -> Vec<SimulatedContainer> {
        let m = crate::sync::lock(&self.running);
        let mut v: Vec<SimulatedContainer> = m
            .iter()
            .map(|(id, s)| SimulatedContainer {
                container: *id,
                node: s.node.clone(),
                resource: s.resource,
                speed: s.speed,
                done: Duration::from_secs_f64(s.done_secs),
            })
            .collect();
        v.sort_by_key(|c| c.container);
        v
    }
}

impl ContainerRuntime for SimulatedRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Simulated
    }

    fn run(&self, spec: LaunchSpec, events: Events) -> BoxFuture<'static, ExitInfo> {
        let running = self.running.clone();
        Box::pin(async move {
            let (tx, mut rx) = mpsc::unbounded_channel();
            crate::sync::lock(&running).insert(
                spec.container,
                Simulated {
                    control: tx,
                    node: spec.node.clone(),
                    resource: spec.resource,
                    speed: 1.0,
                    done_secs: 0.0,
                },
            );
            events.started();
            let total = Duration::from_millis(spec.simulated_duration_ms.max(1)).as_secs_f64();
            let tick = Duration::from_secs_f64(total / 20.0)
                .clamp(Duration::from_millis(10), Duration::from_millis(500));
            // Work done, in seconds at full speed.
            let mut done = 0.0_f64;
            let mut speed = 1.0_f64;
            let mut last = tokio::time::Instant::now();
            let outcome = loop {
                let now = tokio::time::Instant::now();
                done += (now - last).as_secs_f64() * speed;
                last = now;
                if let Some(entry) = crate::sync::lock(&running).get_mut(&spec.container) {
                    entry.done_secs = done;
                }
                if done >= total {
                    break ExitInfo {
                        exit_status: exit::SUCCESS,
                        diagnostics: "simulated container finished".into(),
                    };
                }
                events.progress(done / total);
                let until_done = if speed > 0.0 {
                    Duration::from_secs_f64((total - done) / speed)
                } else {
                    tick
                };
                tokio::select! {
                    _ = tokio::time::sleep(tick.min(until_done)) => {}
                    control = rx.recv() => match control {
                        Some(Control::Speed(s)) => speed = s,
                        Some(Control::Signal(ContainerSignal::ForcefulShutdown)) => break ExitInfo {
                            exit_status: exit::SIGKILL,
                            diagnostics: "simulated container killed (SIGKILL)".into(),
                        },
                        Some(Control::Signal(ContainerSignal::GracefulShutdown)) => break ExitInfo {
                            exit_status: exit::SIGTERM,
                            diagnostics: "simulated container stopped (SIGTERM)".into(),
                        },
                        Some(Control::Signal(ContainerSignal::OutputThreadDump)) => {}
                        None => break ExitInfo {
                            exit_status: exit::ABORTED,
                            diagnostics: "simulated runtime shut down".into(),
                        },
                    }
                }
            };
            if outcome.exit_status == exit::SUCCESS {
                events.progress(1.0);
            }
            crate::sync::lock(&running).remove(&spec.container);
            outcome
        })
    }

    fn signal(
        &self,
        container: ContainerId,
        signal: ContainerSignal,
    ) -> BoxFuture<'static, Result<(), RuntimeError>> {
        let sent = crate::sync::lock(&self.running)
            .get(&container)
            .is_some_and(|s| s.control.send(Control::Signal(signal)).is_ok());
        Box::pin(async move {
            if sent {
                Ok(())
            } else {
                Err(RuntimeError::NotRunning(container))
            }
        })
    }

    fn shutdown(&self) -> BoxFuture<'static, Result<usize, RuntimeError>> {
        // Dropping the senders ends every run() with ABORTED.
        let n = self
            .running
            .lock()
            .map(|mut m| m.drain().count())
            .unwrap_or(0);
        Box::pin(async move { Ok(n) })
    }
}

/// Parses `progress <n>%` lines of `preemptor-workload`.
pub fn parse_progress(line: &str) -> Option<f64> {
    let pct = line.trim().strip_prefix("progress ")?.strip_suffix('%')?;
    let v: f64 = pct.trim().parse().ok()?;
    v.is_finite().then(|| (v / 100.0).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ApplicationAttemptId, ApplicationId};
    use std::sync::atomic::{AtomicU64, Ordering};

    fn spec(n: u64, ms: u64) -> LaunchSpec {
        LaunchSpec {
            container: ContainerId::new(
                ApplicationAttemptId::new(ApplicationId::new(1, 1), 1),
                1,
                n,
            ),
            node: NodeId::new("h:1"),
            resource: Resource::new(1024, 1),
            command: vec!["burn".into()],
            simulated_duration_ms: ms,
            user: "u".into(),
        }
    }

    #[test]
    fn progress_lines_parse() {
        assert_eq!(parse_progress("progress 40%"), Some(0.4));
        assert_eq!(parse_progress("progress 250%"), Some(1.0));
        assert_eq!(parse_progress("checksum 00ff"), None);
        assert_eq!(parse_progress("progress NaN%"), None);
        assert_eq!(
            "FORCEFUL_SHUTDOWN".parse::<ContainerSignal>(),
            Ok(ContainerSignal::ForcefulShutdown)
        );
        assert!("KILL".parse::<ContainerSignal>().is_err());
    }

    /// Progress of the last `progress` call, in percent.
    struct LastProgress(AtomicU64);
    impl ContainerEvents for LastProgress {
        fn started(&self) {}
        fn progress(&self, p: f64) {
            self.0.store((p * 100.0) as u64, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_slowed_container_stalls_and_catches_up_at_full_speed() {
        let rt = SimulatedRuntime::new();
        let rec = Arc::new(LastProgress(AtomicU64::new(0)));
        let id = spec(5, 0).container;
        let handle = tokio::spawn(rt.run(spec(5, 400), rec.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        rt.set_speed(id, 0.0).unwrap();
        assert_eq!(rt.containers()[0].speed, 0.0);
        let stalled_at = rec.0.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let done = rt.containers()[0].done;
        assert!(done < Duration::from_millis(360), "{done:?}");
        assert!(
            !handle.is_finished(),
            "a suspended container does not finish"
        );
        let later = rec.0.load(Ordering::SeqCst);
        assert!(later <= stalled_at + 10, "{stalled_at}% -> {later}%");
        assert!(later < 90, "{later}%");
        rt.set_speed(id, 1.0).unwrap();
        assert_eq!(handle.await.unwrap().exit_status, 0);
        assert!(rt.containers().is_empty());
        assert!(matches!(
            rt.set_speed(id, 1.0),
            Err(RuntimeError::NotRunning(_))
        ));
    }

    #[tokio::test]
    async fn simulated_containers_finish_report_progress_and_obey_signals() {
        let rt = SimulatedRuntime::new();
        struct Recorder {
            started: AtomicU64,
            last: AtomicU64,
        }
        impl ContainerEvents for Recorder {
            fn started(&self) {
                self.started.fetch_add(1, Ordering::SeqCst);
            }
            fn progress(&self, p: f64) {
                self.last.store((p * 100.0) as u64, Ordering::SeqCst);
            }
        }
        let rec = Arc::new(Recorder {
            started: AtomicU64::new(0),
            last: AtomicU64::new(0),
        });
        let sink: Events = rec.clone();
        let done = rt.run(spec(2, 200), sink.clone()).await;
        assert_eq!(done.exit_status, 0);
        assert_eq!(rec.last.load(Ordering::SeqCst), 100);
        assert_eq!(rec.started.load(Ordering::SeqCst), 1);

        let handle = tokio::spawn(rt.run(spec(3, 60_000), sink.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        rt.signal(spec(3, 0).container, ContainerSignal::OutputThreadDump)
            .await
            .unwrap();
        rt.signal(spec(3, 0).container, ContainerSignal::ForcefulShutdown)
            .await
            .unwrap();
        assert_eq!(handle.await.unwrap().exit_status, exit::SIGKILL);
        assert!(matches!(
            rt.signal(spec(3, 0).container, ContainerSignal::GracefulShutdown)
                .await,
            Err(RuntimeError::NotRunning(_))
        ));

        let handle = tokio::spawn(rt.run(spec(4, 60_000), sink));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(rt.shutdown().await.unwrap(), 1);
        assert_eq!(handle.await.unwrap().exit_status, exit::ABORTED);
    }
}
