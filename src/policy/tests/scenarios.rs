//! The papers' worked behaviour and exact plans on small clusters.

use super::*;
use crate::cluster::Partition;
use crate::cluster::builder::ClusterBuilder;
use crate::config::settings::DiceModel;
use crate::policy::dice;
use crate::policy::{ActionKind, QueueAccount};
use crate::resources::Resource;

const GB: u64 = 1024;

/// BIG-C's setup: a short queue guaranteed 95% and a long queue 5%; the long queue's
/// Spark job has taken the whole cluster with (8 GB, 8 vcores) containers, ids 2..=21.
fn bigc_cluster(requests: u32) -> ClusterView {
    ClusterBuilder::new()
        .nodes(10, Resource::new(16 * GB, 16))
        .queue("root.short", 95.0, 100.0, JobClass::Short)
        .queue("root.long", 5.0, 100.0, JobClass::Long)
        .app("root.long", "SPARK")
        .submitted(0)
        .progress(0.2)
        .containers(20, Resource::new(8 * GB, 8))
        .app("root.short", "MAPREDUCE")
        .submitted(100_000)
        .pending(requests, Resource::new(4 * GB, 2))
        .build()
        .unwrap()
}

fn account<'p>(plan: &'p Plan, queue: &str) -> &'p QueueAccount {
    plan.queues.iter().find(|q| q.queue == queue).unwrap()
}

fn targets(plan: &Plan) -> Vec<(&'static str, u64)> {
    plan.actions
        .iter()
        .filter_map(|a| Some((a.kind.verb(), a.kind.container()?.id)))
        .collect()
}

#[test]
fn bigc_short_job_gets_exactly_its_request_not_the_long_queues_overcapacity() {
    let view = bigc_cluster(2);
    let request = Amount::new(8 * GB, 4000);
    let mut s = settings(PolicyKind::Graceful);
    s.natural_termination_factor = 1.0;
    let mut state = PolicyState::new(s);
    let (plan, after) = tick(&view, &mut state, 120_000);
    // Algorithm 1: the long queue is 95% over its guarantee, yet only r_s is taken.
    let long = account(&plan, "root.long");
    assert_eq!(long.used - long.guaranteed, Amount::new(152 * GB, 152_000));
    assert_eq!(long.to_reclaim, request);
    assert_eq!(plan.reclaimed, request);
    // One graceful step of (4 GB, 2 vcores) on each of the two newest containers.
    assert_eq!(targets(&plan), [("shrink", 21), ("shrink", 20)]);
    for a in &plan.actions {
        if let ActionKind::Shrink { to, .. } = a.kind {
            assert_eq!(to, Limits::new(4 * GB, 6000));
            assert_eq!(a.for_queue.as_deref(), Some("root.short"));
            assert!(
                a.reason
                    .to_string()
                    .contains("queue root.short is <8192 MB, 4 vcores> short of its share"),
                "{}",
                a.reason
            );
            assert!(
                a.reason
                    .to_string()
                    .contains("has the longest remaining time (est. 480 s)"),
                "{}",
                a.reason
            );
        }
    }
    // The freed room is advertised on the two nodes where it was freed.
    let raised: Vec<Resource> = after
        .nodes()
        .iter()
        .filter(|n| n.advertised != n.capacity)
        .map(|n| n.advertised)
        .collect();
    assert_eq!(raised, [Resource::new(20 * GB, 18); 2]);
    let (again, _) = tick(&after, &mut state, 123_000);
    assert!(again.actions.is_empty(), "{:?}", again.actions);
}

#[test]
fn bigc_graceful_converges_to_exactly_the_request_under_damping() {
    let mut view = bigc_cluster(2);
    let mut state = PolicyState::new(settings(PolicyKind::Graceful));
    let mut total = Amount::ZERO;
    for round in 0..10u64 {
        let (plan, next) = tick(&view, &mut state, 120_000 + round * 3000);
        total += plan.reclaimed;
        view = next;
    }
    assert_eq!(total, Amount::new(8 * GB, 4000));
    // Round-robin: two different containers got one step each.
    assert_eq!(not_running(&view).len(), 2);
}

#[test]
fn bigc_immediate_suspends_the_fewest_newest_containers_covering_the_request() {
    let view = bigc_cluster(2);
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    let mut state = PolicyState::new(s.clone());
    let (plan, after) = tick(&view, &mut state, 120_000);
    assert_eq!(
        account(&plan, "root.long").to_reclaim,
        Amount::new(8 * GB, 4000)
    );
    // One suspension frees (8128 MB, 7.99 vcores): 64 MB short, so two are needed.
    assert_eq!(targets(&plan), [("suspend", 21), ("suspend", 20)]);
    for c in not_running(&after) {
        assert_eq!(c.current, s.suspend.footprint);
    }
}

