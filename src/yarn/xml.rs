//! Reading the ResourceManager's XML answers into the same DTOs as its JSON.
//!
//! Jersey writes both formats from the same JAXB objects, so the XML is turned into the
//! `serde_json::Value` the JSON endpoint would have sent and read by the same DTO code
//! and the same tolerant repair ([`super::tolerant`]):
//!
//! - the root element is the top-level key (`<apps>` is `{"apps":..}`), unless the DTO
//!   has no field of that name: then the document is one Jersey prints without its root
//!   in JSON (`<appstate>` is `{"state":..}`, `<nodeLabelsInfo>` is `{"nodeLabelInfo":..}`);
//! - child elements are object members, repeated siblings an array (a single one stays
//!   an object, which `lenient::vec` reads as a list of one);
//! - a text-only element is a string (numbers too: `lenient` reads them);
//! - attributes are members by their local name, so JAXB's `xsi:type` on the scheduler
//!   and its queues is the JSON's `"type"`; namespace declarations are dropped;
//! - an empty element (`<apps/>`, `<diagnostics></diagnostics>`) is `null`, and reads as
//!   the empty value of whatever the DTO expects there: `None`, `""`, an empty list or a
//!   struct of defaults. XML cannot tell these apart, so the reader does not guess.
//!
//! Nesting is bounded (as serde_json bounds JSON's) and nothing recurses on the input
//! while it is parsed; only entities XML predefines are expanded.

use std::cell::Cell;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserializer, forward_to_deserialize_any};
use serde_json::{Map, Value};

use super::tolerant::{self, Parsed};

/// Deepest element nesting accepted: serde_json's own limit for JSON.
pub const MAX_DEPTH: usize = 128;

/// Why a body could not be read as XML.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("not UTF-8 XML")]
    NotUtf8,
    #[error("malformed XML at byte {position}: {reason}")]
    Malformed { position: u64, reason: String },
    #[error("elements nested deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("no root element")]
    NoRoot,
    #[error("an HTML page, not an XML document")]
    Html,
}

/// Reads an XML body as `T`, repairing what does not fit as the JSON reader does.
pub fn decode<T: DeserializeOwned + Default>(
    bytes: &[u8],
    source: &str,
) -> Result<Parsed<T>, Error> {
    let (root, content) = to_value(bytes)?;
    let value = if struct_fields::<T>().contains(&root.as_str()) {
        let mut m = Map::new();
        m.insert(root, content);
        Value::Object(m)
    } else {
        content
    };
    Ok(tolerant::from_value_with(value, source, read::<T>))
}

/// `T` from a value made by [`to_value`]: `null` (an empty element) reads as the empty
/// value of the type asked for.
pub fn read<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(Lax(value))
}

/// An element being read: its name, members so far and text.
struct Open {
    name: String,
    members: Map<String, Value>,
    text: String,
}

impl Open {
    fn new(e: &BytesStart<'_>, position: u64) -> Result<Open, Error> {
        let mut members = Map::new();
        for attr in e.attributes() {
            let attr = attr.map_err(|err| Error::Malformed {
                position,
                reason: err.to_string(),
            })?;
            // Namespace declarations, and `xsi:nil` (an empty element reads as null anyway).
            let nil = attr.key.prefix().is_some() && attr.key.local_name().into_inner() == "nil";
            if attr.key.as_namespace_binding().is_some() || nil {
                continue;
            }
            let value = attr
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|err| Error::Malformed {
                    position,
                    reason: err.to_string(),
                })?;
            let name = attr.key.local_name().into_inner().to_string();
            members.insert(name, Value::String(value.into_owned()));
        }
        Ok(Open {
            name: e.local_name().into_inner().to_string(),
            members,
            text: String::new(),
        })
    }

    fn close(self) -> (String, Value) {
        let value = if !self.members.is_empty() {
            // Text beside child elements is layout (JAXB mixes none).
            Value::Object(self.members)
        } else if self.text.trim().is_empty() {
            Value::Null
        } else {
            Value::String(self.text)
        };
        (self.name, value)
    }
}

fn add_member(members: &mut Map<String, Value>, name: String, value: Value) {
    match members.get_mut(&name) {
        // An element never reads as an array itself, so an array is repeated siblings.
        Some(Value::Array(items)) => items.push(value),
        Some(first) => {
            let first = first.take();
            members.insert(name, Value::Array(vec![first, value]));
        }
        None => {
            members.insert(name, value);
        }
    }
}

