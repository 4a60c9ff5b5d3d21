//! `preemptor check-config`: validates a conf directory and prints the queue tree and a
//! summary of the settings, as text or JSON. Apart from `config/`, which only reads.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use crate::cluster::PolicyKind;
use crate::config::error::{ConfigError, ConfigWarning};
use crate::config::queues::{CapacityValue, QueueConfig, QueueTree, parse_capacity};
use crate::config::settings::{PolicySettings, PreemptorSettings};
use crate::config::{ConfigErrors, LoadedConfig};
use crate::resources::Resource;
use crate::text::table;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 when the configuration is valid (warnings allowed), \
1 when it has errors (all of them are listed, each with file:line:col), 2 on a usage error."
)]
pub struct CheckConfigArgs {
    /// Hadoop configuration directory: capacity-scheduler.xml (required), preemptor-site.xml
    /// (defaults when absent) and yarn-site.xml (optional; checked for settings that clash
    /// with Preemptor).
    #[arg(long, default_value = "hadoop-conf", value_name = "DIR")]
    pub conf_dir: PathBuf,

    /// Output format: an indented table, or one JSON document on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,

    /// Also show every queue's guaranteed and maximum resources in a cluster of this size,
    /// e.g. "memory=102400,vcores=100" or "[memory=100Gi,vcores=100]". Needed to see
    /// queues configured with absolute resources as shares.
    #[arg(long, value_name = "RESOURCE", value_parser = parse_cluster_resource)]
    pub cluster_resource: Option<Resource>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

fn parse_cluster_resource(s: &str) -> Result<Resource, String> {
    let t = s.trim();
    let bracketed = if t.starts_with('[') {
        t.to_string()
    } else {
        format!("[{t}]")
    };
    match parse_capacity(&bracketed, false)? {
        (CapacityValue::Absolute(r), ignored) if ignored.is_empty() && !r.is_zero() => Ok(r),
        (CapacityValue::Absolute(_), ignored) if !ignored.is_empty() => Err(format!(
            "only memory and vcores are understood, not {}",
            ignored.join(", ")
        )),
        _ => Err("expected memory=<MB>,vcores=<n>, not all zero".into()),
    }
}

pub fn run(args: &CheckConfigArgs) -> ExitCode {
    let result = crate::config::load_dir(&args.conf_dir);
    let report = Report::new(args, &result);
    let (stdout, stderr) = match args.format {
        OutputFormat::Json => (render_json(&report), String::new()),
        OutputFormat::Text => render_text(&report),
    };
    // A closed pipe (`| head`) is not worth a panic or a different exit status.
    let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(stderr.as_bytes());
    if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Everything check-config prints, in the shape the JSON output has.
#[derive(Serialize)]
pub struct Report<'a> {
    pub valid: bool,
    pub conf_dir: String,
    pub files: &'a [String],
    pub queues: Vec<QueueRow>,
    pub settings: Option<&'a PreemptorSettings>,
    pub warnings: &'a [ConfigWarning],
    pub errors: &'a [ConfigError],
    #[serde(skip)]
    cluster: Option<Resource>,
}

/// One queue as check-config shows it.
#[derive(Serialize)]
pub struct QueueRow {
    pub path: String,
    pub name: String,
    pub depth: usize,
    pub leaf: bool,
    /// As configured: `95`, `2w` or `[memory=..,vcores=..]`.
    pub capacity: String,
    pub capacity_form: &'static str,
    /// Fraction of the cluster, where defined without knowing the cluster.
    pub absolute_capacity: Option<f64>,
    pub maximum_capacity: String,
    pub absolute_maximum_capacity: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guaranteed: Option<Resource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum: Option<Resource>,
    pub state: String,
    pub job_class: Option<String>,
    /// Effective policy, and where it comes from: `queue`, `parent` or `site`.
    pub policy: PolicyKind,
    pub policy_source: &'static str,
    pub preemption_disabled: bool,
    pub user_limit_factor: f64,
    pub minimum_user_limit_percent: f64,
    pub ordering_policy: String,
    pub maximum_applications: Option<u32>,
    pub maximum_am_resource_percent: f64,
    pub acl_submit_applications: String,
    pub accessible_node_labels: String,
    pub labels: Vec<LabelRow>,
    pub capacity_location: Option<String>,
}

#[derive(Serialize)]
pub struct LabelRow {
    pub label: String,
    pub capacity: String,
    pub absolute_capacity: Option<f64>,
    pub maximum_capacity: String,
    pub absolute_maximum_capacity: Option<f64>,
}

impl<'a> Report<'a> {
    pub fn new(
        args: &CheckConfigArgs,
        result: &'a Result<LoadedConfig, ConfigErrors>,
    ) -> Report<'a> {
        let conf_dir = args.conf_dir.display().to_string();
        match result {
            Ok(c) => Report {
                valid: true,
                conf_dir,
                files: &c.files,
                queues: queue_rows(&c.queues, &c.settings, args.cluster_resource),
                settings: Some(&c.settings),
                warnings: &c.warnings,
                errors: &[],
                cluster: args.cluster_resource,
            },
            Err(e) => Report {
                valid: false,
                conf_dir,
                files: &[],
                queues: Vec::new(),
                settings: None,
                warnings: &e.warnings,
                errors: &e.errors,
                cluster: args.cluster_resource,
            },
        }
    }
}

