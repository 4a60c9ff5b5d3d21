//! `terasort`: HiBench's TeraSort. TeraGen-layout records (100 bytes, a 10-byte random
//! key) are generated split by split; the key space is cut into reducer ranges from a
//! sample of the keys (TotalOrderPartitioner); maps partition their split's keys, each
//! reducer sorts its range, and TeraValidate-style checks confirm the output is ordered.
//!
//! The records stay in memory, as a reducer's in-memory merge would hold them: the kernel
//! needs about `--size-mb` MiB plus 16 bytes per record.

use rand::Rng;

use crate::common::{
    Checksum, Ctx, KernelError, alloc_vec, par_map, piece_count, piece_range, rng_for,
};

pub const RECORD_BYTES: usize = 100;
const KEY_BYTES: usize = 10;
const PIECES: u64 = 128;
const SAMPLE: usize = 100_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Record(pub [u8; RECORD_BYTES]);

impl Default for Record {
    fn default() -> Self {
        Record([0; RECORD_BYTES])
    }
}

impl Record {
    /// TeraGen's layout: key, `00 11`, row id in 32 hex digits, `88 88 88 88`, 48 filler
    /// letters, `cc cc cc cc`.
    fn generate(rng: &mut impl Rng, row: u64) -> Record {
        let mut r = [0u8; RECORD_BYTES];
        rng.fill_bytes(&mut r[..KEY_BYTES]);
        r[10..12].copy_from_slice(&[0x00, 0x11]);
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        for (j, b) in r[12..44].iter_mut().enumerate() {
            let shift = 4 * (31 - j);
            *b = if shift < 64 {
                HEX[((row >> shift) & 0xf) as usize]
            } else {
                b'0'
            };
        }
        r[44..48].copy_from_slice(&[0x88; 4]);
        for (j, b) in r[48..96].iter_mut().enumerate() {
            *b = b'A' + ((row + j as u64 / 4) % 26) as u8;
        }
        r[96..100].copy_from_slice(&[0xcc; 4]);
        Record(r)
    }

    fn key(&self) -> SortKey {
        let mut hi = [0u8; 8];
        hi.copy_from_slice(&self.0[..8]);
        SortKey(
            u64::from_be_bytes(hi),
            u16::from_be_bytes([self.0[8], self.0[9]]),
            0,
        )
    }
}

/// A key as two big-endian integers (so integer order is byte order) and the record's
/// index, which breaks ties and finds the record again.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct SortKey(u64, u16, u32);

impl SortKey {
    fn with_index(self, i: u32) -> SortKey {
        SortKey(self.0, self.1, i)
    }

    pub fn index(&self) -> usize {
        self.2 as usize
    }

    fn key_only(&self) -> (u64, u16) {
        (self.0, self.1)
    }
}

pub struct TerasortResult {
    pub records: Vec<Record>,
    /// Per reducer, its range of keys in output order.
    pub output: Vec<Vec<SortKey>>,
    pub checksum: u64,
}

/// Cut points of `reducers` key ranges from an evenly spaced sample of the input.
fn cut_points(records: &[Record], reducers: usize) -> Vec<(u64, u16)> {
    let step = (records.len() / SAMPLE).max(1);
    let mut sample: Vec<(u64, u16)> = records
        .iter()
        .step_by(step)
        .map(|r| r.key().key_only())
        .collect();
    sample.sort_unstable();
    (1..reducers)
        .filter_map(|i| sample.get(i * sample.len() / reducers).copied())
        .collect()
}

