//! Capacity values as capacity-scheduler.xml writes them: percent, weight (`2w`) or an
//! absolute resource (`[memory=1024,vcores=2]`).

use super::*;

/// A capacity as configured: percent of the parent, weight among siblings, or an
/// absolute resource.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "form", content = "value", rename_all = "lowercase")]
pub enum CapacityValue {
    Percent(f64),
    Weight(f64),
    Absolute(Resource),
}

impl CapacityValue {
    pub fn form(&self) -> &'static str {
        match self {
            CapacityValue::Percent(_) => "percent",
            CapacityValue::Weight(_) => "weight",
            CapacityValue::Absolute(_) => "absolute",
        }
    }

    pub(super) fn absolute(&self) -> Option<Resource> {
        match self {
            CapacityValue::Absolute(r) => Some(*r),
            _ => None,
        }
    }
}

/// A number the way YARN's own output writes it: no trailing zeros.
pub(super) fn number(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl fmt::Display for CapacityValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityValue::Percent(p) => f.write_str(&number(*p)),
            CapacityValue::Weight(w) => write!(f, "{}w", number(*w)),
            CapacityValue::Absolute(r) => write!(f, "[memory={},vcores={}]", r.memory_mb, r.vcores),
        }
    }
}

/// Reads `40`, `2.0w` or `[memory=10240,vcores=12]` (also `memory-mb`, spaces, and
/// YARN's unit suffixes such as `10Gi`). Resource names other than memory and vcores
/// are returned so the caller can say they are ignored.
pub fn parse_capacity(s: &str, allow_weight: bool) -> Result<(CapacityValue, Vec<String>), String> {
    let t = s.trim();
    if let Some(inner) = t.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("an absolute resource must end with ]")?;
        let (r, ignored) = parse_absolute(inner)?;
        return Ok((CapacityValue::Absolute(r), ignored));
    }
    if let Some(w) = t.strip_suffix('w') {
        if !allow_weight {
            return Err(
                "a weight is not allowed here; expected a percentage or [memory=..,vcores=..]"
                    .into(),
            );
        }
        let w = parse_f64(w).map_err(|_| "expected a weight such as 2.0w")?;
        if !(0.0..=MAX_WEIGHT).contains(&w) {
            return Err(format!("a weight must be from 0 to {MAX_WEIGHT}"));
        }
        return Ok((CapacityValue::Weight(w), vec![]));
    }
    let p = parse_f64(t).map_err(|_| {
        if allow_weight {
            "expected a percentage (40), a weight (2.0w) or an absolute resource ([memory=10240,vcores=12])"
        } else {
            "expected a percentage (40) or an absolute resource ([memory=10240,vcores=12])"
        }
    })?;
    if !(0.0..=100.0).contains(&p) {
        return Err("a percentage must be from 0 to 100".into());
    }
    Ok((CapacityValue::Percent(p), vec![]))
}

pub(super) fn parse_absolute(inner: &str) -> Result<(Resource, Vec<String>), String> {
    let mut memory = None;
    let mut vcores = None;
    let mut ignored = Vec::new();
    let pairs: Vec<&str> = inner
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if pairs.is_empty() {
        return Err("an absolute resource needs at least memory or vcores".into());
    }
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not name=value"))?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        let slot = match k.as_str() {
            "memory" | "memory-mb" => &mut memory,
            "vcores" => &mut vcores,
            _ => {
                ignored.push(k);
                continue;
            }
        };
        if slot.is_some() {
            return Err(format!("{k} is given twice"));
        }
        *slot = Some(if k == "vcores" {
            parse_count(v)?
        } else {
            parse_memory_mb(v)?
        });
    }
    let vcores = match vcores {
        Some(v) => u32::try_from(v).map_err(|_| "vcores out of range".to_string())?,
        None => 0,
    };
    Ok((Resource::new(memory.unwrap_or(0), vcores), ignored))
}

pub(super) fn parse_count(v: &str) -> Result<u64, String> {
    if v.starts_with('-') {
        return Err(format!("{v:?} is negative"));
    }
    v.parse::<u64>()
        .map_err(|_| format!("{v:?} is not a whole number"))
}

/// Memory in MB; YARN reads a bare number as MiB and converts unit suffixes.
pub(super) fn parse_memory_mb(v: &str) -> Result<u64, String> {
    const MIB: u128 = 1 << 20;
    const UNITS: [(&str, u128); 10] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
    ];
    let (digits, bytes_per_unit) = UNITS
        .iter()
        .find_map(|(u, b)| v.strip_suffix(u).map(|d| (d.trim_end(), *b)))
        .unwrap_or((v, MIB));
    let n = u128::from(parse_count(digits)?);
    u64::try_from(n * bytes_per_unit / MIB).map_err(|_| format!("{v:?} is out of range"))
}
