//! A real Hadoop YARN cluster for the tests, from `deploy/hadoop/cluster.sh`: `up` in a
//! work directory of the test's own, `down` when the guard drops, even on failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const CLUSTER_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/hadoop/cluster.sh");

pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Says why a test cannot run: a failure under `CI=true`, a printed skip otherwise.
pub fn skip_or_fail(test: &str, why: &str) {
    if ci() {
        panic!("{test}: {why} (required under CI=true)");
    }
    eprintln!("SKIPPED {test}: {why}");
}

/// Whether Java and Maven are there to run Hadoop.
pub fn hadoop_tools_or_skip(test: &str) -> bool {
    for tool in ["java", "mvn"] {
        let found = Command::new(tool)
            .arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            skip_or_fail(test, &format!("{tool} not found, no real Hadoop"));
            return false;
        }
    }
    true
}

/// A running cluster; `cluster.sh down` when dropped.
pub struct Hadoop {
    pub work: PathBuf,
    pub rm: String,
    pub conf_dir: String,
    pub examples_jar: String,
    /// SleepJob's jar.
    pub tests_jar: String,
    /// Every NodeManager's web address, in order (`nm-1`, `nm-2`, ...).
    pub nm_webapps: Vec<String>,
    /// The PEM CA of the daemons' certificates (`up --https`).
    pub ca_file: Option<String>,
}

impl Hadoop {
    /// `cluster.sh up --work-dir WORK ARGS...`.
    pub fn up(work: PathBuf, args: &[&str]) -> Hadoop {
        // Built before `up` runs, so that a failed `up` is still brought down.
        let mut h = Hadoop {
            work,
            rm: String::new(),
            conf_dir: String::new(),
            examples_jar: String::new(),
            tests_jar: String::new(),
            nm_webapps: Vec::new(),
            ca_file: None,
        };
        let out = h.up_again(args);
        for line in out.lines() {
            let unquote = |v: &str| v.trim().trim_matches(['\'', '"']).to_string();
            if let Some(v) = line.strip_prefix("RM_WEBAPP=") {
                h.rm = unquote(v);
            } else if let Some(v) = line.strip_prefix("HADOOP_CONF_DIR=") {
                h.conf_dir = unquote(v);
            } else if let Some(v) = line.strip_prefix("HADOOP_EXAMPLES_JAR=") {
                h.examples_jar = unquote(v);
            } else if let Some(v) = line.strip_prefix("HADOOP_TESTS_JAR=") {
                h.tests_jar = unquote(v);
            } else if let Some(v) = line.strip_prefix("NM_WEBAPPS=") {
                h.nm_webapps = unquote(v).split(',').map(str::to_string).collect();
            } else if let Some(v) = line.strip_prefix("HADOOP_CA_FILE=") {
                h.ca_file = Some(unquote(v));
            }
        }
        assert!(
            h.rm.starts_with("http://") || h.rm.starts_with("https://"),
            "no RM_WEBAPP in {out:?}"
        );
        assert!(!h.conf_dir.is_empty(), "no HADOOP_CONF_DIR in {out:?}");
        assert!(
            Path::new(&h.examples_jar).is_file(),
            "no examples jar in {out:?}"
        );
        h
    }

    /// NodeManager `i`'s (1-based) yarn.nodemanager.local-dirs.
    pub fn nm_local_dir(&self, i: usize) -> PathBuf {
        self.work.join(format!("nm-{i}")).join("local")
    }

    /// `cluster.sh up` on this work directory again; its stdout.
    pub fn up_again(&self, args: &[&str]) -> String {
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(CLUSTER_SH)
            .args(["up", "--work-dir"])
            .arg(&self.work)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run cluster.sh up");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprint!("{stderr}");
        // The reason and the daemons' log tails are the last lines: the panic carries them.
        let lines: Vec<&str> = stderr.lines().collect();
        let said = lines[lines.len().saturating_sub(80)..].join("\n");
        assert!(
            out.status.success(),
            "cluster.sh up failed ({}): {stdout}\nit said:\n{said}",
            out.status
        );
        eprintln!("cluster.sh up: {:.1} s", started.elapsed().as_secs_f64());
        stdout
    }

    pub fn down(&self) -> std::io::Result<std::process::Output> {
        Command::new("bash")
            .arg(CLUSTER_SH)
            .args(["down", "--work-dir"])
            .arg(&self.work)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
    }

    /// `cluster.sh TOOL --work-dir WORK ARGS...` (`hadoop`, `yarn`, `status`), not waited
    /// for, run in the work directory's parent: jobs write relative paths (pi's
    /// `QuasiMonteCarlo_*`) under the local file system's working directory.
    pub fn tool(&self, tool: &str, args: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(CLUSTER_SH)
            .arg(tool)
            .arg("--work-dir")
            .arg(&self.work)
            .args(args)
            .stdin(Stdio::null())
            .current_dir(self.work.parent().unwrap_or(&self.work));
        c
    }
}

impl Drop for Hadoop {
    fn drop(&mut self) {
        match self.down() {
            Ok(o) if o.status.success() => {}
            other => eprintln!(
                "cluster.sh down --work-dir {}: {other:?}",
                self.work.display()
            ),
        }
    }
}
