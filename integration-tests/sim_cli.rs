//! `preemptor sim` as a user runs it: the real binary, real files, JSON and SVG out,
//! and clear errors for bad input.

use std::path::Path;
use std::process::{Command, Output};

use crate::sim_papers::bundled;

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preemptor"))
        .arg("sim")
        .args(args)
        .output()
        .expect("running preemptor")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The first `jobs` lines of a bundled trace, as a new file in `dir`.
fn head_of(trace: &str, jobs: usize, dir: &Path) -> std::path::PathBuf {
    let all = std::fs::read_to_string(bundled(trace)).unwrap();
    let head: Vec<&str> = all.lines().take(jobs).collect();
    let path = dir.join(format!("head_{trace}"));
    std::fs::write(&path, head.join("\n") + "\n").unwrap();
    path
}

#[test]
fn run_writes_a_table_json_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let trace = head_of("yahoo_sub1.tr", 300, dir.path());
    let json = dir.path().join("out.json");
    let plots = dir.path().join("plots");
    let out = sim(&[
        "run",
        "--trace",
        trace.to_str().unwrap(),
        "--nodes",
        "400",
        "-s",
        "fifo,hawk,eagle,pigeon",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for s in [
        "fifo",
        "hawk",
        "eagle",
        "pigeon",
        "completion",
        "queueing",
        "p99",
    ] {
        assert!(stdout.contains(s), "table lacks {s}:\n{stdout}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 4);
    assert_eq!(runs[1]["scheduler"], "hawk");
    assert!(runs[1]["short"]["completion"]["p90"].as_f64().unwrap() > 0.0);
    assert!(runs[2]["counters"]["rejected probes"].is_u64());
    for f in ["cdf-short.svg", "cdf-long.svg", "utilization.svg"] {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("hawk"), "{f}");
    }
}

#[test]
fn compare_prints_tables_normalized_to_the_base_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let trace = head_of("yahoo_sub2.tr", 200, dir.path());
    let out = sim(&[
        "compare",
        "--trace",
        trace.to_str().unwrap(),
        "--schedulers",
        "hawk,eagle",
        "--nodes",
        "300,500",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("normalized to the baseline"), "{stdout}");
    let json_start = stdout.find("{\n").unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout[json_start..]).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    let rows = v["normalized"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["baseline"] == "hawk" && r["scheduler"] == "eagle")
    );
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.tr");
    std::fs::write(&bad, "0 2 10 10 10\n5 3 10 10 10\n").unwrap();
    let unsized_trace = dir.path().join("mine.tr");
    std::fs::write(&unsized_trace, "0 1 10 10\n").unwrap();
    let cases: [(Vec<&str>, String); 6] = [
        (
            vec!["run", "--trace", bad.to_str().unwrap(), "--nodes", "10"],
            format!(
                "{}:2: the job declares 3 tasks but lists only 2 durations",
                bad.display()
            ),
        ),
        (
            vec!["run", "--trace", "/nonexistent/t.tr", "--nodes", "10"],
            "/nonexistent/t.tr: No such file".into(),
        ),
        (
            vec!["run", "--synthetic", "mmc:load=1", "--nodes", "10"],
            "mmc load must be in (0, 1)".into(),
        ),
        (
            vec!["run", "--synthetic", "mmc", "-s", "hawkk"],
            "unknown scheduler \"hawkk\"".into(),
        ),
        (
            vec!["run", "--trace", unsized_trace.to_str().unwrap()],
            "give --nodes".into(),
        ),
        (
            vec![
                "run",
                "--synthetic",
                "mmc",
                "-s",
                "capacity",
                "--queue",
                "a=50",
                "--queue",
                "a=50",
            ],
            "--queue a is given twice".into(),
        ),
    ];
    for (args, want) in cases {
        let out = sim(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = text(&out.stderr);
        assert!(err.contains(&want), "{args:?}: wanted {want:?} in:\n{err}");
        // The cause is printed once, not again after the message that quotes it.
        assert_eq!(
            err.matches(&want).count(),
            1,
            "{args:?}: repeated in:\n{err}"
        );
    }
}

#[test]
fn help_explains_the_subcommands() {
    let out = sim(&["--help"]);
    let h = text(&out.stdout);
    for s in [
        "run",
        "compare",
        "replicate",
        "schedulers",
        "Erlang C",
        "--costs",
    ] {
        assert!(h.contains(s), "sim --help lacks {s}:\n{h}");
    }
    let out = sim(&["schedulers"]);
    let s = text(&out.stdout);
    assert!(s.contains("tiresias") && s.contains("eagle+dice"), "{s}");
}
