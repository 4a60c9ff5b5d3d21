//! The Docker container runtime: each task container is a real Docker container named
//! exactly after its YARN container id, in the cgroup `/hadoop-yarn/<containerId>`, with
//! the allocation's memory and CPU (vcores times a scale factor) enforced — what YARN's
//! DockerLinuxContainerRuntime does.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, ListContainersOptions, LogsOptions,
    RemoveContainerOptions, RemoveImageOptions, WaitContainerOptions,
};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use crate::cluster::ContainerId;
use crate::resources::Resource;

use super::image::{CREATED_BY_LABEL, build_workload_image, find_workload_binary};
use super::runtime::{
    ContainerRuntime, ContainerSignal, Events, ExitInfo, LAUNCH_FAILED, LaunchSpec, RuntimeError,
    RuntimeKind, parse_progress,
};
use super::state::exit;

/// Value of [`CREATED_BY_LABEL`] on the emulator's containers.
pub const CREATED_BY_EMULATOR: &str = "preemptor-emulator";
/// Which emulator instance created a container, so one emulator's shutdown leaves the
/// others' containers alone.
pub const INSTANCE_LABEL: &str = "io.preemptor.emulator.instance";
pub const CONTAINER_ID_LABEL: &str = "io.preemptor.yarn.container-id";
pub const APPLICATION_ID_LABEL: &str = "io.preemptor.yarn.application-id";
pub const NODE_ID_LABEL: &str = "io.preemptor.yarn.node-id";
pub const MEMORY_MB_LABEL: &str = "io.preemptor.yarn.memory-mb";
pub const VCORES_LABEL: &str = "io.preemptor.yarn.vcores";

/// CFS period used for every container; the quota is vcores x scale x period.
pub const CPU_PERIOD_US: i64 = 100_000;

#[derive(Clone, Debug)]
pub struct DockerRuntimeConfig {
    /// An existing image whose entrypoint is `preemptor-workload`; when `None`, one is
    /// built from the workload binary and removed at shutdown.
    pub image: Option<String>,
    /// Real CPUs per vcore.
    pub cpu_scale: f64,
    /// Unique per emulator; labels every container.
    pub instance: String,
}

/// The Docker limits for a YARN allocation: memory and memory-swap equal (no swap beyond
/// the limit, as YARN's Docker runtime), CFS quota for vcores x scale, and YARN's 1024
/// cpu shares per vcore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DockerLimits {
    pub memory_bytes: i64,
    pub memory_swap_bytes: i64,
    pub cpu_period_us: i64,
    pub cpu_quota_us: i64,
    pub cpu_shares: i64,
}

impl DockerLimits {
    pub fn for_allocation(r: Resource, cpu_scale: f64) -> DockerLimits {
        let memory = i64::try_from(r.memory_mb.saturating_mul(1024 * 1024)).unwrap_or(i64::MAX);
        let quota = (r.vcores as f64 * cpu_scale * CPU_PERIOD_US as f64).round();
        // Docker refuses quotas under 1 ms.
        let quota = if quota.is_finite() {
            (quota as i64).max(1000)
        } else {
            1000
        };
        DockerLimits {
            memory_bytes: memory,
            memory_swap_bytes: memory,
            cpu_period_us: CPU_PERIOD_US,
            cpu_quota_us: quota,
            cpu_shares: 1024 * i64::from(r.vcores.max(1)),
        }
    }

    /// Threads the workload should run so that it can use the CPU it gets.
    pub fn threads(&self) -> u32 {
        let cpus = self.cpu_quota_us as f64 / self.cpu_period_us as f64;
        (cpus.ceil() as u32).max(1)
    }
}

/// `/hadoop-yarn/<containerId>`, as YARN's cgroups handler lays out containers.
pub fn cgroup_parent(id: &ContainerId) -> String {
    format!("/hadoop-yarn/{id}")
}

#[derive(Clone)]
pub struct DockerRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    docker: Docker,
    image: String,
    owns_image: bool,
    cpu_scale: f64,
    instance: String,
    created: Mutex<HashSet<String>>,
}

fn docker_err(e: bollard::errors::Error) -> RuntimeError {
    RuntimeError::Docker(e.to_string())
}

/// Connects to the local daemon (negotiating the API version) and checks it answers.
pub async fn connect() -> Result<Docker, RuntimeError> {
    let docker = Docker::connect_with_unix_defaults()
        .map_err(docker_err)?
        .negotiate_version()
        .await
        .map_err(docker_err)?;
    docker.ping().await.map_err(docker_err)?;
    Ok(docker)
}

