//! The dashboard at `/`: one server-rendered HTML page with inline SVG and a small inline
//! script that follows `/api/v1/events`. No build step, no external assets.
//!
//! The script appends preemption log rows as `action` events arrive and, on `tick` and
//! `short-wait` events (at most once a second), refetches this page and swaps in the
//! sections with ids `summary`, `queues`, `apps`, `nodes` and `waits`, so that all
//! rendering stays here in Rust.

use std::fmt::Write as _;

use super::api::{Snapshot, WaitPoint};
use super::hub::{ActionRecord, AppRow, ContainerRow, Outcome, StatusReport};
use super::live_queues::QueueSource;
use super::log::utc_millis;

/// Rows the page shows in the preemption log; the script keeps the same bound.
const LOG_ROWS: usize = 200;

pub fn page(snap: &Snapshot) -> String {
    let mut h = String::with_capacity(32 * 1024);
    h.push_str(HEAD);
    summary(&mut h, &snap.status, snap.missed);
    queues(&mut h, &snap.status);
    apps(&mut h, &snap.status.applications, &snap.status.skipped);
    log(&mut h, &snap.actions);
    nodes(&mut h, &snap.status);
    waits(&mut h, &snap.waits);
    let _ = write!(
        h,
        "<script>const LOG_ROWS = {LOG_ROWS};\n{SCRIPT}</script>\n</body>\n</html>\n"
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
    let rm = if s.rm_reachable {
        format!("RM {} reachable", esc(&s.rm))
    } else {
        format!("<b class=\"bad\">RM {} unreachable</b>", esc(&s.rm))
    };
    let observe = if s.observe_only {
        " · <b>observe_only</b> (nothing is acted on)"
    } else {
        ""
    };
    let _ = write!(
        h,
        "<section id=\"summary\"><p>policy <b>{}</b>{observe} · {rm} · \
         {} suspended · {} shrunk · reclaimed {} · observed {}</p>",
        esc(&s.policy),
        s.suspended,
        s.shrunk,
        esc(&s.reclaimed.to_string()),
        if s.at_ms == 0 {
            "never".to_string()
        } else {
            utc_millis(s.at_ms)
        },
    );
    if missed > 0 {
        let _ = write!(
            h,
            "<p class=\"bad\">{missed} events arrived faster than this page kept up; \
             older rows may be missing.</p>"
        );
    }
    h.push_str("<p id=\"warning\" class=\"bad\"></p></section>\n");
}

fn queues(h: &mut String, s: &StatusReport) {
    let qs = &s.queues;
    h.push_str("<section id=\"queues\"><h2>Queues: guarantee vs used (memory)</h2>");
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
    let scale = qs
        .iter()
        .map(|q| {
            q.maximum
                .memory_mb
                .max(q.guaranteed.memory_mb)
                .max(q.used.memory_mb + q.pending.memory_mb)
        })
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    const LABEL: f64 = 220.0;
    const BAR: f64 = 560.0;
    const ROW: f64 = 34.0;
    let x = |mb: u64| LABEL + BAR * (mb as f64 / scale);
    let _ = write!(
        h,
        "<svg class=\"chart\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\">",
        w = LABEL + BAR + 260.0,
        ht = ROW * qs.len() as f64 + 10.0
    );
    for (i, q) in qs.iter().enumerate() {
        let y = 5.0 + ROW * i as f64;
        let class = q.class.map(|c| c.to_string()).unwrap_or_default();
        let _ = write!(
            h,
            "<g class=\"queue {class}\"><title>{path}: guaranteed {g}, maximum {m}, used {u}, \
             pending {p}</title>\
             <text x=\"0\" y=\"{ty}\">{path}{lock}</text>\
             <rect class=\"max\" x=\"{LABEL}\" y=\"{y}\" width=\"{mw:.1}\" height=\"22\"/>\
             <rect class=\"used\" x=\"{LABEL}\" y=\"{y}\" width=\"{uw:.1}\" height=\"22\"/>\
             <rect class=\"pending\" x=\"{px:.1}\" y=\"{y}\" width=\"{pw:.1}\" height=\"22\"/>\
             <line class=\"guarantee\" x1=\"{gx:.1}\" x2=\"{gx:.1}\" y1=\"{y0}\" y2=\"{y1}\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{umb} / {gmb} MB guaranteed</text></g>",
            path = esc(&q.path),
            lock = if q.preemption_disabled {
                " (no preemption)"
            } else {
                ""
            },
            g = q.guaranteed,
            m = q.maximum,
            u = q.used,
            p = q.pending,
            ty = y + 16.0,
            mw = x(q.maximum.memory_mb) - LABEL,
            uw = x(q.used.memory_mb) - LABEL,
            px = x(q.used.memory_mb),
            pw = x(q.pending.memory_mb) - LABEL,
            gx = x(q.guaranteed.memory_mb),
            y0 = y - 3.0,
            y1 = y + 25.0,
            tx = LABEL + BAR + 10.0,
            umb = q.used.memory_mb,
            gmb = q.guaranteed.memory_mb,
        );
    }
    h.push_str(
        "</svg><p class=\"legend\"><span class=\"used\">used</span> \
         <span class=\"pending\">pending</span> <span class=\"max\">maximum</span> \
         | guarantee</p></section>\n",
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

fn waits(h: &mut String, ws: &[WaitPoint]) {
    h.push_str("<section id=\"waits\"><h2>Short-job waiting time</h2>");
    if ws.is_empty() {
        h.push_str("<p class=\"empty\">No short job has started yet.</p></section>\n");
        return;
    }
    const W: f64 = 900.0;
    const H: f64 = 220.0;
    const PAD: f64 = 50.0;
    let t0 = ws.iter().map(|w| w.at_ms).min().unwrap_or(0);
    let t1 = ws.iter().map(|w| w.at_ms).max().unwrap_or(0).max(t0 + 1);
    let top = ws.iter().map(|w| w.wait_ms).max().unwrap_or(0).max(1) as f64;
    let px = |at: u64| PAD + (W - 2.0 * PAD) * ((at - t0) as f64 / (t1 - t0) as f64);
    let py = |wait: u64| H - PAD + -(H - 2.0 * PAD) * (wait as f64 / top);
    let points: Vec<String> = ws
        .iter()
        .map(|w| format!("{:.1},{:.1}", px(w.at_ms), py(w.wait_ms)))
        .collect();
    let _ = write!(
        h,
        "<svg class=\"chart\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\">\
         <line class=\"axis\" x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/>\
         <line class=\"axis\" x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\"/>\
         <text x=\"4\" y=\"{PAD}\">{top_s:.1} s</text><text x=\"4\" y=\"{b}\">0 s</text>\
         <text x=\"{PAD}\" y=\"{tl}\">{from}</text>\
         <text x=\"{r}\" y=\"{tl}\" text-anchor=\"end\">{to}</text>\
         <polyline class=\"wait\" points=\"{pts}\"/>",
        b = H - PAD,
        r = W - PAD,
        tl = H - PAD + 20.0,
        top_s = top / 1000.0,
        from = utc_millis(t0),
        to = utc_millis(t1),
        pts = points.join(" "),
    );
    for w in ws {
        let _ = write!(
            h,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"><title>{}: {} ms</title></circle>",
            px(w.at_ms),
            py(w.wait_ms),
            esc(&w.application),
            w.wait_ms
        );
    }
    h.push_str("</svg></section>\n");
}

const HEAD: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Preemptor</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #1d2430; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 22px 0 8px; }
h3 { font-size: 14px; margin: 12px 0 4px; } small { color: #5b6472; font-weight: normal; }
table { border-collapse: collapse; font-size: 12px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #e3e6ea; white-space: nowrap; }
tr.failed td { background: #fde8e8; } tr.observed td { color: #6b7280; }
tr.live td { animation: flash 2s; }
@keyframes flash { from { background: #fff6bf; } to { background: transparent; } }
td.act.suspend, td.act.kill { color: #b91c1c; font-weight: 600; }
td.act.shrink { color: #b45309; font-weight: 600; } td.act.resume { color: #15803d; font-weight: 600; }
#log, .node { overflow-x: auto; }
.bad { color: #b91c1c; } .empty { color: #6b7280; }
svg text { font-size: 12px; fill: #1d2430; }
rect.max { fill: #e5e7eb; } rect.used { fill: #2563eb; } rect.pending { fill: #93c5fd; }
line.guarantee { stroke: #111827; stroke-width: 2; } line.axis { stroke: #9ca3af; }
polyline.wait { fill: none; stroke: #dc2626; stroke-width: 2; } circle { fill: #dc2626; }
.legend span { padding: 0 6px; } .legend .used { background: #2563eb; color: #fff; }
.legend .pending { background: #93c5fd; } .legend .max { background: #e5e7eb; }
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
      ["summary", "queues", "apps", "nodes", "waits"].forEach(function (id) {
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
    use crate::controller::hub::{NodeStatus, QueueStatus};
    use crate::resources::{Limits, Resource};
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
                used: Resource::new(2048, 2),
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
            waits: vec![
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
            "2048 / 8192 MB guaranteed",
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
            "class=\"wait\" points=\"50.0,50.0 850.0,",
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
    }

    #[test]
    fn empty_status_renders_placeholders() {
        let snap = Snapshot {
            status: Arc::new(StatusReport::default()),
            actions: vec![],
            waits: vec![],
            missed: 3,
        };
        let html = page(&snap);
        assert!(html.contains("No queues observed yet."));
        assert!(html.contains("id=\"log-empty\""));
        assert!(html.contains("No short job has started yet."));
        assert!(html.contains("No RUNNING or ACCEPTED application."));
        assert!(html.contains("3 events arrived faster"));
    }
}
