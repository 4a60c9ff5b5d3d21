//! Dice's short partition on YARN: the exclusive node label [`SHORT_PARTITION_LABEL`].
//!
//! Before the first partition change the controller makes sure the label exists
//! (adding it when missing, and then owning it) and that every short queue can run in
//! it. When either is not so, partition changes are held back with one warning that
//! says what to configure, instead of failing every tick. On shutdown an owned label is
//! taken off every node and removed from the cluster.
//!
//! Ownership is a marker file in the state directory, written before the label is
//! added, so that a controller restarted after a crash still knows the label is its own.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::view::SHORT_PARTITION_LABEL;
use crate::cluster::NodeId;
use crate::yarn::RmClient;
use crate::yarn::dto::{NodeLabelInfo, QueueInfo};

const MARKER: &str = "short-label-added";
/// How often a held-back partition is checked again, and a ready one verified.
const RECHECK: Duration = Duration::from_secs(30);

/// Whether partition changes can go to the RM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Held back; the sentence tells the operator what to change.
    Unusable(String),
}

pub struct ShortLabel {
    marker: PathBuf,
    owned: bool,
    last: Option<(Instant, Readiness)>,
}

impl ShortLabel {
    pub fn new(state_dir: &Path) -> ShortLabel {
        let marker = state_dir.join(MARKER);
        let owned = marker.exists();
        ShortLabel {
            marker,
            owned,
            last: None,
        }
    }

    /// Whether this controller (or an earlier run of it) added the label.
    pub fn owned(&self) -> bool {
        self.owned
    }

    /// Checks at most every [`RECHECK`]; `Some` when the readiness changed, to be told
    /// to the operator once.
    /// `may_add`: false in observe-only mode, where a missing label is only reported.
    pub async fn check(
        &mut self,
        rm: &RmClient,
        scheduler: &QueueInfo,
        short_queues: &[String],
        may_add: bool,
    ) -> (Readiness, Option<Readiness>) {
        if let Some((at, r)) = &self.last
            && at.elapsed() < RECHECK
        {
            return (r.clone(), None);
        }
        // The queues first: a label no queue can use is not added. The RM lists a
        // queue's configured label capacities before the label exists.
        let checked = match queues_can_use_label(scheduler, short_queues) {
            Ok(()) => self.ensure(rm, may_add).await,
            Err(why) => Err(why),
        };
        let now = match checked {
            Ok(()) => Readiness::Ready,
            Err(why) => Readiness::Unusable(why),
        };
        let changed = self.last.as_ref().is_none_or(|(_, r)| *r != now);
        self.last = Some((Instant::now(), now.clone()));
        (now.clone(), changed.then_some(now))
    }

    /// Adds the label when the cluster lacks it.
    async fn ensure(&mut self, rm: &RmClient, may_add: bool) -> Result<(), String> {
        if self
            .exists(rm)
            .await
            .map_err(|e| format!("the RM's node labels cannot be read: {e}"))?
        {
            return Ok(());
        }
        if !may_add {
            return Err(format!(
                "observe-only: the RM has no node label {SHORT_PARTITION_LABEL:?}; acting, Preemptor would add it"
            ));
        }
        std::fs::write(&self.marker, b"").map_err(|e| {
            format!(
                "writing {}: {e}; the node label {SHORT_PARTITION_LABEL:?} is not added",
                self.marker.display()
            )
        })?;
        self.owned = true;
        let label = NodeLabelInfo {
            name: SHORT_PARTITION_LABEL.into(),
            exclusivity: true,
        };
        if let Err(e) = rm.add_node_labels(&[label]).await {
            // An answer lost after the RM added it leaves the label ours.
            if !self.exists(rm).await.unwrap_or(true) {
                self.disown();
            }
            return Err(format!(
                "adding the node label {SHORT_PARTITION_LABEL:?} failed ({e}); the RM needs yarn.node-labels.enabled=true, yarn.node-labels.configuration-type=centralized and yarn.node-labels.fs-store.root-dir in yarn-site.xml, and Preemptor's user in yarn.admin.acl"
            ));
        }
        Ok(())
    }

