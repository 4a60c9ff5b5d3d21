//! Application submissions (`POST /ws/v1/cluster/apps`) as the reverse proxy sees them:
//! reading the few fields it needs from a JSON or XML body, choosing a queue by the
//! routing rules, and rewriting only the queue.

use quick_xml::events::Event;
use quick_xml::reader::Reader;
use serde_json::Value;

use crate::config::settings::{RouteMatch, RouteRule};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Xml,
}

/// The fields of an ApplicationSubmissionContext the proxy reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Submission {
    pub application_id: String,
    /// As submitted; empty when the body names none.
    pub queue: String,
    pub tags: Vec<String>,
    pub application_type: String,
}

/// Reads a submission body. `None` when it is neither a JSON object nor well-formed
/// XML: the proxy then forwards it untouched and lets the RM answer.
pub fn read(body: &[u8], content_type: Option<&str>) -> Option<(BodyFormat, Submission)> {
    let format = format_of(body, content_type)?;
    let submission = match format {
        BodyFormat::Json => read_json(body)?,
        BodyFormat::Xml => read_xml(std::str::from_utf8(body).ok()?)?.0,
    };
    Some((format, submission))
}

fn format_of(body: &[u8], content_type: Option<&str>) -> Option<BodyFormat> {
    let ct = content_type.unwrap_or("").to_ascii_lowercase();
    if ct.contains("json") {
        return Some(BodyFormat::Json);
    }
    if ct.contains("xml") {
        return Some(BodyFormat::Xml);
    }
    // No or a generic type: Jersey would sniff nothing, but clients do omit it.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Some(BodyFormat::Json),
        Some(b'<') => Some(BodyFormat::Xml),
        _ => None,
    }
}

/// A submission names no queue of its own when the queue is absent, empty or YARN's
/// `default`: only those are routed.
pub fn names_no_queue(queue: &str) -> bool {
    matches!(queue.trim(), "" | "default" | "root.default")
}

/// The first rule that matches, if the submission may be routed at all. Tags and
/// application types compare case-insensitively, as YARN stores tags in lower case and
/// filters types regardless of case.
pub fn route<'a>(rules: &'a [RouteRule], s: &Submission) -> Option<&'a RouteRule> {
    if !names_no_queue(&s.queue) {
        return None;
    }
    rules.iter().find(|r| match &r.matcher {
        RouteMatch::Tag(tag) => s.tags.iter().any(|t| t.trim().eq_ignore_ascii_case(tag)),
        RouteMatch::ApplicationType(t) => s.application_type.trim().eq_ignore_ascii_case(t),
    })
}

/// `body` with its queue set to `queue`, everything else kept. JSON is re-serialised
/// (same members and values; member order may change); XML is edited in place, byte
/// for byte outside the queue element.
pub fn with_queue(body: &[u8], format: BodyFormat, queue: &str) -> Result<Vec<u8>, String> {
    match format {
        BodyFormat::Json => {
            let mut v: Value =
                serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
            let obj = v
                .as_object_mut()
                .ok_or("the submission is not a JSON object")?;
            obj.insert("queue".into(), Value::String(queue.to_string()));
            serde_json::to_vec(&v).map_err(|e| e.to_string())
        }
        BodyFormat::Xml => {
            let text = std::str::from_utf8(body).map_err(|_| "the XML is not UTF-8")?;
            let (_, place) = read_xml(text).ok_or("the XML is not well-formed")?;
            let element = format!("<queue>{}</queue>", xml_escape(queue));
            let spliced = match place {
                QueuePlace::Content(start, end) => {
                    format!("{}{}{}", &text[..start], xml_escape(queue), &text[end..])
                }
                QueuePlace::Empty(start, end) => {
                    format!("{}{element}{}", &text[..start], &text[end..])
                }
                QueuePlace::AfterRootStart(at) => {
                    format!("{}{element}{}", &text[..at], &text[at..])
                }
                QueuePlace::Nowhere => return Err("the XML has no root element".into()),
            };
            Ok(spliced.into_bytes())
        }
    }
}

