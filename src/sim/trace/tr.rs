//! The Eagle/Hawk simulator's `.tr` format: one job per line,
//! `<arrival s> <tasks n> <mean task s> <task 1 s> ... <task n s>`, space separated.

use std::path::Path;

use super::TraceOptions;
use crate::sim::error::SimError;
use crate::sim::workload::{JobKind, JobSpec, SLOT, Workload, classify_mean, secs, to_secs};

/// Longest task or arrival time accepted, to keep every sum far from overflow (~31 years).
const MAX_SECS: f64 = 1e9;

pub fn parse(path: &Path, text: &str, opts: &TraceOptions) -> Result<Workload, SimError> {
    let (family, cutoff) = opts.resolve(path)?;
    let mut jobs = Vec::new();
    let mut durations: Vec<u64> = Vec::with_capacity(text.len() / 12);
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |msg: String| SimError::input(path, lineno, msg);
        let mut fields = line.split_ascii_whitespace();
        let arrival = number(fields.next(), "arrival time", 1).map_err(err)?;
        let n_field = fields
            .next()
            .ok_or_else(|| err(missing("number of tasks", 2)))?;
        let n: u32 = n_field.parse().map_err(|_| {
            err(format!(
                "field 2 (number of tasks) must be a whole number, found {n_field:?}"
            ))
        })?;
        if n == 0 {
            return Err(err("a job needs at least one task (field 2 is 0)".into()));
        }
        let mean = number(fields.next(), "mean task duration", 3).map_err(err)?;
        let first = u32::try_from(durations.len())
            .map_err(|_| err("trace has more than 4 billion tasks".into()))?;
        for k in 0..n as usize {
            let d = number(fields.next(), "task duration", 4 + k).map_err(|m| {
                err(if m.starts_with("missing") {
                    format!("the job declares {n} tasks but lists only {k} durations")
                } else {
                    m
                })
            })?;
            durations.push(secs(d));
        }
        if fields.next().is_some() {
            let extra = line.split_ascii_whitespace().count() - 3;
            return Err(err(format!(
                "the job declares {n} tasks but lists {extra} durations"
            )));
        }
        // The trace's own mean drives classification, as in the Eagle simulator.
        jobs.push(JobSpec {
            arrival: secs(arrival),
            first_task: first,
            num_tasks: n,
            estimate: secs(mean),
            class: classify_mean(mean, cutoff),
            queue: 0,
            kind: JobKind::Trace,
        });
    }
    if jobs.is_empty() {
        return Err(SimError::file(path, "the trace holds no jobs"));
    }
    jobs.sort_by_key(|j| j.arrival);
    Ok(Workload {
        name: super::display_name(path),
        family,
        jobs,
        durations,
        task_shape: vec![],
        shapes: vec![SLOT],
        queues: vec!["default".into()],
        cutoff_secs: Some(cutoff),
        suggested_cluster: None,
    })
}

