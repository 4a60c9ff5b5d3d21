//! The processes of a real-cluster run: `deploy/hadoop/cluster.sh up`/`down`, and the
//! clients (`hadoop jar`, `spark-submit`) each in a process group of its own, killed whole
//! if still running when dropped.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use super::super::DemoError;

/// The environment variable `cluster.sh` marks its daemons, clients and containers with;
/// `down` stops every process that carries it.
pub const CLUSTER_MARKER: &str = "PREEMPTOR_HADOOP_CLUSTER";

/// How many of `cluster.sh up`'s last stderr lines a failure carries.
const UP_ERROR_LINES: usize = 80;

/// A cluster that `cluster.sh up` started; `down` runs when it is dropped, if not before.
pub struct Cluster {
    script: PathBuf,
    pub work: PathBuf,
    pub rm: String,
    pub conf_dir: PathBuf,
    pub examples_jar: PathBuf,
    /// NodeManager web URLs, in NodeManager order (`nm-1`, `nm-2`, ...).
    pub nm_webapps: Vec<String>,
    pub yarn_preemption: bool,
    pub node_labels: bool,
    pub up_took: Duration,
    running: bool,
}

/// What `cluster.sh up` is asked for.
pub struct ClusterSpec<'a> {
    pub script: &'a Path,
    pub work: &'a Path,
    pub nodes: usize,
    pub node_memory_mb: u64,
    pub node_vcores: u32,
    pub conf_dir: &'a Path,
    pub yarn_preemption: bool,
    /// Node labels on, centralized: Dice's short partition is one.
    pub node_labels: bool,
}

impl Cluster {
    pub async fn up(spec: ClusterSpec<'_>) -> Result<Cluster, DemoError> {
        let started = Instant::now();
        // Built before `up` runs, so that a failed `up` is brought down too.
        let mut cluster = Cluster {
            script: spec.script.to_path_buf(),
            work: spec.work.to_path_buf(),
            rm: String::new(),
            conf_dir: PathBuf::new(),
            examples_jar: PathBuf::new(),
            nm_webapps: Vec::new(),
            yarn_preemption: spec.yarn_preemption,
            node_labels: spec.node_labels,
            up_took: Duration::ZERO,
            running: true,
        };
        let mut cmd = tokio::process::Command::new("bash");
        cmd.arg(spec.script)
            .arg("--work-dir")
            .arg(spec.work)
            .arg("up")
            .args(["--nodes", &spec.nodes.to_string()])
            .args(["--node-memory-mb", &spec.node_memory_mb.to_string()])
            .args(["--node-vcores", &spec.node_vcores.to_string()])
            .arg("--conf-dir")
            .arg(spec.conf_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if spec.yarn_preemption {
            cmd.arg("--yarn-preemption");
        }
        if spec.node_labels {
            cmd.args(["--set", "yarn.node-labels.enabled=true"]);
            cmd.args(["--set", "yarn.node-labels.configuration-type=centralized"]);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| DemoError::Io(format!("running {}: {e}", spec.script.display())))?;
        // Progress goes on to our stderr as it comes; the last lines (the reason, and the
        // daemons' log tails) also go into the error, so that it says why by itself.
        let progress = child.stderr.take().map(|err| {
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(err).lines();
                let mut tail = std::collections::VecDeque::with_capacity(UP_ERROR_LINES);
                while let Ok(Some(line)) = lines.next_line().await {
                    eprintln!("{line}");
                    if tail.len() == UP_ERROR_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
                tail
            })
        });
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| DemoError::Io(format!("waiting for {}: {e}", spec.script.display())))?;
        let tail = match progress {
            Some(task) => task.await.unwrap_or_default(),
            None => Default::default(),
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(DemoError::Io(format!(
                "cluster.sh up failed ({}); its log is under {}; it said:\n{}",
                out.status,
                spec.work.join("logs").display(),
                Vec::from(tail).join("\n")
            )));
        }
        for line in stdout.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches(['\'', '"']).to_string();
            match k {
                "RM_WEBAPP" => cluster.rm = v,
                "HADOOP_CONF_DIR" => cluster.conf_dir = PathBuf::from(v),
                "HADOOP_EXAMPLES_JAR" => cluster.examples_jar = PathBuf::from(v),
                "NM_WEBAPPS" => {
                    cluster.nm_webapps = v
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                _ => {}
            }
        }
        if cluster.rm.is_empty()
            || cluster.nm_webapps.len() != spec.nodes
            || !cluster.examples_jar.is_file()
        {
            return Err(DemoError::Io(format!(
                "cluster.sh up printed no RM_WEBAPP, examples jar or {} NM_WEBAPPS: {stdout}",
                spec.nodes
            )));
        }
        cluster.up_took = started.elapsed();
        Ok(cluster)
    }

    /// `yarn.nodemanager.local-dirs` of NodeManager `i` (0-based).
    pub fn nm_local_dir(&self, i: usize) -> PathBuf {
        self.work.join(format!("nm-{}", i + 1)).join("local")
    }

    /// `cluster.sh --work-dir WORK hadoop ARGS...`, for [`Client::spawn`].
    pub fn hadoop(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("bash");
        cmd.arg(&self.script)
            .arg("--work-dir")
            .arg(&self.work)
            .arg("hadoop")
            .args(args);
        cmd
    }

    /// Stops every process of the cluster; how long it took.
    pub async fn down(mut self) -> Result<Duration, DemoError> {
        self.running = false;
        let started = Instant::now();
        let status = tokio::process::Command::new("bash")
            .arg(&self.script)
            .arg("--work-dir")
            .arg(&self.work)
            .arg("down")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .await
            .map_err(|e| DemoError::Io(format!("running cluster.sh down: {e}")))?;
        if !status.success() {
            return Err(DemoError::Io(format!(
                "cluster.sh down --work-dir {} failed ({status}): some process survived",
                self.work.display()
            )));
        }
        Ok(started.elapsed())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.running {
            return;
        }
        // An error or a panic on the way: nothing of the cluster may outlive the demo.
        let status = std::process::Command::new("bash")
            .arg(&self.script)
            .arg("--work-dir")
            .arg(&self.work)
            .arg("down")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            tracing::error!(work = %self.work.display(), "cluster.sh down failed: {status:?}");
        }
    }
}

