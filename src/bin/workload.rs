//! `preemptor-workload`: the program inside every emulated YARN container.
//!
//! Built static so that it runs in a `FROM scratch` image. Each kernel prints its progress
//! as a percentage on stdout and ends with a checksum line.

use std::hint::black_box;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "preemptor-workload",
    version,
    about = "Compute kernels run inside emulated YARN containers"
)]
struct Cli {
    #[command(subcommand)]
    kernel: Kernel,
}

#[derive(Subcommand)]
enum Kernel {
    /// Spin the CPU and keep touching a memory working set, for a fixed amount of work.
    Burn {
        /// Threads spinning the CPU.
        #[arg(long, default_value_t = 1)]
        threads: u32,
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

fn spin(rounds: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..rounds {
        // xorshift64*: cheap, and the optimiser cannot fold it away.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    }
    black_box(x)
}

fn burn(threads: u32, memory_mb: u64, iterations: u64, rounds_millions: u64) -> ExitCode {
    let pages = (memory_mb * 1024 * 1024 / 4096) as usize;
    let mut working_set = vec![0u8; pages * 4096];
    let rounds = rounds_millions * 1_000_000;
    let mut checksum = 0u64;
    let mut last_pct = u64::MAX;
    let mut i = 0u64;
    while iterations == 0 || i < iterations {
        if STOP.load(Ordering::Relaxed) {
            println!("stopped at iteration {i}");
            return ExitCode::from(143);
        }
        let partial: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads.max(1))
                .map(|t| s.spawn(move || spin(rounds, i ^ ((t as u64) << 32))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0, u64::wrapping_add)
        });
        for p in 0..pages {
            let b = &mut working_set[p * 4096];
            *b = b.wrapping_add(i as u8 | 1);
            checksum = checksum.wrapping_add(*b as u64);
        }
        checksum = checksum.wrapping_add(partial);
        i += 1;
        if let Some(pct) = (i * 100).checked_div(iterations) {
            if pct != last_pct {
                println!("progress {pct}%");
                let _ = std::io::stdout().flush();
                last_pct = pct;
            }
        }
    }
    println!("checksum {checksum:016x}");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    install_signal_handlers();
    let cli = Cli::parse();
    match cli.kernel {
        Kernel::Burn {
            threads,
            memory_mb,
            iterations,
            rounds_millions,
        } => burn(threads, memory_mb, iterations, rounds_millions),
    }
}
