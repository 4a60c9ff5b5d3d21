//! Helpers shared by the emulator's integration tests.

#![allow(dead_code)]

use std::time::Duration;

use preemptor::emulator::EmulatorHandle;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::resources::Resource;
use preemptor::yarn::dto::{NewApplication, YarnApplicationState};

/// Submits through the REST API as any client would: new-application, then POST /apps.
pub async fn submit(
    rm: &str,
    name: &str,
    queue: &str,
    spec: &WorkloadSpec,
    am: Resource,
) -> String {
    let http = reqwest::Client::new();
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