fn queue_rows(
    tree: &QueueTree,
    settings: &PreemptorSettings,
    cluster: Option<Resource>,
) -> Vec<QueueRow> {
    let resources = cluster.map(|c| tree.resources(None, c));
    tree.queues
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let (policy, policy_source) = match q.policy {
                Some(p) if q.policy_is_own => (p, "queue"),
                Some(p) => (p, "parent"),
                None => (settings.policy.kind, "site"),
            };
            QueueRow {
                path: q.path.clone(),
                name: q.name.clone(),
                depth: q.depth,
                leaf: q.is_leaf(),
                capacity: q.capacities.capacity.to_string(),
                capacity_form: q.capacities.capacity.form(),
                absolute_capacity: q.capacities.absolute_capacity,
                maximum_capacity: q.capacities.maximum_capacity.to_string(),
                absolute_maximum_capacity: q.capacities.absolute_maximum_capacity,
                guaranteed: resources.as_ref().map(|r| r[i].guaranteed),
                maximum: resources.as_ref().map(|r| r[i].maximum),
                state: q.state.to_string(),
                job_class: q.job_class.map(|c| c.to_string()),
                policy,
                policy_source,
                preemption_disabled: q.preemption_disabled,
                user_limit_factor: q.user_limit_factor,
                minimum_user_limit_percent: q.minimum_user_limit_percent,
                ordering_policy: q.ordering_policy.name().to_string(),
                maximum_applications: q.maximum_applications,
                maximum_am_resource_percent: q.maximum_am_resource_percent,
                acl_submit_applications: q.acl_submit_applications.clone(),
                accessible_node_labels: q.accessible_node_labels.to_string(),
                labels: label_rows(q),
                capacity_location: q.capacity_location().map(ToString::to_string),
            }
        })
        .collect()
}

fn label_rows(q: &QueueConfig) -> Vec<LabelRow> {
    q.labels
        .iter()
        .map(|(label, c)| LabelRow {
            label: label.clone(),
            capacity: c.capacity.to_string(),
            absolute_capacity: c.absolute_capacity,
            maximum_capacity: c.maximum_capacity.to_string(),
            absolute_maximum_capacity: c.absolute_maximum_capacity,
        })
        .collect()
}

pub fn render_json(report: &Report<'_>) -> String {
    match serde_json::to_string_pretty(report) {
        Ok(s) => s + "\n",
        // Only non-string map keys or a failing Serialize impl could get here.
        Err(e) => format!(
            "{{\"valid\":false,\"errors\":[{{\"location\":null,\"message\":{:?}}}]}}\n",
            e.to_string()
        ),
    }
}

