//! SVG plots (plotters): job completion time CDFs per scheduler, and utilization over
//! time.

use std::path::{Path, PathBuf};

use plotters::coord::CoordTranslate;
use plotters::prelude::*;

use crate::cluster::JobClass;
use crate::sim::error::SimError;
use crate::sim::report::SimReport;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// At most this many points per curve, so SVGs stay small on 500,000-job runs.
const MAX_POINTS: usize = 2000;

/// Write `cdf-short.svg`, `cdf-long.svg` and `utilization.svg` into `dir`, one curve per
/// report. Returns the files written.
pub fn write_all(dir: &Path, reports: &[SimReport], title: &str) -> Result<Vec<PathBuf>, SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    let mut written = Vec::new();
    for class in [JobClass::Short, JobClass::Long] {
        let path = dir.join(format!("cdf-{class}.svg"));
        if cdf(&path, reports, class, title)? {
            written.push(path);
        }
    }
    let path = dir.join("utilization.svg");
    utilization(&path, reports, title)?;
    written.push(path);
    Ok(written)
}

fn plot_err(path: &Path, e: impl std::fmt::Display) -> SimError {
    SimError::Plot {
        path: path.to_path_buf(),
        msg: e.to_string(),
    }
}

/// The series legend, bottom right, the same on every plot.
fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    path: &Path,
) -> Result<(), SimError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_err(path, e))
}

/// Evenly thinned (x, fraction) points of the CDF of sorted `v`.
fn cdf_points(v: &[f64]) -> Vec<(f64, f64)> {
    let n = v.len();
    let step = n.div_ceil(MAX_POINTS).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    if let Some(&last) = v.last()
        && pts.last().is_some_and(|p| p.1 < 1.0)
    {
        pts.push((last, 1.0));
    }
    pts
}

fn cdf(path: &Path, reports: &[SimReport], class: JobClass, title: &str) -> Result<bool, SimError> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = reports
        .iter()
        .filter(|r| !r.class(class).completion_samples.is_empty())
        .map(|r| {
            (
                r.scheduler.as_str(),
                cdf_points(&r.class(class).completion_samples),
            )
        })
        .collect();
    if curves.is_empty() {
        return Ok(false);
    }
    let lo = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let hi = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(0.0f64, f64::max)
        .max(lo * 10.0);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}: {class} jobs, completion time CDF"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)
        .map_err(|e| plot_err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("job completion time (s, log scale)")
        .y_desc("fraction of jobs")
        .draw()
        .map_err(|e| plot_err(path, e))?;
    for (i, (name, pts)) in curves.into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                pts.into_iter().map(|(x, y)| (x.max(lo), y)),
                color.stroke_width(2),
            ))
            .map_err(|e| plot_err(path, e))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    legend(&mut chart, path)?;
    root.present().map_err(|e| plot_err(path, e))?;
    Ok(true)
}

fn utilization(path: &Path, reports: &[SimReport], title: &str) -> Result<(), SimError> {
    let t0 = reports
        .iter()
        .filter_map(|r| r.utilization.samples.first().map(|s| s.t))
        .fold(f64::INFINITY, f64::min);
    let t0 = if t0.is_finite() { t0 } else { 0.0 };
    let t1 = reports
        .iter()
        .filter_map(|r| r.utilization.samples.last().map(|s| s.t))
        .fold(t0 + 1.0, f64::max);
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: cluster utilization"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..(t1 - t0), 0.0..1.05)
        .map_err(|e| plot_err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("time since the first arrival (s)")
        .y_desc("share of vcores running tasks")
        .draw()
        .map_err(|e| plot_err(path, e))?;
    for (i, r) in reports.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let s = &r.utilization.samples;
        let step = s.len().div_ceil(MAX_POINTS).max(1);
        chart
            .draw_series(LineSeries::new(
                s.iter().step_by(step).map(|u| (u.t - t0, u.effective)),
                color.stroke_width(1),
            ))
            .map_err(|e| plot_err(path, e))?
            .label(r.scheduler.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    legend(&mut chart, path)?;
    root.present().map_err(|e| plot_err(path, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_points_are_thinned_and_end_at_one() {
        let v: Vec<f64> = (1..=10_000).map(f64::from).collect();
        let p = cdf_points(&v);
        assert!(p.len() <= MAX_POINTS + 1);
        assert_eq!(p.last(), Some(&(10_000.0, 1.0)));
        assert!(p.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
    }
}
