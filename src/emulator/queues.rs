//! The capacity scheduler's queue tree as the emulator schedules on it: relative and
//! absolute capacities per partition (node label), worked out once from the absolute
//! [`crate::cluster::Queue`] list plus a small per-label capacity list.
//!
//! Capacities are kept as fractions, not resources, so that a node resource update (which
//! changes the partition's total) moves every queue's guarantee with it, as in YARN.

use std::collections::BTreeMap;

use crate::cluster::Queue;
use crate::config::queues::NodeLabels;
use crate::resources::Resource;

/// The default partition (nodes without a label).
pub const DEFAULT_PARTITION: &str = "";

/// `yarn.scheduler.capacity.<queue>.accessible-node-labels.<label>.capacity` and
/// `.maximum-capacity`, in percent of the parent's capacity for that label.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueLabelCapacity {
    pub queue: String,
    pub label: String,
    pub capacity_pct: f64,
    pub maximum_capacity_pct: f64,
}

/// Everything the emulator's scheduler needs about queues.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSetup {
    /// Pre-order, root first, absolute resources worked out against `cluster`.
    pub queues: Vec<Queue>,
    /// The resource `queues` were computed for.
    pub cluster: Resource,
    pub labels: Vec<QueueLabelCapacity>,
    /// Per queue path: `accessible-node-labels` and `default-node-label-expression`.
    /// A queue not listed can access every label and has no default.
    pub access: BTreeMap<String, QueueAccess>,
}

/// What a queue may ask for, beyond its capacities.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueAccess {
    pub accessible: NodeLabels,
    pub default_label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueueError {
    #[error("the queue list is empty (expected at least root)")]
    Empty,
    #[error("the first queue must be root, found {0:?}")]
    NoRoot(String),
    #[error("queue {path} refers to parent index {parent}, which is not an earlier queue")]
    BadParent { path: String, parent: u32 },
    #[error("queue {0} appears twice")]
    Duplicate(String),
    #[error("node label capacity names queue {0}, which does not exist")]
    UnknownQueue(String),
    #[error(
        "queue {queue}: capacity {capacity}% and maximum-capacity {maximum}% for label {label:?} must satisfy 0 <= capacity <= maximum <= 100"
    )]
    BadLabelCapacity {
        queue: String,
        label: String,
        capacity: f64,
        maximum: f64,
    },
    #[error("the cluster resource the queues were computed for is zero")]
    ZeroCluster,
}

/// Capacities of one queue in one partition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PartitionCapacity {
    /// Percent of the parent.
    pub capacity_pct: f64,
    pub maximum_pct: f64,
    /// Fraction of the whole partition.
    pub absolute: f64,
    pub absolute_max: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SchedQueue {
    pub path: String,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub preemption_disabled: bool,
    /// Partitions this queue may use, with its capacities there. The root holds every
    /// partition; a queue holds the default partition and the labels it was given.
    pub partitions: BTreeMap<String, PartitionCapacity>,
    pub accessible: NodeLabels,
    /// The partition of a request that names none.
    pub default_label: Option<String>,
}

impl SchedQueue {
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    pub fn capacity(&self, partition: &str) -> Option<&PartitionCapacity> {
        self.partitions.get(partition)
    }
}

/// The queue tree in scheduling form.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueTree {
    pub queues: Vec<SchedQueue>,
}

fn fraction(part: Resource, whole: Resource) -> f64 {
    // Queues are percentages of the cluster, so either component gives the same fraction;
    // memory is the finer-grained one.
    if whole.memory_mb > 0 {
        part.memory_mb as f64 / whole.memory_mb as f64
    } else if whole.vcores > 0 {
        part.vcores as f64 / whole.vcores as f64
    } else {
        0.0
    }
}

