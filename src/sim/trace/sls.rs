//! YARN Scheduler Load Simulator (SLS) job traces, so users of Hadoop's simulator can
//! replay theirs: a sequence of JSON job objects (SLS reads them back to back; a JSON
//! array of them is accepted too) with `job.start.ms`, `job.queue.name`, `job.tasks[]`
//! and, per task, `duration.ms` or `container.start.ms`/`container.end.ms`, optional
//! `container.memory`, `container.vcores`, `container.priority`, `container.type` and
//! `count`; `job.count` repeats a job. Numbers may be JSON numbers or numeric strings,
//! as SLS parses them with `toString()`. `container.host` is read but not used: the
//! simulator's schedulers place containers themselves.

use std::path::Path;

use serde_json::{Map, Value};

use super::TraceOptions;
use crate::resources::Resource;
use crate::sim::error::SimError;
use crate::sim::workload::{
    JobKind, JobSpec, MICROS_PER_MILLI, Time, Workload, classify_mean, to_secs,
};

/// SLS's defaults (`yarn.sls.container.memory.mb`, `yarn.sls.container.vcores`).
pub const SLS_DEFAULT_CONTAINER: Resource = Resource::new(1024, 1);

/// Upper bound on copies from `job.count` and `count`, so a typo cannot exhaust memory.
const MAX_COUNT: u64 = 1_000_000;

pub fn parse(path: &Path, text: &str, opts: &TraceOptions) -> Result<Workload, SimError> {
    let (family, cutoff) = opts.resolve(path)?;
    let default_container = opts.default_container.unwrap_or(SLS_DEFAULT_CONTAINER);
    let mut b = Builder {
        jobs: Vec::new(),
        durations: Vec::new(),
        task_shape: Vec::new(),
        shapes: Vec::new(),
        queues: Vec::new(),
    };
    let lines = LineIndex::new(text);
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut start = 0;
    loop {
        // The next value starts after the whitespace that follows the previous one.
        start += text[start..].len() - text[start..].trim_start().len();
        let value = match stream.next() {
            None => break,
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                return Err(SimError::input(
                    path,
                    e.line(),
                    format!("not valid JSON: {e}"),
                ));
            }
        };
        let line = lines.line_of(start);
        match value {
            Value::Object(job) => b
                .job(&job, opts, default_container, cutoff)
                .map_err(|m| SimError::input(path, line, m))?,
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let Value::Object(job) = item else {
                        return Err(SimError::input(
                            path,
                            line,
                            format!("element {i} of the job array is not a JSON object"),
                        ));
                    };
                    b.job(job, opts, default_container, cutoff).map_err(|m| {
                        SimError::input(path, line, format!("job array element {i}: {m}"))
                    })?;
                }
            }
            other => {
                return Err(SimError::input(
                    path,
                    line,
                    format!("expected a job object, found {}", kind_of(&other)),
                ));
            }
        }
        start = stream.byte_offset();
    }
    if b.jobs.is_empty() {
        return Err(SimError::file(path, "the SLS trace holds no jobs"));
    }
    b.jobs.sort_by_key(|j| j.arrival);
    if b.shapes.len() <= 1 {
        b.task_shape.clear();
    }
    if b.shapes.is_empty() {
        b.shapes.push(default_container);
    }
    Ok(Workload {
        name: super::display_name(path),
        family,
        jobs: b.jobs,
        durations: b.durations,
        task_shape: b.task_shape,
        shapes: b.shapes,
        queues: b.queues,
        cutoff_secs: Some(cutoff),
        suggested_cluster: None,
    })
}

struct Builder {
    jobs: Vec<JobSpec>,
    durations: Vec<Time>,
    task_shape: Vec<u16>,
    shapes: Vec<Resource>,
    queues: Vec<String>,
}

