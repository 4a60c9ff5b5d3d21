//! Tolerant deserializers for YARN's JSON.
//!
//! Depending on the Jersey/Jettison configuration, YARN prints numbers and booleans as JSON
//! strings (`"allocatedMB":"1536"`), a one-element list as a bare object, and an empty list
//! as `null`. Every DTO field that YARN is known to vary on goes through one of these.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeOwned, Error, IntoDeserializer, MapAccess, SeqAccess, Visitor};
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

fn int_of<E: Error>(s: Scalar) -> Result<i64, E> {
    match s {
        Scalar::Int(i) => Ok(i),
        Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(f as i64),
        Scalar::Str(s) if s.trim().is_empty() => Ok(0),
        Scalar::Str(s) => s
            .trim()
            .parse()
            .map_err(|_| E::custom(format!("expected an integer, got string {s:?}"))),
        other => Err(E::custom(format!(
            "expected an integer, got {}",
            describe(&other)
        ))),
    }
}

fn float_of<E: Error>(s: Scalar) -> Result<f64, E> {
    match s {
        Scalar::Int(i) => Ok(i as f64),
        Scalar::Float(f) => Ok(f),
        Scalar::Str(s) if s.trim().is_empty() => Ok(0.0),
        Scalar::Str(s) => s
            .trim()
            .parse()
            .map_err(|_| E::custom(format!("expected a number, got string {s:?}"))),
        other @ Scalar::Bool(_) => Err(E::custom(format!(
            "expected a number, got {}",
            describe(&other)
        ))),
    }
}

fn bool_of<E: Error>(s: Scalar) -> Result<bool, E> {
    match s {
        Scalar::Bool(b) => Ok(b),
        Scalar::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" | "" => Ok(false),
            _ => Err(E::custom(format!("expected a boolean, got string {s:?}"))),
        },
        other => Err(E::custom(format!(
            "expected a boolean, got {}",
            describe(&other)
        ))),
    }
}

/// An integer given as a number or a string; null and "" read as 0.
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Option::<Scalar>::deserialize(d)?.map_or(Ok(0), int_of)
}

/// A float given as a number or a string (YARN prints `"NaN"` for some ratios); null reads
/// as 0.
pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Option::<Scalar>::deserialize(d)?.map_or(Ok(0.0), float_of)
}

/// A boolean given as `true`/`false` or as the strings "true"/"false"; null reads as false.
pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Option::<Scalar>::deserialize(d)?.map_or(Ok(false), bool_of)
}

/// Like [`i64`] for a field that is absent on some objects (leaf-only queue fields):
/// null reads as `None`.
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Option::<Scalar>::deserialize(d)?.map(int_of).transpose()
}

/// Like [`f64`], null reading as `None`.
pub fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<Scalar>::deserialize(d)?.map(float_of).transpose()
}

/// Like [`bool`], null reading as `None`.
pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Option::<Scalar>::deserialize(d)?.map(bool_of).transpose()
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

/// Reads an array, a bare element or null. A visitor rather than an untagged enum, so
/// that an element's own error ("expected an integer, ...") reaches the caller instead
/// of serde's "data did not match any variant".
struct OneOrMany<T>(PhantomData<T>);

macro_rules! one_scalar {
    ($($visit:ident: $t:ty),*) => {$(
        fn $visit<E: Error>(self, v: $t) -> Result<Vec<T>, E> {
            T::deserialize(v.into_deserializer()).map(|t| vec![t])
        }
    )*};
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for OneOrMany<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list, a single element, or null")
    }

    fn visit_unit<E: Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Vec<T>, A::Error> {
        Vec::<T>::deserialize(SeqAccessDeserializer::new(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|t| vec![t])
    }

    one_scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64,
        visit_str: &str, visit_string: String);
}

/// A list given as a JSON array, a single element, or null (empty).
pub fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    d.deserialize_any(OneOrMany(PhantomData))
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

    #[derive(Deserialize, Debug, Default)]
    #[serde(default)]
    struct Opt {
        #[serde(deserialize_with = "super::opt_i64")]
        n: Option<i64>,
        #[serde(deserialize_with = "super::opt_f64")]
        f: Option<f64>,
        #[serde(deserialize_with = "super::opt_bool")]
        b: Option<bool>,
        #[serde(deserialize_with = "super::vec")]
        items: Vec<T>,
    }

    #[test]
    fn optional_numbers_keep_absent_apart_from_zero() {
        let o: Opt = serde_json::from_str(r#"{"n":"7","f":"0.5","b":"true"}"#).unwrap();
        assert_eq!((o.n, o.f, o.b), (Some(7), Some(0.5), Some(true)));
        let o: Opt = serde_json::from_str(r#"{"n":null}"#).unwrap();
        assert_eq!((o.n, o.f, o.b), (None, None, None));
        assert!(serde_json::from_str::<Opt>(r#"{"b":"perhaps"}"#).is_err());
    }

    #[test]
    fn a_bad_list_element_reports_its_own_error() {
        let e = serde_json::from_str::<Opt>(r#"{"items":[{"n":1},{"n":"x"}]}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains(r#"expected an integer, got string "x""#),
            "{e}"
        );
        let e = serde_json::from_str::<Opt>(r#"{"items":{"n":"y"}}"#).unwrap_err();
        assert!(e.to_string().contains(r#"got string "y""#), "{e}");
        let o: Opt = serde_json::from_str(r#"{"items":{"n":3}}"#).unwrap();
        assert_eq!(o.items[0].n, 3);
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
