//! Property tests over randomly generated clusters: the invariants of docs/algorithms.md,
//! checked for every policy.
//!
//! 1. Never takes from a queue below its guarantee, or with preemption disabled.
//! 2. Never reclaims more per round than the round cap, and nothing in observe_only.
//! 3. Never leaves a container below the minimal footprint; every suspended container
//!    is resumed eventually, and all are resumed when the policy is switched off.
//! 4. Plans are idempotent: applying a plan twice changes nothing the second time, and
//!    deciding again on the result neither repeats nor reverses anything.
//! 5. Same view + same seed -> same plan.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::cluster::builder::ClusterBuilder;
use crate::cluster::{ContainerId, Partition};
use crate::policy::{Action, ActionKind};
use crate::resources::Resource;

const SIZES: [(u64, u32); 5] = [(1024, 1), (2048, 1), (4096, 2), (8192, 4), (3072, 3)];
const TYPES: [&str; 3] = ["MAPREDUCE", "SPARK", "TEZ"];

#[derive(Clone, Debug)]
struct ContainerRecipe {
    node: usize,
    size: usize,
    /// 0..=3 running, 4 suspended, 5 shrunk.
    state: u8,
    attained_ms: u64,
    swapping: bool,
    /// No agent reports it (a running container outside Docker): never acted on.
    unmanaged: bool,
    /// CPU time after which it finishes (eventual-resumption runs).
    work_ms: u64,
}

#[derive(Clone, Debug)]
struct AppRecipe {
    queue: usize,
    kind: usize,
    progress: f64,
    submitted_ms: u64,
    am: bool,
    containers: Vec<ContainerRecipe>,
    pending: (u32, usize),
}

#[derive(Clone, Debug)]
struct Recipe {
    /// (GB, vcores) per node.
    nodes: Vec<(u64, u32)>,
    /// (weight, extra maximum in tens of percent, preemption disabled, short).
    queues: Vec<(u32, u32, bool, bool)>,
    nested: bool,
    /// Place containers beyond a node's physical capacity, as LAS admission does.
    overcommit: bool,
    apps: Vec<AppRecipe>,
}

#[derive(Clone, Debug)]
struct Knobs {
    ntf: f64,
    per_round: f64,
    dead_zone: f64,
    resume_delay: u32,
    kill_wait: u64,
    seed: u64,
}

fn container_recipe() -> impl Strategy<Value = ContainerRecipe> {
    (
        0usize..8,
        0usize..SIZES.len(),
        0u8..6,
        0u64..200_000,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        10_000u64..150_000,
    )
        .prop_map(
            |(node, size, state, attained_ms, swapping, unmanaged, work_ms)| ContainerRecipe {
                node,
                size,
                state,
                attained_ms,
                swapping,
                unmanaged,
                work_ms,
            },
        )
}

fn app_recipe() -> impl Strategy<Value = AppRecipe> {
    (
        0usize..8,
        0usize..TYPES.len(),
        0.0f64..=1.0,
        0u64..500_000,
        any::<bool>(),
        prop::collection::vec(container_recipe(), 0..=8),
        (0u32..=6, 0usize..SIZES.len()),
    )
        .prop_map(
            |(queue, kind, progress, submitted_ms, am, containers, pending)| AppRecipe {
                queue,
                kind,
                progress,
                submitted_ms,
                am,
                containers,
                pending,
            },
        )
}

fn recipe() -> impl Strategy<Value = Recipe> {
    (
        prop::collection::vec((4u64..=32, 2u32..=16), 1..=5),
        prop::collection::vec(
            (
                1u32..=10,
                0u32..=10,
                prop::bool::weighted(0.2),
                any::<bool>(),
            ),
            1..=4,
        ),
        any::<bool>(),
        prop::bool::weighted(0.3),
        prop::collection::vec(app_recipe(), 0..=6),
    )
        .prop_map(|(nodes, queues, nested, overcommit, apps)| Recipe {
            nodes,
            queues,
            nested,
            overcommit,
            apps,
        })
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        prop::sample::select(vec![0.2, 1.0]),
        prop::sample::select(vec![0.1, 0.5, 1.0]),
        prop::sample::select(vec![0.0, 0.1]),
        0u32..=3,
        prop::sample::select(vec![0u64, 15_000]),
        any::<u64>(),
    )
        .prop_map(
            |(ntf, per_round, dead_zone, resume_delay, kill_wait, seed)| Knobs {
                ntf,
                per_round,
                dead_zone,
                resume_delay,
                kill_wait,
                seed,
            },
        )
}

