//! Simulator speed: jobs per second and peak RSS per scheduler on the bundled Yahoo
//! subsets at 4,000 nodes, a 500,000-job trace (Yahoo replicated and shifted, the Google
//! trace's size) on 15,000 nodes, and, side by side in the same run, the published
//! Python simulator of the Hawk/Eagle authors when a Python 3 copy of it is at hand.
//!
//! Run: `cargo bench --bench sim`. Environment:
//! - `PREEMPTOR_EAGLE_SIM`: path to a Python 3 conversion of epfl-labos/eagle's
//!   `simulation/eagle_simulation.py` (and `PREEMPTOR_PYTHON`, default `python3`, with its
//!   `bitmap` module installed). Without it the baseline is reported as absent.
//! - `PREEMPTOR_TRACES`: directory of the bundled traces (default the repository's `traces/`).
//! - `PREEMPTOR_BENCH_QUICK=1`: skip the 500,000-job run.
//! - `PREEMPTOR_BENCH_ONLY=capacity+kill,kairos`: only these schedulers on the Yahoo
//!   subsets.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use preemptor::sim::trace::{self, TraceOptions};
use preemptor::sim::workload::{SLOT, Workload, secs, to_secs};
use preemptor::sim::{EngineConfig, SchedParams, SchedulerKind, SimSetup, simulate};

fn setup(nodes: u32) -> SimSetup {
    SimSetup {
        engine: EngineConfig::new(nodes, SLOT),
        params: SchedParams::default(),
    }
}

/// Forget the peak RSS so far (Linux: writing 5 to clear_refs resets VmHWM).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak RSS in MB since the last reset.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU seconds (user + system) used by this process, or by its waited-for children.
fn cpu_secs(who: i32) -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF/CHILDREN are valid.
    let r = unsafe { libc::getrusage(who, u.as_mut_ptr()) };
    if r != 0 {
        return f64::NAN;
    }
    // SAFETY: getrusage returned 0, so the struct is initialized.
    let u = unsafe { u.assume_init() };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

struct Measured {
    wall: f64,
    cpu: f64,
    rss_mb: Option<f64>,
    jobs: usize,
    events: u64,
}

fn measure(wl: &Workload, nodes: u32, kind: SchedulerKind) -> Result<Measured, String> {
    reset_peak_rss();
    let cpu0 = cpu_secs(libc::RUSAGE_SELF);
    let t = Instant::now();
    let r = simulate(wl, &setup(nodes), kind, &|_| {}).map_err(|e| e.to_string())?;
    Ok(Measured {
        wall: t.elapsed().as_secs_f64(),
        cpu: cpu_secs(libc::RUSAGE_SELF) - cpu0,
        rss_mb: peak_rss_mb(),
        jobs: wl.jobs.len(),
        events: r.run.events,
    })
}

fn row(label: &str, m: &Measured) {
    println!(
        "  {label:<32} {:>8.3} s wall {:>8.3} s cpu {:>10.0} jobs/s {:>11} events {:>9}",
        m.wall,
        m.cpu,
        m.jobs as f64 / m.wall,
        m.events,
        m.rss_mb.map_or("-".to_string(), |r| format!("{r:.0} MB"))
    );
}

/// The Python simulator's arguments for `kind` on a Yahoo trace (its README's settings).
fn python_args(kind: SchedulerKind) -> Option<&'static [&'static str]> {
    match kind {
        SchedulerKind::Hawk => Some(&[
            "yes", "yes", "90.5811", "90.5811", "100", "98", "1", "2", "5", "MEAN", "0", "0",
            "ATC", "10000", "10", "4000", "no", "0", "0", "no", "Hawk",
        ]),
        SchedulerKind::Eagle => Some(&[
            "no", "yes", "90.5811", "90.5811", "100", "98", "1", "2", "5", "MEAN", "0", "0", "ATC",
            "10000", "10", "4000", "yes", "0", "20", "yes", "Eagle",
        ]),
        _ => None,
    }
}

