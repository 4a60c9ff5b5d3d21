//! `pagerank`: HiBench's (Spark) PageRank. A web-like graph (exponential out-degrees with
//! mean 10, some dangling pages, and link targets skewed towards popular pages) is held in
//! memory as an in-link adjacency list, like a cached links RDD; every iteration reads all
//! of it and rewrites the rank vectors.

use rand::RngExt;

use crate::common::{
    Checksum, Ctx, KernelError, Progress, alloc_vec, group_count, par_map, rng_for, split_groups,
    with_capacity,
};

const CHUNK: usize = 4096;
/// Fixed pieces per iteration, so the float reductions do not depend on the thread count.
const GROUPS: usize = 64;
const MEAN_OUT_DEGREE: f64 = 10.0;
const MAX_OUT_DEGREE: u32 = 200;

pub struct PagerankArgs {
    pub pages: u64,
    pub iterations: u64,
    pub damping: f64,
    pub seed: u64,
}

#[derive(Debug, PartialEq)]
pub struct PagerankResult {
    pub ranks: Vec<f64>,
    /// L1 distance between successive rank vectors, per iteration.
    pub deltas: Vec<f64>,
    pub links: u64,
}

impl PagerankResult {
    pub fn checksum(&self) -> u64 {
        let mut c = Checksum::default();
        c.write_u64(self.links);
        self.ranks.iter().for_each(|&r| c.write_f64(r));
        c.finish()
    }

    /// The `n` highest-ranked pages, best first.
    pub fn top(&self, n: usize) -> Vec<(usize, f64)> {
        let mut idx: Vec<usize> = (0..self.ranks.len()).collect();
        idx.sort_by(|&a, &b| self.ranks[b].total_cmp(&self.ranks[a]).then(a.cmp(&b)));
        idx.into_iter()
            .take(n)
            .map(|i| (i, self.ranks[i]))
            .collect()
    }
}

/// Out-links of every page: degrees, and targets concatenated in page order.
struct Links {
    degrees: Vec<u32>,
    targets: Vec<u32>,
}

fn generate_links(
    ctx: &Ctx<'_>,
    n: usize,
    seed: u64,
    progress: &Progress<'_, '_>,
) -> Result<Links, KernelError> {
    let chunks = n.div_ceil(CHUNK);
    let per_chunk = par_map(ctx, (0..chunks).collect(), |_, c| {
        let mut rng = rng_for(seed, "pagerank-links", c as u64);
        let pages = c * CHUNK..((c + 1) * CHUNK).min(n);
        let mut degrees = Vec::with_capacity(pages.len());
        let mut targets = Vec::new();
        for u in pages {
            if n < 2 {
                degrees.push(0);
                continue;
            }
            let e = -(1.0 - rng.random::<f64>()).ln() * MEAN_OUT_DEGREE;
            let degree = (e as u32).min(MAX_OUT_DEGREE);
            for _ in 0..degree {
                // Cubing a uniform variate skews links towards low page ids: a few pages
                // collect most links, as on the web.
                let x: f64 = rng.random();
                let mut t = ((n as f64) * x * x * x) as usize % n;
                if t == u {
                    t = (t + 1) % n;
                }
                // n <= u32::MAX, checked by the caller.
                targets.push(t as u32);
            }
            degrees.push(degree);
        }
        progress.advance(1)?;
        Ok((degrees, targets))
    })?;
    let edges: usize = per_chunk.iter().map(|(_, t)| t.len()).sum();
    let mut degrees: Vec<u32> = alloc_vec("the pagerank out-degrees", n)?;
    let mut targets: Vec<u32> = with_capacity("the pagerank links", edges)?;
    for (c, (d, t)) in per_chunk.into_iter().enumerate() {
        degrees[c * CHUNK..c * CHUNK + d.len()].copy_from_slice(&d);
        targets.extend_from_slice(&t);
    }
    Ok(Links { degrees, targets })
}

/// In-links by target page: `sources[offsets[v]..offsets[v + 1]]` link to `v`, in page order.
struct InLinks {
    offsets: Vec<usize>,
    sources: Vec<u32>,
}

