//! Hadoop's `<configuration>` format, read the way `org.apache.hadoop.conf.Configuration`
//! reads it: `<property>` with `<name>`, `<value>`, `<final>` (or the short attribute
//! form), `${var}` expansion, final properties across resources, and XInclude.
//!
//! Where Hadoop silently drops something, this reader reports it instead: unknown
//! elements and attributes, a property without a name, text where none belongs, include
//! loops. Variables are expanded when a value is read ([`Configuration::get`]); Hadoop
//! leaves an unresolvable `${var}` in place, this reader makes reading that value an
//! error, so a key nobody reads never fails a load.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;

use super::error::{ConfigError, ConfigWarning, Location};

/// Hadoop's `Configuration.MAX_SUBST`: substitutions allowed while expanding one value.
pub const MAX_SUBST: usize = 20;
/// Nesting depth of `xi:include` beyond which a chain of distinct files is refused.
pub const MAX_INCLUDE_DEPTH: usize = 32;
pub const XINCLUDE_NS: &str = "http://www.w3.org/2001/XInclude";

/// Where `${env.NAME}` looks. Tests inject a fixed map rather than touching the
/// process environment.
#[derive(Clone, Debug, Default)]
pub enum Env {
    #[default]
    Process,
    Fixed(HashMap<String, String>),
}

impl Env {
    /// `Err(())` when the variable is set but not UTF-8.
    fn var(&self, name: &str) -> Result<Option<String>, ()> {
        match self {
            Env::Process => match std::env::var(name) {
                Ok(v) => Ok(Some(v)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => Err(()),
            },
            Env::Fixed(map) => Ok(map.get(name).cloned()),
        }
    }
}

#[derive(Clone, Debug)]
struct Property {
    value: String,
    location: Location,
}

/// A set of properties loaded from one or more resources, in order.
#[derive(Clone, Debug, Default)]
pub struct Configuration {
    props: BTreeMap<String, Property>,
    finals: HashMap<String, Location>,
    warnings: Vec<ConfigWarning>,
    env: Env,
}

impl Configuration {
    /// An empty configuration whose `${env.*}` reads the process environment.
    pub fn new() -> Configuration {
        Configuration::default()
    }

    /// An empty configuration whose `${env.*}` reads `env` only.
    pub fn with_env(env: HashMap<String, String>) -> Configuration {
        Configuration {
            env: Env::Fixed(env),
            ..Configuration::default()
        }
    }

    /// Loads a file; relative includes resolve against its directory. On error nothing
    /// of the file is applied.
    pub fn add_file(&mut self, path: impl AsRef<Path>) -> Result<(), ConfigError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let canonical = std::fs::canonicalize(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name: Arc<str> = path.display().to_string().into();
        let text = decode(&name, &bytes)?;
        let mut items = Vec::new();
        let mut chain = vec![canonical];
        parse_document(&name, Some(path), text, &mut chain, &mut items)?;
        self.apply(items);
        Ok(())
    }

    /// Loads text that did not come from a file (an embedded default); `name` labels
    /// its locations. Relative includes are errors.
    pub fn add_str(&mut self, name: &str, text: &str) -> Result<(), ConfigError> {
        self.add_bytes(name, text.as_bytes())
    }

    /// Like [`Configuration::add_str`], for bytes that may not be UTF-8.
    pub fn add_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<(), ConfigError> {
        let name: Arc<str> = name.into();
        let text = decode(&name, bytes)?;
        let mut items = Vec::new();
        parse_document(&name, None, text, &mut Vec::new(), &mut items)?;
        self.apply(items);
        Ok(())
    }

    fn apply(&mut self, items: Vec<ParsedProperty>) {
        for item in items {
            if let Some(final_at) = self.finals.get(&item.name) {
                let current = self.props.get(&item.name).map(|p| p.value.as_str());
                if item.value.is_some() && item.value.as_deref() != current {
                    self.warnings.push(ConfigWarning::FinalOverride {
                        key: item.name,
                        final_at: final_at.clone(),
                        attempted_at: item.location,
                    });
                }
                continue;
            }
            if item.is_final {
                self.finals.insert(item.name.clone(), item.location.clone());
            }
            // Hadoop stores no property for an empty value, so it overrides nothing.
            if let Some(value) = item.value {
                self.props.insert(
                    item.name,
                    Property {
                        value,
                        location: item.location,
                    },
                );
            }
        }
    }

    /// The value with `${var}` expanded, as Hadoop's `get`; `None` when unset.
    pub fn get(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.props.get(key) {
            None => Ok(None),
            Some(p) => self.substitute(key, &p.value, &p.location).map(Some),
        }
    }

    /// The value as written, without expansion.
    pub fn get_raw(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(|p| p.value.as_str())
    }

    /// Where the value in effect was set.
    pub fn location(&self, key: &str) -> Option<&Location> {
        self.props.get(key).map(|p| &p.location)
    }

    pub fn is_final(&self, key: &str) -> bool {
        self.finals.contains_key(key)
    }

    /// Keys starting with `prefix`, in sorted order.
    pub fn keys_with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.props
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .map(|(k, _)| k.as_str())
            .take_while(move |k| k.starts_with(prefix))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.props.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.props.len()
    }

    pub fn is_empty(&self) -> bool {
        self.props.is_empty()
    }

