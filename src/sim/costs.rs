//! The preemption cost model (docs/algorithms.md): how long suspending, shrinking,
//! resuming and killing take, and how fast a squeezed container runs. Every rate is a
//! parameter and a file of rates measured on a live agent can replace the defaults
//! (`--costs FILE`).
//!
//! The file is JSON (schema `preemptor-sim-costs/1`, see docs/simulator.md):
//! ```json
//! { "schema": "preemptor-sim-costs/1", "source": "agent on nm-07, 2024-05-02",
//!   "reclaimSecsPerGb": 2.8, "reloadSecsPerGb": 7.5, "killSecs": 0.4 }
//! ```
//! Every rate is optional (missing ones keep their defaults); unknown keys are errors so
//! that a misspelt rate is never silently ignored.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::resources::{Limits, Resource};
use crate::sim::error::SimError;
use crate::sim::workload::{Time, secs};

pub const COSTS_SCHEMA: &str = "preemptor-sim-costs/1";

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostModel {
    /// Seconds to reclaim one GB of dirty memory when suspending or shrinking (BIG-C
    /// measured about 3 s per GB).
    pub reclaim_secs_per_gb: f64,
    /// Seconds to load one GB back when resuming (Dice's simulation: 10 s for a task;
    /// slot traces give each task 1 GB).
    pub reload_secs_per_gb: f64,
    /// Share of a container's memory that is dirty and must be written out.
    pub dirty_fraction: f64,
    /// Share of its allocation a task actively uses; a memory limit below it swaps.
    pub working_set_fraction: f64,
    /// Speed of a swapping container relative to what its CPU share allows.
    pub swap_speed: f64,
    /// Seconds from a kill to its resources being free.
    pub kill_secs: f64,
    /// Where the rates came from (a `--costs` file's `source`), for reports.
    pub source: String,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            reclaim_secs_per_gb: 3.0,
            reload_secs_per_gb: 10.0,
            dirty_fraction: 1.0,
            working_set_fraction: 0.75,
            swap_speed: 0.1,
            kill_secs: 0.0,
            source: "defaults (BIG-C, Dice)".into(),
        }
    }
}

/// A `--costs` file. Every rate optional.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CostFile {
    schema: Option<String>,
    source: Option<String>,
    measured_at: Option<String>,
    /// Raw measurements the agent may keep alongside; not used.
    samples: Option<serde_json::Value>,
    reclaim_secs_per_gb: Option<f64>,
    reload_secs_per_gb: Option<f64>,
    dirty_fraction: Option<f64>,
    working_set_fraction: Option<f64>,
    swap_speed: Option<f64>,
    kill_secs: Option<f64>,
}

impl CostModel {
    pub fn load(path: &Path) -> Result<CostModel, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<CostModel, SimError> {
        let f: CostFile = serde_json::from_str(text)
            .map_err(|e| SimError::input(path, e.line(), e.to_string()))?;
        let bad = |msg: String| SimError::file(path, msg);
        if let Some(s) = &f.schema
            && s != COSTS_SCHEMA
        {
            return Err(bad(format!(
                "schema {s:?} is not supported (expected {COSTS_SCHEMA:?})"
            )));
        }
        let _ = (&f.measured_at, &f.samples);
        let mut m = CostModel::default();
        let non_negative = |name: &str, v: Option<f64>, into: &mut f64| match v {
            Some(x) if x.is_finite() && x >= 0.0 => {
                *into = x;
                Ok(())
            }
            Some(x) => Err(bad(format!(
                "{name} must be a finite number >= 0, found {x}"
            ))),
            None => Ok(()),
        };
        non_negative(
            "reclaimSecsPerGb",
            f.reclaim_secs_per_gb,
            &mut m.reclaim_secs_per_gb,
        )?;
        non_negative(
            "reloadSecsPerGb",
            f.reload_secs_per_gb,
            &mut m.reload_secs_per_gb,
        )?;
        non_negative("killSecs", f.kill_secs, &mut m.kill_secs)?;
        let fraction = |name: &str, v: Option<f64>, into: &mut f64| match v {
            Some(x) if (0.0..=1.0).contains(&x) => {
                *into = x;
                Ok(())
            }
            Some(x) => Err(bad(format!("{name} must be between 0 and 1, found {x}"))),
            None => Ok(()),
        };
        fraction("dirtyFraction", f.dirty_fraction, &mut m.dirty_fraction)?;
        fraction(
            "workingSetFraction",
            f.working_set_fraction,
            &mut m.working_set_fraction,
        )?;
        fraction("swapSpeed", f.swap_speed, &mut m.swap_speed)?;
        m.source = f.source.unwrap_or_else(|| format!("{}", path.display()));
        Ok(m)
    }