/// The root element's name and its content as JSON would carry it (see the module doc).
pub fn to_value(bytes: &[u8]) -> Result<(String, Value), Error> {
    let text = std::str::from_utf8(bytes).map_err(|_| Error::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<(String, Value)> = None;
    loop {
        let position = reader.buffer_position();
        let malformed = |reason: String| Error::Malformed { position, reason };
        let event = reader.read_event().map_err(|e| malformed(e.to_string()))?;
        let closed = match event {
            Event::Start(e) | Event::Empty(e) if root.is_some() => {
                let name = e.name().into_inner().to_string();
                return Err(malformed(format!("a second root element <{name}>")));
            }
            Event::Start(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Error::TooDeep);
                }
                stack.push(Open::new(&e, position)?);
                None
            }
            Event::Empty(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Error::TooDeep);
                }
                Some(Open::new(&e, position)?.close())
            }
            Event::End(_) => stack.pop().map(Open::close),
            Event::Text(t) => {
                push_text(&mut stack, &t.xml10_content(), position)?;
                None
            }
            Event::CData(c) => {
                push_text(&mut stack, &c.xml10_content(), position)?;
                None
            }
            Event::GeneralRef(r) => {
                let resolved = if r.is_char_ref() {
                    r.resolve_char_ref()
                        .map_err(|e| malformed(e.to_string()))?
                        .map(String::from)
                } else {
                    quick_xml::escape::resolve_predefined_entity(&r).map(str::to_string)
                };
                let name: &str = r.as_ref();
                let resolved =
                    resolved.ok_or_else(|| malformed(format!("unknown entity &{name};")))?;
                push_text(&mut stack, &resolved, position)?;
                None
            }
            Event::DocType(d) if d.xml10_content().trim_start().starts_with("html") => {
                return Err(Error::Html);
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => None,
        };
        if let Some((name, value)) = closed {
            match stack.last_mut() {
                Some(parent) => add_member(&mut parent.members, name, value),
                None if name.eq_ignore_ascii_case("html") => return Err(Error::Html),
                None => root = Some((name, value)),
            }
        }
    }
    if let Some(open) = stack.last() {
        return Err(Error::Malformed {
            position: reader.buffer_position(),
            reason: format!("<{}> is not closed", open.name),
        });
    }
    root.ok_or(Error::NoRoot)
}

fn push_text(stack: &mut [Open], text: &str, position: u64) -> Result<(), Error> {
    match stack.last_mut() {
        Some(open) => open.text.push_str(text),
        // Only layout may sit outside the root.
        None if text.trim().is_empty() => {}
        None => {
            return Err(Error::Malformed {
                position,
                reason: "text outside the root element".into(),
            });
        }
    }
    Ok(())
}

/// The member names a derived struct reads (empty for anything else), found by letting
/// it read a deserializer that only records them.
fn struct_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Recorder<'a>(&'a Cell<&'static [&'static str]>);

    impl<'de> Deserializer<'de> for Recorder<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.set(fields);
            Err(de::Error::custom("recorded"))
        }

        forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
            enum identifier ignored_any
        }
    }

    let fields = Cell::new(&[][..]);
    let _ = T::deserialize(Recorder(&fields));
    fields.get()
}

/// A deserializer over a [`to_value`] value in which `null` (an empty element) is the
/// empty value of the type asked for; everything else reads as serde_json reads it.
struct Lax<'a>(&'a Value);

impl<'de> Deserializer<'de> for Lax<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Object(m) => v.visit_map(LaxMap {
                iter: m.iter(),
                value: None,
            }),
            Value::Array(a) => v.visit_seq(LaxSeq(a.iter())),
            scalar => scalar.deserialize_any(v),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_borrowed_str(""),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_seq(LaxSeq(std::slice::Iter::default())),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_map(de::value::MapDeserializer::<_, Self::Error>::new(
                std::iter::empty::<(&str, &str)>(),
            )),
            _ => self.deserialize_any(v),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_map(v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        // The DTOs' enums are unit variants named by a string.
        self.0.deserialize_enum(name, variants, v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Self::Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct tuple tuple_struct identifier
    }
}

