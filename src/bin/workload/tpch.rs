//! `tpch`: TPC-H Q1 (pricing summary report) and Q6 (forecasting revenue change) over
//! `lineitem` rows generated in-process by `tpchgen`, the same generator as `tpchgen-cli`.
//!
//! Rows stream through per-part generators and are never stored, like a scan. Arithmetic is
//! exact: money is in integer hundredths, products keep their full scale, and only the
//! printed answer is rounded to TPC-H's two decimals.

use rand::RngExt;
use tpchgen::generators::{LineItem, LineItemGenerator, OrderGenerator};

use crate::common::{Checksum, Ctx, KernelError, par_map, rng_for};

/// Pieces the table is generated in; each is one step of progress.
const PARTS: i64 = 200;
/// Above this the row counts no longer fit tpchgen's 32-bit part arithmetic.
const MAX_SCALE: f64 = 10_000.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    Q1,
    Q6,
}

/// Substitution parameters (TPC-H 2.4.1.3 and 2.4.6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parameters {
    Q1 {
        delta_days: i32,
    },
    Q6 {
        year: i32,
        discount: i64,
        quantity: i64,
    },
}

impl Parameters {
    /// Seed 0 gives the validation parameters (as `qgen -d`); any other seed draws them
    /// from the ranges the specification allows, as `qgen` does.
    pub fn for_seed(query: Query, seed: u64) -> Parameters {
        let mut rng = rng_for(seed, "tpch-parameters", 0);
        match (query, seed) {
            (Query::Q1, 0) => Parameters::Q1 { delta_days: 90 },
            (Query::Q1, _) => Parameters::Q1 {
                delta_days: rng.random_range(60..=120),
            },
            (Query::Q6, 0) => Parameters::Q6 {
                year: 1994,
                discount: 6,
                quantity: 24,
            },
            (Query::Q6, _) => Parameters::Q6 {
                year: rng.random_range(1993..=1997),
                discount: rng.random_range(2..=9),
                quantity: rng.random_range(24..=25),
            },
        }
    }

