//! The narrowing sequence: CPU first, the throttle seen in cpu.stat, then memory (a
//! suspend's page-out in one write, a shrink's steps), rolled back whole on failure.

use super::*;

impl Enforcer {
    pub(super) async fn narrow(
        &self,
        kind: ActionKind,
        r: Resolved,
        allocated: Resource,
        target: Limits,
        started: Instant,
    ) -> Result<ActionResult, Error> {
        if !self.lease_live(Instant::now()) {
            return Err(Error::NoLease);
        }
        let existing = lock(&self.tracked).get(&r.id).map(|t| t.record.clone());
        let frozen = existing.as_ref().is_some_and(|e| e.frozen);
        if frozen
            && kind == ActionKind::Shrink
            && existing
                .as_ref()
                .is_some_and(|e| target.memory_mb < e.limits.memory_mb)
        {
            return Err(Error::Conflict(format!(
                "{} is swapping and frozen at 1% CPU; no more memory is taken from it",
                r.id
            )));
        }
        // A swapping container stays frozen until resumed.
        let effective = if frozen {
            Limits::new(target.memory_mb, target.cpu_millis.min(FREEZE_CPU_MILLIS))
        } else {
            target
        };
        let state = if kind == ActionKind::Suspend {
            ContainerState::Suspended
        } else {
            ContainerState::Shrunk
        };

        let Some(insp) = r.inspected else {
            // Dry run: remember what would have been done.
            let original = existing
                .as_ref()
                .map_or_else(|| dry_run_original(allocated), |e| e.original);
            let changed = existing
                .as_ref()
                .is_none_or(|e| e.limits != effective || e.state != state);
            self.set_record(
                StoredContainer {
                    container: r.id,
                    docker_id: String::new(),
                    allocated,
                    original,
                    path: self.settings.path,
                    state,
                    limits: effective,
                    pending: None,
                    frozen,
                    updated_unix_ms: unix_ms(),
                },
                None,
            );
            self.update_tracked_gauge();
            let mut res = self.result(r.id, String::new(), kind, state, started);
            res.changed = changed;
            res.limits = Some(effective);
            return Ok(res);
        };

        if !insp.running {
            return Err(Error::Conflict(format!("{} is not running", r.id)));
        }
        let dirs = self.dirs_for(&insp)?;
        let current = dirs.read_limits()?;
        let original = match &existing {
            Some(e) => e.original,
            None => OriginalLimits {
                version: dirs.version,
                docker: insp.limits,
                cgroup: current,
            },
        };
        let want = RealTarget::for_target(effective, allocated, &original)?;
        if want == RealTarget::original(&original) {
            // A step back up to the full allocation is a resume.
            return self.resume_live(r.id, insp, existing, kind, started).await;
        }
        let path = existing.as_ref().map_or(self.settings.path, |e| e.path);
        let mut record = StoredContainer {
            container: r.id,
            docker_id: insp.docker_id.clone(),
            allocated,
            original,
            path,
            state: existing
                .as_ref()
                .map_or(ContainerState::Running, |e| e.state),
            limits: effective,
            pending: Some(kind),
            frozen,
            updated_unix_ms: unix_ms(),
        };
        let unchanged = current.same_enforcement(&want.cgroup)
            && existing
                .as_ref()
                .is_some_and(|e| e.pending.is_none() && e.state == state && e.limits == effective);
        let mut store_time = Duration::ZERO;
        if !unchanged {
            self.set_record(record.clone(), Some(dirs.clone()));
            store_time += self.persist().await?;
        }
        let applied = match self
            .apply(r.id, kind, &insp, &dirs, path, &want, &current)
            .await
        {
            Ok(a) => a,
            Err(e) => {
                return Err(self
                    .roll_back(r.id, &insp, &dirs, existing, record, e)
                    .await);
            }
        };
        record.state = state;
        record.pending = None;
        record.updated_unix_ms = unix_ms();
        self.set_record(record, Some(dirs.clone()));
        if !unchanged {
            store_time += self.persist().await?;
        }
        let mut res = self.result(r.id, insp.docker_id.clone(), kind, state, started);
        res.limits = Some(effective);
        res.cgroup = dirs.read_limits().ok();
        res.path = Some(path);
        applied.fill(&mut res, started, store_time);
        Ok(res)
    }

