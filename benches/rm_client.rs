//! The RM client's per-tick snapshot and the reverse proxy's added latency, against
//! the emulator's real REST API with ~200 running applications.
//!
//! `cargo bench --bench rm_client [-- --apps N --rounds R]`
//!
//! Everything is measured in the same process, interleaved round by round:
//! - snapshot, warm: the controller's steady state (attempt cache filled, 16 requests
//!   in flight at most);
//! - snapshot, cold: a new client's first snapshot (finding the active RM, then
//!   `/appattempts` for every running application as well);
//! - snapshot, sequential: warm, but one request in flight at a time;
//! - proxy: the same GET sent directly and through `RmProxy`, alternately.

use std::time::{Duration, Instant};

use preemptor::config::settings::RmSettings;
use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, EmulatorHandle, RuntimeChoice};
use preemptor::resources::Resource;
use preemptor::yarn::dto::YarnApplicationState;
use preemptor::yarn::{RmClient, RmProxy};
use tokio_util::sync::CancellationToken;

const NODE: Resource = Resource::new(8192, 8);

struct Args {
    apps: usize,
    rounds: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        apps: 200,
        rounds: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{name} needs a positive number"))
        };
        match flag.as_str() {
            "--apps" => a.apps = value("--apps")?,
            "--rounds" => a.rounds = value("--rounds")?,
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?} (--apps N, --rounds R)")),
        }
    }
    Ok(a)
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rm_client bench: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rm_client bench: no tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run(args)) {
        eprintln!("rm_client bench: {e}");
        std::process::exit(1);
    }
}

fn settings(rm: &str) -> RmSettings {
    RmSettings {
        addresses: vec![rm.to_string()],
        user_name: Some("bench".into()),
        request_timeout_ms: 10_000,
        max_response_mb: RmSettings::DEFAULT_MAX_RESPONSE_MB,
        tls: Default::default(),
        kerberos: None,
    }
}

async fn run(args: Args) -> Result<(), String> {
    // Each application holds an AM and one task: two 1 GB containers.
    let nodes = (args.apps * 2).div_ceil(8) + 1;
    println!("starting the emulator: {nodes} NodeManagers of {NODE}, simulated containers");
    let mut config = EmulatorConfig::local(nodes, NODE, RuntimeChoice::Simulated);
    config.heartbeat_interval = Duration::from_millis(100);
    let h = Emulator::start(config).await.map_err(|e| e.to_string())?;
    let result = measure(&h, &args).await;
    h.shutdown().await.map_err(|e| e.to_string())?;
    result
}

async fn measure(h: &EmulatorHandle, args: &Args) -> Result<(), String> {
    let rm = h.rm_url().to_string();
    submit_all(h, &rm, args.apps).await?;

    let warm = RmClient::new(&settings(&rm)).map_err(|e| e.to_string())?;
    let sequential = RmClient::with_max_in_flight(&settings(&rm), 1).map_err(|e| e.to_string())?;
    let first = warm.snapshot().await.map_err(|e| e.to_string())?;
    sequential.snapshot().await.map_err(|e| e.to_string())?;
    println!(
        "snapshot: {} applications, {} containers, {} nodes, {} warnings",
        first.apps.len(),
        first.containers.len(),
        first.nodes.len(),
        first.warnings.len()
    );

    let (mut t_warm, mut t_cold, mut t_seq) = (Vec::new(), Vec::new(), Vec::new());
    let (mut r_warm, mut r_cold) = (0, 0);
    for _ in 0..args.rounds {
        let before = warm.stats().requests;
        let t = Instant::now();
        warm.snapshot().await.map_err(|e| e.to_string())?;
        t_warm.push(t.elapsed());
        r_warm = warm.stats().requests - before;

        let cold = RmClient::new(&settings(&rm)).map_err(|e| e.to_string())?;
        let t = Instant::now();
        cold.snapshot().await.map_err(|e| e.to_string())?;
        t_cold.push(t.elapsed());
        r_cold = cold.stats().requests;

        let t = Instant::now();
        sequential.snapshot().await.map_err(|e| e.to_string())?;
        t_seq.push(t.elapsed());
    }
    println!();
    println!(
        "snapshot with {} running applications ({} rounds, interleaved)",
        args.apps, args.rounds
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9}",
        "", "requests", "p50 ms", "p90 ms"
    );
    let row = |name: &str, req: String, t: &mut Vec<Duration>| {
        println!(
            "{name:<34} {req:>9} {:>9.1} {:>9.1}",
            ms(pct(t, 0.5)),
            ms(pct(t, 0.9))
        );
    };
    row(
        "warm (attempt cache, 16 in flight)",
        r_warm.to_string(),
        &mut t_warm,
    );
    row("cold (new client)", r_cold.to_string(), &mut t_cold);
    row("warm, 1 in flight", r_warm.to_string(), &mut t_seq);
    println!(
        "cold / warm: {:.2}x time, {:.2}x requests;  sequential / warm: {:.2}x time",
        ms(pct(&mut t_cold, 0.5)) / ms(pct(&mut t_warm, 0.5)),
        r_cold as f64 / r_warm.max(1) as f64,
        ms(pct(&mut t_seq, 0.5)) / ms(pct(&mut t_warm, 0.5)),
    );

    proxy_overhead(&rm, &warm).await
}

