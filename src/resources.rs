//! YARN resources (memory-mb, vcores) and the cgroup-level limits Preemptor sets.
//!
//! Arithmetic saturates: a view assembled from several REST calls can be momentarily
//! inconsistent (used > capacity), and that must never wrap around or panic.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

use serde::{Deserialize, Serialize};

/// A YARN resource vector, as the DominantResourceCalculator sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub memory_mb: u64,
    pub vcores: u32,
}

impl Resource {
    pub const ZERO: Resource = Resource {
        memory_mb: 0,
        vcores: 0,
    };

    pub const fn new(memory_mb: u64, vcores: u32) -> Self {
        Resource { memory_mb, vcores }
    }

    pub fn is_zero(&self) -> bool {
        self.memory_mb == 0 && self.vcores == 0
    }

    /// True when any component is positive (YARN's `Resources.greaterThan(.., none())`
    /// under the dominant calculator).
    pub fn any_positive(&self) -> bool {
        !self.is_zero()
    }

    pub fn saturating_add(self, other: Resource) -> Resource {
        Resource {
            memory_mb: self.memory_mb.saturating_add(other.memory_mb),
            vcores: self.vcores.saturating_add(other.vcores),
        }
    }

    /// Component-wise subtraction floored at zero.
    pub fn saturating_sub(self, other: Resource) -> Resource {
        Resource {
            memory_mb: self.memory_mb.saturating_sub(other.memory_mb),
            vcores: self.vcores.saturating_sub(other.vcores),
        }
    }

    pub fn component_min(self, other: Resource) -> Resource {
        Resource {
            memory_mb: self.memory_mb.min(other.memory_mb),
            vcores: self.vcores.min(other.vcores),
        }
    }

    pub fn component_max(self, other: Resource) -> Resource {
        Resource {
            memory_mb: self.memory_mb.max(other.memory_mb),
            vcores: self.vcores.max(other.vcores),
        }
    }

    /// True when every component of `self` fits within `other`.
    pub fn fits_in(&self, other: &Resource) -> bool {
        self.memory_mb <= other.memory_mb && self.vcores <= other.vcores
    }

    /// Multiply both components by a non-negative factor, rounding down.
    /// Negative or NaN factors give zero.
    pub fn scale(self, factor: f64) -> Resource {
        if factor.is_nan() || factor <= 0.0 {
            return Resource::ZERO;
        }
        Resource {
            memory_mb: clamp_u64(self.memory_mb as f64 * factor),
            vcores: clamp_u64(self.vcores as f64 * factor).min(u32::MAX as u64) as u32,
        }
    }

    /// The larger of the memory and vcores shares of `total` (DRF). A zero component of
    /// `total` contributes nothing, so an empty cluster yields 0.0 rather than NaN.
    pub fn dominant_share(&self, total: &Resource) -> f64 {
        let mem = ratio(self.memory_mb as f64, total.memory_mb as f64);
        let cpu = ratio(self.vcores as f64, total.vcores as f64);
        mem.max(cpu)
    }

    /// Sum of an iterator of resources, saturating.
    pub fn sum<'a>(items: impl IntoIterator<Item = &'a Resource>) -> Resource {
        items
            .into_iter()
            .fold(Resource::ZERO, |acc, r| acc.saturating_add(*r))
    }
}

fn ratio(num: f64, den: f64) -> f64 {
    if den <= 0.0 { 0.0 } else { num / den }
}

fn clamp_u64(v: f64) -> u64 {
    if v >= u64::MAX as f64 {
        u64::MAX
    } else {
        v.floor() as u64
    }
}

impl Add for Resource {
    type Output = Resource;
    fn add(self, rhs: Resource) -> Resource {
        self.saturating_add(rhs)
    }
}

impl AddAssign for Resource {
    fn add_assign(&mut self, rhs: Resource) {
        *self = self.saturating_add(rhs);
    }
}

impl Sub for Resource {
    type Output = Resource;
    fn sub(self, rhs: Resource) -> Resource {
        self.saturating_sub(rhs)
    }
}

impl SubAssign for Resource {
    fn sub_assign(&mut self, rhs: Resource) {
        *self = self.saturating_sub(rhs);
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} MB, {} vcores>", self.memory_mb, self.vcores)
    }
}

