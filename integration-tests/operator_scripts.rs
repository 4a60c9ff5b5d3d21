//! The operator's scripts in deploy/workloads/, run for real by bash. What cannot run here
//! (Spark, a HiBench installation on a Hadoop cluster) is replaced by stub commands that
//! record how they were called; the TPC-H SQL itself is checked against DuckDB by
//! `workload::tpch_answers_match_duckdb` (python/tpch_duckdb.py reads the same files).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use preemptor::config::xml::Configuration;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/workloads")
        .join(name)
}

fn write_executable(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).expect("create the stub's directory");
    }
    fs::write(path, text).expect("write the stub");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod the stub");
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `spark-sql` stand-in: one file per call holding its arguments, NUL-separated.
fn spark_sql_stub(dir: &Path, exit: i32) -> PathBuf {
    let calls = dir.join("calls");
    fs::create_dir_all(&calls).expect("calls dir");
    let stub = dir.join("spark-sql");
    write_executable(
        &stub,
        &format!(
            "#!/usr/bin/env bash\nprintf '%s\\0' \"$@\" > \"{}/$$\"\nexit {exit}\n",
            calls.display()
        ),
    );
    stub
}

fn recorded_calls(dir: &Path) -> Vec<Vec<String>> {
    let mut calls: Vec<Vec<String>> = fs::read_dir(dir.join("calls"))
        .expect("read calls")
        .map(|e| {
            let bytes = fs::read(e.expect("entry").path()).expect("read a call");
            String::from_utf8_lossy(&bytes)
                .split('\0')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect();
    calls.sort();
    calls
}

fn flag<'a>(call: &'a [String], name: &str) -> Option<&'a str> {
    let i = call.iter().position(|a| a == name)?;
    call.get(i + 1).map(String::as_str)
}

#[test]
fn tpch_short_submits_q1_and_q6_to_the_short_queue_with_their_tags() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let stub = spark_sql_stub(tmp.path(), 0);
    let out = Command::new("bash")
        .arg(script("tpch-short.sh"))
        .args(["--bursts", "2", "--burst-size", "2", "--interval", "1"])
        .env("SPARK_SQL", &stub)
        .env("TMPDIR", tmp.path())
        .output()
        .expect("run tpch-short.sh");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches(" exit=0 seconds=").count(), 4, "{stdout}");

    let calls = recorded_calls(tmp.path());
    assert_eq!(calls.len(), 4, "{calls:?}");
    let mut queries = Vec::new();
    for call in &calls {
        assert_eq!(flag(call, "--master"), Some("yarn"), "{call:?}");
        assert_eq!(flag(call, "--queue"), Some("short"), "{call:?}");
        assert_eq!(flag(call, "--database"), Some("tpch"), "{call:?}");
        let tags = flag(call, "--conf").expect("a --conf");
        let q = tags
            .strip_prefix("spark.yarn.tags=preemptor.class=short,tpch=")
            .unwrap_or_else(|| panic!("tags {tags}"));
        let sql = flag(call, "-e").expect("the query text");
        assert!(!sql.contains("${") && !sql.contains("--"), "{sql}");
        match q {
            "q1" => assert!(sql.contains("interval '90' day"), "{sql}"),
            "q6" => assert!(
                sql.contains("date '1994-01-01'")
                    && sql.contains("between 0.06 - 0.01")
                    && sql.contains("l_quantity < 24"),
                "{sql}"
            ),
            other => panic!("unexpected query {other}"),
        }
        queries.push(q.to_string());
    }
    queries.sort();
    assert_eq!(queries, ["q1", "q1", "q6", "q6"]);
}

#[test]
fn tpch_short_reports_failed_queries_and_refuses_bad_options() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let stub = spark_sql_stub(tmp.path(), 3);
    let out = Command::new("bash")
        .arg(script("tpch-short.sh"))
        .args(["--bursts", "1", "--burst-size", "1"])
        .env("SPARK_SQL", &stub)
        .env("TMPDIR", tmp.path())
        .output()
        .expect("run tpch-short.sh");
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("tpch-q1-1 exit=3"), "{stdout}");

    for (args, says) in [
        (
            &["--bursts", "0"][..],
            "--bursts must be a whole number above 0",
        ),
        (
            &["--queue", "root short"][..],
            "characters YARN and Spark do not accept",
        ),
        (&["--interval"][..], "--interval needs a value"),
        (&["--bogus"][..], "unknown option --bogus"),
    ] {
        let out = Command::new("bash")
            .arg(script("tpch-short.sh"))
            .args(args)
            .env("SPARK_SQL", &stub)
            .output()
            .expect("run tpch-short.sh");
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A HiBench tree whose prepare/run scripts record the settings HiBench would load: the
/// `zz-preemptor.conf` they see and the mapred-site.xml it points them to.
fn fake_hibench(root: &Path, failing_run: Option<&str>) -> PathBuf {
    let hibench = root.join("HiBench");
    fs::create_dir_all(hibench.join("conf")).expect("conf");
    fs::write(
        hibench.join("conf/hadoop.conf"),
        "hibench.hadoop.home /opt/hadoop\n",
    )
    .expect("hadoop.conf");
    let record = root.join("record");
    fs::create_dir_all(&record).expect("record dir");
    for (path, framework) in [
        ("micro/wordcount", "hadoop"),
        ("micro/terasort", "hadoop"),
        ("ml/kmeans", "spark"),
        ("websearch/pagerank", "spark"),
    ] {
        let name = path.rsplit('/').next().unwrap_or(path);
        for step in ["prepare/prepare.sh", &format!("{framework}/run.sh")] {
            let tag = format!("{name}-{}", step.split('/').next().unwrap_or(step));
            let exit = if failing_run == Some(tag.as_str()) {
                5
            } else {
                0
            };
            write_executable(
                &hibench.join("bin/workloads").join(path).join(step),
                &format!(
                    r#"#!/usr/bin/env bash
here=$(cd "$(dirname "$0")/../../../../.." && pwd)
cp "$here/conf/zz-preemptor.conf" "{rec}/{tag}.conf"
dir=$(awk '$1 == "hibench.hadoop.configure.dir" {{print $2}}' "$here/conf/zz-preemptor.conf")
cp "$dir/mapred-site.xml" "{rec}/{tag}.mapred-site.xml"
echo "$dir" > "{rec}/{tag}.dir"
exit {exit}
"#,
                    rec = record.display()
                ),
            );
        }
    }
    hibench
}

fn hadoop_conf(root: &Path) -> PathBuf {
    let dir = root.join("hadoop-conf");
    fs::create_dir_all(&dir).expect("hadoop conf");
    fs::write(
        dir.join("mapred-site.xml"),
        "<?xml version=\"1.0\"?>\n<configuration>\n  <property><name>mapreduce.framework.name</name><value>yarn</value></property>\n  <property><name>mapreduce.job.queuename</name><value>default</value></property>\n</configuration>\n",
    )
    .expect("mapred-site.xml");
    fs::write(dir.join("core-site.xml"), "<configuration/>\n").expect("core-site.xml");
    dir
}

fn hibench_long(hibench: &Path, conf: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script("hibench-long.sh"))
        .arg("--hibench")
        .arg(hibench)
        .arg("--hadoop-conf")
        .arg(conf)
        .args(args)
        .env("TMPDIR", hibench.parent().expect("a parent"))
        .output()
        .expect("run hibench-long.sh")
}

