//! `kmeans`: HiBench's (Spark MLlib) KMeans. Points are drawn around `k` hidden centres,
//! as HiBench's GenKMeansDataset does, and kept in memory like a cached RDD; every Lloyd
//! iteration reads all of them, so a suspended executor's working set has to come back
//! from swap before it can go on.

use std::collections::HashSet;
use std::f64::consts::TAU;

use rand::{Rng, RngExt};

use crate::common::{
    Checksum, Ctx, KernelError, Progress, alloc_vec, group_count, group_items, par_map, rng_for,
    split_groups,
};

/// Points per unit of progress (and per random stream).
const CHUNK: usize = 4096;
/// Fixed partial sums per iteration, so that the float reduction order (and hence the
/// result) does not depend on the thread count.
const GROUPS: usize = 64;
/// Bounds the per-group partial sums to GROUPS x 800 KB.
const MAX_K_TIMES_DIMENSIONS: u64 = 100_000;
const CENTRE_RANGE: f64 = 50.0;
const SPREAD: f64 = 10.0;

pub struct KmeansArgs {
    pub points: u64,
    pub k: u64,
    pub dimensions: u64,
    pub iterations: u64,
    pub seed: u64,
}

#[derive(Debug, PartialEq)]
pub struct KmeansResult {
    pub centres: Vec<f64>,
    /// Sum of squared distances to the nearest centre, before each iteration's update.
    pub costs: Vec<f64>,
    /// Points per centre in the last assignment.
    pub sizes: Vec<u64>,
}

impl KmeansResult {
    pub fn checksum(&self) -> u64 {
        let mut c = Checksum::default();
        self.centres.iter().for_each(|&x| c.write_f64(x));
        self.sizes.iter().for_each(|&n| c.write_u64(n));
        c.finish()
    }
}

/// A standard normal variate (Box-Muller).
fn gaussian(rng: &mut impl Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (TAU * u2).cos()
}

struct Shape {
    n: usize,
    k: usize,
    d: usize,
}

impl Shape {
    fn check(a: &KmeansArgs) -> Result<Shape, KernelError> {
        let bad = |m: String| Err(KernelError::InvalidArgument(m));
        if a.k == 0 || a.dimensions == 0 || a.points < a.k {
            return bad(format!(
                "want 1 <= --k <= --points and --dimensions >= 1 (got k={}, points={}, dimensions={})",
                a.k, a.points, a.dimensions
            ));
        }
        if a.k.saturating_mul(a.dimensions) > MAX_K_TIMES_DIMENSIONS {
            return bad(format!(
                "--k times --dimensions is at most {MAX_K_TIMES_DIMENSIONS} (got {} x {})",
                a.k, a.dimensions
            ));
        }
        let too_big =
            || KernelError::InvalidArgument(format!("--points {} is too large", a.points));
        let n = usize::try_from(a.points).map_err(|_| too_big())?;
        n.checked_mul(a.dimensions as usize)
            .and_then(|x| x.checked_mul(8))
            .ok_or_else(too_big)?;
        Ok(Shape {
            n,
            k: a.k as usize,
            d: a.dimensions as usize,
        })
    }

    fn groups(&self) -> usize {
        group_count(self.n, CHUNK, GROUPS)
    }
}

/// The points, generated chunk by chunk around `k` hidden centres.
fn generate(
    ctx: &Ctx<'_>,
    s: &Shape,
    seed: u64,
    progress: &Progress<'_, '_>,
) -> Result<Vec<f64>, KernelError> {
    let mut rng = rng_for(seed, "kmeans-centres", 0);
    let hidden: Vec<f64> = (0..s.k * s.d)
        .map(|_| rng.random_range(-CENTRE_RANGE..CENTRE_RANGE))
        .collect();
    let mut points: Vec<f64> = alloc_vec("the kmeans points", s.n * s.d)?;
    let slices = split_groups(&mut points, s.d, CHUNK, s.groups());
    par_map(ctx, slices, |_, (first, slice)| {
        for (c, chunk) in slice.chunks_mut(CHUNK * s.d).enumerate() {
            let mut rng = rng_for(seed, "kmeans-points", (first / CHUNK + c) as u64);
            for point in chunk.chunks_mut(s.d) {
                let centre = rng.random_range(0..s.k) * s.d;
                for (j, x) in point.iter_mut().enumerate() {
                    *x = hidden[centre + j] + SPREAD * gaussian(&mut rng);
                }
            }
            progress.advance(1)?;
        }
        Ok(())
    })?;
    Ok(points)
}