impl Knobs {
    fn settings(&self, kind: PolicyKind) -> PolicySettings {
        let mut s = settings(kind);
        s.natural_termination_factor = self.ntf;
        s.total_preemption_per_round = self.per_round;
        s.max_ignored_over_capacity = self.dead_zone;
        s.suspend.resume_delay = self.resume_delay;
        s.kill.max_wait_before_kill_ms = self.kill_wait;
        s.seed = self.seed;
        s.dice.min_short_fraction = Some(0.25);
        s.las.quantum_ms = 20_000;
        s
    }
}

const T0: Millis = 1_000_000;

impl Recipe {
    /// The view, and each container's work (aligned with `view.containers`).
    fn build(&self) -> (ClusterView, Vec<u64>) {
        let mut b = ClusterBuilder::new();
        let mut room = Vec::new();
        for (gb, vc) in &self.nodes {
            let cap = Resource::new(gb * 1024, *vc);
            b = b.nodes(1, cap);
            room.push(cap);
        }
        let total = Resource::sum(room.iter());
        let weights: u32 = self.queues.iter().map(|q| q.0).sum();
        let leaves = self.queues.len();
        let split = if self.nested && leaves >= 2 {
            leaves / 2
        } else {
            leaves
        };
        let pct = |i: usize| self.queues[i].0 as f64 / weights as f64;
        let parent_pct: f64 = (split..leaves).map(pct).sum();
        if split < leaves {
            b = b.queue_absolute("root.p", total.scale(parent_pct), total, None);
        }
        let mut paths = Vec::new();
        let mut headroom = Vec::new();
        for (i, &(_, extra, disabled, short)) in self.queues.iter().enumerate() {
            let path = if i < split {
                format!("root.q{i}")
            } else {
                format!("root.p.q{i}")
            };
            let max = (pct(i) + extra as f64 / 10.0).min(1.0);
            let class = if short {
                JobClass::Short
            } else {
                JobClass::Long
            };
            b = b.queue_absolute(&path, total.scale(pct(i)), total.scale(max), Some(class));
            headroom.push(total.scale(max));
            if disabled {
                b = b.preemption_disabled();
            }
            paths.push(path);
        }
        let mut work = Vec::new();
        for a in &self.apps {
            b = b
                .app(&paths[a.queue % leaves], TYPES[a.kind])
                .progress(a.progress)
                .submitted(T0 - a.submitted_ms);
            for (k, c) in a.containers.iter().enumerate() {
                let n = c.node % room.len();
                let (mem, vc) = SIZES[c.size];
                let size = Resource::new(mem, vc);
                let node_cap = Resource::new(self.nodes[n].0 * 1024, self.nodes[n].1);
                // YARN never places beyond a node or a queue's maximum-capacity.
                let q = a.queue % leaves;
                if !size.fits_in(&node_cap)
                    || !size.fits_in(&headroom[q])
                    || (!self.overcommit && !size.fits_in(&room[n]))
                {
                    continue;
                }
                room[n] -= size;
                headroom[q] -= size;
                let footprint = Limits::MIN_FOOTPRINT;
                let is_am = a.am && k == 0;
                b = b.containers_on(n, 1, size).with_last(|ct| {
                    ct.attained_service_ms = c.attained_ms;
                    ct.is_am = is_am;
                    match c.state {
                        4 => {
                            ct.state = ContainerState::Suspended;
                            ct.current = footprint.component_min(Limits::from(size));
                        }
                        5 => {
                            ct.state = ContainerState::Shrunk;
                            ct.current = Limits::new(mem / 2, vc * 500).component_max(footprint);
                            ct.swapping = c.swapping;
                        }
                        // Only reported containers can be seen suspended or shrunk.
                        _ => ct.managed = !c.unmanaged,
                    }
                });
                work.push(c.attained_ms + c.work_ms);
            }
            if a.pending.0 > 0 {
                let (mem, vc) = SIZES[a.pending.1];
                b = b.pending(a.pending.0, Resource::new(mem, vc));
            }
        }
        (b.build().expect("recipes build consistent views"), work)
    }
}

