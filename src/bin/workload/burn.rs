//! `burn`: spin the CPU and keep touching a memory working set, for a fixed amount of work.
//! The simplest shape of a long task; the emulator's own tests use it.

use std::hint::black_box;

use crate::common::{Ctx, KernelError, alloc_vec};

const PAGE: usize = 4096;

pub struct BurnArgs {
    pub memory_mb: u64,
    /// 0 runs until stopped.
    pub iterations: u64,
    pub rounds_millions: u64,
    pub seed: u64,
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

pub fn burn(ctx: &Ctx<'_>, args: &BurnArgs) -> Result<u64, KernelError> {
    let bytes = args
        .memory_mb
        .checked_mul(1024 * 1024)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| {
            KernelError::InvalidArgument(format!("--memory-mb {} is too large", args.memory_mb))
        })?;
    let rounds = args.rounds_millions.checked_mul(1_000_000).ok_or_else(|| {
        KernelError::InvalidArgument(format!(
            "--rounds-millions {} is too large",
            args.rounds_millions
        ))
    })?;
    let pages = bytes / PAGE;
    let mut working_set: Vec<u8> = alloc_vec("the burn working set", pages * PAGE)?;
    let progress = ctx.progress(args.iterations);
    let mut checksum = 0u64;
    let mut i = 0u64;
    while args.iterations == 0 || i < args.iterations {
        ctx.check_stop()?;
        let partial = std::thread::scope(|s| -> Result<u64, KernelError> {
            let mut handles = Vec::with_capacity(ctx.threads());
            for t in 0..ctx.threads() as u64 {
                let seed = args.seed ^ i ^ (t << 32);
                let h = std::thread::Builder::new()
                    .spawn_scoped(s, move || spin(rounds, seed))
                    .map_err(KernelError::Thread)?;
                handles.push(h);
            }
            handles.into_iter().try_fold(0u64, |acc, h| {
                h.join()
                    .map(|x| acc.wrapping_add(x))
                    .map_err(|_| KernelError::WorkerPanicked)
            })
        })?;
        for p in 0..pages {
            let b = &mut working_set[p * PAGE];
            *b = b.wrapping_add(i as u8 | 1);
            checksum = checksum.wrapping_add(*b as u64);
        }
        checksum = checksum.wrapping_add(partial);
        i += 1;
        progress.advance(1)?;
    }
    Ok(checksum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::*;

    fn args(seed: u64) -> BurnArgs {
        BurnArgs {
            memory_mb: 1,
            iterations: 3,
            rounds_millions: 0,
            seed,
        }
    }

    /// What the original single-file burner printed for these arguments, which the
    /// emulator's recorded runs rely on: with no spin rounds each thread returns `i | 1`
    /// (1, 1, 3), and the 256 pages hold 1, 2 and 5 after each iteration.
    #[test]
    fn checksum_matches_the_original_burner() {
        let expected = (1 + 256) + (1 + 2 * 256) + (3 + 5 * 256);
        assert_eq!(burn(&ctx(1), &args(0)).unwrap(), expected);
    }

    #[test]
    fn seed_and_threads_change_the_spin_only() {
        let a = burn(&ctx(1), &args(0)).unwrap();
        assert_eq!(a, burn(&ctx(1), &args(0)).unwrap());
        assert_ne!(a, burn(&ctx(2), &args(0)).unwrap());
        assert_ne!(a, burn(&ctx(1), &args(7)).unwrap());
    }

    #[test]
    fn progress_counts_iterations() {
        let (ctx, out) = capturing_ctx(1);
        burn(&ctx, &args(0)).unwrap();
        assert_eq!(
            out.lines(),
            ["progress 33%", "progress 66%", "progress 100%"]
        );
    }

    #[test]
    fn absurd_memory_is_a_clear_error() {
        let r = burn(
            &ctx(1),
            &BurnArgs {
                memory_mb: u64::MAX,
                ..args(0)
            },
        );
        assert!(matches!(r, Err(KernelError::InvalidArgument(_))));
    }
}