    pub fn line(&self) -> String {
        match self {
            Parameters::Q1 { delta_days } => format!("parameters delta={delta_days}"),
            Parameters::Q6 {
                year,
                discount,
                quantity,
            } => format!(
                "parameters date={year}-01-01 discount={} quantity={quantity}",
                decimal(*discount as i128, 2, 1)
            ),
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
fn epoch_days(y: i32, m: i32, d: i32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One `(l_returnflag, l_linestatus)` group of Q1, in exact integers at the scale of each
/// SQL expression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Q1Group {
    pub returnflag: char,
    pub linestatus: char,
    pub sum_qty: i128,
    /// Hundredths.
    pub sum_base_price: i128,
    /// `extendedprice * (1 - discount)`: ten-thousandths.
    pub sum_disc_price: i128,
    /// `extendedprice * (1 - discount) * (1 + tax)`: millionths.
    pub sum_charge: i128,
    /// Hundredths.
    pub sum_disc: i128,
    pub count: i128,
}

impl Q1Group {
    fn add(&mut self, o: &Q1Group) {
        self.sum_qty += o.sum_qty;
        self.sum_base_price += o.sum_base_price;
        self.sum_disc_price += o.sum_disc_price;
        self.sum_charge += o.sum_charge;
        self.sum_disc += o.sum_disc;
        self.count += o.count;
    }
}

const RETURNFLAGS: [char; 3] = ['A', 'N', 'R'];
const LINESTATUSES: [char; 2] = ['F', 'O'];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Non-empty groups in `l_returnflag, l_linestatus` order.
    Q1(Vec<Q1Group>),
    /// Ten-thousandths.
    Q6 { revenue: i128 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpchResult {
    pub parameters: Parameters,
    pub lineitem_rows: u64,
    pub answer: Answer,
}

/// Rounds `num / (den * 10^scale)` half away from zero to two decimals.
fn decimal(num: i128, scale: u32, den: i128) -> String {
    let n = num * 100;
    let d = den * 10i128.pow(scale);
    let hundredths = (2 * n.abs() + d) / (2 * d);
    let sign = if (n < 0) != (d < 0) && hundredths != 0 {
        "-"
    } else {
        ""
    };
    format!("{sign}{}.{:02}", hundredths / 100, hundredths % 100)
}

impl TpchResult {
    /// The answer as printed: parameters, column names, one `row` line per result row.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![
            self.parameters.line(),
            format!("lineitem_rows {}", self.lineitem_rows),
        ];
        match &self.answer {
            Answer::Q1(groups) => {
                lines.push(
                    "columns l_returnflag|l_linestatus|sum_qty|sum_base_price|sum_disc_price|sum_charge|avg_qty|avg_price|avg_disc|count_order"
                        .into(),
                );
                for g in groups {
                    lines.push(format!(
                        "row {}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
                        g.returnflag,
                        g.linestatus,
                        decimal(g.sum_qty, 0, 1),
                        decimal(g.sum_base_price, 2, 1),
                        decimal(g.sum_disc_price, 4, 1),
                        decimal(g.sum_charge, 6, 1),
                        decimal(g.sum_qty, 0, g.count),
                        decimal(g.sum_base_price, 2, g.count),
                        decimal(g.sum_disc, 2, g.count),
                        g.count
                    ));
                }
            }
            Answer::Q6 { revenue } => {
                lines.push("columns revenue".into());
                lines.push(format!("row {}", decimal(*revenue, 4, 1)));
            }
        }
        lines
    }

    /// Over the exact sums, so that it tells apart answers that round alike.
    pub fn checksum(&self) -> u64 {
        let mut c = Checksum::default();
        c.write_u64(self.lineitem_rows);
        match &self.answer {
            Answer::Q1(groups) => {
                for g in groups {
                    c.write_u64(g.returnflag as u64);
                    c.write_u64(g.linestatus as u64);
                    for x in [
                        g.sum_qty,
                        g.sum_base_price,
                        g.sum_disc_price,
                        g.sum_charge,
                        g.sum_disc,
                        g.count,
                    ] {
                        c.write_i128(x);
                    }
                }
            }
            Answer::Q6 { revenue } => c.write_i128(*revenue),
        }
        c.finish()
    }
}

/// What one part of the table contributes.
#[derive(Clone, Copy, Default)]
struct Partial {
    rows: u64,
    groups: [Q1Group; 6],
    revenue: i128,
}

/// The `WHERE` clause and the accumulation, prepared once: dates become day numbers and
/// money becomes hundredths.
#[derive(Clone, Copy)]
enum Filter {
    Q1 {
        max_ship: i32,
    },
    Q6 {
        min_ship: i32,
        end_ship: i32,
        min_disc: i64,
        max_disc: i64,
        quantity: i64,
    },
}

impl Filter {
    fn new(p: Parameters) -> Filter {
        match p {
            Parameters::Q1 { delta_days } => Filter::Q1 {
                max_ship: epoch_days(1998, 12, 1) - delta_days,
            },
            Parameters::Q6 {
                year,
                discount,
                quantity,
            } => Filter::Q6 {
                min_ship: epoch_days(year, 1, 1),
                end_ship: epoch_days(year + 1, 1, 1),
                min_disc: discount - 1,
                max_disc: discount + 1,
                quantity,
            },
        }
    }

    fn accumulate(&self, acc: &mut Partial, l: &LineItem<'_>) -> Result<(), KernelError> {
        acc.rows += 1;
        let ship = l.l_shipdate.to_unix_epoch();
        let price = l.l_extendedprice.0 as i128;
        let disc = l.l_discount.0;
        match *self {
            Filter::Q1 { max_ship } => {
                if ship > max_ship {
                    return Ok(());
                }
                let group = group_index(l.l_returnflag, l.l_linestatus)?;
                let g = &mut acc.groups[group];
                let disc_price = price * (100 - disc as i128);
                g.sum_qty += l.l_quantity as i128;
                g.sum_base_price += price;
                g.sum_disc_price += disc_price;
                g.sum_charge += disc_price * (100 + l.l_tax.0 as i128);
                g.sum_disc += disc as i128;
                g.count += 1;
            }
            Filter::Q6 {
                min_ship,
                end_ship,
                min_disc,
                max_disc,
                quantity,
            } => {
                if (min_ship..end_ship).contains(&ship)
                    && (min_disc..=max_disc).contains(&disc)
                    && l.l_quantity < quantity
                {
                    acc.revenue += price * disc as i128;
                }
            }
        }
        Ok(())
    }
}

fn group_index(returnflag: &str, linestatus: &str) -> Result<usize, KernelError> {
    let find = |set: &[char], v: &str| {
        let mut chars = v.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => set.iter().position(|&x| x == c),
            _ => None,
        }
    };
    match (
        find(&RETURNFLAGS, returnflag),
        find(&LINESTATUSES, linestatus),
    ) {
        (Some(r), Some(s)) => Ok(r * 2 + s),
        _ => Err(KernelError::SelfCheck(format!(
            "tpchgen produced an unknown group ({returnflag:?}, {linestatus:?})"
        ))),
    }
}

/// Checks a scale factor: finite, positive, at most `MAX_SCALE`, and large enough for at
/// least one order.
pub fn check_scale(scale: f64) -> Result<(), KernelError> {
    let orders = OrderGenerator::SCALE_BASE as f64 * scale;
    if !scale.is_finite() || scale <= 0.0 || scale > MAX_SCALE || orders < 1.0 {
        return Err(KernelError::InvalidArgument(format!(
            "--scale {scale}: want a scale factor from 1/{} (one order) to {MAX_SCALE}",
            OrderGenerator::SCALE_BASE
        )));
    }
    Ok(())
}

pub fn tpch(ctx: &Ctx<'_>, query: Query, scale: f64, seed: u64) -> Result<TpchResult, KernelError> {
    check_scale(scale)?;
    let parameters = Parameters::for_seed(query, seed);
    let filter = Filter::new(parameters);
    let orders = (OrderGenerator::SCALE_BASE as f64 * scale) as i64;
    // Bounded by PARTS, so the cast cannot truncate.
    let parts = orders.clamp(1, PARTS) as i32;
    let progress = ctx.progress(parts as u64);
    let partials = par_map(ctx, (1..=parts).collect(), |_, part| {
        let mut acc = Partial::default();
        for l in LineItemGenerator::new(scale, part, parts).iter() {
            filter.accumulate(&mut acc, &l)?;
        }
        progress.advance(1)?;
        Ok(acc)
    })?;
    let mut total = Partial::default();
    for p in &partials {
        total.rows += p.rows;
        total.revenue += p.revenue;
        for (t, g) in total.groups.iter_mut().zip(&p.groups) {
            t.add(g);
        }
    }
    let answer = match query {
        Query::Q1 => Answer::Q1(
            total
                .groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.count > 0)
                .map(|(i, g)| Q1Group {
                    returnflag: RETURNFLAGS[i / 2],
                    linestatus: LINESTATUSES[i % 2],
                    ..*g
                })
                .collect(),
        ),
        Query::Q6 => Answer::Q6 {
            revenue: total.revenue,
        },
    };
    Ok(TpchResult {
        parameters,
        lineitem_rows: total.rows,
        answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::*;

    #[test]
    fn epoch_days_matches_tpchgen_dates() {
        assert_eq!(epoch_days(1970, 1, 1), 0);
        assert_eq!(
            epoch_days(1992, 1, 1),
            tpchgen::dates::TPCHDate::UNIX_EPOCH_OFFSET
        );
        assert_eq!(epoch_days(1998, 12, 1) - 90, epoch_days(1998, 9, 2));
        assert_eq!(epoch_days(2000, 3, 1) - epoch_days(2000, 2, 28), 2);
    }

    #[test]
    fn decimals_round_half_away_from_zero() {
        assert_eq!(decimal(12345, 4, 1), "1.23");
        assert_eq!(decimal(12350, 4, 1), "1.24");
        assert_eq!(decimal(-12350, 4, 1), "-1.24");
        assert_eq!(decimal(5, 0, 2), "2.50");
        assert_eq!(decimal(2, 0, 3), "0.67");
        assert_eq!(decimal(-1, 4, 1), "0.00");
    }

    /// A row-by-row evaluation over the `tbl` text that tpchgen prints, sharing nothing with
    /// the kernel but the generator.
    fn naive_q1(scale: f64) -> Vec<(String, i128, i128, i128, i128, i128)> {
        // 1998-12-01 minus 90 days.
        let cutoff = "1998-09-02";
        let mut groups = std::collections::BTreeMap::<String, [i128; 5]>::new();
        for l in LineItemGenerator::new(scale, 1, 1).iter() {
            let text = l.to_string();
            let f: Vec<&str> = text.split('|').collect();
            if f[10] > cutoff {
                continue;
            }
            let cents = |s: &str| s.replace('.', "").parse::<i128>().unwrap();
            let (qty, price, disc, tax) = (
                f[4].parse::<i128>().unwrap(),
                cents(f[5]),
                cents(f[6]),
                cents(f[7]),
            );
            let g = groups.entry(format!("{}|{}", f[8], f[9])).or_default();
            g[0] += qty;
            g[1] += price;
            g[2] += price * (100 - disc);
            g[3] += price * (100 - disc) * (100 + tax);
            g[4] += 1;
        }
        groups
            .into_iter()
            .map(|(k, g)| (k, g[0], g[1], g[2], g[3], g[4]))
            .collect()
    }

    #[test]
    fn q1_matches_a_naive_evaluation_of_the_same_rows() {
        let r = tpch(&ctx(2), Query::Q1, 0.002, 0).unwrap();
        let Answer::Q1(groups) = &r.answer else {
            panic!("Q1 answer expected")
        };
        let ours: Vec<_> = groups
            .iter()
            .map(|g| {
                (
                    format!("{}|{}", g.returnflag, g.linestatus),
                    g.sum_qty,
                    g.sum_base_price,
                    g.sum_disc_price,
                    g.sum_charge,
                    g.count,
                )
            })
            .collect();
        assert_eq!(ours, naive_q1(0.002));
        assert_eq!(groups.len(), 4);
        let rows = LineItemGenerator::new(0.002, 1, 1).iter().count() as u64;
        assert_eq!(r.lineitem_rows, rows);
    }

    #[test]
    fn q6_matches_a_naive_evaluation_of_the_same_rows() {
        let r = tpch(&ctx(3), Query::Q6, 0.002, 0).unwrap();
        let mut revenue = 0i128;
        for l in LineItemGenerator::new(0.002, 1, 1).iter() {
            let ship = l.l_shipdate.to_string();
            if ship.as_str() >= "1994-01-01"
                && ship.as_str() < "1995-01-01"
                && (5..=7).contains(&l.l_discount.0)
                && l.l_quantity < 24
            {
                revenue += l.l_extendedprice.0 as i128 * l.l_discount.0 as i128;
            }
        }
        assert!(revenue > 0);
        assert_eq!(r.answer, Answer::Q6 { revenue });
    }

    #[test]
    fn answers_and_checksums_do_not_depend_on_threads() {
        for q in [Query::Q1, Query::Q6] {
            let a = tpch(&ctx(1), q, 0.001, 0).unwrap();
            let b = tpch(&ctx(4), q, 0.001, 0).unwrap();
            assert_eq!(a, b);
            assert_eq!(a.checksum(), b.checksum());
        }
    }

    #[test]
    fn a_seed_draws_parameters_within_the_specification() {
        assert_eq!(
            Parameters::for_seed(Query::Q1, 0),
            Parameters::Q1 { delta_days: 90 }
        );
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..200 {
            match Parameters::for_seed(Query::Q1, seed) {
                Parameters::Q1 { delta_days } => {
                    assert!((60..=120).contains(&delta_days));
                    seen.insert(delta_days);
                }
                p => panic!("{p:?}"),
            }
            match Parameters::for_seed(Query::Q6, seed) {
                Parameters::Q6 {
                    year,
                    discount,
                    quantity,
                } => {
                    assert!((1993..=1997).contains(&year));
                    assert!((2..=9).contains(&discount));
                    assert!((24..=25).contains(&quantity));
                }
                p => panic!("{p:?}"),
            }
        }
        assert!(seen.len() > 30, "parameters vary with the seed");
        assert_eq!(
            Parameters::for_seed(Query::Q6, 5),
            Parameters::for_seed(Query::Q6, 5)
        );
    }

    #[test]
    fn printed_answer_has_tpch_shape_and_progress() {
        let (ctx, out) = capturing_ctx(2);
        let r = tpch(&ctx, Query::Q1, 0.001, 0).unwrap();
        assert_progress(&out.lines(), 1);
        let lines = r.lines();
        assert_eq!(lines[0], "parameters delta=90");
        let rows: Vec<_> = lines.iter().filter(|l| l.starts_with("row ")).collect();
        assert_eq!(rows.len(), 4);
        assert!(rows[0].starts_with("row A|F|"), "{rows:?}");
        assert_eq!(rows[0].split('|').count(), 10);
    }

    #[test]
    fn bad_scales_are_rejected() {
        for s in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9, 1e6] {
            assert!(
                matches!(check_scale(s), Err(KernelError::InvalidArgument(_))),
                "{s}"
            );
        }
        assert!(check_scale(0.01).is_ok());
    }
}
