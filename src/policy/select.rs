//! Which policy governs an application: the queue's `preemptor.policy` override, else
//! `yarn.preemptor.policy`; `adaptive` resolves per application. `none` as the cluster
//! policy switches Preemptor off everywhere, whatever the queues say.

use crate::cluster::{App, ClusterView, PolicyKind};
use crate::config::settings::{AdaptiveSettings, PolicySettings};

/// `adaptive`'s choice for one application: an application tag `preemptor.policy=<name>`
/// wins, then the `applicationType` mapping (case-insensitive), then the fallback.
/// BIG-C's findings behind the default mapping: MapReduce tasks are loosely coupled and
/// spill to disk, so suspending them outright (immediate) is cheap; Spark executors are
/// multi-threaded, iterative and memory-heavy, so they lose less when shrunk in steps
/// (graceful).
pub fn adaptive_choice(
    application_type: &str,
    tags: &[String],
    a: &AdaptiveSettings,
) -> PolicyKind {
    let fallback = match a.fallback {
        PolicyKind::Adaptive => PolicyKind::Graceful,
        p => p,
    };
    let tagged = tags.iter().find_map(|t| {
        t.trim()
            .strip_prefix("preemptor.policy=")
            .and_then(|v| v.parse::<PolicyKind>().ok())
    });
    let mapped = || {
        a.mapping
            .iter()
            .find(|(ty, _)| ty.trim().eq_ignore_ascii_case(application_type.trim()))
            .map(|(_, p)| *p)
    };
    match tagged.or_else(mapped) {
        Some(PolicyKind::Adaptive) | None => fallback,
        Some(p) => p,
    }
}

/// The policy governing `app` (never `adaptive`).
pub fn app_policy(view: &ClusterView, app: &App, s: &PolicySettings) -> PolicyKind {
    if s.kind == PolicyKind::None {
        return PolicyKind::None;
    }
    match view.queue(app.queue).policy.unwrap_or(s.kind) {
        PolicyKind::Adaptive => adaptive_choice(&app.application_type, &app.tags, &s.adaptive),
        p => p,
    }
}

/// Policies that reclaim by queue share (capacity accounting and victim choice).
pub fn is_share_based(p: PolicyKind) -> bool {
    matches!(
        p,
        PolicyKind::Kill | PolicyKind::Immediate | PolicyKind::Graceful | PolicyKind::Adaptive
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_follows_tags_then_type_then_fallback() {
        let a = PolicySettings::default().adaptive;
        assert_eq!(adaptive_choice("MAPREDUCE", &[], &a), PolicyKind::Immediate);
        assert_eq!(adaptive_choice("spark", &[], &a), PolicyKind::Graceful);
        assert_eq!(adaptive_choice("TEZ", &[], &a), PolicyKind::Graceful);
        let tags = vec!["team=x".to_string(), "preemptor.policy=kill".to_string()];
        assert_eq!(adaptive_choice("SPARK", &tags, &a), PolicyKind::Kill);
        let bad = vec!["preemptor.policy=bogus".to_string()];
        assert_eq!(
            adaptive_choice("MAPREDUCE", &bad, &a),
            PolicyKind::Immediate
        );
        let own = vec!["preemptor.policy=adaptive".to_string()];
        assert_eq!(adaptive_choice("MAPREDUCE", &own, &a), PolicyKind::Graceful);
        let mut a2 = a.clone();
        a2.fallback = PolicyKind::Adaptive;
        assert_eq!(adaptive_choice("TEZ", &[], &a2), PolicyKind::Graceful);
        a2.fallback = PolicyKind::Kill;
        assert_eq!(adaptive_choice("TEZ", &[], &a2), PolicyKind::Kill);
    }
}