/// A suspension that reaches `suspend.max-duration-ms` ends before a framework's own
/// timeout could give up on the container; while it rests, its queue's next newest
/// containers are taken instead, and after the rest it may be taken again.
#[test]
fn a_suspension_ends_at_the_max_duration_and_the_container_rests() {
    let view = bigc_cluster(2);
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    let (max, rest) = (s.suspend.max_duration_ms, s.suspend.rest_ms);
    let mut state = PolicyState::new(s);
    let t0 = 120_000;
    let (plan, view) = tick(&view, &mut state, t0);
    assert_eq!(targets(&plan), [("suspend", 21), ("suspend", 20)]);
    let (plan, view) = tick(&view, &mut state, t0 + max - 1);
    assert_eq!(targets(&plan), []);
    let (plan, view) = tick(&view, &mut state, t0 + max);
    assert_eq!(
        targets(&plan),
        [
            ("resume", 20),
            ("resume", 21),
            ("suspend", 19),
            ("suspend", 18)
        ]
    );
    assert!(
        plan.actions[0]
            .reason
            .to_string()
            .contains("max-duration-ms"),
        "{}",
        plan.actions[0].reason
    );
    // Rested, the first two are the newest again once the others reach the limit.
    let (plan, view) = tick(&view, &mut state, t0 + max + rest);
    assert_eq!(targets(&plan), []);
    let (plan, _) = tick(&view, &mut state, t0 + 2 * max);
    assert_eq!(
        targets(&plan),
        [
            ("resume", 18),
            ("resume", 19),
            ("suspend", 21),
            ("suspend", 20)
        ]
    );
}

/// The victim walk takes the same containers in the same order whether a job's
/// containers are listed oldest first (walked backwards, stopping early) or not
/// (sorted): over rounds that shrink, suspend or mark every task and then reach the
/// ApplicationMasters.
#[test]
fn victim_order_does_not_depend_on_how_containers_are_listed() {
    let view = ClusterBuilder::new()
        .nodes(4, Resource::new(16 * GB, 16))
        .queue("root.short", 95.0, 100.0, JobClass::Short)
        .queue("root.long", 5.0, 100.0, JobClass::Long)
        .app("root.long", "SPARK")
        .submitted(0)
        .progress(0.2)
        .am(Resource::new(GB, 1))
        .containers(6, Resource::new(4 * GB, 4))
        .app("root.long", "MAPREDUCE")
        .submitted(1000)
        .progress(0.5)
        .am(Resource::new(GB, 1))
        .containers(5, Resource::new(4 * GB, 2))
        .app("root.short", "TEZ")
        .submitted(100_000)
        .pending(40, Resource::new(4 * GB, 2))
        .build()
        .unwrap();
    let reversed = rebuild(&view, |_, cs| cs.reverse());
    let long_apps = [crate::cluster::AppIdx(0), crate::cluster::AppIdx(1)];
    assert!(long_apps.iter().all(|&a| view.containers_oldest_first(a)));
    assert!(
        long_apps
            .iter()
            .all(|&a| !reversed.containers_oldest_first(a))
    );
    for kind in [
        PolicyKind::Kill,
        PolicyKind::Immediate,
        PolicyKind::Graceful,
        PolicyKind::Adaptive,
    ] {
        let mut s = settings(kind);
        s.natural_termination_factor = 1.0;
        s.total_preemption_per_round = 1.0;
        let (mut a, mut b) = (view.clone(), reversed.clone());
        let (mut sa, mut sb) = (PolicyState::new(s.clone()), PolicyState::new(s.clone()));
        let mut acted = 0;
        for round in 0..12u64 {
            let now = 120_000 + round * s.monitoring_interval_ms;
            let (mut pa, na) = tick(&a, &mut sa, now);
            let (mut pb, nb) = tick(&b, &mut sb, now);
            // Where a container sits differs between the two listings; nothing else may.
            for act in pa.actions.iter_mut().chain(pb.actions.iter_mut()) {
                act.place = None;
            }
            assert_eq!(pa, pb, "{kind} round {round}");
            acted += pa.actions.len() + pa.pending_kills.len();
            (a, b) = (na, nb);
        }
        assert!(acted > 0, "{kind} took nothing");
        // The walk reached the ApplicationMasters too.
        let ams_taken = a
            .containers()
            .iter()
            .filter(|c| c.is_am && c.state != ContainerState::Running)
            .count();
        assert!(ams_taken > 0 || kind == PolicyKind::Graceful, "{kind}");
    }
}

#[test]
fn delayed_resumption_holds_a_container_until_its_dth_pick() {
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    assert_eq!(s.suspend.resume_delay, 3);
    let mut state = PolicyState::new(s);
    let (_, view) = tick(&bigc_cluster(2), &mut state, 120_000);
    let mut view = demand_falls(&view);
    for pick in 1..=3u64 {
        let (plan, next) = tick(&view, &mut state, 120_000 + pick * 3000);
        let resumed = targets(&plan)
            .into_iter()
            .filter(|t| t.0 == "resume")
            .count();
        if pick < 3 {
            assert_eq!(resumed, 0, "pick {pick} must not resume yet");
        } else {
            assert_eq!(resumed, 2);
            assert!(
                plan.actions[0]
                    .reason
                    .to_string()
                    .contains("picked for resumption 3 times")
            );
        }
        view = next;
    }
    assert!(not_running(&view).is_empty());
    assert!(view.nodes().iter().all(|n| n.advertised == n.capacity));
}

