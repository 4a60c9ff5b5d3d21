//! The dashboard at `/`: one server-rendered HTML page with inline SVG and a small inline
//! script that follows `/api/v1/events`. No build step, no external assets.
//!
//! Top to bottom: a summary strip, the last minutes as charts ([`charts`]: queues'
//! dominant shares, containers held, short-job waits), then the queues now, the
//! preemption log, the applications and the nodes. The script appends preemption log
//! rows as `action` events arrive and, on `tick` and `short-wait` events (at most once a
//! second), refetches this page and swaps in the sections named in [`LIVE_SECTIONS`], so
//! that all rendering stays here in Rust.

mod charts;

use std::fmt::Write as _;

use super::api::Snapshot;
use super::history::{cluster_total, dominant};
use super::hub::{ActionRecord, AppRow, ContainerRow, Outcome, StatusReport};
use super::live_queues::QueueSource;
use super::log::utc_millis;
use crate::resources::Resource;

/// Rows the page shows in the preemption log; the script keeps the same bound.
const LOG_ROWS: usize = 200;

/// The sections the script replaces on a refresh: all but the log, which it appends to.
const LIVE_SECTIONS: [&str; 7] = [
    "summary", "shares", "held", "waits", "queues", "apps", "nodes",
];

pub fn page(snap: &Snapshot) -> String {
    let mut h = String::with_capacity(64 * 1024);
    h.push_str(HEAD);
    summary(&mut h, &snap.status, snap.missed);
    let span = charts::Span::of(&snap.history, snap.status.at_ms);
    charts::shares(&mut h, &snap.history, span);
    h.push_str("<div class=\"pair\">");
    charts::held(&mut h, &snap.history, span);
    charts::waits(&mut h, &snap.history, span);
    h.push_str("</div>\n");
    queues(&mut h, &snap.status);
    log(&mut h, &snap.actions);
    apps(&mut h, &snap.status.applications, &snap.status.skipped);
    nodes(&mut h, &snap.status);
    let sections = LIVE_SECTIONS.map(|s| format!("\"{s}\"")).join(", ");
    let _ = write!(
        h,
        "<script>const LOG_ROWS = {LOG_ROWS};\nconst LIVE_SECTIONS = [{sections}];\n\
         {SCRIPT}</script>\n</body>\n</html>\n"
    );
    h
}

/// Escapes text for HTML element content and double-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn summary(h: &mut String, s: &StatusReport, missed: u64) {
    let stat = |h: &mut String, class: &str, key: &str, value: &str| {
        let _ = write!(
            h,
            "<div class=\"stat {class}\"><span>{key}</span><b>{value}</b></div>"
        );
    };
    h.push_str("<section id=\"summary\"><div class=\"strip\">");
    stat(h, "", "policy", &esc(&s.policy));
    if s.observe_only {
        stat(h, "warn", "observe_only", "on: nothing is acted on");
    } else {
        stat(h, "", "observe_only", "off");
    }
    if s.rm_reachable {
        stat(h, "", &format!("RM {}", esc(&s.rm)), "reachable");
    } else {
        stat(h, "bad", &format!("RM {}", esc(&s.rm)), "unreachable");
    }
    let held = |n: usize| if n > 0 { "held" } else { "" };
    stat(h, held(s.suspended), "suspended", &s.suspended.to_string());
    stat(h, held(s.shrunk), "shrunk", &s.shrunk.to_string());
    stat(
        h,
        "",
        "reclaimed now",
        &format!(
            "{} MB · {} vcores",
            s.reclaimed.memory_mb, s.reclaimed.vcores
        ),
    );
    let observed = if s.at_ms == 0 {
        "never".to_string()
    } else {
        utc_millis(s.at_ms)
    };
    stat(h, "", "observed", &observed);
    h.push_str("</div>");
    if missed > 0 {
        let _ = write!(
            h,
            "<p class=\"bad\">{missed} events arrived faster than this page kept up; \
             older rows may be missing.</p>"
        );
    }
    h.push_str("<p id=\"warning\" class=\"bad\"></p></section>\n");
}

