//! `preemptor-workload`: the program inside every emulated YARN container.
//!
//! Runs in a `FROM scratch` image beside the loader and libraries it links
//! (`emulator::image`). Each kernel prints its progress as `progress <n>%` lines on
//! stdout and ends with a `checksum <hex>` line. Exit codes: 0 done, 1 a kernel failed,
//! 2 bad arguments, 143 stopped by SIGTERM or SIGINT.

mod burn;
mod common;
mod kmeans;
mod pagerank;
mod terasort;
mod tpch;
mod wordcount;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::common::{Ctx, KernelError};

#[derive(Parser)]
#[command(
    name = "preemptor-workload",
    version,
    about = "Compute kernels run inside emulated YARN containers",
    long_about = "Compute kernels run inside emulated YARN containers.\n\n\
        Each kernel generates its input from --seed, prints `progress <n>%` lines as it \
        goes and its result, then a final `checksum <hex>` line that is the same for the \
        same arguments whatever --threads is. Exit codes: 0 done, 1 the kernel failed, \
        2 bad arguments, 143 stopped by SIGTERM or SIGINT."
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    kernel: Kernel,
}

#[derive(Args)]
struct Common {
    /// Worker threads.
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Seed of the generated input; the same seed gives the same data and checksum.
    #[arg(long, global = true, default_value_t = 0)]
    seed: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum TpchQuery {
    /// Pricing summary report.
    #[value(name = "1")]
    Q1,
    /// Forecasting revenue change.
    #[value(name = "6")]
    Q6,
}

#[derive(Subcommand)]
enum Kernel {
    /// Spin the CPU and keep touching a memory working set, for a fixed amount of work.
    Burn {
        /// Working set in MiB, every page written once per iteration.
        #[arg(long, default_value_t = 0)]
        memory_mb: u64,
        /// Iterations of work; 0 runs until stopped.
        #[arg(long, default_value_t = 100)]
        iterations: u64,
        /// CPU work per iteration and thread, in millions of hash rounds.
        #[arg(long, default_value_t = 5)]
        rounds_millions: u64,
    },
    /// TPC-H Q1 or Q6 over lineitem rows generated in-process (tpchgen, as tpchgen-cli).
    ///
    /// Prints the query's parameters, the number of lineitem rows scanned and the result
    /// rows at TPC-H's precision. --seed 0 uses the validation parameters; other seeds
    /// draw substitution parameters as qgen does.
    Tpch {
        /// Which query.
        #[arg(long, value_enum)]
        query: TpchQuery,
        /// TPC-H scale factor (1 is 6 million lineitem rows); rows are streamed, not stored.
        #[arg(long, default_value_t = 30.0, value_parser = parse_scale)]
        scale: f64,
    },
    /// HiBench WordCount over generated text: map with a combiner, shuffle, reduce.
    Wordcount {
        /// Input text in MiB, generated split by split.
        #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
        size_mb: u64,
    },
    /// HiBench TeraSort over TeraGen records, held in memory (about --size-mb MiB and 16%).
    Terasort {
        /// Input in MiB of 100-byte records.
        #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..))]
        size_mb: u64,
    },
    /// HiBench (Spark MLlib) KMeans: Lloyd iterations over points cached in memory.
    ///
    /// The working set is points x dimensions x 8 bytes, read in full every iteration.
    Kmeans {
        /// Points in the cached data set.
        #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..))]
        points: u64,
        /// Clusters.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        k: u64,
        /// Lloyd iterations.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        iterations: u64,
        /// Coordinates per point.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        dimensions: u64,
    },
    /// HiBench (Spark) PageRank over a generated web graph cached in memory.
    ///
    /// The working set is about 60 bytes per page, read in full every iteration.
    Pagerank {
        /// Pages in the graph (about 9.5 links each).
        #[arg(long, default_value_t = 4_000_000, value_parser = clap::value_parser!(u64).range(1..=u32::MAX as u64))]
        pages: u64,
        /// Iterations.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        iterations: u64,
        /// Probability of following a link rather than jumping to a random page.
        #[arg(long, default_value_t = 0.85)]
        damping: f64,
    },
}

fn parse_scale(s: &str) -> Result<f64, String> {
    let scale: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    tpch::check_scale(scale).map_err(|e| e.to_string())?;
    Ok(scale)
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// As PID 1 in a container, default signal dispositions are ignored; without a handler
/// `docker stop` would wait out its timeout.
fn install_signal_handlers() {
    let handler = on_term as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

/// Runs the kernel and returns its result lines, the last one being the checksum.
fn run(ctx: &Ctx<'_>, kernel: Kernel, seed: u64) -> Result<Vec<String>, KernelError> {
    let checksum = |c: u64| format!("checksum {c:016x}");
    Ok(match kernel {
        Kernel::Burn {
            memory_mb,
            iterations,
            rounds_millions,
        } => {
            let args = burn::BurnArgs {
                memory_mb,
                iterations,
                rounds_millions,
                seed,
            };
            vec![checksum(burn::burn(ctx, &args)?)]
        }
        Kernel::Tpch { query, scale } => {
            let query = match query {
                TpchQuery::Q1 => tpch::Query::Q1,
                TpchQuery::Q6 => tpch::Query::Q6,
            };
            let r = tpch::tpch(ctx, query, scale, seed)?;
            let mut lines = r.lines();
            lines.push(checksum(r.checksum()));
            lines
        }
        Kernel::Wordcount { size_mb } => {
            let r = wordcount::wordcount(ctx, size_mb, seed)?;
            vec![
                format!("input_bytes {}", r.input_bytes),
                format!("words {}", r.words),
                format!("distinct_words {}", r.distinct()),
                checksum(r.checksum()),
            ]
        }
        Kernel::Terasort { size_mb } => {
            let r = terasort::terasort(ctx, size_mb, seed)?;
            vec![
                format!("records {}", r.records.len()),
                format!("reducers {}", r.output.len()),
                "sorted yes".into(),
                checksum(r.checksum),
            ]
        }
        Kernel::Kmeans {
            points,
            k,
            iterations,
            dimensions,
        } => {
            let args = kmeans::KmeansArgs {
                points,
                k,
                dimensions,
                iterations,
                seed,
            };
            let r = kmeans::kmeans(ctx, &args)?;
            let mut lines: Vec<String> = r
                .sizes
                .iter()
                .enumerate()
                .map(|(c, n)| format!("cluster {c} points {n}"))
                .collect();
            lines.push(checksum(r.checksum()));
            lines
        }
        Kernel::Pagerank {
            pages,
            iterations,
            damping,
        } => {
            let args = pagerank::PagerankArgs {
                pages,
                iterations,
                damping,
                seed,
            };
            let r = pagerank::pagerank(ctx, &args)?;
            let mut lines = vec![format!("links {}", r.links)];
            lines.extend(
                r.top(3)
                    .into_iter()
                    .map(|(p, rank)| format!("top page {p} rank {rank:.9}")),
            );
            lines.push(checksum(r.checksum()));
            lines
        }
    })
}

fn main() -> ExitCode {
    install_signal_handlers();
    let cli = Cli::parse();
    let ctx = Ctx::new(
        &STOP,
        cli.common.threads as usize,
        Box::new(std::io::stdout()),
    );
    match run(&ctx, cli.kernel, cli.common.seed) {
        Ok(lines) => {
            lines.iter().for_each(|l| ctx.line(format_args!("{l}")));
            ExitCode::SUCCESS
        }
        Err(KernelError::Stopped) => {
            ctx.line(format_args!("stopped"));
            ExitCode::from(143)
        }
        Err(e @ KernelError::InvalidArgument(_)) => {
            eprintln!("preemptor-workload: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("preemptor-workload: {e}");
            ExitCode::FAILURE
        }
    }
}