#[test]
fn without_delay_newest_suspended_resume_last() {
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    s.suspend.resume_delay = 0;
    let mut state = PolicyState::new(s);
    // Two rounds of demand suspend 21 (older suspension) then 20.
    let (_, view) = tick(&bigc_cluster(1), &mut state, 120_000);
    let view = rebuild(&view, |apps, _| apps[1].requests[0].num_containers = 3);
    let (p2, view) = tick(&view, &mut state, 123_000);
    assert_eq!(targets(&p2), [("suspend", 20)]);
    let (plan, _) = tick(&demand_falls(&view), &mut state, 126_000);
    assert_eq!(targets(&plan), [("resume", 21), ("resume", 20)]);
}

#[test]
fn kill_marks_then_kills_after_the_wait_unless_demand_goes_away() {
    let mut s = settings(PolicyKind::Kill);
    s.natural_termination_factor = 1.0;
    let wait = s.kill.max_wait_before_kill_ms;
    let mut state = PolicyState::new(s.clone());
    let view = bigc_cluster(2);
    let (p1, _) = tick(&view, &mut state, 0);
    assert!(p1.actions.is_empty());
    assert_eq!(p1.pending_kills.len(), 1);
    assert!(p1.pending_kills[0].new && p1.pending_kills[0].container.id == 21);
    let (p2, _) = tick(&view, &mut state, wait - 1);
    assert!(p2.actions.is_empty() && !p2.pending_kills[0].new);
    let (p3, after) = tick(&view, &mut state, wait);
    assert_eq!(targets(&p3), [("kill", 21)]);
    assert_eq!(not_running(&after).len(), 0);
    assert!(
        !after
            .containers()
            .iter()
            .find(|c| c.id.id == 21)
            .unwrap()
            .is_live()
    );

    let mut state = PolicyState::new(s);
    tick(&view, &mut state, 0);
    let (p, _) = tick(&demand_falls(&view), &mut state, wait);
    assert!(p.actions.is_empty() && p.pending_kills.is_empty());
}

#[test]
fn kill_marks_are_found_when_the_next_view_lists_containers_in_another_order() {
    let mut s = settings(PolicyKind::Kill);
    s.natural_termination_factor = 1.0;
    let wait = s.kill.max_wait_before_kill_ms;
    let view = bigc_cluster(6);
    let reversed = rebuild(&view, |_, containers| containers.reverse());
    let (mut same, mut moved) = (PolicyState::new(s.clone()), PolicyState::new(s));
    let first = decide(&view, &mut same, 0);
    assert_eq!(first, decide(&view, &mut moved, 0));
    assert!(first.pending_kills.len() > 1);
    // Marked containers now sit at other indices: the remembered ones do not match and
    // each is looked up by id instead; the plans must not differ.
    for now in [wait - 1, wait] {
        let (a, b) = (
            decide(&view, &mut same, now),
            decide(&reversed, &mut moved, now),
        );
        assert_eq!(a.pending_kills, b.pending_kills);
        assert_eq!(targets(&a), targets(&b));
        // Waiting the first tick, killing the marked ones the second.
        assert_eq!(targets(&a).is_empty(), now < wait);
    }
}

//        root
//       /    \
//      a      b
// a uses 90 of its 50 guaranteed; b uses 10 and asks for 10 more (units of 1 GB, 1 vcore).
const PCPP: &str = "root(=[100 100 100 10 0]);-a(=[50 100 90 0]){long};-b(=[50 100 10 10]){short}";

#[test]
fn proportional_capacity_scenario_marks_exactly_the_newest_containers() {
    let view = ClusterBuilder::from_notation(Resource::new(GB, 1), 10, PCPP)
        .unwrap()
        .build()
        .unwrap();
    let mut s = settings(PolicyKind::Kill);
    s.natural_termination_factor = 1.0;
    let plan = decide(&view, &mut PolicyState::new(s.clone()), 1000);
    let a = account(&plan, "root.a");
    assert_eq!(
        (a.ideal, a.over, a.to_reclaim),
        (
            Amount::new(80 * GB, 80_000),
            Amount::new(10 * GB, 10_000),
            Amount::new(10 * GB, 10_000)
        )
    );
    let marked: Vec<u64> = plan.pending_kills.iter().map(|k| k.container.id).collect();
    assert_eq!(marked, (82..=91).rev().collect::<Vec<u64>>());
    assert!(plan.pending_kills.iter().all(|k| &*k.queue == "root.a"));

    // Damping takes a fifth of the gap.
    s.natural_termination_factor = 0.2;
    let plan = decide(&view, &mut PolicyState::new(s.clone()), 1000);
    assert_eq!(plan.pending_kills.len(), 2);

    // The dead zone hides small imbalances; disable_preemption hides everything.
    s.max_ignored_over_capacity = 0.9;
    assert!(
        decide(&view, &mut PolicyState::new(s.clone()), 1000)
            .pending_kills
            .is_empty()
    );
    s.max_ignored_over_capacity = 0.1;
    let spec = PCPP.replace("{long}", "{long,disable_preemption}");
    let view = ClusterBuilder::from_notation(Resource::new(GB, 1), 10, &spec)
        .unwrap()
        .build()
        .unwrap();
    let plan = decide(&view, &mut PolicyState::new(s), 1000);
    assert!(plan.pending_kills.is_empty() && plan.actions.is_empty());
}

