//! The capacity scheduler's queue tree from capacity-scheduler.xml, as YARN 3.x's
//! CapacitySchedulerConfiguration reads it, with the checks its queue constructors make
//! (legacy queue mode: siblings use one capacity form).
//!
//! Where YARN would accept something that is almost certainly a mistake, this reader
//! reports it: a queue listed without any capacity (YARN gives it 0), a capacity on
//! `root`, garbage where a number belongs (YARN falls back to defaults or throws).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;

use super::error::{ConfigError, ConfigErrors, ConfigWarning, Location, QueueProblem};
use super::values::{did_you_mean, parse_bool, parse_f64, parse_f64_in, parse_i64, parse_list};
use super::xml::Configuration;
use crate::cluster::{JobClass, Partition, PolicyKind, Queue, QueueIdx};
use crate::resources::Resource;

pub const PREFIX: &str = "yarn.scheduler.capacity.";
pub const ROOT: &str = "root";
/// QueueCapacityChecks.CAPACITY_SUM_PRECISION: tolerance on a sum of capacity
/// fractions (so 0.05 percentage points).
pub const CAPACITY_SUM_PRECISION: f64 = 0.0005;
/// CSQueueUtils.EPSILON: tolerance when comparing absolute capacity with absolute
/// maximum capacity.
pub const EPSILON: f64 = 0.0001;
pub const DEFAULT_MAXIMUM_APPLICATIONS: u32 = 10_000;
pub const DEFAULT_MAXIMUM_AM_RESOURCE_PERCENT: f64 = 0.1;
pub const DEFAULT_RESOURCE_CALCULATOR: &str =
    "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator";
pub const DOMINANT_RESOURCE_CALCULATOR: &str =
    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator";
/// YARN's largest weight (`throwExceptionForUnexpectedWeight`).
const MAX_WEIGHT: f64 = 10_000.0;

/// Per-queue keys Preemptor adds under `yarn.scheduler.capacity.<queue-path>.`.
const PREEMPTOR_QUEUE_KEYS: [&str; 2] = ["preemptor.job-class", "preemptor.policy"];

/// Per-queue keys whose presence for an unlisted queue deserves a warning.
const QUEUE_KEYS: [&str; 17] = [
    "capacity",
    "maximum-capacity",
    "queues",
    "user-limit-factor",
    "minimum-user-limit-percent",
    "state",
    "disable_preemption",
    "ordering-policy",
    "maximum-applications",
    "maximum-am-resource-percent",
    "acl_submit_applications",
    "acl_administer_queue",
    "accessible-node-labels",
    "allow-zero-capacity-sum",
    "preemptor.job-class",
    "preemptor.policy",
    "default-node-label-expression",
];

/// A capacity as configured: percent of the parent, weight among siblings, or an
/// absolute resource.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "form", content = "value", rename_all = "lowercase")]
pub enum CapacityValue {
    Percent(f64),
    Weight(f64),
    Absolute(Resource),
}

impl CapacityValue {
    pub fn form(&self) -> &'static str {
        match self {
            CapacityValue::Percent(_) => "percent",
            CapacityValue::Weight(_) => "weight",
            CapacityValue::Absolute(_) => "absolute",
        }
    }

    fn absolute(&self) -> Option<Resource> {
        match self {
            CapacityValue::Absolute(r) => Some(*r),
            _ => None,
        }
    }
}

/// A number the way YARN's own output writes it: no trailing zeros.
fn number(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl fmt::Display for CapacityValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityValue::Percent(p) => f.write_str(&number(*p)),
            CapacityValue::Weight(w) => write!(f, "{}w", number(*w)),
            CapacityValue::Absolute(r) => write!(f, "[memory={},vcores={}]", r.memory_mb, r.vcores),
        }
    }
}

/// Reads `40`, `2.0w` or `[memory=10240,vcores=12]` (also `memory-mb`, spaces, and
/// YARN's unit suffixes such as `10Gi`). Resource names other than memory and vcores
/// are returned so the caller can say they are ignored.
pub fn parse_capacity(s: &str, allow_weight: bool) -> Result<(CapacityValue, Vec<String>), String> {
    let t = s.trim();
    if let Some(inner) = t.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("an absolute resource must end with ]")?;
        let (r, ignored) = parse_absolute(inner)?;
        return Ok((CapacityValue::Absolute(r), ignored));
    }
    if let Some(w) = t.strip_suffix('w') {
        if !allow_weight {
            return Err(
                "a weight is not allowed here; expected a percentage or [memory=..,vcores=..]"
                    .into(),
            );
        }
        let w = parse_f64(w).map_err(|_| "expected a weight such as 2.0w")?;
        if !(0.0..=MAX_WEIGHT).contains(&w) {
            return Err(format!("a weight must be from 0 to {MAX_WEIGHT}"));
        }
        return Ok((CapacityValue::Weight(w), vec![]));
    }
    let p = parse_f64(t).map_err(|_| {
        if allow_weight {
            "expected a percentage (40), a weight (2.0w) or an absolute resource ([memory=10240,vcores=12])"
        } else {
            "expected a percentage (40) or an absolute resource ([memory=10240,vcores=12])"
        }
    })?;
    if !(0.0..=100.0).contains(&p) {
        return Err("a percentage must be from 0 to 100".into());
    }
    Ok((CapacityValue::Percent(p), vec![]))
}

fn parse_absolute(inner: &str) -> Result<(Resource, Vec<String>), String> {
    let mut memory = None;
    let mut vcores = None;
    let mut ignored = Vec::new();
    let pairs: Vec<&str> = inner
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if pairs.is_empty() {
        return Err("an absolute resource needs at least memory or vcores".into());
    }
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not name=value"))?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        let slot = match k.as_str() {
            "memory" | "memory-mb" => &mut memory,
            "vcores" => &mut vcores,
            _ => {
                ignored.push(k);
                continue;
            }
        };
        if slot.is_some() {
            return Err(format!("{k} is given twice"));
        }
        *slot = Some(if k == "vcores" {
            parse_count(v)?
        } else {
            parse_memory_mb(v)?
        });
    }
    let vcores = match vcores {
        Some(v) => u32::try_from(v).map_err(|_| "vcores out of range".to_string())?,
        None => 0,
    };
    Ok((Resource::new(memory.unwrap_or(0), vcores), ignored))
}

fn parse_count(v: &str) -> Result<u64, String> {
    if v.starts_with('-') {
        return Err(format!("{v:?} is negative"));
    }
    v.parse::<u64>()
        .map_err(|_| format!("{v:?} is not a whole number"))
}

/// Memory in MB; YARN reads a bare number as MiB and converts unit suffixes.
fn parse_memory_mb(v: &str) -> Result<u64, String> {
    const MIB: u128 = 1 << 20;
    const UNITS: [(&str, u128); 10] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
    ];
    let (digits, bytes_per_unit) = UNITS
        .iter()
        .find_map(|(u, b)| v.strip_suffix(u).map(|d| (d.trim_end(), *b)))
        .unwrap_or((v, MIB));
    let n = u128::from(parse_count(digits)?);
    u64::try_from(n * bytes_per_unit / MIB).map_err(|_| format!("{v:?} is out of range"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum QueueState {
    Running,
    Stopped,
}

impl fmt::Display for QueueState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QueueState::Running => "RUNNING",
            QueueState::Stopped => "STOPPED",
        })
    }
}

/// `ordering-policy`: an application ordering policy on leaves, a queue ordering policy
/// on parents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderingPolicy {
    Fifo,
    Fair,
    FifoWithPartitions,
    FifoForPendingUpdates,
    Utilization,
    PriorityUtilization,
    /// A fully qualified class name, which YARN loads.
    Class(String),
}

impl OrderingPolicy {
    fn parse(s: &str, leaf: bool) -> Result<OrderingPolicy, String> {
        let t = s.trim();
        let p = match t {
            "fifo" => OrderingPolicy::Fifo,
            "fair" => OrderingPolicy::Fair,
            "fifo-with-partitions" => OrderingPolicy::FifoWithPartitions,
            "fifo-for-pending-updates" => OrderingPolicy::FifoForPendingUpdates,
            "utilization" => OrderingPolicy::Utilization,
            "priority-utilization" => OrderingPolicy::PriorityUtilization,
            c if leaf && c.contains('.') && c.split('.').all(is_java_identifier) => {
                OrderingPolicy::Class(c.to_string())
            }
            _ if leaf => {
                return Err("expected fifo, fair, fifo-with-partitions, fifo-for-pending-updates or a class name".into());
            }
            _ => {
                return Err(
                    "expected utilization or priority-utilization (this is a parent queue)".into(),
                );
            }
        };
        let for_parents = matches!(
            p,
            OrderingPolicy::Utilization | OrderingPolicy::PriorityUtilization
        );
        match (leaf, for_parents) {
            (true, true) => Err(format!("{t} orders child queues, but this is a leaf queue")),
            (false, false) => Err(format!(
                "{t} orders applications, but this is a parent queue"
            )),
            _ => Ok(p),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            OrderingPolicy::Fifo => "fifo",
            OrderingPolicy::Fair => "fair",
            OrderingPolicy::FifoWithPartitions => "fifo-with-partitions",
            OrderingPolicy::FifoForPendingUpdates => "fifo-for-pending-updates",
            OrderingPolicy::Utilization => "utilization",
            OrderingPolicy::PriorityUtilization => "priority-utilization",
            OrderingPolicy::Class(c) => c,
        }
    }
}

fn is_java_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// `accessible-node-labels`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeLabels {
    /// `*`: every label.
    Any,
    Only(BTreeSet<String>),
}

impl NodeLabels {
    pub fn can_access(&self, label: &str) -> bool {
        match self {
            NodeLabels::Any => true,
            NodeLabels::Only(set) => set.contains(label),
        }
    }
}

impl fmt::Display for NodeLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeLabels::Any => f.write_str("*"),
            NodeLabels::Only(set) => {
                f.write_str(&set.iter().map(String::as_str).collect::<Vec<_>>().join(","))
            }
        }
    }
}

