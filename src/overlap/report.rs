use super::minhash::{standard_error, Sketch};
use super::options::Options;
use crate::data::write_atomic;
use crate::error::Result;
use crate::plot::{heatmap, Figure};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::fmt::Write;
use std::path::Path;

/// MinHash details of an approximate report.
#[derive(Clone, Debug, Serialize)]
pub struct Approx {
    pub num_perm: usize,
    pub seed: u64,
    /// Standard error of each Jaccard estimate, sqrt(J(1-J)/num_perm).
    pub stderr: Vec<Vec<f64>>,
}

/// The overlap report: what `overlap.json` holds, in argument order.
#[derive(Clone, Debug, Serialize)]
pub struct OverlapReport {
    pub names: Vec<String>,
    /// n-gram set sizes (estimated distinct counts in approximate mode)
    #[serde(serialize_with = "ordered_sizes")]
    pub sizes: Vec<(String, u64)>,
    pub ngram: usize,
    pub stride: usize,
    pub jaccard: Vec<Vec<f64>>,
    /// |A ∩ B| (estimated as J/(1+J)(|A|+|B|) in approximate mode)
    pub shared: Vec<Vec<u64>>,
    pub mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approx: Option<Approx>,
}

fn ordered_sizes<S: Serializer>(
    sizes: &[(String, u64)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(sizes.len()))?;
    for (k, v) in sizes {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

impl OverlapReport {
    pub fn exact(names: Vec<String>, opts: &Options, shared: &[Vec<u64>]) -> OverlapReport {
        let n = names.len();
        let jaccard = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        let union = shared[i][i] + shared[j][j] - shared[i][j];
                        if union == 0 {
                            0.0
                        } else {
                            shared[i][j] as f64 / union as f64
                        }
                    })
                    .collect()
            })
            .collect();
        let sizes = names
            .iter()
            .enumerate()
            .map(|(i, nm)| (nm.clone(), shared[i][i]))
            .collect();
        OverlapReport {
            names,
            sizes,
            ngram: opts.ngram,
            stride: opts.stride,
            jaccard,
            shared: shared.to_vec(),
            mode: "exact",
            approx: None,
        }
    }

    pub fn approx(
        names: Vec<String>,
        opts: &Options,
        num_perm: usize,
        seed: u64,
        sketches: &[Sketch],
    ) -> OverlapReport {
        let n = names.len();
        let estimated: Vec<f64> = sketches.iter().map(Sketch::cardinality).collect();
        let jaccard: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            1.0
                        } else {
                            sketches[i].jaccard(&sketches[j])
                        }
                    })
                    .collect()
            })
            .collect();
        let shared = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        (jaccard[i][j] / (1.0 + jaccard[i][j]) * (estimated[i] + estimated[j]))
                            .round() as u64
                    })
                    .collect()
            })
            .collect();
        let stderr = jaccard
            .iter()
            .map(|r| r.iter().map(|&j| standard_error(j, num_perm)).collect())
            .collect();
        let sizes = names
            .iter()
            .zip(&estimated)
            .map(|(nm, c)| (nm.clone(), c.round() as u64))
            .collect();
        OverlapReport {
            names,
            sizes,
            ngram: opts.ngram,
            stride: opts.stride,
            jaccard,
            shared,
            mode: "minhash",
            approx: Some(Approx {
                num_perm,
                seed,
                stderr,
            }),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes") + "\n"
    }

    /// One row per dataset: name, size, then its Jaccard with every dataset.
    pub fn to_csv(&self) -> String {
        let mut s = format!("dataset,size,{}\n", self.names.join(","));
        for (i, row) in self.jaccard.iter().enumerate() {
            let cells: Vec<String> = row.iter().map(|v| format!("{v:.6}")).collect();
            let _ = writeln!(
                s,
                "{},{},{}",
                self.names[i],
                self.sizes[i].1,
                cells.join(",")
            );
        }
        s
    }

    /// The terminal table: Jaccard matrix, shared counts with set sizes on the diagonal, and the
    /// standard errors when approximate.
    pub fn table(&self) -> String {
        let w = self
            .names
            .iter()
            .map(|n| n.len())
            .max()
            .unwrap_or(0)
            .max(10);
        let block = |title: String, cells: &dyn Fn(usize, usize) -> String| {
            let mut s = format!("{title}\n{:<w$}", "");
            for n in &self.names {
                let _ = write!(s, "  {n:>w$}");
            }
            for (i, name) in self.names.iter().enumerate() {
                let _ = write!(s, "\n{name:<w$}");
                for j in 0..self.names.len() {
                    let _ = write!(s, "  {:>w$}", cells(i, j));
                }
            }
            s + "\n"
        };
        let what = if self.approx.is_some() {
            "estimated "
        } else {
            ""
        };
        let (n, stride) = (self.ngram, self.stride);
        let mut s = block(
            format!("{n}-gram {what}Jaccard (stride {stride}):"),
            &|i, j| format!("{:.6}", self.jaccard[i][j]),
        );
        s += &block(
            format!("\nshared {n}-grams ({what}set sizes on the diagonal):"),
            &|i, j| self.shared[i][j].to_string(),
        );
        if let Some(a) = &self.approx {
            let k = a.num_perm;
            s += &block(
                format!("\nMinHash with {k} permutations: standard error sqrt(J(1-J)/{k}):"),
                &|i, j| format!("{:.4}", a.stderr[i][j]),
            );
        }
        s
    }

    /// overlap.json, overlap.csv, overlap.svg and overlap.png in `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join("overlap.json"), self.to_json().as_bytes())?;
        write_atomic(&dir.join("overlap.csv"), self.to_csv().as_bytes())?;
        let kind = if self.approx.is_some() {
            "MinHash-estimated"
        } else {
            "exact"
        };
        let title = format!(
            "WordPiece {}-gram Jaccard ({kind}, stride {})",
            self.ngram, self.stride
        );
        heatmap(&title, &self.names, &self.jaccard, 3).save(&dir.join("overlap"))
    }
}
