//! Building the `FROM scratch` workload image through the Docker API.
//!
//! Machines running Preemptor's demo and tests have no registry, so the image is made from
//! the static `preemptor-workload` binary that ships beside `preemptor`.

use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::BuildImageOptions;
use futures_util::StreamExt;

/// Where the workload binary lives inside the image.
pub const WORKLOAD_PATH: &str = "/preemptor-workload";

/// Label on every image and container Preemptor's emulator and tests create, so that a
/// cleanup can find leftovers.
pub const CREATED_BY_LABEL: &str = "io.preemptor.created-by";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(
        "cannot find the preemptor-workload binary (looked at {looked:?}); build it with `cargo build` or set PREEMPTOR_WORKLOAD_BIN"
    )]
    BinaryNotFound { looked: Vec<PathBuf> },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is dynamically linked and cannot run in a FROM scratch image; build with the repository's .cargo/config.toml (a static build for the host's target)"
    )]
    NotStatic { path: PathBuf },
    #[error("{path} is not an x86-64 ELF executable")]
    NotElf { path: PathBuf },
    #[error("Docker refused to build image {tag}: {reason}")]
    Build { tag: String, reason: String },
}

/// The workload binary: `$PREEMPTOR_WORKLOAD_BIN`, else `preemptor-workload` next to the
/// running executable (or one directory up, for test binaries under `deps/`).
pub fn find_workload_binary() -> Result<PathBuf, ImageError> {
    let mut looked = Vec::new();
    if let Some(p) = std::env::var_os("PREEMPTOR_WORKLOAD_BIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        looked.push(p);
    }
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(2) {
            let p = dir.join("preemptor-workload");
            if p.is_file() {
                return Ok(p);
            }
            looked.push(p);
        }
    }
    Err(ImageError::BinaryNotFound { looked })
}

/// True when `bytes` is an x86-64 ELF without a PT_INTERP program header, i.e. needs no
/// dynamic loader.
pub fn is_static_elf(bytes: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |o: usize| {
        bytes
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        bytes.get(o..o + 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    if u16_at(18)? != 62 {
        return None; // EM_X86_64
    }
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = u16_at(54)? as usize;
    let phnum = u16_at(56)? as usize;
    for i in 0..phnum {
        let off = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(off)? == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

/// Builds `tag` as `FROM scratch` with the binary at [`WORKLOAD_PATH`] as entrypoint.
pub async fn build_workload_image(
    docker: &Docker,
    binary: &Path,
    tag: &str,
) -> Result<(), ImageError> {
    let bytes = std::fs::read(binary).map_err(|source| ImageError::Read {
        path: binary.to_path_buf(),
        source,
    })?;
    match is_static_elf(&bytes) {
        None => {
            return Err(ImageError::NotElf {
                path: binary.to_path_buf(),
            });
        }
        Some(false) => {
            return Err(ImageError::NotStatic {
                path: binary.to_path_buf(),
            });
        }
        Some(true) => {}
    }
    let dockerfile = format!(
        "FROM scratch\nCOPY preemptor-workload {WORKLOAD_PATH}\nENTRYPOINT [\"{WORKLOAD_PATH}\"]\n"
    );
    let context = tar_context(&[
        ("Dockerfile", dockerfile.as_bytes(), 0o644),
        ("preemptor-workload", &bytes, 0o755),
    ])
    .map_err(|source| ImageError::Read {
        path: binary.to_path_buf(),
        source,
    })?;
    let options = BuildImageOptions {
        dockerfile: "Dockerfile".into(),
        t: Some(tag.to_string()),
        rm: true,
        forcerm: true,
        // Parallel builds of the same binary would share one cached image; when one
        // owner removes it, another build that hit the cache fails ("failed to get
        // digest"). Uncached, each tag is its own image.
        nocache: true,
        labels: Some([(CREATED_BY_LABEL.to_string(), "preemptor".to_string())].into()),
        ..Default::default()
    };
    let mut stream = docker.build_image(
        options,
        None,
        Some(bollard::body_full(bytes::Bytes::from(context))),
    );
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(detail) = info.error_detail {
                    return Err(ImageError::Build {
                        tag: tag.into(),
                        reason: detail.message.unwrap_or_else(|| "unknown error".into()),
                    });
                }
            }
            Err(e) => {
                return Err(ImageError::Build {
                    tag: tag.into(),
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(())
}

fn tar_context(files: &[(&str, &[u8], u32)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data, mode) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(*mode);
        header.set_cksum();
        builder.append_data(&mut header, name, *data)?;
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_check_rejects_garbage_and_reads_headers() {
        assert_eq!(is_static_elf(b""), None);
        assert_eq!(is_static_elf(&[0u8; 128]), None);
        let mut h = vec![0u8; 64 + 56 * 2];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[18] = 62;
        h[32] = 64; // phoff
        h[54] = 56; // phentsize
        h[56] = 2; // phnum
        h[64] = 1; // PT_LOAD
        assert_eq!(is_static_elf(&h), Some(true));
        h[64 + 56] = 3; // PT_INTERP
        assert_eq!(is_static_elf(&h), Some(false));
        h[64 + 56] = 1;
        h[56] = 200; // phnum beyond the buffer
        assert_eq!(is_static_elf(&h), None);
    }

    #[test]
    fn the_built_workload_binary_is_static() {
        let bin = find_workload_binary().expect("cargo builds preemptor-workload before tests");
        let bytes = std::fs::read(&bin).unwrap();
        assert_eq!(is_static_elf(&bytes), Some(true), "{}", bin.display());
    }
}
