//! `preemptor-workload` against real components: DuckDB over `tpchgen-cli` data for the
//! TPC-H answers, and the Docker daemon for running every kernel in a FROM scratch image,
//! keeping its working set resident, and stopping on SIGTERM with 143.

use std::path::Path;
use std::process::Command;

use bollard::Docker;
use bollard::models::HostConfig;
use bollard::query_parameters::{LogsOptions, StopContainerOptions, WaitContainerOptions};
use futures_util::StreamExt;

use crate::common::{
    ContainerGuard, TestImage, docker_or_skip, sample_container, start_workload, wait_for_log_line,
};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_preemptor-workload");

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// Runs the binary on the host and returns its stdout.
fn run_here(line: &str) -> String {
    let out = Command::new(WORKLOAD)
        .args(args(line))
        .output()
        .unwrap_or_else(|e| panic!("running {WORKLOAD}: {e}"));
    assert!(out.status.success(), "{line}: {:?}", out.status);
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn checksum_line(stdout: &str) -> &str {
    let last = stdout.lines().last().unwrap_or_default();
    let hex = last.strip_prefix("checksum ").unwrap_or_else(|| {
        panic!("the last line is not a checksum: {last:?}");
    });
    assert!(
        hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{last:?}"
    );
    last
}

#[test]
fn tpch_answers_equal_duckdb_over_tpchgen_cli_data() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("integration-tests/python/tpch_duckdb.py");
    let python = crate::common::python();
    let out = Command::new(&python)
        .arg(&script)
        .args([
            "--workload",
            WORKLOAD,
            "--scale",
            "0.01",
            "--seeds",
            "0",
            "7",
        ])
        .output()
        .unwrap_or_else(|e| panic!("running {python} {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the kernel's TPC-H answers differ from DuckDB's, or a tool is missing \
         ({python} lacks duckdb or tpchgen-cli==4.0.0; bash .ci/run installs them in .venv \
         and sets PYTHON):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok Q")).count(), 4);
}

/// The official answers (TPC-H tools' dbgen and qgen, bundled with tpchgen) at scale 1.
#[test]
fn tpch_at_scale_1_equals_the_official_answer_set() {
    use tpchgen::q_and_a::answers_sf1::{Q1_ANSWER, Q6_ANSWER};
    for (query, answer) in [(1, Q1_ANSWER), (6, Q6_ANSWER)] {
        let out = run_here(&format!("tpch --query {query} --scale 1 --threads 2"));
        let ours: Vec<Vec<&str>> = out
            .lines()
            .filter_map(|l| l.strip_prefix("row "))
            .map(|r| r.split('|').collect())
            .collect();
        let official: Vec<Vec<&str>> = answer
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .skip(1)
            .map(|l| l.split('|').map(str::trim).collect())
            .collect();
        assert_eq!(ours, official, "Q{query}");
    }
}

/// Runs `line` in a container with 1 GiB of memory.
async fn start(docker: &Docker, image: &TestImage, line: &str) -> ContainerGuard {
    let limits = HostConfig {
        memory: Some(1 << 30),
        ..Default::default()
    };
    start_workload(docker, image, line, limits)
        .await
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

async fn wait_exit(docker: &Docker, name: &str) -> i64 {
    let mut wait = docker.wait_container(name, None::<WaitContainerOptions>);
    match wait.next().await {
        Some(Ok(r)) => r.status_code,
        // bollard reports a non-zero exit as an error carrying the code.
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
        other => panic!("waiting for {name}: {other:?}"),
    }
}

async fn logs(docker: &Docker, name: &str) -> String {
    let opts = LogsOptions {
        stdout: true,
        stderr: true,
        tail: "all".into(),
        ..Default::default()
    };
    let mut stream = docker.logs(name, Some(opts));
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        text.push_str(
            &chunk
                .unwrap_or_else(|e| panic!("logs of {name}: {e}"))
                .to_string(),
        );
    }
    text
}

#[tokio::test]
async fn every_kernel_runs_in_a_scratch_container() {
    let Some(docker) = docker_or_skip("every_kernel_runs_in_a_scratch_container").await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-kernels").await;
    // Burn's work is per thread, so its checksum depends on --threads; the others' does not.
    for (line, threads_here) in [
        ("burn --iterations 3 --memory-mb 8", 2),
        ("tpch --query 1 --scale 0.001", 1),
        ("tpch --query 6 --scale 0.001 --seed 3", 1),
        ("wordcount --size-mb 2 --seed 3", 1),
        ("terasort --size-mb 2 --seed 3", 1),
        ("kmeans --points 20000 --k 4 --iterations 3 --seed 3", 1),
        ("pagerank --pages 20000 --iterations 3 --seed 3", 1),
    ] {
        let container = start(&docker, &image, &format!("{line} --threads 2")).await;
        let code = wait_exit(&docker, &container.name).await;
        let out = logs(&docker, &container.name).await;
        assert_eq!(code, 0, "{line}: {out}");
        assert!(out.lines().any(|l| l == "progress 100%"), "{line}: {out}");
        // Same data, same answer, in the container and here.
        let here = run_here(&format!("{line} --threads {threads_here}"));
        assert_eq!(checksum_line(&out), checksum_line(&here), "{line}");
    }
}

/// What memory reclamation by suspension relies on: the Spark-shaped kernels hold their
/// working set in anonymous memory while they iterate, so taking it away means swapping it
/// out; and `docker stop` ends every kernel with YARN's 143.
#[tokio::test]
async fn iterative_kernels_keep_their_working_set_resident_and_stop_on_sigterm() {
    let Some(docker) =
        docker_or_skip("iterative_kernels_keep_their_working_set_resident_and_stop_on_sigterm")
            .await
    else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-resident").await;
    // (command, bytes the kernel must hold): 400k points x 20 doubles; 1M pages x (ranks,
    // contributions, in-links and offsets) of at least 60 bytes.
    for (line, working_set) in [
        (
            "kmeans --points 400000 --dimensions 20 --iterations 1000000",
            64_000_000u64,
        ),
        ("pagerank --pages 1000000 --iterations 1000000", 60_000_000),
    ] {
        let container = start(&docker, &image, line).await;
        wait_for_log_line(&docker, &container.name, "iteration 2 ")
            .await
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        let anon = sample_container(&docker, &container.name)
            .await
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .anonymous_bytes;
        assert!(
            anon >= working_set,
            "{line}: {anon} bytes resident, want at least {working_set}"
        );
        docker
            .stop_container(
                &container.name,
                Some(StopContainerOptions {
                    t: Some(60),
                    signal: None,
                }),
            )
            .await
            .unwrap_or_else(|e| panic!("stopping {}: {e}", container.name));
        let code = wait_exit(&docker, &container.name).await;
        let out = logs(&docker, &container.name).await;
        assert_eq!(code, 143, "{line}: {out}");
        assert_eq!(out.lines().last(), Some("stopped"), "{line}: {out}");
    }
}
