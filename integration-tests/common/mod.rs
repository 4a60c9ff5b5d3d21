//! Shared test support: Docker access, unique names, and guards that clean up what a test
//! created even when it fails.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bollard::Docker;

/// Connects to the local Docker daemon. Returns `None` (after saying so) when there is
/// none and this is not CI; panics under `CI=true`, where a missing daemon is a failure.
pub async fn docker_or_skip(test: &str) -> Option<Docker> {
    let result = async {
        let d = Docker::connect_with_unix_defaults()?
            .negotiate_version()
            .await?;
        d.ping().await?;
        Ok::<_, bollard::errors::Error>(d)
    }
    .await;
    match result {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: Docker is required under CI=true but unavailable: {e}");
            }
            eprintln!("SKIPPED {test}: no Docker daemon ({e})");
            None
        }
    }
}

/// A name unique across tests and concurrent runs: prefix, pid, time and a counter.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs an async cleanup to completion from `Drop`, on a thread of its own so that it
/// works whether or not the dropping thread is inside a runtime.
pub fn block_on_cleanup<F>(f: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let handle = std::thread::spawn(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(f),
            Err(e) => eprintln!("cleanup runtime failed: {e}"),
        }
    });
    let _ = handle.join();
}

/// The workload image, built from the static `preemptor-workload` binary under a unique
/// tag and removed (with any container still using it) when dropped.
pub struct TestImage {
    pub docker: Docker,
    pub tag: String,
}

impl TestImage {
    pub async fn build(docker: &Docker, prefix: &str) -> TestImage {
        let tag = format!("{}:test", unique_name(prefix));
        let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_preemptor-workload"));
        let image = TestImage {
            docker: docker.clone(),
            tag: tag.clone(),
        };
        preemptor::emulator::image::build_workload_image(docker, &bin, &tag)
            .await
            .unwrap_or_else(|e| panic!("building {tag}: {e}"));
        image
    }
}

impl Drop for TestImage {
    fn drop(&mut self) {
        let docker = self.docker.clone();
        let tag = self.tag.clone();
        block_on_cleanup(async move {
            let opts = bollard::query_parameters::RemoveImageOptions {
                force: true,
                noprune: false,
                ..Default::default()
            };
            if let Err(e) = docker.remove_image(&tag, Some(opts), None).await {
                eprintln!("removing image {tag}: {e}");
            }
        });
    }
}

/// Removes a container (forcefully) when dropped.
pub struct ContainerGuard {
    pub docker: Docker,
    pub name: String,
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let docker = self.docker.clone();
        let name = self.name.clone();
        block_on_cleanup(async move {
            let opts = bollard::query_parameters::RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            };
            match docker.remove_container(&name, Some(opts)).await {
                Ok(()) => {}
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404,
                    ..
                }) => {}
                Err(e) => eprintln!("removing container {name}: {e}"),
            }
        });
    }
}