/// Capacity and maximum capacity of a queue in one partition (the default partition or
/// one node label), with the fractions of the whole partition they amount to where
/// that is defined without knowing the cluster (not for absolute resources).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Capacities {
    pub capacity: CapacityValue,
    pub maximum_capacity: CapacityValue,
    pub absolute_capacity: Option<f64>,
    pub absolute_maximum_capacity: Option<f64>,
    pub capacity_location: Option<Location>,
    pub maximum_capacity_location: Option<Location>,
    /// Capacity missing or unreadable: checks over its siblings would only repeat the
    /// error, so they are skipped.
    #[serde(skip)]
    invalid: bool,
}

impl Capacities {
    fn unset(default_capacity: f64) -> Capacities {
        Capacities {
            capacity: CapacityValue::Percent(default_capacity),
            maximum_capacity: CapacityValue::Percent(100.0),
            absolute_capacity: None,
            absolute_maximum_capacity: None,
            capacity_location: None,
            maximum_capacity_location: None,
            invalid: false,
        }
    }
}

/// One queue of the tree with every setting resolved: inherited values (state,
/// disable_preemption, node labels, Preemptor's job class and policy) are the
/// effective ones.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueConfig {
    /// Full path, e.g. `root.short`.
    pub path: String,
    pub name: String,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub depth: usize,
    /// The default partition.
    pub capacities: Capacities,
    /// Per node label this queue can access and has (or needs) capacities for.
    pub labels: BTreeMap<String, Capacities>,
    pub accessible_node_labels: NodeLabels,
    /// `default-node-label-expression`, inherited from the parent as in YARN: the
    /// partition of a request that names none (an RPC submission, or a REST one that
    /// sends the field as `null`). `None`: the default partition.
    pub default_node_label_expression: Option<String>,
    pub user_limit_factor: f64,
    pub minimum_user_limit_percent: f64,
    pub state: QueueState,
    pub preemption_disabled: bool,
    pub ordering_policy: OrderingPolicy,
    /// Effective limit for a leaf: its own setting, the global per-queue one, or the
    /// system limit times its absolute capacity. `None` for parents, and for leaves
    /// with absolute capacities (it depends on the cluster there).
    pub maximum_applications: Option<u32>,
    pub maximum_am_resource_percent: f64,
    pub acl_submit_applications: String,
    pub acl_administer_queue: String,
    pub allow_zero_capacity_sum: bool,
    /// `preemptor.job-class`, inherited from the nearest ancestor that sets it.
    pub job_class: Option<JobClass>,
    /// `preemptor.policy`, inherited likewise.
    pub policy: Option<PolicyKind>,
    /// Whether `policy` is set on this queue itself rather than inherited.
    pub policy_is_own: bool,
}

impl QueueConfig {
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// Where the capacity was set, for messages about it.
    pub fn capacity_location(&self) -> Option<&Location> {
        self.capacities.capacity_location.as_ref()
    }

    /// The default partition (`None`) or a node label's capacities.
    pub fn partition(&self, label: Option<&str>) -> Option<&Capacities> {
        match label {
            None => Some(&self.capacities),
            Some(l) => self.labels.get(l),
        }
    }
}

/// Guaranteed and maximum resources of one queue in a partition of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QueueResources {
    pub guaranteed: Resource,
    pub maximum: Resource,
}

/// The whole tree, queues in pre-order (root first, every parent before its children).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueTree {
    pub queues: Vec<QueueConfig>,
    /// `yarn.scheduler.capacity.maximum-applications`
    pub maximum_applications: u32,
    /// `yarn.scheduler.capacity.maximum-am-resource-percent`
    pub maximum_am_resource_percent: f64,
    /// `yarn.scheduler.capacity.resource-calculator`
    pub resource_calculator: String,
    pub warnings: Vec<ConfigWarning>,
    #[serde(skip)]
    by_path: HashMap<String, usize>,
}

impl QueueTree {
    /// Reads and validates the tree; every error found is returned, not just the first.
    pub fn from_conf(conf: &Configuration) -> Result<QueueTree, ConfigErrors> {
        let mut b = Builder {
            conf,
            errors: Vec::new(),
            warnings: Vec::new(),
        };
        let tree = b.build();
        if b.errors.is_empty() {
            let mut tree = tree;
            tree.warnings = b.warnings;
            Ok(tree)
        } else {
            let mut e = ConfigErrors {
                errors: b.errors,
                warnings: b.warnings,
            };
            e.sort();
            Err(e)
        }
    }

    pub fn root(&self) -> &QueueConfig {
        &self.queues[0]
    }

    /// By full path, or by leaf name when exactly one leaf has it.
    pub fn find(&self, path_or_leaf_name: &str) -> Option<&QueueConfig> {
        self.index_of(path_or_leaf_name).map(|i| &self.queues[i])
    }

    pub fn index_of(&self, path_or_leaf_name: &str) -> Option<usize> {
        if let Some(&i) = self.by_path.get(path_or_leaf_name) {
            return Some(i);
        }
        let mut leaves = self
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| q.is_leaf() && q.name == path_or_leaf_name);
        match (leaves.next(), leaves.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    }

    pub fn leaves(&self) -> impl Iterator<Item = &QueueConfig> {
        self.queues.iter().filter(|q| q.is_leaf())
    }

    /// Node labels any queue has capacities for.
    pub fn labels(&self) -> BTreeSet<&str> {
        self.queues
            .iter()
            .flat_map(|q| q.labels.keys().map(String::as_str))
            .collect()
    }

    /// Guaranteed and maximum resources of every queue (same order as `queues`) in a
    /// partition of size `total`: the default partition (`label` None) or a node label's.
    /// Absolute capacities of siblings that exceed their parent are scaled down
    /// proportionally per resource, as YARN does when the cluster shrinks.
    pub fn resources(&self, label: Option<&str>, total: Resource) -> Vec<QueueResources> {
        let mut out = vec![
            QueueResources {
                guaranteed: Resource::ZERO,
                maximum: Resource::ZERO,
            };
            self.queues.len()
        ];
        out[0] = QueueResources {
            guaranteed: total,
            maximum: total,
        };
        for (p, parent) in self.queues.iter().enumerate() {
            let QueueResources {
                guaranteed: pg,
                maximum: pm,
            } = out[p];
            let configured: Vec<Option<Resource>> = parent
                .children
                .iter()
                .map(|&c| {
                    self.queues[c]
                        .partition(label)
                        .and_then(|caps| caps.capacity.absolute())
                })
                .collect();
            let sum = Resource::sum(configured.iter().flatten());
            let mem_ratio = shrink_ratio(pg.memory_mb as f64, sum.memory_mb as f64);
            let cpu_ratio = shrink_ratio(f64::from(pg.vcores), f64::from(sum.vcores));
            for (&c, abs) in parent.children.iter().zip(configured) {
                let Some(caps) = self.queues[c].partition(label) else {
                    continue;
                };
                let maximum = match (caps.maximum_capacity, caps.absolute_maximum_capacity) {
                    (CapacityValue::Absolute(r), _) => r.component_min(pm),
                    (_, Some(f)) => total.scale(f),
                    (CapacityValue::Percent(x), None) => pm.scale(x / 100.0),
                    (CapacityValue::Weight(_), None) => pm,
                };
                let guaranteed = match abs {
                    Some(r) => Resource::new(
                        (r.memory_mb as f64 * mem_ratio) as u64,
                        (f64::from(r.vcores) * cpu_ratio) as u32,
                    ),
                    None => total.scale(caps.absolute_capacity.unwrap_or(0.0)),
                };
                out[c] = QueueResources {
                    guaranteed: guaranteed.component_min(maximum),
                    maximum,
                };
            }
        }
        out
    }

    /// Guaranteed resource of queue `index` in the default partition of a cluster.
    pub fn guaranteed(&self, index: usize, cluster: Resource) -> Resource {
        self.resources(None, cluster)
            .get(index)
            .map_or(Resource::ZERO, |r| r.guaranteed)
    }

    /// Maximum resource of queue `index` in the default partition of a cluster.
    pub fn maximum(&self, index: usize, cluster: Resource) -> Resource {
        self.resources(None, cluster)
            .get(index)
            .map_or(Resource::ZERO, |r| r.maximum)
    }

    /// The cluster model's queues, in the same order, for a cluster of this size.
    pub fn to_cluster_queues(&self, cluster: Resource) -> Vec<Queue> {
        self.resources(None, cluster)
            .into_iter()
            .zip(&self.queues)
            .map(|(r, q)| Queue {
                path: q.path.clone(),
                parent: q.parent.map(|p| QueueIdx(p as u32)),
                children: q.children.iter().map(|&c| QueueIdx(c as u32)).collect(),
                guaranteed: r.guaranteed,
                maximum: r.maximum,
                preemption_disabled: q.preemption_disabled,
                job_class: q.job_class,
                policy: q.policy,
                confined_to: Partition::confining(q.default_node_label_expression.as_deref()),
                used: Resource::ZERO,
                pending: Resource::ZERO,
            })
            .collect()
    }
}

fn shrink_ratio(available: f64, wanted: f64) -> f64 {
    if wanted > available && wanted > 0.0 {
        available / wanted
    } else {
        1.0
    }
}

/// A queue found while walking `.queues` lists, before its settings are read.
struct Listed {
    path: String,
    parent: Option<usize>,
    /// The `.queues` property that lists it.
    listed_at: Option<Location>,
}

struct Builder<'a> {
    conf: &'a Configuration,
    errors: Vec<ConfigError>,
    warnings: Vec<ConfigWarning>,
}

