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

/// The Python that runs the third-party client scripts: `$PYTHON` (`.ci/run` sets it to
/// its venv's), else `python3` from PATH.
pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
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
                    status_code: 404, ..
                }) => {}
                Err(e) => eprintln!("removing container {name}: {e}"),
            }
        });
    }
}

/// Follows a container's stdout until a line starts with `prefix` (at most 10 minutes).
pub async fn wait_for_log_line(docker: &Docker, name: &str, prefix: &str) -> Result<(), String> {
    use futures_util::StreamExt;
    let opts = bollard::query_parameters::LogsOptions {
        follow: true,
        stdout: true,
        tail: "all".into(),
        ..Default::default()
    };
    let mut stream = docker.logs(name, Some(opts));
    let mut text = String::new();
    let search = async {
        while let Some(chunk) = stream.next().await {
            text.push_str(
                &chunk
                    .map_err(|e| format!("logs of {name}: {e}"))?
                    .to_string(),
            );
            if text.lines().any(|l| l.starts_with(prefix)) {
                return Ok(());
            }
        }
        Err(format!("{name} ended before printing {prefix:?}"))
    };
    tokio::time::timeout(std::time::Duration::from_secs(600), search)
        .await
        .map_err(|_| format!("{name}: no {prefix:?} within 600 s"))?
}

/// What a running container's cgroups say right now.
pub struct ContainerSample {
    /// `rss` under cgroup v1, `anon` under v2.
    pub anonymous_bytes: u64,
    /// Share of CFS periods so far in which the container was throttled.
    pub throttled_share: f64,
}

pub async fn sample_container(docker: &Docker, name: &str) -> Result<ContainerSample, String> {
    use futures_util::StreamExt;
    let opts = bollard::query_parameters::StatsOptions {
        stream: false,
        one_shot: true,
    };
    let stats = docker
        .stats(name, Some(opts))
        .next()
        .await
        .ok_or_else(|| format!("no stats for {name}"))?
        .map_err(|e| format!("stats of {name}: {e}"))?;
    let by_kind = stats
        .memory_stats
        .and_then(|m| m.stats)
        .ok_or_else(|| format!("no memory stats for {name}"))?;
    let anonymous_bytes = by_kind
        .get("rss")
        .or_else(|| by_kind.get("anon"))
        .copied()
        .ok_or_else(|| format!("neither rss nor anon in {by_kind:?}"))?;
    let throttling = stats.cpu_stats.and_then(|c| c.throttling_data);
    let throttled_share = match throttling.and_then(|t| Some((t.throttled_periods?, t.periods?))) {
        Some((throttled, periods)) if periods > 0 => throttled as f64 / periods as f64,
        _ => 0.0,
    };
    Ok(ContainerSample {
        anonymous_bytes,
        throttled_share,
    })
}

/// Creates and starts a container of `image` running the workload with the words of `line`
/// as arguments. The guard exists before the container, so it is removed on any failure.
pub async fn start_workload(
    docker: &Docker,
    image: &TestImage,
    line: &str,
    host_config: bollard::models::HostConfig,
) -> Result<ContainerGuard, String> {
    let name = unique_name("preemptor-workload");
    let guard = ContainerGuard {
        docker: docker.clone(),
        name: name.clone(),
    };
    let body = bollard::models::ContainerCreateBody {
        image: Some(image.tag.clone()),
        cmd: Some(line.split_whitespace().map(str::to_owned).collect()),
        host_config: Some(host_config),
        ..Default::default()
    };
    let opts = bollard::query_parameters::CreateContainerOptions {
        name: Some(name.clone()),
        ..Default::default()
    };
    docker
        .create_container(Some(opts), body)
        .await
        .map_err(|e| format!("creating {name}: {e}"))?;
    docker
        .start_container(&name, None)
        .await
        .map_err(|e| format!("starting {name}: {e}"))?;
    Ok(guard)
}

/// A configuration directory for the controller binary: the shipped
/// capacity-scheduler.xml, each token in its own `chmod 600` file (the controller refuses
/// others), and a preemptor-site.xml with `props`; the controller's state directory is
/// `<conf>/state` unless `props` names one.
pub fn controller_conf_dir(
    conf: &std::path::Path,
    tokens: &[(&str, &str)],
    props: &[(&str, String)],
) {
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/hadoop-conf/capacity-scheduler.xml"
        ),
        conf.join("capacity-scheduler.xml"),
    )
    .expect("copy capacity-scheduler.xml");
    for (file, token) in tokens {
        std::fs::write(conf.join(file), token).expect("token");
        std::fs::set_permissions(
            conf.join(file),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod token");
    }
    let mut xml = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    let state = (
        "yarn.preemptor.controller.state-dir",
        conf.join("state").display().to_string(),
    );
    let own_state = (!props.iter().any(|(k, _)| *k == state.0)).then_some(&state);
    for (k, v) in props.iter().chain(own_state) {
        xml.push_str(&format!(
            "  <property><name>{k}</name><value>{v}</value></property>\n"
        ));
    }
    xml.push_str("</configuration>\n");
    std::fs::write(conf.join("preemptor-site.xml"), xml).expect("preemptor-site.xml");
}