pub fn terasort(ctx: &Ctx<'_>, size_mb: u64, seed: u64) -> Result<TerasortResult, KernelError> {
    let rows = size_mb
        .checked_mul(1 << 20)
        .map(|b| b / RECORD_BYTES as u64)
        .filter(|&r| r <= u32::MAX as u64 && usize::try_from(r).is_ok())
        .ok_or_else(|| {
            KernelError::InvalidArgument(format!(
                "--size-mb {size_mb}: at most {} records are supported",
                u32::MAX
            ))
        })?;
    let mut records: Vec<Record> = alloc_vec("the terasort records", rows as usize)?;
    let splits = piece_count(rows, rows.div_ceil(PIECES), PIECES);
    // Generation costs about as much as the sort; partitioning is cheaper.
    let progress = ctx.progress(rows * 10);

    // TeraGen: each map writes its own rows.
    let mut pieces = Vec::with_capacity(splits as usize);
    let mut rest = records.as_mut_slice();
    for s in 0..splits {
        let range = piece_range(rows, splits, s);
        let (piece, tail) = rest.split_at_mut((range.end - range.start) as usize);
        pieces.push((s, range.start, piece));
        rest = tail;
    }
    par_map(ctx, pieces, |_, (split, first_row, piece)| {
        let mut rng = rng_for(seed, "teragen", split);
        for (i, r) in piece.iter_mut().enumerate() {
            *r = Record::generate(&mut rng, first_row + i as u64);
        }
        progress.advance(piece.len() as u64 * 4)
    })?;

    // Map: each split sends its keys to the reducer owning their range.
    let reducers = splits as usize;
    let cuts = cut_points(&records, reducers);
    let map_outputs = par_map(ctx, (0..splits).collect(), |_, split| {
        let range = piece_range(rows, splits, split);
        // Uniform keys: about an equal share each, with slack for sampling error.
        let expected = (range.end - range.start) as usize / reducers * 9 / 8 + 16;
        let mut out: Vec<Vec<SortKey>> = (0..reducers)
            .map(|_| Vec::with_capacity(expected))
            .collect();
        for i in range.clone() {
            let key = records[i as usize].key();
            let r = cuts.partition_point(|c| *c <= key.key_only());
            // rows <= u32::MAX, so the index fits.
            out[r].push(key.with_index(i as u32));
        }
        progress.advance(range.end - range.start)?;
        Ok(out)
    })?;
    let mut shuffled: Vec<Vec<Vec<SortKey>>> = vec![Vec::new(); reducers];
    for out in map_outputs {
        for (r, keys) in out.into_iter().enumerate() {
            shuffled[r].push(keys);
        }
    }

    // Reduce: merge, sort, and validate each range; ranges are checked against each
    // other afterwards.
    let records_ref = &records;
    let reduced = par_map(ctx, shuffled, |_, segments| {
        let mut keys: Vec<SortKey> = segments.concat();
        keys.sort_unstable();
        let mut c = Checksum::default();
        for k in &keys {
            let record = &records_ref[k.index()];
            if record.key() != k.with_index(0) {
                return Err(KernelError::SelfCheck("a sort key lost its record".into()));
            }
            c.write_bytes(&record.0);
        }
        progress.advance(keys.len() as u64 * 5)?;
        Ok((keys, c.finish()))
    })?;
    let mut checksum = Checksum::default();
    let mut output = Vec::with_capacity(reducers);
    let mut previous: Option<SortKey> = None;
    for (keys, sum) in reduced {
        if let (Some(p), Some(first)) = (previous, keys.first())
            && p > *first
        {
            return Err(KernelError::SelfCheck(
                "reducer ranges overlap: output is not totally ordered".into(),
            ));
        }
        previous = keys.last().copied().or(previous);
        checksum.write_u64(sum);
        checksum.write_u64(keys.len() as u64);
        output.push(keys);
    }
    Ok(TerasortResult {
        records,
        output,
        checksum: checksum.finish(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::*;

    #[test]
    fn output_is_sorted_and_a_permutation_of_the_input() {
        let r = terasort(&ctx(3), 2, 9).unwrap();
        let rows = (2 << 20) / RECORD_BYTES;
        assert_eq!(r.records.len(), rows);
        let order: Vec<usize> = r.output.iter().flatten().map(SortKey::index).collect();
        let out: Vec<&[u8]> = order.iter().map(|&i| &r.records[i].0[..]).collect();
        assert!(
            out.windows(2)
                .all(|w| w[0][..KEY_BYTES] <= w[1][..KEY_BYTES])
        );
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..rows).collect::<Vec<_>>(), "a permutation");
        // Naive reference: sort the records themselves.
        let mut naive: Vec<[u8; RECORD_BYTES]> = r.records.iter().map(|x| x.0).collect();
        naive.sort_by(|a, b| a[..KEY_BYTES].cmp(&b[..KEY_BYTES]));
        let ours: Vec<&[u8]> = out.iter().map(|x| &x[..KEY_BYTES]).collect();
        let theirs: Vec<&[u8]> = naive.iter().map(|x| &x[..KEY_BYTES]).collect();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn reducer_ranges_are_balanced() {
        let r = terasort(&ctx(2), 4, 1).unwrap();
        let sizes: Vec<usize> = r.output.iter().map(Vec::len).collect();
        let mean = r.records.len() / sizes.len();
        assert!(
            sizes.iter().all(|&s| s > mean / 2 && s < mean * 2),
            "{sizes:?}"
        );
    }

    #[test]
    fn records_have_teragen_layout() {
        let mut rng = rng_for(0, "t", 0);
        let r = Record::generate(&mut rng, 255);
        assert_eq!(&r.0[10..12], &[0x00, 0x11]);
        assert_eq!(&r.0[12..44], b"000000000000000000000000000000FF");
        assert_eq!(&r.0[44..48], &[0x88; 4]);
        assert!(r.0[48..96].iter().all(u8::is_ascii_uppercase));
        assert_eq!(&r.0[96..], &[0xcc; 4]);
    }

    #[test]
    fn deterministic_for_a_seed_whatever_the_threads() {
        let a = terasort(&ctx(1), 1, 4).unwrap();
        let b = terasort(&ctx(4), 1, 4).unwrap();
        assert_eq!(a.records, b.records);
        assert_eq!(a.checksum, b.checksum);
        assert_ne!(a.checksum, terasort(&ctx(2), 1, 5).unwrap().checksum);
    }

    #[test]
    fn progress_moves_in_steps_of_at_most_one_percent() {
        let (ctx, out) = capturing_ctx(2);
        terasort(&ctx, 1, 0).unwrap();
        assert_progress(&out.lines(), 1);
    }

    #[test]
    fn sizes_beyond_32_bit_record_indexes_are_rejected() {
        let r = terasort(&ctx(1), 500_000, 0);
        assert!(matches!(r, Err(KernelError::InvalidArgument(_))));
    }
}
