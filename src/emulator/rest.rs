//! Serving YARN's REST shapes: JSON by default, XML on `Accept: application/xml` (JAXB's
//! layout: a JSON array becomes repeated elements, `type` becomes `xsi:type`), and errors
//! as `RemoteException`.

use axum::body::Bytes;
use axum::http::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::yarn::dto::{RemoteException, RemoteExceptionResponse};

use super::state::RmError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Xml,
}

impl Format {
    /// XML when the client prefers it: `application/xml` listed before any JSON type.
    pub fn from_headers(headers: &HeaderMap) -> Format {
        let accept = headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        let pos = |needle: &str| accept.find(needle);
        match (pos("xml"), pos("json")) {
            (Some(x), Some(j)) if x < j => Format::Xml,
            (Some(_), None) => Format::Xml,
            _ => Format::Json,
        }
    }
}

/// One REST reply, rendered when built so that no state lock is held while it is sent.
pub struct Reply {
    pub format: Format,
    pub status: StatusCode,
    pub body: Result<String, String>,
    pub location: Option<String>,
}

impl Reply {
    /// `root` names the XML root element: a JSON body `{root: inner}` is written as
    /// `<root>inner</root>`; any other body is written whole inside `<root>`.
    pub fn ok<T: Serialize>(format: Format, root: &'static str, body: &T) -> Reply {
        let rendered = match format {
            // Straight to text: going through a Value would double the work for
            // large lists such as /apps.
            Format::Json => serde_json::to_string(body),
            Format::Xml => serde_json::to_value(body).map(|v| to_xml(root, &v)),
        };
        Reply {
            format,
            status: StatusCode::OK,
            body: rendered.map_err(|e| e.to_string()),
            location: None,
        }
    }

    pub fn with_status(mut self, status: StatusCode) -> Reply {
        self.status = status;
        self
    }

    pub fn with_location(mut self, location: String) -> Reply {
        self.location = Some(location);
        self
    }
}

/// An empty reply (`202` of a submission, `200` of a container signal).
pub fn empty(status: StatusCode, location: Option<String>) -> Response {
    let mut r = status.into_response();
    if let Some(l) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        r.headers_mut().insert(LOCATION, l);
    }
    r
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let body = match self.body {
            Ok(b) => b,
            Err(e) => {
                return RestError::internal(format!("serializing the response: {e}"))
                    .into_format(self.format)
                    .into_response();
            }
        };
        let ctype = match self.format {
            Format::Json => "application/json",
            Format::Xml => "application/xml",
        };
        let mut r = (self.status, body).into_response();
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
        if let Some(l) = self.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            r.headers_mut().insert(LOCATION, l);
        }
        r
    }
}

/// `<?xml ...?><root>...</root>` for a JSON value in Jersey's natural notation.
pub fn to_xml(root: &str, value: &Value) -> String {
    let content = match value {
        Value::Object(m) if m.len() == 1 && m.contains_key(root) => &m[root],
        v => v,
    };
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>");
    write_element(&mut out, root, content);
    out
}

fn write_element(out: &mut String, name: &str, v: &Value) {
    match v {
        Value::Array(items) => {
            for item in items {
                write_element(out, name, item);
            }
        }
        Value::Null => {
            out.push('<');
            out.push_str(name);
            out.push_str("/>");
        }
        Value::Object(map) => {
            out.push('<');
            out.push_str(name);
            // JAXB writes the polymorphic queue and scheduler types as xsi:type.
            let typed = matches!(name, "schedulerInfo" | "queue");
            let mut lifted = false;
            if typed && let Some(Value::String(t)) = map.get("type") {
                if name == "schedulerInfo" {
                    out.push_str(" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"");
                }
                out.push_str(" xsi:type=\"");
                escape_into(out, t);
                out.push('"');
                lifted = true;
            }
            out.push('>');
            for (k, child) in map {
                if lifted && k == "type" {
                    continue;
                }
                write_element(out, k, child);
            }
            out.push_str("</");
            out.push_str(name);
            out.push('>');
        }
        scalar => {
            out.push('<');
            out.push_str(name);
            out.push('>');
            match scalar {
                Value::String(s) => escape_into(out, s),
                other => out.push_str(&other.to_string()),
            }
            out.push_str("</");
            out.push_str(name);
            out.push('>');
        }
    }
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
}

/// A YARN web service exception.
#[derive(Debug, Clone, PartialEq)]
pub struct RestError {
    pub status: StatusCode,
    pub exception: &'static str,
    pub java_class: &'static str,
    pub message: String,
    pub format: Format,
}

impl RestError {
    pub fn bad_request(message: impl Into<String>) -> RestError {
        RestError {
            status: StatusCode::BAD_REQUEST,
            exception: "BadRequestException",
            java_class: "org.apache.hadoop.yarn.webapp.BadRequestException",
            message: message.into(),
            format: Format::Json,
        }
    }

    pub fn not_found(message: impl Into<String>) -> RestError {
        RestError {
            status: StatusCode::NOT_FOUND,
            exception: "NotFoundException",
            java_class: "org.apache.hadoop.yarn.webapp.NotFoundException",
            message: message.into(),
            format: Format::Json,
        }
    }

    pub fn unsupported_media(message: impl Into<String>) -> RestError {
        RestError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            exception: "WebApplicationException",
            java_class: "javax.ws.rs.WebApplicationException",
            message: message.into(),
            format: Format::Json,
        }
    }

    pub fn internal(message: impl Into<String>) -> RestError {
        RestError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            exception: "WebApplicationException",
            java_class: "javax.ws.rs.WebApplicationException",
            message: message.into(),
            format: Format::Json,
        }
    }

    pub fn into_format(mut self, format: Format) -> RestError {
        self.format = format;
        self
    }
}