fn invert(links: &Links) -> Result<InLinks, KernelError> {
    let n = links.degrees.len();
    let mut offsets: Vec<usize> = alloc_vec("the pagerank in-link offsets", n + 1)?;
    for &t in &links.targets {
        offsets[t as usize + 1] += 1;
    }
    for v in 0..n {
        offsets[v + 1] += offsets[v];
    }
    let mut next = offsets.clone();
    let mut sources: Vec<u32> = alloc_vec("the pagerank in-links", links.targets.len())?;
    let mut targets = links.targets.iter();
    for (u, &degree) in links.degrees.iter().enumerate() {
        for &t in targets.by_ref().take(degree as usize) {
            sources[next[t as usize]] = u as u32;
            next[t as usize] += 1;
        }
    }
    Ok(InLinks { offsets, sources })
}

pub fn check(args: &PagerankArgs) -> Result<usize, KernelError> {
    if !(args.damping > 0.0 && args.damping < 1.0) {
        return Err(KernelError::InvalidArgument(format!(
            "--damping {}: want a value strictly between 0 and 1",
            args.damping
        )));
    }
    if args.pages == 0 || args.pages > u32::MAX as u64 {
        return Err(KernelError::InvalidArgument(format!(
            "--pages {}: want between 1 and {}",
            args.pages,
            u32::MAX
        )));
    }
    usize::try_from(args.pages)
        .map_err(|_| KernelError::InvalidArgument(format!("--pages {} is too large", args.pages)))
}