    /// Overrides of final properties seen while loading.
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }

    /// Hadoop's `substituteVars`: repeatedly replaces the innermost `${var}` with a
    /// property's raw value or an environment variable, at most [`MAX_SUBST`] times.
    fn substitute(
        &self,
        key: &str,
        expr: &str,
        location: &Location,
    ) -> Result<String, ConfigError> {
        let mut eval = expr.to_string();
        for _ in 0..MAX_SUBST {
            let Some((start, end)) = find_sub_variable(&eval) else {
                return Ok(eval);
            };
            let var = &eval[start..end];
            let mut val = match var.strip_prefix("env.") {
                Some(spec) if !spec.is_empty() => self.env_value(key, var, spec, location)?,
                _ => None,
            };
            if val.is_none() {
                val = self.get_raw(var).map(str::to_string);
            }
            let Some(val) = val else {
                return Err(ConfigError::UnresolvedVariable {
                    key: key.to_string(),
                    var: var.to_string(),
                    location: location.clone(),
                });
            };
            let reference = &eval[start - 2..end + 1];
            if val.contains(reference) {
                return Err(ConfigError::SelfReferentialVariable {
                    key: key.to_string(),
                    var: var.to_string(),
                    location: location.clone(),
                });
            }
            eval = format!("{}{}{}", &eval[..start - 2], val, &eval[end + 1..]);
        }
        Err(ConfigError::SubstitutionDepth {
            key: key.to_string(),
            location: location.clone(),
        })
    }

    /// `${env.NAME}`, `${env.NAME:-default}` (default when unset or empty) and
    /// `${env.NAME-default}` (default when unset), as Hadoop 3 reads them.
    fn env_value(
        &self,
        key: &str,
        var: &str,
        spec: &str,
        location: &Location,
    ) -> Result<Option<String>, ConfigError> {
        let lookup = |name: &str| {
            self.env.var(name).map_err(|()| ConfigError::EnvNotUnicode {
                key: key.to_string(),
                var: var.to_string(),
                location: location.clone(),
            })
        };
        let bytes = spec.as_bytes();
        for (i, &c) in bytes.iter().enumerate() {
            if c == b':' && bytes.get(i + 1) == Some(&b'-') {
                let v = lookup(&spec[..i])?;
                return Ok(match v {
                    Some(v) if !v.is_empty() => Some(v),
                    _ => Some(spec[i + 2..].to_string()),
                });
            }
            if c == b'-' {
                let v = lookup(&spec[..i])?;
                return Ok(Some(v.unwrap_or_else(|| spec[i + 1..].to_string())));
            }
        }
        lookup(spec)
    }
}

/// Hadoop's `findSubVariable`: the byte range of the name inside the first `${name}`
/// whose name holds no `$`, `}` or space. The special characters are ASCII, so byte
/// offsets are always on character boundaries.
fn find_sub_variable(eval: &str) -> Option<(usize, usize)> {
    let b = eval.as_bytes();
    let mut match_start = 1;
    'outer: loop {
        let left = match_start + b.get(match_start..)?.iter().position(|&c| c == b'{')?;
        if left + 2 >= b.len() {
            return None;
        }
        if b[left - 1] != b'$' {
            match_start = left + 1;
            continue;
        }
        let start = left + 1;
        let mut len = 0;
        for (i, &c) in b.iter().enumerate().skip(start) {
            match c {
                b'}' if len > 0 => return Some((start, start + len)),
                b'}' | b' ' | b'$' => {
                    match_start = i + 1;
                    continue 'outer;
                }
                _ => len += 1,
            }
        }
        return None;
    }
}

/// Checks UTF-8 (dropping a byte-order mark) and points at the first bad byte.
fn decode<'a>(name: &Arc<str>, bytes: &'a [u8]) -> Result<&'a str, ConfigError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        // The prefix is valid by construction.
        let text = std::str::from_utf8(valid).unwrap_or("");
        let (line, col) = LineIndex::new(text).locate(text, text.len());
        ConfigError::NotUtf8 {
            location: Location::new(name.clone(), line, col),
        }
    })
}

/// Byte offsets of line starts, to turn positions into line:col.
struct LineIndex {
    starts: Vec<usize>,
    /// The line of the last lookup: parsing asks in increasing order, so the answer is
    /// usually here or just after.
    hint: std::cell::Cell<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex {
            starts,
            hint: std::cell::Cell::new(1),
        }
    }

    fn locate(&self, text: &str, offset: usize) -> (u32, u32) {
        let offset = offset.min(text.len());
        let h = self.hint.get();
        let line = if self.starts[h - 1] <= offset && self.starts.get(h).is_none_or(|&s| s > offset)
        {
            h
        } else if self.starts.get(h).is_some_and(|&s| s <= offset)
            && self.starts.get(h + 1).is_none_or(|&s| s > offset)
        {
            h + 1
        } else {
            self.starts.partition_point(|&s| s <= offset).max(1)
        };
        self.hint.set(line);
        let start = self.starts[line - 1];
        let col = match text.get(start..offset) {
            Some(s) => s.chars().count(),
            None => offset - start,
        };
        (to_u32(line), to_u32(col + 1))
    }
}

fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// One `<property>` as parsed, before final/override rules apply.
struct ParsedProperty {
    name: String,
    value: Option<String>,
    is_final: bool,
    location: Location,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Value,
    Final,
    Description,
    Source,
    Tag,
}

