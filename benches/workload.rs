//! How the kernels respond to the cgroup limits Preemptor sets: each kernel runs in a FROM
//! scratch container with a full CPU and, right after, with a quarter of one (CFS quota).
//! Printed: the wall-time ratio (4 for a purely CPU-bound kernel on an idle machine), the
//! share of CFS periods in which the throttled run was held back, and the anonymous memory
//! halfway through the unthrottled run (for the iterative kernels, against their working
//! set). Run with `cargo bench --bench workload`.
//!
//! Times include creating and starting the container (about 0.1 s) and any contention from other work on the
//! machine; both runs of a pair see the same conditions, so the ratio is what to read.

#[path = "../integration-tests/common/mod.rs"]
mod common;

use std::time::Instant;

use bollard::Docker;
use bollard::models::HostConfig;
use bollard::query_parameters::WaitContainerOptions;
use futures_util::StreamExt;

use common::{TestImage, docker_or_skip, sample_container, start_workload, wait_for_log_line};

/// (kernel, working set it must keep resident while iterating, in bytes; 0 = not iterative)
/// kmeans: points x 20 doubles; pagerank: about 74 bytes a page (two rank vectors and the
/// contributions, offsets, out-degrees, and 9.5 in-links of 4 bytes).
const KERNELS: &[(&str, u64)] = &[
    ("burn --iterations 100", 0),
    ("tpch --query 1 --scale 3", 0),
    ("wordcount --size-mb 384", 0),
    ("terasort --size-mb 256", 0),
    ("kmeans --points 1000000 --iterations 10", 160_000_000),
    ("pagerank --pages 2000000 --iterations 10", 148_000_000),
];

/// The throttled run's CFS quota, in CPUs; the unthrottled run gets 1.
const THROTTLED_CPUS: f64 = 0.25;

struct Run {
    seconds: f64,
    /// Sampled when the kernel prints `progress 50%`.
    anonymous_mib: f64,
    throttled_share: f64,
}

async fn run(docker: &Docker, image: &TestImage, line: &str, cpus: f64) -> Result<Run, String> {
    let limits = HostConfig {
        nano_cpus: Some((cpus * 1e9) as i64),
        memory: Some(4 << 30),
        ..Default::default()
    };
    let started = Instant::now();
    let container = start_workload(docker, image, line, limits).await?;
    let name = container.name.as_str();
    // Halfway, the data is generated and the iterative kernels are iterating over it.
    wait_for_log_line(docker, name, "progress 50%").await?;
    let sample = sample_container(docker, name).await?;
    let mut wait = docker.wait_container(name, None::<WaitContainerOptions>);
    match wait.next().await {
        Some(Ok(r)) if r.status_code == 0 => {}
        other => return Err(format!("{line} did not exit 0: {other:?}")),
    }
    Ok(Run {
        seconds: started.elapsed().as_secs_f64(),
        anonymous_mib: sample.anonymous_bytes as f64 / (1 << 20) as f64,
        throttled_share: sample.throttled_share,
    })
}

#[tokio::main]
async fn main() {
    let Some(docker) = docker_or_skip("bench workload").await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-bench").await;
    println!(
        "{:<42} {:>8} {:>9} {:>6} {:>10} {:>13}",
        "kernel (1 thread)", "1 CPU s", "1/4 CPU s", "ratio", "throttled", "resident MiB"
    );
    for &(line, working_set) in KERNELS {
        let pair = async {
            let full = run(&docker, &image, line, 1.0).await?;
            let throttled = run(&docker, &image, line, THROTTLED_CPUS).await?;
            Ok::<_, String>((full, throttled))
        };
        match pair.await {
            Ok((full, throttled)) => {
                let mut resident = format!("{:.0}", full.anonymous_mib);
                if working_set > 0 {
                    let ws = working_set as f64 / (1 << 20) as f64;
                    resident = format!("{resident} of {ws:.0}");
                }
                println!(
                    "{line:<42} {:>8.2} {:>9.2} {:>6.2} {:>9.0}% {resident:>13}",
                    full.seconds,
                    throttled.seconds,
                    throttled.seconds / full.seconds,
                    throttled.throttled_share * 100.0
                );
            }
            Err(e) => println!("{line:<42} failed: {e}"),
        }
    }
}