impl Builder {
    fn job(
        &mut self,
        job: &Map<String, Value>,
        opts: &TraceOptions,
        default_container: Resource,
        cutoff: f64,
    ) -> Result<(), String> {
        let id = job
            .get("job.id")
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| "(no job.id)".into());
        let ctx = |m: String| format!("job {id}: {m}");
        let start_ms = integer(job, "job.start.ms")
            .and_then(|v| v.ok_or_else(|| "missing job.start.ms".to_string()))
            .map_err(ctx)?;
        if let Some(end) = integer(job, "job.end.ms").map_err(ctx)?
            && end < start_ms
        {
            return Err(ctx(format!(
                "job.end.ms ({end}) is before job.start.ms ({start_ms})"
            )));
        }
        let queue = match job.get("job.queue.name") {
            Some(Value::String(q)) if !q.trim().is_empty() => q.trim().to_string(),
            Some(_) => return Err(ctx("job.queue.name must be a non-empty string".into())),
            None => return Err(ctx("missing job.queue.name".into())),
        };
        let copies = integer(job, "job.count").map_err(ctx)?.unwrap_or(1).max(1);
        if copies > MAX_COUNT {
            return Err(ctx(format!("job.count {copies} exceeds {MAX_COUNT}")));
        }
        let tasks = match job.get("job.tasks") {
            Some(Value::Array(t)) if !t.is_empty() => t,
            Some(Value::Array(_)) => return Err(ctx("job.tasks is empty".into())),
            Some(_) => return Err(ctx("job.tasks must be an array".into())),
            None => return Err(ctx("missing job.tasks".into())),
        };
        // Expand the job's tasks once, then stamp out the copies.
        let mut durations = Vec::new();
        let mut shapes = Vec::new();
        let mut kind = JobKind::Trace;
        for (i, t) in tasks.iter().enumerate() {
            let Value::Object(t) = t else {
                return Err(ctx(format!("job.tasks[{i}] is not an object")));
            };
            let tctx = |m: String| ctx(format!("job.tasks[{i}]: {m}"));
            let duration_ms = match integer(t, "duration.ms").map_err(tctx)? {
                Some(d) => d,
                None => {
                    let s = integer(t, "container.start.ms").map_err(tctx)?;
                    let e = integer(t, "container.end.ms").map_err(tctx)?;
                    match (s, e) {
                        (Some(s), Some(e)) => e.saturating_sub(s),
                        _ => {
                            return Err(tctx(
                                "needs duration.ms or both container.start.ms and \
                                 container.end.ms"
                                    .into(),
                            ));
                        }
                    }
                }
            };
            if duration_ms == 0 {
                // SLS itself refuses these ("Duration of a task shouldn't be less or
                // equal to 0").
                return Err(tctx("task duration must be more than 0 ms".into()));
            }
            let memory = integer(t, "container.memory").map_err(tctx)?;
            let vcores = integer(t, "container.vcores").map_err(tctx)?;
            let shape = Resource::new(
                memory.unwrap_or(default_container.memory_mb),
                match vcores {
                    Some(v) => u32::try_from(v)
                        .map_err(|_| tctx(format!("container.vcores {v} is too large")))?,
                    None => default_container.vcores,
                },
            );
            if shape.memory_mb == 0 && shape.vcores == 0 {
                return Err(tctx("container asks for 0 MB and 0 vcores".into()));
            }
            integer(t, "container.priority").map_err(tctx)?;
            if let Some(ty) = t.get("container.type") {
                match ty.as_str().map(str::to_ascii_lowercase).as_deref() {
                    Some("map") | Some("reduce") => kind = JobKind::MapReduce,
                    Some(_) => {}
                    None => return Err(tctx("container.type must be a string".into())),
                }
            }
            let count = integer(t, "count").map_err(tctx)?.unwrap_or(1).max(1);
            if count > MAX_COUNT {
                return Err(tctx(format!("count {count} exceeds {MAX_COUNT}")));
            }
            for _ in 0..count {
                durations.push(duration_ms.saturating_mul(MICROS_PER_MILLI));
                shapes.push(shape);
            }
        }
        let queue_idx = Workload::intern_queue(&mut self.queues, &queue)
            .ok_or_else(|| ctx("more than 65535 distinct queues".into()))?;
        let mean = durations.iter().map(|&d| d as f64).sum::<f64>() / durations.len() as f64;
        let class = opts
            .queue_class(&queue)
            .unwrap_or_else(|| classify_mean(to_secs(mean as Time), cutoff));
        let shape_idx: Vec<u16> = shapes
            .iter()
            .map(|s| self.intern_shape(*s))
            .collect::<Result<_, _>>()
            .map_err(ctx)?;
        for _ in 0..copies {
            let first = u32::try_from(self.durations.len())
                .map_err(|_| ctx("the trace has more than 4 billion tasks".into()))?;
            let n = u32::try_from(durations.len())
                .map_err(|_| ctx("a job has more than 4 billion tasks".into()))?;
            self.durations.extend_from_slice(&durations);
            self.task_shape.extend_from_slice(&shape_idx);
            self.jobs.push(JobSpec {
                arrival: start_ms.saturating_mul(MICROS_PER_MILLI),
                first_task: first,
                num_tasks: n,
                estimate: mean.round() as Time,
                class,
                queue: queue_idx,
                kind,
            });
        }
        Ok(())
    }

    fn intern_shape(&mut self, s: Resource) -> Result<u16, String> {
        if let Some(i) = self.shapes.iter().position(|x| *x == s) {
            return Ok(i as u16);
        }
        let i = u16::try_from(self.shapes.len())
            .map_err(|_| "more than 65535 distinct container sizes".to_string())?;
        self.shapes.push(s);
        Ok(i)
    }
}

