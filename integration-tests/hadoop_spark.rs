//! Short jobs as real Spark SQL on a real YARN: PyPI `pyspark`'s `spark-submit --master
//! yarn --queue short` against a cluster from `deploy/hadoop/cluster.sh`, over TPC-H
//! lineitem that `tpchgen-cli` writes as Parquet. `deploy/workloads/tpch/q1_check.py`
//! compares Spark SQL's Q1 with DuckDB's on the same file while
//! `deploy/workloads/tpch-short.sh` submits its own Q1 beside it. Both run unchanged, and
//! Spark is configured only the way a user configures it: a `spark-defaults.conf` in
//! `SPARK_CONF_DIR`, and the cluster's `HADOOP_CONF_DIR`.
//!
//! Without Java, Maven, or pyspark, duckdb and tpchgen-cli in `$PYTHON`'s environment the
//! test prints why and passes outside CI; under `CI=true` it fails. The cluster is brought
//! down and the data removed when the guards drop, even on failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::hadoop_support::{Hadoop, hadoop_tools_or_skip, skip_or_fail};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How long a Spark application may take, submission to exit (40-90 s for two at once on
/// 2 busy cores).
const SPARK_LIMIT: Duration = Duration::from_secs(420);

/// What the test runs: the Python with pyspark and duckdb, pyspark's directory (its
/// SPARK_HOME) and version, and tpchgen-cli.
struct Tools {
    python: String,
    spark_home: PathBuf,
    spark_version: String,
    tpchgen: PathBuf,
}

fn tools_or_skip(test: &str) -> Option<Tools> {
    if !hadoop_tools_or_skip(test) {
        return None;
    }
    let python = crate::common::python();
    let probe = Command::new(&python)
        .args([
            "-c",
            "import os, duckdb, pyspark; print(os.path.dirname(pyspark.__file__)); \
             print(pyspark.__version__)",
        ])
        .output();
    let lines = match probe {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .to_string(),
                Err(e) => e.to_string(),
            };
            skip_or_fail(
                test,
                &format!(
                    "{python} cannot import pyspark and duckdb ({why}); bash .ci/run \
                     installs them in .venv and sets PYTHON"
                ),
            );
            return None;
        }
    };
    let mut lines = lines.lines();
    let spark_home = PathBuf::from(lines.next().unwrap_or_default());
    let spark_version = lines.next().unwrap_or_default().to_string();
    // A venv's scripts sit beside its interpreter, whether or not it is on PATH.
    let beside = Path::new(&python).with_file_name("tpchgen-cli");
    let tpchgen = if beside.is_file() {
        beside
    } else {
        PathBuf::from("tpchgen-cli")
    };
    if Command::new(&tpchgen)
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        skip_or_fail(test, "tpchgen-cli (PyPI tpchgen-cli==4.0.0) not found");
        return None;
    }
    Some(Tools {
        python,
        spark_home,
        spark_version,
        tpchgen,
    })
}

/// A client-side process group (spark-submit's driver JVM, or tpch-short.sh and its
/// spark-sql JVM), killed whole if it is still running when dropped.
struct Running {
    what: &'static str,
    child: Child,
    started: Instant,
}

impl Running {
    fn spawn(what: &'static str, mut cmd: Command) -> Running {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        Running {
            what,
            child,
            started: Instant::now(),
        }
    }

    /// Waits at most `limit`; returns its output and how long it ran.
    fn finish(mut self, limit: Duration) -> (Output, Duration) {
        // Drain the pipes meanwhile, so that a chatty JVM never blocks on a full pipe.
        let mut stdout = self.child.stdout.take().expect("stdout");
        let mut stderr = self.child.stderr.take().expect("stderr");
        let out_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut buf).ok();
            buf
        });
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut stderr, &mut buf).ok();
            buf
        });
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if self.started.elapsed() > limit {
                self.kill_group();
                let _ = self.child.wait();
                let err = err_reader.join().unwrap_or_default();
                let tail = String::from_utf8_lossy(&err);
                let tail = &tail[tail.len().saturating_sub(4000)..];
                panic!(
                    "{} still ran after {limit:?}; its stderr ends:\n{tail}",
                    self.what
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let took = self.started.elapsed();
        let output = Output {
            status,
            stdout: out_reader.join().unwrap_or_default(),
            stderr: err_reader.join().unwrap_or_default(),
        };
        (output, took)
    }

    fn kill_group(&self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_group();
            let _ = self.child.wait();
        }
    }
}