    /// A suspend or shrink that failed half-way puts the container back where it was
    /// before (its previous target, or its originals) and returns the failure. If even
    /// that fails, the container stays recorded as changed (resume and the lease expiry
    /// restore it) and the error says so.
    pub(super) async fn roll_back(
        &self,
        id: ContainerId,
        insp: &Inspected,
        dirs: &CgroupDirs,
        previous: Option<StoredContainer>,
        mut record: StoredContainer,
        failure: Error,
    ) -> Error {
        if matches!(failure, Error::Vanished(_)) {
            lock(&self.tracked).remove(&id);
            if let Err(e) = self.persist().await {
                tracing::error!(error = %e, "saving state after a container vanished");
            }
            return failure;
        }
        let back = match &previous {
            Some(p) if p.state != ContainerState::Running => {
                RealTarget::for_target(p.limits, p.allocated, &record.original)
            }
            _ => Ok(RealTarget::original(&record.original)),
        };
        let outcome = match (back, dirs.read_limits()) {
            (Ok(back), Ok(now)) => self
                .apply(id, ActionKind::Resume, insp, dirs, record.path, &back, &now)
                .await
                .map(|_| ()),
            (Err(e), _) => Err(e.into()),
            (_, Err(e)) => Err(e.into()),
        };
        match outcome {
            Ok(()) => {
                match previous {
                    Some(p) if p.state != ContainerState::Running => self.set_record(p, None),
                    _ => {
                        lock(&self.tracked).remove(&id);
                    }
                }
                tracing::warn!(container = %id, error = %failure, "action failed; limits put back as they were");
            }
            Err(e) => {
                record.pending = None;
                record.updated_unix_ms = unix_ms();
                self.set_record(record, None);
                if let Err(e) = self.persist().await {
                    tracing::error!(error = %e, "saving state after a failed action");
                }
                return Error::RollbackFailed {
                    failure: failure.to_string(),
                    rollback: e.to_string(),
                };
            }
        }
        if let Err(e) = self.persist().await {
            tracing::error!(error = %e, "saving state after a failed action");
        }
        failure
    }

