//! Mapping YARN-unit targets to the real limits a container's cgroup enforces.
//!
//! The controller speaks YARN units ([`Limits`]: memory-mb, thousandths of a vcore). How
//! many real CPUs a vcore is worth differs between clusters (and the emulator scales it),
//! so the agent uses the container's own original ratio:
//!
//! ```text
//! real_cpu = target.cpu_millis / (allocated.vcores * 1000) * original_real_cpu
//! ```
//!
//! where `original_real_cpu` is the cfs quota / period the container had before Preemptor
//! touched it (one core per vcore when it had no quota, YARN's default with cpu shares).
//! Memory maps 1:1 (MB to MiB of limit). A target at or above the allocation in a component
//! restores that component's original value exactly.

use serde::{Deserialize, Serialize};

use crate::resources::{Limits, Resource};

pub const MIB: u64 = 1024 * 1024;

/// The kernel's smallest cfs quota (1 ms); Docker refuses anything lower.
pub const MIN_CFS_QUOTA_US: u64 = 1000;

/// Docker's and the kernel's default cfs period.
pub const DEFAULT_CFS_PERIOD_US: u64 = 100_000;

/// Limits as the kernel enforces them, read from cgroup files. `None` means unlimited
/// (or, for memory+swap, not accounted by this kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupLimits {
    pub cpu_quota_us: Option<u64>,
    pub cpu_period_us: u64,
    /// v1 `cpu.shares`, v2 `cpu.weight`. Recorded, never changed.
    pub cpu_shares: u64,
    pub memory_bytes: Option<u64>,
    /// Memory plus swap (v1 `memory.memsw.limit_in_bytes`; v2 `memory.max` +
    /// `memory.swap.max`), Docker's `MemorySwap`.
    pub memory_swap_bytes: Option<u64>,
    /// v2 `memory.high`; always `None` on v1.
    pub memory_high_bytes: Option<u64>,
}

impl CgroupLimits {
    /// The CPU this cgroup may use, in thousandths of a core; `None` when unlimited.
    pub fn cpu_millis(&self) -> Option<u64> {
        let quota = self.cpu_quota_us?;
        let period = self.cpu_period_us.max(1);
        Some(quota.saturating_mul(1000) / period)
    }

    /// True when CPU and memory limits (the values Preemptor changes) match.
    pub fn same_enforcement(&self, other: &CgroupLimits) -> bool {
        self.same_cpu(other) && self.same_memory(other)
    }

    pub fn same_cpu(&self, other: &CgroupLimits) -> bool {
        self.cpu_quota_us == other.cpu_quota_us
            && (self.cpu_quota_us.is_none() || self.cpu_period_us == other.cpu_period_us)
    }

    pub fn same_memory(&self, other: &CgroupLimits) -> bool {
        self.memory_bytes == other.memory_bytes
            && self.memory_swap_bytes == other.memory_swap_bytes
            && self.memory_high_bytes == other.memory_high_bytes
    }
}

/// Docker's view of the same limits (`HostConfig`), with Docker's conventions: 0 is
/// "not set", -1 is "unlimited".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerLimits {
    pub nano_cpus: i64,
    pub cpu_quota: i64,
    pub cpu_period: i64,
    pub cpu_shares: i64,
    pub memory: i64,
    pub memory_swap: i64,
}

/// Which cgroup interface the container's limits live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Recorded the first time Preemptor touches a container; resume returns to exactly this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OriginalLimits {
    pub version: CgroupVersion,
    pub docker: DockerLimits,
    pub cgroup: CgroupLimits,
}

/// How Docker is asked for a CPU limit. Docker refuses to mix NanoCpus with
/// CpuQuota/CpuPeriod on one container, so this follows whatever the container was
/// created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DockerCpu {
    Nano(i64),
    Quota { quota: i64, period: i64 },
}