/// YARN's accounting at `limits`: CPU cut to the footprint holds no vcores.
fn held_at(c: &Container, limits: Limits, s: &PolicySettings) -> Amount {
    let (alloc, floor) = (Limits::from(c.allocated), footprint_of(c, s));
    let limits = limits.component_min(alloc);
    let at_floor = limits.cpu_millis < alloc.cpu_millis && limits.cpu_millis <= floor.cpu_millis;
    Amount::new(
        limits.memory_mb,
        if at_floor {
            0
        } else {
            limits.cpu_millis.into()
        },
    )
}

fn held(c: &Container, s: &PolicySettings) -> Amount {
    if c.state == ContainerState::Running {
        Amount::from(c.allocated)
    } else {
        held_at(c, c.current, s)
    }
}

/// What each queue (every level) holds in `view`, minus containers marked for killing.
fn queue_held(
    view: &ClusterView,
    marked: &HashSet<ContainerId>,
    s: &PolicySettings,
) -> Vec<Amount> {
    let mut h = vec![Amount::ZERO; view.queues().len()];
    for c in view
        .containers()
        .iter()
        .filter(|c| c.is_live() && !marked.contains(&c.id))
    {
        let mut q = Some(view.app(c.app).queue);
        while let Some(i) = q {
            h[i.get()] += held(c, s);
            q = view.queue(i).parent;
        }
    }
    h
}

fn subtree_contains(view: &ClusterView, root: usize, q: usize) -> bool {
    let mut cur = Some(q);
    while let Some(i) = cur {
        if i == root {
            return true;
        }
        cur = view.queues()[i].parent.map(|p| p.get());
    }
    false
}

/// What one action takes from its container, if it takes anything.
fn taken(
    view: &ClusterView,
    a: &Action,
    marked_before: &HashSet<ContainerId>,
    s: &PolicySettings,
) -> Option<(usize, Amount)> {
    let id = a.kind.container()?;
    let c = view.container(view.container_by_id(&id)?);
    let amount = match a.kind {
        ActionKind::Suspend { footprint, .. } => held(c, s) - held_at(c, footprint, s),
        ActionKind::Shrink { to, .. } => held(c, s) - held_at(c, to, s),
        ActionKind::Kill { .. } if !marked_before.contains(&id) => held(c, s),
        _ => return None,
    };
    Some((c.app.get(), amount))
}

