//! The capacity scheduler's queue tree from capacity-scheduler.xml, as YARN 3.x's
//! CapacitySchedulerConfiguration reads it, with the checks its queue constructors make
//! (legacy queue mode: siblings use one capacity form).
//!
//! Where YARN would accept something that is almost certainly a mistake, this reader
//! reports it: a queue listed without any capacity (YARN gives it 0), a capacity on
//! `root`, garbage where a number belongs (YARN falls back to defaults or throws).
//!
//! [`capacity`] parses capacity values; [`build`] walks and checks the tree.

mod build;
mod capacity;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;

use super::error::{ConfigError, ConfigErrors, ConfigWarning, Location, QueueProblem};
use super::values::{did_you_mean, parse_bool, parse_f64, parse_f64_in, parse_i64, parse_list};
use super::xml::Configuration;
use crate::cluster::{JobClass, Partition, PolicyKind, Queue, QueueIdx};
use crate::resources::Resource;
use build::*;
pub use capacity::{CapacityValue, parse_capacity};

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
        assert_eq!(view.queues()[0].children, vec![QueueIdx(1), QueueIdx(2)]);
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
