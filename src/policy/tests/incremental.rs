//! A view changed in place between ticks (as the simulator keeps one) lets LAS redo
//! only the nodes its journal lists. Deciding on it must give exactly the plans that
//! deciding on a copy does, where LAS counts everything anew each tick.

use super::settings;
use crate::cluster::builder::ClusterBuilder;
use crate::cluster::{
    ApplicationAttemptId, ClusterView, Container, ContainerId, ContainerIdx, ContainerState,
    JobClass, Millis, NodeIdx, PolicyKind, QueueIdx,
};
use crate::policy::{ActionKind, Plan, PolicyState, decide};
use crate::resources::{Limits, Resource};

const GB: u64 = 1024;

/// xorshift: the walk is the same on every run.
struct Walk(u64);

impl Walk {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Carry `plan` out in place, as the simulator's agents would.
fn carry_out(v: &mut ClusterView, plan: &Plan, now: Millis) {
    for a in &plan.actions {
        let by_id = |v: &ClusterView, id: &ContainerId| v.container_by_id(id);
        let node_of = |v: &ClusterView, id: &crate::cluster::NodeId| {
            v.nodes()
                .iter()
                .position(|n| n.id == *id)
                .map(|n| NodeIdx(n as u32))
        };
        match &a.kind {
            ActionKind::Suspend {
                container,
                footprint,
            } => {
                let ci = by_id(v, container).expect("acts on a listed container");
                set(v, ci, *footprint, ContainerState::Suspended, now);
            }
            ActionKind::Shrink { container, to } => {
                let ci = by_id(v, container).expect("acts on a listed container");
                set(v, ci, *to, ContainerState::Shrunk, now);
            }
            ActionKind::Resume { container, to } => {
                let ci = by_id(v, container).expect("acts on a listed container");
                let whole = *to == Limits::from(v.container(ci).allocated);
                let state = if whole {
                    ContainerState::Running
                } else {
                    ContainerState::Shrunk
                };
                set(v, ci, *to, state, now);
            }
            ActionKind::Kill { container } => {
                let ci = by_id(v, container).expect("acts on a listed container");
                let limits = v.container(ci).current;
                set(v, ci, limits, ContainerState::Killed, now);
            }
            ActionKind::SetNodeCapacity { node, advertised } => {
                let n = node_of(v, node).expect("acts on a listed node");
                let partition = v.nodes()[n.get()].partition;
                v.set_node(n, *advertised, partition).unwrap();
            }
            ActionKind::SetNodePartition { node, partition } => {
                let n = node_of(v, node).expect("acts on a listed node");
                let advertised = v.nodes()[n.get()].advertised;
                v.set_node(n, advertised, *partition).unwrap();
            }
        }
    }
}

/// New limits and state; attained service grows only while it runs.
fn set(v: &mut ClusterView, ci: ContainerIdx, limits: Limits, state: ContainerState, now: Millis) {
    let c = v.container(ci);
    let attained = c.attained_service_at(now);
    v.set_container_limits(ci, limits, state, false).unwrap();
    let rate = if state == ContainerState::Running {
        c_rate(v.container(ci))
    } else {
        0.0
    };
    v.set_attained_service(ci, attained, now, rate).unwrap();
}

fn c_rate(c: &Container) -> f64 {
    f64::from(c.allocated.vcores)
}

#[test]
fn las_on_a_view_changed_in_place_decides_as_on_a_copy() {
    // 64 four-core nodes, most of them left alone by the walk on most ticks (so that
    // timers, not changes, bring LAS back to them); queues a and b under LAS, c under immediate, so that LAS's
    // counts and the walk over other policies' suspended containers both run.
    let mut b = ClusterBuilder::new()
        .nodes(64, Resource::new(16 * GB, 4))
        .queue("root.a", 40.0, 100.0, JobClass::Short)
        .queue("root.b", 40.0, 100.0, JobClass::Long)
        .queue("root.c", 20.0, 100.0, JobClass::Long)
        .queue_policy(PolicyKind::Immediate);
    for (q, kind) in [
        ("root.a", "SPARK"),
        ("root.b", "MAPREDUCE"),
        ("root.c", "MAPREDUCE"),
    ] {
        b = b.app(q, kind).pending(4, Resource::new(2 * GB, 1));
        for n in 0..64 {
            b = b.containers_on(n, 1 + n % 3, Resource::new(2 * GB, 1));
        }
    }
    let mut v = b.build().unwrap();
    let mut s = settings(PolicyKind::Las);
    s.total_preemption_per_round = 1.0;
    s.las.quantum_ms = 20_000;
    let (mut in_place, mut anew) = (PolicyState::new(s.clone()), PolicyState::new(s));
    let mut walk = Walk(0x2545_f491_4f6c_dd1d);
    let mut numbers = 1000;
    let mut now: Millis = 1_000;
    let (mut las_moves, mut others_waiting) = (0, 0);
    for tick in 0..400 {
        // As the simulator's view builder does, except now and then, when the policy
        // must notice that it missed a tick's changes.
        if tick % 37 != 0 {
            v.clear_journals();
        }
        for _ in 0..walk.next(3) {
            match walk.next(5) {
                0 | 1 => {
                    let a = walk.next(v.apps().len() as u64) as usize;
                    let app = &v.apps()[a];
                    let Some(&like) = app.containers.first() else {
                        continue;
                    };
                    numbers += 1;
                    let id = ContainerId::new(ApplicationAttemptId::new(app.id, 1), 0, numbers);
                    let mut c = v.container(like).clone();
                    c.id = id;
                    c.node = NodeIdx(walk.next(64) as u32);
                    c.state = ContainerState::Running;
                    c.current = Limits::from(c.allocated);
                    c.started_ms = now;
                    c.attained_service_ms = walk.next(60_000);
                    c.attained_as_of_ms = now;
                    c.attained_rate = c_rate(&c);
                    v.add_container(c).unwrap();
                }
                2 if v.containers().len() > 8 => {
                    // A task finishes (possibly while suspended: its job was killed).
                    let ci = ContainerIdx(walk.next(v.containers().len() as u64) as u32);
                    v.remove_container(ci).unwrap();
                }
                3 => {
                    // An application moves queue, here and there into another policy.
                    let a = walk.next(v.apps().len() as u64) as u32;
                    let app = &v.apps()[a as usize];
                    let (progress, requests) = (app.progress, app.requests.clone());
                    let q = QueueIdx(1 + walk.next(3) as u32);
                    v.set_app_demand(crate::cluster::AppIdx(a), q, progress, &requests, None)
                        .unwrap();
                }
                _ => {
                    // The agent lowered or restored a container on its own.
                    let ci = ContainerIdx(walk.next(v.containers().len() as u64) as u32);
                    let c = v.container(ci);
                    if c.is_live() {
                        let (limits, state) = if c.state == ContainerState::Running {
                            (Limits::MIN_FOOTPRINT, ContainerState::Suspended)
                        } else {
                            (Limits::from(c.allocated), ContainerState::Running)
                        };
                        set(&mut v, ci, limits, state, now);
                    }
                }
            }
        }
        if tick % 53 == 52 {
            // A tick the policy does not see; the next one must start over.
            now += 3_000;
            continue;
        }
        let plan = decide(&v, &mut in_place, now);
        let copy = v.clone();
        let expected = decide(&copy, &mut anew, now);
        assert_eq!(plan, expected, "tick {tick} at {now} ms");
        las_moves += (plan.actions.iter())
            .filter(|a| a.kind.container().is_some() && a.policy == PolicyKind::Las)
            .count();
        let immediate = |w: &crate::cluster::BelowAllocation| v.app(w.app).queue == QueueIdx(3);
        if v.below_allocation_facts().iter().any(immediate) {
            others_waiting += 1;
        }
        carry_out(&mut v, &plan, now);
        assert!(v.derived_agree());
        now += 3_000;
    }
    // Not a walk where nothing happens.
    assert!(las_moves > 100, "{las_moves} LAS moves");
    assert!(
        others_waiting > 50,
        "{others_waiting} ticks with others suspended"
    );
}
