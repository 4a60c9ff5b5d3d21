//! The dashboard's charts of the last minutes, inline SVG on one shared time axis: per
//! leaf queue its used against guaranteed dominant share, the containers held, and the
//! short-job waits.

use std::fmt::Write as _;

use super::esc;
use crate::controller::history::{Binding, HistoryReport, MAX_QUEUES, Sample, WINDOW_MS};

/// The shortest span charted, so that a first tick is not stretched over the width.
const MIN_SPAN_MS: u64 = 60_000;

/// The time axis every chart shares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub t0: u64,
    pub t1: u64,
}

impl Span {
    /// From the oldest to the newest of the samples, the waits and `now_ms`, within the
    /// history's window; `None` before anything was observed.
    pub fn of(h: &HistoryReport, now_ms: u64) -> Option<Span> {
        let times = || {
            (h.samples.iter().map(|s| s.at_ms))
                .chain(h.waits.iter().map(|w| w.at_ms))
                .chain((now_ms > 0).then_some(now_ms))
        };
        let t1 = times().max()?;
        let oldest = times().min().unwrap_or(t1);
        let t0 = oldest
            .max(t1.saturating_sub(WINDOW_MS))
            .min(t1.saturating_sub(MIN_SPAN_MS));
        Some(Span { t0, t1 })
    }

    fn frac(&self, at: u64) -> f64 {
        let len = self.t1.saturating_sub(self.t0).max(1) as f64;
        (at.saturating_sub(self.t0) as f64 / len).min(1.0)
    }
}

/// A plot area inside an SVG, in pixels.
struct Plot {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    span: Span,
    /// The value at the top edge.
    top: f64,
}

impl Plot {
    fn px(&self, at: u64) -> f64 {
        self.x + self.w * self.span.frac(at)
    }

    fn py(&self, v: f64) -> f64 {
        let f = if self.top > 0.0 { v / self.top } else { 0.0 };
        self.y + self.h * (1.0 - f.clamp(0.0, 1.0))
    }

    fn bottom(&self) -> f64 {
        self.y + self.h
    }

    /// Grid lines with labels at the left, the time ticks below, and a shaded band
    /// wherever the RM did not answer (the values there are the last ones it gave).
    fn frame(&self, h: &mut String, samples: &[Sample], ys: &[(f64, String)]) {
        for pair in samples.windows(2) {
            if !pair[1].rm_reachable {
                let (a, b) = (self.px(pair[0].at_ms), self.px(pair[1].at_ms));
                let _ = write!(
                    h,
                    "<rect class=\"unreachable\" x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" \
                     height=\"{:.1}\"><title>RM unreachable</title></rect>",
                    self.y,
                    (b - a).max(1.0),
                    self.h
                );
            }
        }
        for (v, label) in ys {
            let y = self.py(*v);
            let _ = write!(
                h,
                "<line class=\"grid\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
                 <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                self.x,
                self.x + self.w,
                self.x - 4.0,
                y + 4.0,
                esc(label)
            );
        }
        let span_ms = self.span.t1 - self.span.t0;
        let step = [10_000u64, 30_000, 60_000, 120_000, 300_000]
            .into_iter()
            .find(|s| span_ms / s <= 5)
            .unwrap_or(300_000);
        let ty = self.bottom() + 13.0;
        let mut back = step;
        // Clear of the left edge and of the clock time at the right edge.
        let room = |x: f64| x > self.x + 20.0 && x < self.x + self.w - 70.0;
        while back <= span_ms {
            let x = self.px(self.span.t1 - back);
            let label = if step >= 60_000 {
                format!("−{} min", back / 60_000)
            } else {
                format!("−{} s", back / 1000)
            };
            if room(x) {
                let _ = write!(
                    h,
                    "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
                     <text class=\"tick\" x=\"{x:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\">{label}</text>",
                    self.y,
                    self.bottom(),
                );
            }
            back += step;
        }
        let _ = write!(
            h,
            "<line class=\"axis\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{b:.1}\" y2=\"{b:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{ty:.1}\" text-anchor=\"end\">{} UTC</text>",
            self.x,
            self.x + self.w,
            self.x + self.w,
            clock(self.span.t1),
            b = self.bottom(),
        );
    }
}

