//! The queue tree a tick works with. The RM's live capacity scheduler gives the
//! structure and the capacities; capacity-scheduler.xml gives only Preemptor's own
//! per-queue keys (job class, policy). A stale copy of the file, or queues changed on
//! the RM with `yarn schedulerconf` or `-refreshQueues`, must not change what Preemptor
//! sees, so the two are compared every tick and their differences reported.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::cluster::{JobClass, Partition, PolicyKind, Queue, QueueIdx};
use crate::config::queues::{QueueConfig, QueueTree};
use crate::resources::Resource;
use crate::yarn::dto::QueueInfo;

/// Capacities closer than this (a fraction of the cluster, so 0.05 percentage points)
/// agree: the RM prints floats, the file may carry more digits.
const CAPACITY_TOLERANCE: f64 = 0.0005;
/// Deeper trees are cut: the RM allows far fewer levels, so this is a broken answer.
const MAX_DEPTH: usize = 64;

/// Where the queue structure of a tick came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueSource {
    /// `/ws/v1/cluster/scheduler`.
    #[default]
    ResourceManager,
    /// capacity-scheduler.xml, when the RM's answer carried no queues.
    CapacitySchedulerXml,
}

/// The queues of one tick, with what the file and the RM disagree on.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveQueues {
    /// Root first, every parent before its children; `children` is left to
    /// [`crate::cluster::ClusterView::new`].
    pub queues: Vec<Queue>,
    leaf: Vec<bool>,
    by_path: HashMap<String, usize>,
    pub source: QueueSource,
    /// One sentence per difference between capacity-scheduler.xml and the RM.
    pub disagreements: Vec<String>,
}

impl LiveQueues {
    /// The tree of `scheduler` (the RM's `schedulerInfo`), sized for a cluster of
    /// `capacity`, with Preemptor's keys from `file`. Falls back on `file` alone when
    /// the RM listed no queue.
    pub fn resolve(scheduler: &QueueInfo, file: &QueueTree, capacity: Resource) -> LiveQueues {
        if scheduler.queue_name.trim().is_empty() && scheduler.children().is_empty() {
            return Self::from_file(file, capacity);
        }
        let mut b = Builder {
            file,
            capacity,
            out: LiveQueues {
                queues: Vec::new(),
                leaf: Vec::new(),
                by_path: HashMap::new(),
                source: QueueSource::ResourceManager,
                disagreements: Vec::new(),
            },
            // With YARN's preemption monitor off, as Preemptor needs it, the RM reports
            // every queue as preemption-disabled: the flag then says nothing.
            rm_flag_meaningful: !all_leaves_disabled(scheduler),
            file_resources: file.resources(None, capacity),
        };
        b.walk(scheduler, None, 0);
        b.compare_missing();
        b.out
    }

    fn from_file(file: &QueueTree, capacity: Resource) -> LiveQueues {
        let queues = file.to_cluster_queues(capacity);
        LiveQueues {
            leaf: file.queues.iter().map(QueueConfig::is_leaf).collect(),
            by_path: file
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| (q.path.clone(), i))
                .collect(),
            queues,
            source: QueueSource::CapacitySchedulerXml,
            disagreements: Vec::new(),
        }
    }

    /// A queue by full path, or by leaf name when exactly one leaf has it (applications
    /// name their leaf queue).
    pub fn index_of(&self, path_or_leaf_name: &str) -> Option<usize> {
        if let Some(&i) = self.by_path.get(path_or_leaf_name) {
            return Some(i);
        }
        let mut leaves = (0..self.queues.len())
            .filter(|&i| self.leaf[i] && self.queues[i].name() == path_or_leaf_name);
        match (leaves.next(), leaves.next()) {
            (Some(i), None) => Some(i),
            _ => None,
        }
    }

    pub fn is_leaf(&self, index: usize) -> bool {
        self.leaf.get(index).copied().unwrap_or(false)
    }
}