fn hadoop_value(site: &Path, key: &str) -> Option<String> {
    let mut c = Configuration::new();
    c.add_file(site)
        .unwrap_or_else(|e| panic!("{} is not a Hadoop configuration: {e}", site.display()));
    c.get(key).expect("a value")
}

#[test]
fn hibench_long_sends_mapreduce_and_spark_jobs_to_the_long_queue_and_cleans_up() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let hibench = fake_hibench(tmp.path(), None);
    let conf = hadoop_conf(tmp.path());
    let original = fs::read_to_string(conf.join("mapred-site.xml")).expect("read");
    let out = hibench_long(&hibench, &conf, &["--prepare", "wordcount", "kmeans"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    let record = tmp.path().join("record");
    for (workload, steps) in [
        ("wordcount", ["prepare", "hadoop"]),
        ("kmeans", ["prepare", "spark"]),
    ] {
        for step in steps {
            let tag = format!("{workload}-{step}");
            let zz = fs::read_to_string(record.join(format!("{tag}.conf")))
                .unwrap_or_else(|e| panic!("{tag} did not run: {e}\n{stdout}\n{stderr}"));
            assert!(zz.contains("\nspark.yarn.queue long\n"), "{zz}");
            assert!(
                zz.contains(&format!(
                    "\nspark.yarn.tags preemptor.class=long,hibench={workload}\n"
                )),
                "{zz}"
            );
            let site = record.join(format!("{tag}.mapred-site.xml"));
            assert_eq!(
                hadoop_value(&site, "mapreduce.job.queuename").as_deref(),
                Some("long")
            );
            assert_eq!(
                hadoop_value(&site, "mapreduce.job.tags"),
                Some(format!("preemptor.class=long,hibench={workload}"))
            );
            // The rest of the operator's configuration is kept.
            assert_eq!(
                hadoop_value(&site, "mapreduce.framework.name").as_deref(),
                Some("yarn")
            );
            let dir = fs::read_to_string(record.join(format!("{tag}.dir"))).expect("dir");
            assert!(!Path::new(dir.trim()).exists(), "overlay {dir} left behind");
        }
    }
    assert!(!record.join("terasort-hadoop.conf").exists());
    assert!(!hibench.join("conf/zz-preemptor.conf").exists());
    assert_eq!(
        fs::read_to_string(conf.join("mapred-site.xml")).expect("read"),
        original,
        "the operator's mapred-site.xml changed"
    );
}

#[test]
fn hibench_long_stops_at_a_failed_run_and_refuses_bad_input() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let hibench = fake_hibench(tmp.path(), Some("terasort-hadoop"));
    let conf = hadoop_conf(tmp.path());
    let out = hibench_long(&hibench, &conf, &["terasort", "pagerank"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("failed with exit status 5"), "{stderr}");
    assert!(!tmp.path().join("record/pagerank-spark.conf").exists());
    assert!(!hibench.join("conf/zz-preemptor.conf").exists());

    for (args, says) in [
        (&["sort"][..], "unknown workload 'sort'"),
        (&[][..], "name at least one workload"),
        (
            &["--queue", "a b", "kmeans"][..],
            "characters YARN does not accept",
        ),
    ] {
        let out = hibench_long(&hibench, &conf, args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // A leftover zz-preemptor.conf means another run: refuse rather than overwrite.
    fs::write(hibench.join("conf/zz-preemptor.conf"), "x\n").expect("write");
    let out = hibench_long(&hibench, &conf, &["kmeans"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("exists"));
    let out = hibench_long(&tmp.path().join("nowhere"), &conf, &["kmeans"]);
    assert!(text(&out).1.contains("is not a HiBench directory"));
}
