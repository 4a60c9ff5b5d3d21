//! Errors of the simulator boundary: trace files, cost files, settings, outputs.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A bad line (or JSON value starting at that line) in an input file.
    #[error("{}:{line}: {msg}", path.display())]
    Input {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    /// A problem with a whole input file (empty trace, wrong format).
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    #[error("invalid simulation setting: {0}")]
    Setting(String),
    /// The run could not go on (a stall, an oversized container, a policy bug).
    #[error(transparent)]
    Engine(#[from] crate::sim::engine::EngineError),
    #[error("plotting {}: {msg}", path.display())]
    Plot { path: PathBuf, msg: String },
}

impl SimError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> SimError {
        SimError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn input(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        SimError::Input {
            path: path.into(),
            line,
            msg: msg.into(),
        }
    }

    pub(crate) fn file(path: impl Into<PathBuf>, msg: impl Into<String>) -> SimError {
        SimError::File {
            path: path.into(),
            msg: msg.into(),
        }
    }
}
