//! Parse + validate of a 1,000-queue capacity-scheduler.xml (4 levels deep) against
//! merely reading the file's bytes, measured side by side in one run.
//!
//! `cargo bench --bench config [-- ITERATIONS]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use preemptor::config::queues::{QueueTree, synthetic_capacity_scheduler_xml};
use preemptor::config::{Configuration, Env, load_dir_with_env};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(51);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("capacity-scheduler.xml");
    std::fs::write(&path, synthetic_capacity_scheduler_xml(1000, 4))?;
    let bytes = std::fs::metadata(&path)?.len();

    let mut check = Configuration::with_env(Default::default());
    check.add_file(&path)?;
    let queues = QueueTree::from_conf(&check)?.queues.len();
    println!(
        "capacity-scheduler.xml: {queues} queues (root + 1000, 4 levels), {} properties, {bytes} bytes",
        check.len()
    );

    let (mut read, mut parse, mut validate, mut load) = (vec![], vec![], vec![], vec![]);
    for i in 0..iterations + 5 {
        let t = Instant::now();
        black_box(std::fs::read(&path)?);
        let r = t.elapsed();

        let t = Instant::now();
        let mut conf = Configuration::with_env(Default::default());
        conf.add_file(&path)?;
        black_box(&conf);
        let p = t.elapsed();

        let t = Instant::now();
        let mut conf = Configuration::with_env(Default::default());
        conf.add_file(&path)?;
        black_box(QueueTree::from_conf(&conf)?);
        let v = t.elapsed();

        let t = Instant::now();
        black_box(load_dir_with_env(
            dir.path(),
            Env::Fixed(Default::default()),
        )?);
        let l = t.elapsed();

        // The first rounds warm the page cache and the allocator.
        if i >= 5 {
            read.push(r);
            parse.push(p);
            validate.push(v);
            load.push(l);
        }
    }
    let (r, p, v, l) = (median(read), median(parse), median(validate), median(load));
    println!("median of {iterations} interleaved runs:");
    println!(
        "  read bytes only            {:>10.3} ms",
        r.as_secs_f64() * 1e3
    );
    println!(
        "  read + parse XML           {:>10.3} ms   {:>7.1}x read",
        p.as_secs_f64() * 1e3,
        ratio(p, r)
    );
    println!(
        "  read + parse + validate    {:>10.3} ms   {:>7.1}x read",
        v.as_secs_f64() * 1e3,
        ratio(v, r)
    );
    println!(
        "  load_dir (check-config)    {:>10.3} ms   {:>7.1}x read",
        l.as_secs_f64() * 1e3,
        ratio(l, r)
    );
    Ok(())
}
