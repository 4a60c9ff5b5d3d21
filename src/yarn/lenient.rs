//! Tolerant deserializers for YARN's JSON.
//!
//! Depending on the Jersey/Jettison configuration, YARN prints numbers and booleans as JSON
//! strings (`"allocatedMB":"1536"`), a one-element list as a bare object, and an empty list
//! as `null`. Every DTO field that YARN is known to vary on goes through one of these.

use serde::de::{DeserializeOwned, Error};
use serde::{Deserialize, Deserializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

fn describe(s: &Scalar) -> String {
    match s {
        Scalar::Bool(b) => format!("boolean {b}"),
        Scalar::Int(i) => format!("number {i}"),
        Scalar::Float(f) => format!("number {f}"),
        Scalar::Str(s) => format!("string {s:?}"),
    }
}

/// An integer given as a number or a string; null and "" read as 0.
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Option::<Scalar>::deserialize(d)? {
        None => Ok(0),
        Some(Scalar::Int(i)) => Ok(i),
        Some(Scalar::Float(f)) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(f as i64),
        Some(Scalar::Str(s)) if s.trim().is_empty() => Ok(0),
        Some(Scalar::Str(s)) => s
            .trim()
            .parse()
            .map_err(|_| D::Error::custom(format!("expected an integer, got string {s:?}"))),
        Some(other) => Err(D::Error::custom(format!(
            "expected an integer, got {}",
            describe(&other)
        ))),
    }
}

/// A float given as a number or a string (YARN prints `"NaN"` for some ratios); null reads
/// as 0.
pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Option::<Scalar>::deserialize(d)? {
        None => Ok(0.0),
        Some(Scalar::Int(i)) => Ok(i as f64),
        Some(Scalar::Float(f)) => Ok(f),
        Some(Scalar::Str(s)) if s.trim().is_empty() => Ok(0.0),
        Some(Scalar::Str(s)) => s
            .trim()
            .parse()
            .map_err(|_| D::Error::custom(format!("expected a number, got string {s:?}"))),
        Some(other @ Scalar::Bool(_)) => Err(D::Error::custom(format!(
            "expected a number, got {}",
            describe(&other)
        ))),
    }
}

/// A boolean given as `true`/`false` or as the strings "true"/"false"; null reads as false.
pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Option::<Scalar>::deserialize(d)? {
        None => Ok(false),
        Some(Scalar::Bool(b)) => Ok(b),
        Some(Scalar::Str(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" | "" => Ok(false),
            _ => Err(D::Error::custom(format!(
                "expected a boolean, got string {s:?}"
            ))),
        },
        Some(other) => Err(D::Error::custom(format!(
            "expected a boolean, got {}",
            describe(&other)
        ))),
    }
}

/// A string that YARN sometimes prints as a number (ids, priorities); null reads as "".
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Option::<Scalar>::deserialize(d)? {
        None => Ok(String::new()),
        Some(Scalar::Str(s)) => Ok(s),
        Some(Scalar::Int(i)) => Ok(i.to_string()),
        Some(Scalar::Float(f)) => Ok(f.to_string()),
        Some(Scalar::Bool(b)) => Ok(b.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    Many(Vec<T>),
    One(T),
}

/// A list given as a JSON array, a single element, or null (empty).
pub fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(match Option::<OneOrMany<T>>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::Many(v)) => v,
        Some(OneOrMany::One(t)) => vec![t],
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, Default)]
    #[serde(default)]
    struct T {
        #[serde(deserialize_with = "super::i64")]
        n: i64,
        #[serde(deserialize_with = "super::f64")]
        f: f64,
        #[serde(deserialize_with = "super::bool")]
        b: bool,
        #[serde(deserialize_with = "super::vec")]
        v: Vec<u32>,
        #[serde(deserialize_with = "super::string")]
        s: String,
    }

    #[test]
    fn numbers_as_strings_and_missing_fields_are_accepted() {
        let t: T =
            serde_json::from_str(r#"{"n":"1536","f":"NaN","b":"true","v":7,"s":3}"#).unwrap();
        assert_eq!(t.n, 1536);
        assert!(t.f.is_nan());
        assert!(t.b);
        assert_eq!(t.v, vec![7]);
        assert_eq!(t.s, "3");
        let t: T = serde_json::from_str(r#"{"n":null,"v":null}"#).unwrap();
        assert_eq!(t.n, 0);
        assert!(t.v.is_empty());
        let t: T = serde_json::from_str(r#"{"n":2.0,"v":[1,2]}"#).unwrap();
        assert_eq!((t.n, t.v.len()), (2, 2));
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let e = serde_json::from_str::<T>(r#"{"n":"twelve"}"#).unwrap_err();
        assert!(e.to_string().contains("expected an integer"), "{e}");
        let e = serde_json::from_str::<T>(r#"{"b":"maybe"}"#).unwrap_err();
        assert!(e.to_string().contains("expected a boolean"), "{e}");
        assert!(serde_json::from_str::<T>(r#"{"n":1.5}"#).is_err());
    }
}