/// The queues now: a bar per queue in dominant shares of the cluster, and both
/// resources in text.
fn queues(h: &mut String, s: &StatusReport) {
    let qs = &s.queues;
    h.push_str(
        "<section id=\"queues\"><h2>Queues now <small>bars in dominant share of the \
         cluster",
    );
    let total = cluster_total(s);
    if total.any_positive() {
        let _ = write!(h, " ({} MB, {} vcores)", total.memory_mb, total.vcores);
    }
    h.push_str("</small></h2>");
    if s.queue_source == QueueSource::CapacitySchedulerXml && !qs.is_empty() {
        h.push_str(
            "<p class=\"bad\">The RM listed no queue: the tree is capacity-scheduler.xml's.</p>",
        );
    }
    if !s.queue_disagreements.is_empty() {
        h.push_str(
            "<p class=\"bad\">capacity-scheduler.xml and the RM differ; the RM's queues are used:</p><ul class=\"bad\">",
        );
        for d in &s.queue_disagreements {
            let _ = write!(h, "<li>{}</li>", esc(d));
        }
        h.push_str("</ul>");
    }
    if qs.is_empty() {
        h.push_str("<p class=\"empty\">No queues observed yet.</p></section>\n");
        return;
    }
    let share = |r: Resource| dominant(r, total).0;
    let scale = qs
        .iter()
        .map(|q| {
            share(q.maximum)
                .max(share(q.guaranteed))
                .max(share(q.used.saturating_add(q.pending)))
        })
        .fold(0.0, f64::max);
    let scale = if scale > 0.0 { scale } else { 1.0 };
    const BAR: f64 = 200.0;
    let x = |r: Resource| BAR * (share(r) / scale).min(1.0);
    let amount = |r: Resource| format!("{} MB, {} vcores", r.memory_mb, r.vcores);
    h.push_str(
        "<table class=\"queues\"><thead><tr><th>queue</th>\
         <th colspan=\"2\">used vs guaranteed (dominant share)</th><th>binds</th><th>used</th>\
         <th>pending</th><th>guaranteed</th><th>maximum</th></tr></thead><tbody>",
    );
    for q in qs {
        let (used, binds) = if q.used.is_zero() {
            (0.0, dominant(q.guaranteed, total).1)
        } else {
            dominant(q.used, total)
        };
        let class = q.class.map(|c| c.to_string()).unwrap_or_default();
        let _ = write!(
            h,
            "<tr class=\"queue {class}\"><td>{path} <small>{class}{lock}</small></td><td>\
             <svg class=\"bar\" width=\"{BAR}\" height=\"16\"><title>{path}: guaranteed {g}, \
             maximum {m}, used {u}, pending {p}</title>\
             <rect class=\"max\" width=\"{mw:.1}\" height=\"16\"/>\
             <rect class=\"used\" width=\"{uw:.1}\" height=\"16\"/>\
             <rect class=\"pending\" x=\"{uw:.1}\" width=\"{pw:.1}\" height=\"16\"/>\
             <line class=\"guarantee\" x1=\"{gx:.1}\" x2=\"{gx:.1}\" y1=\"0\" y2=\"16\"/></svg>\
             </td><td>{us} used / {gs} guaranteed</td><td>{binds}</td><td>{ua}</td><td>{pa}</td>\
             <td>{ga}</td><td>{ma}</td></tr>",
            path = esc(&q.path),
            lock = if q.preemption_disabled {
                " · no preemption"
            } else {
                ""
            },
            g = q.guaranteed,
            m = q.maximum,
            u = q.used,
            p = q.pending,
            mw = x(q.maximum),
            uw = x(q.used),
            pw = (x(q.used.saturating_add(q.pending)) - x(q.used)).max(0.0),
            gx = x(q.guaranteed).max(1.0),
            us = format_args!("{:.0}%", used * 100.0),
            gs = format_args!("{:.0}%", share(q.guaranteed) * 100.0),
            binds = binds.phrase(),
            ua = amount(q.used),
            pa = amount(q.pending),
            ga = amount(q.guaranteed),
            ma = amount(q.maximum),
        );
    }
    h.push_str(
        "</tbody></table><p class=\"legend\"><span class=\"key used\"></span>used \
         <span class=\"key pending\"></span>pending <span class=\"key max\"></span>maximum \
         <span class=\"key guarantee\"></span>guarantee</p></section>\n",
    );
}