    async fn exists(&self, rm: &RmClient) -> Result<bool, String> {
        let labels = rm.node_labels().await.map_err(|e| e.to_string())?;
        Ok(labels.value.iter().any(|l| l.name == SHORT_PARTITION_LABEL))
    }

    /// Forgets the label as ours; what failed, if anything.
    fn disown(&mut self) -> Option<String> {
        self.owned = false;
        self.last = None;
        match std::fs::remove_file(&self.marker) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Some(format!("removing {}: {e}", self.marker.display()))
            }
            _ => None,
        }
    }

    /// Takes the label off every node that carries it and removes it from the cluster,
    /// when it is owned. What failed, one sentence each.
    pub async fn release(&mut self, rm: &RmClient) -> Vec<String> {
        if !self.owned {
            return Vec::new();
        }
        // Removed by someone else meanwhile: nothing left to undo.
        if self.exists(rm).await == Ok(false) {
            return self.disown().into_iter().collect();
        }
        let mut failed = Vec::new();
        match rm.node_to_labels().await {
            Ok(p) => {
                let labelled: Vec<(NodeId, Vec<String>)> = p
                    .value
                    .into_iter()
                    .filter(|(_, l)| l.iter().any(|l| l == SHORT_PARTITION_LABEL))
                    .map(|(n, _)| (n, Vec::new()))
                    .collect();
                if !labelled.is_empty()
                    && let Err(e) = rm.replace_node_to_labels(&labelled).await
                {
                    failed.push(format!(
                        "taking the node label {SHORT_PARTITION_LABEL:?} off {} node(s): {e}",
                        labelled.len()
                    ));
                }
            }
            Err(e) => failed.push(format!("reading which nodes are labelled: {e}")),
        }
        if failed.is_empty() {
            match rm.remove_node_labels(&[SHORT_PARTITION_LABEL.into()]).await {
                Ok(()) => {
                    tracing::warn!(
                        label = SHORT_PARTITION_LABEL,
                        "node label removed: a queue whose default-node-label-expression is {SHORT_PARTITION_LABEL} refuses submissions until Preemptor runs again or that setting is removed"
                    );
                    failed.extend(self.disown());
                }
                Err(e) => failed.push(format!(
                    "removing the node label {SHORT_PARTITION_LABEL:?}: {e}"
                )),
            }
        }
        failed
    }
}

/// Every short queue can place containers in the short partition: it may access every
/// label, has capacity in this one, and asks for it by default (a request without a
/// label expression never lands on an exclusive partition's nodes).
pub fn queues_can_use_label(scheduler: &QueueInfo, short_queues: &[String]) -> Result<(), String> {
    if short_queues.is_empty() {
        return Err(
            "no queue is marked yarn.scheduler.capacity.<queue>.preemptor.job-class=short, so no job can use a short partition"
                .into(),
        );
    }
    let mut missing = Vec::new();
    for path in short_queues {
        let Some(q) = find(scheduler, path, None) else {
            missing.push(format!("{path}: not in the RM's queue tree"));
            continue;
        };
        let key = format!("yarn.scheduler.capacity.{path}");
        let l = SHORT_PARTITION_LABEL;
        // `*` rather than the label's name: the RM refuses to remove a label that a
        // queue names, and Preemptor removes its label on shutdown.
        if !q.node_labels.iter().any(|n| n == "*") {
            missing.push(format!("{key}.accessible-node-labels=*"));
        }
        let capacity = q
            .capacities
            .queue_capacities_by_partition
            .iter()
            .find(|p| p.partition_name == l)
            .map_or(0.0, |p| p.capacity);
        // NaN counts as none.
        if capacity.is_nan() || capacity <= 0.0 {
            missing.push(format!(
                "{key}.accessible-node-labels.{l}.capacity=100 (and the same on each parent)"
            ));
        }
        if q.default_node_label_expression.as_deref().map(str::trim) != Some(l) {
            missing.push(format!("{key}.default-node-label-expression={l}"));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the short queues cannot use the node label {:?}, so Dice's partition changes are held back; set in capacity-scheduler.xml, then yarn rmadmin -refreshQueues: {}",
        SHORT_PARTITION_LABEL,
        missing.join("; ")
    ))
}