    /// Time to take memory from `from` down to `to` (suspend or shrink). CPU is throttled
    /// first, so nothing else delays it.
    pub fn reclaim_delay(&self, from: Limits, to: Limits) -> Time {
        let mb = from.memory_mb.saturating_sub(to.memory_mb) as f64 * self.dirty_fraction;
        secs(mb / 1024.0 * self.reclaim_secs_per_gb)
    }

    /// Time to give memory back from `from` up to `to` (resume).
    pub fn reload_delay(&self, from: Limits, to: Limits) -> Time {
        let mb = to.memory_mb.saturating_sub(from.memory_mb) as f64 * self.dirty_fraction;
        secs(mb / 1024.0 * self.reload_secs_per_gb)
    }

    pub fn kill_delay(&self) -> Time {
        secs(self.kill_secs)
    }

    /// Speed (share of full speed) of a container allocated `allocated` and held to
    /// `current`: its CPU share, slowed further while its memory limit is below its
    /// working set.
    pub fn speed(&self, allocated: Resource, current: Limits) -> f64 {
        let alloc_cpu = allocated.vcores.max(1) as f64 * 1000.0;
        let share = (current.cpu_millis as f64 / alloc_cpu).min(1.0);
        if self.swapping(allocated, current) {
            share * self.swap_speed
        } else {
            share
        }
    }

    /// True when the memory limit is below the working set.
    pub fn swapping(&self, allocated: Resource, current: Limits) -> bool {
        (current.memory_mb as f64) < allocated.memory_mb as f64 * self.working_set_fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_bigc_and_dice() {
        let m = CostModel::default();
        let full = Limits::from(Resource::new(1024, 1));
        // A 1 GB slot: suspend 3 s, resume 10 s (Dice's simulation).
        assert_eq!(m.reclaim_delay(full, Limits::new(0, 10)), secs(3.0));
        assert_eq!(m.reload_delay(Limits::new(0, 10), full), secs(10.0));
        assert_eq!(m.reclaim_delay(full, full), 0);
        let spark = Resource::new(16384, 8);
        assert_eq!(m.speed(spark, Limits::from(spark)), 1.0);
        // Graceful step to 12 GB, 6 vcores: 75% CPU, working set still fits.
        assert_eq!(m.speed(spark, Limits::new(12288, 6000)), 0.75);
        // Another step: swapping.
        let s = m.speed(spark, Limits::new(8192, 4000));
        assert!((s - 0.05).abs() < 1e-12, "{s}");
        assert!(m.speed(spark, Limits::MIN_FOOTPRINT) < 0.001);
    }

    #[test]
    fn cost_files_override_rates_and_reject_typos() {
        let p = Path::new("measured.json");
        let m = CostModel::parse(
            p,
            r#"{"schema":"preemptor-sim-costs/1","source":"nm-07","reclaimSecsPerGb":2.5,"samples":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(m.reclaim_secs_per_gb, 2.5);
        assert_eq!(m.reload_secs_per_gb, 10.0);
        assert_eq!(m.source, "nm-07");
        for (text, want) in [
            (
                r#"{"reclaimSecPerGb":2}"#,
                "measured.json:1: unknown field `reclaimSecPerGb`",
            ),
            (
                r#"{"reclaimSecsPerGb":-2}"#,
                "reclaimSecsPerGb must be a finite number >= 0",
            ),
            (r#"{"swapSpeed":2}"#, "swapSpeed must be between 0 and 1"),
            (r#"{"schema":"v9"}"#, "is not supported"),
            (
                "{\n\"killSecs\": \"fast\"}",
                "measured.json:2: invalid type",
            ),
        ] {
            let e = CostModel::parse(p, text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