#[test]
fn adaptive_suspends_mapreduce_and_shrinks_spark() {
    let build = |mr_progress: f64, spark_progress: f64| {
        ClusterBuilder::new()
            .nodes(4, Resource::new(16 * GB, 16))
            .queue("root.short", 90.0, 100.0, JobClass::Short)
            .queue("root.long", 10.0, 100.0, JobClass::Long)
            .app("root.long", "MAPREDUCE")
            .progress(mr_progress)
            .containers(4, Resource::new(8 * GB, 8))
            .app("root.long", "SPARK")
            .progress(spark_progress)
            .containers(4, Resource::new(8 * GB, 8))
            .app("root.short", "TEZ")
            .pending(1, Resource::new(2 * GB, 2))
            .build()
            .unwrap()
    };
    let mut s = settings(PolicyKind::Adaptive);
    s.natural_termination_factor = 1.0;
    s.total_preemption_per_round = 1.0;
    let plan = decide(&build(0.1, 0.9), &mut PolicyState::new(s.clone()), 60_000);
    assert_eq!(plan.actions[0].policy, PolicyKind::Immediate);
    assert!(matches!(plan.actions[0].kind, ActionKind::Suspend { .. }));
    let plan = decide(&build(0.9, 0.1), &mut PolicyState::new(s), 60_000);
    assert_eq!(plan.actions[0].policy, PolicyKind::Graceful);
    assert!(matches!(plan.actions[0].kind, ActionKind::Shrink { .. }));
}

#[test]
fn graceful_freezes_a_swapping_container_and_takes_no_more_from_it() {
    let mut s = settings(PolicyKind::Graceful);
    s.natural_termination_factor = 1.0;
    let view = rebuild(&bigc_cluster(4), |_, cs| {
        let c = cs.iter_mut().find(|c| c.id.id == 21).unwrap();
        c.state = ContainerState::Shrunk;
        c.current = Limits::new(4 * GB, 6000);
        c.swapping = true;
    });
    let plan = decide(&view, &mut PolicyState::new(s.clone()), 120_000);
    let freeze = plan
        .actions
        .iter()
        .find(|a| a.kind.container().is_some_and(|c| c.id == 21))
        .unwrap();
    assert_eq!(
        freeze.kind,
        ActionKind::Shrink {
            container: freeze.kind.container().unwrap(),
            to: Limits::new(4 * GB, 10)
        }
    );
    assert!(freeze.reason.to_string().contains("swapping"));
    // Its 6 vcores count toward root.long's target of <12288 MB, 6 vcores>: taking
    // the whole target on top would be resumed on the next tick.
    let long = plan.queues.iter().find(|q| q.queue == "root.long").unwrap();
    assert_eq!(long.to_reclaim, Amount::new(12 * GB, 6000));
    assert!(plan.actions.iter().any(|a| {
        a.reason
            .to_string()
            .contains("reclaiming <12288 MB, 0 vcores> this round")
    }));
    assert_eq!(
        plan.actions
            .iter()
            .filter(|a| a.kind.container().is_some_and(|c| c.id == 21))
            .count(),
        1
    );
}

/// LAS on a one-node cluster: the round cap must allow a whole container.
fn las_settings() -> PolicySettings {
    let mut s = settings(PolicyKind::Las);
    s.total_preemption_per_round = 1.0;
    s
}

/// A one-vcore node under LAS with W = 50 s.
fn las_node(tasks: &[(u64, bool)]) -> ClusterView {
    let mut b = ClusterBuilder::new()
        .nodes(1, Resource::new(8 * GB, 1))
        .queue("root.q", 100.0, 100.0, JobClass::Long)
        .app("root.q", "MAPREDUCE");
    for &(attained, running) in tasks {
        b = b.containers_on(0, 1, Resource::new(GB, 1)).with_last(|c| {
            c.started_ms = 0;
            c.attained_service_ms = attained;
            if !running {
                c.state = ContainerState::Suspended;
                c.current = Limits::MIN_FOOTPRINT;
            }
        });
    }
    b.build().unwrap()
}

