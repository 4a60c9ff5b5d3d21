//! Errors and warnings of the configuration boundary. Every one that comes from a file
//! names where: `file:line:col`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::resources::Resource;

/// Where a property (or a problem) sits: file, 1-based line and 1-based column in
/// characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    pub file: Arc<str>,
    pub line: u32,
    pub col: u32,
}

impl Location {
    pub fn new(file: impl Into<Arc<str>>, line: u32, col: u32) -> Location {
        Location {
            file: file.into(),
            line,
            col,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

impl Serialize for Location {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `"<location>: "`, or nothing for values that come from no file (defaults).
struct At<'a>(&'a Option<Location>);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(l) => write!(f, "{l}: "),
            None => Ok(()),
        }
    }
}

fn in_property(name: &Option<String>) -> String {
    match name {
        Some(n) => format!(" (property {n})"),
        None => String::new(),
    }
}

fn chain(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// One problem that makes a configuration unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {what} is required but missing", path.display())]
    MissingFile { path: PathBuf, what: &'static str },
    /// There, but a directory, a dangling link or a device: reading defaults in its
    /// place would hide the mistake.
    #[error("{}: not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{location}: not valid UTF-8 (configuration files must be UTF-8)")]
    NotUtf8 { location: Location },
    #[error("{location}: malformed XML: {message}")]
    Malformed { location: Location, message: String },
    #[error(
        "{location}: unknown element <{element}> in <{parent}>{}",
        in_property(property)
    )]
    UnknownElement {
        location: Location,
        element: String,
        parent: String,
        property: Option<String>,
    },
    #[error("{location}: unknown attribute {attribute:?} on <{element}>")]
    UnknownAttribute {
        location: Location,
        element: String,
        attribute: String,
    },
    #[error("{location}: unexpected text {text:?} in <{parent}>")]
    UnexpectedText {
        location: Location,
        parent: String,
        text: String,
    },
    #[error(
        "{location}: unknown entity &{entity}; (only &lt; &gt; &amp; &apos; &quot; and character references are defined)"
    )]
    UnknownEntity { location: Location, entity: String },
    #[error("{location}: <property> without a name")]
    PropertyWithoutName { location: Location },
    #[error("{location}: <{field}> given twice{}", in_property(property))]
    DuplicateField {
        location: Location,
        field: String,
        property: Option<String>,
    },
    #[error(
        "{location}: <final> must be true or false, not {value:?}{}",
        in_property(property)
    )]
    BadFinal {
        location: Location,
        value: String,
        property: Option<String>,
    },
    #[error("{location}: <xi:include> without an href")]
    IncludeWithoutHref { location: Location },
    #[error(
        "{location}: <xi:include href={href:?}> is relative, but this configuration was not read from a file, so there is nothing to resolve it against"
    )]
    IncludeWithoutBase { location: Location, href: String },
    #[error("{location}: include loop: {}", chain(paths))]
    IncludeLoop {
        location: Location,
        paths: Vec<PathBuf>,
    },
    #[error("{location}: included file {} does not exist and the <xi:include> has no <xi:fallback>", path.display())]
    MissingInclude { location: Location, path: PathBuf },
    #[error("{location}: {message}")]
    Structure { location: Location, message: String },
    #[error("{location}: property {key}: variable ${{{var}}} is not defined (no such property{})", if var.starts_with("env.") { " or environment variable" } else { "" })]
    UnresolvedVariable {
        key: String,
        var: String,
        location: Location,
    },
    #[error("{location}: property {key}: variable ${{{var}}} refers to itself")]
    SelfReferentialVariable {
        key: String,
        var: String,
        location: Location,
    },
    #[error("{location}: property {key}: variable substitution depth too large (Hadoop's limit is {max}; is there a loop?)", max = super::xml::MAX_SUBST)]
    SubstitutionDepth { key: String, location: Location },
    #[error("{location}: property {key}: environment variable {var} is not valid UTF-8")]
    EnvNotUnicode {
        key: String,
        var: String,
        location: Location,
    },
    #[error("{}{key} = {value:?}: {expected}", At(location))]
    InvalidValue {
        key: String,
        value: String,
        expected: String,
        location: Option<Location>,
    },
    #[error("{}queue {queue}: {problem}", At(location))]
    Queue {
        queue: String,
        location: Option<Location>,
        problem: QueueProblem,
    },
}