fn all_leaves_disabled(q: &QueueInfo) -> bool {
    fn walk(q: &QueueInfo, depth: usize, seen: &mut usize) -> bool {
        if depth > MAX_DEPTH {
            return true;
        }
        if q.children().is_empty() {
            *seen += 1;
            return q.preemption_disabled == Some(true);
        }
        q.children().iter().all(|c| walk(c, depth + 1, seen))
    }
    let mut seen = 0;
    walk(q, 0, &mut seen) && seen > 0
}

struct Builder<'a> {
    file: &'a QueueTree,
    capacity: Resource,
    out: LiveQueues,
    rm_flag_meaningful: bool,
    file_resources: Vec<crate::config::queues::QueueResources>,
}

impl Builder<'_> {
    fn walk(&mut self, q: &QueueInfo, parent: Option<usize>, depth: usize) {
        if depth > MAX_DEPTH {
            self.out.disagreements.push(format!(
                "the RM's queue tree is deeper than {MAX_DEPTH} levels; the rest is ignored"
            ));
            return;
        }
        let path = queue_path(q, parent.map(|p| self.out.queues[p].path.as_str()));
        if self.out.by_path.contains_key(&path) {
            self.out.disagreements.push(format!(
                "the RM lists queue {path} twice; the second is ignored"
            ));
            return;
        }
        let own = self
            .file
            .index_of(&path)
            .filter(|&i| self.file.queues[i].path == path);
        let inherited = parent.map(|p| {
            let pq = &self.out.queues[p];
            (pq.job_class, pq.policy, pq.preemption_disabled)
        });
        let (job_class, policy, file_disabled): (Option<JobClass>, Option<PolicyKind>, bool) =
            match (own, inherited) {
                (Some(i), _) => {
                    let c = &self.file.queues[i];
                    (c.job_class, c.policy, c.preemption_disabled)
                }
                (None, Some(inherited)) => inherited,
                (None, None) => (None, None, false),
            };
        let (guaranteed, maximum) = match parent {
            None => (self.capacity, self.capacity),
            Some(_) => {
                let max = self.capacity.scale(percent(q.absolute_max_capacity));
                let g = self.capacity.scale(percent(q.absolute_capacity));
                (g.component_min(max), max)
            }
        };
        let preemption_disabled = match q.preemption_disabled {
            Some(rm) if self.rm_flag_meaningful => rm,
            _ => file_disabled,
        };
        match own {
            Some(i) => self.compare(&path, q, i, parent.is_none()),
            None => self.out.disagreements.push(format!(
                "queue {path} is on the RM but not in capacity-scheduler.xml: \
                 it takes its job class and policy from its parent"
            )),
        }
        let index = self.out.queues.len();
        self.out.by_path.insert(path.clone(), index);
        self.out.leaf.push(q.is_leaf());
        self.out.queues.push(Queue {
            path,
            parent: parent.map(|p| QueueIdx(p as u32)),
            children: Vec::new(),
            guaranteed,
            maximum,
            preemption_disabled,
            job_class,
            policy,
            confined_to: Partition::confining(q.default_node_label_expression.as_deref()),
            used: Resource::ZERO,
            pending: Resource::ZERO,
        });
        for c in q.children() {
            self.walk(c, Some(index), depth + 1);
        }
    }

    /// Differences between the file's queue `i` and the RM's `q`.
    fn compare(&mut self, path: &str, q: &QueueInfo, i: usize, root: bool) {
        let c = &self.file.queues[i];
        if c.is_leaf() != q.is_leaf() {
            let kind = |leaf: bool| if leaf { "a leaf" } else { "a parent" };
            self.out.disagreements.push(format!(
                "queue {path} is {} on the RM but {} in capacity-scheduler.xml",
                kind(q.is_leaf()),
                kind(c.is_leaf())
            ));
        }
        if root {
            return;
        }
        let caps = &c.capacities;
        for (what, file, rm) in [
            ("capacity", caps.absolute_capacity, q.absolute_capacity),
            (
                "maximum capacity",
                caps.absolute_maximum_capacity,
                q.absolute_max_capacity,
            ),
        ] {
            // Absolute-resource queues have no fraction in the file: compare resources.
            let file = file.or_else(|| {
                let r = self.file_resources.get(i)?;
                let r = if what == "capacity" {
                    r.guaranteed
                } else {
                    r.maximum
                };
                Some(r.dominant_share(&self.capacity))
            });
            let rm = percent(rm);
            if let Some(file) = file
                && (file - rm).abs() > CAPACITY_TOLERANCE
            {
                self.out.disagreements.push(format!(
                    "queue {path}: absolute {what} {:.2}% on the RM, {:.2}% in capacity-scheduler.xml; the RM's is used",
                    rm * 100.0,
                    file * 100.0
                ));
            }
        }
        if self.rm_flag_meaningful
            && let Some(rm) = q.preemption_disabled
            && rm != c.preemption_disabled
        {
            self.out.disagreements.push(format!(
                "queue {path}: preemption {} on the RM, {} in capacity-scheduler.xml; the RM's is used",
                if rm { "disabled" } else { "enabled" },
                if c.preemption_disabled { "disabled" } else { "enabled" },
            ));
        }
    }

    fn compare_missing(&mut self) {
        for c in &self.file.queues {
            if !self.out.by_path.contains_key(&c.path) {
                self.out.disagreements.push(format!(
                    "queue {} is in capacity-scheduler.xml but not on the RM: ignored",
                    c.path
                ));
            }
        }
    }
}