#[test]
fn las_swaps_on_quantum_expiry_or_restarts_the_timer() {
    let s = las_settings();
    let w = s.las.quantum_ms;
    let mut state = PolicyState::new(s);
    let view = las_node(&[(300_000, true), (100_000, false)]);
    let (plan, _) = tick(&view, &mut state, w - 1);
    assert_eq!(targets(&plan), []);
    // N + Q admission: 1 core + 4 extra slots.
    assert_eq!(
        plan.actions[0].kind,
        ActionKind::SetNodeCapacity {
            node: view.nodes()[0].id.clone(),
            advertised: Resource::new(40 * GB, 5)
        }
    );
    let (plan, after) = tick(&view, &mut state, w);
    assert_eq!(targets(&plan), [("suspend", 2), ("resume", 3)]);
    assert!(
        plan.actions[0]
            .reason
            .to_string()
            .contains("quantum W = 50 s expired"),
        "{}",
        plan.actions[0].reason
    );
    // The resumed one has attained less than the waiting one by its next expiry: the
    // timer restarts and nothing moves.
    let after = advance(&after, w);
    let (plan, _) = tick(&after, &mut state, 2 * w);
    assert_eq!(targets(&plan), []);
}

#[test]
fn las_arrival_without_a_free_core_suspends_the_most_attained() {
    let view = ClusterBuilder::new()
        .nodes(1, Resource::new(8 * GB, 2))
        .queue("root.q", 100.0, 100.0, JobClass::Long)
        .app("root.q", "MAPREDUCE")
        .containers(1, Resource::new(GB, 1))
        .with_last(|c| c.attained_service_ms = 100_000)
        .containers(1, Resource::new(GB, 1))
        .with_last(|c| c.attained_service_ms = 200_000)
        .containers_on(0, 1, Resource::new(GB, 1))
        .with_last(|c| c.started_ms = 10_000)
        .build()
        .unwrap();
    let plan = decide(&view, &mut PolicyState::new(las_settings()), 10_000);
    assert_eq!(targets(&plan), [("suspend", 3)]);
    assert!(plan.actions[0].reason.to_string().contains("no free core"));
}

#[test]
fn las_reads_attained_service_at_the_ticks_time() {
    // Container 3 was read at 0 ms but has run at one vcore since (as the simulator
    // reports it): by 300 s it has attained more than container 2. Container 4 arrives.
    let view = ClusterBuilder::new()
        .nodes(1, Resource::new(8 * GB, 2))
        .queue("root.q", 100.0, 100.0, JobClass::Long)
        .app("root.q", "MAPREDUCE")
        .containers_on(0, 1, Resource::new(GB, 1))
        .with_last(|c| c.attained_service_ms = 200_000)
        .containers_on(0, 1, Resource::new(GB, 1))
        .with_last(|c| c.attained_rate = 1.0)
        .containers_on(0, 1, Resource::new(GB, 1))
        .with_last(|c| c.started_ms = 300_000)
        .build()
        .unwrap();
    let plan = decide(&view, &mut PolicyState::new(las_settings()), 300_000);
    assert_eq!(targets(&plan), [("suspend", 3)]);
    assert!(
        plan.actions[0]
            .reason
            .to_string()
            .contains("most attained service (300 s)"),
        "{}",
        plan.actions[0].reason
    );
}

#[test]
fn las_steps_every_overloaded_or_waiting_node_in_node_order() {
    // Nodes past the first 64, on both sides of a word of the tick's node bitmap.
    let mut b = ClusterBuilder::new()
        .nodes(130, Resource::new(8 * GB, 1))
        .queue("root.q", 100.0, 100.0, JobClass::Long)
        .app("root.q", "MAPREDUCE");
    for n in [129, 3, 64] {
        b = b.containers_on(n, 2, Resource::new(GB, 1));
    }
    let view = b
        .containers_on(70, 1, Resource::new(GB, 1))
        .with_last(|c| {
            c.state = ContainerState::Suspended;
            c.current = Limits::MIN_FOOTPRINT;
        })
        .build()
        .unwrap();
    let plan = decide(&view, &mut PolicyState::new(las_settings()), 10_000);
    let nodes: Vec<(&str, u32)> = plan
        .actions
        .iter()
        .filter_map(|a| {
            let c = view.container_by_id(&a.kind.container()?)?;
            Some((a.kind.verb(), view.container(c).node.0))
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("suspend", 3),
            ("suspend", 64),
            ("resume", 70),
            ("suspend", 129)
        ]
    );
}

#[test]
fn las_starvation_guard_gives_a_thrice_preempted_container_two_quanta() {
    let s = las_settings();
    let w = s.las.quantum_ms;
    let mut state = PolicyState::new(s);
    let mut view = las_node(&[(0, true), (0, false)]);
    let mut swaps = Vec::new();
    let dt = 10_000;
    for k in 1..=56u64 {
        let now = k * dt;
        view = advance(&view, dt);
        let (plan, next) = tick(&view, &mut state, now);
        if targets(&plan).iter().any(|t| t.0 == "suspend") {
            swaps.push(now / 1000);
        }
        view = next;
    }
    // Every quantum W = 50 s the two swap; after three preemptions each one runs 2W.
    assert_eq!(w, 50_000);
    assert_eq!(swaps, [50, 100, 150, 200, 250, 300, 400, 500, 550]);
}