impl ConfigError {
    /// The place in a file the error points at, when it has one.
    pub fn location(&self) -> Option<&Location> {
        use ConfigError::*;
        match self {
            Io { .. } | MissingFile { .. } | NotAFile { .. } => None,
            NotUtf8 { location }
            | Malformed { location, .. }
            | UnknownElement { location, .. }
            | UnknownAttribute { location, .. }
            | UnexpectedText { location, .. }
            | UnknownEntity { location, .. }
            | PropertyWithoutName { location }
            | DuplicateField { location, .. }
            | BadFinal { location, .. }
            | IncludeWithoutHref { location }
            | IncludeWithoutBase { location, .. }
            | IncludeLoop { location, .. }
            | MissingInclude { location, .. }
            | Structure { location, .. }
            | UnresolvedVariable { location, .. }
            | SelfReferentialVariable { location, .. }
            | SubstitutionDepth { location, .. }
            | EnvNotUnicode { location, .. } => Some(location),
            InvalidValue { location, .. } | Queue { location, .. } => location.as_ref(),
        }
    }
}

/// What is wrong with one queue of capacity-scheduler.xml. The messages follow the
/// capacity scheduler's own checks (QueueCapacityChecks / CSQueueUtils in YARN 3.x).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QueueProblem {
    #[error("{key} = {value:?}: {expected}")]
    InvalidValue {
        key: String,
        value: String,
        expected: String,
    },
    #[error("root must have child queues (yarn.scheduler.capacity.root.queues is not set)")]
    NoChildQueues,
    #[error(
        "listed in {parent}.queues but its capacity is never set (YARN would silently give it 0; set capacity to 0 explicitly if that is meant)"
    )]
    NotConfigured { parent: String },
    #[error("child queue {name:?} is listed twice")]
    DuplicateChild { name: String },
    #[error("child queue name {name:?} is not allowed: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("root's capacity is fixed at 100, not {value:?}")]
    RootCapacity { value: String },
    #[error(
        "children's capacities{} sum to {sum}%, which must be 100% (or 0%; tolerance {tolerance}%)",
        label_suffix(label)
    )]
    CapacitySum {
        label: Option<String>,
        sum: f64,
        tolerance: f64,
    },
    #[error(
        "children's capacities{} sum to 0%, but this queue's capacity is not 0 (set allow-zero-capacity-sum to allow it)",
        label_suffix(label)
    )]
    ZeroCapacitySum { label: Option<String> },
    #[error(
        "this queue's capacity{} is 0 but its children's capacities sum to {sum}% (set allow-zero-capacity-sum to allow it)",
        label_suffix(label)
    )]
    PositiveSumUnderZeroCapacity { label: Option<String>, sum: f64 },
    #[error(
        "absolute capacity{} {capacity:.4} is above absolute maximum capacity {maximum:.4}",
        label_suffix(label)
    )]
    MaxBelowCapacity {
        label: Option<String>,
        capacity: f64,
        maximum: f64,
    },
    #[error(
        "children mix percentage, weight and absolute capacities{}: {details}",
        label_suffix(label)
    )]
    MixedCapacityForms {
        label: Option<String>,
        details: String,
    },
    #[error(
        "when a parent or its children use absolute resources, both must (parent is {parent}, children are {children})"
    )]
    AbsoluteParentMismatch {
        parent: &'static str,
        children: &'static str,
    },
    #[error(
        "capacity{} {parent} is less than its children's sum {children}",
        label_suffix(label)
    )]
    ChildrenExceedParent {
        label: Option<String>,
        parent: Resource,
        children: Resource,
    },
    #[error(
        "capacity{} {minimum} is greater than its maximum-capacity {maximum}",
        label_suffix(label)
    )]
    MinAboveMax {
        label: Option<String>,
        minimum: Resource,
        maximum: Resource,
    },
    #[error(
        "maximum-capacity{} {maximum} is greater than its parent's {parent}",
        label_suffix(label)
    )]
    MaxAboveParentMax {
        label: Option<String>,
        maximum: Resource,
        parent: Resource,
    },
    #[error("state is RUNNING but its parent {parent} is STOPPED")]
    RunningUnderStopped { parent: String },
    #[error("accessible-node-labels has {label:?}, which its parent {parent} cannot access")]
    LabelNotInParent { label: String, parent: String },
    #[error("accessible-node-labels is * but its parent {parent} can only access {parent_labels}")]
    AnyLabelUnderRestrictedParent {
        parent: String,
        parent_labels: String,
    },
}