impl DockerRuntime {
    pub async fn start(docker: Docker, config: DockerRuntimeConfig) -> Result<Self, RuntimeError> {
        if !(config.cpu_scale.is_finite() && config.cpu_scale > 0.0) {
            return Err(RuntimeError::Docker(format!(
                "cpu scale must be a positive number, got {}",
                config.cpu_scale
            )));
        }
        let (image, owns_image) = match config.image {
            Some(i) => (i, false),
            None => {
                let tag = format!("preemptor-workload:emulator-{}", config.instance);
                let binary = find_workload_binary()?;
                build_workload_image(&docker, &binary, &tag).await?;
                (tag, true)
            }
        };
        Ok(DockerRuntime {
            inner: Arc::new(Inner {
                docker,
                image,
                owns_image,
                cpu_scale: config.cpu_scale,
                instance: config.instance,
                created: Mutex::new(HashSet::new()),
            }),
        })
    }
}

impl Inner {
    async fn launch(&self, spec: &LaunchSpec, limits: DockerLimits) -> Result<(), RuntimeError> {
        let name = spec.container.to_string();
        let labels: HashMap<String, String> = [
            (CREATED_BY_LABEL, CREATED_BY_EMULATOR.to_string()),
            (INSTANCE_LABEL, self.instance.clone()),
            (CONTAINER_ID_LABEL, name.clone()),
            (
                APPLICATION_ID_LABEL,
                spec.container.application().to_string(),
            ),
            (NODE_ID_LABEL, spec.node.to_string()),
            (MEMORY_MB_LABEL, spec.resource.memory_mb.to_string()),
            (VCORES_LABEL, spec.resource.vcores.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let body = ContainerCreateBody {
            image: Some(self.image.clone()),
            cmd: Some(spec.command.clone()),
            labels: Some(labels),
            host_config: Some(HostConfig {
                memory: Some(limits.memory_bytes),
                memory_swap: Some(limits.memory_swap_bytes),
                cpu_period: Some(limits.cpu_period_us),
                cpu_quota: Some(limits.cpu_quota_us),
                cpu_shares: Some(limits.cpu_shares),
                cgroup_parent: Some(cgroup_parent(&spec.container)),
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(name.clone()),
                    ..Default::default()
                }),
                body,
            )
            .await
            .map_err(docker_err)?;
        if let Ok(mut c) = self.created.lock() {
            c.insert(name.clone());
        }
        self.docker
            .start_container(&name, None)
            .await
            .map_err(docker_err)
    }

    async fn wait(&self, name: &str) -> Result<i64, RuntimeError> {
        let mut stream = self
            .docker
            .wait_container(name, None::<WaitContainerOptions>);
        match stream.next().await {
            Some(Ok(r)) => Ok(r.status_code),
            // bollard reports a non-zero exit as an error carrying the code.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(docker_err(e)),
            None => Err(RuntimeError::Docker(format!(
                "wait on {name} ended without a status"
            ))),
        }
    }

    async fn remove(&self, name: &str) {
        remove_container(&self.docker, name).await;
        if let Ok(mut c) = self.created.lock() {
            c.remove(name);
        }
    }
}

/// Docker's cgroupfs driver creates the parent `/hadoop-yarn/<id>` but never removes it.
fn remove_cgroup_parent(id: &ContainerId) {
    let rel = PathBuf::from(format!("hadoop-yarn/{id}"));
    let root = Path::new("/sys/fs/cgroup");
    let mut dirs = vec![root.join(&rel)];
    if let Ok(entries) = std::fs::read_dir(root) {
        dirs.extend(entries.flatten().map(|e| e.path().join(&rel)));
    }
    for d in dirs {
        if d.is_dir()
            && let Err(e) = std::fs::remove_dir(&d)
        {
            tracing::debug!(path = %d.display(), error = %e, "cgroup directory not removed");
        }
    }
}

impl ContainerRuntime for DockerRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Docker
    }