#[test]
fn dice_node_counts_per_model() {
    // 1000 nodes, MinShort 2% = 20, MaxShort = MinShort + 8% = 100.
    let mut s = settings(PolicyKind::Dice).dice;
    s.min_short_fraction = Some(0.02);
    let expect = [
        (DiceModel::Linear, [40, 60, 100]),
        (DiceModel::Square, [25, 40, 100]),
        (DiceModel::SquareRoot, [60, 77, 100]),
    ];
    for (model, sizes) in expect {
        s.sizing_model = model;
        s.preemption_model = model;
        for (r, size) in [0.25, 0.5, 1.0].into_iter().zip(sizes) {
            let mean = r * s.max_task_waiting_ms as f64;
            let d = dice::window_decision(mean, None, 1000, &s);
            assert_eq!(d.short_partition, size, "{model:?} r={r}");
            let p = dice::model_p(model, r);
            assert_eq!(
                d.preemption_requests,
                (p * size as f64).round() as usize,
                "{model:?} r={r}"
            );
        }
    }
    // The defaults: linear sizing, square preemption.
    let mut s = settings(PolicyKind::Dice).dice;
    s.min_short_fraction = Some(0.02);
    let d = dice::window_decision(15_000.0, None, 1000, &s);
    assert_eq!((d.short_partition, d.preemption_requests), (60, 15));
}

/// 200 general nodes full of long work; short tasks have waited `wait_ms`.
fn dice_cluster(wait_ms: u64, window_end: u64) -> ClusterView {
    ClusterBuilder::new()
        .nodes(200, Resource::new(8 * GB, 8))
        .queue("root.short", 50.0, 100.0, JobClass::Short)
        .queue("root.long", 50.0, 100.0, JobClass::Long)
        .app("root.long", "SPARK")
        .containers(400, Resource::new(4 * GB, 4))
        .app("root.short", "MAPREDUCE")
        .pending(10, Resource::new(GB, 1))
        .pending_since(window_end - wait_ms)
        .build()
        .unwrap()
}

#[test]
fn dice_window_sizes_partition_and_sends_preemption_requests() {
    for (r, model, short, requests) in [
        (0.25, DiceModel::Linear, 8, 2),
        (0.5, DiceModel::Linear, 12, 6),
        (1.0, DiceModel::Linear, 20, 20),
        (0.5, DiceModel::Square, 8, 2),
        (0.5, DiceModel::SquareRoot, 15, 11),
    ] {
        let mut s = settings(PolicyKind::Dice);
        s.dice.min_short_fraction = Some(0.02);
        s.dice.sizing_model = model;
        s.dice.preemption_model = model;
        s.total_preemption_per_round = 1.0;
        let window = s.dice.window_ms;
        let wait = (r * s.dice.max_task_waiting_ms as f64) as u64;
        let mut state = PolicyState::new(s.clone());
        let (first, _) = tick(&dice_cluster(wait, window), &mut state, 0);
        // Before any window closed the partition is MinShort.
        assert_eq!(
            first
                .actions
                .iter()
                .filter(|a| matches!(a.kind, ActionKind::SetNodePartition { .. }))
                .count(),
            4
        );
        let (plan, after) = tick(&dice_cluster(wait, window), &mut state, window);
        let report = plan.dice.clone().unwrap();
        assert_eq!(
            (report.short_partition, report.preemption_requests),
            (short, requests),
            "{model:?} r={r}"
        );
        assert_eq!(
            after
                .nodes()
                .iter()
                .filter(|n| n.partition == Partition::Short)
                .count(),
            short
        );
        // Every request lands on a general node running long work, with short work
        // waiting: each suspends exactly one long container.
        let suspended = targets(&plan).iter().filter(|t| t.0 == "suspend").count();
        assert_eq!((report.suspended, suspended), (requests, requests));
        for c in not_running(&after) {
            assert_eq!(after.node(c.node).partition, Partition::General);
        }
    }
}