/// `queuePath` (Hadoop 3.2+), else the parent's path and `queueName`.
pub(crate) fn queue_path(q: &QueueInfo, parent: Option<&str>) -> String {
    let own = q.queue_path.trim();
    if !own.is_empty() {
        return own.to_string();
    }
    let name = q.queue_name.trim();
    match parent {
        Some(p) => format!("{p}.{name}"),
        None if name.is_empty() => "root".to_string(),
        None => name.to_string(),
    }
}

/// A percentage as the RM prints it, as a fraction in [0, 1].
fn percent(p: f64) -> f64 {
    if p.is_finite() {
        (p / 100.0).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yarn::dto::{LEAF_QUEUE_TYPE, Queues};

    fn file(xml: &str) -> QueueTree {
        let mut conf = crate::config::xml::Configuration::new();
        conf.add_str("capacity-scheduler.xml", xml)
            .expect("test XML parses");
        QueueTree::from_conf(&conf).expect("test tree is valid")
    }

    const FILE: &str = r#"<configuration>
      <property><name>yarn.scheduler.capacity.root.queues</name><value>short,long</value></property>
      <property><name>yarn.scheduler.capacity.root.short.capacity</name><value>70</value></property>
      <property><name>yarn.scheduler.capacity.root.short.preemptor.job-class</name><value>short</value></property>
      <property><name>yarn.scheduler.capacity.root.long.capacity</name><value>30</value></property>
      <property><name>yarn.scheduler.capacity.root.long.preemptor.job-class</name><value>long</value></property>
      <property><name>yarn.scheduler.capacity.root.long.preemptor.policy</name><value>kill</value></property>
    </configuration>"#;

    fn leaf(path: &str, abs: f64, max: f64, disabled: bool) -> QueueInfo {
        QueueInfo {
            kind: Some(LEAF_QUEUE_TYPE.into()),
            queue_path: path.into(),
            queue_name: path.rsplit('.').next().unwrap_or(path).into(),
            absolute_capacity: abs,
            absolute_max_capacity: max,
            preemption_disabled: Some(disabled),
            ..QueueInfo::default()
        }
    }

    fn root(children: Vec<QueueInfo>) -> QueueInfo {
        QueueInfo {
            kind: Some("capacityScheduler".into()),
            queue_name: "root".into(),
            capacity: 100.0,
            max_capacity: 100.0,
            queues: Some(Queues { queue: children }),
            ..QueueInfo::default()
        }
    }

    const CLUSTER: Resource = Resource::new(10_000, 10);

    #[test]
    fn the_rm_gives_structure_and_capacity_the_file_gives_classes() {
        let rm = root(vec![
            leaf("root.short", 60.0, 100.0, true),
            leaf("root.long", 40.0, 50.0, true),
        ]);
        let live = LiveQueues::resolve(&rm, &file(FILE), CLUSTER);
        assert_eq!(live.source, QueueSource::ResourceManager);
        let paths: Vec<&str> = live.queues.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(paths, ["root", "root.short", "root.long"]);
        let short = &live.queues[live.index_of("short").expect("leaf by name")];
        assert_eq!(short.guaranteed, Resource::new(6_000, 6));
        assert_eq!(short.job_class, Some(JobClass::Short));
        let long = &live.queues[live.index_of("root.long").expect("by path")];
        assert_eq!(long.maximum, Resource::new(5_000, 5));
        assert_eq!(long.policy, Some(PolicyKind::Kill));
        // Every leaf disabled: YARN's monitor is off, so the file decides.
        assert!(!long.preemption_disabled);
        assert_eq!(
            live.disagreements,
            [
                "queue root.short: absolute capacity 60.00% on the RM, 70.00% in capacity-scheduler.xml; the RM's is used",
                "queue root.long: absolute capacity 40.00% on the RM, 30.00% in capacity-scheduler.xml; the RM's is used",
                "queue root.long: absolute maximum capacity 50.00% on the RM, 100.00% in capacity-scheduler.xml; the RM's is used",
            ]
        );
    }

    #[test]
    fn queues_only_on_one_side_are_named_and_the_rm_wins() {
        let mut batch = QueueInfo {
            queue_path: "root.batch".into(),
            queue_name: "batch".into(),
            absolute_capacity: 30.0,
            absolute_max_capacity: 100.0,
            ..QueueInfo::default()
        };
        batch.queues = Some(Queues {
            queue: vec![leaf("root.batch.etl", 30.0, 100.0, false)],
        });
        let rm = root(vec![leaf("root.short", 70.0, 100.0, false), batch]);
        let live = LiveQueues::resolve(&rm, &file(FILE), CLUSTER);
        let etl = live.index_of("etl").expect("the RM's queue is there");
        assert!(live.is_leaf(etl));
        assert_eq!(live.queues[etl].job_class, None);
        assert_eq!(live.index_of("long"), None);
        assert!(live.disagreements.contains(
            &"queue root.batch.etl is on the RM but not in capacity-scheduler.xml: it takes its job class and policy from its parent".to_string()
        ));
        assert!(live.disagreements.contains(
            &"queue root.long is in capacity-scheduler.xml but not on the RM: ignored".to_string()
        ));
        // One leaf enabled: the monitor is on and the RM's flags count.
        let rm = root(vec![
            leaf("root.short", 70.0, 100.0, true),
            leaf("root.long", 30.0, 100.0, false),
        ]);
        let live = LiveQueues::resolve(&rm, &file(FILE), CLUSTER);
        assert!(live.queues[1].preemption_disabled);
        assert_eq!(
            live.disagreements,
            [
                "queue root.short: preemption disabled on the RM, enabled in capacity-scheduler.xml; the RM's is used"
            ]
        );
    }

    #[test]
    fn an_empty_scheduler_answer_falls_back_on_the_file() {
        let live = LiveQueues::resolve(&QueueInfo::default(), &file(FILE), CLUSTER);
        assert_eq!(live.source, QueueSource::CapacitySchedulerXml);
        assert_eq!(live.queues.len(), 3);
        assert!(live.is_leaf(live.index_of("short").expect("file queue")));
        assert!(live.disagreements.is_empty());
    }

    #[test]
    fn a_hostile_tree_is_cut_not_followed() {
        let mut q = leaf("root.x", 1.0, 1.0, false);
        for _ in 0..100 {
            q = QueueInfo {
                queue_name: "x".into(),
                queues: Some(Queues { queue: vec![q] }),
                ..QueueInfo::default()
            };
        }
        let live = LiveQueues::resolve(&root(vec![q]), &file(FILE), CLUSTER);
        assert!(live.queues.len() <= MAX_DEPTH + 2);
        assert!(live.disagreements.iter().any(|d| d.contains("deeper than")));
    }
}
