//! The real cluster's workload: text for the long wordcount jobs, TPC-H lineitem and the
//! Spark client set-up for the short queries, and reading what the clients printed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rand::RngExt as _;
use rand::SeedableRng;

use super::super::DemoError;

/// `deploy/workloads/tpch/q1_check.py` and its query, written into the run directory so
/// that the binary needs no checkout.
pub const Q1_CHECK_PY: &str = include_str!("../../../deploy/workloads/tpch/q1_check.py");
pub const Q1_SQL: &str = include_str!("../../../deploy/workloads/tpch/q1.sql");

/// The Python with pyspark and duckdb, pyspark's directory (its SPARK_HOME) and
/// tpchgen-cli.
#[derive(Clone, Debug)]
pub struct Tools {
    pub python: String,
    pub spark_home: PathBuf,
    pub tpchgen: PathBuf,
}

impl Tools {
    pub async fn find(python: &str) -> Result<Tools, DemoError> {
        let probe = tokio::process::Command::new(python)
            .args([
                "-c",
                "import os, duckdb, pyspark; print(os.path.dirname(pyspark.__file__))",
            ])
            .output()
            .await
            .map_err(|e| DemoError::Usage(format!("cannot run {python}: {e}")))?;
        if !probe.status.success() {
            return Err(DemoError::Usage(format!(
                "{python} cannot import pyspark and duckdb ({}); set PYTHON to a Python that \
                 has them (bash .ci/run installs them in .venv)",
                String::from_utf8_lossy(&probe.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            )));
        }
        let spark_home = PathBuf::from(String::from_utf8_lossy(&probe.stdout).trim());
        // A venv's scripts sit beside its interpreter, whether or not it is on PATH.
        let beside = Path::new(python).with_file_name("tpchgen-cli");
        let tpchgen = if beside.is_file() {
            beside
        } else {
            PathBuf::from("tpchgen-cli")
        };
        Ok(Tools {
            python: python.to_string(),
            spark_home,
            tpchgen,
        })
    }

    /// TPC-H lineitem at `scale` as one Parquet file under `dir`.
    pub async fn lineitem(&self, scale: f64, dir: &Path) -> Result<PathBuf, DemoError> {
        let out = tokio::process::Command::new(&self.tpchgen)
            .args(["parquet", "--scale-factor", &scale.to_string()])
            .args(["--tables", "lineitem", "--output-dir"])
            .arg(dir)
            .output()
            .await
            .map_err(|e| DemoError::Usage(format!("cannot run tpchgen-cli: {e}")))?;
        let file = dir.join("lineitem.parquet");
        if !out.status.success() || !file.is_file() {
            return Err(DemoError::Io(format!(
                "tpchgen-cli parquet failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(file)
    }

    /// Spark's client configuration for a cluster whose every node is this machine, as
    /// `integration-tests/hadoop_spark.rs` uses it: pyspark's own jars, one small
    /// executor, no UI, no metastore, C1-only JVMs (they start a third faster on 2 cores).
    pub fn spark_defaults(&self, staging: &Path) -> String {
        let jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";
        format!(
            "spark.yarn.jars local:{jars}/*\n\
             spark.yarn.stagingDir file://{staging}\n\
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
            jars = self.spark_home.join("jars").display(),
            staging = staging.display(),
            python = self.python,
        )
    }
}

/// Writes `files` text files of about `mb` MB each into `dir`: lines of words drawn
/// from a fixed vocabulary with a seeded generator, so every policy counts the same text.
pub fn write_text(dir: &Path, files: usize, mb: u64, seed: u64) -> Result<(), DemoError> {
    let io =
        |e: std::io::Error| DemoError::Io(format!("writing text under {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ba", "de", "fu", "go", "hi", "ja", "po",
        "ze",
    ];
    let vocabulary: Vec<String> = (0..8000)
        .map(|_| {
            let n = rng.random_range(1..=4);
            (0..n)
                .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
                .collect()
        })
        .collect();
    let bytes = mb.saturating_mul(1 << 20);
    for f in 0..files {
        let path = dir.join(format!("part-{f:03}.txt"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(io)?);
        let mut written = 0u64;
        let mut line = String::new();
        while written < bytes {
            line.clear();
            for w in 0..12 {
                if w > 0 {
                    line.push(' ');
                }
                line.push_str(&vocabulary[rng.random_range(0..vocabulary.len())]);
            }
            line.push('\n');
            out.write_all(line.as_bytes()).map_err(io)?;
            written += line.len() as u64;
        }
        out.flush().map_err(io)?;
    }
    Ok(())
}

/// The first `application_<ts>_<n>` after `marker` in `text`.
pub fn application_after(text: &str, marker: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = &l[l.find(marker)? + marker.len()..];
        let id: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        id.starts_with("application_").then_some(id)
    })
}

/// Sum of the MapReduce job counters named `names` (`Failed map tasks`, ...) as the
/// `hadoop jar` client prints them at the end; counters that are zero are not printed.
pub fn counter_sum(text: &str, names: &[&str]) -> u64 {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            names
                .contains(&k.trim())
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

/// What `q1_check.py` printed: (completed, failed) task attempts, and whether Spark's
/// rows equal DuckDB's.
pub fn spark_outcome(stdout: &str) -> (Option<(u64, u64)>, bool) {
    let tasks = stdout.lines().find_map(|l| {
        let rest = l.strip_prefix("spark tasks: ")?;
        let (done, failed) = rest.split_once(" completed, ")?;
        let failed = failed.strip_suffix(" failed")?;
        Some((done.trim().parse().ok()?, failed.trim().parse().ok()?))
    });
    let correct = stdout
        .lines()
        .any(|l| l.starts_with("Q1 spark == duckdb: ") && !l.contains(": 0 rows"));
    (tasks, correct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_output_is_read_for_ids_counters_and_answers() {
        let err = "26/11/29 06:56:31 INFO impl.YarnClientImpl: Submitted application application_1795935363218_0001\n\
                   \t\tFailed map tasks=2\n\t\tKilled map tasks=1\n\t\tKilled reduce tasks=3\n\t\tLaunched map tasks=4\n";
        assert_eq!(
            application_after(err, "Submitted application").as_deref(),
            Some("application_1795935363218_0001")
        );
        assert_eq!(application_after(err, "nothing"), None);
        assert_eq!(
            counter_sum(err, &["Failed map tasks", "Failed reduce tasks"]),
            2
        );
        assert_eq!(
            counter_sum(err, &["Killed map tasks", "Killed reduce tasks"]),
            4
        );
        let out = "spark 4.3.0: master yarn, application application_1_0002, queue short\n\
                   spark tasks: 5 completed, 1 failed\nQ1 spark == duckdb: 4 rows\n";
        assert_eq!(
            application_after(out, ", application").as_deref(),
            Some("application_1_0002")
        );
        assert_eq!(spark_outcome(out), (Some((5, 1)), true));
        assert_eq!(spark_outcome("DIFFERENT x\n"), (None, false));
    }

    #[test]
    fn text_files_have_the_size_asked_and_repeat_with_the_seed() {
        let dir = std::env::temp_dir().join(format!("preemptor-text-{}", std::process::id()));
        let r = write_text(&dir, 2, 1, 7);
        let a = std::fs::read(dir.join("part-000.txt"));
        let b = std::fs::read(dir.join("part-001.txt"));
        let again = write_text(&dir, 1, 1, 7).and_then(|_| {
            std::fs::read(dir.join("part-000.txt")).map_err(|e| DemoError::Io(e.to_string()))
        });
        let _ = std::fs::remove_dir_all(&dir);
        r.unwrap();
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.len() >= 1 << 20 && a.len() < (1 << 20) + 200);
        assert_ne!(a, b);
        assert_eq!(again.unwrap(), a);
    }
}