impl Builder<'_> {
    fn build(&mut self) -> QueueTree {
        let maximum_applications = self
            .global("maximum-applications", |s| {
                parse_i64(s).and_then(|v| {
                    u32::try_from(v).map_err(|_| "expected a non-negative integer".into())
                })
            })
            .unwrap_or(DEFAULT_MAXIMUM_APPLICATIONS);
        let maximum_am_resource_percent = self
            .global("maximum-am-resource-percent", |s| parse_f64_in(s, 0.0, 1.0))
            .unwrap_or(DEFAULT_MAXIMUM_AM_RESOURCE_PERCENT);
        let resource_calculator = self
            .global("resource-calculator", |s| Ok(s.trim().to_string()))
            .unwrap_or_else(|| DEFAULT_RESOURCE_CALCULATOR.to_string());
        if resource_calculator != DOMINANT_RESOURCE_CALCULATOR {
            self.warnings.push(ConfigWarning::Note {
                key: format!("{PREFIX}resource-calculator"),
                location: self.conf.location(&format!("{PREFIX}resource-calculator")).cloned(),
                message: format!(
                    "YARN uses {resource_calculator}, which compares queues by memory only; \
                     Preemptor compares by dominant share, so set DominantResourceCalculator for the two to agree"
                ),
            });
        }
        let global_queue_max_apps = self
            .global("global-queue-max-application", |s| {
                parse_i64(s).map(|v| u32::try_from(v).ok().filter(|&v| v > 0))
            })
            .flatten();
        let defaults = Defaults {
            user_limit_factor: self
                .global("user-limit-factor", parse_user_limit_factor)
                .unwrap_or(1.0),
            minimum_user_limit_percent: self
                .global("minimum-user-limit-percent", parse_user_limit_percent)
                .unwrap_or(100.0),
            maximum_am_resource_percent,
        };

        let listed = self.list_queues();
        let mut queues: Vec<QueueConfig> = Vec::with_capacity(listed.len());
        for (i, l) in listed.iter().enumerate() {
            let q = self.read_queue(l, &queues, &defaults);
            if let Some(p) = l.parent {
                queues[p].children.push(i);
            }
            queues.push(q);
        }
        fill_label_partitions(&mut queues);
        // Leaves are only known once every queue is listed.
        for i in 0..queues.len() {
            self.check_ordering_policy(&mut queues, i);
        }
        let by_path: HashMap<String, usize> = queues
            .iter()
            .enumerate()
            .map(|(i, q)| (q.path.clone(), i))
            .collect();
        compute_fractions(&mut queues);
        for p in 0..queues.len() {
            if queues[p].is_leaf() {
                continue;
            }
            self.check_children(&queues, p, None);
            let labels: BTreeSet<String> = queues[p]
                .children
                .iter()
                .flat_map(|&c| queues[c].labels.keys().cloned())
                .filter(|l| queues[p].accessible_node_labels.can_access(l))
                .collect();
            for l in &labels {
                self.check_children(&queues, p, Some(l));
            }
        }
        for i in 0..queues.len() {
            self.check_queue(&queues, i);
        }
        // Applications only run in leaves; YARN ignores the limit on parents.
        for q in &mut queues {
            q.maximum_applications = if q.children.is_empty() {
                q.maximum_applications
                    .or(global_queue_max_apps)
                    .or_else(|| {
                        q.capacities
                            .absolute_capacity
                            .map(|f| round6(f64::from(maximum_applications) * f).floor() as u32)
                    })
            } else {
                None
            };
        }
        self.check_stray_keys(&by_path);
        QueueTree {
            queues,
            maximum_applications,
            maximum_am_resource_percent,
            resource_calculator,
            warnings: Vec::new(),
            by_path,
        }
    }

    /// An expanded value and where it was set. `Err(())` when it cannot be expanded
    /// (the error is collected), so callers do not also report it as missing.
    fn value(&mut self, key: &str) -> Result<Option<(String, Option<Location>)>, ()> {
        match self.conf.get(key) {
            Ok(v) => Ok(v.map(|v| (v, self.conf.location(key).cloned()))),
            Err(e) => {
                self.errors.push(e);
                Err(())
            }
        }
    }

    fn global<T>(
        &mut self,
        suffix: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let key = format!("{PREFIX}{suffix}");
        let (v, location) = self.value(&key).ok().flatten()?;
        match parse(&v) {
            Ok(t) => Some(t),
            Err(expected) => {
                self.errors.push(ConfigError::InvalidValue {
                    key,
                    value: v,
                    expected,
                    location,
                });
                None
            }
        }
    }

    fn queue_error(&mut self, queue: &str, location: Option<Location>, problem: QueueProblem) {
        self.errors.push(ConfigError::Queue {
            queue: queue.to_string(),
            location,
            problem,
        });
    }

    /// Reads `<queue>.<suffix>`; `Err(())` when set but invalid (already reported).
    fn queue_value<T>(
        &mut self,
        queue: &str,
        suffix: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<(T, Option<Location>)>, ()> {
        let key = format!("{PREFIX}{queue}.{suffix}");
        let Some((v, location)) = self.value(&key)? else {
            return Ok(None);
        };
        match parse(&v) {
            Ok(t) => Ok(Some((t, location))),
            Err(expected) => {
                self.queue_error(
                    queue,
                    location,
                    QueueProblem::InvalidValue {
                        key,
                        value: v,
                        expected,
                    },
                );
                Err(())
            }
        }
    }

    fn queue_opt<T>(
        &mut self,
        queue: &str,
        suffix: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        self.queue_value(queue, suffix, parse)
            .ok()
            .flatten()
            .map(|(t, _)| t)
    }

    /// Walks `root.queues` and the nested `.queues` lists depth-first, so queues come
    /// out in pre-order. Iterative: a hostile file cannot overflow the stack.
    fn list_queues(&mut self) -> Vec<Listed> {
        let mut out = Vec::new();
        let mut stack = vec![Listed {
            path: ROOT.to_string(),
            parent: None,
            listed_at: None,
        }];
        while let Some(l) = stack.pop() {
            let index = out.len();
            let key = format!("{PREFIX}{}.queues", l.path);
            let (children, at, readable) = match self.value(&key) {
                Ok(Some((v, at))) => (parse_list(&v), at, true),
                Ok(None) => (Vec::new(), None, true),
                Err(()) => (Vec::new(), None, false),
            };
            if readable && children.is_empty() && l.parent.is_none() {
                self.queue_error(ROOT, at.clone(), QueueProblem::NoChildQueues);
            }
            let mut seen = BTreeSet::new();
            let mut pending = Vec::new();
            for name in children {
                if let Some(reason) = invalid_queue_name(&name) {
                    self.queue_error(
                        &l.path,
                        at.clone(),
                        QueueProblem::InvalidName { name, reason },
                    );
                    continue;
                }
                if !seen.insert(name.clone()) {
                    self.queue_error(&l.path, at.clone(), QueueProblem::DuplicateChild { name });
                    continue;
                }
                pending.push(Listed {
                    path: format!("{}.{name}", l.path),
                    parent: Some(index),
                    listed_at: at.clone(),
                });
            }
            out.push(l);
            stack.extend(pending.into_iter().rev());
        }
        out
    }

    fn read_queue(&mut self, l: &Listed, done: &[QueueConfig], defaults: &Defaults) -> QueueConfig {
        let path = l.path.as_str();
        let parent = l.parent.map(|p| &done[p]);
        let capacities = self.read_capacities(path, None, l);
        let accessible_node_labels = self.read_accessible_labels(path, parent);
        let labels = self.read_label_capacities(path, &accessible_node_labels, l);
        let default_node_label_expression =
            self.read_default_label(path, parent, &accessible_node_labels);

        let configured_state = self.queue_opt(path, "state", parse_state);
        let parent_state = parent.map_or(QueueState::Running, |p| p.state);
        if let (Some(QueueState::Running), QueueState::Stopped, Some(p)) =
            (configured_state, parent_state, parent)
        {
            let location = self
                .conf
                .location(&format!("{PREFIX}{path}.state"))
                .cloned();
            self.queue_error(
                path,
                location,
                QueueProblem::RunningUnderStopped {
                    parent: p.path.clone(),
                },
            );
        }
        let preemption_disabled = self
            .queue_opt(path, "disable_preemption", parse_bool)
            .unwrap_or_else(|| parent.is_some_and(|p| p.preemption_disabled));
        let own_class = self.queue_opt(path, "preemptor.job-class", |s| s.parse::<JobClass>());
        let own_policy = self.queue_opt(path, "preemptor.policy", |s| s.parse::<PolicyKind>());
        let maximum_applications = self
            .queue_opt(path, "maximum-applications", |s| match parse_i64(s)? {
                -1 => Ok(None),
                v => u32::try_from(v)
                    .map(Some)
                    .map_err(|_| "expected -1 (unset) or a non-negative integer".into()),
            })
            .flatten();
        let (name, depth) = match parent {
            Some(p) => (
                path.rsplit('.').next().unwrap_or(path).to_string(),
                p.depth + 1,
            ),
            None => (ROOT.to_string(), 0),
        };
        let default_acl = if parent.is_none() { "*" } else { " " };
        QueueConfig {
            path: path.to_string(),
            name,
            parent: l.parent,
            children: Vec::new(),
            depth,
            capacities,
            labels,
            accessible_node_labels,
            default_node_label_expression,
            user_limit_factor: self
                .queue_opt(path, "user-limit-factor", parse_user_limit_factor)
                .unwrap_or(defaults.user_limit_factor),
            minimum_user_limit_percent: self
                .queue_opt(path, "minimum-user-limit-percent", parse_user_limit_percent)
                .unwrap_or(defaults.minimum_user_limit_percent),
            state: configured_state.unwrap_or(parent_state),
            preemption_disabled,
            // Checked once leaves are known.
            ordering_policy: OrderingPolicy::Fifo,
            maximum_applications,
            maximum_am_resource_percent: self
                .queue_opt(path, "maximum-am-resource-percent", |s| {
                    parse_f64_in(s, 0.0, 1.0)
                })
                .unwrap_or(defaults.maximum_am_resource_percent),
            acl_submit_applications: self
                .queue_opt(path, "acl_submit_applications", |s| Ok(s.to_string()))
                .unwrap_or_else(|| default_acl.to_string()),
            acl_administer_queue: self
                .queue_opt(path, "acl_administer_queue", |s| Ok(s.to_string()))
                .unwrap_or_else(|| default_acl.to_string()),
            allow_zero_capacity_sum: self
                .queue_opt(path, "allow-zero-capacity-sum", parse_bool)
                .unwrap_or(false),
            job_class: own_class.or_else(|| parent.and_then(|p| p.job_class)),
            policy: own_policy.or_else(|| parent.and_then(|p| p.policy)),
            policy_is_own: own_policy.is_some(),
        }
    }

    fn check_ordering_policy(&mut self, queues: &mut [QueueConfig], i: usize) {
        let leaf = queues[i].is_leaf();
        let path = queues[i].path.clone();
        queues[i].ordering_policy = self
            .queue_opt(&path, "ordering-policy", |s| OrderingPolicy::parse(s, leaf))
            .unwrap_or(if leaf {
                OrderingPolicy::Fifo
            } else {
                OrderingPolicy::Utilization
            });
    }

    /// `capacity` and `maximum-capacity` of the default partition (`label` None) or of
    /// `accessible-node-labels.<label>`.
    fn read_capacities(&mut self, path: &str, label: Option<&str>, l: &Listed) -> Capacities {
        let is_root = l.parent.is_none();
        let prefix = match label {
            None => String::new(),
            Some(label) => format!("accessible-node-labels.{label}."),
        };
        let cap_suffix = format!("{prefix}capacity");
        let max_suffix = format!("{prefix}maximum-capacity");
        // Labels default to 0 (root: 100); the default partition must be configured.
        let mut caps = Capacities::unset(if is_root { 100.0 } else { 0.0 });
        match self.queue_value(path, &cap_suffix, |s| parse_capacity(s, true)) {
            Ok(Some(((value, ignored), location))) => {
                self.note_ignored_resources(path, &cap_suffix, &ignored, &location);
                if is_root && value != CapacityValue::Percent(100.0) {
                    self.queue_error(
                        path,
                        location.clone(),
                        QueueProblem::RootCapacity {
                            value: value.to_string(),
                        },
                    );
                } else {
                    caps.capacity = value;
                }
                caps.capacity_location = location;
            }
            Ok(None) if label.is_none() && !is_root => {
                caps.invalid = true;
                let parent = path.rsplit_once('.').map_or(ROOT, |(p, _)| p).to_string();
                self.queue_error(
                    path,
                    l.listed_at.clone(),
                    QueueProblem::NotConfigured { parent },
                );
            }
            Ok(None) => {}
            Err(()) => caps.invalid = true,
        }
        match self.queue_value(path, &max_suffix, |s| match s.trim() {
            "-1" => Ok((CapacityValue::Percent(100.0), vec![])),
            _ => parse_capacity(s, false),
        }) {
            Ok(Some(((value, ignored), location))) => {
                self.note_ignored_resources(path, &max_suffix, &ignored, &location);
                caps.maximum_capacity = value;
                caps.maximum_capacity_location = location;
            }
            Ok(None) => {}
            Err(()) => caps.invalid = true,
        }
        caps
    }

    fn note_ignored_resources(
        &mut self,
        path: &str,
        suffix: &str,
        ignored: &[String],
        location: &Option<Location>,
    ) {
        for name in ignored {
            self.warnings.push(ConfigWarning::Note {
                key: format!("{PREFIX}{path}.{suffix}"),
                location: location.clone(),
                message: format!(
                    "resource {name:?} is ignored: Preemptor models memory and vcores only"
                ),
            });
        }
    }

    /// The RM refuses to start when a queue's default label is one it cannot access.
    fn read_default_label(
        &mut self,
        path: &str,
        parent: Option<&QueueConfig>,
        accessible: &NodeLabels,
    ) -> Option<String> {
        let key = format!("{PREFIX}{path}.default-node-label-expression");
        let Ok(Some((v, location))) = self.value(&key) else {
            return parent.and_then(|p| p.default_node_label_expression.clone());
        };
        let label = v.trim();
        if label.is_empty() {
            return None;
        }
        if !valid_label(label) || !accessible.can_access(label) {
            self.queue_error(
                path,
                location,
                QueueProblem::InvalidValue {
                    key,
                    value: v.clone(),
                    expected: format!(
                        "a node label this queue can access (accessible-node-labels is {accessible})"
                    ),
                },
            );
            return None;
        }
        Some(label.to_string())
    }

    fn read_accessible_labels(&mut self, path: &str, parent: Option<&QueueConfig>) -> NodeLabels {
        let key = format!("{PREFIX}{path}.accessible-node-labels");
        let Some(parent) = parent else {
            if self.conf.get_raw(&key).is_some() {
                self.warnings.push(ConfigWarning::Note {
                    key: key.clone(),
                    location: self.conf.location(&key).cloned(),
                    message: "ignored: root can always access every label (*), as in YARN".into(),
                });
            }
            return NodeLabels::Any;
        };
        let Ok(Some((v, location))) = self.value(&key) else {
            return parent.accessible_node_labels.clone();
        };
        let list = parse_list(&v);
        let labels = if list.iter().any(|l| l == "*") {
            NodeLabels::Any
        } else {
            let mut set = BTreeSet::new();
            for label in list {
                if valid_label(&label) {
                    set.insert(label);
                } else {
                    self.queue_error(
                        path,
                        location.clone(),
                        QueueProblem::InvalidValue {
                            key: key.clone(),
                            value: v.clone(),
                            expected: format!(
                                "{label:?} is not a node label name (letters, digits, - and _, starting with a letter or digit)"
                            ),
                        },
                    );
                }
            }
            NodeLabels::Only(set)
        };
        match (&parent.accessible_node_labels, &labels) {
            (NodeLabels::Any, _) => {}
            (NodeLabels::Only(p), NodeLabels::Any) => self.queue_error(
                path,
                location,
                QueueProblem::AnyLabelUnderRestrictedParent {
                    parent: parent.path.clone(),
                    parent_labels: p.iter().cloned().collect::<Vec<_>>().join(","),
                },
            ),
            (NodeLabels::Only(p), NodeLabels::Only(c)) => {
                for label in c.difference(p) {
                    self.queue_error(
                        path,
                        location.clone(),
                        QueueProblem::LabelNotInParent {
                            label: label.clone(),
                            parent: parent.path.clone(),
                        },
                    );
                }
            }
        }
        labels
    }

    /// Capacities for every label the queue names explicitly, plus those it sets keys
    /// for; keys for labels it cannot access are ignored, as YARN does, with a warning.
    fn read_label_capacities(
        &mut self,
        path: &str,
        access: &NodeLabels,
        l: &Listed,
    ) -> BTreeMap<String, Capacities> {
        let key_prefix = format!("{PREFIX}{path}.accessible-node-labels.");
        let mut mentioned: BTreeSet<String> = self
            .conf
            .keys_with_prefix(&key_prefix)
            .filter_map(|k| {
                let rest = &k[key_prefix.len()..];
                let (label, attr) = rest.split_once('.')?;
                matches!(attr, "capacity" | "maximum-capacity").then(|| label.to_string())
            })
            .collect();
        if let NodeLabels::Only(set) = access {
            for label in mentioned.iter().filter(|m| !set.contains(*m)) {
                let key = format!("{key_prefix}{label}.capacity");
                self.warnings.push(ConfigWarning::Note {
                    location: self.conf.location(&key).cloned(),
                    key,
                    message: format!("ignored: {path} cannot access node label {label:?} (see its accessible-node-labels)"),
                });
            }
            mentioned.retain(|m| set.contains(m));
            mentioned.extend(set.iter().cloned());
        }
        mentioned
            .into_iter()
            .map(|label| {
                let caps = self.read_capacities(path, Some(&label), l);
                (label, caps)
            })
            .collect()
    }

    /// The checks YARN makes over a parent's children in one partition (C09 to C14 of
    /// QueueCapacityChecks).
    fn check_children(&mut self, queues: &[QueueConfig], p: usize, label: Option<&str>) {
        let parent = &queues[p];
        let Some(parent_caps) = parent.partition(label) else {
            return;
        };
        let children: Vec<(&QueueConfig, Option<&Capacities>)> = parent
            .children
            .iter()
            .map(|&c| (&queues[c], queues[c].partition(label)))
            .collect();
        // A missing or unreadable capacity was reported already; sums over it would
        // only repeat that, but the forms of the other siblings can still clash.
        let incomplete = parent_caps.invalid
            || children
                .iter()
                .any(|(_, caps)| caps.is_some_and(|c| c.invalid));
        let owned_label = label.map(str::to_string);
        let location = parent.children.iter().find_map(|&c| {
            queues[c]
                .partition(label)
                .and_then(|c| c.capacity_location.clone())
        });
        let mut forms: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (q, caps) in &children {
            let form = match caps.map(|c| c.capacity) {
                Some(CapacityValue::Percent(x)) if x > 0.0 => "percentage",
                Some(CapacityValue::Weight(_)) => "weight",
                Some(CapacityValue::Absolute(_)) => "absolute",
                _ => continue,
            };
            forms.entry(form).or_default().push(q.name.as_str());
        }
        if forms.len() > 1 {
            let details = forms
                .iter()
                .map(|(form, names)| format!("{form}: {}", names.join(", ")))
                .collect::<Vec<_>>()
                .join("; ");
            self.queue_error(
                &parent.path,
                location,
                QueueProblem::MixedCapacityForms {
                    label: owned_label,
                    details,
                },
            );
            return;
        }
        let children_form = forms.keys().next().copied().unwrap_or("percentage");
        let parent_form = if parent.is_root() {
            "percentage"
        } else {
            match parent_caps.capacity {
                CapacityValue::Percent(_) => "percentage",
                CapacityValue::Weight(_) => "weight",
                CapacityValue::Absolute(_) => "absolute",
            }
        };
        if incomplete {
            return;
        }
        if !parent.is_root()
            && (children_form == "absolute" || parent_form == "absolute")
            && children_form != parent_form
        {
            self.queue_error(
                &parent.path,
                location,
                QueueProblem::AbsoluteParentMismatch {
                    parent: parent_form,
                    children: children_form,
                },
            );
            return;
        }
        match (children_form, parent_caps.capacity) {
            ("absolute", CapacityValue::Absolute(parent_min)) => {
                let sum = children
                    .iter()
                    .filter_map(|(_, c)| c.and_then(|c| c.capacity.absolute()))
                    .fold(Resource::ZERO, |acc, r| acc + r);
                if !sum.fits_in(&parent_min) {
                    self.queue_error(
                        &parent.path,
                        parent_caps.capacity_location.clone(),
                        QueueProblem::ChildrenExceedParent {
                            label: owned_label,
                            parent: parent_min,
                            children: sum,
                        },
                    );
                }
            }
            ("percentage", _) => {
                let sum: f64 = children
                    .iter()
                    .filter_map(|(_, c)| match c.map(|c| c.capacity) {
                        Some(CapacityValue::Percent(x)) => Some(x / 100.0),
                        _ => None,
                    })
                    .sum();
                let parent_fraction = match parent_caps.capacity {
                    CapacityValue::Percent(x) if !parent.is_root() => Some(x / 100.0),
                    _ if parent.is_root() => Some(1.0),
                    _ => None,
                };
                let allow_zero = parent.allow_zero_capacity_sum;
                let problem = if (1.0 - sum).abs() > CAPACITY_SUM_PRECISION {
                    if sum.abs() > CAPACITY_SUM_PRECISION {
                        Some(QueueProblem::CapacitySum {
                            label: owned_label,
                            sum: round_percent(sum),
                            tolerance: CAPACITY_SUM_PRECISION * 100.0,
                        })
                    } else if parent_fraction.is_some_and(|f| f.abs() > CAPACITY_SUM_PRECISION)
                        && !allow_zero
                    {
                        Some(QueueProblem::ZeroCapacitySum { label: owned_label })
                    } else {
                        None
                    }
                } else if parent_fraction.is_some_and(|f| f <= 0.0) && !allow_zero {
                    Some(QueueProblem::PositiveSumUnderZeroCapacity {
                        label: owned_label,
                        sum: round_percent(sum),
                    })
                } else {
                    None
                };
                if let Some(problem) = problem {
                    self.queue_error(&parent.path, location, problem);
                }
            }
            _ => {}
        }
    }

    /// Checks of one queue against itself and its parent, in every partition.
    fn check_queue(&mut self, queues: &[QueueConfig], i: usize) {
        let q = &queues[i];
        let mut partitions: Vec<Option<&str>> = vec![None];
        partitions.extend(q.labels.keys().map(|l| Some(l.as_str())));
        for label in partitions {
            let Some(caps) = q.partition(label) else {
                continue;
            };
            if caps.invalid {
                continue;
            }
            let owned_label = label.map(str::to_string);
            let location = caps
                .maximum_capacity_location
                .clone()
                .or_else(|| caps.capacity_location.clone());
            if let (Some(c), Some(m)) = (caps.absolute_capacity, caps.absolute_maximum_capacity)
                && m < c - EPSILON
            {
                self.queue_error(
                    &q.path,
                    location.clone(),
                    QueueProblem::MaxBelowCapacity {
                        label: owned_label.clone(),
                        capacity: c,
                        maximum: m,
                    },
                );
            }
            let parent_max = q
                .parent
                .and_then(|p| queues[p].partition(label))
                .and_then(|p| p.maximum_capacity.absolute());
            let own_max = caps.maximum_capacity.absolute();
            if let (Some(m), Some(pm)) = (own_max, parent_max)
                && !m.fits_in(&pm)
            {
                self.queue_error(
                    &q.path,
                    location.clone(),
                    QueueProblem::MaxAboveParentMax {
                        label: owned_label.clone(),
                        maximum: m,
                        parent: pm,
                    },
                );
            }
            if let (Some(min), Some(max)) = (caps.capacity.absolute(), own_max.or(parent_max))
                && !min.fits_in(&max)
            {
                self.queue_error(
                    &q.path,
                    caps.capacity_location.clone(),
                    QueueProblem::MinAboveMax {
                        label: owned_label,
                        minimum: min,
                        maximum: max,
                    },
                );
            }
        }
    }

    /// Warns about keys for queues that are not in the tree and about unknown
    /// Preemptor per-queue keys (with a suggestion).
    fn check_stray_keys(&mut self, by_path: &HashMap<String, usize>) {
        let conf = self.conf;
        let root_prefix = format!("{PREFIX}{ROOT}.");
        for key in conf.keys_with_prefix(&root_prefix) {
            let rest = &key[PREFIX.len()..];
            let mut path_end = ROOT.len();
            for (i, _) in rest.match_indices('.').skip(1) {
                if by_path.contains_key(&rest[..i]) {
                    path_end = i;
                } else {
                    break;
                }
            }
            let (path, suffix) = (&rest[..path_end], &rest[path_end + 1..]);
            let location = conf.location(key).cloned();
            if let Some(attr) = suffix.strip_prefix("preemptor.") {
                if !PREEMPTOR_QUEUE_KEYS.contains(&suffix)
                    && let Some(location) = location
                {
                    let suggestion =
                        did_you_mean(attr, PREEMPTOR_QUEUE_KEYS.map(|k| &k["preemptor.".len()..]))
                            .map(|s| format!("{PREFIX}{path}.preemptor.{s}"));
                    self.warnings.push(ConfigWarning::UnknownKey {
                        key: key.to_string(),
                        location,
                        suggestion,
                    });
                }
                continue;
            }
            if let Some((child, attr)) = suffix.split_once('.') {
                let child_path = format!("{path}.{child}");
                if !by_path.contains_key(&child_path)
                    && (QUEUE_KEYS.contains(&attr) || attr.starts_with("preemptor."))
                {
                    self.warnings.push(ConfigWarning::Note {
                        key: key.to_string(),
                        location,
                        message: format!(
                            "ignored: queue {child_path} is not listed in {path}.queues"
                        ),
                    });
                }
            }
        }
    }
}