#[test]
fn dice_resumes_after_the_timeout_once_room_is_free_and_suspends_at_most_twice() {
    let mut s = settings(PolicyKind::Dice);
    s.dice.min_short_fraction = Some(0.0);
    s.dice.max_short_extra_fraction = 0.0;
    s.dice.multiplier = 1.0;
    s.total_preemption_per_round = 1.0;
    let view = ClusterBuilder::new()
        .nodes(1, Resource::new(8 * GB, 8))
        .node_state(Resource::new(8 * GB, 8), Partition::Short)
        .node("general:8041", Resource::new(8 * GB, 8))
        .queue("root.short", 90.0, 100.0, JobClass::Short)
        .queue("root.long", 10.0, 100.0, JobClass::Long)
        .app("root.long", "SPARK")
        .containers_on(1, 2, Resource::new(4 * GB, 4))
        .app("root.short", "MAPREDUCE")
        .pending(1, Resource::new(GB, 1))
        .build()
        .unwrap();
    // Force one request per window: the short partition keeps one node.
    s.dice.min_short_fraction = Some(0.5);
    let window = s.dice.window_ms;
    let timeout = s.dice.suspension_timeout_ms;
    let mut state = PolicyState::new(s);
    tick(&view, &mut state, 0);
    let (p, v) = tick(&view, &mut state, window);
    assert_eq!(targets(&p), [("suspend", 3)]);
    // Still within the timeout: no resumption, and no second suspension on that node.
    let (p, _) = tick(&v, &mut state, window + timeout - 1);
    assert_eq!(targets(&p), []);
    let (p, v) = tick(&v, &mut state, window + timeout);
    assert_eq!(targets(&p), [("resume", 3)]);
    // Windows go on; each container is suspended at most twice, the newer one first:
    // once it is used up, the request falls to the older one.
    let mut v = v;
    let mut suspended = vec![3];
    for k in 1..20u64 {
        let now = window + timeout + k * window;
        let (p, next) = tick(&v, &mut state, now);
        suspended.extend(targets(&p).iter().filter(|t| t.0 == "suspend").map(|t| t.1));
        v = next;
    }
    assert_eq!(suspended, [3, 3, 2, 2]);
}