impl QueueTree {
    pub fn build(setup: &QueueSetup) -> Result<QueueTree, QueueError> {
        let first = setup.queues.first().ok_or(QueueError::Empty)?;
        if first.path != "root" || first.parent.is_some() {
            return Err(QueueError::NoRoot(first.path.clone()));
        }
        if setup.cluster.is_zero() {
            return Err(QueueError::ZeroCluster);
        }
        let mut queues: Vec<SchedQueue> = Vec::with_capacity(setup.queues.len());
        for (i, q) in setup.queues.iter().enumerate() {
            if queues.iter().any(|s| s.path == q.path) {
                return Err(QueueError::Duplicate(q.path.clone()));
            }
            let parent = match q.parent {
                Some(p) if p.get() < i => Some(p.get()),
                Some(p) => {
                    return Err(QueueError::BadParent {
                        path: q.path.clone(),
                        parent: p.0,
                    });
                }
                None if i == 0 => None,
                None => {
                    return Err(QueueError::BadParent {
                        path: q.path.clone(),
                        parent: u32::MAX,
                    });
                }
            };
            let absolute = fraction(q.guaranteed, setup.cluster).clamp(0.0, 1.0);
            let absolute_max = fraction(q.maximum, setup.cluster).clamp(absolute, 1.0);
            let (pa, pm) = match parent {
                Some(p) => {
                    let c = queues[p].partitions[DEFAULT_PARTITION];
                    (c.absolute, c.absolute_max)
                }
                None => (1.0, 1.0),
            };
            let rel = |abs: f64, of: f64| if of > 0.0 { abs / of * 100.0 } else { 0.0 };
            let mut partitions = BTreeMap::new();
            partitions.insert(
                DEFAULT_PARTITION.to_string(),
                PartitionCapacity {
                    capacity_pct: rel(absolute, pa),
                    maximum_pct: rel(absolute_max, pm),
                    absolute,
                    absolute_max,
                },
            );
            if let Some(p) = parent {
                queues[p].children.push(i);
            }
            let access = setup.access.get(&q.path);
            queues.push(SchedQueue {
                path: q.path.clone(),
                parent,
                children: Vec::new(),
                preemption_disabled: q.preemption_disabled,
                partitions,
                accessible: access.map_or(NodeLabels::Any, |a| a.accessible.clone()),
                default_label: access.and_then(|a| a.default_label.clone()),
            });
        }
        // Label capacities: validated first, then applied in pre-order so that parents are
        // done before children.
        for l in &setup.labels {
            if !queues.iter().any(|q| q.path == l.queue) {
                return Err(QueueError::UnknownQueue(l.queue.clone()));
            }
            let ok = l.capacity_pct.is_finite()
                && l.maximum_capacity_pct.is_finite()
                && 0.0 <= l.capacity_pct
                && l.capacity_pct <= l.maximum_capacity_pct
                && l.maximum_capacity_pct <= 100.0;
            if !ok {
                return Err(QueueError::BadLabelCapacity {
                    queue: l.queue.clone(),
                    label: l.label.clone(),
                    capacity: l.capacity_pct,
                    maximum: l.maximum_capacity_pct,
                });
            }
        }
        let mut tree = QueueTree { queues };
        let labels: Vec<&str> = {
            let mut v: Vec<&str> = setup.labels.iter().map(|l| l.label.as_str()).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        for label in labels {
            tree.add_partition_to_root(label);
            for i in 1..tree.queues.len() {
                let Some(l) = setup
                    .labels
                    .iter()
                    .find(|l| l.label == label && l.queue == tree.queues[i].path)
                else {
                    continue;
                };
                let Some(parent) = tree.queues[i].parent else {
                    continue;
                };
                let Some(pc) = tree.queues[parent].partitions.get(label).copied() else {
                    // The parent cannot reach the label, so neither can the child.
                    continue;
                };
                tree.queues[i].partitions.insert(
                    label.to_string(),
                    PartitionCapacity {
                        capacity_pct: l.capacity_pct,
                        maximum_pct: l.maximum_capacity_pct,
                        absolute: pc.absolute * l.capacity_pct / 100.0,
                        absolute_max: pc.absolute_max * l.maximum_capacity_pct / 100.0,
                    },
                );
            }
        }
        Ok(tree)
    }

    /// The root reaches every partition in full; called when a label is added at runtime.
    pub fn add_partition_to_root(&mut self, label: &str) {
        if let Some(root) = self.queues.first_mut() {
            root.partitions
                .entry(label.to_string())
                .or_insert(PartitionCapacity {
                    capacity_pct: 100.0,
                    maximum_pct: 100.0,
                    absolute: 1.0,
                    absolute_max: 1.0,
                });
        }
    }

    pub fn leaf_by_name(&self, name: &str) -> Option<usize> {
        // YARN accepts a leaf's short name or its full path.
        self.queues
            .iter()
            .position(|q| q.is_leaf() && (q.path == name || q.name() == name))
    }

    /// Indices from the root down to `leaf`.
    pub fn path_to(&self, leaf: usize) -> Vec<usize> {
        let mut path = vec![leaf];
        let mut cur = leaf;
        while let Some(p) = self.queues.get(cur).and_then(|q| q.parent) {
            path.push(p);
            cur = p;
        }
        path.reverse();
        path
    }

    /// True when `ancestor` is `q` or one of its ancestors.
    pub fn is_under(&self, q: usize, ancestor: usize) -> bool {
        let mut cur = Some(q);
        while let Some(c) = cur {
            if c == ancestor {
                return true;
            }
            cur = self.queues.get(c).and_then(|x| x.parent);
        }
        false
    }
}

impl QueueSetup {
    /// From the capacity-scheduler.xml queue tree: default-partition capacities through
    /// [`crate::config::QueueTree::to_cluster_queues`], and for every node label each
    /// accessible queue's capacity and maximum-capacity relative to its parent.
    pub fn from_config(tree: &crate::config::QueueTree, cluster: Resource) -> QueueSetup {
        let rel = |part: Resource, of: Resource| {
            let f = fraction(part, of);
            if f.is_finite() {
                (f * 100.0).clamp(0.0, 100.0)
            } else {
                0.0
            }
        };
        let mut labels = Vec::new();
        for label in tree.labels() {
            let res = tree.resources(Some(label), cluster);
            for (i, q) in tree.queues.iter().enumerate().skip(1) {
                if q.partition(Some(label)).is_none() || !q.accessible_node_labels.can_access(label)
                {
                    continue;
                }
                let p = q.parent.unwrap_or(0);
                let maximum_pct = rel(res[i].maximum, res[p].maximum);
                labels.push(QueueLabelCapacity {
                    queue: q.path.clone(),
                    label: label.to_string(),
                    capacity_pct: rel(res[i].guaranteed, res[p].guaranteed).min(maximum_pct),
                    maximum_capacity_pct: maximum_pct,
                });
            }
        }
        let access = tree
            .queues
            .iter()
            .map(|q| {
                let a = QueueAccess {
                    accessible: q.accessible_node_labels.clone(),
                    default_label: q.default_node_label_expression.clone(),
                };
                (q.path.clone(), a)
            })
            .collect();
        QueueSetup {
            queues: tree.to_cluster_queues(cluster),
            cluster,
            labels,
            access,
        }
    }
}

impl QueueSetup {
    /// Dice's short partition as an operator configures it (see docs/policies.md): the
    /// short leaf and its parents get the whole of `label`, and the leaf asks for it
    /// by default. `short_leaf` is a path or, as YARN accepts, a leaf's name; one not in
    /// the setup changes nothing.
    pub fn with_short_partition(mut self, short_leaf: &str, label: &str) -> QueueSetup {
        let Some(mut i) = self
            .queues
            .iter()
            .position(|q| q.path == short_leaf || q.path.rsplit('.').next() == Some(short_leaf))
        else {
            return self;
        };
        let leaf_path = self.queues[i].path.clone();
        while let Some(parent) = self.queues[i].parent {
            self.labels.push(QueueLabelCapacity {
                queue: self.queues[i].path.clone(),
                label: label.to_string(),
                capacity_pct: 100.0,
                maximum_capacity_pct: 100.0,
            });
            i = parent.get();
        }
        self.access.insert(
            leaf_path,
            QueueAccess {
                accessible: NodeLabels::Any,
                default_label: Some(label.to_string()),
            },
        );
        self
    }
}

/// A queue for tests: guaranteed and maximum as fractions of `cluster`.
#[cfg(test)]
pub(crate) fn test_queue(
    path: &str,
    parent: Option<u32>,
    cluster: Resource,
    guaranteed: f64,
    maximum: f64,
) -> Queue {
    Queue {
        path: path.into(),
        parent: parent.map(crate::cluster::QueueIdx),
        children: vec![],
        guaranteed: cluster.scale(guaranteed),
        maximum: cluster.scale(maximum),
        preemption_disabled: false,
        job_class: None,
        policy: None,
        confined_to: None,
        used: Resource::ZERO,
        pending: Resource::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    //   root (100 / 100)
    //   ├── a (40 / 100)   label x: 100 / 100
    //   │   └── a1 (50 / 50 of a)  label x: 50 / 100
    //   └── b (60 / 60)
    fn setup() -> QueueSetup {
        let c = Resource::new(100 * 1024, 100);
        let q = |path: &str, parent: Option<u32>, g: f64, m: f64| test_queue(path, parent, c, g, m);
        QueueSetup {
            queues: vec![
                q("root", None, 1.0, 1.0),
                q("root.a", Some(0), 0.4, 1.0),
                q("root.a.a1", Some(1), 0.2, 0.5),
                q("root.b", Some(0), 0.6, 0.6),
            ],
            cluster: c,
            labels: vec![
                QueueLabelCapacity {
                    queue: "root.a".into(),
                    label: "x".into(),
                    capacity_pct: 100.0,
                    maximum_capacity_pct: 100.0,
                },
                QueueLabelCapacity {
                    queue: "root.a.a1".into(),
                    label: "x".into(),
                    capacity_pct: 50.0,
                    maximum_capacity_pct: 100.0,
                },
            ],
            access: Default::default(),
        }
    }

    #[test]
    fn relative_and_absolute_capacities_per_partition() {
        let t = QueueTree::build(&setup()).unwrap();
        let a1 = &t.queues[2];
        let d = a1.capacity(DEFAULT_PARTITION).unwrap();
        assert!((d.capacity_pct - 50.0).abs() < 1e-9);
        assert!((d.maximum_pct - 50.0).abs() < 1e-9);
        assert!((d.absolute - 0.2).abs() < 1e-9);
        let x = a1.capacity("x").unwrap();
        assert!((x.absolute - 0.5).abs() < 1e-9);
        assert!((x.absolute_max - 1.0).abs() < 1e-9);
        assert!(t.queues[3].capacity("x").is_none(), "b cannot reach x");
        assert_eq!(t.queues[0].children, vec![1, 3]);
        assert_eq!(t.leaf_by_name("a1"), Some(2));
        assert_eq!(t.leaf_by_name("root.b"), Some(3));
        assert_eq!(t.leaf_by_name("a"), None, "parents take no applications");
        assert_eq!(t.path_to(2), vec![0, 1, 2]);
        assert!(t.is_under(2, 1) && !t.is_under(3, 1));
    }

    #[test]
    fn bad_setups_are_rejected_with_reasons() {
        let mut s = setup();
        s.labels[0].capacity_pct = 120.0;
        assert!(matches!(
            QueueTree::build(&s),
            Err(QueueError::BadLabelCapacity { .. })
        ));
        let mut s = setup();
        s.labels[0].queue = "root.zzz".into();
        assert_eq!(
            QueueTree::build(&s),
            Err(QueueError::UnknownQueue("root.zzz".into()))
        );
        let mut s = setup();
        s.queues.remove(0);
        assert!(matches!(QueueTree::build(&s), Err(QueueError::NoRoot(_))));
        let mut s = setup();
        s.cluster = Resource::ZERO;
        assert_eq!(QueueTree::build(&s), Err(QueueError::ZeroCluster));
    }

    #[test]
    fn the_shipped_capacity_scheduler_xml_becomes_a_scheduling_tree() {
        let loaded = crate::config::load_embedded_default().unwrap();
        let setup = QueueSetup::from_config(&loaded.queues, Resource::new(32768, 32));
        let t = QueueTree::build(&setup).unwrap();
        let short = t.leaf_by_name("short").unwrap();
        let c = t.queues[short].capacity(DEFAULT_PARTITION).unwrap();
        assert!((c.capacity_pct - 95.0).abs() < 0.01, "{c:?}");
        assert!((c.absolute_max - 1.0).abs() < 1e-9);
        assert!(t.leaf_by_name("long").is_some());
    }

    #[test]
    fn label_capacities_come_from_accessible_node_labels() {
        let xml = r#"<configuration>
          <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
          <property><name>yarn.scheduler.capacity.root.accessible-node-labels.x.capacity</name><value>100</value></property>
          <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>30</value></property>
          <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>70</value></property>
          <property><name>yarn.scheduler.capacity.root.a.accessible-node-labels</name><value>x</value></property>
          <property><name>yarn.scheduler.capacity.root.a.accessible-node-labels.x.capacity</name><value>100</value></property>
          <property><name>yarn.scheduler.capacity.root.a.accessible-node-labels.x.maximum-capacity</name><value>100</value></property>
        </configuration>"#;
        let mut conf = crate::config::xml::Configuration::new();
        conf.add_str("capacity-scheduler.xml", xml).unwrap();
        let tree = crate::config::queues::QueueTree::from_conf(&conf).unwrap();
        let setup = QueueSetup::from_config(&tree, Resource::new(10240, 10));
        assert_eq!(
            setup.labels,
            vec![QueueLabelCapacity {
                queue: "root.a".into(),
                label: "x".into(),
                capacity_pct: 100.0,
                maximum_capacity_pct: 100.0,
            }]
        );
        let t = QueueTree::build(&setup).unwrap();
        assert!(t.queues[1].capacity("x").is_some());
        assert!(t.queues[2].capacity("x").is_none());
    }
}