/// Absolute capacity and absolute maximum capacity as fractions of the partition,
/// down the tree: percentages multiply, weights are normalised among siblings.
fn compute_fractions(queues: &mut [QueueConfig]) {
    let root = &mut queues[0];
    root.capacities.absolute_capacity = Some(1.0);
    root.capacities.absolute_maximum_capacity = Some(1.0);
    for caps in root.labels.values_mut() {
        caps.absolute_capacity = Some(1.0);
        caps.absolute_maximum_capacity = Some(1.0);
    }
    for p in 0..queues.len() {
        let children = queues[p].children.clone();
        let mut partitions: Vec<Option<String>> = vec![None];
        partitions.extend(queues[p].labels.keys().cloned().map(Some));
        for label in partitions {
            let Some(parent) = queues[p].partition(label.as_deref()).cloned() else {
                continue;
            };
            let weight_sum: f64 = children
                .iter()
                .filter_map(|&c| match queues[c].partition(label.as_deref())?.capacity {
                    CapacityValue::Weight(w) => Some(w),
                    _ => None,
                })
                .sum();
            for &c in &children {
                let Some(caps) = partition_mut(&mut queues[c], label.as_deref()) else {
                    continue;
                };
                caps.absolute_capacity = match caps.capacity {
                    CapacityValue::Percent(x) => parent.absolute_capacity.map(|a| a * x / 100.0),
                    CapacityValue::Weight(w) => parent.absolute_capacity.map(|a| {
                        if weight_sum > 0.0 {
                            a * w / weight_sum
                        } else {
                            0.0
                        }
                    }),
                    CapacityValue::Absolute(_) => None,
                };
                caps.absolute_maximum_capacity = match caps.maximum_capacity {
                    CapacityValue::Percent(x) => {
                        parent.absolute_maximum_capacity.map(|a| a * x / 100.0)
                    }
                    _ => None,
                };
            }
        }
    }
}

