//! The policies' accounting unit: memory in MB and CPU in thousandths of a vcore.
//!
//! A suspended container keeps BIG-C's footprint (10 milli-vcores), so counting in whole
//! vcores would make a 1-vcore container look as if suspending it freed nothing. Sums of
//! a whole cluster must not wrap either, hence u64 and saturating arithmetic. Whole vcores
//! appear only where YARN needs them: a node's advertised capacity.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

use serde::Serialize;

use crate::resources::{Limits, Resource};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Amount {
    pub memory_mb: u64,
    pub vcores_milli: u64,
}

impl Amount {
    pub const ZERO: Amount = Amount {
        memory_mb: 0,
        vcores_milli: 0,
    };

    pub const fn new(memory_mb: u64, vcores_milli: u64) -> Self {
        Amount {
            memory_mb,
            vcores_milli,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.memory_mb == 0 && self.vcores_milli == 0
    }

    pub fn any_positive(&self) -> bool {
        !self.is_zero()
    }

    /// True when every component of `self` is at or below `other`.
    pub fn fits_in(&self, other: &Amount) -> bool {
        self.memory_mb <= other.memory_mb && self.vcores_milli <= other.vcores_milli
    }

    pub fn component_min(self, other: Amount) -> Amount {
        Amount::new(
            self.memory_mb.min(other.memory_mb),
            self.vcores_milli.min(other.vcores_milli),
        )
    }

    pub fn component_max(self, other: Amount) -> Amount {
        Amount::new(
            self.memory_mb.max(other.memory_mb),
            self.vcores_milli.max(other.vcores_milli),
        )
    }

    /// YARN units, whole vcores rounded down (YARN can only hand out whole vcores).
    pub fn to_resource(&self) -> Resource {
        Resource::new(
            self.memory_mb,
            u32::try_from(self.vcores_milli / 1000).unwrap_or(u32::MAX),
        )
    }

    /// Cgroup units, saturating at `u32::MAX` milli-vcores.
    pub fn to_limits(&self) -> Limits {
        Limits::new(
            self.memory_mb,
            u32::try_from(self.vcores_milli).unwrap_or(u32::MAX),
        )
    }

    /// The larger of the memory and CPU shares of `total` (DRF); 0.0 for an empty total.
    pub fn dominant_share(&self, total: &Amount) -> f64 {
        let share = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        share(self.memory_mb, total.memory_mb).max(share(self.vcores_milli, total.vcores_milli))
    }

    /// Multiply by a non-negative factor, rounding down; NaN or negative gives zero.
    pub fn scale(self, factor: f64) -> Amount {
        self.scale_with(factor, f64::floor)
    }

    /// Multiply by a non-negative factor, rounding up (YARN's `multiplyAndNormalizeUp`),
    /// so that a positive amount never scales to nothing.
    pub fn scale_up(self, factor: f64) -> Amount {
        self.scale_with(factor, f64::ceil)
    }

    fn scale_with(self, factor: f64, round: fn(f64) -> f64) -> Amount {
        if factor.is_nan() || factor <= 0.0 {
            return Amount::ZERO;
        }
        let one = |v: u64| {
            let x = round(v as f64 * factor);
            if x >= u64::MAX as f64 {
                u64::MAX
            } else {
                x as u64
            }
        };
        Amount::new(one(self.memory_mb), one(self.vcores_milli))
    }

    /// `self * num / den` per component, rounding down; a zero denominator gives zero.
    pub fn proportion(self, num: Amount, den: Amount) -> Amount {
        let one = |v: u64, n: u64, d: u64| {
            if d == 0 {
                0
            } else {
                u64::try_from(v as u128 * n as u128 / d as u128).unwrap_or(u64::MAX)
            }
        };
        Amount::new(
            one(self.memory_mb, num.memory_mb, den.memory_mb),
            one(self.vcores_milli, num.vcores_milli, den.vcores_milli),
        )
    }

    pub fn sum<I: IntoIterator<Item = Amount>>(items: I) -> Amount {
        items.into_iter().fold(Amount::ZERO, |a, b| a + b)
    }
}

impl From<Resource> for Amount {
    fn from(r: Resource) -> Amount {
        Amount::new(r.memory_mb, r.vcores as u64 * 1000)
    }
}

impl From<Limits> for Amount {
    fn from(l: Limits) -> Amount {
        Amount::new(l.memory_mb, l.cpu_millis as u64)
    }
}

impl Add for Amount {
    type Output = Amount;
    fn add(self, rhs: Amount) -> Amount {
        Amount::new(
            self.memory_mb.saturating_add(rhs.memory_mb),
            self.vcores_milli.saturating_add(rhs.vcores_milli),
        )
    }
}

impl AddAssign for Amount {
    fn add_assign(&mut self, rhs: Amount) {
        *self = *self + rhs;
    }
}

/// Component-wise, floored at zero.
impl Sub for Amount {
    type Output = Amount;
    fn sub(self, rhs: Amount) -> Amount {
        Amount::new(
            self.memory_mb.saturating_sub(rhs.memory_mb),
            self.vcores_milli.saturating_sub(rhs.vcores_milli),
        )
    }
}

impl SubAssign for Amount {
    fn sub_assign(&mut self, rhs: Amount) {
        *self = *self - rhs;
    }
}

/// As cgroup limits print; beyond 4 million vcores (a sum), whole vcores only.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match u32::try_from(self.vcores_milli) {
            Ok(milli) => Limits::new(self.memory_mb, milli).fmt(f),
            Err(_) => write!(
                f,
                "<{} MB, {} vcores>",
                self.memory_mb,
                self.vcores_milli / 1000
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_and_rounds_whole_vcores_down() {
        let a = Amount::from(Resource::new(4096, 2)) - Amount::from(Limits::MIN_FOOTPRINT);
        assert_eq!(a, Amount::new(4032, 1990));
        assert_eq!(a.to_resource(), Resource::new(4032, 1));
        assert_eq!(a.to_string(), "<4032 MB, 1.990 vcores>");
        assert_eq!(Amount::new(8192, 4000).to_string(), "<8192 MB, 4 vcores>");
        assert_eq!(
            Amount::new(1, 5_000_000_000).to_string(),
            "<1 MB, 5000000 vcores>"
        );
    }

    #[test]
    fn scaling_and_proportions_never_panic() {
        let a = Amount::new(1000, 3);
        assert_eq!(a.scale(0.5), Amount::new(500, 1));
        assert_eq!(a.scale_up(0.5), Amount::new(500, 2));
        assert_eq!(a.scale(f64::NAN), Amount::ZERO);
        assert_eq!(a.scale(f64::INFINITY), Amount::new(u64::MAX, u64::MAX));
        assert_eq!(
            Amount::new(u64::MAX, 10).proportion(Amount::new(3, 1), Amount::new(4, 0)),
            Amount::new(u64::MAX / 4 * 3 + 2, 0)
        );
        assert_eq!(
            Amount::new(u64::MAX, 1) + Amount::new(1, 1),
            Amount::new(u64::MAX, 2)
        );
    }
}