fn label_suffix(label: &Option<String>) -> String {
    match label {
        Some(l) => format!(" for node label {l:?}"),
        None => String::new(),
    }
}

/// Something worth telling the operator that does not stop Preemptor from running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigWarning {
    /// A later resource tried to change a final property; Hadoop ignores it too.
    FinalOverride {
        key: String,
        final_at: Location,
        attempted_at: Location,
    },
    UnknownKey {
        key: String,
        location: Location,
        suggestion: Option<String>,
    },
    /// A key that has no effect where it is, or a setting that works against
    /// Preemptor.
    Note {
        key: String,
        location: Option<Location>,
        message: String,
    },
}

impl ConfigWarning {
    pub fn location(&self) -> Option<&Location> {
        match self {
            ConfigWarning::FinalOverride { attempted_at, .. } => Some(attempted_at),
            ConfigWarning::UnknownKey { location, .. } => Some(location),
            ConfigWarning::Note { location, .. } => location.as_ref(),
        }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::FinalOverride {
                key,
                final_at,
                attempted_at,
            } => write!(
                f,
                "{attempted_at}: attempt to override final property {key} (made final at {final_at}); ignored"
            ),
            ConfigWarning::UnknownKey {
                key,
                location,
                suggestion,
            } => {
                write!(f, "{location}: unknown key {key}")?;
                match suggestion {
                    Some(s) => write!(f, " (did you mean {s}?)"),
                    None => Ok(()),
                }
            }
            ConfigWarning::Note {
                key,
                location,
                message,
            } => write!(f, "{}{key}: {message}", At(location)),
        }
    }
}

/// `{"location": "file:line:col" | null, "message": "..."}` for JSON reports.
fn serialize_report<S: Serializer>(
    s: S,
    location: Option<&Location>,
    message: &dyn fmt::Display,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("Report", 2)?;
    st.serialize_field("location", &location)?;
    st.serialize_field("message", &message.to_string())?;
    st.end()
}

impl Serialize for ConfigWarning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_report(s, self.location(), self)
    }
}

impl Serialize for ConfigError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_report(s, self.location(), self)
    }
}

/// All the errors found in one go, with the warnings seen on the way.
#[derive(Debug, Default)]
pub struct ConfigErrors {
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigWarning>,
}

impl ConfigErrors {
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Orders errors and warnings by file and position (unlocated ones last), the
    /// order an operator fixes them in.
    pub fn sort(&mut self) {
        sort_by_location(&mut self.errors, |e| e.location());
        sort_by_location(&mut self.warnings, |w| w.location());
    }

    /// Adds another batch found in the same pass.
    pub fn extend(&mut self, other: ConfigErrors) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }
}

/// Stable sort by location, unlocated items last.
pub fn sort_by_location<T>(items: &mut [T], location: impl Fn(&T) -> Option<&Location>) {
    items.sort_by(|a, b| match (location(a), location(b)) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors {
            errors: vec![e],
            warnings: vec![],
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{n} configuration error{}",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