#[test]
fn dice_keeps_its_floor_node_for_when_short_work_comes() {
    // No MinShort configured: the one-node floor waits for the first short job, and
    // then takes the least loaded node of a cluster the long jobs already fill.
    let long_only = || {
        ClusterBuilder::new()
            .nodes(2, Resource::new(8 * GB, 8))
            .queue("root.short", 50.0, 100.0, JobClass::Short)
            .confined_to(Partition::Short)
            .queue("root.long", 50.0, 100.0, JobClass::Long)
            .app("root.long", "SPARK")
            .containers_on(0, 2, Resource::new(4 * GB, 4))
            .containers_on(1, 1, Resource::new(4 * GB, 4))
    };
    let mut s = settings(PolicyKind::Dice);
    s.dice.min_short_fraction = None;
    let window = s.dice.window_ms;
    let mut state = PolicyState::new(s);
    let partitions = |plan: &Plan| {
        plan.actions
            .iter()
            .filter_map(|a| match &a.kind {
                ActionKind::SetNodePartition { node, partition } => {
                    Some((node.clone(), *partition))
                }
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let view = long_only().build().unwrap();
    for now in [0, window, 2 * window] {
        let (plan, _) = tick(&view, &mut state, now);
        assert_eq!(partitions(&plan), [], "at {now} ms, before any short job");
    }
    let view = long_only()
        .app("root.short", "MAPREDUCE")
        .pending(1, Resource::new(GB, 1))
        .build()
        .unwrap();
    let (plan, _) = tick(&view, &mut state, 2 * window + 1000);
    assert_eq!(
        partitions(&plan),
        [(view.nodes()[1].id.clone(), Partition::Short)]
    );
}

#[test]
fn dice_requests_go_to_short_nodes_when_the_short_queue_is_confined_there() {
    // Node 0 was converted to the short partition with long work still on it; node 1 is
    // general. On YARN the short queue runs only in its exclusive label: room freed on
    // node 1 would not help it, room freed on node 0 does.
    let cluster = |confined: bool| {
        let b = ClusterBuilder::new()
            .nodes(1, Resource::new(8 * GB, 8))
            .node_state(Resource::new(8 * GB, 8), Partition::Short)
            .node("general:8041", Resource::new(8 * GB, 8))
            .queue("root.short", 90.0, 100.0, JobClass::Short);
        let b = if confined {
            b.confined_to(Partition::Short)
        } else {
            b
        };
        b.queue("root.long", 10.0, 100.0, JobClass::Long)
            .app("root.long", "SPARK")
            .containers_on(0, 2, Resource::new(4 * GB, 4))
            .containers_on(1, 2, Resource::new(4 * GB, 4))
            .app("root.short", "MAPREDUCE")
            .pending(1, Resource::new(GB, 1))
            .build()
            .unwrap()
    };
    for (confined, node) in [(true, 0), (false, 1)] {
        let mut s = settings(PolicyKind::Dice);
        s.dice.min_short_fraction = Some(0.5);
        s.dice.max_short_extra_fraction = 0.0;
        s.total_preemption_per_round = 1.0;
        let window = s.dice.window_ms;
        let mut state = PolicyState::new(s);
        let view = cluster(confined);
        tick(&view, &mut state, 0);
        let (plan, after) = tick(&view, &mut state, window);
        assert_eq!(
            plan.dice.as_ref().map(|d| d.suspended),
            Some(1),
            "{confined}"
        );
        let held = not_running(&after);
        assert_eq!(held.len(), 1, "{confined}");
        assert_eq!(held[0].node.get(), node, "confined: {confined}");
    }
}

#[test]
fn switching_to_none_resumes_everything_and_restores_nodes() {
    for kind in [
        PolicyKind::Immediate,
        PolicyKind::Graceful,
        PolicyKind::Las,
        PolicyKind::Dice,
    ] {
        let mut s = settings(kind);
        s.natural_termination_factor = 1.0;
        s.total_preemption_per_round = 1.0;
        s.dice.min_short_fraction = Some(0.1);
        let mut state = PolicyState::new(s.clone());
        // Node 0 holds a suspended container too big to fit beside its neighbour.
        let view = rebuild(&bigc_cluster(2), |_, cs| {
            cs[0].allocated = Resource::new(16 * GB, 16);
            cs[0].state = ContainerState::Suspended;
            cs[0].current = Limits::MIN_FOOTPRINT;
        });
        let (_, view) = tick(&view, &mut state, 120_000);
        let (_, view) = tick(&view, &mut state, 200_000);
        assert!(!not_running(&view).is_empty(), "{kind}");
        s.kind = PolicyKind::None;
        state.set_settings(s.clone());
        let (plan, view) = tick(&view, &mut state, 203_000);
        assert!(
            not_running(&view).is_empty(),
            "{kind}: {:?}",
            not_running(&view)
        );
        assert!(
            view.nodes()
                .iter()
                .all(|n| n.advertised == n.capacity && n.partition == Partition::General),
            "{kind}"
        );
        assert!(
            plan.actions
                .iter()
                .all(|a| a.policy == PolicyKind::None || a.kind.container().is_none())
        );
        let (plan, _) = tick(&view, &mut state, 206_000);
        assert!(plan.actions.is_empty());
    }
}

#[test]
fn observe_only_reports_and_remembers_nothing() {
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    let view = bigc_cluster(2);
    let acting = decide(&view, &mut PolicyState::new(s.clone()), 120_000);
    s.observe_only = true;
    let mut state = PolicyState::new(s);
    let plan = decide(&view, &mut state, 120_000);
    assert!(plan.observe_only && plan.actions.is_empty());
    assert_eq!(plan.observed, acting.actions);
    assert_eq!(state.remembered_containers(), 0);
}

#[test]
fn plans_serialize_for_the_controller() {
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    let plan = decide(&bigc_cluster(1), &mut PolicyState::new(s), 120_000);
    let json = serde_json::to_value(&plan).unwrap();
    let first = &json["actions"][0];
    assert_eq!(first["kind"]["type"], "suspend");
    assert_eq!(
        first["kind"]["container"],
        "container_1700000000000_0001_01_000021"
    );
    assert_eq!(first["kind"]["footprint"]["cpuMillis"], 10);
    assert_eq!(first["policy"], "immediate");
    assert_eq!(first["before"]["type"], "limits");
    assert_eq!(json["queues"][2]["queue"], "root.long");
    let line = plan.actions[0].to_string();
    assert!(line.starts_with("suspend container_1700000000000_0001_01_000021 <8192 MB, 8 vcores> -> <64 MB, 0.010 vcores> [immediate]: queue root.short"), "{line}");
}

#[test]
fn containers_that_vanish_are_forgotten() {
    let mut s = settings(PolicyKind::Immediate);
    s.natural_termination_factor = 1.0;
    let mut state = PolicyState::new(s);
    let (_, view) = tick(&bigc_cluster(2), &mut state, 120_000);
    assert_eq!(state.remembered_containers(), 2);
    let gone = rebuild(&view, |_, cs| {
        cs.retain(|c| c.state == ContainerState::Running)
    });
    tick(&gone, &mut state, 123_000);
    assert_eq!(state.remembered_containers(), 0);
}

#[test]
fn empty_and_odd_inputs_do_not_panic() {
    let mut s = settings(PolicyKind::Graceful);
    for kind in PolicyKind::ALL {
        s.kind = kind;
        s.natural_termination_factor = f64::NAN;
        s.total_preemption_per_round = f64::INFINITY;
        s.max_ignored_over_capacity = -1.0;
        s.las.quantum_ms = 0;
        s.las.starvation_quantum_multiplier = 0;
        s.dice.window_ms = 0;
        s.dice.multiplier = f64::NAN;
        s.dice.min_short_fraction = Some(f64::NAN);
        let mut state = PolicyState::new(s.clone());
        let plan = decide(&ClusterView::default(), &mut state, 0);
        assert!(plan.actions.is_empty());
        // Time going backwards and a view full of suspended containers.
        let view = rebuild(&bigc_cluster(2), |_, cs| {
            for c in cs.iter_mut() {
                c.state = ContainerState::Suspended;
                c.current = Limits::new(u64::MAX, u32::MAX);
            }
        });
        decide(&view, &mut state, 1_000_000);
        decide(&view, &mut state, 0);
    }
}
