//! Building the `FROM scratch` workload image through the Docker API.
//!
//! Machines running Preemptor's demo and tests have no registry, so the image is made from
//! the `preemptor-workload` binary that ships beside `preemptor`, with the dynamic loader
//! and the shared libraries it lists for the binary (glibc's, found on this machine).

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
    #[error("cannot list the shared libraries of {path} with its loader: {reason}")]
    Libraries { path: PathBuf, reason: String },
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

/// The dynamic loader an x86-64 ELF names (its PT_INTERP segment): `Some(None)` for a
/// static executable, `None` when `bytes` is not an x86-64 ELF.
pub fn elf_interpreter(bytes: &[u8]) -> Option<Option<PathBuf>> {
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
            let start = usize::try_from(u64_at(off + 8)?).ok()?;
            let len = usize::try_from(u64_at(off + 32)?).ok()?;
            let raw = bytes.get(start..start.checked_add(len)?)?;
            let path = raw.split(|&b| b == 0).next()?;
            return Some(Some(PathBuf::from(std::str::from_utf8(path).ok()?)));
        }
    }
    Some(None)
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
    let libraries = match elf_interpreter(&bytes) {
        None => {
            return Err(ImageError::NotElf {
                path: binary.to_path_buf(),
            });
        }
        Some(None) => Vec::new(),
        Some(Some(loader)) => shared_libraries(&loader, binary).await?,
    };
    let mut files = Vec::with_capacity(libraries.len());
    for lib in &libraries {
        let data = std::fs::read(lib).map_err(|source| ImageError::Read {
            path: lib.clone(),
            source,
        })?;
        files.push((format!("rootfs{}", lib.display()), data, 0o755));
    }
    let dockerfile = format!("FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"{WORKLOAD_PATH}\"]\n");
    let mut entries: Vec<(&str, &[u8], u32)> = vec![
        ("Dockerfile", dockerfile.as_bytes(), 0o644),
        ("rootfs/preemptor-workload", &bytes, 0o755),
    ];
    entries.extend(files.iter().map(|(n, d, m)| (n.as_str(), d.as_slice(), *m)));
    let context = tar_context(&entries).map_err(|source| ImageError::Read {
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

/// The dynamic loader and the shared libraries `binary` loads, as absolute paths on this
/// machine, as its loader lists them (`ld.so --list`, what `ldd` runs; the loader is
/// there wherever the binary runs, `ldd` not always: a FROM scratch image).
async fn shared_libraries(loader: &Path, binary: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let failed = |reason: String| ImageError::Libraries {
        path: binary.to_path_buf(),
        reason,
    };
    let out = tokio::process::Command::new(loader)
        .arg("--list")
        .arg(binary)
        .output()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_ldd(&String::from_utf8_lossy(&out.stdout)).map_err(failed)
}

/// Paths in `ld.so --list` (and `ldd`) output: `libc.so.6 => /lib/.../libc.so.6 (0x...)` and the loader's
/// `/lib64/ld-linux-x86-64.so.2 (0x...)`; the vDSO has no file. A library ldd could not
/// find is an error.
fn parse_ldd(out: &str) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let target = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(format!("{} not found", name.trim()));
                }
                rest
            }
            None => line,
        };
        let path = target.split_whitespace().next().unwrap_or("");
        if path.starts_with('/') {
            paths.push(PathBuf::from(path));
        }
    }
    if paths.is_empty() {
        return Err(format!("no library in its output: {out:?}"));
    }
    Ok(paths)
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
    fn elf_check_rejects_garbage_and_reads_the_interpreter() {
        assert_eq!(elf_interpreter(b""), None);
        assert_eq!(elf_interpreter(&[0u8; 128]), None);
        let mut h = vec![0u8; 64 + 56 * 2];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[18] = 62;
        h[32] = 64; // phoff
        h[54] = 56; // phentsize
        h[56] = 2; // phnum
        h[64] = 1; // PT_LOAD
        assert_eq!(elf_interpreter(&h), Some(None));
        let interp = b"/lib64/ld-linux-x86-64.so.2\0";
        let at = h.len();
        h.extend_from_slice(interp);
        let ph = 64 + 56;
        h[ph] = 3; // PT_INTERP
        h[ph + 8..ph + 16].copy_from_slice(&(at as u64).to_le_bytes());
        h[ph + 32..ph + 40].copy_from_slice(&(interp.len() as u64).to_le_bytes());
        assert_eq!(
            elf_interpreter(&h),
            Some(Some(PathBuf::from("/lib64/ld-linux-x86-64.so.2")))
        );
        h[ph + 32..ph + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(elf_interpreter(&h), None, "a segment beyond the file");
        h[ph] = 1;
        h[56] = 200; // phnum beyond the buffer
        assert_eq!(elf_interpreter(&h), None);
    }

    #[test]
    fn ldd_output_gives_the_loader_and_the_libraries() {
        let out = "\tlinux-vdso.so.1 (0x00007ffc4b5f2000)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(out).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
        let missing = "\tlibgssapi_krb5.so.2 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n";
        assert!(
            parse_ldd(missing)
                .unwrap_err()
                .contains("libgssapi_krb5.so.2 not found")
        );
        assert!(parse_ldd("\tstatically linked\n").is_err());
    }

    #[tokio::test]
    async fn the_built_workload_binary_has_everything_it_loads_at_hand() {
        let bin = find_workload_binary().expect("cargo builds preemptor-workload before tests");
        let bytes = std::fs::read(&bin).unwrap();
        // Dynamically linked, as every binary of the build (.cargo/config.toml).
        let loader = elf_interpreter(&bytes)
            .flatten()
            .unwrap_or_else(|| panic!("{} names no loader", bin.display()));
        let libs = shared_libraries(&loader, &bin).await.unwrap();
        assert!(
            libs.iter().any(|l| l.to_string_lossy().contains("libc.so")),
            "{libs:?}"
        );
        assert!(libs.iter().all(|l| l.is_file()), "{libs:?}");
    }
}