    /// Moves a container's limits from `current` to `want` in the safe order: memory up
    /// first; CPU; after narrowing CPU, wait for the throttle to show; memory down last.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn apply(
        &self,
        id: ContainerId,
        kind: ActionKind,
        insp: &Inspected,
        dirs: &CgroupDirs,
        path: WritePath,
        want: &RealTarget,
        current: &CgroupLimits,
    ) -> Result<Applied, Error> {
        let mut docker_now = insp.limits;
        let mut out = Applied::default();
        let vanished = |e: WriteError| -> Error {
            if e.is_vanished() {
                Error::Vanished(id)
            } else {
                e.into()
            }
        };
        let memory_narrows = narrower(want.cgroup.memory_bytes, current.memory_bytes);
        if !memory_narrows && !current.same_memory(&want.cgroup) {
            let t0 = Instant::now();
            let t = WriteTarget {
                docker_id: &insp.docker_id,
                dirs,
                path,
                docker_now: &docker_now,
            };
            if self.writer.set_memory(&t, want).await.map_err(vanished)? == Outcome::Written {
                out.changed = true;
                docker_now.memory = want.docker_memory;
                docker_now.memory_swap = want.docker_memory_swap;
            }
            out.timings.memory_ms += ms(t0.elapsed());
        }

        let t0 = Instant::now();
        let before = dirs.cpu_counters().map_err(|e| vanished(e.into()))?;
        let t = WriteTarget {
            docker_id: &insp.docker_id,
            dirs,
            path,
            docker_now: &docker_now,
        };
        let cpu = self.writer.set_cpu(&t, want).await.map_err(vanished)?;
        out.timings.cpu_ms = ms(t0.elapsed());
        if cpu == Outcome::Written {
            out.changed = true;
            note_docker_cpu(&mut docker_now, want.docker_cpu);
        }
        if narrower(want.cgroup.cpu_quota_us, current.cpu_quota_us) {
            let t1 = Instant::now();
            out.throttle_confirmed = self
                .await_throttle(dirs, want, before)
                .await
                .map_err(|e| vanished(e.into()))?;
            let waited = t1.elapsed();
            out.timings.throttle_wait_ms = ms(waited);
            self.metrics
                .observe(metrics::THROTTLE_WAIT_SECONDS, &[], waited);
            if !out.throttle_confirmed {
                tracing::warn!(container = %id, waited_ms = ms(waited), "cpu.stat did not confirm the throttle in time; the quota reads back correctly, continuing");
            }
        }

        if memory_narrows {
            let t0 = Instant::now();
            out.memory_before = dirs.sample().ok().map(|s| s.memory_usage_bytes);
            let mut fast = (false, 0);
            let mut reclaimed_at = None;
            if kind == ActionKind::Suspend {
                // A throttled container cannot fight back: all at once. Whatever is left
                // (EBUSY, Docker's view on the Docker path) goes through the steps below.
                let (pageout_ms, written, busy) = self
                    .reclaim_for_suspend(id, dirs, want, out.memory_before)
                    .await;
                out.timings.pageout_ms = pageout_ms;
                fast = (written, u32::from(busy));
                reclaimed_at = written.then(|| t0.elapsed());
            } else if self.settings.proactive_reclaim {
                // A shrunk container keeps running: gradual steps, never more than asked.
                out.timings.pageout_ms =
                    self.page_out(id, kind, dirs, want, out.memory_before).await;
            }
            let (written, retries) = self
                .step_memory_down(id, insp, dirs, path, want, current, &mut docker_now)
                .await?;
            out.timings.reclaim_ms = ms(reclaimed_at.unwrap_or_else(|| t0.elapsed()));
            out.changed |= written || fast.0;
            out.busy_retries = retries + fast.1;
            out.memory_after = dirs.sample().ok().map(|s| s.memory_usage_bytes);
            out.timings.memory_ms += ms(t0.elapsed());
        }
        Ok(out)
    }

    /// A suspend's memory cut from one real-time thread: page out what is resident, then
    /// one direct limit write (see [`crate::agent::reclaim::reclaim_for_suspend`]). Returns
    /// (page-out ms, written, refused with EBUSY). Failures only cost speed: the stepped
    /// writes that follow do the rest, so they are logged, not returned.
    pub(super) async fn reclaim_for_suspend(
        &self,
        id: ContainerId,
        dirs: &CgroupDirs,
        want: &RealTarget,
        usage: Option<u64>,
    ) -> (f64, bool, bool) {
        // The cut and a margin, not everything resident (see suspend_page_out_budget).
        let budget =
            crate::agent::reclaim::suspend_page_out_budget(usage, want.cgroup.memory_bytes);
        let r = crate::agent::reclaim::reclaim_for_suspend(
            dirs.clone(),
            want.cgroup,
            budget.filter(|_| self.settings.proactive_reclaim),
            self.metrics.clone(),
        )
        .await;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "no one-step reclaim; stepping down");
                return (0.0, false, false);
            }
        };
        let pageout_ms = match &r.page_out {
            Some(Ok(p)) => {
                tracing::debug!(container = %id, processes = p.processes, resident_mb = p.advised_bytes / MIB, realtime = r.realtime, "paged out before lowering memory");
                ms(p.elapsed)
            }
            Some(Err(e)) => {
                tracing::info!(container = %id, error = %e, "no proactive reclaim; the limit write reclaims alone");
                0.0
            }
            None => 0.0,
        };
        match r.write {
            Ok(o) => (pageout_ms, o == Outcome::Written, false),
            Err(e) => {
                let busy = e.is_busy();
                if busy {
                    self.metrics.inc(metrics::MEMORY_BUSY_RETRIES, &[]);
                }
                tracing::debug!(container = %id, error = %e, took_ms = ms(r.elapsed), "one-step memory write refused; stepping down");
                (pageout_ms, false, busy)
            }
        }
    }

    /// Proactive reclaim ahead of a shrink's limit write: the amount to give up. Failures
    /// only cost speed, so they are logged, not returned.
    pub(super) async fn page_out(
        &self,
        id: ContainerId,
        kind: ActionKind,
        dirs: &CgroupDirs,
        want: &RealTarget,
        usage: Option<u64>,
    ) -> f64 {
        let (Some(usage), Some(target)) = (usage, want.cgroup.memory_bytes) else {
            return 0.0;
        };
        if usage <= target {
            return 0.0;
        }
        let budget = (kind != ActionKind::Suspend).then_some(usage - target);
        let dir = dirs.memory.clone();
        let started = Instant::now();
        match tokio::task::spawn_blocking(move || crate::agent::reclaim::page_out(&dir, budget))
            .await
        {
            Ok(Ok(r)) => {
                tracing::debug!(container = %id, processes = r.processes, advised_mb = r.advised_bytes / MIB, "paged out before lowering memory");
            }
            Ok(Err(e)) => {
                tracing::info!(container = %id, error = %e, "no proactive reclaim; the limit write reclaims alone")
            }
            Err(e) => tracing::warn!(container = %id, error = %e, "proactive reclaim task failed"),
        }
        ms(started.elapsed())
    }

    /// Waits until cpu.stat shows the new quota working: nr_throttled grew, or the cgroup
    /// used no more than the quota over at least one full period (it is idle or within it).
    pub(super) async fn await_throttle(
        &self,
        dirs: &CgroupDirs,
        want: &RealTarget,
        (usage0, throttled0): (u64, u64),
    ) -> Result<bool, CgroupError> {
        let quota_ns = want
            .cgroup
            .cpu_quota_us
            .unwrap_or(u64::MAX / 4_000)
            .saturating_mul(1000);
        let period = Duration::from_micros(want.cgroup.cpu_period_us.max(1000));
        let t0 = Instant::now();
        loop {
            let (usage, throttled) = dirs.cpu_counters()?;
            if throttled > throttled0 {
                return Ok(true);
            }
            let elapsed = t0.elapsed();
            if elapsed >= period {
                let periods = (elapsed.as_nanos() / period.as_nanos()) as u64 + 1;
                if usage.saturating_sub(usage0) <= quota_ns.saturating_mul(periods) {
                    return Ok(true);
                }
            }
            if elapsed >= self.settings.throttle_wait_max {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Lowers memory to `want`, retrying EBUSY refusals with smaller steps and backoff until
    /// `memory_timeout`. Returns (anything written, refusals).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn step_memory_down(
        &self,
        id: ContainerId,
        insp: &Inspected,
        dirs: &CgroupDirs,
        path: WritePath,
        want: &RealTarget,
        current: &CgroupLimits,
        docker_now: &mut DockerLimits,
    ) -> Result<(bool, u32), Error> {
        let Some(target) = want.cgroup.memory_bytes else {
            return Ok((false, 0));
        };
        let usage = dirs
            .sample()
            .map(|s| s.memory_usage_bytes)
            .unwrap_or(target);
        let mut reached = current.memory_bytes.unwrap_or(usage.max(target));
        let mut attempt = target;
        let mut retries = 0u32;
        let mut written = false;
        // The waits once no smaller step is left: 10 ms doubling to 500 ms.
        let busy_delays = || {
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(10))
                .with_max_delay(BUSY_DELAY_MAX)
                .without_max_times()
                .build()
        };
        let mut delays = busy_delays();
        let started = Instant::now();
        let deadline = started + self.settings.memory_timeout;
        loop {
            let mut level = *want;
            level.cgroup.memory_bytes = Some(attempt);
            if level.cgroup.memory_high_bytes.is_some() {
                level.cgroup.memory_high_bytes = Some(attempt);
            }
            level.docker_memory = i64::try_from(attempt).unwrap_or(i64::MAX);
            let t = WriteTarget {
                docker_id: &insp.docker_id,
                dirs,
                path,
                docker_now,
            };
            match self.writer.set_memory(&t, &level).await {
                Ok(o) => {
                    written |= o == Outcome::Written;
                    docker_now.memory = level.docker_memory;
                    docker_now.memory_swap = level.docker_memory_swap;
                    reached = attempt;
                    if attempt == target {
                        return Ok((written, retries));
                    }
                    attempt = target;
                    delays = busy_delays();
                }
                Err(e) if e.is_busy() => {
                    retries += 1;
                    self.metrics.inc(metrics::MEMORY_BUSY_RETRIES, &[]);
                    if Instant::now() >= deadline {
                        return Err(Error::MemoryBusy {
                            container: id,
                            reached_mb: reached / MIB,
                            target_mb: target / MIB,
                            secs: started.elapsed().as_secs(),
                        });
                    }
                    // A limit just above what is resident leaves no room for a new thread's
                    // stack or a page of cache, and the memcg OOM-kills the task (seen
                    // without swap): step no closer to the usage than STEP_HEADROOM.
                    let usage_now = dirs.sample().map_or(reached, |s| s.memory_usage_bytes);
                    let floor = usage_now.saturating_add(STEP_HEADROOM);
                    let mid = (attempt / 2 + reached / 2).max(floor) / MIB * MIB;
                    if reached.saturating_sub(attempt) > 2 * MIB && mid > attempt && mid < reached {
                        tracing::debug!(container = %id, from_mb = reached / MIB, try_mb = mid / MIB, "memory busy; trying a smaller step");
                        attempt = mid;
                    } else {
                        tokio::time::sleep(delays.next().unwrap_or(BUSY_DELAY_MAX)).await;
                        attempt = target;
                    }
                }
                Err(e) if e.is_vanished() => return Err(Error::Vanished(id)),
                Err(e) => return Err(e.into()),
            }
        }
    }
}