struct LaxMap<'a> {
    iter: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de> MapAccess<'de> for LaxMap<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.iter.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(Lax(v)),
            None => Err(de::Error::custom("a map value without its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct LaxSeq<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for LaxSeq<'de> {
    type Error = serde_json::Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        self.0.next().map(|v| seed.deserialize(Lax(v))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// `t` as JSON with every empty list, empty object and null left out: what XML keeps of
/// it, since an empty list, an absent list and an empty object are all one empty (or
/// absent) element there. Tests compare what the two formats read through this.
#[cfg(test)]
pub(super) fn comparable<T: serde::Serialize>(t: &T) -> Value {
    fn prune(v: Value) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Array(a) => {
                let a: Vec<Value> = a.into_iter().filter_map(prune).collect();
                (!a.is_empty()).then_some(Value::Array(a))
            }
            Value::Object(m) => {
                let m: Map<String, Value> = m
                    .into_iter()
                    .filter_map(|(k, v)| prune(v).map(|v| (k, v)))
                    .collect();
                (!m.is_empty()).then_some(Value::Object(m))
            }
            other => Some(other),
        }
    }
    serde_json::to_value(t)
        .ok()
        .and_then(prune)
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yarn::dto::*;
    use serde_json::json;

    fn value(xml: &str) -> (String, Value) {
        to_value(xml.as_bytes()).unwrap_or_else(|e| panic!("{xml}: {e}"))
    }

    fn parse<T: DeserializeOwned + Default>(xml: &str) -> T {
        let p = decode::<T>(xml.as_bytes(), "test").unwrap_or_else(|e| panic!("{xml}: {e}"));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        p.value
    }

    #[test]
    fn elements_become_the_json_shape() {
        let (root, v) = value(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <apps>
              <app><id>a1</id><diagnostics></diagnostics><tags>x&lt;y&#38;</tags></app>
              <app><id>a2</id><note><![CDATA[<b>]]></note><empty/></app>
            </apps>"#,
        );
        assert_eq!(root, "apps");
        assert_eq!(
            v,
            json!({"app": [
                {"id": "a1", "diagnostics": null, "tags": "x<y&"},
                {"id": "a2", "note": "<b>", "empty": null}
            ]})
        );
        assert_eq!(value("<apps/>"), ("apps".into(), Value::Null));
        let nil =
            r#"<a xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><b xsi:nil="true"/></a>"#;
        assert_eq!(value(nil).1, json!({"b": null}));
        assert_eq!(value("\u{feff}<a>1</a>"), ("a".into(), json!("1")));
    }

    #[test]
    fn xsi_type_is_the_json_type_member() {
        let (_, v) = value(
            r#"<scheduler><schedulerInfo xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="capacityScheduler">
              <queues><queue xsi:type="capacitySchedulerLeafQueueInfo"><queueName>a</queueName></queue></queues>
            </schedulerInfo></scheduler>"#,
        );
        assert_eq!(
            v,
            json!({"schedulerInfo": {"type": "capacityScheduler",
                "queues": {"queue": {"type": "capacitySchedulerLeafQueueInfo", "queueName": "a"}}}})
        );
    }

    #[test]
    fn empty_elements_read_as_the_empty_value_of_their_field() {
        let r: AppsResponse = parse("<apps/>");
        assert_eq!(r.apps, None);
        let r: AppsResponse = parse(
            "<apps><app><id>application_1_0001</id><diagnostics/><allocatedMB/>\
             <resourceRequests/><state>RUNNING</state></app></apps>",
        );
        let app = &r.apps.as_ref().unwrap().app[0];
        assert_eq!((app.diagnostics.as_str(), app.allocated_mb), ("", 0));
        assert_eq!(app.resource_requests, Some(Vec::new()));
        assert_eq!(app.state, YarnApplicationState::Running);
        let r: SchedulerResponse = parse(
            "<scheduler><schedulerInfo><queueName>root</queueName><users/><health/></schedulerInfo></scheduler>",
        );
        let root = r.scheduler.scheduler_info;
        assert_eq!(root.users, None);
        assert_eq!(root.health, None);
    }

    #[test]
    fn unwrapped_documents_lose_their_root_as_in_json() {
        let s: AppStateInfo = parse("<appstate><state>KILLED</state></appstate>");
        assert_eq!(s.state, "KILLED");
        let l: NodeLabelsInfo = parse(
            "<nodeLabelsInfo><nodeLabelInfo><name>x</name><exclusivity>false</exclusivity>\
             </nodeLabelInfo></nodeLabelsInfo>",
        );
        assert_eq!(l.node_label_info[0].name, "x");
        assert!(!l.node_label_info[0].exclusivity);
        let e: RemoteExceptionResponse = parse(
            "<RemoteException><exception>NotFoundException</exception>\
             <message>app not found</message><javaClassName>x.NotFoundException</javaClassName>\
             </RemoteException>",
        );
        assert_eq!(e.remote_exception.exception, "NotFoundException");
    }

    #[test]
    fn hostile_or_broken_input_is_an_error_not_a_panic() {
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert_eq!(to_value(deep.as_bytes()), Err(Error::TooDeep));
        let ok = "<a>".repeat(MAX_DEPTH) + &"</a>".repeat(MAX_DEPTH);
        assert!(to_value(ok.as_bytes()).is_ok());
        let bad: &[&[u8]] = &[
            b"",
            b"   ",
            b"<a>",
            b"<a></b>",
            b"<a/><b/>",
            b"x<a/>",
            b"<a>&bogus;</a>",
            b"<a>&#xD800;</a>",
            b"<a \xff/>",
            b"<!DOCTYPE html><html><body>standby</body></html>",
            b"<html><body>x</body></html>",
        ];
        for b in bad {
            assert!(to_value(b).is_err(), "{:?}", String::from_utf8_lossy(b));
        }
    }

    #[test]
    fn only_derived_structs_report_fields() {
        assert_eq!(struct_fields::<AppsResponse>(), ["apps"]);
        assert!(struct_fields::<Vec<AppInfo>>().is_empty());
        assert!(struct_fields::<String>().is_empty());
    }
}
