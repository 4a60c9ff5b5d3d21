//! Application timeouts (`/ws/v1/cluster/apps/{id}/timeout[s]`): the JSON shapes of
//! Hadoop's AppTimeoutInfo / AppTimeoutsInfo and the ISO 8601 times they carry
//! (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`, as Hadoop's `Times.formatISO8601`).
//!
//! Only the RM's REST serves these, so the shapes live here rather than in `yarn::dto`.

use serde::{Deserialize, Serialize};

/// The one timeout type YARN has.
pub const LIFETIME: &str = "LIFETIME";

/// `{"type":"LIFETIME","expiryTime":"...","remainingTimeInSeconds":n}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppTimeoutInfo {
    #[serde(rename = "type")]
    pub timeout_type: String,
    pub expiry_time: String,
    pub remaining_time_in_seconds: i64,
}

impl AppTimeoutInfo {
    /// What YARN reports for an application without this timeout: UNLIMITED, -1.
    /// In a final state the remaining time is 0.
    pub fn lifetime(expiry_ms: Option<u64>, finished: bool, now: u64) -> AppTimeoutInfo {
        match expiry_ms {
            None => AppTimeoutInfo {
                timeout_type: LIFETIME.into(),
                expiry_time: "UNLIMITED".into(),
                remaining_time_in_seconds: -1,
            },
            Some(e) => AppTimeoutInfo {
                timeout_type: LIFETIME.into(),
                expiry_time: format_iso8601(e),
                remaining_time_in_seconds: if finished {
                    0
                } else {
                    (e.saturating_sub(now) / 1000) as i64
                },
            },
        }
    }
}

/// `{"timeout":{..}}`: the body of `PUT /timeout` and the answer of `GET /timeouts/{type}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppTimeoutResponse {
    pub timeout: AppTimeoutInfo,
}

/// `{"timeouts":{"timeout":[..]}}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppTimeoutsResponse {
    pub timeouts: AppTimeoutList,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppTimeoutList {
    pub timeout: Vec<AppTimeoutInfo>,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Epoch milliseconds as `2024-05-01T12:00:00.000+0000` (UTC).
pub fn format_iso8601(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}+0000",
        s / 3600,
        s % 3600 / 60,
        s % 60,
        ms % 1000
    )
}

/// `yyyy-MM-dd'T'HH:mm:ss[.SSS]` and a zone `+HHMM`, `+HH:MM` or `Z`, to epoch
/// milliseconds.
pub fn parse_iso8601(s: &str) -> Result<u64, String> {
    let bad = || format!("Invalid date {s:?}: expected yyyy-MM-dd'T'HH:mm:ss.SSSZ");
    let s = s.trim();
    let (date, rest) = s.split_once('T').ok_or_else(bad)?;
    let num = |t: &str| -> Result<i64, String> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        t.parse().map_err(|_| bad())
    };
    let mut dp = date.split('-');
    let (y, mo, d) = match (dp.next(), dp.next(), dp.next(), dp.next()) {
        (Some(y), Some(m), Some(d), None) => (num(y)?, num(m)?, num(d)?),
        _ => return Err(bad()),
    };
    // The zone starts at the first '+', '-' or 'Z' after the time.
    let zone_at = rest.find(['+', '-', 'Z']).ok_or_else(bad)?;
    let (time, zone) = rest.split_at(zone_at);
    let (hms, frac) = match time.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (time, ""),
    };
    let mut tp = hms.split(':');
    let (h, mi, sec) = match (tp.next(), tp.next(), tp.next(), tp.next()) {
        (Some(h), Some(m), Some(s), None) => (num(h)?, num(m)?, num(s)?),
        _ => return Err(bad()),
    };
    let millis = match frac.len() {
        0 => 0,
        1..=3 => num(frac)? * 10_i64.pow(3 - frac.len() as u32),
        _ => num(&frac[..3])?,
    };
    let offset_min = match zone {
        "Z" => 0,
        z => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
            if digits.len() != 4 {
                return Err(bad());
            }
            sign * (num(&digits[..2])? * 60 + num(&digits[2..])?)
        }
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    let ms = secs * 1000 + millis;
    u64::try_from(ms).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_times_round_trip_and_zones_are_applied() {
        // 2016-12-05T22:51:00.104+0530 is the example of Hadoop's REST documentation.
        let ms = parse_iso8601("2016-12-05T22:51:00.104+0530").unwrap();
        assert_eq!(ms, 1_480_958_460_104);
        assert_eq!(format_iso8601(ms), "2016-12-05T17:21:00.104+0000");
        assert_eq!(parse_iso8601("2016-12-05T17:21:00.104Z").unwrap(), ms);
        assert_eq!(parse_iso8601("2016-12-05T17:21:00.104+00:00").unwrap(), ms);
        assert_eq!(parse_iso8601("2016-12-05T12:21:00.104-0500").unwrap(), ms);
        assert_eq!(format_iso8601(0), "1970-01-01T00:00:00.000+0000");
        assert_eq!(
            parse_iso8601("2024-02-29T23:59:59+0000").unwrap() % 1000,
            0,
            "milliseconds are optional"
        );
        for bad in [
            "",
            "2016-12-05",
            "2016-13-05T00:00:00.000+0000",
            "2016-12-05T25:00:00.000+0000",
            "2016-12-05T00:00:00.000",
            "2016-12-05T00:00:00.000+05",
            "1969-12-31T00:00:00.000+0000",
            "x016-12-05T00:00:00.000+0000",
        ] {
            assert!(parse_iso8601(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_lifetime_is_unlimited() {
        let none = AppTimeoutInfo::lifetime(None, false, 5);
        assert_eq!(
            serde_json::to_value(&none).unwrap(),
            serde_json::json!({"type":"LIFETIME","expiryTime":"UNLIMITED","remainingTimeInSeconds":-1})
        );
        let set = AppTimeoutInfo::lifetime(Some(61_000), false, 1_000);
        assert_eq!(set.remaining_time_in_seconds, 60);
        assert_eq!(
            AppTimeoutInfo::lifetime(Some(61_000), true, 1_000).remaining_time_in_seconds,
            0
        );
    }
}