/// Limits enforced on one container's cgroup, in YARN units: memory in MB and CPU in
/// thousandths of a vcore, so that BIG-C's 1% footprint (10 milli-vcores) is exact.
/// The agent maps vcores to real CPU with the container's own original ratio.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub memory_mb: u64,
    pub cpu_millis: u32,
}

impl Limits {
    pub const fn new(memory_mb: u64, cpu_millis: u32) -> Self {
        Limits {
            memory_mb,
            cpu_millis,
        }
    }

    /// BIG-C's minimal footprint: 1% of a core (cfs quota 1000 us per 100000 us) and 64 MB,
    /// enough to keep the task's heartbeat alive.
    pub const MIN_FOOTPRINT: Limits = Limits {
        memory_mb: 64,
        cpu_millis: 10,
    };

    /// True when every component of `self` is at or below `other`.
    pub fn fits_in(&self, other: &Limits) -> bool {
        self.memory_mb <= other.memory_mb && self.cpu_millis <= other.cpu_millis
    }

    pub fn component_max(self, other: Limits) -> Limits {
        Limits {
            memory_mb: self.memory_mb.max(other.memory_mb),
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
        }
    }

    pub fn component_min(self, other: Limits) -> Limits {
        Limits {
            memory_mb: self.memory_mb.min(other.memory_mb),
            cpu_millis: self.cpu_millis.min(other.cpu_millis),
        }
    }

    /// Resources freed by going from `self` down to `to`, in YARN units (whole vcores,
    /// rounded down, since YARN can only hand out whole vcores).
    pub fn reclaimed_to(&self, to: &Limits) -> Resource {
        Resource {
            memory_mb: self.memory_mb.saturating_sub(to.memory_mb),
            vcores: self.cpu_millis.saturating_sub(to.cpu_millis) / 1000,
        }
    }
}

impl From<Resource> for Limits {
    fn from(r: Resource) -> Limits {
        Limits {
            memory_mb: r.memory_mb,
            cpu_millis: r.vcores.saturating_mul(1000),
        }
    }
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.cpu_millis / 1000;
        let frac = self.cpu_millis % 1000;
        if frac == 0 {
            write!(f, "<{} MB, {} vcores>", self.memory_mb, whole)
        } else {
            write!(f, "<{} MB, {}.{:03} vcores>", self.memory_mb, whole, frac)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let a = Resource::new(1024, 1);
        let b = Resource::new(2048, 4);
        assert_eq!(a - b, Resource::ZERO);
        assert_eq!(
            Resource::new(u64::MAX, u32::MAX) + b,
            Resource::new(u64::MAX, u32::MAX)
        );
        let mut c = b;
        c -= a;
        assert_eq!(c, Resource::new(1024, 3));
    }

    #[test]
    fn dominant_share_takes_the_larger_component() {
        let total = Resource::new(100 * 1024, 100);
        assert_eq!(Resource::new(10 * 1024, 50).dominant_share(&total), 0.5);
        assert_eq!(Resource::new(60 * 1024, 1).dominant_share(&total), 0.6);
        assert_eq!(Resource::new(1, 1).dominant_share(&Resource::ZERO), 0.0);
    }

    #[test]
    fn scale_rounds_down_and_rejects_bad_factors() {
        let r = Resource::new(1000, 3);
        assert_eq!(r.scale(0.5), Resource::new(500, 1));
        assert_eq!(r.scale(-1.0), Resource::ZERO);
        assert_eq!(r.scale(f64::NAN), Resource::ZERO);
        assert_eq!(r.scale(f64::INFINITY), Resource::new(u64::MAX, u32::MAX));
    }

    #[test]
    fn fits_in_is_component_wise() {
        assert!(Resource::new(1, 1).fits_in(&Resource::new(1, 1)));
        assert!(!Resource::new(2, 1).fits_in(&Resource::new(1, 8)));
    }

    #[test]
    fn limits_display_and_reclaim() {
        assert_eq!(Limits::MIN_FOOTPRINT.to_string(), "<64 MB, 0.010 vcores>");
        let full = Limits::from(Resource::new(4096, 4));
        assert_eq!(full.to_string(), "<4096 MB, 4 vcores>");
        assert_eq!(
            full.reclaimed_to(&Limits::MIN_FOOTPRINT),
            Resource::new(4032, 3)
        );
        assert_eq!(Resource::new(8192, 4).to_string(), "<8192 MB, 4 vcores>");
    }
}