fn percent(f: Option<f64>) -> String {
    f.map_or_else(|| "-".to_string(), |f| format!("{:.1}%", f * 100.0))
}

/// `(stdout, stderr)`: the tree and settings on stdout, warnings and errors on stderr.
pub fn render_text(report: &Report<'_>) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    for w in report.warnings {
        let _ = writeln!(err, "warning: {w}");
    }
    if !report.valid {
        for e in report.errors {
            let _ = writeln!(err, "error: {e}");
        }
        let n = report.errors.len();
        let _ = writeln!(
            err,
            "{}: {n} error{} — the configuration is not valid",
            report.conf_dir,
            if n == 1 { "" } else { "s" }
        );
        return (out, err);
    }
    let _ = writeln!(
        out,
        "Configuration {} ({})\n",
        report.conf_dir,
        report.files.join(", ")
    );
    let mut header = vec![
        "QUEUE",
        "CAPACITY",
        "ABS CAP",
        "MAX CAP",
        "ABS MAX",
        "STATE",
        "CLASS",
        "POLICY",
        "PREEMPTION",
    ];
    if report.cluster.is_some() {
        header.extend(["GUARANTEED", "MAXIMUM"]);
    }
    let mut rows = vec![header.into_iter().map(str::to_string).collect::<Vec<_>>()];
    for q in &report.queues {
        let mut row = vec![
            format!("{}{}", "  ".repeat(q.depth), q.name),
            q.capacity.clone(),
            percent(q.absolute_capacity),
            q.maximum_capacity.clone(),
            percent(q.absolute_maximum_capacity),
            q.state.clone(),
            q.job_class.clone().unwrap_or_else(|| "-".into()),
            format!("{} ({})", q.policy, q.policy_source),
            if q.preemption_disabled {
                "disabled"
            } else {
                "enabled"
            }
            .to_string(),
        ];
        if let (Some(g), Some(m)) = (q.guaranteed, q.maximum) {
            row.extend([g.to_string(), m.to_string()]);
        }
        rows.push(row);
    }
    out.push_str(&table(&rows));
    if report.queues.iter().any(|q| q.capacity_form == "absolute") && report.cluster.is_none() {
        out.push_str(
            "(absolute resources become shares only for a given cluster: add --cluster-resource)\n",
        );
    }
    let labelled: Vec<&QueueRow> = report
        .queues
        .iter()
        .filter(|q| !q.labels.is_empty())
        .collect();
    if !labelled.is_empty() {
        out.push_str("\nNode labels\n");
        let mut rows = vec![
            [
                "QUEUE", "LABEL", "CAPACITY", "ABS CAP", "MAX CAP", "ABS MAX",
            ]
            .map(str::to_string)
            .to_vec(),
        ];
        for q in labelled {
            for l in &q.labels {
                rows.push(vec![
                    q.path.clone(),
                    l.label.clone(),
                    l.capacity.clone(),
                    percent(l.absolute_capacity),
                    l.maximum_capacity.clone(),
                    percent(l.absolute_maximum_capacity),
                ]);
            }
        }
        out.push_str(&table(&rows));
    }
    if let Some(s) = report.settings {
        let policies: Vec<PolicyKind> = PolicyKind::ALL
            .into_iter()
            .filter(|k| report.queues.iter().any(|q| q.policy == *k))
            .collect();
        out.push('\n');
        out.push_str(&settings_summary(s, &policies));
    }
    let n = report.warnings.len();
    let _ = writeln!(
        out,
        "\nOK: {} queues, {n} warning{}",
        report.queues.len(),
        if n == 1 { "" } else { "s" }
    );
    (out, err)
}

