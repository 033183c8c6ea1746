//! The engine's batch layout: sequences packed end to end, never padded.

/// Sequences packed end to end: item i is rows `offsets[i] .. offsets[i] + lens[i]`.
#[derive(Clone, Debug)]
pub struct Packed {
    pub offsets: Vec<usize>,
    pub lens: Vec<usize>,
    pub rows: usize,
}

impl Packed {
    pub fn new(lens: Vec<usize>) -> Packed {
        let mut offsets = Vec::with_capacity(lens.len());
        let mut rows = 0;
        for &n in &lens {
            offsets.push(rows);
            rows += n;
        }
        Packed {
            offsets,
            lens,
            rows,
        }
    }

    pub fn of(seqs: &[&[u32]]) -> Packed {
        Packed::new(seqs.iter().map(|s| s.len()).collect())
    }
}
