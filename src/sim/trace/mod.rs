//! Trace readers and generators. Every reader turns its input into a [`Workload`] with
//! errors that name the file and line.

pub mod sls;
pub mod synth;
pub mod tr;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::cluster::JobClass;
use crate::config::settings::PolicySettings;
use crate::resources::Resource;
use crate::sim::error::SimError;
use crate::sim::workload::{TraceFamily, Workload};

/// Input formats `preemptor sim` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Eagle/Hawk `.tr`.
    Tr,
    /// YARN SLS JSON jobs.
    Sls,
}

impl FromStr for TraceFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tr" => Ok(TraceFormat::Tr),
            "sls" | "json" => Ok(TraceFormat::Sls),
            other => Err(format!(
                "unknown trace format {other:?} (expected tr or sls)"
            )),
        }
    }
}

/// How to read and classify a trace.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    pub format: Option<TraceFormat>,
    /// Overrides the family guessed from the file name.
    pub family: Option<TraceFamily>,
    /// Overrides the family's cutoff (mean task seconds).
    pub cutoff_secs: Option<f64>,
    /// Queues whose jobs are short or long whatever their runtime (SLS only).
    pub queue_classes: Vec<(String, JobClass)>,
    /// Container of SLS tasks that do not give one.
    pub default_container: Option<Resource>,
}

impl TraceOptions {
    /// The trace family and the short/long cutoff: an explicit cutoff, else the family's
    /// (docs/algorithms.md), else Preemptor's `yarn.preemptor.class.cutoff-seconds` default.
    pub fn resolve(&self, path: &Path) -> Result<(TraceFamily, f64), SimError> {
        let family = self
            .family
            .unwrap_or_else(|| TraceFamily::from_file_name(&path.to_string_lossy()));
        let cutoff = match self.cutoff_secs {
            Some(c) if c.is_finite() && c > 0.0 => c,
            Some(c) => {
                return Err(SimError::Setting(format!(
                    "--cutoff must be a positive number of seconds, got {c}"
                )));
            }
            None => family
                .cutoff_secs()
                .unwrap_or_else(|| PolicySettings::default().class_cutoff_secs),
        };
        Ok((family, cutoff))
    }

    pub(crate) fn queue_class(&self, queue: &str) -> Option<JobClass> {
        self.queue_classes
            .iter()
            .find(|(q, _)| q == queue || q.rsplit('.').next() == Some(queue))
            .map(|(_, c)| *c)
    }
}

/// Read a trace file, choosing the format from `opts.format`, else the extension, else
/// the first non-blank character (`{` or `[` means SLS JSON).
pub fn load(path: &Path, opts: &TraceOptions) -> Result<Workload, SimError> {
    let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
    let format = opts.format.unwrap_or_else(|| sniff(path, &text));
    match format {
        TraceFormat::Tr => tr::parse(path, &text, opts),
        TraceFormat::Sls => sls::parse(path, &text, opts),
    }
}

fn sniff(path: &Path, text: &str) -> TraceFormat {
    match path.extension().and_then(|e| e.to_str()) {
        Some("tr") => TraceFormat::Tr,
        Some("json") => TraceFormat::Sls,
        _ => match text.trim_start().as_bytes().first() {
            Some(b'{') | Some(b'[') => TraceFormat::Sls,
            _ => TraceFormat::Tr,
        },
    }
}

/// The traces shipped in the repository's `traces/` (or `PREEMPTOR_TRACES`), for tests,
/// benchmarks and examples.
pub fn bundled_traces_dir() -> PathBuf {
    match std::env::var_os("PREEMPTOR_TRACES") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("traces"),
    }
}

pub(crate) fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_sniffed_from_extension_then_content() {
        assert_eq!(sniff(Path::new("a.tr"), "{"), TraceFormat::Tr);
        assert_eq!(sniff(Path::new("a.json"), "1 1 1 1"), TraceFormat::Sls);
        assert_eq!(sniff(Path::new("a"), "  \n{\"job\""), TraceFormat::Sls);
        assert_eq!(sniff(Path::new("a"), "1 1 1 1"), TraceFormat::Tr);
        assert_eq!("SLS".parse::<TraceFormat>(), Ok(TraceFormat::Sls));
        assert!("csv".parse::<TraceFormat>().is_err());
    }

    #[test]
    fn cutoff_falls_back_to_the_family_then_the_preemptor_default() {
        let o = TraceOptions::default();
        assert_eq!(o.resolve(Path::new("GOOG.tr")).unwrap().1, 1129.532);
        assert_eq!(
            o.resolve(Path::new("mine.tr")).unwrap().1,
            PolicySettings::default().class_cutoff_secs
        );
        let bad = TraceOptions {
            cutoff_secs: Some(-1.0),
            ..TraceOptions::default()
        };
        assert!(bad.resolve(Path::new("x.tr")).is_err());
    }

    #[test]
    fn missing_files_are_reported_with_their_path() {
        let e = load(Path::new("/nonexistent/x.tr"), &TraceOptions::default()).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/x.tr: "), "{e}");
    }

    #[test]
    fn bundled_traces_load_with_their_published_statistics() {
        let path = crate::sim::testutil::bundled_trace("yahoo_sub1.tr");
        let w = load(&path, &TraceOptions::default()).unwrap();
        assert_eq!(w.jobs.len(), 2910);
        assert_eq!(w.num_tasks(), 122_878);
        let short = w.count(JobClass::Short) as f64 / w.jobs.len() as f64;
        assert!((short - 0.905).abs() < 0.001, "{short}");
        assert!((w.short_task_seconds_share() - 0.015).abs() < 0.001);
        let (a, b) = w.span();
        assert!((crate::sim::workload::to_secs(b - a) - 25_805.0).abs() < 1.0);
    }
}
