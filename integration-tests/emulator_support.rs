//! Helpers shared by the emulator's integration tests.

#![allow(dead_code)]

use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::ListContainersOptions;
use preemptor::emulator::EmulatorHandle;
use preemptor::emulator::docker::{INSTANCE_LABEL, remove_instance_containers};
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::resources::Resource;
use preemptor::yarn::dto::{NewApplication, YarnApplicationState};

use crate::common::block_on_cleanup;

/// Owns the emulator; if the test fails before its shutdown, stops it launching and
/// removes its containers.
pub struct EmulatorGuard {
    pub handle: Option<EmulatorHandle>,
    pub docker: Docker,
    pub instance: String,
}

impl EmulatorGuard {
    pub fn handle(&self) -> &EmulatorHandle {
        self.handle.as_ref().expect("emulator running")
    }
}

impl Drop for EmulatorGuard {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        drop(handle);
        let docker = self.docker.clone();
        let instance = self.instance.clone();
        block_on_cleanup(async move {
            // Twice: a launch already under way when the handle went may still land.
            for _ in 0..2 {
                let known = Default::default();
                if let Err(e) = remove_instance_containers(&docker, &instance, known).await {
                    eprintln!("cleaning up emulator {instance}: {e}");
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
    }
}

/// Submits through the REST API as any client would: new-application, then POST /apps.
pub async fn submit(
    rm: &str,
    name: &str,
    queue: &str,
    spec: &WorkloadSpec,
    am: Resource,
) -> String {
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let new: NewApplication = http
        .post(format!("{rm}/ws/v1/cluster/apps/new-application"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ctx = spec.submission(
        &new.application_id,
        name,
        queue,
        vec!["emulator-test".into()],
        am,
    );
    let resp = http
        .post(format!("{rm}/ws/v1/cluster/apps?user.name=tester"))
        .json(&ctx)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202, "{:?}", resp.text().await);
    new.application_id
}

/// Polls the emulator's state every 50 ms until `ok` holds, for at most `secs`.
pub async fn wait_until(
    h: &EmulatorHandle,
    what: &str,
    secs: u64,
    ok: impl Fn(&preemptor::emulator::state::RmState) -> bool,
) {
    for _ in 0..secs * 20 {
        if h.inspect(&ok) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out after {secs} s waiting for {what}");
}

pub async fn wait_running(h: &EmulatorHandle, app: &str) {
    let id = app.parse().unwrap();
    wait_until(h, &format!("{app} to run"), 15, |s| {
        s.apps[&id].state == YarnApplicationState::Running
    })
    .await;
}

pub async fn get_json(http: &reqwest::Client, url: &str) -> serde_json::Value {
    let r = http.get(url).send().await.unwrap();
    assert!(r.status().is_success(), "GET {url}: {}", r.status());
    r.json().await.unwrap()
}

/// Runs one of `integration-tests/python/`'s third-party client scripts with `arg`, and
/// returns the JSON object it prints.
pub async fn run_client_script(script: &str, arg: &str) -> serde_json::Value {
    run_client_script_with_env(script, arg, &[]).await
}

/// [`run_client_script`] with `env` added to the script's environment.
pub async fn run_client_script_with_env(
    script: &str,
    arg: &str,
    env: &[(&str, String)],
) -> serde_json::Value {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("integration-tests/python")
        .join(script);
    let arg = arg.to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(crate::common::python())
            .arg(&script)
            .arg(&arg)
            .envs(env)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'yarn_api_client'"),
        "yarn-api-client is not installed for {}: bash .ci/run installs it in .venv and sets PYTHON",
        crate::common::python()
    );
    assert!(output.status.success(), "client script failed:\n{stderr}");
    serde_json::from_slice(&output.stdout).expect("script prints JSON")
}

/// Every Docker container, running or not, that the emulator instance labelled.
pub async fn instance_containers(
    docker: &Docker,
    instance: &str,
) -> Vec<bollard::models::ContainerSummary> {
    let filters = [(
        "label".to_string(),
        vec![format!("{INSTANCE_LABEL}={instance}")],
    )]
    .into();
    docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .expect("Docker lists containers")
}