/// `HH:MM:SS` of a Unix time in milliseconds, UTC.
fn clock(at_ms: u64) -> String {
    let s = at_ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// Runs of consecutive present points, each drawn as one line (a queue missing from
/// some samples leaves a gap).
fn runs(points: impl IntoIterator<Item = Option<(f64, f64)>>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for p in points {
        match (p, out.last_mut()) {
            (Some(p), Some(run)) => run.push(p),
            (None, Some(run)) if !run.is_empty() => out.push(Vec::new()),
            _ => {}
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

fn points(run: &[(f64, f64)]) -> String {
    let mut s = String::with_capacity(run.len() * 12);
    for (x, y) in run {
        let _ = write!(s, "{x:.1},{y:.1} ");
    }
    s.pop();
    s
}

/// The smallest of 1, 2, 5 × 10^k at or above `v` (at least `min`).
fn nice_top(v: f64, min: f64) -> f64 {
    let v = v.max(min);
    let mut unit = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * unit >= v - 1e-9 {
            unit *= m;
            return unit;
        }
    }
    v
}

const QUEUE_W: f64 = 400.0;
const QUEUE_H: f64 = 150.0;
const WIDE_W: f64 = 592.0;
const WIDE_H: f64 = 190.0;

/// Small multiples: per leaf queue (the latest sample's), used and guaranteed as a
/// dominant share of the cluster, all on one scale.
pub fn shares(h: &mut String, hist: &HistoryReport, span: Option<Span>) {
    h.push_str("<section id=\"shares\"><h2>Queues over the last ");
    match span {
        Some(s) => {
            let _ = write!(h, "{} min", (s.t1 - s.t0).div_ceil(60_000));
        }
        None => h.push_str("minutes"),
    }
    h.push_str(
        " <small>used vs guaranteed, as a dominant share of the cluster (the larger of \
         memory and vcores)</small></h2>",
    );
    let (Some(span), Some(last)) = (span, hist.samples.last()) else {
        h.push_str("<p class=\"empty\">No tick observed yet.</p></section>\n");
        return;
    };
    if last.queues.is_empty() {
        h.push_str("<p class=\"empty\">No queues observed yet.</p></section>\n");
        return;
    }
    let highest = (hist.samples.iter().flat_map(|s| &s.queues))
        .map(|q| q.used.max(q.guaranteed))
        .fold(0.0, f64::max);
    let top = (highest / 0.25).ceil().max(1.0) * 0.25;
    let ys: Vec<(f64, String)> = [0.0, top / 2.0, top]
        .into_iter()
        .map(|v| (v, percent(v)))
        .collect();
    h.push_str("<div class=\"multiples\">");
    for q in &last.queues {
        let plot = Plot {
            x: 38.0,
            y: 38.0,
            w: QUEUE_W - 38.0 - 8.0,
            h: QUEUE_H - 38.0 - 18.0,
            span,
            top,
        };
        let track = |pick: fn(&crate::controller::history::QueueShare) -> f64| {
            runs(hist.samples.iter().map(|s| {
                (s.queues.iter().find(|o| o.path == q.path))
                    .map(|o| (plot.px(s.at_ms), plot.py(pick(o))))
            }))
        };
        let binds = match q.binds {
            Binding::Memory => "memory",
            Binding::Vcores => "vcores",
            Binding::Both => "both",
        };
        // Below its guarantee while asking for more: what the policy reclaims for.
        let starved = q.used + 1e-9 < q.guaranteed && q.pending > 0.0;
        let _ = write!(
            h,
            "<figure class=\"share\" data-queue=\"{path}\" data-binds=\"{binds}\">\
             <svg width=\"{QUEUE_W}\" height=\"{QUEUE_H}\" viewBox=\"0 0 {QUEUE_W} {QUEUE_H}\">\
             <text class=\"title\" x=\"2\" y=\"14\">{path}</text>\
             <text class=\"binds\" x=\"{right}\" y=\"14\" text-anchor=\"end\">{phrase}</text>\
             <text class=\"now\" x=\"2\" y=\"29\">used <tspan class=\"{used_class}\">{used}</tspan> \
             · guaranteed {guaranteed} · pending {pending}</text>",
            path = esc(&q.path),
            right = QUEUE_W - 4.0,
            phrase = q.binds.phrase(),
            used_class = if starved { "starved" } else { "used" },
            used = percent(q.used),
            guaranteed = percent(q.guaranteed),
            pending = percent(q.pending),
        );
        plot.frame(h, &hist.samples, &ys);
        for run in track(|o| o.used) {
            let (Some(first), Some(last)) = (run.first(), run.last()) else {
                continue;
            };
            let _ = write!(
                h,
                "<polygon class=\"used-area\" points=\"{:.1},{b:.1} {} {:.1},{b:.1}\"/>\
                 <polyline class=\"used\" points=\"{}\"/>",
                first.0,
                points(&run),
                last.0,
                points(&run),
                b = plot.bottom(),
            );
        }
        for run in track(|o| o.guaranteed) {
            let _ = write!(
                h,
                "<polyline class=\"guaranteed\" points=\"{}\"/>",
                points(&run)
            );
        }
        let _ = write!(
            h,
            "<circle class=\"used\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"/></svg></figure>",
            plot.px(last.at_ms),
            plot.py(q.used)
        );
    }
    h.push_str(
        "</div><p class=\"legend\"><span class=\"key used\"></span>used \
                <span class=\"key guaranteed\"></span>guaranteed \
                <span class=\"key unreachable\"></span>RM unreachable</p>",
    );
    if last.omitted_queues > 0 {
        let _ = write!(
            h,
            "<p class=\"empty\">{} more leaf queues are not charted (at most {MAX_QUEUES}).</p>",
            last.omitted_queues
        );
    }
    h.push_str("</section>\n");
}

/// Suspended and shrunk containers over time, as steps.
pub fn held(h: &mut String, hist: &HistoryReport, span: Option<Span>) {
    let (Some(span), Some(last)) = (span, hist.samples.last()) else {
        h.push_str(
            "<section id=\"held\" class=\"wide\"><h2>Containers held</h2>\
             <p class=\"empty\">No tick observed yet.</p></section>\n",
        );
        return;
    };
    let peak = |f: fn(&Sample) -> usize| hist.samples.iter().map(f).max().unwrap_or(0);
    let (peak_s, peak_r) = (peak(|s| s.suspended), peak(|s| s.shrunk));
    let top = peak_s.max(peak_r).max(1) as f64;
    let plot = Plot {
        x: 38.0,
        y: 12.0,
        w: WIDE_W - 38.0 - 8.0,
        h: WIDE_H - 12.0 - 18.0,
        span,
        top,
    };
    let _ = write!(
        h,
        "<section id=\"held\" class=\"wide\" data-suspended=\"{s}\" data-shrunk=\"{r}\">\
         <h2>Containers held</h2><p class=\"legend\">\
         <span class=\"key suspended\"></span>suspended: <b>{s}</b> now, peak {peak_s} \
         <span class=\"key shrunk\"></span>shrunk: <b>{r}</b> now, peak {peak_r}</p>\
         <svg width=\"{WIDE_W}\" height=\"{WIDE_H}\" viewBox=\"0 0 {WIDE_W} {WIDE_H}\">",
        s = last.suspended,
        r = last.shrunk,
    );
    // Every count while few, else the ends and the middle.
    let ys: Vec<(f64, String)> = if top <= 6.0 {
        (0..=top as usize)
            .map(|n| (n as f64, n.to_string()))
            .collect()
    } else {
        let mid = (top / 2.0).round();
        [0.0, mid, top].map(|v| (v, format!("{v}"))).to_vec()
    };
    plot.frame(h, &hist.samples, &ys);
    for (class, pick) in [
        ("shrunk", (|s: &Sample| s.shrunk) as fn(&Sample) -> usize),
        ("suspended", |s: &Sample| s.suspended),
    ] {
        let mut steps = Vec::with_capacity(hist.samples.len() * 2);
        let mut prev: Option<f64> = None;
        for s in &hist.samples {
            let (x, y) = (plot.px(s.at_ms), plot.py(pick(s) as f64));
            if let Some(p) = prev {
                steps.push((x, p));
            }
            steps.push((x, y));
            prev = Some(y);
        }
        let _ = write!(
            h,
            "<polyline class=\"{class}\" points=\"{}\"/>",
            points(&steps)
        );
    }
    h.push_str("</svg></section>\n");
}

/// Each short application's wait for its first container, when it got it.
pub fn waits(h: &mut String, hist: &HistoryReport, span: Option<Span>) {
    h.push_str("<section id=\"waits\" class=\"wide\"><h2>Short-job waits</h2>");
    let ws = &hist.waits;
    let Some(span) = span.filter(|_| !ws.is_empty()) else {
        h.push_str(
            "<p class=\"empty\">No short job has started in the last minutes.</p></section>\n",
        );
        return;
    };
    let mut sorted: Vec<u64> = ws.iter().map(|w| w.wait_ms).collect();
    sorted.sort_unstable();
    let median = sorted[(sorted.len() - 1) / 2];
    let max = sorted[sorted.len() - 1];
    let top = nice_top(max as f64 / 1000.0, 1.0);
    let _ = write!(
        h,
        "<p class=\"legend\"><span class=\"key wait\"></span>{n} short job{plural} started: \
         median <b>{:.1} s</b>, longest <b>{:.1} s</b></p>\
         <svg width=\"{WIDE_W}\" height=\"{WIDE_H}\" viewBox=\"0 0 {WIDE_W} {WIDE_H}\">",
        median as f64 / 1000.0,
        max as f64 / 1000.0,
        n = ws.len(),
        plural = if ws.len() == 1 { "" } else { "s" },
    );
    let plot = Plot {
        x: 38.0,
        y: 12.0,
        w: WIDE_W - 38.0 - 8.0,
        h: WIDE_H - 12.0 - 18.0,
        span,
        top,
    };
    let ys = [
        (0.0, "0 s".to_string()),
        (top / 2.0, format!("{} s", top / 2.0)),
        (top, format!("{top} s")),
    ];
    plot.frame(h, &hist.samples, &ys);
    let at = |w: &crate::controller::api::WaitPoint| {
        (plot.px(w.at_ms), plot.py(w.wait_ms as f64 / 1000.0))
    };
    let line: Vec<(f64, f64)> = ws.iter().map(at).collect();
    let _ = write!(h, "<polyline class=\"wait\" points=\"{}\"/>", points(&line));
    for w in ws {
        let (x, y) = at(w);
        let _ = write!(
            h,
            "<circle class=\"wait\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\">\
             <title>{} at {} UTC: waited {} ms</title></circle>",
            esc(&w.application),
            clock(w.at_ms),
            w.wait_ms
        );
    }
    h.push_str("</svg></section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_span_covers_the_window_and_at_least_a_minute() {
        let report = |at: &[u64]| HistoryReport {
            window_ms: WINDOW_MS,
            samples: at
                .iter()
                .map(|&at_ms| Sample {
                    at_ms,
                    rm_reachable: true,
                    suspended: 0,
                    shrunk: 0,
                    queues: vec![],
                    omitted_queues: 0,
                })
                .collect(),
            waits: vec![],
        };
        assert_eq!(Span::of(&report(&[]), 0), None);
        let s = Span::of(&report(&[1_000_000]), 1_000_000);
        assert_eq!(
            s,
            Some(Span {
                t0: 940_000,
                t1: 1_000_000
            })
        );
        let s = Span::of(&report(&[0, 2_000_000]), 2_000_000);
        assert_eq!(s.map(|s| s.t1 - s.t0), Some(WINDOW_MS));
    }

    #[test]
    fn runs_break_where_a_point_is_missing() {
        let r = runs([
            Some((1.0, 1.0)),
            None,
            None,
            Some((2.0, 2.0)),
            Some((3.0, 3.0)),
        ]);
        assert_eq!(r, vec![vec![(1.0, 1.0)], vec![(2.0, 2.0), (3.0, 3.0)]]);
        assert_eq!(points(&r[1]), "2.0,2.0 3.0,3.0");
    }

    #[test]
    fn nice_tops_round_up() {
        assert_eq!(nice_top(8.2, 1.0), 10.0);
        assert_eq!(nice_top(0.4, 1.0), 1.0);
        assert_eq!(nice_top(1.5, 1.0), 2.0);
        assert_eq!(nice_top(31.0, 1.0), 50.0);
        assert_eq!(clock(1_795_000_000_000), "11:06:40");
    }
}