/// A complete set of values to enforce: what the cgroup files must read afterwards and
/// what to send to Docker on the Docker path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RealTarget {
    pub cgroup: CgroupLimits,
    pub docker_cpu: DockerCpu,
    pub docker_memory: i64,
    pub docker_memory_swap: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("allocated vcores must be positive to map a CPU target")]
    NoVcores,
    #[error("allocated memory must be positive to map a memory target")]
    NoMemory,
    #[error(
        "target {target} exceeds the container's allocation {allocated}; use resume to restore it"
    )]
    AboveAllocation { target: Limits, allocated: Resource },
    #[error("target {target} is below the agent's floor {floor}")]
    BelowFloor { target: Limits, floor: Limits },
}

/// Checks a suspend/shrink target against the allocation and the agent's safety floor.
pub fn validate_target(
    target: Limits,
    allocated: Resource,
    floor: Limits,
) -> Result<(), MappingError> {
    if allocated.vcores == 0 {
        return Err(MappingError::NoVcores);
    }
    if allocated.memory_mb == 0 {
        return Err(MappingError::NoMemory);
    }
    if !target.fits_in(&Limits::from(allocated)) {
        return Err(MappingError::AboveAllocation { target, allocated });
    }
    if !floor.fits_in(&target) {
        return Err(MappingError::BelowFloor { target, floor });
    }
    Ok(())
}

impl RealTarget {
    /// Exactly the limits the container had before Preemptor touched it.
    pub fn original(o: &OriginalLimits) -> RealTarget {
        RealTarget {
            cgroup: o.cgroup,
            docker_cpu: original_docker_cpu(o),
            docker_memory: restore_value(o.docker.memory, o.cgroup.memory_bytes),
            docker_memory_swap: restore_value(o.docker.memory_swap, o.cgroup.memory_swap_bytes),
        }
    }

    /// The real limits for `target` (validated with [`validate_target`]).
    pub fn for_target(
        target: Limits,
        allocated: Resource,
        o: &OriginalLimits,
    ) -> Result<RealTarget, MappingError> {
        if allocated.vcores == 0 {
            return Err(MappingError::NoVcores);
        }
        let full = RealTarget::original(o);
        let alloc_millis = u64::from(allocated.vcores) * 1000;
        let mut out = full;

        if u64::from(target.cpu_millis) < alloc_millis {
            let original_real = o.cgroup.cpu_millis().unwrap_or(alloc_millis);
            let real_millis = (u128::from(target.cpu_millis) * u128::from(original_real)
                / u128::from(alloc_millis))
            .max(1) as u64;
            let (quota, period, docker) = if o.docker.nano_cpus > 0 {
                // Docker turns NanoCpus into a quota over its fixed 100 ms period.
                let nano = real_millis
                    .saturating_mul(1_000_000)
                    .max(MIN_CFS_QUOTA_US * 10_000);
                let quota = nano / 10_000;
                (quota, DEFAULT_CFS_PERIOD_US, DockerCpu::Nano(to_i64(nano)))
            } else {
                let period = if o.cgroup.cpu_period_us > 0 {
                    o.cgroup.cpu_period_us
                } else {
                    DEFAULT_CFS_PERIOD_US
                };
                let quota = (real_millis.saturating_mul(period) / 1000).max(MIN_CFS_QUOTA_US);
                (
                    quota,
                    period,
                    DockerCpu::Quota {
                        quota: to_i64(quota),
                        period: to_i64(period),
                    },
                )
            };
            out.cgroup.cpu_quota_us = Some(quota);
            out.cgroup.cpu_period_us = period;
            out.docker_cpu = docker;
        }

        if target.memory_mb < allocated.memory_mb {
            let wanted = target.memory_mb.saturating_mul(MIB);
            let bytes = o.cgroup.memory_bytes.map_or(wanted, |m| m.min(wanted));
            // The mem+swap budget stays: the working set goes to swap, not away.
            let swap = o.cgroup.memory_swap_bytes.map(|s| s.max(bytes));
            out.cgroup.memory_bytes = Some(bytes);
            out.cgroup.memory_swap_bytes = swap;
            // v2: memory.high reclaims first, because lowering memory.max below what can
            // be reclaimed OOM-kills instead of refusing with EBUSY as v1 does.
            if o.version == CgroupVersion::V2 {
                out.cgroup.memory_high_bytes =
                    Some(o.cgroup.memory_high_bytes.map_or(bytes, |h| h.min(bytes)));
            }
            out.docker_memory = to_i64(bytes);
            out.docker_memory_swap = match swap {
                Some(s) => to_i64(s),
                None if o.docker.memory_swap > 0 => o.docker.memory_swap.max(to_i64(bytes)),
                None => -1,
            };
        }
        Ok(out)
    }
}