/// Run the Python simulator in a scratch directory (it writes its result files into
/// the working directory); returns (wall, cpu) seconds.
fn python_run(script: &Path, trace: &Path, kind: SchedulerKind) -> Result<(f64, f64), String> {
    let args = python_args(kind).ok_or("no Python settings for this scheduler")?;
    let python = std::env::var("PREEMPTOR_PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = std::env::temp_dir().join(format!("preemptor-bench-eagle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cpu0 = cpu_secs(libc::RUSAGE_CHILDREN);
    let t = Instant::now();
    let out = Command::new(&python)
        .arg(script)
        .arg(trace)
        .args(args)
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    let wall = t.elapsed().as_secs_f64();
    let cpu = cpu_secs(libc::RUSAGE_CHILDREN) - cpu0;
    let finished = std::fs::read_to_string(dir.join("finished_file")).map(|s| s.lines().count());
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("running {python}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{python} {} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    match finished {
        Ok(n) if n > 0 => Ok((wall, cpu)),
        _ => Err("the Python simulator finished no job".into()),
    }
}

fn main() {
    let dir = trace::bundled_traces_dir();
    let only = std::env::var("PREEMPTOR_BENCH_ONLY").ok();
    let kinds: Vec<SchedulerKind> = SchedulerKind::all()
        .into_iter()
        .filter(|k| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n.trim() == k.name()))
        })
        .collect();
    println!("preemptor sim benchmark (release build recommended: cargo bench --bench sim)");
    let mut hawk_yahoo1: Option<Measured> = None;
    let mut eagle_yahoo1: Option<Measured> = None;
    for name in ["yahoo_sub1.tr", "yahoo_sub2.tr"] {
        let path = dir.join(name);
        let wl = match trace::load(&path, &TraceOptions::default()) {
            Ok(w) => w,
            Err(e) => {
                println!("  {name}: cannot load ({e}); skipped");
                continue;
            }
        };
        println!(
            "\n{name}: {} jobs, {} tasks, 4000 nodes",
            wl.jobs.len(),
            wl.num_tasks()
        );
        for &k in &kinds {
            match measure(&wl, 4000, k) {
                Ok(m) => {
                    row(&k.name(), &m);
                    if name == "yahoo_sub1.tr" {
                        match k {
                            SchedulerKind::Hawk => hawk_yahoo1 = Some(m),
                            SchedulerKind::Eagle => eagle_yahoo1 = Some(m),
                            _ => {}
                        }
                    }
                }
                Err(e) => println!("  {:<32} failed: {e}", k.name()),
            }
        }
    }

    println!(
        "\nside by side with the Python simulator (epfl-labos/eagle), yahoo_sub1.tr, 4000 nodes"
    );
    match std::env::var("PREEMPTOR_EAGLE_SIM") {
        Err(_) => println!(
            "  baseline absent: set PREEMPTOR_EAGLE_SIM to a Python 3 copy of \
             simulation/eagle_simulation.py (and PREEMPTOR_PYTHON to a python3 with its \
             `bitmap` module) to measure it here"
        ),
        Ok(script) => {
            let trace = dir.join("yahoo_sub1.tr");
            for (kind, ours) in [
                (SchedulerKind::Hawk, &hawk_yahoo1),
                (SchedulerKind::Eagle, &eagle_yahoo1),
            ] {
                let Some(ours) = ours else { continue };
                match python_run(Path::new(&script), &trace, kind) {
                    Ok((wall, cpu)) => println!(
                        "  {:<8} python {wall:>7.2} s wall {cpu:>7.2} s cpu | preemptor {:>6.3} s wall \
                         {:>6.3} s cpu | {:>5.0}x faster (wall), {:>5.0}x (cpu)",
                        kind.name(),
                        ours.wall,
                        ours.cpu,
                        wall / ours.wall,
                        cpu / ours.cpu
                    ),
                    Err(e) => println!("  {:<8} python baseline failed: {e}", kind.name()),
                }
            }
        }
    }

    if std::env::var("PREEMPTOR_BENCH_QUICK").is_ok_and(|v| v == "1") {
        println!("\n500,000-job run skipped (PREEMPTOR_BENCH_QUICK=1)");
        return;
    }
    let base = match trace::load(&dir.join("yahoo_sub1.tr"), &TraceOptions::default()) {
        Ok(w) => w,
        Err(e) => {
            println!("\n500,000-job run skipped: {e}");
            return;
        }
    };
    // 172 copies of 2,910 jobs; each copy a 3.75th of the span after the previous, so
    // that 15,000 nodes see the load 4,000 nodes see with one copy.
    let (a, b) = base.span();
    let shift = secs(to_secs(b - a) * 4000.0 / 15000.0);
    reset_peak_rss();
    let t = Instant::now();
    let big = match base.replicate(172, shift) {
        Ok(w) => w,
        Err(e) => {
            println!("\n500,000-job run skipped: {e}");
            return;
        }
    };
    println!(
        "\n{}: {} jobs, {} tasks, 15000 nodes (built in {:.2} s)",
        big.name,
        big.jobs.len(),
        big.num_tasks(),
        t.elapsed().as_secs_f64()
    );
    drop(base);
    for kind in [SchedulerKind::EagleDice, SchedulerKind::Eagle] {
        match measure(&big, 15000, kind) {
            Ok(m) => {
                row(&kind.name(), &m);
                break;
            }
            Err(e) => println!("  {:<32} failed: {e}", kind.name()),
        }
    }
}