impl Field {
    fn from_name(s: &str) -> Option<Field> {
        Some(match s {
            "name" => Field::Name,
            "value" => Field::Value,
            "final" => Field::Final,
            "description" => Field::Description,
            "source" => Field::Source,
            "tag" => Field::Tag,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::Value => "value",
            Field::Final => "final",
            Field::Description => "description",
            Field::Source => "source",
            Field::Tag => "tag",
        }
    }
}

struct PropertyBuilder {
    name: Option<String>,
    value: Option<String>,
    is_final: Option<bool>,
    /// `<property>` itself, and `<value>` when there is one: values are what later
    /// validation complains about, so their location is the one kept.
    location: Location,
    value_location: Option<Location>,
    active: bool,
}

enum Frame {
    Configuration,
    Property(PropertyBuilder),
    Field {
        field: Field,
        text: String,
        location: Location,
    },
    Include {
        location: Location,
        /// The file that was missing, so a fallback is required and used.
        missing: Option<PathBuf>,
        fallback_seen: bool,
        active: bool,
    },
    Fallback {
        active: bool,
    },
}

impl Frame {
    fn tag(&self) -> String {
        match self {
            Frame::Configuration => "configuration".into(),
            Frame::Property(_) => "property".into(),
            Frame::Field { field, .. } => field.name().into(),
            Frame::Include { .. } => "xi:include".into(),
            Frame::Fallback { .. } => "xi:fallback".into(),
        }
    }

    /// Whether properties found in this context are kept (a fallback of an include
    /// that worked is parsed, for errors, but not applied).
    fn active(&self) -> bool {
        match self {
            Frame::Configuration => true,
            Frame::Property(p) => p.active,
            Frame::Field { .. } => true,
            Frame::Include { active, .. } | Frame::Fallback { active } => *active,
        }
    }
}

/// What an element is, by namespace and local name.
enum Elem<'a> {
    Hadoop(&'a str),
    XInclude(&'a str),
    Other(String),
}

struct Parser<'a> {
    name: &'a Arc<str>,
    path: Option<&'a Path>,
    text: &'a str,
    lines: LineIndex,
}

impl Parser<'_> {
    fn loc(&self, offset: u64) -> Location {
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let (line, col) = self.lines.locate(self.text, offset);
        Location::new(self.name.clone(), line, col)
    }
}

