//! `yarn::Error`: everything that can go wrong talking to the ResourceManager.

use std::fmt;

use super::dto::RemoteException;

/// Why one RM address was passed over while looking for the active one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeFailure {
    pub address: String,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ResourceManager client configuration: {0}")]
    Config(String),
    #[error("no active ResourceManager among {}", list_failures(.0))]
    NoActiveRm(Vec<ProbeFailure>),
    #[error("{method} {url}: {reason}")]
    Transport {
        method: String,
        url: String,
        reason: String,
        #[source]
        source: Option<reqwest::Error>,
    },
    #[error("{method} {url} answered {status}: {}", remote_text(.remote.as_deref(), .body))]
    Remote {
        method: String,
        url: String,
        status: u16,
        /// YARN's `RemoteException`, when the body held one.
        remote: Option<Box<RemoteException>>,
        /// The start of the body otherwise.
        body: String,
    },
    #[error("{method} {url}: the answer is not JSON ({reason})")]
    NotJson {
        method: String,
        url: String,
        reason: String,
    },
    /// An answer labelled XML that is not well-formed XML.
    #[error("{method} {url}: the answer is not readable XML ({reason})")]
    NotXml {
        method: String,
        url: String,
        reason: String,
    },
    #[error(
        "{method} {url}: the answer is larger than {limit} bytes and was refused, not \
         buffered; raise yarn.preemptor.rm.max-response-mb if the cluster needs it"
    )]
    TooLarge {
        method: String,
        url: String,
        limit: usize,
    },
    #[error(
        "the ResourceManager runs the {0}; Preemptor reads only the capacity scheduler's queues"
    )]
    UnsupportedScheduler(String),
    #[error("reverse proxy: {0}")]
    Serve(#[source] std::io::Error),
    /// No SPNEGO token could be made: no ticket, a wrong keytab or principal.
    #[error("{method} {url}: {source}")]
    Kerberos {
        method: String,
        url: String,
        #[source]
        source: Box<crate::kerberos::KerberosError>,
    },
}

impl Error {
    /// A 404 from the RM: the object (application, attempt, node) does not exist (any
    /// more).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Remote { status: 404, .. })
    }

    /// YARN's exception class, e.g. `NotFoundException`, when the RM sent one.
    pub fn remote_exception(&self) -> Option<&RemoteException> {
        match self {
            Error::Remote { remote, .. } => remote.as_deref(),
            _ => None,
        }
    }
}

fn list_failures(failures: &[ProbeFailure]) -> String {
    if failures.is_empty() {
        return "no addresses".into();
    }
    failures
        .iter()
        .map(|f| format!("{} ({})", f.address, f.reason))
        .collect::<Vec<_>>()
        .join(", ")
}

fn remote_text(remote: Option<&RemoteException>, body: &str) -> String {
    match remote {
        Some(r) if !r.exception.is_empty() || !r.message.is_empty() => {
            format!("{}: {}", r.exception, r.message)
        }
        _ if body.trim().is_empty() => "(empty body)".into(),
        _ => body.trim().to_string(),
    }
}

/// At most `n` characters of `s`, for error messages.
pub(crate) fn excerpt(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}

impl fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.address, self.reason)
    }
}
