//! What `mine` reads: a retrieval folder (each (query, relevant document) of a qrels split is a
//! pair, the folder's corpus the corpus) or a pairs file with an optional corpus file.
use super::MineInput;
use crate::data::retrieval::{corpus_file, read_texts, RetrievalSet};
use crate::data::{self, ColumnSpec};
use crate::error::{Error, Result};
use std::collections::HashSet;
use std::path::PathBuf;

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MineSource {
    Retrieval {
        dir: PathBuf,
        split: Option<String>,
    },
    Pairs {
        file: PathBuf,
        columns: ColumnSpec,
        corpus: Option<PathBuf>,
    },
}

/// The texts, owned; `input()` lends them as `MineInput`.
#[derive(Default)]
pub struct MineTexts {
    pub anchors: Vec<String>,
    pub positives: Vec<String>,
    pub corpus: Vec<String>,
}

impl MineTexts {
    /// xxh3 of every text, each framed by its length, the three lists apart: what a resumed run
    /// must find again.
    pub fn fingerprint(&self) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for list in [&self.anchors, &self.positives, &self.corpus] {
            h.update(&(list.len() as u64).to_le_bytes());
            for t in list {
                h.update(&(t.len() as u64).to_le_bytes());
                h.update(t.as_bytes());
            }
        }
        format!("{:016x}", h.digest())
    }

    pub fn input(&self) -> MineInput<'_> {
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        MineInput {
            anchors: refs(&self.anchors),
            positives: refs(&self.positives),
            corpus: refs(&self.corpus),
        }
    }
}

impl MineSource {
    pub fn read(&self) -> Result<MineTexts> {
        match self {
            MineSource::Retrieval { dir, split } => {
                let set = RetrievalSet::load_split(dir, split.as_deref())?;
                let text: std::collections::HashMap<&str, &str> = set
                    .corpus
                    .iter()
                    .map(|(i, t)| (i.as_str(), t.as_str()))
                    .collect();
                let mut out = MineTexts::default();
                for (qid, q) in &set.queries {
                    let mut docs: Vec<&String> = set.relevant[qid].iter().collect();
                    docs.sort(); // qrels sets are unordered: a fixed order keeps runs identical
                    for d in docs {
                        out.anchors.push(q.clone());
                        out.positives.push(text[d.as_str()].to_string());
                    }
                }
                out.corpus = set.corpus.into_iter().map(|(_, t)| t).collect();
                Ok(out)
            }
            MineSource::Pairs {
                file,
                columns,
                corpus,
            } => {
                let names = columns.resolve(file)?;
                if names.len() != 2 {
                    return Err(Error::file(
                        file,
                        format!(
                            "--columns names the anchor and positive columns, got {}",
                            names.len()
                        ),
                    ));
                }
                let mut out = MineTexts::default();
                for b in data::open(file, &[&names[0], &names[1]])? {
                    let b = b?;
                    out.anchors
                        .extend(b.texts(&names[0])?.into_iter().map(String::from));
                    out.positives
                        .extend(b.texts(&names[1])?.into_iter().map(String::from));
                }
                if out.anchors.is_empty() {
                    return Err(Error::file(file, "no (anchor, positive) pairs"));
                }
                if let Some(c) = corpus {
                    // a retrieval folder stands for its corpus file, as `augment --corpus` takes it
                    let c = &corpus_file(c)?;
                    out.corpus = read_texts(c)?.into_iter().map(|(_, t)| t).collect();
                    // a positive the corpus lacks means the two files do not belong together
                    let have: HashSet<&str> = out.corpus.iter().map(String::as_str).collect();
                    if let Some(row) = out
                        .positives
                        .iter()
                        .position(|p| !have.contains(p.as_str()))
                    {
                        return Err(Error::cell(
                            file,
                            row + 1,
                            &names[1],
                            format!("positive not found in the corpus {}", c.display()),
                        ));
                    }
                }
                Ok(out)
            }
        }
    }
}