/// Defaults that `yarn.scheduler.capacity.<key>` sets for every queue.
struct Defaults {
    user_limit_factor: f64,
    minimum_user_limit_percent: f64,
    maximum_am_resource_percent: f64,
}

/// A parent that can access a label its children have capacities for has a capacity
/// for it too: 0 unless set (root: 100), as in YARN, so the children's sum is checked
/// against it.
fn fill_label_partitions(queues: &mut [QueueConfig]) {
    for i in (1..queues.len()).rev() {
        let Some(p) = queues[i].parent else {
            continue;
        };
        let labels: Vec<String> = queues[i].labels.keys().cloned().collect();
        let parent = &mut queues[p];
        let default = if parent.is_root() { 100.0 } else { 0.0 };
        for label in labels {
            if parent.accessible_node_labels.can_access(&label) {
                parent
                    .labels
                    .entry(label)
                    .or_insert_with(|| Capacities::unset(default));
            }
        }
    }
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn partition_mut<'q>(q: &'q mut QueueConfig, label: Option<&str>) -> Option<&'q mut Capacities> {
    match label {
        None => Some(&mut q.capacities),
        Some(l) => q.labels.get_mut(l),
    }
}

fn round_percent(fraction: f64) -> f64 {
    (fraction * 100.0 * 1e4).round() / 1e4
}

fn invalid_queue_name(name: &str) -> Option<&'static str> {
    if name.contains('.') {
        Some("queue names cannot contain '.'")
    } else if name.chars().any(char::is_whitespace) {
        Some("queue names cannot contain whitespace")
    } else {
        None
    }
}