/// Policies in use get a line with their parameters.
fn settings_summary(s: &PreemptorSettings, policies: &[PolicyKind]) -> String {
    let p = &s.policy;
    let mut rows = vec![
        vec!["Settings".to_string(), String::new()],
        vec![
            "  ResourceManager".into(),
            format!(
                "{} (user {}, timeout {} ms)",
                s.rm.addresses.join(", "),
                s.rm.user_name.as_deref().unwrap_or("-"),
                s.rm.request_timeout_ms
            ),
        ],
        vec![
            "  Policy".into(),
            format!(
                "{}, every {} ms{}",
                p.kind,
                p.monitoring_interval_ms,
                if p.observe_only {
                    ", OBSERVE ONLY (acts on nothing)"
                } else {
                    ""
                }
            ),
        ],
        vec![
            "  Per round".into(),
            format!(
                "dead band {}, natural termination {}, at most {} of the cluster",
                p.max_ignored_over_capacity,
                p.natural_termination_factor,
                p.total_preemption_per_round
            ),
        ],
    ];
    for kind in policies {
        if let Some(line) = policy_parameters(p, *kind) {
            rows.push(vec![format!("  {kind}"), line]);
        }
    }
    rows.push(vec![
        "  Agents".into(),
        format!(
            "port {}, token {}, {} explicit address{}",
            s.agent.port,
            s.agent.token_file.display(),
            s.agent.addresses.len(),
            if s.agent.addresses.len() == 1 {
                ""
            } else {
                "es"
            }
        ),
    ]);
    rows.push(vec![
        "  Controller".into(),
        format!(
            "listen {}, proxy {}",
            s.controller.listen,
            s.controller.proxy_listen.map_or_else(
                || "off".to_string(),
                |a| format!("{a} ({} routes)", s.controller.routes.len())
            )
        ),
    ]);
    rows.push(vec![
        "  Log format".into(),
        format!("{:?}", s.log.format).to_lowercase(),
    ]);
    table(&rows)
}

