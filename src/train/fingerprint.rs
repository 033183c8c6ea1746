//! Content fingerprints of training examples (xxh3 over tokens and targets, lengths framed), so
//! `--resume` can tell one dataset from another with the same number of rows.
use xxhash_rust::xxh3::Xxh3;

/// A running fingerprint; `hex()` gives the key a checkpoint records.
#[derive(Default)]
pub struct Fingerprint(Xxh3);

impl Fingerprint {
    /// One token sequence, its length first so that sequences never run into each other.
    pub fn tokens(&mut self, ids: &[u32]) -> &mut Self {
        self.0.update(&(ids.len() as u64).to_le_bytes());
        for id in ids {
            self.0.update(&id.to_le_bytes());
        }
        self
    }

    /// Target values (labels, scores, teacher vectors), by their bits.
    pub fn values(&mut self, v: &[f32]) -> &mut Self {
        self.0.update(&(v.len() as u64).to_le_bytes());
        for x in v {
            self.0.update(&x.to_bits().to_le_bytes());
        }
        self
    }

    pub fn hex(&self) -> String {
        format!("{:016x}", self.0.digest())
    }
}