impl From<RmError> for RestError {
    fn from(e: RmError) -> RestError {
        match e {
            RmError::NotFound(m) => RestError::not_found(m),
            RmError::BadRequest(m) => RestError::bad_request(m),
        }
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let body = RemoteExceptionResponse {
            remote_exception: RemoteException {
                exception: self.exception.into(),
                message: self.message,
                java_class_name: self.java_class.into(),
            },
        };
        Reply::ok(self.format, "RemoteException", &body)
            .with_status(self.status)
            .into_response()
    }
}

/// Parses a JSON request body; anything else is a clear 4xx.
pub fn json_body<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes) -> Result<T, RestError> {
    let ctype = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ctype.contains("xml") {
        return Err(RestError::unsupported_media(
            "the emulator accepts JSON request bodies only (Content-Type: application/json)",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| RestError::bad_request(format!("invalid JSON body: {e}")))
}

/// `a=1&b=x%2Cy` into pairs, percent- and plus-decoded.
pub fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    raw.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// A form field: `+` is a space, then `%XX` escapes.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn xml_follows_jaxb_layout() {
        let v = json!({"apps": {"app": [{"id": "a1", "tags": "x<y"}, {"id": "a2"}]}});
        assert_eq!(
            to_xml("apps", &v),
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><apps><app><id>a1</id><tags>x&lt;y</tags></app><app><id>a2</id></app></apps>"
        );
        assert!(to_xml("apps", &json!({"apps": null})).ends_with("<apps/>"));
        let s = json!({"scheduler": {"schedulerInfo": {"type": "capacityScheduler", "queues": {"queue": [{"type": "capacitySchedulerLeafQueueInfo", "capacity": 50.0}]}}}});
        let x = to_xml("scheduler", &s);
        assert!(x.contains("<schedulerInfo xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"capacityScheduler\">"), "{x}");
        assert!(x.contains("<queue xsi:type=\"capacitySchedulerLeafQueueInfo\"><capacity>50.0</capacity></queue>"), "{x}");
        // Unwrapped JSON bodies go whole inside the root.
        assert!(
            to_xml("appstate", &json!({"state": "KILLED"}))
                .ends_with("<appstate><state>KILLED</state></appstate>")
        );
    }

    #[test]
    fn accept_header_picks_the_format() {
        let mut h = HeaderMap::new();
        assert_eq!(Format::from_headers(&h), Format::Json);
        h.insert(ACCEPT, HeaderValue::from_static("application/xml"));
        assert_eq!(Format::from_headers(&h), Format::Xml);
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, application/xml"),
        );
        assert_eq!(Format::from_headers(&h), Format::Json);
    }

    #[test]
    fn query_strings_decode() {
        let q = query_pairs(Some(
            "states=RUNNING%2CACCEPTED&applicationTags=preemptor.class%3Dlong&x&y=a+b&bad=%zz%4",
        ));
        assert_eq!(q[0], ("states".into(), "RUNNING,ACCEPTED".into()));
        assert_eq!(q[1].1, "preemptor.class=long");
        assert_eq!(q[2], ("x".into(), "".into()));
        assert_eq!(q[3].1, "a b");
        assert_eq!(q[4].1, "%zz%4");
    }
}