fn parse_document(
    name: &Arc<str>,
    path: Option<&Path>,
    text: &str,
    chain: &mut Vec<PathBuf>,
    out: &mut Vec<ParsedProperty>,
) -> Result<(), ConfigError> {
    let p = Parser {
        name,
        path,
        text,
        lines: LineIndex::new(text),
    };
    let mut reader = NsReader::from_str(text);
    reader.config_mut().expand_empty_elements = true;
    // Hadoop's parser (Woodstox) refuses "--" inside a comment, as XML does: a file
    // accepted here must also load in the ResourceManager.
    reader.config_mut().check_comments = true;
    let mut stack: Vec<Frame> = Vec::new();
    let mut root_seen = false;
    loop {
        let pos = reader.buffer_position();
        let (ns, event) = match reader.read_resolved_event() {
            Ok((ns, ev)) => (ns_kind(&ns), ev),
            Err(e) => {
                return Err(ConfigError::Malformed {
                    location: p.loc(reader.error_position()),
                    message: e.to_string(),
                });
            }
        };
        let location = || p.loc(pos);
        match event {
            Event::Start(e) => {
                let location = location();
                let elem = classify(&e, ns);
                if stack.is_empty() {
                    if root_seen {
                        return Err(structure(location, "content after the root element"));
                    }
                    match elem {
                        Elem::Hadoop("configuration") => {
                            check_attributes(&e, &[], "configuration", &location)?;
                            root_seen = true;
                            stack.push(Frame::Configuration);
                        }
                        _ => {
                            return Err(structure(
                                location,
                                &format!(
                                    "the root element must be <configuration>, not <{}>",
                                    qname(&e)
                                ),
                            ));
                        }
                    }
                    continue;
                }
                let frame = start_element(&p, &e, elem, location, &mut stack, chain, out)?;
                stack.push(frame);
            }
            Event::End(_) => {
                if let Some(frame) = stack.pop() {
                    end_element(frame, &mut stack, out)?;
                }
            }
            Event::Text(t) => on_text(&mut stack, &t.xml10_content(), location)?,
            Event::CData(c) => on_text(&mut stack, &c.xml10_content(), location)?,
            Event::GeneralRef(r) => {
                let resolved = if r.is_char_ref() {
                    match r.resolve_char_ref() {
                        Ok(Some(ch)) => ch.to_string(),
                        _ => {
                            return Err(ConfigError::Malformed {
                                location: location(),
                                message: format!("invalid character reference &{};", &*r),
                            });
                        }
                    }
                } else {
                    match quick_xml::escape::resolve_predefined_entity(&r) {
                        Some(s) => s.to_string(),
                        None => {
                            return Err(ConfigError::UnknownEntity {
                                location: location(),
                                entity: r.to_string(),
                            });
                        }
                    }
                };
                on_text(&mut stack, &resolved, location)?;
            }
            Event::Empty(_) => {
                // expand_empty_elements turns these into Start + End.
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(open) = stack.last() {
        return Err(structure(
            p.loc(u64::try_from(text.len()).unwrap_or(u64::MAX)),
            &format!("unterminated <{}>: the file ends inside it", open.tag()),
        ));
    }
    if !root_seen {
        return Err(structure(p.loc(0), "no <configuration> element"));
    }
    Ok(())
}

fn structure(location: Location, message: &str) -> ConfigError {
    ConfigError::Structure {
        location,
        message: message.to_string(),
    }
}

#[derive(Clone, Copy)]
enum Ns {
    None,
    XInclude,
    Other,
}

fn ns_kind(ns: &ResolveResult<'_>) -> Ns {
    match ns {
        ResolveResult::Unbound => Ns::None,
        ResolveResult::Bound(n) if n.as_ref() == XINCLUDE_NS => Ns::XInclude,
        _ => Ns::Other,
    }
}

fn qname(e: &BytesStart<'_>) -> String {
    e.name().as_ref().to_string()
}

fn classify<'a>(e: &'a BytesStart<'_>, ns: Ns) -> Elem<'a> {
    let local = e.local_name().into_inner();
    match ns {
        Ns::None => Elem::Hadoop(local),
        Ns::XInclude => Elem::XInclude(local),
        Ns::Other => Elem::Other(qname(e)),
    }
}

/// The element's attributes, namespace declarations left out; any not in `allowed` is
/// an error.
fn check_attributes(
    e: &BytesStart<'_>,
    allowed: &[&str],
    element: &str,
    location: &Location,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for attr in e.attributes() {
        let attr = attr.map_err(|err| ConfigError::Malformed {
            location: location.clone(),
            message: err.to_string(),
        })?;
        let key = attr.key.as_ref();
        if key == "xmlns" || key.starts_with("xmlns:") || key.starts_with("xml:") {
            continue;
        }
        if !allowed.contains(&key) {
            return Err(ConfigError::UnknownAttribute {
                location: location.clone(),
                element: element.to_string(),
                attribute: key.to_string(),
            });
        }
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|err| ConfigError::Malformed {
                location: location.clone(),
                message: err.to_string(),
            })?;
        out.push((key.to_string(), value.into_owned()));
    }
    Ok(out)
}

fn start_element(
    p: &Parser<'_>,
    e: &BytesStart<'_>,
    elem: Elem,
    location: Location,
    stack: &mut [Frame],
    chain: &mut Vec<PathBuf>,
    out: &mut Vec<ParsedProperty>,
) -> Result<Frame, ConfigError> {
    let Some(parent) = stack.last_mut() else {
        return Err(structure(location, "element outside the root"));
    };
    let active = parent.active();
    let unknown = |parent: &Frame, shown: &str| ConfigError::UnknownElement {
        location: location.clone(),
        element: shown.to_string(),
        parent: parent.tag(),
        property: None,
    };
    match (parent, elem) {
        (Frame::Configuration | Frame::Fallback { .. }, Elem::Hadoop("property")) => {
            let mut b = PropertyBuilder {
                name: None,
                value: None,
                is_final: None,
                location: location.clone(),
                value_location: None,
                active,
            };
            let attrs = check_attributes(
                e,
                &["name", "value", "final", "source", "tag"],
                "property",
                &location,
            )?;
            for (k, v) in attrs {
                match k.as_str() {
                    "name" => b.name = non_empty(v.trim().to_string()),
                    "value" => b.value = non_empty(v),
                    "final" => b.is_final = Some(parse_final(&v, &b.name, &location)?),
                    _ => {}
                }
            }
            Ok(Frame::Property(b))
        }
        (Frame::Configuration | Frame::Fallback { .. }, Elem::XInclude("include")) => {
            let attrs = check_attributes(e, &["href", "parse"], "xi:include", &location)?;
            let mut href = None;
            for (k, v) in attrs {
                match k.as_str() {
                    "href" => href = Some(v),
                    "parse" if v.trim() != "xml" => {
                        return Err(structure(
                            location,
                            &format!(
                                "<xi:include parse={v:?}> is not supported; only parse=\"xml\""
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            let Some(href) = href.filter(|h| !h.trim().is_empty()) else {
                return Err(ConfigError::IncludeWithoutHref { location });
            };
            let missing = if active {
                include(p, href.trim(), &location, chain, out)?
            } else {
                None
            };
            Ok(Frame::Include {
                location,
                missing,
                fallback_seen: false,
                active,
            })
        }
        (
            Frame::Include {
                missing,
                fallback_seen,
                active,
                ..
            },
            Elem::XInclude("fallback"),
        ) => {
            if *fallback_seen {
                return Err(structure(
                    location,
                    "more than one <xi:fallback> in one <xi:include>",
                ));
            }
            check_attributes(e, &[], "xi:fallback", &location)?;
            *fallback_seen = true;
            Ok(Frame::Fallback {
                active: *active && missing.is_some(),
            })
        }
        (Frame::Property(b), Elem::Hadoop(n)) => {
            let Some(field) = Field::from_name(n) else {
                return Err(ConfigError::UnknownElement {
                    location,
                    element: n.to_string(),
                    parent: "property".into(),
                    property: b.name.clone(),
                });
            };
            check_attributes(e, &[], field.name(), &location)?;
            let repeated = match field {
                Field::Name => b.name.is_some(),
                Field::Value => b.value_location.is_some(),
                Field::Final => b.is_final.is_some(),
                _ => false,
            };
            if repeated {
                return Err(ConfigError::DuplicateField {
                    location,
                    field: field.name().into(),
                    property: b.name.clone(),
                });
            }
            if field == Field::Value {
                b.value_location = Some(location.clone());
            }
            Ok(Frame::Field {
                field,
                text: String::new(),
                location,
            })
        }
        (parent, Elem::Hadoop(n)) => Err(unknown(parent, n)),
        (parent, Elem::XInclude(n)) => Err(unknown(parent, &format!("xi:{n}"))),
        (parent, Elem::Other(n)) => Err(unknown(parent, &n)),
    }
}

fn non_empty(s: String) -> Option<String> {
    if s.is_empty() { None } else { Some(s) }
}

fn parse_final(v: &str, name: &Option<String>, location: &Location) -> Result<bool, ConfigError> {
    match v.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::BadFinal {
            location: location.clone(),
            value: v.to_string(),
            property: name.clone(),
        }),
    }
}

/// Parses an included file into `out`. `Ok(Some(path))` when it does not exist, so
/// the include's fallback applies.
fn include(
    p: &Parser<'_>,
    href: &str,
    location: &Location,
    chain: &mut Vec<PathBuf>,
    out: &mut Vec<ParsedProperty>,
) -> Result<Option<PathBuf>, ConfigError> {
    let href_path = match href
        .strip_prefix("file://")
        .or_else(|| href.strip_prefix("file:"))
    {
        Some(rest) => Path::new(rest),
        None if href.contains("://") => {
            return Err(structure(
                location.clone(),
                &format!("<xi:include href={href:?}>: only local files can be included"),
            ));
        }
        None => Path::new(href),
    };
    let target = if href_path.is_absolute() {
        href_path.to_path_buf()
    } else {
        match p.path.and_then(Path::parent) {
            Some(dir) => dir.join(href_path),
            None => {
                return Err(ConfigError::IncludeWithoutBase {
                    location: location.clone(),
                    href: href.to_string(),
                });
            }
        }
    };
    let canonical = match std::fs::canonicalize(&target) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(target)),
        Err(source) => {
            return Err(ConfigError::Io {
                path: target,
                source,
            });
        }
    };
    if chain.contains(&canonical) {
        let mut paths = chain.clone();
        paths.push(canonical);
        return Err(ConfigError::IncludeLoop {
            location: location.clone(),
            paths,
        });
    }
    if chain.len() >= MAX_INCLUDE_DEPTH {
        return Err(structure(
            location.clone(),
            &format!("includes nested more than {MAX_INCLUDE_DEPTH} deep"),
        ));
    }
    let bytes = std::fs::read(&target).map_err(|source| ConfigError::Io {
        path: target.clone(),
        source,
    })?;
    let name: Arc<str> = target.display().to_string().into();
    let text = decode(&name, &bytes)?;
    chain.push(canonical);
    let result = parse_document(&name, Some(&target), text, chain, out);
    chain.pop();
    result.map(|()| None)
}

/// `location` is computed only for an error: most text is whitespace between tags.
fn on_text(
    stack: &mut [Frame],
    text: &str,
    location: impl FnOnce() -> Location,
) -> Result<(), ConfigError> {
    match stack.last_mut() {
        Some(Frame::Field { text: buf, .. }) => {
            buf.push_str(text);
            Ok(())
        }
        _ if text.trim().is_empty() => Ok(()),
        other => Err(ConfigError::UnexpectedText {
            location: location(),
            parent: other.map(|f| f.tag()).unwrap_or_else(|| "document".into()),
            text: text.trim().chars().take(40).collect(),
        }),
    }
}

fn end_element(
    frame: Frame,
    stack: &mut [Frame],
    out: &mut Vec<ParsedProperty>,
) -> Result<(), ConfigError> {
    match frame {
        Frame::Field {
            field,
            text,
            location,
        } => {
            let Some(Frame::Property(b)) = stack.last_mut() else {
                return Ok(());
            };
            match field {
                Field::Name => b.name = non_empty(text.trim().to_string()),
                // Hadoop keeps values untrimmed; typed readers trim.
                Field::Value => b.value = non_empty(text),
                Field::Final => b.is_final = Some(parse_final(&text, &b.name, &location)?),
                Field::Description | Field::Source | Field::Tag => {}
            }
            Ok(())
        }
        Frame::Property(b) => {
            let Some(name) = b.name else {
                return Err(ConfigError::PropertyWithoutName {
                    location: b.location,
                });
            };
            if b.active {
                out.push(ParsedProperty {
                    name,
                    value: b.value,
                    is_final: b.is_final.unwrap_or(false),
                    location: b.value_location.unwrap_or(b.location),
                });
            }
            Ok(())
        }
        Frame::Include {
            location,
            missing: Some(path),
            fallback_seen: false,
            ..
        } => Err(ConfigError::MissingInclude { location, path }),
        Frame::Include { .. } => Ok(()),
        Frame::Configuration | Frame::Fallback { .. } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn conf(xml: &str) -> Result<Configuration, ConfigError> {
        let mut c = Configuration::with_env(HashMap::new());
        c.add_str("test.xml", xml)?;
        Ok(c)
    }

    fn props(body: &str) -> String {
        format!("<?xml version=\"1.0\"?>\n<configuration>\n{body}\n</configuration>\n")
    }

    fn prop(name: &str, value: &str) -> String {
        format!("<property><name>{name}</name><value>{value}</value></property>\n")
    }

    #[test]
    fn reads_properties_comments_cdata_and_entities() {
        let c = conf(&props(
            "<!-- a comment -->\n\
             <property>\n  <name> a.b </name>\n  <value><![CDATA[x<y]]> &amp; &#65;</value>\n  \
             <description>ignored</description>\n</property>\n\
             <property name=\"short.form\" value=\"v\" final=\"true\"/>",
        ))
        .unwrap();
        assert_eq!(c.get("a.b").unwrap().as_deref(), Some("x<y & A"));
        assert_eq!(c.get("short.form").unwrap().as_deref(), Some("v"));
        assert!(c.is_final("short.form"));
        assert_eq!(c.location("a.b").unwrap().to_string(), "test.xml:6:3");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn empty_value_sets_nothing_as_in_hadoop() {
        let c = conf(&props(&prop("a", ""))).unwrap();
        assert_eq!(c.get("a").unwrap(), None);
        assert!(c.is_empty());
    }

    #[test]
    fn values_keep_their_whitespace() {
        let c = conf(&props(&prop("a", " 40 "))).unwrap();
        assert_eq!(c.get_raw("a"), Some(" 40 "));
    }

    #[test]
    fn expands_properties_and_environment() {
        let mut env = HashMap::new();
        env.insert("HOME_DIR".to_string(), "/home/yarn".to_string());
        env.insert("EMPTY".to_string(), String::new());
        let mut c = Configuration::with_env(env);
        let body = [
            prop("base", "/opt"),
            prop("dir", "${base}/lib"),
            prop("nested", "${dir}/x"),
            prop("home", "${env.HOME_DIR}/conf"),
            prop("dflt", "${env.UNSET:-fallback}"),
            prop("dflt.empty", "${env.EMPTY:-fallback}"),
            prop("dash.empty", "${env.EMPTY-fallback}"),
            prop("dash.unset", "${env.UNSET-fallback}"),
            prop("not.a.var", "${ x} $x {y} ${}"),
        ]
        .concat();
        c.add_str("t.xml", &props(&body)).unwrap();
        let get = |k: &str| c.get(k).unwrap().unwrap();
        assert_eq!(get("nested"), "/opt/lib/x");
        assert_eq!(get("home"), "/home/yarn/conf");
        assert_eq!(get("dflt"), "fallback");
        assert_eq!(get("dflt.empty"), "fallback");
        assert_eq!(get("dash.empty"), "");
        assert_eq!(get("dash.unset"), "fallback");
        assert_eq!(get("not.a.var"), "${ x} $x {y} ${}");
        assert_eq!(c.get_raw("dir"), Some("${base}/lib"));
    }

    #[test]
    fn unresolvable_variables_are_errors_on_use() {
        let c = conf(&props(
            &[
                prop("a", "${missing}"),
                prop("self", "x${self}"),
                prop("loop1", "${loop2}"),
                prop("loop2", "${loop1}"),
                prop("env", "${env.NOT_SET}"),
                prop("fine", "ok"),
            ]
            .concat(),
        ))
        .unwrap();
        assert_eq!(c.get("fine").unwrap().as_deref(), Some("ok"));
        match c.get("a") {
            Err(ConfigError::UnresolvedVariable { key, var, location }) => {
                assert_eq!((key.as_str(), var.as_str()), ("a", "missing"));
                assert_eq!(location.line, 3);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            c.get("self"),
            Err(ConfigError::SelfReferentialVariable { .. })
        ));
        assert!(matches!(
            c.get("loop1"),
            Err(ConfigError::SubstitutionDepth { .. })
        ));
        let err = c.get("env").unwrap_err().to_string();
        assert!(err.contains("environment variable"), "{err}");
    }

    #[test]
    fn substitutions_stop_at_max_subst() {
        // Hadoop's loop substitutes at most MAX_SUBST - 1 variables before the check
        // that finds none left; a value with MAX_SUBST of them fails as it does there.
        let ok: String = (0..MAX_SUBST - 1).map(|_| "${v}").collect();
        let c = conf(&props(
            &[
                prop("v", "x"),
                prop("ok", &ok),
                prop("over", &format!("{ok}${{v}}")),
            ]
            .concat(),
        ))
        .unwrap();
        assert_eq!(c.get("ok").unwrap().unwrap(), "x".repeat(MAX_SUBST - 1));
        assert!(matches!(
            c.get("over"),
            Err(ConfigError::SubstitutionDepth { .. })
        ));
    }

    #[test]
    fn final_properties_resist_later_resources() {
        let mut c = Configuration::with_env(HashMap::new());
        c.add_str(
            "core-site.xml",
            &props("<property><name>k</name><value>1</value><final>true</final></property>"),
        )
        .unwrap();
        c.add_str(
            "yarn-site.xml",
            &props(&[prop("k", "2"), prop("other", "3")].concat()),
        )
        .unwrap();
        assert_eq!(c.get("k").unwrap().as_deref(), Some("1"));
        assert_eq!(c.get("other").unwrap().as_deref(), Some("3"));
        match c.warnings() {
            [
                ConfigWarning::FinalOverride {
                    key,
                    final_at,
                    attempted_at,
                },
            ] => {
                assert_eq!(key, "k");
                assert_eq!(&*final_at.file, "core-site.xml");
                assert_eq!(&*attempted_at.file, "yarn-site.xml");
            }
            other => panic!("{other:?}"),
        }
        // Restating the same value is not an override attempt.
        c.add_str("again.xml", &props(&prop("k", "1"))).unwrap();
        assert_eq!(c.warnings().len(), 1);
    }

    #[test]
    fn later_resources_override_non_final_ones() {
        let mut c = Configuration::with_env(HashMap::new());
        c.add_str("a.xml", &props(&prop("k", "1"))).unwrap();
        c.add_str("b.xml", &props(&prop("k", "2"))).unwrap();
        assert_eq!(c.get("k").unwrap().as_deref(), Some("2"));
        assert_eq!(&*c.location("k").unwrap().file, "b.xml");
    }

    #[test]
    fn prefix_iteration_is_sorted_and_bounded() {
        let c = conf(&props(
            &[
                prop("a.x", "1"),
                prop("a.y", "2"),
                prop("ab", "3"),
                prop("b", "4"),
            ]
            .concat(),
        ))
        .unwrap();
        assert_eq!(
            c.keys_with_prefix("a.").collect::<Vec<_>>(),
            vec!["a.x", "a.y"]
        );
        assert_eq!(c.keys().count(), 4);
    }

    fn err(xml: &str) -> ConfigError {
        match conf(xml) {
            Ok(_) => panic!("accepted: {xml}"),
            Err(e) => e,
        }
    }

    #[test]
    fn structural_errors_name_file_line_and_column() {
        let e = err(&props("<property><name>a</name><valu>1</valu></property>"));
        assert!(
            matches!(&e, ConfigError::UnknownElement { element, property: Some(p), .. } if element == "valu" && p == "a"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "test.xml:3:25: unknown element <valu> in <property> (property a)"
        );

        let e = err(&props("<property><value>1</value></property>"));
        assert!(
            matches!(e, ConfigError::PropertyWithoutName { .. }),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("test.xml:3:1:"), "{e}");

        let e = err(&props("<prop/>"));
        assert!(matches!(e, ConfigError::UnknownElement { .. }), "{e:?}");

        let e = err(&props("<property><name>a</name><name>b</name></property>"));
        assert!(matches!(e, ConfigError::DuplicateField { .. }), "{e:?}");

        let e = err(&props("<property name=\"a\" valeu=\"1\"/>"));
        assert!(matches!(e, ConfigError::UnknownAttribute { .. }), "{e:?}");

        let e = err(&props(
            "<property><name>a</name><final>yes</final></property>",
        ));
        assert!(matches!(e, ConfigError::BadFinal { .. }), "{e:?}");

        let e = err(&props("stray text"));
        assert!(matches!(e, ConfigError::UnexpectedText { .. }), "{e:?}");

        let e = err(&props(&prop("a", "&nbsp;")));
        assert!(matches!(e, ConfigError::UnknownEntity { .. }), "{e:?}");

        let e = err("<settings/>");
        assert!(matches!(e, ConfigError::Structure { .. }), "{e:?}");
        let e = err("<!-- nothing -->");
        assert!(matches!(e, ConfigError::Structure { .. }), "{e:?}");
        let e = err("<configuration/><configuration/>");
        assert!(matches!(e, ConfigError::Structure { .. }), "{e:?}");
    }

    #[test]
    fn unterminated_and_malformed_xml_are_errors() {
        for xml in [
            "<configuration><property><name>a</name>",
            "<configuration><property><name>a</name></property>",
            "<configuration><property><name>a</nam></property></configuration>",
            "<configuration><property",
            "<configuration><!-- never closed",
            "<configuration><![CDATA[ never closed",
        ] {
            let e = err(xml);
            assert!(
                matches!(
                    e,
                    ConfigError::Malformed { .. } | ConfigError::Structure { .. }
                ),
                "{xml}: {e:?}"
            );
            assert!(e.to_string().starts_with("test.xml:1:"), "{e}");
        }
    }

    #[test]
    fn a_double_hyphen_in_a_comment_is_refused_as_hadoop_refuses_it() {
        let e = err(
            "<configuration>\n  <!-- check with: preemptor check-config --conf-dir x -->\n</configuration>",
        );
        assert!(matches!(e, ConfigError::Malformed { .. }), "{e:?}");
        assert!(e.to_string().starts_with("test.xml:2:"), "{e}");
        assert!(conf("<configuration><!-- a - b, -x --></configuration>").is_ok());
    }

    #[test]
    fn non_utf8_is_located() {
        let mut c = Configuration::new();
        let e = c
            .add_bytes(
                "latin1.xml",
                b"<configuration>\n<property><name>caf\xe9</name></property></configuration>",
            )
            .unwrap_err();
        assert!(matches!(e, ConfigError::NotUtf8 { .. }), "{e:?}");
        assert_eq!(e.location().unwrap().to_string(), "latin1.xml:2:20");
    }

    #[test]
    fn a_failed_load_applies_nothing() {
        let mut c = Configuration::with_env(HashMap::new());
        c.add_str("a.xml", &props(&prop("k", "1"))).unwrap();
        let bad = props(&[prop("k", "2"), "<bogus/>".to_string()].concat());
        assert!(c.add_str("b.xml", &bad).is_err());
        assert_eq!(c.get("k").unwrap().as_deref(), Some("1"));
    }

    const XI: &str = "xmlns:xi=\"http://www.w3.org/2001/XInclude\"";

    #[test]
    fn includes_resolve_relative_to_the_including_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(
            dir.path().join("main.xml"),
            format!(
                "<configuration {XI}>\n{}<xi:include href=\"sub/part.xml\"/>\n{}</configuration>",
                prop("before", "1"),
                prop("after", "${from.part}")
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("sub/part.xml"),
            format!(
                "<configuration {XI}>{}<xi:include href=\"leaf.xml\"/></configuration>",
                prop("from.part", "2")
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("sub/leaf.xml"), props(&prop("leaf", "3"))).unwrap();
        let mut c = Configuration::with_env(HashMap::new());
        c.add_file(dir.path().join("main.xml")).unwrap();
        assert_eq!(c.get("after").unwrap().as_deref(), Some("2"));
        assert_eq!(c.get("leaf").unwrap().as_deref(), Some("3"));
        assert!(
            c.location("from.part")
                .unwrap()
                .file
                .ends_with("sub/part.xml")
        );
    }

    #[test]
    fn missing_includes_need_a_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let with_fallback = format!(
            "<configuration {XI}><xi:include href=\"absent.xml\"><xi:fallback>{}</xi:fallback></xi:include></configuration>",
            prop("fb", "used")
        );
        std::fs::write(dir.path().join("a.xml"), &with_fallback).unwrap();
        let mut c = Configuration::with_env(HashMap::new());
        c.add_file(dir.path().join("a.xml")).unwrap();
        assert_eq!(c.get("fb").unwrap().as_deref(), Some("used"));

        // A fallback of an include that worked is not applied.
        std::fs::write(dir.path().join("absent.xml"), props(&prop("real", "1"))).unwrap();
        let mut c = Configuration::with_env(HashMap::new());
        c.add_file(dir.path().join("a.xml")).unwrap();
        assert_eq!(c.get("fb").unwrap(), None);
        assert_eq!(c.get("real").unwrap().as_deref(), Some("1"));

        std::fs::write(
            dir.path().join("b.xml"),
            format!("<configuration {XI}>\n  <xi:include href=\"nowhere.xml\"/></configuration>"),
        )
        .unwrap();
        let e = Configuration::new()
            .add_file(dir.path().join("b.xml"))
            .unwrap_err();
        assert!(matches!(e, ConfigError::MissingInclude { .. }), "{e:?}");
        assert!(e.to_string().contains("b.xml:2:3"), "{e}");
    }

    #[test]
    fn include_loops_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.xml"),
            format!("<configuration {XI}><xi:include href=\"b.xml\"/></configuration>"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.xml"),
            format!("<configuration {XI}><xi:include href=\"./a.xml\"/></configuration>"),
        )
        .unwrap();
        let e = Configuration::new()
            .add_file(dir.path().join("a.xml"))
            .unwrap_err();
        match &e {
            ConfigError::IncludeLoop { paths, location } => {
                assert_eq!(paths.len(), 3);
                assert!(location.file.ends_with("b.xml"));
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(
            dir.path().join("self.xml"),
            format!("<configuration {XI}><xi:include href=\"self.xml\"/></configuration>"),
        )
        .unwrap();
        let e = Configuration::new()
            .add_file(dir.path().join("self.xml"))
            .unwrap_err();
        assert!(matches!(e, ConfigError::IncludeLoop { .. }), "{e:?}");
    }

    #[test]
    fn includes_outside_files_and_namespaces() {
        let e = err(&format!(
            "<configuration {XI}><xi:include href=\"x.xml\"/></configuration>"
        ));
        assert!(matches!(e, ConfigError::IncludeWithoutBase { .. }), "{e:?}");
        let e = err(&format!(
            "<configuration {XI}><xi:include/></configuration>"
        ));
        assert!(matches!(e, ConfigError::IncludeWithoutHref { .. }), "{e:?}");
        let e = err(&format!(
            "<configuration {XI}><xi:include href=\"http://example.com/x.xml\"/></configuration>"
        ));
        assert!(matches!(e, ConfigError::Structure { .. }), "{e:?}");
        // An include outside the XInclude namespace is just an unknown element.
        let e = err("<configuration><include href=\"x.xml\"/></configuration>");
        assert!(matches!(e, ConfigError::UnknownElement { .. }), "{e:?}");
        let e = err(&format!(
            "<configuration {XI}><xi:include href=\"/nonexistent/x.xml\"><xi:fallback/><xi:fallback/></xi:include></configuration>"
        ));
        assert!(matches!(e, ConfigError::Structure { .. }), "{e:?}");
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let e = Configuration::new()
            .add_file("/nonexistent/preemptor/x.xml")
            .unwrap_err();
        assert!(matches!(e, ConfigError::Io { .. }), "{e:?}");
    }

    fn exercise(bytes: &[u8]) {
        let mut c = Configuration::with_env(HashMap::new());
        if c.add_bytes("fuzz.xml", bytes).is_ok() {
            let keys: Vec<String> = c.keys().map(str::to_string).collect();
            for k in keys {
                let _ = c.get(&k);
            }
        }
    }

    fn near_valid_xml() -> impl Strategy<Value = String> {
        let tokens = prop::sample::select(vec![
            "<configuration>",
            "</configuration>",
            "<property>",
            "</property>",
            "<name>",
            "</name>",
            "<value>",
            "</value>",
            "<final>true</final>",
            "<description>d</description>",
            "a.b",
            "${a.b}",
            "${env.X:-d}",
            "${",
            "}",
            "$",
            "<![CDATA[",
            "]]>",
            "<!--",
            "-->",
            "&amp;",
            "&bogus;",
            "&#0;",
            "&#x10FFFF;",
            "<xi:include href=\"x.xml\"/>",
            "<xi:fallback>",
            "</xi:fallback>",
            " xmlns:xi=\"http://www.w3.org/2001/XInclude\"",
            "<property name=\"n\" value=\"${n}\"/>",
            "<",
            ">",
            "/>",
            "\"",
            "=",
            " ",
            "\n",
            "é",
            "<?xml version=\"1.0\"?>",
            "<!DOCTYPE configuration>",
        ]);
        prop::collection::vec(tokens, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            exercise(&bytes);
        }

        #[test]
        fn near_valid_xml_never_panics(xml in near_valid_xml()) {
            exercise(xml.as_bytes());
            exercise(format!("<configuration>{xml}</configuration>").as_bytes());
        }

        #[test]
        fn arbitrary_values_expand_without_panicking(v in "[${}a-z. :-]{0,40}") {
            let body = props(&[prop("a", "x"), prop("env.X", "y"), prop("k", &v)].concat());
            exercise(body.as_bytes());
        }
    }
}
