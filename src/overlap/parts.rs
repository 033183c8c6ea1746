//! What domain-overlap computes before the report: each dataset's n-gram set (exact) or MinHash
//! sketch. A shard writes its part to a file; `merge` reads every part back and unites the sets
//! (or takes register-wise minima), which gives exactly the whole run's sets and sketches, hence
//! its report.
//!
//! File: b"CONDENSER-OVERLAP-PARTS\n", a u64 length and a JSON header (names, ngram, stride, mode,
//! num_perm, seed), then per dataset a u64 count and its values: sorted u128 keys (exact) or u64
//! registers (minhash), little-endian.
use super::exact::{shared_matrix, NgramSet};
use super::minhash::Sketch;
use super::options::{Mode, Options};
use super::report::OverlapReport;
use crate::data::write_atomic;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"CONDENSER-OVERLAP-PARTS\n";

enum Kind {
    Exact(Vec<NgramSet>),
    Approx(Vec<Sketch>),
}

pub struct Parts {
    names: Vec<String>,
    opts: Options,
    kind: Kind,
}

impl Parts {
    pub fn exact(names: Vec<String>, opts: Options, sets: Vec<NgramSet>) -> Parts {
        Parts {
            names,
            opts,
            kind: Kind::Exact(sets),
        }
    }

    pub fn approx(names: Vec<String>, opts: Options, sketches: Vec<Sketch>) -> Parts {
        Parts {
            names,
            opts,
            kind: Kind::Approx(sketches),
        }
    }

    pub fn report(&self) -> OverlapReport {
        match (&self.kind, self.opts.mode) {
            (Kind::Exact(sets), _) => {
                OverlapReport::exact(self.names.clone(), &self.opts, &shared_matrix(sets))
            }
            (Kind::Approx(sk), Mode::Approx { num_perm, seed }) => {
                OverlapReport::approx(self.names.clone(), &self.opts, num_perm, seed, sk)
            }
            (Kind::Approx(_), Mode::Exact) => unreachable!("sketches come with Mode::Approx"),
        }
    }

    fn header(&self) -> serde_json::Value {
        let (mode, num_perm, seed) = match self.opts.mode {
            Mode::Exact => ("exact", 0, 0),
            Mode::Approx { num_perm, seed } => ("minhash", num_perm, seed),
        };
        serde_json::json!({
            "names": self.names, "ngram": self.opts.ngram, "stride": self.opts.stride,
            "mode": mode, "num_perm": num_perm, "seed": seed,
        })
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let header = self.header().to_string();
        let mut bytes = MAGIC.to_vec();
        bytes.extend((header.len() as u64).to_le_bytes());
        bytes.extend(header.as_bytes());
        match &self.kind {
            Kind::Exact(sets) => {
                for s in sets {
                    let mut keys: Vec<u128> = s.0.iter().copied().collect();
                    keys.sort_unstable();
                    bytes.extend((keys.len() as u64).to_le_bytes());
                    for k in keys {
                        bytes.extend(k.to_le_bytes());
                    }
                }
            }
            Kind::Approx(sketches) => {
                for s in sketches {
                    bytes.extend((s.0.len() as u64).to_le_bytes());
                    for r in &s.0 {
                        bytes.extend(r.to_le_bytes());
                    }
                }
            }
        }
        write_atomic(path, &bytes)
    }

    pub fn read(path: &Path) -> Result<Parts> {
        let bytes = std::fs::read(path).map_err(|e| Error::file(path, e))?;
        let bad = || {
            Error::file(
                path,
                "not a condenser overlap part (truncated or another file)",
            )
        };
        let mut at = MAGIC.len();
        if !bytes.starts_with(MAGIC) {
            return Err(bad());
        }
        let mut take = |n: usize| -> Result<&[u8]> {
            let s = bytes.get(at..at + n).ok_or_else(bad)?;
            at += n;
            Ok(s)
        };
        let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let len = u64_at(take(8)?) as usize;
        let h: serde_json::Value = serde_json::from_slice(take(len)?).map_err(|_| bad())?;
        let names: Vec<String> = serde_json::from_value(h["names"].clone()).map_err(|_| bad())?;
        let num = |k: &str| h[k].as_u64().ok_or_else(bad);
        let mode = match h["mode"].as_str() {
            Some("exact") => Mode::Exact,
            Some("minhash") => Mode::Approx {
                num_perm: num("num_perm")? as usize,
                seed: num("seed")?,
            },
            _ => return Err(bad()),
        };
        let opts = Options {
            ngram: num("ngram")? as usize,
            stride: num("stride")? as usize,
            mode,
        };
        let kind = match mode {
            Mode::Exact => {
                let mut sets = Vec::with_capacity(names.len());
                for _ in &names {
                    let n = u64_at(take(8)?) as usize;
                    let raw = take(n.checked_mul(16).ok_or_else(bad)?)?;
                    let mut set = NgramSet::default();
                    set.extend(
                        raw.chunks_exact(16)
                            .map(|c| u128::from_le_bytes(c.try_into().expect("16 bytes")))
                            .collect(),
                    );
                    sets.push(set);
                }
                Kind::Exact(sets)
            }
            Mode::Approx { num_perm, .. } => {
                let mut sketches = Vec::with_capacity(names.len());
                for _ in &names {
                    let n = u64_at(take(8)?) as usize;
                    if n != num_perm {
                        return Err(bad());
                    }
                    let raw = take(n * 8)?;
                    sketches.push(Sketch(raw.chunks_exact(8).map(u64_at).collect()));
                }
                Kind::Approx(sketches)
            }
        };
        if at != bytes.len() {
            return Err(bad());
        }
        Ok(Parts { names, opts, kind })
    }

    /// Add another part of the same datasets and settings.
    fn absorb(&mut self, other: Parts, other_path: &Path) -> Result<()> {
        if other.header() != self.header() {
            return Err(Error::file(
                other_path,
                format!("another overlap: {} vs {}", other.header(), self.header()),
            ));
        }
        match (&mut self.kind, other.kind) {
            (Kind::Exact(a), Kind::Exact(b)) => {
                for (x, y) in a.iter_mut().zip(b) {
                    x.0.extend(y.0);
                }
            }
            (Kind::Approx(a), Kind::Approx(b)) => {
                for (x, y) in a.iter_mut().zip(&b) {
                    x.merge(y);
                }
            }
            _ => unreachable!("equal headers have equal modes"),
        }
        Ok(())
    }
}

/// The report of the union of the parts in `paths`.
pub fn merge_parts(paths: &[PathBuf]) -> Result<OverlapReport> {
    let (first, rest) = paths
        .split_first()
        .ok_or_else(|| Error::msg("no overlap parts to merge"))?;
    let mut all = Parts::read(first)?;
    for p in rest {
        all.absorb(Parts::read(p)?, p)?;
    }
    Ok(all.report())
}
