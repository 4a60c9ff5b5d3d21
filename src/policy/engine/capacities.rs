//! Node capacities: what each node advertises to YARN once containers were reclaimed or
//! given back.

use super::*;

impl Tick<'_> {
    /// Advertise physical capacity plus what was reclaimed there (and N+Q admission
    /// under LAS); move the nodes in `partitions` (node, partition) where they are not.
    pub(super) fn node_capacities(&mut self, partitions: Vec<(usize, Partition)>) {
        let view = self.view;
        let off = self.s.kind == PolicyKind::None;
        let las_on = self.las_active;
        // A node the tick did not touch has nothing reclaimed, so it needs a change
        // only if it advertises other than its capacity (plus LAS's admission): without
        // LAS, a reshaped node; under LAS, a node of a (capacity, advertised) pair that
        // does not match, which a few pairs tell for all nodes.
        let admitted_everywhere = || {
            view.node_shapes()
                .all(|(capacity, advertised)| advertised == las::admission(capacity, &self.s.las))
        };
        // Touched nodes come in the order first touched, thousands under LAS: only the
        // few that change are sorted into node order. Once every node advertises N+Q, a
        // node changes only if it has reclaimed room to advertise.
        let all = 0..view.nodes().len();
        let touched = self.ledger.touched_nodes().iter().map(|&n| n as usize);
        let advertising = self.ledger.advertising_nodes().iter().map(|&n| n as usize);
        let candidates: Box<dyn Iterator<Item = usize>> = if las_on && !admitted_everywhere() {
            Box::new(all)
        } else if las_on {
            Box::new(advertising)
        } else {
            Box::new(view.reshaped_nodes().iter().map(|n| n.get()).chain(touched))
        };
        // Nodes mostly share a few shapes: admission is worked out once per shape run.
        let mut admitted: Option<(Resource, Resource)> = None;
        let mut changes: Vec<(usize, Resource, Resource)> = Vec::new();
        for n in candidates {
            let facts = &view.node_facts()[n];
            let capacity = facts.capacity;
            let reclaimed = if off {
                Resource::ZERO
            } else {
                self.ledger.node_reclaimed(n).to_resource()
            };
            let extra = match admitted {
                _ if !las_on => Resource::ZERO,
                Some((cap, extra)) if cap == capacity => extra,
                _ => {
                    let extra = las::admission(capacity, &self.s.las) - capacity;
                    admitted = Some((capacity, extra));
                    extra
                }
            };
            if capacity + reclaimed + extra != facts.advertised {
                changes.push((n, reclaimed, extra));
            }
        }
        changes.sort_unstable_by_key(|&(n, ..)| n);
        changes.dedup_by_key(|&mut (n, ..)| n);
        for (n, reclaimed, extra) in changes {
            let facts = &view.node_facts()[n];
            let (capacity, before) = (facts.capacity, facts.advertised);
            let advertised = capacity + reclaimed + extra;
            let node = &view.nodes()[n];
            let reason = Reason::NodeCapacity {
                physical: capacity,
                reclaimed,
                las_slots: extra
                    .any_positive()
                    .then_some((capacity.vcores, self.s.las.extra_slots)),
            };
            self.node_action(
                n,
                ActionKind::SetNodeCapacity {
                    node: node.id.clone(),
                    advertised,
                },
                Before::Advertised(before),
                reason,
            );
        }
        for (n, p) in partitions {
            let node = &view.nodes()[n];
            if node.partition == p {
                continue;
            }
            let reason = match p {
                Partition::Short => Reason::ToShortPartition,
                Partition::General => Reason::ToGeneralPartition,
            };
            self.node_action(
                n,
                ActionKind::SetNodePartition {
                    node: node.id.clone(),
                    partition: p,
                },
                Before::Partition(node.partition),
                reason,
            );
        }
    }

    pub(super) fn node_action(
        &mut self,
        n: usize,
        kind: ActionKind,
        before: Before,
        reason: Reason,
    ) {
        let policy = match kind {
            ActionKind::SetNodePartition { .. } => PolicyKind::Dice,
            _ => self.s.kind,
        };
        self.actions.push(Action {
            kind,
            policy,
            reason,
            application: None,
            queue: None,
            node: Some(self.view.nodes()[n].id.clone()),
            for_queue: None,
            before,
            place: None,
        });
    }
}