fn original_docker_cpu(o: &OriginalLimits) -> DockerCpu {
    if o.docker.nano_cpus > 0 {
        DockerCpu::Nano(o.docker.nano_cpus)
    } else {
        DockerCpu::Quota {
            quota: restore_value(o.docker.cpu_quota, o.cgroup.cpu_quota_us),
            period: if o.docker.cpu_period > 0 {
                o.docker.cpu_period
            } else {
                to_i64(o.cgroup.cpu_period_us.max(1))
            },
        }
    }
}

/// The value to send Docker to get back to an original setting. Docker treats 0 as "leave
/// unchanged", so an original "not set" is restored as -1 (unlimited) when it was
/// unlimited, or as the cgroup's own value otherwise.
fn restore_value(docker: i64, cgroup: Option<u64>) -> i64 {
    if docker != 0 {
        return docker;
    }
    cgroup.map_or(-1, to_i64)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn yarn_like(nano: bool) -> OriginalLimits {
        OriginalLimits {
            version: CgroupVersion::V1,
            docker: DockerLimits {
                nano_cpus: if nano { 2_000_000_000 } else { 0 },
                cpu_quota: if nano { 0 } else { 200_000 },
                cpu_period: if nano { 0 } else { 100_000 },
                cpu_shares: 2048,
                memory: 4096 * MIB as i64,
                memory_swap: 4096 * MIB as i64,
            },
            cgroup: CgroupLimits {
                cpu_quota_us: Some(200_000),
                cpu_period_us: 100_000,
                cpu_shares: 2048,
                memory_bytes: Some(4096 * MIB),
                memory_swap_bytes: Some(4096 * MIB),
                memory_high_bytes: None,
            },
        }
    }

    #[test]
    fn footprint_maps_to_one_percent_of_a_core_per_vcore_ratio() {
        let o = yarn_like(true);
        // 2 vcores on 2 real CPUs: 10 milli-vcores is 1% of a core.
        let t = RealTarget::for_target(Limits::MIN_FOOTPRINT, Resource::new(4096, 2), &o).unwrap();
        assert_eq!(t.cgroup.cpu_quota_us, Some(1000));
        assert_eq!(t.cgroup.cpu_period_us, 100_000);
        assert_eq!(t.docker_cpu, DockerCpu::Nano(10_000_000));
        assert_eq!(t.cgroup.memory_bytes, Some(64 * MIB));
        // memory+swap keeps the original budget so the working set can be swapped out.
        assert_eq!(t.cgroup.memory_swap_bytes, Some(4096 * MIB));
        assert_eq!(t.docker_memory, 64 * MIB as i64);
        assert_eq!(t.docker_memory_swap, 4096 * MIB as i64);
    }

    #[test]
    fn emulator_scale_factor_is_honoured() {
        // 4 vcores backed by 1 real CPU (an emulator scaling vcores down by 4).
        let mut o = yarn_like(false);
        o.cgroup.cpu_quota_us = Some(100_000);
        o.docker.cpu_quota = 100_000;
        let t =
            RealTarget::for_target(Limits::new(4096, 2000), Resource::new(4096, 4), &o).unwrap();
        assert_eq!(t.cgroup.cpu_quota_us, Some(50_000));
        assert_eq!(
            t.docker_cpu,
            DockerCpu::Quota {
                quota: 50_000,
                period: 100_000
            }
        );
        // Memory at the allocation is left exactly as it was.
        assert_eq!(t.cgroup.memory_bytes, o.cgroup.memory_bytes);
        assert_eq!(t.docker_memory, o.docker.memory);
    }

    #[test]
    fn unlimited_cpu_counts_one_core_per_vcore_and_restores_unlimited() {
        let mut o = yarn_like(false);
        o.cgroup.cpu_quota_us = None;
        o.docker.cpu_quota = 0;
        o.docker.cpu_period = 0;
        let t = RealTarget::for_target(Limits::new(4096, 500), Resource::new(4096, 2), &o).unwrap();
        assert_eq!(t.cgroup.cpu_quota_us, Some(50_000));
        let back = RealTarget::original(&o);
        assert_eq!(back.cgroup.cpu_quota_us, None);
        assert_eq!(
            back.docker_cpu,
            DockerCpu::Quota {
                quota: -1,
                period: 100_000
            }
        );
    }

    #[test]
    fn full_allocation_target_is_the_original() {
        for nano in [true, false] {
            let o = yarn_like(nano);
            let t = RealTarget::for_target(Limits::new(4096, 2000), Resource::new(4096, 2), &o)
                .unwrap();
            assert_eq!(t, RealTarget::original(&o));
        }
    }

    #[test]
    fn v2_narrows_memory_high_with_memory_max() {
        let mut o = yarn_like(true);
        o.version = CgroupVersion::V2;
        let t = RealTarget::for_target(Limits::new(512, 2000), Resource::new(4096, 2), &o).unwrap();
        assert_eq!(t.cgroup.memory_high_bytes, Some(512 * MIB));
        assert_eq!(RealTarget::original(&o).cgroup.memory_high_bytes, None);
    }

    #[test]
    fn validation_names_the_problem() {
        let a = Resource::new(1024, 1);
        let floor = Limits::MIN_FOOTPRINT;
        assert!(validate_target(Limits::new(64, 10), a, floor).is_ok());
        assert_eq!(
            validate_target(Limits::new(2048, 10), a, floor),
            Err(MappingError::AboveAllocation {
                target: Limits::new(2048, 10),
                allocated: a
            })
        );
        assert!(matches!(
            validate_target(Limits::new(32, 10), a, floor),
            Err(MappingError::BelowFloor { .. })
        ));
        assert_eq!(
            validate_target(Limits::new(64, 10), Resource::new(1024, 0), floor),
            Err(MappingError::NoVcores)
        );
    }

    proptest! {
        #[test]
        fn mapped_limits_never_exceed_the_original(
            vcores in 1u32..64,
            mem_mb in 64u64..65536,
            frac_cpu in 0.0f64..1.0,
            frac_mem in 0.0f64..1.0,
            quota_per_vcore in 1000u64..400_000,
            nano in any::<bool>(),
        ) {
            let mut o = yarn_like(nano);
            let quota = quota_per_vcore * u64::from(vcores);
            o.cgroup.cpu_quota_us = Some(quota);
            o.docker.nano_cpus = if nano { (quota * 10_000) as i64 } else { 0 };
            o.docker.cpu_quota = if nano { 0 } else { quota as i64 };
            o.cgroup.memory_bytes = Some(mem_mb * MIB);
            o.cgroup.memory_swap_bytes = Some(mem_mb * MIB);
            let alloc = Resource::new(mem_mb, vcores);
            let target = Limits::new(
                ((mem_mb as f64 * frac_mem) as u64).max(1),
                ((f64::from(vcores) * 1000.0 * frac_cpu) as u32).max(1),
            );
            let t = RealTarget::for_target(target, alloc, &o).unwrap();
            prop_assert!(t.cgroup.cpu_quota_us.unwrap() <= quota.max(MIN_CFS_QUOTA_US));
            prop_assert!(t.cgroup.cpu_quota_us.unwrap() >= MIN_CFS_QUOTA_US);
            prop_assert!(t.cgroup.memory_bytes.unwrap() <= mem_mb * MIB);
            prop_assert!(t.cgroup.memory_swap_bytes.unwrap() >= t.cgroup.memory_bytes.unwrap());
            prop_assert!(t.docker_memory_swap >= t.docker_memory);
        }
    }
}