/// Write `wl` as a `.tr` trace (seconds, full precision).
pub fn write(wl: &Workload, w: &mut impl std::io::Write) -> std::io::Result<()> {
    for j in &wl.jobs {
        write!(
            w,
            "{} {} {}",
            to_secs(j.arrival),
            j.num_tasks,
            to_secs(j.estimate)
        )?;
        for &d in &wl.durations[wl.job_tasks(j)] {
            write!(w, " {}", to_secs(d))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

fn missing(what: &str, field: usize) -> String {
    format!("missing field {field} ({what})")
}

fn number(field: Option<&str>, what: &str, index: usize) -> Result<f64, String> {
    let s = field.ok_or_else(|| missing(what, index))?;
    let v: f64 = s
        .parse()
        .map_err(|_| format!("field {index} ({what}) is not a number: {s:?}"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "field {index} ({what}) must be a finite, non-negative number of seconds, found {s}"
        ));
    }
    if v > MAX_SECS {
        return Err(format!(
            "field {index} ({what}) is {s} s, more than the {MAX_SECS} s the simulator accepts"
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::JobClass;
    use crate::sim::workload::TraceFamily;

    fn opts() -> TraceOptions {
        TraceOptions {
            family: Some(TraceFamily::Yahoo),
            ..TraceOptions::default()
        }
    }

    #[test]
    fn parses_jobs_and_classifies_by_cutoff() {
        let text = "10 3 20 10 20 30\n\n# comment\n5 1 100.5 100.5\n";
        let w = parse(Path::new("t.tr"), text, &opts()).unwrap();
        assert_eq!(w.jobs.len(), 2);
        // Sorted by arrival.
        assert_eq!(w.jobs[0].arrival, secs(5.0));
        assert_eq!(w.jobs[0].class, JobClass::Long);
        assert_eq!(w.jobs[1].class, JobClass::Short);
        assert_eq!(w.jobs[1].num_tasks, 3);
        assert_eq!(
            &w.durations[w.job_tasks(&w.jobs[1])],
            &[secs(10.0), secs(20.0), secs(30.0)]
        );
        assert_eq!(w.cutoff_secs, Some(90.5811));
    }

    #[test]
    fn errors_name_the_file_line_and_field() {
        let cases = [
            (
                "1 2 3 4\n",
                "t.tr:1: the job declares 2 tasks but lists only 1 durations",
            ),
            (
                "1 1 3 4 5\n",
                "t.tr:1: the job declares 1 tasks but lists 2 durations",
            ),
            (
                "1 1 3 4\nx 1 1 1\n",
                "t.tr:2: field 1 (arrival time) is not a number: \"x\"",
            ),
            (
                "1 0 3\n",
                "t.tr:1: a job needs at least one task (field 2 is 0)",
            ),
            (
                "1 1.5 3 3\n",
                "t.tr:1: field 2 (number of tasks) must be a whole number",
            ),
            (
                "1 1 3 -4\n",
                "t.tr:1: field 4 (task duration) must be a finite, non-negative",
            ),
            (
                "1 1 3 inf\n",
                "t.tr:1: field 4 (task duration) must be a finite",
            ),
            (
                "1 1 3 1e308\n",
                "t.tr:1: field 4 (task duration) is 1e308 s, more than the 1000000000 s",
            ),
            ("1\n", "t.tr:1: missing field 2 (number of tasks)"),
            ("\n\n", "t.tr: the trace holds no jobs"),
        ];
        for (text, want) in cases {
            let e = parse(Path::new("t.tr"), text, &opts())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{text:?}: got {e}");
        }
    }

    #[test]
    fn written_traces_read_back_the_same() {
        let text = "10 3 20 10 20 30\n5 1 100.5 100.25\n";
        let w = parse(Path::new("t.tr"), text, &opts()).unwrap();
        let mut out = Vec::new();
        write(&w, &mut out).unwrap();
        let again = parse(
            Path::new("t.tr"),
            std::str::from_utf8(&out).unwrap(),
            &opts(),
        )
        .unwrap();
        // Tasks are stored in file order, jobs sorted by arrival: compare job by job.
        let jobs = |w: &Workload| -> Vec<(JobSpec, Vec<u64>)> {
            w.jobs
                .iter()
                .map(|j| {
                    (
                        JobSpec {
                            first_task: 0,
                            ..*j
                        },
                        w.durations[w.job_tasks(j)].to_vec(),
                    )
                })
                .collect()
        };
        assert_eq!(jobs(&w), jobs(&again));
    }

    #[test]
    fn an_explicit_cutoff_overrides_the_family() {
        let w = parse(
            Path::new("mine.tr"),
            "1 1 1 1\n",
            &TraceOptions {
                cutoff_secs: Some(0.5),
                ..TraceOptions::default()
            },
        )
        .unwrap();
        assert_eq!(w.jobs[0].class, JobClass::Long);
    }
}
