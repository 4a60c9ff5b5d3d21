//! Typed readings of property values, shared by the queue tree and the settings.
//!
//! Hadoop's getters trim and fall back to the default on garbage; these trim too but
//! reject garbage, returning what was expected so the caller can name the key and file.

/// `true` or `false`, any case.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// An integer as Hadoop's `getInt`/`getLong` read it: decimal, or hex with `0x`.
pub fn parse_i64(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let parsed = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16),
        None => digits.parse::<i64>(),
    };
    match parsed {
        Ok(v) if neg => v.checked_neg().ok_or_else(|| "integer out of range".into()),
        Ok(v) => Ok(v),
        Err(_) => Err("expected an integer".into()),
    }
}

/// A non-negative integer that fits `T`.
pub fn parse_unsigned<T: TryFrom<i64>>(s: &str) -> Result<T, String> {
    let v = parse_i64(s)?;
    if v < 0 {
        return Err("expected a non-negative integer".into());
    }
    T::try_from(v).map_err(|_| "integer out of range".into())
}

/// A whole number above zero that fits `T`.
pub fn parse_positive<T: TryFrom<i64> + PartialEq + Default>(s: &str) -> Result<T, String> {
    match parse_unsigned::<T>(s)? {
        v if v == T::default() => Err("expected a whole number above zero".into()),
        v => Ok(v),
    }
}

/// A finite number.
pub fn parse_f64(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err("expected a number".into()),
    }
}

/// A number within `[lo, hi]`.
pub fn parse_f64_in(s: &str, lo: f64, hi: f64) -> Result<f64, String> {
    let v = parse_f64(s)?;
    if v < lo || v > hi {
        return Err(format!("expected a number from {lo} to {hi}"));
    }
    Ok(v)
}

/// A duration in milliseconds, as Hadoop's `getTimeDuration` reads it: a bare integer
/// is milliseconds; `ms`, `s`, `m`, `h` and `d` suffixes are accepted.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    const UNITS: [(&str, u64); 5] = [
        ("ms", 1),
        ("s", 1000),
        ("m", 60_000),
        ("h", 3_600_000),
        ("d", 86_400_000),
    ];
    let t = s.trim();
    let expected =
        || "expected a duration: milliseconds, or a number with ms, s, m, h or d".to_string();
    let (digits, factor) = UNITS
        .iter()
        .find_map(|(suffix, f)| t.strip_suffix(suffix).map(|d| (d.trim_end(), *f)))
        .unwrap_or((t, 1));
    let n: u64 = digits.parse().map_err(|_| expected())?;
    n.checked_mul(factor)
        .ok_or_else(|| "duration out of range".into())
}

/// A positive duration in milliseconds.
pub fn parse_positive_duration_ms(s: &str) -> Result<u64, String> {
    match parse_duration_ms(s)? {
        0 => Err("expected a duration above zero".into()),
        v => Ok(v),
    }
}

/// Comma-separated, trimmed, empty entries dropped (Hadoop's `getTrimmedStrings`).
pub fn parse_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Levenshtein distance, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The known name closest to `unknown`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    unknown: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = 2 + unknown.chars().count() / 5;
    known
        .into_iter()
        .map(|k| (edit_distance(unknown, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_accept_hex_and_reject_garbage() {
        assert_eq!(parse_i64(" 42 "), Ok(42));
        assert_eq!(parse_i64("0x1F"), Ok(31));
        assert_eq!(parse_i64("-0x10"), Ok(-16));
        assert!(parse_i64("4.2").is_err());
        assert!(parse_i64("").is_err());
        assert!(parse_unsigned::<u16>("70000").is_err());
        assert!(parse_unsigned::<u32>("-1").is_err());
        assert_eq!(parse_positive::<u32>("3"), Ok(3));
        assert!(parse_positive::<u16>("0").is_err());
    }

    #[test]
    fn numbers_must_be_finite() {
        assert_eq!(parse_f64("1e2"), Ok(100.0));
        assert!(parse_f64("NaN").is_err());
        assert!(parse_f64("inf").is_err());
        assert!(parse_f64_in("1.5", 0.0, 1.0).is_err());
    }

    #[test]
    fn durations_take_hadoop_suffixes() {
        assert_eq!(parse_duration_ms("3000"), Ok(3000));
        assert_eq!(parse_duration_ms("3s"), Ok(3000));
        assert_eq!(parse_duration_ms("2 m"), Ok(120_000));
        assert_eq!(parse_duration_ms("15ms"), Ok(15));
        assert_eq!(parse_duration_ms("1d"), Ok(86_400_000));
        assert!(parse_duration_ms("-1").is_err());
        assert!(parse_duration_ms("3 weeks").is_err());
        assert!(parse_positive_duration_ms("0s").is_err());
        assert!(parse_duration_ms("99999999999999999d").is_err());
    }

    #[test]
    fn lists_are_trimmed() {
        assert_eq!(parse_list(" a, ,b ,"), vec!["a", "b"]);
        assert!(parse_list("  ").is_empty());
    }

    #[test]
    fn suggestions_pick_the_nearest_close_name() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        let known = ["yarn.preemptor.las.quantum-ms", "yarn.preemptor.policy"];
        assert_eq!(
            did_you_mean("yarn.preemptor.polcy", known),
            Some("yarn.preemptor.policy")
        );
        assert_eq!(
            did_you_mean("yarn.preemptor.quantum-ms", known),
            Some("yarn.preemptor.las.quantum-ms")
        );
        assert_eq!(did_you_mean("something.else.entirely", known), None);
    }
}