async fn proxy_overhead(rm: &str, client: &RmClient) -> Result<(), String> {
    let (tx, _rx) = tokio::sync::mpsc::channel(16);
    let proxy = RmProxy::new(client.clone(), vec![], tx).map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let proxied = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let stop = CancellationToken::new();
    let server = tokio::spawn(proxy.serve(listener, stop.clone()));
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    println!();
    println!("proxy overhead (same GET, direct and through the proxy, alternately; keep-alive)");
    println!(
        "{:<28} {:>7} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "", "bytes", "direct p50", "direct p99", "proxy p50", "proxy p99", "added p50", "added p99"
    );
    for (path, n) in [("/ws/v1/cluster/info", 1000), ("/ws/v1/cluster/apps", 200)] {
        let (mut direct, mut via) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut bytes = 0;
        for i in 0..n + 20 {
            let d = timed_get(&http, &format!("{rm}{path}")).await?;
            let p = timed_get(&http, &format!("{proxied}{path}")).await?;
            if i >= 20 {
                direct.push(d.0);
                via.push(p.0);
            }
            bytes = p.1;
        }
        let (d50, d99, p50, p99) = (
            pct(&mut direct, 0.5),
            pct(&mut direct, 0.99),
            pct(&mut via, 0.5),
            pct(&mut via, 0.99),
        );
        println!(
            "{path:<28} {bytes:>7} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>9.3} ms {:>9.3} ms",
            ms(d50),
            ms(d99),
            ms(p50),
            ms(p99),
            ms(p50) - ms(d50),
            ms(p99) - ms(d99),
        );
    }
    stop.cancel();
    let _ = server.await;
    Ok(())
}

async fn timed_get(http: &reqwest::Client, url: &str) -> Result<(Duration, usize), String> {
    let t = Instant::now();
    let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("GET {url}: {}", resp.status()));
    }
    let body = resp.bytes().await.map_err(|e| e.to_string())?;
    Ok((t.elapsed(), body.len()))
}

async fn submit_all(h: &EmulatorHandle, rm: &str, apps: usize) -> Result<(), String> {
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"burn","args":[],"tasks":1,"memoryMb":1024,"vcores":1,"simulatedDurationMs":3600000}"#,
    )
    .map_err(|e| e.to_string())?;
    let client = RmClient::new(&settings(rm)).map_err(|e| e.to_string())?;
    println!("submitting {apps} applications");
    for i in 0..apps {
        let new = client.new_application().await.map_err(|e| e.to_string())?;
        let queue = if i % 2 == 0 { "long" } else { "short" };
        let ctx = spec.submission(
            &new.application_id,
            &format!("bench-{i}"),
            queue,
            vec![],
            Resource::new(1024, 1),
        );
        client
            .submit_application(&ctx)
            .await
            .map_err(|e| format!("submission {i}: {e}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let running = h.inspect(|s| {
            s.apps
                .values()
                .filter(|a| {
                    a.state == YarnApplicationState::Running && s.app_containers(a.id).len() == 2
                })
                .count()
        });
        if running == apps {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {running} of {apps} applications run both containers"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pct(v: &mut [Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
