//! Preemptor: suspend-or-shrink preemption for Hadoop YARN clusters running Docker
//! containers. See docs/design.md for the architecture; `main.rs` only parses the
//! command line and calls into these modules.

pub mod agent;
pub mod auth;
pub mod check_config;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod demo;
pub mod durable;
pub mod emulator;
pub mod kerberos;
pub mod policy;
pub mod resources;
pub mod sim;
pub mod sse;
pub mod sync;
pub mod text;
pub mod tls;
pub mod tokens;
pub mod yarn;

/// An error and its causes on one line. A cause whose text an earlier message already
/// quotes is left out: many of our errors quote their cause (an I/O error reads best
/// inline), and printing the chain as well said everything twice.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    append_causes(&mut out, e.source());
    out
}

/// Append `cause` and its own causes to `out`, each unless `out` already quotes it.
pub(crate) fn append_causes(out: &mut String, cause: Option<&(dyn std::error::Error + 'static)>) {
    let mut next = cause;
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("reading /x: {source}")]
        Quotes { source: std::io::Error },
        #[error("reading /x")]
        Wraps {
            #[source]
            source: Inner,
        },
    }

    #[derive(Debug, thiserror::Error)]
    #[error("parsing")]
    struct Inner(#[source] std::io::Error);

    #[test]
    fn causes_appear_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let quoted = Outer::Quotes { source: io() };
        assert_eq!(error_chain(&quoted), "reading /x: no such file");
        let wrapped = Outer::Wraps {
            source: Inner(io()),
        };
        assert_eq!(error_chain(&wrapped), "reading /x: parsing: no such file");
    }
}
