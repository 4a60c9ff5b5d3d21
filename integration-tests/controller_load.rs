//! The load bench's setup, small: 50 simulated nodes, their dry-run agents in this
//! process, the real controller binary at a 1 s tick. Ticks must happen and the agents
//! must record suspensions. No Docker: nothing to skip.

use std::time::{Duration, Instant};

use preemptor::emulator::agents::DryRunAgents;
use preemptor::emulator::mix::{self, MixConfig};
use preemptor::emulator::{Emulator, EmulatorConfig, RuntimeChoice};
use preemptor::resources::Resource;
use tokio_util::sync::CancellationToken;

const NODES: usize = 50;
const TOKEN: &str = "controller-load-test-token";
const API_TOKEN: &str = "controller-load-test-api";

/// The controller process, killed and reaped however the test ends.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn ticks_total(http: &reqwest::Client, api: &str) -> u64 {
    let Ok(resp) = http
        .get(format!("{api}/metrics"))
        .bearer_auth(API_TOKEN)
        .send()
        .await
    else {
        return 0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("preemptor_ticks_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_ticks_over_many_dry_run_agents_and_they_record_suspensions() {
    let node = Resource::new(8192, 8);
    let emu = Emulator::start(EmulatorConfig::local(NODES, node, RuntimeChoice::Simulated))
        .await
        .expect("emulator");
    let runtime = emu.simulated_runtime().expect("simulated runtime");
    let agents = DryRunAgents::start(
        emu.nodes(),
        runtime,
        TOKEN.as_bytes(),
        Duration::from_secs(30),
    )
    .await
    .expect("dry-run agents");
    assert_eq!(agents.agents().len(), NODES);

    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path();
    let api_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let api = format!("http://127.0.0.1:{api_port}");
    let props = [
        ("yarn.preemptor.rm.address", emu.rm_url().to_string()),
        ("yarn.preemptor.policy", "immediate".into()),
        ("yarn.preemptor.monitoring-interval-ms", "1000".into()),
        ("yarn.preemptor.agent.addresses", agents.addresses()),
        (
            "yarn.preemptor.agent.token-file",
            conf.join("agent.token").display().to_string(),
        ),
        (
            "yarn.preemptor.controller.listen",
            format!("127.0.0.1:{api_port}"),
        ),
        (
            "yarn.preemptor.controller.token-file",
            conf.join("api.token").display().to_string(),
        ),
    ];
    crate::common::controller_conf_dir(
        conf,
        &[("agent.token", TOKEN), ("api.token", API_TOKEN)],
        &props,
    );
    let log = conf.join("controller.log");
    let out = std::fs::File::create(&log).expect("log file");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .args(["controller", "--conf-dir"])
        .arg(conf)
        .env("RUST_LOG", "info")
        .stdout(out.try_clone().expect("log file"))
        .stderr(out)
        .spawn()
        .expect("spawning preemptor controller");
    let mut child = Reap(child);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();

    let cancel = CancellationToken::new();
    let mix = tokio::spawn(mix::run(
        MixConfig {
            rm_url: emu.rm_url().to_string(),
            cluster: node.scale(NODES as f64),
            long_queue: "long".into(),
            short_queue: "short".into(),
            seed: 7,
            burst_interval: Duration::from_secs(2),
            burst_size: 3,
            user: "preemptor".into(),
            tick: Duration::from_secs(1),
            // Long jobs ask for everything: short ones get room only by preemption.
            long_fill: 1.0,
            long_job_share: preemptor::emulator::workload::DEFAULT_LONG_JOB_SHARE,
            short_scale: None,
            long_scale: 8.0,
            long_kernels: preemptor::emulator::workload::LONG_KERNELS.to_vec(),
        },
        cancel.clone(),
    ));

    let http = preemptor::tls::http_client_builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let t0 = Instant::now();
    let suspended = |a: &DryRunAgents| {
        a.counts()
            .suspend
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let ticks = loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the controller exited ({status}):\n{}", read_log());
        }
        let ticks = ticks_total(&http, &api).await;
        if ticks >= 3 && suspended(&agents) > 0 {
            break ticks;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "after 60 s: {ticks} ticks, {} suspensions recorded:\n{}",
            suspended(&agents),
            read_log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(ticks >= 3);
    assert_eq!(
        agents
            .counts()
            .refused
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "no action refused:\n{}",
        read_log()
    );
    assert!(
        read_log().contains("immediate suspend container_"),
        "the preemption log names the suspension:\n{}",
        read_log()
    );
    cancel.cancel();
    let _ = mix.await;
    drop(child);
    agents.shutdown().await;
    emu.shutdown().await.expect("emulator shutdown");
}
