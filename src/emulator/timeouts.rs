//! Application timeouts (`/ws/v1/cluster/apps/{id}/timeout[s]`): the JSON shapes of
//! Hadoop's AppTimeoutInfo / AppTimeoutsInfo and the ISO 8601 times they carry
//! (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`, as Hadoop's `Times.formatISO8601`).
//!
//! Only the RM's REST serves these, so the shapes live here rather than in `yarn::dto`.

use serde::{Deserialize, Serialize};
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

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

/// Epoch milliseconds as `2024-05-01T12:00:00.000+0000` (UTC); a time past year 9999
/// prints as its milliseconds.
pub fn format_iso8601(ms: u64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]+0000"
    );
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// `yyyy-MM-dd'T'HH:mm:ss[.SSS]` and a zone `+HHMM`, `+HH:MM` or `Z`, to epoch
/// milliseconds. The grammar is Hadoop's (stricter than ISO 8601, which `time`'s parser
/// takes whole: `+05`, no seconds); the calendar is `time`'s.
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
    let (clock, zone) = rest.split_at(zone_at);
    let (hms, frac) = match clock.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (clock, ""),
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
    let small = |v: i64| u8::try_from(v).map_err(|_| bad());
    let date = Date::from_calendar_date(
        i32::try_from(y).map_err(|_| bad())?,
        Month::try_from(small(mo)?).map_err(|_| bad())?,
        small(d)?,
    )
    .map_err(|_| bad())?;
    // Java's lenient parsing rolls a leap second over into the next minute.
    let leap = sec == 60;
    let clock = Time::from_hms_milli(
        small(h)?,
        small(mi)?,
        small(if leap { 59 } else { sec })?,
        u16::try_from(millis).map_err(|_| bad())?,
    )
    .map_err(|_| bad())?;
    let offset = UtcOffset::from_whole_seconds(i32::try_from(offset_min * 60).map_err(|_| bad())?)
        .map_err(|_| bad())?;
    let at = PrimitiveDateTime::new(date, clock).assume_offset(offset);
    let ms = at.unix_timestamp_nanos() / 1_000_000 + if leap { 1000 } else { 0 };
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
        assert_eq!(
            parse_iso8601("2016-12-05T17:20:60.104Z").unwrap(),
            ms,
            "a leap second is the next minute's first"
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
            // A day the month does not have.
            "2023-02-29T00:00:00.000+0000",
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
