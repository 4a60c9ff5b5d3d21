//! Scenario tests (the papers' worked behaviour, exact plans) and property tests (the
//! invariants of docs/algorithms.md for every policy).

mod incremental;
mod invariants;
mod scenarios;

use super::amount::Amount;
use super::{Plan, PolicyState, apply, decide};
use crate::cluster::{ClusterView, Container, ContainerState, JobClass, Millis, PolicyKind};
use crate::config::settings::PolicySettings;
use crate::resources::Limits;

fn settings(kind: PolicyKind) -> PolicySettings {
    PolicySettings {
        kind,
        ..PolicySettings::default()
    }
}

/// Decide and carry the plan out.
fn tick(view: &ClusterView, state: &mut PolicyState, now: Millis) -> (Plan, ClusterView) {
    let plan = decide(view, state, now);
    let next = apply(view, &plan).expect("applying a plan keeps the view consistent");
    (plan, next)
}

/// Rebuild a view after changing its entities.
fn rebuild(
    view: &ClusterView,
    f: impl FnOnce(&mut Vec<crate::cluster::App>, &mut Vec<Container>),
) -> ClusterView {
    let mut apps = view.apps().to_vec();
    let mut containers = view.containers().to_vec();
    f(&mut apps, &mut containers);
    ClusterView::new(
        view.queues().to_vec(),
        apps,
        view.nodes().to_vec(),
        containers,
    )
    .expect("consistent view")
}

/// Running containers gain `dt` of CPU time.
fn advance(view: &ClusterView, dt: u64) -> ClusterView {
    rebuild(view, |_, cs| {
        for c in cs.iter_mut().filter(|c| c.state == ContainerState::Running) {
            c.attained_service_ms += dt;
        }
    })
}

/// Demand falls: no more outstanding requests, and short jobs' containers are done.
fn demand_falls(view: &ClusterView) -> ClusterView {
    rebuild(view, |apps, cs| {
        for a in apps.iter_mut() {
            a.requests.clear();
            a.pending_since_ms = None;
        }
        for c in cs.iter_mut() {
            if apps[c.app.get()].class == JobClass::Short && c.state == ContainerState::Running {
                c.state = ContainerState::Killed;
            }
        }
    })
}

fn not_running(view: &ClusterView) -> Vec<&Container> {
    view.containers()
        .iter()
        .filter(|c| c.is_live() && c.state != ContainerState::Running)
        .collect()
}

fn footprint_of(c: &Container, s: &PolicySettings) -> Limits {
    s.suspend.footprint.component_min(Limits::from(c.allocated))
}

/// LAS may run under `las`, and under `adaptive` only where its mapping or fallback
/// names it.
#[test]
fn las_may_run_under_las_or_an_adaptive_mapping_to_it() {
    let mut s = PolicySettings::default();
    for (kind, may) in [
        (PolicyKind::Las, true),
        (PolicyKind::Kill, false),
        (PolicyKind::Graceful, false),
        (PolicyKind::Adaptive, false),
    ] {
        s.kind = kind;
        assert_eq!(crate::policy::may_run_las(&s), may, "{kind:?}");
    }
    s.adaptive
        .mapping
        .push(("TEZ".to_string(), PolicyKind::Las));
    assert!(crate::policy::may_run_las(&s));
    s.adaptive.mapping.pop();
    s.adaptive.fallback = PolicyKind::Las;
    assert!(crate::policy::may_run_las(&s));
}