/// Spark's `initializationMode = random`: `k` distinct input points.
fn initial_centres(points: &[f64], s: &Shape, seed: u64) -> Vec<f64> {
    let mut rng = rng_for(seed, "kmeans-init", 0);
    let mut chosen = HashSet::new();
    let mut centres = Vec::with_capacity(s.k * s.d);
    while chosen.len() < s.k {
        let i = rng.random_range(0..s.n);
        if chosen.insert(i) {
            centres.extend_from_slice(&points[i * s.d..(i + 1) * s.d]);
        }
    }
    centres
}

struct Partial {
    sums: Vec<f64>,
    counts: Vec<u64>,
    cost: f64,
}

fn nearest(point: &[f64], centres: &[f64], d: usize) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (c, centre) in centres.chunks_exact(d).enumerate() {
        let dist: f64 = point
            .iter()
            .zip(centre)
            .map(|(x, y)| (x - y) * (x - y))
            .sum();
        if dist < best.1 {
            best = (c, dist);
        }
    }
    best
}

pub fn kmeans(ctx: &Ctx<'_>, args: &KmeansArgs) -> Result<KmeansResult, KernelError> {
    let s = Shape::check(args)?;
    let chunks = s.n.div_ceil(CHUNK) as u64;
    let progress = ctx.progress(chunks.saturating_mul(args.iterations.saturating_add(1)));
    let points = generate(ctx, &s, args.seed, &progress)?;
    let mut centres = initial_centres(&points, &s, args.seed);
    let mut costs = Vec::new();
    let mut sizes = vec![0; s.k];
    for iteration in 0..args.iterations {
        let partials = par_map(ctx, (0..s.groups()).collect(), |_, g| {
            let mut p = Partial {
                sums: vec![0.0; s.k * s.d],
                counts: vec![0; s.k],
                cost: 0.0,
            };
            let items = group_items(s.n, CHUNK, s.groups(), g);
            for chunk in points[items.start * s.d..items.end * s.d].chunks(CHUNK * s.d) {
                for point in chunk.chunks_exact(s.d) {
                    let (c, dist) = nearest(point, &centres, s.d);
                    p.cost += dist;
                    p.counts[c] += 1;
                    for (sum, x) in p.sums[c * s.d..(c + 1) * s.d].iter_mut().zip(point) {
                        *sum += x;
                    }
                }
                progress.advance(1)?;
            }
            Ok(p)
        })?;
        let mut total = Partial {
            sums: vec![0.0; s.k * s.d],
            counts: vec![0; s.k],
            cost: 0.0,
        };
        for p in partials {
            total.cost += p.cost;
            total
                .sums
                .iter_mut()
                .zip(&p.sums)
                .for_each(|(t, x)| *t += x);
            total
                .counts
                .iter_mut()
                .zip(&p.counts)
                .for_each(|(t, n)| *t += n);
        }
        for (c, &count) in total.counts.iter().enumerate() {
            // An empty cluster keeps its centre, which cannot raise the cost.
            if count > 0 {
                for j in 0..s.d {
                    centres[c * s.d + j] = total.sums[c * s.d + j] / count as f64;
                }
            }
        }
        ctx.line(format_args!(
            "iteration {} cost {:.6e}",
            iteration + 1,
            total.cost
        ));
        costs.push(total.cost);
        sizes = total.counts;
    }
    Ok(KmeansResult {
        centres,
        costs,
        sizes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::*;

    fn args(points: u64, k: u64, iterations: u64, seed: u64) -> KmeansArgs {
        KmeansArgs {
            points,
            k,
            dimensions: 5,
            iterations,
            seed,
        }
    }

    #[test]
    fn cost_never_increases_and_clusters_cover_every_point() {
        let r = kmeans(&ctx(3), &args(20_000, 6, 8, 2)).unwrap();
        assert_eq!(r.costs.len(), 8);
        for w in r.costs.windows(2) {
            assert!(w[1] <= w[0] * (1.0 + 1e-12), "{:?}", r.costs);
        }
        assert!(r.costs[7] < r.costs[0]);
        assert_eq!(r.sizes.iter().sum::<u64>(), 20_000);
    }

    /// Lloyd's update computed the obvious way, one point at a time.
    #[test]
    fn one_iteration_matches_a_naive_lloyd_step() {
        let a = args(3_000, 4, 1, 8);
        let s = Shape::check(&a).unwrap();
        let ctx = ctx(2);
        let points = generate(&ctx, &s, 8, &ctx.progress(0)).unwrap();
        let start = initial_centres(&points, &s, 8);
        let mut sums = vec![vec![0.0; s.d]; s.k];
        let mut counts = vec![0u64; s.k];
        let mut cost = 0.0;
        for p in points.chunks(s.d) {
            let dists: Vec<f64> = start
                .chunks(s.d)
                .map(|c| p.iter().zip(c).map(|(x, y)| (x - y).powi(2)).sum())
                .collect();
            let best = (0..s.k)
                .min_by(|&i, &j| dists[i].total_cmp(&dists[j]))
                .unwrap();
            cost += dists[best];
            counts[best] += 1;
            sums[best].iter_mut().zip(p).for_each(|(t, x)| *t += x);
        }
        let r = kmeans(&ctx, &a).unwrap();
        assert_eq!(r.sizes, counts);
        assert!((r.costs[0] - cost).abs() <= cost * 1e-12);
        for (c, (sum, centre)) in sums.iter().zip(r.centres.chunks(s.d)).enumerate() {
            for (x, ours) in sum.iter().zip(centre) {
                assert!((ours - x / counts[c] as f64).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn points_gather_around_hidden_centres() {
        let a = args(8_000, 3, 0, 1);
        let s = Shape::check(&a).unwrap();
        let ctx = ctx(1);
        let points = generate(&ctx, &s, 1, &ctx.progress(0)).unwrap();
        let mean = points.iter().sum::<f64>() / points.len() as f64;
        assert!(mean.abs() < CENTRE_RANGE);
        assert!(
            points
                .iter()
                .all(|x| x.abs() < CENTRE_RANGE + 10.0 * SPREAD)
        );
    }

    #[test]
    fn deterministic_for_a_seed_whatever_the_threads() {
        let a = kmeans(&ctx(1), &args(10_000, 5, 3, 4)).unwrap();
        let b = kmeans(&ctx(4), &args(10_000, 5, 3, 4)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.checksum(), b.checksum());
        let c = kmeans(&ctx(2), &args(10_000, 5, 3, 5)).unwrap();
        assert_ne!(a.checksum(), c.checksum());
    }

    #[test]
    fn progress_covers_generation_and_iterations() {
        let (ctx, out) = capturing_ctx(2);
        kmeans(&ctx, &args(50_000, 3, 9, 0)).unwrap();
        let lines = out.lines();
        assert_progress(&lines, 1);
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("iteration ")).count(),
            9
        );
    }

    #[test]
    fn impossible_shapes_are_rejected() {
        for a in [
            args(5, 6, 1, 0),
            args(5, 0, 1, 0),
            KmeansArgs {
                dimensions: 0,
                ..args(5, 1, 1, 0)
            },
            KmeansArgs {
                dimensions: 1_000,
                ..args(5_000, 1_000, 1, 0)
            },
            args(u64::MAX, 1, 1, 0),
        ] {
            assert!(matches!(
                kmeans(&ctx(1), &a),
                Err(KernelError::InvalidArgument(_))
            ));
        }
    }
}