/// Spark's client configuration for a cluster whose every node is this machine: the jars
/// pyspark ships instead of an upload of ~460 MB per application, small containers, no
/// metastore (the queries read Parquet through temporary views), staging in `tmp`, and
/// JVMs that only JIT-compile with C1, which starts a short query's JVMs about a third
/// faster on 2 cores. docs/workload.md shows the same file.
fn spark_defaults(tools: &Tools, tmp: &Path) -> String {
    format!(
        "spark.yarn.jars local:{jars}/*\n\
         spark.yarn.stagingDir {staging}\n\
         spark.driver.memory 512m\n\
         spark.yarn.am.memory 512m\n\
         spark.executor.memory 512m\n\
         spark.executor.instances 1\n\
         spark.executor.cores 1\n\
         spark.sql.shuffle.partitions 2\n\
         spark.sql.catalogImplementation in-memory\n\
         spark.ui.enabled false\n\
         spark.driver.extraJavaOptions {jvm}\n\
         spark.yarn.am.extraJavaOptions {jvm}\n\
         spark.executor.extraJavaOptions {jvm}\n\
         spark.pyspark.python {python}\n",
        jars = tools.spark_home.join("jars").display(),
        staging = url_of(&tmp.join("staging")),
        python = tools.python,
        jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
}

fn url_of(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The rows a `q1_check.py` section ("spark:" or "duckdb:") printed, `|`-separated.
fn section<'a>(stdout: &'a str, name: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .skip_while(|l| *l != name)
        .skip(2) // the name and the column header
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect()
}

async fn spark_apps(rm: &str) -> Vec<Value> {
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("HTTP client");
    let url = format!("{rm}/ws/v1/cluster/apps?applicationTypes=SPARK");
    let resp = http
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
    let body: Value = resp
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    body["apps"]["app"].as_array().cloned().unwrap_or_default()
}

/// Spark SQL's TPC-H Q1 on YARN (queue short) equals DuckDB's over the same Parquet file,
/// and tpch-short.sh's Q1, submitted at the same time as an operator would, gives the same
/// rows.
#[test]
fn tpch_q1_in_spark_sql_on_yarn_equals_duckdb() {
    let test = "hadoop_spark::tpch_q1_in_spark_sql_on_yarn_equals_duckdb";
    let Some(tools) = tools_or_skip(test) else {
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("preemptor-spark-test-")
        .tempdir()
        .expect("temp dir");
    let started = Instant::now();

    let data = tmp.path().join("data");
    let generated = Command::new(&tools.tpchgen)
        .args(["parquet", "--scale-factor", "0.01", "--tables", "lineitem"])
        .arg("--output-dir")
        .arg(&data)
        .output()
        .expect("run tpchgen-cli");
    assert!(generated.status.success(), "tpchgen-cli: {generated:?}");
    let lineitem = data.join("lineitem.parquet");
    assert!(lineitem.is_file(), "no {}", lineitem.display());
    eprintln!(
        "tpchgen-cli parquet (scale 0.01): {:.1?}",
        started.elapsed()
    );

    // One NodeManager. Each application's AM and executor take 1 GB each; at 8 GB the
    // short queue's AM limit (30 % of its 95 %) admits both AMs at once.
    let yarn = Hadoop::up(
        tmp.path().join("work"),
        &[
            "--nodes",
            "1",
            "--node-memory-mb",
            "8192",
            "--node-vcores",
            "4",
        ],
    );

    let spark_conf = tmp.path().join("spark-conf");
    std::fs::create_dir(&spark_conf).expect("spark conf dir");
    std::fs::write(
        spark_conf.join("spark-defaults.conf"),
        spark_defaults(&tools, tmp.path()),
    )
    .expect("spark-defaults.conf");

    // The environment of a user's Spark client host.
    let spark_client = |program: &Path| {
        let mut cmd = Command::new(program);
        cmd.env("SPARK_HOME", &tools.spark_home)
            .env("SPARK_CONF_DIR", &spark_conf)
            .env("HADOOP_CONF_DIR", &yarn.conf_dir)
            .env("YARN_CONF_DIR", &yarn.conf_dir)
            .env("PYSPARK_PYTHON", &tools.python)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .env("TMPDIR", tmp.path())
            .current_dir(tmp.path());
        cmd
    };
    let check_name = crate::common::unique_name("tpch-q1-check");
    let mut submit = spark_client(&tools.spark_home.join("bin/spark-submit"));
    submit
        .args([
            "--master",
            "yarn",
            "--deploy-mode",
            "client",
            "--queue",
            "short",
        ])
        .args(["--name", &check_name])
        .args([
            "--conf",
            "spark.yarn.tags=preemptor.class=short,tpch=q1-check",
        ])
        .arg(Path::new(ROOT).join("deploy/workloads/tpch/q1_check.py"))
        .arg("--lineitem")
        .arg(&lineitem);
    let check = Running::spawn("spark-submit q1_check.py", submit);
    let mut short = spark_client(Path::new("bash"));
    short
        .arg(Path::new(ROOT).join("deploy/workloads/tpch-short.sh"))
        .args(["--bursts", "1", "--burst-size", "1", "--executors", "1"])
        .arg("--lineitem")
        .arg(url_of(&lineitem))
        .env("SPARK_SQL", tools.spark_home.join("bin/spark-sql"));
    let short = Running::spawn("tpch-short.sh", short);

    let (out, took) = check.finish(SPARK_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!(
        "spark-submit --master yarn q1_check.py (pyspark {}): {took:.1?}",
        tools.spark_version
    );
    assert!(
        out.status.success(),
        "q1_check.py: {:?}\n{stdout}\n{}",
        out.status,
        &stderr[stderr.len().saturating_sub(6000)..]
    );
    assert!(stdout.contains("master yarn"), "{stdout}");
    assert!(stdout.contains("Q1 spark == duckdb: 4 rows"), "{stdout}");
    let spark_rows = section(&stdout, "spark:");
    assert_eq!(spark_rows.len(), 4, "{stdout}");
    assert_eq!(section(&stdout, "duckdb:").len(), 4, "{stdout}");

    // tpch-short.sh's Q1 through spark-sql: the rows it prints are the ones just checked
    // (spark-sql prints decimals in full, as Python's str(Decimal) does).
    let (short_out, _) = short.finish(SPARK_LIMIT);
    let short_stdout = String::from_utf8_lossy(&short_out.stdout);
    eprintln!("tpch-short.sh: {}", short_stdout.trim());
    let short_log = std::fs::read_to_string(tmp.path().join("tpch-q1-1.out")).unwrap_or_default();
    assert!(
        short_out.status.success() && short_stdout.contains("tpch-q1-1 exit=0"),
        "tpch-short.sh: {:?}\n{short_stdout}\n{}",
        short_out.status,
        &short_log[short_log.len().saturating_sub(6000)..]
    );
    let sql_rows: Vec<String> = short_log
        .lines()
        .filter(|l| l.split('\t').count() == 10)
        .map(|l| l.replace('\t', "|"))
        .collect();
    assert_eq!(sql_rows, spark_rows, "spark-sql printed:\n{short_log}");

    // Both ran on YARN, in root.short, and finished well. A client-mode AM unregisters
    // just after the driver stops, so the RM may need a moment to say FINISHED.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in [check_name.as_str(), "tpch-q1-1"] {
        loop {
            let apps = rt.block_on(spark_apps(&yarn.rm));
            let ours: Vec<&Value> = apps.iter().filter(|a| a["name"] == name).collect();
            if let [app] = ours[..]
                && app["state"] == "FINISHED"
            {
                assert_eq!(app["queue"], "root.short", "{app:#}");
                assert_eq!(app["finalStatus"], "SUCCEEDED", "{app:#}");
                assert!(
                    app["applicationTags"]
                        .as_str()
                        .is_some_and(|t| t.contains("preemptor.class=short")),
                    "{app:#}"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no FINISHED Spark application {name} on the RM: {apps:#?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    eprintln!("{test}: {:.1?} in all", started.elapsed());
}

/// `tpch-short.sh --lineitem` reads Parquet through a temporary view instead of a table of
/// `--database` (how the Spark SQL test's cluster, which has no metastore, would run it).
#[test]
fn tpch_short_reads_lineitem_from_parquet_through_a_temporary_view() {
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("deploy/workloads/tpch-short.sh"))
        .args(["--dry-run", "--bursts", "1", "--burst-size", "2"])
        .args(["--lineitem", "hdfs:///tpch/sf1/lineitem"])
        .output()
        .expect("run tpch-short.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for line in lines {
        assert!(!line.contains("--database"), "{line}");
        assert!(
            line.contains(concat!(
                r"-e $'create temporary view lineitem using parquet options ",
                r"(path \'hdfs:///tpch/sf1/lineitem\');\nselect"
            )),
            "{line}"
        );
    }

    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("deploy/workloads/tpch-short.sh"))
        .args(["--dry-run", "--lineitem", "/data/it's"])
        .output()
        .expect("run tpch-short.sh");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has a quote or a backslash"),
        "{out:?}"
    );
}
