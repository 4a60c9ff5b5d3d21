//! `wordcount`: HiBench's WordCount. The input is RandomTextWriter-style text (lines of 20
//! to 100 words drawn uniformly from a 1,000-word vocabulary), generated split by split as
//! map tasks would read it. Each map tokenises its split and combines counts in a hash map,
//! then partitions them by word for the reducers; each reducer merges its partition into
//! sorted output, as `part-r-*` files would be.

use std::collections::{BTreeMap, HashMap, HashSet};

use rand::RngExt;

use crate::common::{Checksum, Ctx, KernelError, par_map, piece_count, piece_range, rng_for};

const VOCABULARY: usize = 1000;
const REDUCERS: usize = 16;
const SPLIT_BYTES: u64 = 8 << 20;
const MIN_SPLITS: u64 = 100;

/// `(word, count)` pairs: a map output segment, or a reducer's output sorted by word.
pub type Counts = Vec<(Vec<u8>, u64)>;

/// Per reducer.
pub type Output = Vec<Counts>;

#[derive(Debug, PartialEq, Eq)]
pub struct WordcountResult {
    pub input_bytes: u64,
    pub words: u64,
    pub output: Output,
}

impl WordcountResult {
    pub fn distinct(&self) -> u64 {
        self.output.iter().map(|p| p.len() as u64).sum()
    }

    pub fn checksum(&self) -> u64 {
        let mut c = Checksum::default();
        for partition in &self.output {
            for (word, count) in partition {
                c.write_bytes(word);
                c.write_u64(*count);
            }
        }
        c.finish()
    }
}

/// Distinct lowercase words of 3 to 12 letters.
fn vocabulary(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = rng_for(seed, "wordcount-vocabulary", 0);
    let mut seen = HashSet::new();
    let mut words = Vec::with_capacity(VOCABULARY);
    while words.len() < VOCABULARY {
        let len = rng.random_range(3..=12);
        let w: Vec<u8> = (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

/// The text of one input split: whole lines until at least `bytes` bytes.
fn generate_split(vocabulary: &[Vec<u8>], seed: u64, split: u64, bytes: u64) -> Vec<u8> {
    let mut rng = rng_for(seed, "wordcount-split", split);
    let mut text = Vec::with_capacity(bytes as usize + 1200);
    while (text.len() as u64) < bytes {
        let words = rng.random_range(20..=100);
        for i in 0..words {
            if i > 0 {
                text.push(b' ');
            }
            text.extend_from_slice(&vocabulary[rng.random_range(0..vocabulary.len())]);
        }
        text.push(b'\n');
    }
    text
}

fn partition_of(word: &[u8]) -> usize {
    let mut c = Checksum::default();
    c.write_bytes(word);
    (c.finish() % REDUCERS as u64) as usize
}

/// A map task with its combiner: counts per word, already cut into reducer partitions.
fn map(text: &[u8]) -> (u64, Output) {
    let mut counts: HashMap<&[u8], u64> = HashMap::new();
    let mut words = 0;
    for w in text
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(w).or_insert(0) += 1;
        words += 1;
    }
    let mut out: Output = vec![Vec::new(); REDUCERS];
    for (w, n) in counts {
        out[partition_of(w)].push((w.to_vec(), n));
    }
    (words, out)
}

pub fn wordcount(ctx: &Ctx<'_>, size_mb: u64, seed: u64) -> Result<WordcountResult, KernelError> {
    let input_bytes = size_mb
        .checked_mul(1 << 20)
        .ok_or_else(|| KernelError::InvalidArgument(format!("--size-mb {size_mb} is too large")))?;
    let vocab = vocabulary(seed);
    let splits = piece_count(input_bytes, SPLIT_BYTES, MIN_SPLITS);
    let progress = ctx.progress(splits + 1);
    let map_outputs = par_map(ctx, (0..splits).collect(), |_, split| {
        let bytes = piece_range(input_bytes, splits, split);
        let text = generate_split(&vocab, seed, split, bytes.end - bytes.start);
        let out = map(&text);
        progress.advance(1)?;
        Ok(out)
    })?;
    let words = map_outputs.iter().map(|(w, _)| w).sum();
    // The shuffle: reducer r fetches partition r of every map output.
    let mut shuffled: Vec<Vec<Counts>> = vec![Vec::new(); REDUCERS];
    for (_, partitions) in map_outputs {
        for (r, p) in partitions.into_iter().enumerate() {
            shuffled[r].push(p);
        }
    }
    let output = par_map(ctx, shuffled, |_, segments| {
        let mut merged: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for (w, n) in segments.into_iter().flatten() {
            *merged.entry(w).or_insert(0) += n;
        }
        ctx.check_stop()?;
        Ok(merged.into_iter().collect::<Vec<_>>())
    })?;
    progress.advance(1)?;
    Ok(WordcountResult {
        input_bytes,
        words,
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::*;

    #[test]
    fn counts_match_a_naive_count_of_the_same_text() {
        let r = wordcount(&ctx(3), 2, 11).unwrap();
        let vocab = vocabulary(11);
        let splits = piece_count(r.input_bytes, SPLIT_BYTES, MIN_SPLITS);
        let mut naive = BTreeMap::<String, u64>::new();
        let mut text_bytes = 0;
        for s in 0..splits {
            let range = piece_range(r.input_bytes, splits, s);
            let text =
                String::from_utf8(generate_split(&vocab, 11, s, range.end - range.start)).unwrap();
            text_bytes += text.len() as u64;
            for w in text.split_whitespace() {
                *naive.entry(w.to_owned()).or_insert(0) += 1;
            }
        }
        assert!(text_bytes >= 2 << 20 && text_bytes < (2 << 20) + splits * 1300);
        let mut ours: Vec<(String, u64)> = Vec::new();
        for (i, partition) in r.output.iter().enumerate() {
            assert!(partition.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
            for (w, n) in partition {
                assert_eq!(partition_of(w), i);
                ours.push((String::from_utf8(w.clone()).unwrap(), *n));
            }
        }
        ours.sort();
        assert_eq!(ours, naive.into_iter().collect::<Vec<_>>());
        assert_eq!(r.words, ours.iter().map(|(_, n)| n).sum::<u64>());
        assert_eq!(
            r.distinct(),
            VOCABULARY as u64,
            "2 MiB of text uses every word"
        );
    }

    #[test]
    fn deterministic_for_a_seed_whatever_the_threads() {
        let a = wordcount(&ctx(1), 1, 5).unwrap();
        let b = wordcount(&ctx(4), 1, 5).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.checksum(), b.checksum());
        let c = wordcount(&ctx(2), 1, 6).unwrap();
        assert_ne!(a.checksum(), c.checksum());
    }

    #[test]
    fn vocabulary_is_distinct_words() {
        let v = vocabulary(1);
        assert_eq!(v.len(), VOCABULARY);
        assert_eq!(v.iter().collect::<HashSet<_>>().len(), VOCABULARY);
        assert!(
            v.iter()
                .all(|w| (3..=12).contains(&w.len()) && w.iter().all(u8::is_ascii_lowercase))
        );
    }

    #[test]
    fn progress_moves_in_steps_of_at_most_one_percent() {
        let (ctx, out) = capturing_ctx(2);
        wordcount(&ctx, 1, 0).unwrap();
        assert_progress(&out.lines(), 1);
    }

    #[test]
    fn empty_input_counts_nothing() {
        let r = wordcount(&ctx(1), 0, 0).unwrap();
        assert_eq!((r.words, r.distinct()), (0, 0));
    }
}