fn read_json(body: &[u8]) -> Option<Submission> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let obj = v.as_object()?;
    let text = |key: &str| match obj.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let tags = match obj.get("application-tags") {
        Some(Value::Object(t)) => strings(t.get("tag")),
        other => strings(other),
    };
    Some(Submission {
        application_id: text("application-id"),
        queue: text("queue"),
        tags,
        application_type: text("application-type"),
    })
}

/// A string, a list of strings, or nothing.
fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Where the top-level `<queue>` is, in byte offsets of the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QueuePlace {
    /// `<queue>TEXT</queue>`: the span of TEXT.
    Content(usize, usize),
    /// `<queue/>`: the span of the whole element.
    Empty(usize, usize),
    /// No queue element: just after the root's start tag.
    AfterRootStart(usize),
    Nowhere,
}

fn read_xml(text: &str) -> Option<(Submission, QueuePlace)> {
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<String> = Vec::new();
    let mut buf = String::new();
    let mut s = Submission::default();
    let mut place = QueuePlace::Nowhere;
    let mut queue_start = 0;
    let pos = |r: &Reader<&[u8]>| usize::try_from(r.buffer_position()).unwrap_or(usize::MAX);
    loop {
        let before = pos(&reader);
        let event = reader.read_event().ok()?;
        let after = pos(&reader);
        match event {
            Event::Start(e) => {
                stack.push(e.local_name().into_inner().to_string());
                buf.clear();
                match stack.len() {
                    1 => place = QueuePlace::AfterRootStart(after),
                    2 if stack[1] == "queue" => queue_start = after,
                    _ => {}
                }
            }
            Event::Empty(e) => {
                if stack.len() == 1 && e.local_name().into_inner() == "queue" {
                    place = QueuePlace::Empty(before, after);
                }
            }
            Event::End(_) => {
                let value = std::mem::take(&mut buf);
                match (stack.len(), stack.get(1).map(String::as_str)) {
                    (2, Some("queue")) => {
                        place = QueuePlace::Content(queue_start, before);
                        s.queue = value;
                    }
                    (2, Some("application-id")) => s.application_id = value,
                    (2, Some("application-type")) => s.application_type = value,
                    (3, Some("application-tags")) if stack[2] == "tag" => s.tags.push(value),
                    _ => {}
                }
                stack.pop();
            }
            Event::Text(t) => buf.push_str(&t.xml10_content()),
            Event::CData(c) => buf.push_str(&c.xml10_content()),
            Event::GeneralRef(r) => {
                let resolved = if r.is_char_ref() {
                    r.resolve_char_ref().ok().flatten().map(String::from)
                } else {
                    quick_xml::escape::resolve_predefined_entity(&r).map(str::to_string)
                };
                buf.push_str(&resolved?);
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if !stack.is_empty() {
        return None;
    }
    Some((s, place))
}

/// Text for an XML element's content.
pub(super) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<RouteRule> {
        vec![
            RouteRule {
                matcher: RouteMatch::Tag("tpch".into()),
                queue: "root.short".into(),
            },
            RouteRule {
                matcher: RouteMatch::ApplicationType("SPARK".into()),
                queue: "root.long".into(),
            },
        ]
    }

    // ResourceManagerRest.md's XML submission example, trimmed to the fields read.
    const XML: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<application-submission-context>
  <application-id>application_1404204891930_0002</application-id>
  <application-name>test</application-name>
  <queue>testqueue</queue>
  <priority>3</priority>
  <am-container-spec><commands><command>java -Xmx10m 1&gt;&lt;LOG_DIR&gt;/AppMaster.stdout</command></commands></am-container-spec>
  <application-type>YARN</application-type>
  <application-tags>
    <tag>tag 2</tag>
    <tag>tag1</tag>
  </application-tags>
</application-submission-context>"#;

    #[test]
    fn the_documented_xml_submission_is_read() {
        let (format, s) = read(XML.as_bytes(), Some("application/xml")).unwrap();
        assert_eq!(format, BodyFormat::Xml);
        assert_eq!(s.application_id, "application_1404204891930_0002");
        assert_eq!(s.queue, "testqueue");
        assert_eq!(s.application_type, "YARN");
        assert_eq!(s.tags, ["tag 2", "tag1"]);
    }

    #[test]
    fn xml_queue_rewrites_touch_only_the_queue() {
        let out = with_queue(XML.as_bytes(), BodyFormat::Xml, "a&b").unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            XML.replace("<queue>testqueue</queue>", "<queue>a&amp;b</queue>")
        );
        assert_eq!(read(out.as_bytes(), None).unwrap().1.queue, "a&b");

        let empty = XML.replace("<queue>testqueue</queue>", "<queue/>");
        let out = with_queue(empty.as_bytes(), BodyFormat::Xml, "short").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            XML.replace("testqueue", "short")
        );

        let none = XML.replace("<queue>testqueue</queue>", "");
        let out =
            String::from_utf8(with_queue(none.as_bytes(), BodyFormat::Xml, "q").unwrap()).unwrap();
        assert!(out.contains("<application-submission-context><queue>q</queue>\n"));
        assert_eq!(read(out.as_bytes(), None).unwrap().1.queue, "q");
    }

    #[test]
    fn json_submissions_are_read_in_every_tag_shape_and_rewritten() {
        let j = br#"{"application-id":"application_1_0001","application-tags":{"tag":"TPCH"},
                    "application-type":"MAPREDUCE","resource":{"memory":1024,"vCores":1}}"#;
        let (format, s) = read(j, None).unwrap();
        assert_eq!((format, s.queue.as_str()), (BodyFormat::Json, ""));
        assert_eq!(s.tags, ["TPCH"]);
        let rules = rules();
        let rule = route(&rules, &s).unwrap();
        assert_eq!(rule.queue, "root.short");
        let out = with_queue(j, format, &rule.queue).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let before: Value = serde_json::from_slice(j).unwrap();
        let mut expected = before.clone();
        expected["queue"] = Value::from("root.short");
        assert_eq!(v, expected);

        let j = br#"{"application-tags":{"tag":["a","tpch"]},"queue":"default"}"#;
        assert_eq!(
            read(j, Some("application/json")).unwrap().1.tags,
            ["a", "tpch"]
        );
    }

    #[test]
    fn only_submissions_without_a_queue_of_their_own_are_routed() {
        let mut s = Submission {
            application_id: "application_1_0001".into(),
            queue: "default".into(),
            tags: vec!["x".into()],
            application_type: "spark".into(),
        };
        assert_eq!(route(&rules(), &s).unwrap().queue, "root.long");
        s.tags.push("tpch".into());
        assert_eq!(
            route(&rules(), &s).unwrap().queue,
            "root.short",
            "first rule wins"
        );
        s.queue = "root.etl".into();
        assert!(route(&rules(), &s).is_none(), "an explicit queue is kept");
        s.queue = " ".into();
        assert!(route(&rules(), &s).is_some());
        s.application_type = "MAPREDUCE".into();
        s.tags.clear();
        assert!(route(&rules(), &s).is_none());
    }

    #[test]
    fn garbage_is_not_a_submission() {
        assert!(read(b"", None).is_none());
        assert!(read(b"queue=a", Some("application/x-www-form-urlencoded")).is_none());
        assert!(read(b"<a><b></a>", Some("application/xml")).is_none());
        assert!(read(b"[1]", Some("application/json")).is_none());
        assert!(with_queue(b"[1]", BodyFormat::Json, "q").is_err());
    }
}
