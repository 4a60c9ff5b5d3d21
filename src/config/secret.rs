//! Files holding secrets: bearer tokens (read the same way by the agent and the
//! controller) and TLS private keys. Making a token file is `crate::tokens`'s.
//!
//! A secret file must be a regular file, private to its owner (no group or other
//! permission bits: `chmod 600`) and not empty; a token is trimmed of surrounding
//! whitespace. Anything else stops the process at start-up: a secret others can read is a
//! secret others can use.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A token is a few dozen bytes; anything this large is the wrong file.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("reading the {what} {path}: {error}")]
    Read {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("the {what} {path} is {kind}, not a regular file")]
    NotAFile {
        what: &'static str,
        path: PathBuf,
        kind: &'static str,
    },
    #[error(
        "the {what} {path} has mode {mode:04o}: group or others may read or write it; \
         run `chmod 600 {path}` (owner read/write only)"
    )]
    Permissions {
        what: &'static str,
        path: PathBuf,
        mode: u32,
    },
    #[error("the {what} {path} is larger than {max} bytes")]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        max: u64,
    },
    #[error("the {what} {path} is empty")]
    Empty { what: &'static str, path: PathBuf },
    #[error("creating the {what} {path}: {error}")]
    Create {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The token in `path`, whitespace trimmed, after checking the file is a private,
/// regular, non-empty file.
pub fn read_token_file(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let what = "token file";
    let raw = read_secret_file(path, what, MAX_TOKEN_FILE_BYTES)?;
    let token = raw.trim_ascii();
    if token.is_empty() {
        return Err(SecretFileError::Empty {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(token.to_vec())
}

/// The bytes of `path` (`what` names it in errors), after checking the file is a
/// private, regular, non-empty file of at most `max` bytes.
pub fn read_secret_file(
    path: &Path,
    what: &'static str,
    max: u64,
) -> Result<Vec<u8>, SecretFileError> {
    let read_error = |error| SecretFileError::Read {
        what,
        path: path.to_path_buf(),
        error,
    };
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer. The checks use the
    // opened file's metadata, so the file cannot be swapped between check and read.
    let mut file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    check_metadata(path, what, &meta)?;
    let mut raw = Vec::new();
    (&mut file)
        .take(max + 1)
        .read_to_end(&mut raw)
        .map_err(read_error)?;
    if raw.len() as u64 > max {
        return Err(SecretFileError::TooLarge {
            what,
            path: path.to_path_buf(),
            max,
        });
    }
    if raw.is_empty() {
        return Err(SecretFileError::Empty {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(raw)
}

fn check_metadata(path: &Path, what: &'static str, meta: &Metadata) -> Result<(), SecretFileError> {
    let t = meta.file_type();
    if !t.is_file() {
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a named pipe"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a file"
        };
        return Err(SecretFileError::NotAFile {
            what,
            path: path.to_path_buf(),
            kind,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretFileError::Permissions {
            what,
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;

    fn token_file(dir: &Path, contents: &str, mode: u32) -> PathBuf {
        let p = dir.join("token");
        std::fs::write(&p, contents).unwrap();
        std::fs::set_permissions(&p, Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn a_private_file_is_read_and_trimmed() {
        let tmp = tempfile::tempdir().unwrap();
        for mode in [0o600, 0o400, 0o700] {
            let p = token_file(tmp.path(), "  s3cret\n", mode);
            assert_eq!(read_token_file(&p).unwrap(), b"s3cret", "{mode:o}");
        }
    }

    #[test]
    fn group_or_other_bits_are_refused_with_the_mode_and_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o666] {
            let p = token_file(tmp.path(), "s3cret", mode);
            let e = read_token_file(&p).unwrap_err();
            assert!(
                matches!(e, SecretFileError::Permissions { mode: m, .. } if m == mode),
                "{mode:o}: {e:?}"
            );
            let text = e.to_string();
            assert!(text.contains(&format!("{mode:04o}")), "{text}");
            assert!(
                text.contains(&format!("chmod 600 {}", p.display())),
                "{text}"
            );
            assert!(!text.contains("s3cret"), "{text}");
        }
    }

    #[test]
    fn empty_and_whitespace_only_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for contents in ["", " \n\t\n"] {
            let p = token_file(tmp.path(), contents, 0o600);
            assert!(
                matches!(read_token_file(&p), Err(SecretFileError::Empty { .. })),
                "{contents:?}"
            );
        }
    }

    #[test]
    fn directories_pipes_and_missing_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o700)).unwrap();
        let e = read_token_file(&dir).unwrap_err();
        assert!(
            matches!(
                e,
                SecretFileError::NotAFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{e:?}"
        );

        let fifo = tmp.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Refused without blocking, though no writer ever opens the pipe.
        let e = read_token_file(&fifo).unwrap_err();
        assert!(
            matches!(
                e,
                SecretFileError::NotAFile {
                    kind: "a named pipe",
                    ..
                }
            ),
            "{e:?}"
        );

        let e = read_token_file(&tmp.path().join("none")).unwrap_err();
        assert!(matches!(e, SecretFileError::Read { .. }), "{e:?}");
        assert!(e.to_string().contains("none"), "{e}");
    }

    #[test]
    fn a_symlink_is_judged_by_its_target() {
        let tmp = tempfile::tempdir().unwrap();
        let target = token_file(tmp.path(), "s3cret", 0o600);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_token_file(&link).unwrap(), b"s3cret");
        std::fs::set_permissions(&target, Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_token_file(&link),
            Err(SecretFileError::Permissions { mode: 0o644, .. })
        ));
    }

    #[test]
    fn an_oversized_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let big = "x".repeat(MAX_TOKEN_FILE_BYTES as usize + 1);
        let p = token_file(tmp.path(), &big, 0o600);
        assert!(matches!(
            read_token_file(&p),
            Err(SecretFileError::TooLarge { .. })
        ));
    }
}
