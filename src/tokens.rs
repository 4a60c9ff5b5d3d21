//! Making bearer tokens and token files (`preemptor token`, which the Debian package's
//! postinst runs, and the demo's per-run tokens). Reading and checking token files is
//! `config::secret`'s, which only reads.

use std::fs::File;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::config::secret::{SecretFileError, read_token_file};

/// What [`create_token_file`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenFile {
    Created,
    /// A valid token file was there already and is left as it is.
    Kept,
}

/// Bytes of randomness in a generated token (printed as twice as many hex digits).
const TOKEN_BYTES: usize = 32;

/// Writes a new random token to `path` (mode 600, created exclusively), unless a valid
/// token file is there already. A file that is there but fails the checks of
/// [`read_token_file`] is an error, never overwritten.
pub fn create_token_file(path: &Path) -> Result<TokenFile, SecretFileError> {
    use std::io::Write;
    let what = "token file";
    let create_error = |error| SecretFileError::Create {
        what,
        path: path.to_path_buf(),
        error,
    };
    match std::fs::symlink_metadata(path) {
        Ok(_) => return read_token_file(path).map(|_| TokenFile::Kept),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(SecretFileError::Read {
                what,
                path: path.to_path_buf(),
                error,
            });
        }
    }
    let mut token = random_token().map_err(create_error)?;
    token.push('\n');
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(create_error)?;
    // The mode above is filtered by the umask; 600 is what readers demand.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(create_error)?;
    file.write_all(token.as_bytes()).map_err(create_error)?;
    file.sync_all().map_err(create_error)?;
    Ok(TokenFile::Created)
}

/// [`TOKEN_BYTES`] from the operating system's random source, hex-encoded.
pub fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_tokens_are_private_random_and_kept_on_a_second_call() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.token");
        let b = dir.path().join("b.token");
        assert_eq!(create_token_file(&a).unwrap(), TokenFile::Created);
        assert_eq!(create_token_file(&b).unwrap(), TokenFile::Created);
        let ta = read_token_file(&a).unwrap();
        assert_eq!(ta.len(), 2 * TOKEN_BYTES);
        assert!(ta.iter().all(u8::is_ascii_hexdigit));
        assert_ne!(ta, read_token_file(&b).unwrap());
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(create_token_file(&a).unwrap(), TokenFile::Kept);
        assert_eq!(read_token_file(&a).unwrap(), ta);
        // A world-readable file is refused, not replaced.
        let open = dir.path().join("open.token");
        std::fs::write(&open, "secret").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            create_token_file(&open),
            Err(SecretFileError::Permissions { .. })
        ));
        assert_eq!(std::fs::read_to_string(&open).unwrap(), "secret");
        let missing_dir = dir.path().join("no/such/dir/t");
        assert!(matches!(
            create_token_file(&missing_dir),
            Err(SecretFileError::Create { .. })
        ));
    }
}