/// Invariants 1, 2 and the footprint half of 3 on one plan.
fn check_plan(
    view: &ClusterView,
    plan: &Plan,
    s: &PolicySettings,
    marked_before: &HashSet<ContainerId>,
) -> Result<(), TestCaseError> {
    let after = apply(view, plan).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut seen = HashSet::new();
    for a in &plan.actions {
        let Some(id) = a.kind.container() else {
            continue;
        };
        prop_assert!(seen.insert(id), "two actions on {id}");
        let c = view.container(
            view.container_by_id(&id)
                .ok_or_else(|| TestCaseError::fail("unknown container"))?,
        );
        prop_assert!(c.managed, "{a} on a container no agent manages");
        let floor = footprint_of(c, s);
        match a.kind {
            ActionKind::Suspend { footprint, .. } => prop_assert_eq!(footprint, floor),
            ActionKind::Shrink { to, .. } => {
                prop_assert!(floor.fits_in(&to), "{a} goes below the footprint");
                prop_assert!(to.fits_in(&c.current), "{a} grows");
            }
            ActionKind::Resume { to, .. } => {
                prop_assert!(
                    to.fits_in(&Limits::from(c.allocated)),
                    "{a} beyond the allocation"
                );
                prop_assert!(c.current.fits_in(&to), "{a} lowers");
            }
            _ => {}
        }
    }
    // New marks and every other taking action, with where the room goes.
    let mut takes: Vec<(usize, Amount, Option<usize>)> = Vec::new();
    for a in &plan.actions {
        if let Some((app, amount)) = taken(view, a, marked_before, s) {
            let to = a
                .for_queue
                .as_deref()
                .and_then(|p| view.queue_by_path(p))
                .map(|q| q.get());
            takes.push((app, amount, to));
        }
    }
    for k in plan.pending_kills.iter().filter(|k| k.new) {
        let c = view.container(
            view.container_by_id(&k.container)
                .ok_or_else(|| TestCaseError::fail("unknown container"))?,
        );
        prop_assert!(c.managed, "marked {} that no agent manages", k.container);
        let to = k
            .for_queue
            .as_deref()
            .and_then(|p| view.queue_by_path(p))
            .map(|q| q.get());
        takes.push((c.app.get(), held(c, s), to));
    }
    let total = Amount::sum(takes.iter().map(|t| t.1));
    prop_assert_eq!(total, plan.reclaimed);
    prop_assert!(
        total.fits_in(&plan.round_cap),
        "reclaimed {} beyond the round cap {}",
        total,
        plan.round_cap
    );
    let marked: HashSet<ContainerId> = plan.pending_kills.iter().map(|k| k.container).collect();
    let held_after = queue_held(&after, &marked, s);
    for (q, queue) in view.queues().iter().enumerate() {
        let (mut external, mut internal) = (Amount::ZERO, Amount::ZERO);
        for &(app, amount, to) in &takes {
            let leaf = view.apps()[app].queue.get();
            if !subtree_contains(view, q, leaf) {
                continue;
            }
            prop_assert!(
                !view.queues()[leaf].preemption_disabled,
                "took {} from preemption-disabled {}",
                amount,
                view.queues()[leaf].path
            );
            match to {
                Some(b) if subtree_contains(view, q, b) => internal += amount,
                None if queue.parent.is_none() => internal += amount,
                _ => external += amount,
            }
        }
        let kept = held_after[q] + internal;
        let g = Amount::from(queue.guaranteed);
        prop_assert!(
            (external.memory_mb == 0 || kept.memory_mb >= g.memory_mb)
                && (external.vcores_milli == 0 || kept.vcores_milli >= g.vcores_milli),
            "{} gave away {} and kept {} of its guarantee {}",
            queue.path,
            external,
            kept,
            g
        );
    }
    Ok(())
}