fn valid_label(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn parse_state(s: &str) -> Result<QueueState, String> {
    match s.trim().to_ascii_uppercase().as_str() {
        "RUNNING" => Ok(QueueState::Running),
        "STOPPED" => Ok(QueueState::Stopped),
        _ => Err("expected RUNNING or STOPPED".into()),
    }
}

/// YARN 3.3+ reads -1 as "no limit".
fn parse_user_limit_factor(s: &str) -> Result<f64, String> {
    match parse_f64(s)? {
        v if v == -1.0 || v >= 0.0 => Ok(v),
        _ => Err("expected -1 (no limit) or a non-negative number".into()),
    }
}

fn parse_user_limit_percent(s: &str) -> Result<f64, String> {
    match parse_f64(s)? {
        v if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err("expected a percentage above 0, up to 100".into()),
    }
}

/// A valid capacity-scheduler.xml with about `queues` queues below root, `depth` levels
/// deep, percentages summing to 100 among siblings. For benchmarks and scale tests.
pub fn synthetic_capacity_scheduler_xml(queues: usize, depth: usize) -> String {
    let depth = depth.max(1);
    let queues = queues.max(1);
    let mut fanout = 2usize;
    while (1..=depth)
        .map(|d| fanout.saturating_pow(d as u32))
        .fold(0usize, usize::saturating_add)
        < queues
    {
        fanout += 1;
    }
    // Breadth-first, so the last level is the one left partial.
    let mut levels: Vec<Vec<String>> = vec![vec![ROOT.to_string()]];
    let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut made = 0;
    for _ in 0..depth {
        let mut next = Vec::new();
        for parent in levels.last().map(Vec::as_slice).unwrap_or(&[]) {
            for k in 0..fanout {
                if made == queues {
                    break;
                }
                let path = format!("{parent}.q{k}");
                children
                    .entry(parent.clone())
                    .or_default()
                    .push(path.clone());
                next.push(path);
                made += 1;
            }
        }
        levels.push(next);
    }
    let mut out = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    let mut prop = |k: &str, v: &str| {
        out.push_str(&format!(
            "  <property><name>{PREFIX}{k}</name><value>{v}</value></property>\n"
        ));
    };
    prop("maximum-applications", "10000");
    prop("resource-calculator", DOMINANT_RESOURCE_CALCULATOR);
    let mut leaf_no = 0usize;
    for (parent, kids) in &children {
        let names: Vec<&str> = kids
            .iter()
            .map(|k| k.rsplit('.').next().unwrap_or(k))
            .collect();
        prop(&format!("{parent}.queues"), &names.join(","));
        // Hundredths, with the remainder on the last child, so sums are exact.
        let share = 10_000 / kids.len();
        for (i, kid) in kids.iter().enumerate() {
            let hundredths = if i + 1 == kids.len() {
                10_000 - share * (kids.len() - 1)
            } else {
                share
            };
            prop(
                &format!("{kid}.capacity"),
                &format!("{}.{:02}", hundredths / 100, hundredths % 100),
            );
            prop(&format!("{kid}.maximum-capacity"), "100");
            prop(&format!("{kid}.state"), "RUNNING");
            if !children.contains_key(kid) {
                leaf_no += 1;
                prop(&format!("{kid}.user-limit-factor"), "2");
                prop(&format!("{kid}.acl_submit_applications"), "*");
                prop(
                    &format!("{kid}.preemptor.job-class"),
                    if leaf_no.is_multiple_of(2) {
                        "short"
                    } else {
                        "long"
                    },
                );
            }
        }
    }
    out.push_str("</configuration>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterView;

    /// Builds capacity-scheduler.xml from `key=value` lines, keys relative to
    /// `yarn.scheduler.capacity.`; property n (from 0) sits on line n + 2.
    fn xml(spec: &str) -> String {
        let mut out = String::from("<configuration>\n");
        for line in spec.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (k, v) = line.split_once('=').unwrap();
            out.push_str(&format!(
                "<property><name>{PREFIX}{k}</name><value>{v}</value></property>\n"
            ));
        }
        out + "</configuration>\n"
    }

    fn tree(spec: &str) -> Result<QueueTree, ConfigErrors> {
        let mut conf = Configuration::with_env(HashMap::new());
        conf.add_str("cs.xml", &xml(spec))
            .map_err(ConfigErrors::from)?;
        QueueTree::from_conf(&conf)
    }

    fn ok(spec: &str) -> QueueTree {
        match tree(spec) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    fn problems(spec: &str) -> Vec<(String, QueueProblem, Option<u32>)> {
        match tree(spec) {
            Ok(_) => panic!("accepted:\n{spec}"),
            Err(e) => e
                .errors
                .into_iter()
                .map(|e| match e {
                    ConfigError::Queue {
                        queue,
                        location,
                        problem,
                    } => (queue, problem, location.map(|l| l.line)),
                    other => panic!("not a queue error: {other}"),
                })
                .collect(),
        }
    }

    fn one_problem(spec: &str) -> (String, QueueProblem, Option<u32>) {
        let mut p = problems(spec);
        assert_eq!(p.len(), 1, "{p:?}");
        p.remove(0)
    }

    fn abs(t: &QueueTree, path: &str) -> (f64, f64) {
        let c = &t.find(path).unwrap().capacities;
        (
            c.absolute_capacity.unwrap(),
            c.absolute_maximum_capacity.unwrap(),
        )
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    // root
    // ├── a 40% (max 60)
    // │   ├── a1 50%
    // │   └── a2 50% (max -1)
    // └── b 60%
    #[test]
    fn percentages_multiply_down_the_tree() {
        let t = ok("
            root.queues=a,b
            root.a.capacity=40
            root.a.maximum-capacity=60
            root.a.queues=a1, a2
            root.a.a1.capacity=50
            root.a.a2.capacity=50
            root.a.a2.maximum-capacity=-1
            root.b.capacity=60
        ");
        let paths: Vec<&str> = t.queues.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(
            paths,
            ["root", "root.a", "root.a.a1", "root.a.a2", "root.b"]
        );
        assert_eq!(t.queues[1].children, vec![2, 3]);
        assert_eq!(t.queues[2].parent, Some(1));
        assert_eq!(t.queues[2].depth, 2);
        assert_eq!(abs(&t, "root"), (1.0, 1.0));
        let (c, m) = abs(&t, "root.a.a1");
        assert!(close(c, 0.2) && close(m, 0.6), "{c} {m}");
        let (c, m) = abs(&t, "root.a.a2");
        assert!(close(c, 0.2) && close(m, 0.6), "{c} {m}");
        assert_eq!(t.find("a1").unwrap().path, "root.a.a1");
        assert_eq!(t.capacity_loc("root.b"), Some(9));
        assert_eq!(
            t.queues[3].capacities.maximum_capacity,
            CapacityValue::Percent(100.0)
        );
    }

    impl QueueTree {
        fn capacity_loc(&self, path: &str) -> Option<u32> {
            self.find(path)?.capacity_location().map(|l| l.line)
        }
    }

    // root
    // ├── a 1w
    // └── b 3w
    //     ├── b1 2.0w
    //     └── b2 2w
    #[test]
    fn weights_are_normalised_among_siblings() {
        let t = ok("
            root.queues=a,b
            root.a.capacity=1w
            root.b.capacity=3w
            root.b.queues=b1,b2
            root.b.b1.capacity=2.0w
            root.b.b2.capacity=2w
        ");
        assert!(close(abs(&t, "a").0, 0.25));
        assert!(close(abs(&t, "b1").0, 0.375));
        assert_eq!(
            t.find("root.b").unwrap().capacities.capacity,
            CapacityValue::Weight(3.0)
        );
        assert_eq!(
            t.find("root.b").unwrap().capacities.capacity.to_string(),
            "3w"
        );
        let cluster = Resource::new(100 * 1024, 100);
        assert_eq!(t.guaranteed(1, cluster), Resource::new(25 * 1024, 25));
    }

    // root
    // ├── a [memory=40960,vcores=40] max [memory=81920, vcores=80]
    // │   └── a1 [memory-mb=20Gi, vcores=20]
    // └── b [memory=20480,vcores=20]
    #[test]
    fn absolute_resources_need_the_cluster() {
        let t = ok("
            root.queues=a,b
            root.a.capacity=[memory=40960,vcores=40]
            root.a.maximum-capacity=[memory=81920, vcores=80]
            root.a.queues=a1
            root.a.a1.capacity=[ memory-mb = 20Gi , vcores=20 ]
            root.b.capacity=[memory=20480,vcores=20]
        ");
        let a = t.find("root.a").unwrap();
        assert_eq!(
            a.capacities.capacity,
            CapacityValue::Absolute(Resource::new(40960, 40))
        );
        assert_eq!(a.capacities.absolute_capacity, None);
        assert_eq!(
            a.capacities.capacity.to_string(),
            "[memory=40960,vcores=40]"
        );
        let big = Resource::new(200 * 1024, 200);
        let r = t.resources(None, big);
        assert_eq!(r[1].guaranteed, Resource::new(40960, 40));
        assert_eq!(r[1].maximum, Resource::new(81920, 80));
        assert_eq!(r[2].guaranteed, Resource::new(20480, 20));
        assert_eq!(r[2].maximum, Resource::new(81920, 80));
        assert_eq!(r[3].maximum, big);
        // A cluster smaller than the guarantees scales them down per resource.
        let small = Resource::new(30720, 120);
        let r = t.resources(None, small);
        assert_eq!(r[1].guaranteed, Resource::new(20480, 40));
        assert_eq!(r[3].guaranteed, Resource::new(10240, 20));
    }

    #[test]
    fn capacity_forms_parse_with_units_and_reject_garbage() {
        let p = |s| parse_capacity(s, true).map(|(v, _)| v);
        assert_eq!(p(" 40 "), Ok(CapacityValue::Percent(40.0)));
        assert_eq!(p("2.5w"), Ok(CapacityValue::Weight(2.5)));
        assert_eq!(
            p("[memory=1Gi,vcores=2]"),
            Ok(CapacityValue::Absolute(Resource::new(1024, 2)))
        );
        assert_eq!(
            p("[memory=2048Ki]"),
            Ok(CapacityValue::Absolute(Resource::new(2, 0)))
        );
        assert_eq!(
            p("[memory=1G]"),
            Ok(CapacityValue::Absolute(Resource::new(953, 0)))
        );
        assert_eq!(
            p("[vcores=4]"),
            Ok(CapacityValue::Absolute(Resource::new(0, 4)))
        );
        assert_eq!(
            parse_capacity("[memory=1,yarn.io/gpu=2]", true).unwrap().1,
            vec!["yarn.io/gpu"]
        );
        for bad in [
            "-5",
            "101",
            "abc",
            "",
            "[]",
            "[memory=-1]",
            "[memory=1,memory=2]",
            "[memory]",
            "[memory=1",
            "-1w",
            "10001w",
            "xw",
            "[vcores=1.5]",
            "[vcores=99999999999]",
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
        assert!(parse_capacity("2w", false).is_err());
    }

    #[test]
    fn yarn_defaults_apply() {
        let t = ok("
            root.queues=a,b
            root.a.capacity=30
            root.b.capacity=70
            root.b.maximum-applications=7
        ");
        let a = t.find("a").unwrap();
        assert_eq!(a.user_limit_factor, 1.0);
        assert_eq!(a.minimum_user_limit_percent, 100.0);
        assert_eq!(a.state, QueueState::Running);
        assert_eq!(a.ordering_policy, OrderingPolicy::Fifo);
        assert_eq!(t.root().ordering_policy, OrderingPolicy::Utilization);
        assert_eq!(a.maximum_applications, Some(3000));
        assert_eq!(t.find("b").unwrap().maximum_applications, Some(7));
        assert_eq!(t.root().maximum_applications, None);
        assert_eq!(a.maximum_am_resource_percent, 0.1);
        assert_eq!(t.root().acl_submit_applications, "*");
        assert_eq!(a.acl_submit_applications, " ");
        assert!(!a.preemption_disabled);
        assert_eq!(a.accessible_node_labels, NodeLabels::Any);
        assert_eq!(t.maximum_applications, DEFAULT_MAXIMUM_APPLICATIONS);
        assert_eq!(t.resource_calculator, DEFAULT_RESOURCE_CALCULATOR);
        assert!(
            t.warnings
                .iter()
                .any(|w| w.to_string().contains("DominantResourceCalculator"))
        );
    }

    // root (disable_preemption, policy kill)
    // ├── a (disable_preemption=false, job-class short)
    // │   └── a1 (policy graceful)
    // └── b (STOPPED)
    //     └── b1
    #[test]
    fn inherited_settings_flow_down() {
        let t = ok("
            root.queues=a,b
            root.disable_preemption=true
            root.preemptor.policy=kill
            root.a.capacity=50
            root.a.disable_preemption=false
            root.a.preemptor.job-class=SHORT
            root.a.queues=a1
            root.a.a1.capacity=100
            root.a.a1.preemptor.policy=graceful
            root.a.a1.ordering-policy=fair
            root.b.capacity=50
            root.b.state=stopped
            root.b.queues=b1
            root.b.b1.capacity=100
            global-queue-max-application=0
            maximum-am-resource-percent=0.2
            user-limit-factor=3
        ");
        let q = |p| t.find(p).unwrap();
        assert!(q("root").preemption_disabled);
        assert!(!q("root.a").preemption_disabled && !q("a1").preemption_disabled);
        assert!(q("root.b").preemption_disabled && q("b1").preemption_disabled);
        assert_eq!(q("a1").job_class, Some(JobClass::Short));
        assert_eq!(q("b1").job_class, None);
        assert_eq!(
            (q("root.a").policy, q("root.a").policy_is_own),
            (Some(PolicyKind::Kill), false)
        );
        assert_eq!(
            (q("a1").policy, q("a1").policy_is_own),
            (Some(PolicyKind::Graceful), true)
        );
        assert_eq!(q("b1").state, QueueState::Stopped);
        assert_eq!(q("a1").ordering_policy, OrderingPolicy::Fair);
        assert_eq!(q("b1").maximum_am_resource_percent, 0.2);
        assert_eq!(q("b1").user_limit_factor, 3.0);
        assert_eq!(q("a1").maximum_applications, Some(5000));
    }

    #[test]
    fn sums_use_yarns_tolerance() {
        ok("
            root.queues=a,b,c
            root.a.capacity=33.33
            root.b.capacity=33.33
            root.c.capacity=33.36
        ");
        ok("
            root.queues=a,b
            root.a.capacity=50
            root.b.capacity=49.96
        ");
        let (q, p, line) = one_problem(
            "
            root.queues=a,b,c
            root.a.capacity=33.3
            root.b.capacity=33.3
            root.c.capacity=33.3
        ",
        );
        assert_eq!(q, "root");
        assert!(
            matches!(p, QueueProblem::CapacitySum { sum, label: None, .. } if close(sum, 99.9)),
            "{p:?}"
        );
        assert_eq!(line, Some(3));
    }

    #[test]
    fn zero_sums_follow_yarn() {
        // Children may all be 0 only when the parent is 0 or allows it.
        let (_, p, _) = one_problem(
            "
            root.queues=a,b
            root.a.capacity=100
            root.a.queues=a1
            root.a.a1.capacity=0
            root.b.capacity=0
        ",
        );
        assert!(matches!(p, QueueProblem::ZeroCapacitySum { .. }), "{p:?}");
        ok("
            root.queues=a,b
            root.a.capacity=100
            root.a.allow-zero-capacity-sum=true
            root.a.queues=a1
            root.a.a1.capacity=0
            root.b.capacity=0
            root.b.queues=b1
            root.b.b1.capacity=0
        ");
        let (q, p, _) = one_problem(
            "
            root.queues=a,b
            root.a.capacity=100
            root.b.capacity=0
            root.b.queues=b1
            root.b.b1.capacity=100
        ",
        );
        assert_eq!(q, "root.b");
        assert!(
            matches!(p, QueueProblem::PositiveSumUnderZeroCapacity { .. }),
            "{p:?}"
        );
    }

    #[test]
    fn maximum_below_capacity_is_an_error() {
        let (q, p, line) = one_problem(
            "
            root.queues=a,b
            root.a.capacity=40
            root.a.maximum-capacity=30
            root.b.capacity=60
        ",
        );
        assert_eq!(q, "root.a");
        assert!(matches!(p, QueueProblem::MaxBelowCapacity { .. }), "{p:?}");
        assert_eq!(line, Some(4));
        // Compared as absolute values: a child may have max < capacity relatively
        // when its parent's maximum is wider.
        ok("
            root.queues=a,b
            root.a.capacity=50
            root.a.queues=a1,a2
            root.a.a1.capacity=80
            root.a.a1.maximum-capacity=50
            root.a.a2.capacity=20
            root.b.capacity=50
        ");
    }

    #[test]
    fn siblings_cannot_mix_capacity_forms() {
        for spec in [
            "root.queues=a,b\nroot.a.capacity=50\nroot.b.capacity=[memory=1024,vcores=1]",
            "root.queues=a,b\nroot.a.capacity=50\nroot.b.capacity=1w",
            "root.queues=a,b\nroot.a.capacity=1w\nroot.b.capacity=[memory=1024,vcores=1]",
        ] {
            let (q, p, _) = one_problem(spec);
            assert_eq!(q, "root");
            assert!(
                matches!(p, QueueProblem::MixedCapacityForms { .. }),
                "{p:?}"
            );
        }
        // A 0% sibling is not a percentage in YARN's check.
        ok("root.queues=a,b\nroot.a.capacity=0\nroot.b.capacity=1w");
    }

    #[test]
    fn absolute_parents_and_children_go_together() {
        let (q, p, _) = one_problem(
            "
            root.queues=a
            root.a.capacity=100
            root.a.queues=a1
            root.a.a1.capacity=[memory=1024,vcores=1]
        ",
        );
        assert_eq!(q, "root.a");
        assert!(
            matches!(
                p,
                QueueProblem::AbsoluteParentMismatch {
                    parent: "percentage",
                    children: "absolute"
                }
            ),
            "{p:?}"
        );
        let (_, p, line) = one_problem(
            "
            root.queues=a
            root.a.capacity=[memory=4096,vcores=4]
            root.a.queues=a1,a2
            root.a.a1.capacity=[memory=4096,vcores=2]
            root.a.a2.capacity=[memory=1024,vcores=2]
        ",
        );
        assert!(
            matches!(p, QueueProblem::ChildrenExceedParent { .. }),
            "{p:?}"
        );
        assert_eq!(line, Some(3));
        let (_, p, _) = one_problem(
            "
            root.queues=a
            root.a.capacity=[memory=4096,vcores=4]
            root.a.maximum-capacity=[memory=2048,vcores=8]
        ",
        );
        assert!(matches!(p, QueueProblem::MinAboveMax { .. }), "{p:?}");
        let (q, p, _) = one_problem(
            "
            root.queues=a
            root.a.capacity=[memory=4096,vcores=4]
            root.a.maximum-capacity=[memory=8192,vcores=8]
            root.a.queues=a1
            root.a.a1.capacity=[memory=4096,vcores=4]
            root.a.a1.maximum-capacity=[memory=16384,vcores=8]
        ",
        );
        assert_eq!(q, "root.a.a1");
        assert!(matches!(p, QueueProblem::MaxAboveParentMax { .. }), "{p:?}");
    }

    #[test]
    fn listed_but_unconfigured_queues_are_errors() {
        let (q, p, line) = one_problem(
            "
            root.queues=a,b
            root.a.capacity=100
        ",
        );
        assert_eq!(q, "root.b");
        assert_eq!(
            p,
            QueueProblem::NotConfigured {
                parent: "root".into()
            }
        );
        assert_eq!(line, Some(2), "points at the .queues list");
    }

    #[test]
    fn names_must_be_unique_and_plain() {
        let p = problems(
            "
            root.queues=a,a,b c
            root.a.capacity=100
        ",
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p.iter().any(
            |(q, p, _)| q == "root" && *p == QueueProblem::DuplicateChild { name: "a".into() }
        ));
        assert!(
            p.iter()
                .any(|(_, p, _)| matches!(p, QueueProblem::InvalidName { .. }))
        );
        let (_, p, _) = one_problem("root.queues=");
        assert_eq!(p, QueueProblem::NoChildQueues);
    }

    #[test]
    fn bad_values_name_key_and_line() {
        let (q, p, line) = one_problem(
            "
            root.queues=a
            root.a.capacity=100
            root.a.user-limit-factor=-2
        ",
        );
        assert_eq!((q.as_str(), line), ("root.a", Some(4)));
        assert!(
            matches!(&p, QueueProblem::InvalidValue { key, .. } if key == "yarn.scheduler.capacity.root.a.user-limit-factor"),
            "{p:?}"
        );
        for bad in [
            "root.a.capacity=forty",
            "root.a.capacity=-10",
            "root.a.maximum-capacity=2w",
            "root.a.maximum-capacity=120",
            "root.a.minimum-user-limit-percent=0",
            "root.a.state=DRAINING",
            "root.a.disable_preemption=maybe",
            "root.a.ordering-policy=utilization",
            "root.a.maximum-applications=-5",
            "root.a.maximum-am-resource-percent=1.5",
            "root.a.preemptor.job-class=medium",
            "root.a.preemptor.policy=suspend-all",
            "root.a.accessible-node-labels=gpu!",
            "root.ordering-policy=fair",
        ] {
            let spec = format!("root.queues=a\nroot.a.capacity=100\n{bad}");
            let errs = problems(&spec);
            assert!(
                errs.iter().any(
                    |(_, p, l)| matches!(p, QueueProblem::InvalidValue { .. }) && *l == Some(4)
                ),
                "{bad}: {errs:?}"
            );
        }
    }

    #[test]
    fn root_capacity_is_fixed() {
        ok("root.queues=a\nroot.capacity=100\nroot.a.capacity=100");
        let (q, p, line) = one_problem("root.queues=a\nroot.capacity=50\nroot.a.capacity=100");
        assert_eq!((q.as_str(), line), ("root", Some(3)));
        assert_eq!(p, QueueProblem::RootCapacity { value: "50".into() });
        let (_, p, _) = one_problem("root.queues=a\nroot.capacity=1w\nroot.a.capacity=100");
        assert!(matches!(p, QueueProblem::RootCapacity { .. }));
    }

    #[test]
    fn running_child_of_stopped_parent_is_an_error() {
        let (q, p, _) = one_problem(
            "
            root.queues=a
            root.a.capacity=100
            root.a.state=STOPPED
            root.a.queues=a1
            root.a.a1.capacity=100
            root.a.a1.state=RUNNING
        ",
        );
        assert_eq!(q, "root.a.a1");
        assert_eq!(
            p,
            QueueProblem::RunningUnderStopped {
                parent: "root.a".into()
            }
        );
    }

    // root
    // ├── a 50% [gpu 100%]
    // │   └── a1 100% [gpu 100%, max 50]
    // └── b 50% (no labels)
    #[test]
    fn node_label_capacities_are_read_and_checked() {
        let t = ok("
            root.queues=a,b,c
            root.a.capacity=50
            root.a.accessible-node-labels=gpu
            root.a.accessible-node-labels.gpu.capacity=60
            root.a.accessible-node-labels.gpu.maximum-capacity=80
            root.a.queues=a1
            root.a.a1.capacity=100
            root.a.a1.accessible-node-labels.gpu.capacity=100
            root.b.capacity=40
            root.b.accessible-node-labels=gpu
            root.b.accessible-node-labels.gpu.capacity=40
            root.c.capacity=10
            root.c.accessible-node-labels=
        ");
        let a1 = t.find("a1").unwrap();
        assert_eq!(
            a1.accessible_node_labels,
            NodeLabels::Only(["gpu".to_string()].into())
        );
        let gpu = &a1.labels["gpu"];
        assert!(
            close(gpu.absolute_capacity.unwrap(), 0.6)
                && close(gpu.absolute_maximum_capacity.unwrap(), 0.8)
        );
        assert!(t.find("c").unwrap().labels.is_empty());
        assert_eq!(t.labels().into_iter().collect::<Vec<_>>(), ["gpu"]);
        let r = t.resources(Some("gpu"), Resource::new(10_000, 10));
        assert_eq!(r[2].guaranteed, Resource::new(6000, 6));
        assert_eq!(r[2].maximum, Resource::new(8000, 8));
        assert_eq!(r[3].guaranteed, Resource::new(4000, 4));
        assert_eq!(
            r[4],
            QueueResources {
                guaranteed: Resource::ZERO,
                maximum: Resource::ZERO
            }
        );

        // The label's capacities among root's children must sum to 100 too.
        let (q, p, _) = one_problem(
            "
            root.queues=a,b
            root.a.capacity=50
            root.a.accessible-node-labels=gpu
            root.a.accessible-node-labels.gpu.capacity=60
            root.b.capacity=50
        ",
        );
        assert_eq!(q, "root");
        assert!(
            matches!(p, QueueProblem::CapacitySum { label: Some(ref l), .. } if l == "gpu"),
            "{p:?}"
        );

        let p = problems(
            "
            root.queues=a
            root.a.capacity=100
            root.a.accessible-node-labels=gpu
            root.a.accessible-node-labels.gpu.capacity=100
            root.a.queues=a1,a2
            root.a.a1.capacity=50
            root.a.a1.accessible-node-labels=gpu,ssd
            root.a.a1.accessible-node-labels.gpu.capacity=100
            root.a.a2.capacity=50
            root.a.a2.accessible-node-labels=*
        ",
        );
        assert!(p.iter().any(|(_, p, _)| matches!(p, QueueProblem::LabelNotInParent { label, .. } if label == "ssd")), "{p:?}");
        assert!(
            p.iter()
                .any(|(_, p, _)| matches!(p, QueueProblem::AnyLabelUnderRestrictedParent { .. })),
            "{p:?}"
        );
    }

    #[test]
    fn all_errors_are_reported_at_once() {
        let p = problems(
            "
            root.queues=a,b,c,c
            root.a.capacity=50
            root.a.maximum-capacity=40
            root.b.capacity=abc
            root.b.preemptor.job-class=tiny
        ",
        );
        let kinds: Vec<String> = p.iter().map(|(q, p, _)| format!("{q}: {p}")).collect();
        assert_eq!(p.len(), 5, "{kinds:#?}");
    }

    #[test]
    fn stray_keys_are_warned_about() {
        let t = ok("
            root.queues=a
            root.a.capacity=100
            root.a.preemptor.job-clas=short
            root.x.capacity=10
            root.a.maximum-application-lifetime=-1
        ");
        let w: Vec<String> = t.warnings.iter().map(ToString::to_string).collect();
        assert!(
            w.iter()
                .any(|w| w
                    .contains("did you mean yarn.scheduler.capacity.root.a.preemptor.job-class?")),
            "{w:#?}"
        );
        assert!(
            w.iter().any(|w| w.contains("root.x is not listed")),
            "{w:#?}"
        );
        assert!(!w.iter().any(|w| w.contains("lifetime")), "{w:#?}");
    }

    #[test]
    fn expansion_errors_surface() {
        let mut conf = Configuration::with_env(HashMap::new());
        conf.add_str(
            "cs.xml",
            &xml("root.queues=a\nroot.a.capacity=${undefined}"),
        )
        .unwrap();
        let e = QueueTree::from_conf(&conf).unwrap_err();
        assert!(
            matches!(e.errors[..], [ConfigError::UnresolvedVariable { .. }]),
            "{e}"
        );
    }

    // root
    // ├── short 95 (max 100, disable_preemption, class short)
    // └── long  5  (max 100, class long, policy las)
    #[test]
    fn cluster_queues_match_the_tree() {
        let t = ok("
            root.queues=short,long
            root.short.capacity=95
            root.short.maximum-capacity=100
            root.short.disable_preemption=true
            root.short.preemptor.job-class=short
            root.long.capacity=5
            root.long.preemptor.job-class=long
            root.long.preemptor.policy=las
        ");
        let cluster = Resource::new(100 * 1024, 100);
        let qs = t.to_cluster_queues(cluster);
        assert_eq!(qs.len(), 3);
        assert_eq!(qs[1].path, "root.short");
        assert_eq!(qs[1].guaranteed, Resource::new(97280, 95));
        assert_eq!(qs[2].guaranteed, Resource::new(5120, 5));
        assert_eq!(qs[2].maximum, cluster);
        assert!(qs[1].preemption_disabled && !qs[2].preemption_disabled);
        assert_eq!(
            (qs[2].job_class, qs[2].policy),
            (Some(JobClass::Long), Some(PolicyKind::Las))
        );
        let view = ClusterView::new(qs, vec![], vec![], vec![]).unwrap();
        assert_eq!(view.queues[0].children, vec![QueueIdx(1), QueueIdx(2)]);
        assert_eq!(t.maximum(2, cluster), cluster);
        assert_eq!(t.guaranteed(99, cluster), Resource::ZERO);
    }

    #[test]
    fn find_needs_an_unambiguous_leaf_name() {
        let t = ok("
            root.queues=a,b
            root.a.capacity=50
            root.a.queues=x
            root.a.x.capacity=100
            root.b.capacity=50
            root.b.queues=x
            root.b.x.capacity=100
        ");
        assert!(t.find("x").is_none());
        assert_eq!(t.find("root.b.x").unwrap().path, "root.b.x");
        assert!(t.find("a").is_none(), "a is not a leaf");
        assert_eq!(t.index_of("root.a"), Some(1));
    }

    #[test]
    fn stock_hadoop_capacity_scheduler_is_accepted() {
        let mut conf = Configuration::with_env(HashMap::new());
        conf.add_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/config/testdata/hadoop-3-capacity-scheduler.xml"
        ))
        .unwrap();
        let t = QueueTree::from_conf(&conf).unwrap();
        assert_eq!(t.queues.len(), 2);
        let d = t.find("default").unwrap();
        assert_eq!(d.capacities.absolute_capacity, Some(1.0));
        assert_eq!(d.acl_submit_applications, "*");
        assert_eq!(d.maximum_applications, Some(10_000));
    }

    #[test]
    fn a_thousand_queue_tree_validates() {
        let text = synthetic_capacity_scheduler_xml(1000, 4);
        let mut conf = Configuration::with_env(HashMap::new());
        conf.add_str("big.xml", &text).unwrap();
        let t = QueueTree::from_conf(&conf).unwrap();
        assert_eq!(t.queues.len(), 1001);
        assert_eq!(t.queues.iter().map(|q| q.depth).max(), Some(4));
        let leaf_sum: f64 = t
            .leaves()
            .map(|q| q.capacities.absolute_capacity.unwrap())
            .sum();
        assert!((leaf_sum - 1.0).abs() < 1e-6, "{leaf_sum}");
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    }
}