/// A non-negative integer field given as a JSON number or a numeric string.
fn integer(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    let Some(v) = obj.get(key) else {
        return Ok(None);
    };
    let parsed = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 9e15)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    parsed
        .map(Some)
        .ok_or_else(|| format!("{key} must be a non-negative whole number, found {v}"))
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Byte offset to 1-based line number.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::JobClass;

    fn parse_str(text: &str) -> Result<Workload, SimError> {
        parse(Path::new("jobs.json"), text, &TraceOptions::default())
    }

    const TWO_JOBS: &str = r#"
{
  "am.type" : "mapreduce",
  "job.start.ms" : 1000,
  "job.end.ms" : 95375,
  "job.queue.name" : "sls_queue_1",
  "job.id" : "job_1",
  "job.user" : "default",
  "job.tasks" : [ {
    "container.host" : "/default-rack/node1",
    "container.start.ms" : 6664,
    "container.end.ms" : 23707,
    "container.priority" : 20,
    "container.type" : "map"
  }, {
    "container.host" : "/default-rack/node3",
    "duration.ms" : "500000",
    "container.memory" : 4096,
    "container.vcores" : "2",
    "count" : 2,
    "container.type" : "reduce"
  } ]
}
{
  "job.start.ms" : 0,
  "job.queue.name" : "sls_queue_2",
  "job.count" : 2,
  "job.tasks" : [ { "duration.ms" : 5000 } ]
}
"#;

    #[test]
    fn reads_sls_jobs_with_both_task_forms_and_counts() {
        let w = parse_str(TWO_JOBS).unwrap();
        assert_eq!(w.jobs.len(), 3);
        assert_eq!(w.num_tasks(), 5);
        // Sorted: the two copies of the second job arrive first.
        assert_eq!(w.jobs[0].arrival, 0);
        assert_eq!(w.jobs[2].arrival, 1000 * MICROS_PER_MILLI);
        let j = w.jobs[2];
        assert_eq!(j.num_tasks, 3);
        let r = w.job_tasks(&j);
        assert_eq!(w.durations[r.start], 17_043 * MICROS_PER_MILLI);
        assert_eq!(w.shape(r.start), SLS_DEFAULT_CONTAINER);
        assert_eq!(w.shape(r.start + 2), Resource::new(4096, 2));
        assert_eq!(j.kind, JobKind::MapReduce);
        assert_eq!(j.class, JobClass::Long);
        assert_eq!(w.jobs[0].class, JobClass::Short);
        assert_eq!(w.queues, vec!["sls_queue_1", "sls_queue_2"]);
    }

    #[test]
    fn a_json_array_of_jobs_is_accepted() {
        let w = parse_str(
            r#"[{"job.start.ms":0,"job.queue.name":"q","job.tasks":[{"duration.ms":1}]}]"#,
        )
        .unwrap();
        assert_eq!(w.jobs.len(), 1);
    }

    #[test]
    fn queue_classes_override_the_cutoff() {
        let opts = TraceOptions {
            queue_classes: vec![("root.sls_queue_1".into(), JobClass::Short)],
            ..TraceOptions::default()
        };
        let w = parse(Path::new("jobs.json"), TWO_JOBS, &opts).unwrap();
        assert_eq!(w.jobs[2].class, JobClass::Short);
    }

    #[test]
    fn errors_name_the_line_of_the_offending_job() {
        let bad_duration = "{\"job.start.ms\":0,\"job.queue.name\":\"q\",\"job.tasks\":[{\"duration.ms\":1}]}\n\n\
            {\"job.id\":\"job_9\",\"job.start.ms\":0,\"job.queue.name\":\"q\",\"job.tasks\":[{\"container.start.ms\":5,\"container.end.ms\":5}]}";
        let cases = [
            (
                bad_duration,
                "jobs.json:3: job job_9: job.tasks[0]: task duration must be more than 0 ms",
            ),
            (
                "\n{\"job.queue.name\":\"q\",\"job.tasks\":[{}]}",
                "jobs.json:2: job (no job.id): missing job.start.ms",
            ),
            (
                "{\"job.start.ms\":-5,\"job.queue.name\":\"q\"}",
                "jobs.json:1: job (no job.id): job.start.ms must be a non-negative whole number, found -5",
            ),
            (
                "{\"job.start.ms\":0,\"job.tasks\":[{}]}",
                "jobs.json:1: job (no job.id): missing job.queue.name",
            ),
            (
                "{\"job.start.ms\":0,\"job.queue.name\":\"q\",\"job.tasks\":[]}",
                "jobs.json:1: job (no job.id): job.tasks is empty",
            ),
            (
                "{\"job.start.ms\":0,\"job.queue.name\":\"q\",\"job.tasks\":[{\"container.start.ms\":1}]}",
                "needs duration.ms or both",
            ),
            (
                "{\"job.start.ms\":0,\n\"job.queue.name\":\"q\",\n\"job.tasks\":[{\"duration.ms\":1}]\n",
                "jobs.json:4: not valid JSON",
            ),
            (
                "[1]",
                "jobs.json:1: element 0 of the job array is not a JSON object",
            ),
            ("42", "jobs.json:1: expected a job object, found a number"),
            ("  ", "jobs.json: the SLS trace holds no jobs"),
        ];
        for (text, want) in cases {
            let e = parse_str(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: got {e}");
        }
    }
}