/// A client process group (`hadoop jar`, `spark-submit`) with its output in two files.
pub struct Client {
    pub what: String,
    child: tokio::process::Child,
    pgid: Option<i32>,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub started: Instant,
    pub exit: Option<ExitStatus>,
}

impl Client {
    /// Starts `cmd` in a process group of its own, stdout and stderr to `<prefix>.out`
    /// and `<prefix>.err`.
    pub fn spawn(
        what: String,
        mut cmd: tokio::process::Command,
        prefix: &Path,
    ) -> Result<Client, DemoError> {
        let stdout = prefix.with_extension("out");
        let stderr = prefix.with_extension("err");
        let file = |p: &Path| {
            std::fs::File::create(p)
                .map_err(|e| DemoError::Io(format!("creating {}: {e}", p.display())))
        };
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(file(&stdout)?)
            .stderr(file(&stderr)?);
        let child = cmd
            .spawn()
            .map_err(|e| DemoError::Io(format!("starting {what}: {e}")))?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        Ok(Client {
            what,
            child,
            pgid,
            stdout,
            stderr,
            started: Instant::now(),
            exit: None,
        })
    }

    /// True once the client has exited (its status kept in `exit`).
    pub fn done(&mut self) -> bool {
        if self.exit.is_none()
            && let Ok(Some(s)) = self.child.try_wait()
        {
            self.exit = Some(s);
        }
        self.exit.is_some()
    }

    pub fn succeeded(&self) -> bool {
        self.exit.is_some_and(|s| s.success())
    }

    pub fn stdout_text(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGKILL to the whole group (the client's JVM and anything it started).
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid.filter(|p| *p > 1) {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory
            // is involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.done() {
            self.kill();
        }
    }
}
