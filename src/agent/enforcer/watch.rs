//! What the agent does on its own, outside any request: resume everything when the
//! lease expires, freeze a container that swaps, follow Docker's events and the host's
//! container list.

use super::*;

impl Enforcer {
    /// Resumes everything the agent changed when the lease has lapsed. Returns whether it
    /// did anything.
    pub async fn on_lease_tick(&self, now: Instant) -> bool {
        let live = self.lease_live(now);
        self.metrics
            .set(metrics::LEASE_LIVE, &[], if live { 1.0 } else { 0.0 });
        if live {
            return false;
        }
        // By Docker id: a name YARN would print differently still finds its container.
        let targets: Vec<(ContainerId, String)> = lock(&self.tracked)
            .iter()
            .map(|(id, t)| {
                let reference = if t.record.docker_id.is_empty() {
                    id.to_string()
                } else {
                    t.record.docker_id.clone()
                };
                (*id, reference)
            })
            .collect();
        if targets.is_empty() {
            return false;
        }
        tracing::warn!(
            containers = targets.len(),
            "lease expired: no controller, no throttling; resuming every changed container"
        );
        self.metrics.inc(metrics::LEASE_EXPIRIES, &[]);
        let mut resumed = Vec::new();
        let mut failed = Vec::new();
        for (id, reference) in targets {
            let req = ActionRequest {
                container: reference,
                action: Action::Resume,
            };
            match self.act(req).await {
                Ok(_) => resumed.push(id),
                Err(Error::UnknownContainer(_)) => {
                    // Docker no longer has it: nothing is left to restore.
                    lock(&self.tracked).remove(&id);
                    if let Err(e) = self.persist().await {
                        tracing::error!(error = %e, "saving state after forgetting a container");
                    }
                    resumed.push(id);
                }
                Err(e) => {
                    tracing::error!(container = %id, error = %e, "resume at lease expiry failed; will retry");
                    failed.push(id);
                }
            }
        }
        self.emit(AgentEvent::LeaseExpired { resumed, failed });
        true
    }

    /// Checks changed containers for swapping; a shrunk one that swaps is frozen at 1%.
    pub async fn on_swap_tick(&self, now: Instant) {
        if !self.is_live() {
            return;
        }
        let candidates: Vec<(ContainerId, String, Option<CgroupDirs>)> = lock(&self.tracked)
            .iter()
            .filter(|(_, t)| {
                matches!(
                    t.record.state,
                    ContainerState::Shrunk | ContainerState::Suspended
                )
            })
            .map(|(id, t)| (*id, t.record.docker_id.clone(), t.dirs.clone()))
            .collect();
        for (id, docker_id, dirs) in candidates {
            // Recovered after a restart: find the cgroup once.
            let dirs = match dirs {
                Some(d) => d,
                None => {
                    let Ok(Some(insp)) = self.runtime.inspect(&docker_id).await else {
                        continue;
                    };
                    let Ok(d) = self.dirs_for(&insp) else {
                        continue;
                    };
                    if let Some(t) = lock(&self.tracked).get_mut(&id) {
                        t.dirs = Some(d.clone());
                    }
                    d
                }
            };
            let Ok(sample) = dirs.sample() else {
                continue;
            };
            let faults = sample.major_faults.saturating_add(sample.swap_ins);
            let (became_swapping, shrunk_unfrozen, rate) = {
                let mut tracked = lock(&self.tracked);
                let Some(t) = tracked.get_mut(&id) else {
                    continue;
                };
                let rate = match t.last_faults {
                    Some((at, prev)) if now > at => {
                        faults.saturating_sub(prev) as f64 / (now - at).as_secs_f64()
                    }
                    _ => 0.0,
                };
                t.last_faults = Some((now, faults));
                let swapping = rate > self.settings.swap_threshold_pages_per_sec as f64;
                let became = swapping && !t.swapping;
                t.swapping = swapping;
                (
                    became,
                    t.record.state == ContainerState::Shrunk && !t.record.frozen,
                    rate,
                )
            };
            if !became_swapping {
                continue;
            }
            let frozen = shrunk_unfrozen && self.freeze(id).await;
            self.metrics.inc(metrics::SWAP_DETECTIONS, &[]);
            tracing::warn!(container = %id, pages_per_sec = rate, frozen, "container is swapping");
            self.emit(AgentEvent::SwapDetected {
                container: id,
                pages_per_sec: rate,
                frozen,
            });
        }
    }