/// Invariant 4: a plan applied twice changes nothing more, and deciding again on the
/// result (same time) neither repeats nor reverses any of its actions.
fn check_idempotent(
    view: &ClusterView,
    plan: &Plan,
    state: &PolicyState,
    now: Millis,
    settled: bool,
) -> Result<(), TestCaseError> {
    let once = apply(view, plan).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let twice = apply(&once, plan).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&twice, &once);
    let again = decide(&once, &mut state.clone(), now);
    let acted: HashSet<ContainerId> = plan
        .actions
        .iter()
        .filter_map(|a| a.kind.container())
        .collect();
    let container_actions = again.actions.iter().any(|a| a.kind.container().is_some());
    for a in &again.actions {
        match a.kind.container() {
            Some(id) => prop_assert!(
                !acted.contains(&id),
                "acted on {id} again: {a}\nafter {:#?}",
                plan.actions
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
            ),
            // Node targets follow containers: with no container changing, none moves.
            None => prop_assert!(container_actions, "node action again: {a}"),
        }
    }
    if settled {
        prop_assert!(
            again.reclaimed.is_zero(),
            "took {} more for the same demand: {:#?} after {:#?}",
            again.reclaimed,
            again
                .actions
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>(),
            plan.actions
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// 256 cases per property unless PROPTEST_CASES says otherwise.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn waiting_ids(view: &ClusterView) -> HashSet<ContainerId> {
    not_running(view).into_iter().map(|c| c.id).collect()
}

/// The properties, each over one generated cluster and its knobs; run by the two
/// blocks below.
mod properties {
    use super::*;

    pub(super) fn every_policy_keeps_the_invariants(
        recipe: Recipe,
        knobs: Knobs,
    ) -> Result<(), TestCaseError> {
        let (view0, _) = recipe.build();
        for kind in PolicyKind::ALL {
            let s = knobs.settings(kind);
            let mut state = PolicyState::new(s.clone());
            let mut view = view0.clone();
            let mut marked = HashSet::new();
            // A few ticks, one of them closing a Dice window and expiring LAS quanta.
            for now in [T0, T0 + 3_000, T0 + 63_000, T0 + 66_000] {
                let mut twin = state.clone();
                let plan = decide(&view, &mut state, now);
                let again = decide(&view, &mut twin, now);
                prop_assert_eq!(&again, &plan, "not deterministic under {}", kind);
                let tag = |e: TestCaseError| TestCaseError::fail(format!("{kind} at {now}: {e}"));
                check_plan(&view, &plan, &s, &marked).map_err(tag)?;
                // With no damping and no round cap, a plan that met every queue's target
                // leaves nothing to take for the same demand. (A kill changes the demand:
                // `apply` drops the killed work, which YARN would request again; on an
                // over-committed node reclaimed room is not free room.)
                let settled = s.natural_termination_factor == 1.0
                    && !recipe.overcommit
                    && !plan
                        .actions
                        .iter()
                        .any(|a| matches!(a.kind, ActionKind::Kill { .. }))
                    && s.total_preemption_per_round == 1.0
                    && plan
                        .queues
                        .iter()
                        .all(|q| q.to_reclaim.fits_in(&q.reclaimed))
                    && plan.notes.is_empty();
                check_idempotent(&view, &plan, &state, now, settled).map_err(tag)?;
                marked = plan.pending_kills.iter().map(|k| k.container).collect();
                view = advance(
                    &apply(&view, &plan).map_err(|e| TestCaseError::fail(e.to_string()))?,
                    3_000,
                );
            }
        }
        Ok(())
    }

    pub(super) fn same_seed_same_plans(recipe: Recipe, knobs: Knobs) -> Result<(), TestCaseError> {
        let (view0, _) = recipe.build();
        for kind in PolicyKind::ALL {
            let run = || {
                let mut state = PolicyState::new(knobs.settings(kind));
                let mut view = view0.clone();
                let mut plans = Vec::new();
                for now in [T0, T0 + 61_000, T0 + 122_000] {
                    let plan = decide(&view, &mut state, now);
                    view = apply(&view, &plan).expect("consistent");
                    plans.push(plan);
                }
                plans
            };
            prop_assert_eq!(run(), run());
        }
        Ok(())
    }

    pub(super) fn observe_only_acts_on_nothing(
        recipe: Recipe,
        knobs: Knobs,
    ) -> Result<(), TestCaseError> {
        let (view, _) = recipe.build();
        for kind in PolicyKind::ALL {
            let mut s = knobs.settings(kind);
            let acting = decide(&view, &mut PolicyState::new(s.clone()), T0);
            s.observe_only = true;
            let mut state = PolicyState::new(s);
            let plan = decide(&view, &mut state, T0);
            prop_assert!(plan.actions.is_empty());
            prop_assert_eq!(&plan.observed, &acting.actions);
            prop_assert_eq!(state.remembered_containers(), 0);
        }
        Ok(())
    }

    pub(super) fn suspended_containers_are_resumed_eventually_and_all_when_switched_off(
        recipe: Recipe,
        knobs: Knobs,
    ) -> Result<(), TestCaseError> {
        let (view0, work0) = recipe.build();
        for kind in PolicyKind::ALL {
            if recipe.overcommit && kind != PolicyKind::Las {
                // Only LAS admits more than a node holds; under the other policies two
                // suspended containers that cannot both fit would wait on each other.
                continue;
            }
            let mut s = knobs.settings(kind);
            if kind == PolicyKind::Las {
                // On clusters of a few nodes a 10% round cap is smaller than one container.
                s.total_preemption_per_round = 1.0;
            }
            let mut state = PolicyState::new(s.clone());
            let mut view = view0.clone();
            let mut now = T0;
            for _ in 0..3 {
                let plan = decide(&view, &mut state, now);
                view = advance(&apply(&view, &plan).expect("consistent"), 3_000);
                now += 3_000;
            }

            // Switched off: everything is resumed at once.
            let mut off = state.clone();
            let mut s_off = s.clone();
            s_off.kind = PolicyKind::None;
            off.set_settings(s_off);
            let plan = decide(&view, &mut off, now);
            let released = apply(&view, &plan).expect("consistent");
            prop_assert!(
                not_running(&released).is_empty(),
                "{}: still suspended after switching off",
                kind
            );
            prop_assert!(
                released
                    .nodes()
                    .iter()
                    .all(|n| n.advertised == n.capacity && n.partition == Partition::General)
            );

            // Demand falls and tasks finish as they attain their work: every container
            // that is suspended now runs again at some point.
            let work: std::collections::HashMap<ContainerId, u64> = view0
                .containers()
                .iter()
                .zip(&work0)
                .map(|(c, w)| (c.id, *w))
                .collect();
            let mut view = demand_falls(&view);
            let mut waiting = waiting_ids(&view);
            let dt = 5_000;
            for _ in 0..600 {
                if waiting.is_empty() {
                    break;
                }
                let plan = decide(&view, &mut state, now);
                view = advance(&apply(&view, &plan).expect("consistent"), dt);
                now += dt;
                waiting.retain(|id| {
                    view.container_by_id(id).is_some_and(|ci| {
                        view.container(ci).is_live()
                            && view.container(ci).state != ContainerState::Running
                    })
                });
                view = rebuild(&view, |_, cs| {
                    for c in cs.iter_mut() {
                        if c.state == ContainerState::Running
                            && c.attained_service_ms >= work.get(&c.id).copied().unwrap_or(0)
                        {
                            c.state = ContainerState::Killed;
                        }
                    }
                });
            }
            let stuck: Vec<String> = waiting
                .iter()
                .filter_map(|id| view.container_by_id(id))
                .map(|ci| {
                    let c = view.container(ci);
                    let node = view.node(c.node);
                    format!(
                        "{} in {} on {} ({} of {}): {:?} {} of {}",
                        c.id,
                        view.queue_of(c).path,
                        node.id,
                        node.used,
                        node.capacity,
                        c.state,
                        c.current,
                        c.allocated
                    )
                })
                .collect();
            let last = decide(&view, &mut state.clone(), now);
            prop_assert!(
                waiting.is_empty(),
                "{}: never resumed: {:#?}\n{:#?}",
                kind,
                stuck,
                last.queues
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_policy_keeps_the_invariants(recipe in recipe(), knobs in knobs()) {
        properties::every_policy_keeps_the_invariants(recipe, knobs)?;
    }

    #[test]
    fn same_seed_same_plans(recipe in recipe(), knobs in knobs()) {
        properties::same_seed_same_plans(recipe, knobs)?;
    }

    #[test]
    fn observe_only_acts_on_nothing(recipe in recipe(), knobs in knobs()) {
        properties::observe_only_acts_on_nothing(recipe, knobs)?;
    }

    #[test]
    fn suspended_containers_are_resumed_eventually_and_all_when_switched_off(recipe in recipe(), knobs in knobs()) {
        properties::suspended_containers_are_resumed_eventually_and_all_when_switched_off(recipe, knobs)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5_000, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "5,000 cases, minutes: cargo test --lib invariants -- --ignored"]
    fn every_policy_keeps_the_invariants_5000_cases(recipe in recipe(), knobs in knobs()) {
        properties::every_policy_keeps_the_invariants(recipe, knobs)?;
    }

    #[test]
    #[ignore = "5,000 cases, minutes: cargo test --lib invariants -- --ignored"]
    fn same_seed_same_plans_5000_cases(recipe in recipe(), knobs in knobs()) {
        properties::same_seed_same_plans(recipe, knobs)?;
    }

    #[test]
    #[ignore = "5,000 cases, minutes: cargo test --lib invariants -- --ignored"]
    fn observe_only_acts_on_nothing_5000_cases(recipe in recipe(), knobs in knobs()) {
        properties::observe_only_acts_on_nothing(recipe, knobs)?;
    }

    #[test]
    #[ignore = "5,000 cases, minutes: cargo test --lib invariants -- --ignored"]
    fn suspended_containers_are_resumed_eventually_and_all_when_switched_off_5000_cases(recipe in recipe(), knobs in knobs()) {
        properties::suspended_containers_are_resumed_eventually_and_all_when_switched_off(recipe, knobs)?;
    }
}