pub fn pagerank(ctx: &Ctx<'_>, args: &PagerankArgs) -> Result<PagerankResult, KernelError> {
    let n = check(args)?;
    let chunks = n.div_ceil(CHUNK) as u64;
    let progress = ctx.progress(chunks.saturating_mul(args.iterations.saturating_add(1)));
    let links = generate_links(ctx, n, args.seed, &progress)?;
    let in_links = invert(&links)?;
    let degrees = links.degrees;
    let edges = links.targets.len() as u64;
    drop(links.targets);

    let d = args.damping;
    let mut ranks: Vec<f64> = alloc_vec("the page ranks", n)?;
    ranks.fill(1.0 / n as f64);
    let mut next: Vec<f64> = alloc_vec("the next page ranks", n)?;
    let mut contrib: Vec<f64> = alloc_vec("the rank contributions", n)?;
    let mut deltas = Vec::new();
    let groups = group_count(n, CHUNK, GROUPS);
    for iteration in 0..args.iterations {
        let ranks_ref = &ranks;
        let dangling_parts = par_map(
            ctx,
            split_groups(&mut contrib, 1, CHUNK, groups),
            |_, (start, slice)| {
                let mut dangling = 0.0;
                for (i, c) in slice.iter_mut().enumerate() {
                    let (rank, degree) = (ranks_ref[start + i], degrees[start + i]);
                    *c = if degree == 0 {
                        dangling += rank;
                        0.0
                    } else {
                        rank / degree as f64
                    };
                }
                Ok(dangling)
            },
        )?;
        // Dangling pages link everywhere, which keeps the ranks a distribution.
        let base = (1.0 - d) / n as f64 + d * dangling_parts.iter().sum::<f64>() / n as f64;
        let contrib_ref = &contrib;
        let in_ref = &in_links;
        let delta_parts = par_map(
            ctx,
            split_groups(&mut next, 1, CHUNK, groups),
            |_, (start, slice)| {
                let mut delta = 0.0;
                for (c, piece) in slice.chunks_mut(CHUNK).enumerate() {
                    for (i, r) in piece.iter_mut().enumerate() {
                        let v = start + c * CHUNK + i;
                        let incoming: f64 = in_ref.sources
                            [in_ref.offsets[v]..in_ref.offsets[v + 1]]
                            .iter()
                            .map(|&u| contrib_ref[u as usize])
                            .sum();
                        *r = base + d * incoming;
                        delta += (*r - ranks_ref[v]).abs();
                    }
                    progress.advance(1)?;
                }
                Ok(delta)
            },
        )?;
        let delta: f64 = delta_parts.iter().sum();
        std::mem::swap(&mut ranks, &mut next);
        ctx.line(format_args!(
            "iteration {} delta {delta:.6e}",
            iteration + 1
        ));
        deltas.push(delta);
    }
    Ok(PagerankResult {
        ranks,
        deltas,
        links: edges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::*;

    fn args(pages: u64, iterations: u64, seed: u64) -> PagerankArgs {
        PagerankArgs {
            pages,
            iterations,
            damping: 0.85,
            seed,
        }
    }

    #[test]
    fn ranks_sum_to_one_and_converge() {
        let r = pagerank(&ctx(3), &args(20_000, 30, 1)).unwrap();
        let sum: f64 = r.ranks.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        assert!(r.ranks.iter().all(|&x| x > 0.0));
        assert!(r.deltas[29] < r.deltas[0] * 1e-2, "{:?}", r.deltas);
        let top = r.top(3);
        assert!(top[0].1 >= top[1].1 && top[1].1 >= top[2].1);
    }

    /// Push-style power iteration over the out-links, the textbook way.
    #[test]
    fn matches_a_naive_power_iteration() {
        let a = args(5_000, 12, 3);
        let ctx = ctx(2);
        let links = generate_links(&ctx, 5_000, 3, &ctx.progress(0)).unwrap();
        assert!(links.degrees.contains(&0), "some pages dangle");
        let n = 5_000;
        let mut ranks = vec![1.0 / n as f64; n];
        for _ in 0..12 {
            let mut next = vec![(1.0 - 0.85) / n as f64; n];
            let mut targets = links.targets.iter();
            for (u, &deg) in links.degrees.iter().enumerate() {
                if deg == 0 {
                    next.iter_mut()
                        .for_each(|x| *x += 0.85 * ranks[u] / n as f64);
                }
                for &t in targets.by_ref().take(deg as usize) {
                    next[t as usize] += 0.85 * ranks[u] / deg as f64;
                }
            }
            ranks = next;
        }
        let r = pagerank(&ctx, &a).unwrap();
        assert_eq!(r.links, links.targets.len() as u64);
        for (ours, naive) in r.ranks.iter().zip(&ranks) {
            assert!((ours - naive).abs() < 1e-12, "{ours} vs {naive}");
        }
    }

    #[test]
    fn links_never_point_to_their_own_page() {
        let ctx = ctx(1);
        let links = generate_links(&ctx, 3_000, 9, &ctx.progress(0)).unwrap();
        let mut targets = links.targets.iter();
        for (u, &deg) in links.degrees.iter().enumerate() {
            for &t in targets.by_ref().take(deg as usize) {
                assert_ne!(t as usize, u);
                assert!((t as usize) < 3_000);
            }
        }
        let mean = links.targets.len() as f64 / 3_000.0;
        assert!((mean - 9.5).abs() < 1.5, "mean out-degree {mean}");
    }

    #[test]
    fn deterministic_for_a_seed_whatever_the_threads() {
        let a = pagerank(&ctx(1), &args(9_000, 4, 2)).unwrap();
        let b = pagerank(&ctx(4), &args(9_000, 4, 2)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.checksum(), b.checksum());
        let c = pagerank(&ctx(2), &args(9_000, 4, 3)).unwrap();
        assert_ne!(a.checksum(), c.checksum());
    }

    #[test]
    fn a_single_page_keeps_all_the_rank() {
        let r = pagerank(&ctx(1), &args(1, 3, 0)).unwrap();
        assert_eq!(r.links, 0);
        assert!((r.ranks[0] - 1.0).abs() < 1e-15);
    }

    #[test]
    fn progress_covers_generation_and_iterations() {
        let (ctx, out) = capturing_ctx(2);
        pagerank(&ctx, &args(60_000, 7, 0)).unwrap();
        let lines = out.lines();
        assert_progress(&lines, 1);
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("iteration ")).count(),
            7
        );
    }

    #[test]
    fn bad_arguments_are_rejected() {
        for a in [
            args(0, 1, 0),
            args(u64::MAX, 1, 0),
            PagerankArgs {
                damping: 1.0,
                ..args(10, 1, 0)
            },
            PagerankArgs {
                damping: f64::NAN,
                ..args(10, 1, 0)
            },
        ] {
            assert!(matches!(
                pagerank(&ctx(1), &a),
                Err(KernelError::InvalidArgument(_))
            ));
        }
    }
}