    fn run(&self, spec: LaunchSpec, events: Events) -> BoxFuture<'static, ExitInfo> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let name = spec.container.to_string();
            let limits = DockerLimits::for_allocation(spec.resource, inner.cpu_scale);
            if let Err(e) = inner.launch(&spec, limits).await {
                inner.remove(&name).await;
                return ExitInfo {
                    exit_status: LAUNCH_FAILED,
                    diagnostics: format!("container launch failed: {e}"),
                };
            }
            events.started();
            let logs = inner.docker.logs(
                &name,
                Some(LogsOptions {
                    follow: true,
                    stdout: true,
                    stderr: true,
                    ..Default::default()
                }),
            );
            let progress = events.clone();
            let reader = tokio::spawn(async move {
                let mut logs = logs;
                let mut last_line = String::new();
                let mut partial = String::new();
                while let Some(Ok(chunk)) = logs.next().await {
                    partial.push_str(&String::from_utf8_lossy(chunk.as_ref()));
                    while let Some(i) = partial.find('\n') {
                        let line: String = partial.drain(..=i).collect();
                        if let Some(p) = parse_progress(&line) {
                            progress.progress(p);
                        }
                        last_line = line.trim().to_string();
                    }
                    // A task printing without newlines must not grow this forever.
                    if partial.len() > 64 * 1024 {
                        partial.clear();
                    }
                }
                last_line
            });
            let code = inner.wait(&name).await;
            let oom = match inner.docker.inspect_container(&name, None).await {
                Ok(i) => i.state.and_then(|s| s.oom_killed).unwrap_or(false),
                Err(_) => false,
            };
            let last_line = reader.await.unwrap_or_default();
            inner.remove(&name).await;
            match code {
                Ok(_) if oom => ExitInfo {
                    exit_status: exit::KILLED_EXCEEDED_PMEM,
                    diagnostics: format!(
                        "Container {name} is running beyond physical memory limits: limit {} MB. Killing container.",
                        spec.resource.memory_mb
                    ),
                },
                Ok(c) => ExitInfo {
                    exit_status: i32::try_from(c).unwrap_or(LAUNCH_FAILED),
                    diagnostics: if c == 0 {
                        last_line
                    } else {
                        format!(
                            "Exception from container-launch. Exit code: {c}. Last output: {last_line}"
                        )
                    },
                },
                Err(e) => ExitInfo {
                    exit_status: exit::ABORTED,
                    diagnostics: format!("lost track of the container: {e}"),
                },
            }
        })
    }

    fn signal(
        &self,
        container: ContainerId,
        signal: ContainerSignal,
    ) -> BoxFuture<'static, Result<(), RuntimeError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let opts = KillContainerOptions {
                signal: signal.unix_name().to_string(),
            };
            match inner
                .docker
                .kill_container(&container.to_string(), Some(opts))
                .await
            {
                Ok(()) => Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404 | 409,
                    ..
                }) => Err(RuntimeError::NotRunning(container)),
                Err(e) => Err(docker_err(e)),
            }
        })
    }

    fn shutdown(&self) -> BoxFuture<'static, Result<usize, RuntimeError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let known: HashSet<String> =
                inner.created.lock().map(|c| c.clone()).unwrap_or_default();
            let removed = remove_instance_containers(&inner.docker, &inner.instance, known).await?;
            if let Ok(mut c) = inner.created.lock() {
                c.clear();
            }
            if inner.owns_image {
                let opts = RemoveImageOptions {
                    force: true,
                    ..Default::default()
                };
                if let Err(e) = inner
                    .docker
                    .remove_image(&inner.image, Some(opts), None)
                    .await
                {
                    tracing::warn!(image = %inner.image, error = %e, "removing the workload image");
                }
            }
            Ok(removed)
        })
    }
}

async fn remove_container(docker: &Docker, name: &str) {
    let opts = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    match docker.remove_container(name, Some(opts)).await {
        Ok(())
        | Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(e) => tracing::warn!(container = name, error = %e, "removing Docker container"),
    }
    if let Ok(id) = name.parse::<ContainerId>() {
        remove_cgroup_parent(&id);
    }
}

/// Removes every container labelled with emulator `instance` (plus `known` names), and
/// their cgroup parents. Used at shutdown, and by cleanups that lost the handle.
pub async fn remove_instance_containers(
    docker: &Docker,
    instance: &str,
    known: HashSet<String>,
) -> Result<usize, RuntimeError> {
    let filters: HashMap<String, Vec<String>> = [(
        "label".to_string(),
        vec![format!("{INSTANCE_LABEL}={instance}")],
    )]
    .into();
    let listed = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .map_err(docker_err)?;
    let mut names = known;
    for c in listed {
        if let Some(n) = c.names.and_then(|n| n.into_iter().next()) {
            names.insert(n.trim_start_matches('/').to_string());
        }
    }
    for n in &names {
        remove_container(docker, n).await;
    }
    Ok(names.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_scale_vcores_and_pin_swap_to_memory() {
        let l = DockerLimits::for_allocation(Resource::new(2048, 2), 0.25);
        assert_eq!(l.memory_bytes, 2048 * 1024 * 1024);
        assert_eq!(l.memory_swap_bytes, l.memory_bytes);
        assert_eq!(l.cpu_quota_us, 50_000);
        assert_eq!(l.cpu_shares, 2048);
        assert_eq!(l.threads(), 1);
        let tiny = DockerLimits::for_allocation(Resource::new(1, 1), 0.001);
        assert_eq!(tiny.cpu_quota_us, 1000);
        assert_eq!(
            DockerLimits::for_allocation(Resource::new(1, 3), 1.0).threads(),
            3
        );
    }

    #[test]
    fn cgroup_parent_follows_yarn() {
        let id: ContainerId = "container_e01_1700000000000_0001_01_000002"
            .parse()
            .unwrap();
        assert_eq!(
            cgroup_parent(&id),
            "/hadoop-yarn/container_e01_1700000000000_0001_01_000002"
        );
    }
}
