//! RM REST throughput of the emulator: `/ws/v1/cluster/apps` with 1,000 applications,
//! next to `/ws/v1/cluster/info` measured the same way in the same run.
//!
//! The load generator is an in-process tokio client on loopback (keep-alive, fixed
//! concurrency, fixed duration per endpoint). Server and client share this machine's
//! cores, so absolute numbers are lower than against a separate host; the ratios are the
//! point. Run with `cargo bench --bench emulator`.

use std::time::{Duration, Instant};

use preemptor::emulator::workload::WorkloadSpec;
use preemptor::emulator::{Emulator, EmulatorConfig, RuntimeChoice};
use preemptor::resources::Resource;
use preemptor::yarn::dto::NewApplication;

const APPS: usize = 1000;
const CONCURRENCY: usize = 8;
const WINDOW: Duration = Duration::from_secs(4);
const MAX_REQUESTS: usize = 200_000;

struct Measured {
    requests: usize,
    errors: usize,
    bytes: usize,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

async fn measure(http: &reqwest::Client, url: &str, xml: bool) -> Measured {
    let deadline = Instant::now() + WINDOW;
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let http = http.clone();
        let url = url.to_string();
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let (mut errors, mut bytes) = (0usize, 0usize);
            while Instant::now() < deadline && lat.len() < MAX_REQUESTS / CONCURRENCY {
                let t = Instant::now();
                let mut req = http.get(&url);
                if xml {
                    req = req.header("Accept", "application/xml");
                }
                match req.send().await {
                    Ok(r) if r.status().is_success() => match r.bytes().await {
                        Ok(b) => bytes = b.len(),
                        Err(_) => errors += 1,
                    },
                    _ => errors += 1,
                }
                lat.push(t.elapsed());
            }
            (lat, errors, bytes)
        }));
    }
    let mut all = Vec::new();
    let (mut errors, mut bytes) = (0, 0);
    for w in workers {
        if let Ok((lat, e, b)) = w.await {
            all.extend(lat);
            errors += e;
            bytes = bytes.max(b);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    Measured {
        requests: all.len(),
        errors,
        bytes,
        rps: all.len() as f64 / elapsed,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
    }
}

async fn run() -> Result<(), String> {
    let mut config = EmulatorConfig::local(4, Resource::new(8192, 8), RuntimeChoice::Simulated);
    // No heartbeats during the measurement, so the 1,000 apps hold still (ACCEPTED, each
    // with its AM request outstanding).
    config.heartbeat_interval = Duration::from_secs(3600);
    let h = Emulator::start(config).await.map_err(|e| e.to_string())?;
    let rm = h.rm_url().to_string();
    let http = preemptor::tls::http_client_builder()
        .pool_max_idle_per_host(CONCURRENCY)
        .build()
        .map_err(|e| e.to_string())?;
    let spec = WorkloadSpec::parse(
        r#"{"kernel":"wordcount","args":["--size-mb","256"],"tasks":8,"memoryMb":2048,"vcores":1}"#,
    )
    .map_err(|e| e.to_string())?;
    eprintln!("submitting {APPS} applications through the REST API...");
    for i in 0..APPS {
        let new: NewApplication = http
            .post(format!("{rm}/ws/v1/cluster/apps/new-application"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let queue = ["long", "short"][i % 2];
        let ctx = spec.submission(
            &new.application_id,
            &format!("bench-{i}"),
            queue,
            vec![format!("bench={}", i % 10)],
            Resource::new(1024, 1),
        );
        let r = http
            .post(format!("{rm}/ws/v1/cluster/apps"))
            .json(&ctx)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if r.status().as_u16() != 202 {
            return Err(format!("submission {i} answered {}", r.status()));
        }
    }
    let held = h.inspect(|s| s.apps.len());
    if held != APPS {
        return Err(format!("expected {APPS} applications, the RM holds {held}"));
    }
    let cases = [
        (
            "/ws/v1/cluster/info (baseline)",
            "/ws/v1/cluster/info",
            false,
        ),
        ("/ws/v1/cluster/apps", "/ws/v1/cluster/apps", false),
        (
            "/ws/v1/cluster/apps?deSelects=resourceRequests",
            "/ws/v1/cluster/apps?deSelects=resourceRequests",
            false,
        ),
        ("/ws/v1/cluster/apps (XML)", "/ws/v1/cluster/apps", true),
        (
            "/ws/v1/cluster/apps?states=RUNNING (filtered)",
            "/ws/v1/cluster/apps?states=RUNNING",
            false,
        ),
    ];
    println!(
        "RM REST on loopback, {APPS} applications, {CONCURRENCY} concurrent keep-alive clients, {} s per endpoint",
        WINDOW.as_secs()
    );
    println!(
        "{:<50} {:>9} {:>10} {:>9} {:>9} {:>10} {:>12} {:>12}",
        "endpoint", "requests", "req/s", "p50 ms", "p99 ms", "body KB", "req/s ratio", "p99 ratio"
    );
    let mut baseline: Option<(f64, f64)> = None;
    for (label, path, xml) in cases {
        let m = measure(&http, &format!("{rm}{path}"), xml).await;
        let (brps, bp99) = *baseline.get_or_insert((m.rps, m.p99_ms));
        println!(
            "{label:<50} {:>9} {:>10.1} {:>9.2} {:>9.2} {:>10.1} {:>12.4} {:>12.1}",
            m.requests,
            m.rps,
            m.p50_ms,
            m.p99_ms,
            m.bytes as f64 / 1024.0,
            m.rps / brps,
            m.p99_ms / bp99.max(1e-9),
        );
        if m.errors > 0 {
            println!("  ({} errors)", m.errors);
        }
    }
    h.shutdown().await.map_err(|e| e.to_string())?;
    Ok(())
}

fn main() {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run()) {
        eprintln!("benchmark failed: {e}");
        std::process::exit(1);
    }
}
