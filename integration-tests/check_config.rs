//! `preemptor check-config` as an operator runs it: the real binary on real files,
//! judged by exit status, stdout and stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use preemptor::config::queues::synthetic_capacity_scheduler_xml;

fn preemptor() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_preemptor"));
    c.env_remove("PREEMPTOR_LOG_FORMAT");
    c
}

fn check(dir: &Path, extra: &[&str]) -> Output {
    preemptor()
        .arg("check-config")
        .arg("--conf-dir")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run preemptor")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hadoop-conf")
}

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, body) in files {
        std::fs::write(dir.path().join(name), body).expect("write conf file");
    }
    dir
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

#[test]
fn shipped_example_is_valid() {
    let out = check(&shipped(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("  short  95"), "{stdout}");
    assert!(stdout.contains("  long   5 "), "{stdout}");
    assert!(stdout.contains("OK: 3 queues"), "{stdout}");
}

#[test]
fn json_output_is_one_document_with_the_tree() {
    let out = check(
        &shipped(),
        &[
            "--format",
            "json",
            "--cluster-resource",
            "memory=10240,vcores=10",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let v = json(&out);
    assert_eq!(v["valid"], true);
    let long = &v["queues"][2];
    assert_eq!(long["path"], "root.long");
    assert_eq!(long["job_class"], "long");
    assert_eq!(long["guaranteed"]["memoryMb"], 512);
    assert_eq!(long["maximum"]["vcores"], 10);
    assert_eq!(v["settings"]["rm"]["addresses"][0], "http://localhost:8088");
}

const BROKEN_QUEUES: &str = "<configuration>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b,c</value></property>
  <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>60</value></property>
  <property><name>yarn.scheduler.capacity.root.a.maximum-capacity</name><value>50</value></property>
  <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>[memory=1024,vcores=1]</value></property>
</configuration>
";

#[test]
fn every_error_is_listed_with_its_location_and_exit_is_1() {
    let dir = dir_with(&[
        ("capacity-scheduler.xml", BROKEN_QUEUES),
        (
            "preemptor-site.xml",
            "<configuration>\n  <property><name>yarn.preemptor.monitoring-interval-ms</name><value>soon</value></property>\n</configuration>\n",
        ),
    ]);
    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 4, "{stderr}");
    let cs = dir
        .path()
        .join("capacity-scheduler.xml")
        .display()
        .to_string();
    let ps = dir.path().join("preemptor-site.xml").display().to_string();
    // Sorted by file and line; each names the queue or key.
    assert!(
        errors[0].starts_with(&format!("error: {cs}:2:")) && errors[0].contains("queue root.c"),
        "{stderr}"
    );
    assert!(
        errors[1].starts_with(&format!("error: {cs}:3:")) && errors[1].contains("mix"),
        "{stderr}"
    );
    assert!(
        errors[2].starts_with(&format!("error: {cs}:4:")) && errors[2].contains("queue root.a"),
        "{stderr}"
    );
    assert!(
        errors[3].starts_with(&format!("error: {ps}:2:"))
            && errors[3].contains("monitoring-interval-ms"),
        "{stderr}"
    );
    assert!(
        stderr
            .trim_end()
            .ends_with("4 errors — the configuration is not valid"),
        "{stderr}"
    );
}

#[test]
fn json_errors_carry_locations() {
    let dir = dir_with(&[("capacity-scheduler.xml", BROKEN_QUEUES)]);
    let out = check(dir.path(), &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["valid"], false);
    let errors = v["errors"].as_array().expect("errors array");
    assert_eq!(errors.len(), 3);
    for e in errors {
        let loc = e["location"].as_str().expect("location");
        assert!(loc.contains("capacity-scheduler.xml:"), "{loc}");
    }
}

#[test]
fn malformed_xml_is_located() {
    let dir = dir_with(&[(
        "capacity-scheduler.xml",
        "<configuration>\n  <property>\n    <name>yarn.scheduler.capacity.root.queues</name>\n    <value>a</valu>\n  </property>\n</configuration>\n",
    )]);
    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("capacity-scheduler.xml:4:"), "{stderr}");
    assert!(stderr.contains("malformed XML"), "{stderr}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["check-config", "--format", "yaml"],
        vec!["check-config", "--no-such-flag"],
        vec!["check-config", "--cluster-resource", "gpus=4"],
    ] {
        let out = preemptor().args(&args).output().expect("run preemptor");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn missing_directory_or_file_is_an_error_not_a_usage_error() {
    let dir = dir_with(&[]);
    let out = check(&dir.path().join("nope"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("configuration directory is required but missing"));
    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("capacity-scheduler.xml is required but missing"));
}

#[test]
fn stock_hadoop_capacity_scheduler_is_accepted() {
    let stock = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/config/testdata/hadoop-3-capacity-scheduler.xml"),
    )
    .expect("fixture");
    let dir = dir_with(&[("capacity-scheduler.xml", &stock)]);
    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("  default  100"), "{stdout}");
    // YARN's stock file uses the memory-only calculator: worth a warning, not a failure.
    assert!(
        text(&out.stderr).contains("warning: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_thousand_queues_four_levels_deep_are_accepted() {
    let dir = dir_with(&[(
        "capacity-scheduler.xml",
        &synthetic_capacity_scheduler_xml(1000, 4),
    )]);
    let out = check(dir.path(), &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v = json(&out);
    let queues = v["queues"].as_array().expect("queues");
    assert_eq!(queues.len(), 1001);
    assert_eq!(
        queues.iter().filter_map(|q| q["depth"].as_u64()).max(),
        Some(4)
    );
}

#[test]
fn warnings_print_but_do_not_fail() {
    let dir = dir_with(&[
        (
            "capacity-scheduler.xml",
            &std::fs::read_to_string(shipped().join("capacity-scheduler.xml")).expect("read"),
        ),
        (
            "preemptor-site.xml",
            "<configuration>\n  <property><name>yarn.preemptor.polciy</name><value>kill</value></property>\n</configuration>\n",
        ),
        (
            "yarn-site.xml",
            "<configuration>\n  <property><name>yarn.resourcemanager.scheduler.monitor.enable</name><value>true</value></property>\n</configuration>\n",
        ),
    ]);
    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("preemptor-site.xml:2:")
            && stderr.contains("did you mean yarn.preemptor.policy?"),
        "{stderr}"
    );
    assert!(stderr.contains("preemption monitor is on"), "{stderr}");
    assert!(text(&out.stdout).contains("OK: 3 queues, 2 warnings"));
}

#[test]
fn includes_and_environment_variables_work_end_to_end() {
    let dir = dir_with(&[
        (
            "capacity-scheduler.xml",
            "<configuration xmlns:xi=\"http://www.w3.org/2001/XInclude\">
  <property><name>yarn.scheduler.capacity.root.queues</name><value>${env.PREEMPTOR_TEST_QUEUES}</value></property>
  <xi:include href=\"queues/capacities.xml\"/>
</configuration>
",
        ),
    ]);
    std::fs::create_dir(dir.path().join("queues")).expect("mkdir");
    std::fs::write(
        dir.path().join("queues/capacities.xml"),
        "<configuration>
  <property><name>yarn.scheduler.capacity.root.short.capacity</name><value>90</value></property>
  <property><name>yarn.scheduler.capacity.root.long.capacity</name><value>10</value></property>
</configuration>
",
    )
    .expect("write include");
    let out = preemptor()
        .env("PREEMPTOR_TEST_QUEUES", "short,long")
        .args(["check-config", "--format", "json", "--conf-dir"])
        .arg(dir.path())
        .output()
        .expect("run preemptor");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v = json(&out);
    assert_eq!(v["queues"][2]["path"], "root.long");
    assert!(
        v["queues"][2]["capacity_location"]
            .as_str()
            .expect("location")
            .contains("queues/capacities.xml:3:")
    );

    let out = check(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "unset variable must fail");
    assert!(text(&out.stderr).contains("${env.PREEMPTOR_TEST_QUEUES} is not defined"));
}