fn policy_parameters(p: &PolicySettings, kind: PolicyKind) -> Option<String> {
    let footprint = format!(
        "footprint {}, resume after {} picks",
        p.suspend.footprint, p.suspend.resume_delay
    );
    Some(match kind {
        PolicyKind::None => return None,
        PolicyKind::Kill => format!("kill after {} ms", p.kill.max_wait_before_kill_ms),
        PolicyKind::Immediate => footprint,
        PolicyKind::Graceful => format!("step {}, {footprint}", p.graceful.step),
        PolicyKind::Las => format!(
            "quantum {} ms, {} extra slots per node, guard after {} preemptions ({}x quantum)",
            p.las.quantum_ms,
            p.las.extra_slots,
            p.las.starvation_preemptions,
            p.las.starvation_quantum_multiplier
        ),
        PolicyKind::Dice => format!(
            "window {} ms, max waiting {} ms, sizing {} ({}), preemption {} ({}, x{})",
            p.dice.window_ms,
            p.dice.max_task_waiting_ms,
            on_off(p.dice.sizing_enabled),
            p.dice.sizing_model.name(),
            on_off(p.dice.preemption_enabled),
            p.dice.preemption_model.name(),
            p.dice.multiplier
        ),
        PolicyKind::Adaptive => {
            let pairs: Vec<String> = p
                .adaptive
                .mapping
                .iter()
                .map(|(t, k)| format!("{t}={k}"))
                .collect();
            format!("{}, otherwise {}", pairs.join(", "), p.adaptive.fallback)
        }
    })
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn args(dir: &Path, cluster: Option<Resource>) -> CheckConfigArgs {
        CheckConfigArgs {
            conf_dir: dir.to_path_buf(),
            format: OutputFormat::Text,
            cluster_resource: cluster,
        }
    }

    fn shipped() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hadoop-conf")
    }

    #[test]
    fn cluster_resource_accepts_both_spellings() {
        assert_eq!(
            parse_cluster_resource("memory=100Gi,vcores=100"),
            Ok(Resource::new(102400, 100))
        );
        assert_eq!(
            parse_cluster_resource("[memory-mb=2048, vcores=2]"),
            Ok(Resource::new(2048, 2))
        );
        assert!(parse_cluster_resource("memory=0").is_err());
        assert!(parse_cluster_resource("gpu=1").is_err());
        assert!(parse_cluster_resource("50").is_err());
    }

    #[test]
    fn text_shows_an_indented_tree_and_settings() {
        let a = args(&shipped(), Some(Resource::new(100 * 1024, 100)));
        let result = crate::config::load_dir(&a.conf_dir);
        let (out, err) = render_text(&Report::new(&a, &result));
        assert!(err.is_empty(), "{err}");
        let lines: Vec<&str> = out.lines().collect();
        let row = |name: &str| {
            *lines
                .iter()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap()
        };
        assert!(row("root").starts_with("root "));
        let short = row("short");
        assert!(short.starts_with("  short "), "{short}");
        for cell in [
            "95",
            "95.0%",
            "100.0%",
            "RUNNING",
            "short",
            "graceful (site)",
            "disabled",
            "<97280 MB, 95 vcores>",
        ] {
            assert!(short.contains(cell), "{cell} not in {short}");
        }
        let long = row("long");
        for cell in ["5.0%", "long", "enabled", "<5120 MB, 5 vcores>"] {
            assert!(long.contains(cell), "{cell} not in {long}");
        }
        assert!(
            out.contains("graceful") && out.contains("step <4096 MB, 2 vcores>"),
            "{out}"
        );
        assert!(out.ends_with("OK: 3 queues, 0 warnings\n"), "{out}");
    }

    #[test]
    fn json_has_the_same_tree() {
        let a = args(&shipped(), None);
        let result = crate::config::load_dir(&a.conf_dir);
        let v: serde_json::Value =
            serde_json::from_str(&render_json(&Report::new(&a, &result))).unwrap();
        assert_eq!(v["valid"], true);
        let queues = v["queues"].as_array().unwrap();
        assert_eq!(queues.len(), 3);
        assert_eq!(queues[1]["path"], "root.short");
        assert_eq!(queues[1]["capacity"], "95");
        assert_eq!(queues[1]["absolute_capacity"], 0.95);
        assert_eq!(queues[1]["job_class"], "short");
        assert_eq!(queues[1]["policy"], "graceful");
        assert_eq!(queues[1]["preemption_disabled"], true);
        assert!(queues[1].get("guaranteed").is_none());
        assert_eq!(v["settings"]["policy"]["kind"], "graceful");
        assert_eq!(v["errors"].as_array().unwrap().len(), 0);
    }

    #[test]
    fn errors_are_listed_with_locations() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("capacity-scheduler.xml"),
            "<configuration>\n\
             <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>\n\
             <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>x</value></property>\n\
             </configuration>\n",
        )
        .unwrap();
        let a = args(dir.path(), None);
        let result = crate::config::load_dir(&a.conf_dir);
        let report = Report::new(&a, &result);
        let (out, err) = render_text(&report);
        assert!(out.is_empty());
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| !l.starts_with("warning: "))
            .collect();
        assert_eq!(lines.len(), 3, "{err}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains("capacity-scheduler.xml:2:"),
            "{err}"
        );
        assert!(
            lines[1].contains("capacity-scheduler.xml:3:") && lines[1].contains("queue root.a"),
            "{err}"
        );
        assert!(
            lines[2].ends_with("2 errors — the configuration is not valid"),
            "{err}"
        );
        let v: serde_json::Value = serde_json::from_str(&render_json(&report)).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(v["errors"].as_array().unwrap().len(), 2);
        assert!(
            v["errors"][1]["location"]
                .as_str()
                .unwrap()
                .ends_with("capacity-scheduler.xml:3:63"),
            "{v}"
        );
    }
}