fn apps(h: &mut String, apps: &[AppRow], skipped: &[String]) {
    h.push_str("<section id=\"apps\"><h2>Applications</h2>");
    if apps.is_empty() {
        h.push_str("<p class=\"empty\">No RUNNING or ACCEPTED application.</p>");
    } else {
        h.push_str(
            "<table><thead><tr><th>application</th><th>queue</th><th>class</th>\
             <th>state</th><th>submitted</th><th>seen after</th></tr></thead><tbody>",
        );
        for a in apps {
            let submitted = if a.started_time_ms == 0 {
                String::new()
            } else {
                utc_millis(a.started_time_ms)
            };
            let seen = if a.started_time_ms == 0 || a.seen_at_ms == 0 {
                String::new()
            } else {
                format!("{} ms", a.seen_at_ms.saturating_sub(a.started_time_ms))
            };
            let _ = write!(
                h,
                "<tr class=\"{class}\"><td>{id}</td><td>{queue}</td><td>{class}</td>\
                 <td>{state}</td><td>{submitted}</td><td>{seen}</td></tr>",
                class = a.class,
                id = esc(&a.id),
                queue = esc(&a.queue),
                state = a.state,
            );
        }
        h.push_str("</tbody></table>");
    }
    if !skipped.is_empty() {
        h.push_str("<p class=\"bad\">Left out of the view:</p><ul class=\"bad\">");
        for s in skipped {
            let _ = write!(h, "<li>{}</li>", esc(s));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>\n");
}

fn log(h: &mut String, actions: &[ActionRecord]) {
    h.push_str(
        "<section id=\"log\"><h2>Preemption log</h2><table><thead><tr><th>time</th>\
         <th>policy</th><th>action</th><th>container / node</th><th>application</th>\
         <th>queue</th><th>node</th><th>before → after</th><th>latency</th>\
         <th>outcome</th><th>reason</th></tr></thead><tbody id=\"log-rows\">",
    );
    for a in actions.iter().rev().take(LOG_ROWS) {
        log_row(h, a);
    }
    h.push_str("</tbody></table>");
    if actions.is_empty() {
        h.push_str("<p id=\"log-empty\" class=\"empty\">No actions yet.</p>");
    }
    h.push_str("</section>\n");
}

/// Keep in step with `row()` in [`SCRIPT`].
fn log_row(h: &mut String, a: &ActionRecord) {
    let (outcome, class) = match &a.outcome {
        Outcome::Applied => ("applied".to_string(), "applied"),
        Outcome::Observed => ("observed".to_string(), "observed"),
        Outcome::Failed { reason } => (format!("failed: {reason}"), "failed"),
    };
    let opt = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
    let target = a.container.as_ref().or(a.node.as_ref());
    let key = format!(
        "{}|{}|{}",
        a.at_ms,
        a.action,
        target.map_or("", String::as_str)
    );
    let _ = write!(
        h,
        "<tr class=\"{class}\" data-at=\"{}\" data-key=\"{}\"><td>{}</td><td>{}</td><td class=\"act {}\">{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        a.at_ms,
        esc(&key),
        utc_millis(a.at_ms),
        esc(&a.policy),
        esc(&a.action),
        esc(&a.action),
        opt(&target.cloned()),
        opt(&a.application),
        opt(&a.queue),
        opt(&a.node),
        esc(&a.before),
        esc(&a.after),
        a.latency_ms.map(|l| format!("{l} ms")).unwrap_or_default(),
        esc(&outcome),
        esc(&a.reason),
    );
}

fn nodes(h: &mut String, s: &StatusReport) {
    h.push_str("<section id=\"nodes\"><h2>Nodes: current vs allocated limits</h2>");
    if s.nodes.is_empty() {
        h.push_str("<p class=\"empty\">No nodes observed yet.</p>");
    }
    for n in &s.nodes {
        let agent = match (&n.agent, n.agent_reachable) {
            (Some(a), true) => format!("agent {}", esc(a)),
            (Some(a), false) => format!("<b class=\"bad\">agent {} unreachable</b>", esc(a)),
            (None, _) => "no agent".into(),
        };
        let _ = write!(
            h,
            "<div class=\"node\"><h3>{} <small>capacity {} · advertised {} · {} partition · \
             {agent}</small></h3><table><thead><tr><th>container</th><th>application</th>\
             <th>queue</th><th>state</th><th>memory (current / allocated)</th>\
             <th>CPU (current / allocated)</th></tr></thead><tbody>",
            esc(&n.id),
            esc(&n.capacity.to_string()),
            esc(&n.advertised.to_string()),
            serde_json::to_value(n.partition)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        );
        for c in &n.containers {
            container_row(h, c);
        }
        if n.containers.is_empty() {
            h.push_str("<tr><td colspan=\"6\" class=\"empty\">no containers</td></tr>");
        }
        h.push_str("</tbody></table></div>");
    }
    h.push_str("</section>\n");
}

fn container_row(h: &mut String, c: &ContainerRow) {
    let state = serde_json::to_value(c.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let alloc_cpu = u64::from(c.allocated.vcores) * 1000;
    let _ = write!(
        h,
        "<tr class=\"{state}\"><td>{}</td><td>{}</td><td>{}</td><td>{state}</td>\
         <td>{} {} / {} MB</td><td>{} {:.3} / {} vcores</td></tr>",
        esc(&c.id),
        esc(&c.application),
        esc(&c.queue),
        gauge(c.current.memory_mb, c.allocated.memory_mb),
        c.current.memory_mb,
        c.allocated.memory_mb,
        gauge(u64::from(c.current.cpu_millis), alloc_cpu),
        f64::from(c.current.cpu_millis) / 1000.0,
        c.allocated.vcores,
    );
}

/// A small bar: the current limit as a share of the allocation.
fn gauge(current: u64, allocated: u64) -> String {
    let share = if allocated == 0 {
        0.0
    } else {
        (current as f64 / allocated as f64).min(1.0)
    };
    format!(
        "<svg class=\"gauge\" width=\"80\" height=\"10\"><rect class=\"max\" width=\"80\" \
         height=\"10\"/><rect class=\"used\" width=\"{:.1}\" height=\"10\"/></svg>",
        80.0 * share
    )
}

const HEAD: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Preemptor</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #1d2430; background: #fff; }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 15px; margin: 18px 0 6px; }
h3 { font-size: 14px; margin: 12px 0 4px; } small { color: #5b6472; font-weight: normal; }
.strip { display: flex; flex-wrap: wrap; gap: 8px; }
.stat { border: 1px solid #e3e6ea; border-radius: 6px; padding: 5px 12px; background: #f8fafc; }
.stat span { display: block; font-size: 11px; color: #5b6472; }
.stat b { font-size: 16px; } .stat.held b { color: #b91c1c; }
.stat.bad { background: #fde8e8; border-color: #f5b5b5; } .stat.bad b { color: #b91c1c; }
.stat.warn { background: #fff6bf; border-color: #f0d97a; }
.multiples, .pair { display: flex; flex-wrap: wrap; gap: 0 12px; }
figure { margin: 0; }
figure.share { border: 1px solid #e3e6ea; border-radius: 6px; margin-bottom: 8px; }
.pair section { border: 1px solid #e3e6ea; border-radius: 6px; padding: 0 0 4px 6px; width: 596px; }
.pair h2 { margin: 6px 0 0; } .pair .legend { margin: 2px 0; }
table { border-collapse: collapse; font-size: 12px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #e3e6ea; white-space: nowrap; }
table.queues td { vertical-align: middle; }
tr.failed td { background: #fde8e8; } tr.observed td { color: #6b7280; }
tr.live td { animation: flash 2s; }
@keyframes flash { from { background: #fff6bf; } to { background: transparent; } }
td.act.suspend, td.act.kill { color: #b91c1c; font-weight: 600; }
td.act.shrink { color: #b45309; font-weight: 600; } td.act.resume { color: #15803d; font-weight: 600; }
#log, .node { overflow-x: auto; }
.bad { color: #b91c1c; } .empty { color: #6b7280; }
svg text { font-size: 12px; fill: #1d2430; } svg text.tick { font-size: 10px; fill: #6b7280; }
svg text.title { font-weight: 600; } svg text.binds { fill: #7c2d12; font-weight: 600; }
svg text.now { fill: #374151; } tspan.starved { fill: #b91c1c; font-weight: 600; }
tspan.used { fill: #1d4ed8; font-weight: 600; }
line.grid { stroke: #eef0f3; } line.axis { stroke: #9ca3af; }
rect.unreachable { fill: #fde8e8; }
polyline { fill: none; stroke-width: 2; stroke-linejoin: round; }
polyline.used { stroke: #2563eb; } polygon.used-area { fill: #2563eb; opacity: 0.15; }
circle.used { fill: #2563eb; }
polyline.guaranteed { stroke: #111827; stroke-dasharray: 5 3; stroke-width: 1.5; }
polyline.suspended { stroke: #dc2626; } polyline.shrunk { stroke: #d97706; }
polyline.wait { stroke: #c4b5fd; stroke-width: 1; } circle.wait { fill: #7c3aed; }
rect.max { fill: #e5e7eb; } rect.used { fill: #2563eb; } rect.pending { fill: #93c5fd; }
line.guarantee { stroke: #111827; stroke-width: 2; }
.legend { font-size: 12px; color: #374151; }
.key { display: inline-block; width: 14px; height: 10px; margin: 0 4px 0 10px; vertical-align: middle; }
.key.used { background: #2563eb; } .key.pending { background: #93c5fd; } .key.max { background: #e5e7eb; }
.key.guarantee { width: 2px; background: #111827; } .key.guaranteed { height: 0; border-top: 2px dashed #111827; }
.key.unreachable { background: #fde8e8; } .key.suspended { background: #dc2626; }
.key.shrunk { background: #d97706; } .key.wait { background: #7c3aed; width: 8px; height: 8px; border-radius: 4px; }
tr.suspended td { color: #b91c1c; } tr.shrunk td { color: #b45309; }
</style>
</head>
<body>
<h1>Preemptor <small id="stream">connecting to the event stream…</small></h1>
"#;

/// The browser side: the token comes from the page's own `?token=`, kept percent-encoded.
const SCRIPT: &str = r#"(function () {
  var m = /[?&]token=([^&]*)/.exec(location.search);
  var q = m ? "?token=" + m[1] : "";
  var rows = document.getElementById("log-rows");
  var stream = document.getElementById("stream");
  function iso(ms) { return new Date(ms).toISOString(); }
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  function key(a) { return a.atMs + "|" + a.action + "|" + (a.container || a.node || ""); }
  var shown = new Set();
  rows.querySelectorAll("tr[data-key]").forEach(function (tr) { shown.add(tr.dataset.key); });
  function row(a) {
    var tr = document.createElement("tr");
    tr.dataset.at = a.atMs;
    tr.dataset.key = key(a);
    var o = a.outcome || {};
    var outcome = o.status === "failed" ? "failed: " + o.reason : o.status;
    tr.className = (o.status || "") + " live";
    cell(tr, iso(a.atMs));
    cell(tr, a.policy);
    cell(tr, a.action, "act " + a.action);
    cell(tr, a.container || a.node || "");
    cell(tr, a.application || "");
    cell(tr, a.queue || "");
    cell(tr, a.node || "");
    cell(tr, a.before + " \u2192 " + a.after);
    cell(tr, a.latencyMs == null ? "" : a.latencyMs + " ms");
    cell(tr, outcome);
    cell(tr, a.reason);
    return tr;
  }
  var pending = null;
  function refresh() {
    pending = null;
    fetch("/" + q).then(function (r) { return r.text(); }).then(function (html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      LIVE_SECTIONS.forEach(function (id) {
        var fresh = doc.getElementById(id), old = document.getElementById(id);
        if (fresh && old) old.replaceWith(fresh);
      });
    }).catch(function (e) { stream.textContent = "refresh failed: " + e; });
  }
  function later() { if (!pending) pending = setTimeout(refresh, 1000); }
  var es = new EventSource("/api/v1/events" + q);
  // Newest first; a record already shown (rendered, or streamed before) is skipped.
  function add(a) {
    var k = key(a);
    if (shown.has(k)) return;
    shown.add(k);
    var empty = document.getElementById("log-empty");
    if (empty) empty.remove();
    var next = rows.firstChild;
    while (next && Number(next.dataset.at) > a.atMs) next = next.nextSibling;
    rows.insertBefore(row(a), next);
    while (rows.children.length > LOG_ROWS) {
      shown.delete(rows.lastChild.dataset.key);
      rows.removeChild(rows.lastChild);
    }
  }
  // On every (re)connect, pick up what happened while the stream was not open.
  es.onopen = function () {
    stream.textContent = "live";
    fetch("/api/v1/actions" + q).then(function (r) { return r.json(); })
      .then(function (j) { (j.actions || []).forEach(add); })
      .catch(function (e) { stream.textContent = "live (recent log unavailable: " + e + ")"; });
  };
  es.onerror = function () { stream.textContent = "event stream lost; reconnecting…"; };
  es.addEventListener("action", function (e) { add(JSON.parse(e.data)); });
  es.addEventListener("tick", later);
  es.addEventListener("short-wait", later);
  es.addEventListener("warning", function (e) {
    var w = document.getElementById("warning");
    if (w) w.textContent = JSON.parse(e.data).message;
  });
})();
"#;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cluster::{ContainerState, JobClass, Partition};
    use crate::controller::api::WaitPoint;
    use crate::controller::history::{History, HistoryReport};
    use crate::controller::hub::{NodeStatus, QueueStatus};
    use crate::resources::Limits;
    use crate::yarn::dto::YarnApplicationState;

    fn snapshot() -> Snapshot {
        let status = StatusReport {
            at_ms: 1_700_000_000_000,
            policy: "graceful".into(),
            rm: "http://rm:8088".into(),
            rm_reachable: true,
            queues: vec![QueueStatus {
                path: "root.<short>".into(),
                class: Some(JobClass::Short),
                guaranteed: Resource::new(8192, 8),
                maximum: Resource::new(16384, 16),
                used: Resource::new(2048, 6),
                pending: Resource::new(4096, 4),
                preemption_disabled: false,
            }],
            nodes: vec![NodeStatus {
                id: "nm1:8042".into(),
                capacity: Resource::new(16384, 16),
                advertised: Resource::new(16384, 16),
                partition: Partition::General,
                agent: Some("http://nm1:8049".into()),
                agent_reachable: false,
                lease: None,
                containers: vec![ContainerRow {
                    id: "container_1_0001_01_000002".into(),
                    application: "application_1_0001".into(),
                    queue: "root.long".into(),
                    allocated: Resource::new(4096, 2),
                    current: Limits::new(64, 10),
                    state: ContainerState::Suspended,
                    held_since_ms: Some(1_795_000_000_000),
                }],
            }],
            suspended: 1,
            queue_disagreements: vec!["queue root.x is on the RM but not in <file>".into()],
            applications: vec![AppRow {
                id: "application_1_0001".into(),
                queue: "root.long".into(),
                class: JobClass::Long,
                state: YarnApplicationState::Running,
                seen_at_ms: 1_700_000_000_250,
                started_time_ms: 1_700_000_000_000,
            }],
            skipped: vec![
                "application_1_0009: queue \"gone\" is not in the RM's queue tree".into(),
            ],
            ..StatusReport::default()
        };
        // Three ticks 3 s apart; the suspended count rises to 2, then falls to 1.
        let mut history = History::default();
        for (n, suspended) in [0, 2, 1].into_iter().enumerate() {
            history.record(&StatusReport {
                at_ms: status.at_ms - 6000 + 3000 * n as u64,
                suspended,
                ..status.clone()
            });
        }
        Snapshot {
            status: Arc::new(status),
            actions: vec![ActionRecord {
                at_ms: 1_700_000_000_500,
                policy: "graceful".into(),
                action: "suspend".into(),
                container: Some("container_1_0001_01_000002".into()),
                application: Some("application_1_0001".into()),
                queue: Some("root.long".into()),
                node: Some("nm1:8042".into()),
                before: "<4096 MB, 2 vcores>".into(),
                after: "<64 MB, 0.010 vcores>".into(),
                amounts: crate::controller::hub::Amounts::default(),
                reason: "short <b>".into(),
                latency_ms: Some(80),
                outcome: Outcome::Failed {
                    reason: "agent timed out".into(),
                },
            }],
            history: HistoryReport::new(
                history.samples(),
                &[
                    WaitPoint {
                        at_ms: 1_700_000_000_000,
                        application: "application_1_0003".into(),
                        wait_ms: 1200,
                    },
                    WaitPoint {
                        at_ms: 1_700_000_010_000,
                        application: "application_1_0004".into(),
                        wait_ms: 300,
                    },
                ],
            ),
            missed: 0,
        }
    }

    #[test]
    fn page_shows_every_section_and_escapes_text() {
        let html = page(&snapshot());
        for needle in [
            "id=\"summary\"",
            "id=\"queues\"",
            "root.&lt;short&gt;",
            "Queues over the last 1 min",
            // Used <2048 MB, 6 vcores> of <16384 MB, 16 vcores>: vcores bind, at 38%.
            "<figure class=\"share\" data-queue=\"root.&lt;short&gt;\" data-binds=\"vcores\">",
            ">vcores bind</text>",
            "38%</tspan> · guaranteed 50%",
            "38% used / 50% guaranteed</td><td>vcores bind</td>\
             <td>2048 MB, 6 vcores</td><td>4096 MB, 4 vcores</td><td>8192 MB, 8 vcores</td>",
            "data-suspended=\"1\" data-shrunk=\"0\"",
            "suspended: <b>1</b> now, peak 2",
            "2 short jobs started: median <b>0.3 s</b>, longest <b>1.2 s</b>",
            "id=\"log-rows\"",
            "<tr class=\"failed\" data-at=\"1700000000500\" \
             data-key=\"1700000000500|suspend|container_1_0001_01_000002\">",
            "failed: agent timed out",
            "short &lt;b&gt;",
            "&lt;4096 MB, 2 vcores&gt; → &lt;64 MB, 0.010 vcores&gt;",
            "agent http://nm1:8049 unreachable",
            "<tr class=\"suspended\">",
            "64 / 4096 MB",
            "0.010 / 2 vcores",
            "<title>application_1_0003 at 22:13:20 UTC: waited 1200 ms</title>",
            "new EventSource(\"/api/v1/events\" + q)",
            "<li>queue root.x is on the RM but not in &lt;file&gt;</li>",
            "id=\"apps\"",
            "<tr class=\"long\"><td>application_1_0001</td><td>root.long</td><td>long</td>\
             <td>RUNNING</td>",
            "<td>250 ms</td>",
            "queue &quot;gone&quot; is not",
        ] {
            assert!(html.contains(needle), "missing {needle:?}");
        }
        assert!(!html.contains("<short>"));
        assert!(!html.contains("id=\"log-empty\""));
        // The sections come in the order the page promises, charts first.
        let at = |id: &str| html.find(&format!("id=\"{id}\"")).unwrap_or(usize::MAX);
        let order = [
            "summary", "shares", "held", "waits", "queues", "log", "apps", "nodes",
        ];
        assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{order:?}");
        for id in LIVE_SECTIONS {
            assert!(at(id) < usize::MAX, "{id}");
        }
    }

    #[test]
    fn empty_status_renders_placeholders() {
        let snap = Snapshot {
            status: Arc::new(StatusReport::default()),
            actions: vec![],
            history: HistoryReport::default(),
            missed: 3,
        };
        let html = page(&snap);
        assert!(html.contains("No queues observed yet."));
        assert!(html.contains("No tick observed yet."));
        assert!(html.contains("id=\"log-empty\""));
        assert!(html.contains("No short job has started in the last minutes."));
        assert!(html.contains("No RUNNING or ACCEPTED application."));
        assert!(html.contains("3 events arrived faster"));
    }
}