    /// CPU to 1% for a swapping shrunk container; memory is left alone.
    pub(super) async fn freeze(&self, id: ContainerId) -> bool {
        let container_lock = self.container_lock(id);
        let _g = container_lock.lock().await;
        let Some(mut record) = lock(&self.tracked).get(&id).map(|t| t.record.clone()) else {
            return false;
        };
        let r = async {
            let Some(insp) = self.runtime.inspect(&record.docker_id).await? else {
                return Err(Error::Internal("no runtime to inspect".into()));
            };
            let dirs = self.dirs_for(&insp)?;
            let limits = Limits::new(
                record.limits.memory_mb,
                record.limits.cpu_millis.min(FREEZE_CPU_MILLIS),
            );
            let want = RealTarget::for_target(limits, record.allocated, &record.original)?;
            record.frozen = true;
            record.limits = limits;
            record.pending = Some(ActionKind::Shrink);
            self.set_record(record.clone(), None);
            self.persist().await?;
            let t = WriteTarget {
                docker_id: &insp.docker_id,
                dirs: &dirs,
                path: record.path,
                docker_now: &insp.limits,
            };
            let w = self.writer.set_cpu(&t, &want).await;
            record.pending = None;
            self.set_record(record.clone(), None);
            self.persist().await?;
            w?;
            Ok::<(), Error>(())
        }
        .await;
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(container = %id, error = %e, "freezing a swapping container failed");
                false
            }
        }
    }

    /// Follows Docker's events for YARN containers: publishes them and forgets destroyed
    /// containers.
    pub async fn on_docker_event(&self, ev: DockerEvent) {
        let Ok(id) = ev.name.parse::<ContainerId>() else {
            return;
        };
        self.metrics
            .inc(metrics::DOCKER_EVENTS, &[("kind", ev.kind.name())]);
        if matches!(
            ev.kind,
            crate::agent::api::DockerEventKind::Start
                | crate::agent::api::DockerEventKind::Die
                | crate::agent::api::DockerEventKind::Destroy
        ) {
            lock(&self.dirs_cache).remove(&ev.docker_id);
        }
        if ev.kind == crate::agent::api::DockerEventKind::Destroy {
            self.drop_idle_lock(id);
            let forgotten = {
                let mut tracked = lock(&self.tracked);
                match tracked.get(&id) {
                    Some(t) if t.record.docker_id == ev.docker_id => tracked.remove(&id).is_some(),
                    _ => false,
                }
            };
            if forgotten {
                tracing::info!(container = %id, "container destroyed; forgetting its record");
                if let Err(e) = self.persist().await {
                    tracing::error!(error = %e, "saving state after a destroy");
                }
            }
        }
        self.emit(AgentEvent::Docker {
            container: id,
            docker_id: ev.docker_id,
            kind: ev.kind,
            exit_code: ev.exit_code,
            time_ms: ev.time_ms,
        });
    }

    /// Forgets changed containers whose processes have all ended (the host backends
    /// have no event stream), removes the process backend's empty cgroups, and moves
    /// new containers the NodeManager lists into cgroups of their own.
    pub async fn on_host_tick(&self) {
        let Some(host) = self.host() else {
            return;
        };
        self.adopt_listed(host).await;
        let tracked: Vec<(ContainerId, String)> = lock(&self.tracked)
            .iter()
            .map(|(id, t)| (*id, t.record.docker_id.clone()))
            .collect();
        let mut forgot = false;
        for (id, reference) in tracked {
            let ended = match host.inspect(&reference) {
                Ok(i) => !i.running,
                Err(HostError::NotFound(_)) => true,
                Err(_) => false,
            };
            if !ended {
                continue;
            }
            let container_lock = self.container_lock(id);
            let _g = container_lock.lock().await;
            if lock(&self.tracked).remove(&id).is_some() {
                tracing::info!(container = %id, "container ended; forgetting its record");
                forgot = true;
            }
        }
        if forgot && let Err(e) = self.persist().await {
            tracing::error!(error = %e, "saving state after containers ended");
        }
        for id in host.remove_ended() {
            lock(&self.dirs_cache).remove(&id.to_string());
            self.drop_idle_lock(id);
        }
    }

    /// process: moves every container the NodeManager lists into its own cgroup as soon
    /// as its process runs, unchanged (unlimited). Memory a process touched before the
    /// move stays charged to its old cgroup where the kernel refuses
    /// `memory.move_charge_at_immigrate` (cgroup v1 on 6.x), so the earlier the move,
    /// the more of a JVM's heap a later limit covers.
    pub(super) async fn adopt_listed(&self, host: &HostContainers) {
        let (HostBackend::Process, Some(nm)) = (host.backend(), &self.nodemanager) else {
            return;
        };
        let listed = match nm.containers(false).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "NodeManager listing for adoption");
                return;
            }
        };
        for &id in listed.iter() {
            if host.adopted(id) {
                continue;
            }
            match host.adopt_if_running(id) {
                Ok(true) => tracing::debug!(container = %id, "moved into its own cgroup"),
                Ok(false) => {}
                // The first action on it reports the same error to the controller.
                Err(e) => {
                    tracing::debug!(container = %id, error = %e, "not moved into a cgroup of its own")
                }
            }
        }
    }
}