fn find<'a>(q: &'a QueueInfo, path: &str, parent: Option<&str>) -> Option<&'a QueueInfo> {
    let own = super::live_queues::queue_path(q, parent);
    if own == path {
        return Some(q);
    }
    q.children().iter().find_map(|c| find(c, path, Some(&own)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yarn::dto::{PartitionQueueCapacities, QueueCapacities, Queues};

    fn leaf(name: &str, labels: &[&str], short_capacity: Option<f64>, default: &str) -> QueueInfo {
        let mut q = QueueInfo {
            queue_name: name.into(),
            queue_path: format!("root.{name}"),
            node_labels: labels.iter().map(|l| l.to_string()).collect(),
            default_node_label_expression: Some(default.into()),
            ..Default::default()
        };
        let mut parts = vec![PartitionQueueCapacities {
            partition_name: String::new(),
            capacity: 50.0,
            ..Default::default()
        }];
        if let Some(c) = short_capacity {
            parts.push(PartitionQueueCapacities {
                partition_name: "short".into(),
                capacity: c,
                ..Default::default()
            });
        }
        q.capacities = QueueCapacities {
            queue_capacities_by_partition: parts,
        };
        q
    }

    fn root(children: Vec<QueueInfo>) -> QueueInfo {
        QueueInfo {
            queue_name: "root".into(),
            queue_path: "root".into(),
            queues: Some(Queues { queue: children }),
            ..Default::default()
        }
    }

    #[test]
    fn a_short_queue_that_can_use_the_label_is_ready() {
        let tree = root(vec![
            leaf("short", &["*"], Some(100.0), "short"),
            leaf("long", &["*"], None, ""),
        ]);
        assert_eq!(queues_can_use_label(&tree, &["root.short".into()]), Ok(()));
        // Named, the RM would refuse to remove the label on shutdown.
        let named = root(vec![leaf("short", &["short"], Some(100.0), "short")]);
        let why = queues_can_use_label(&named, &["root.short".into()]).unwrap_err();
        assert!(why.contains("root.short.accessible-node-labels=*"), "{why}");
    }

    #[test]
    fn each_missing_setting_is_named_with_its_key() {
        let tree = root(vec![leaf("short", &[], None, "")]);
        let why = queues_can_use_label(&tree, &["root.short".into()]).unwrap_err();
        for key in [
            "yarn.scheduler.capacity.root.short.accessible-node-labels=*",
            "yarn.scheduler.capacity.root.short.accessible-node-labels.short.capacity=100",
            "yarn.scheduler.capacity.root.short.default-node-label-expression=short",
            "yarn rmadmin -refreshQueues",
        ] {
            assert!(why.contains(key), "{key} not in: {why}");
        }
        let zero = root(vec![leaf("short", &["*"], Some(0.0), "short")]);
        let why = queues_can_use_label(&zero, &["root.short".into()]).unwrap_err();
        assert!(why.contains("short.capacity=100"), "{why}");
        assert!(!why.contains("default-node-label-expression"), "{why}");
    }

    #[test]
    fn no_short_queue_or_an_unknown_one_is_not_ready() {
        let tree = root(vec![leaf("short", &["*"], Some(100.0), "short")]);
        let why = queues_can_use_label(&tree, &[]).unwrap_err();
        assert!(why.contains("preemptor.job-class=short"), "{why}");
        let why = queues_can_use_label(&tree, &["root.gone".into()]).unwrap_err();
        assert!(
            why.contains("root.gone: not in the RM's queue tree"),
            "{why}"
        );
    }
}
