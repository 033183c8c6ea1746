//! The queries of a search: a retrieval folder's or a file's (id, text) rows embedded by the
//! corpus's model, or query vectors stored by `encode`.
use super::store::StoredEmbeddings;
use crate::data::{self, retrieval};
use crate::error::Result;
use crate::model::{Embeddings, SentenceEncoder};
use indicatif::ProgressBar;
use std::path::Path;

/// Queries as ids and vectors.
pub struct Queries {
    pub ids: Vec<String>,
    pub vectors: Embeddings,
}

impl Queries {
    /// Query (id, text) rows: a retrieval folder's queries, or a file with `id`/`_id` and `text`.
    pub fn texts(path: &Path) -> Result<Vec<(String, String)>> {
        let file = match path.is_dir() {
            true => retrieval::find_file(path, "queries")?,
            false => path.to_path_buf(),
        };
        retrieval::read_texts(&file)
    }

    /// The queries at `path` (as `texts` reads them) embedded by `enc`.
    pub fn embed(
        path: &Path,
        enc: &SentenceEncoder,
        batch: usize,
        progress: &ProgressBar,
    ) -> Result<Queries> {
        let rows = Queries::texts(path)?;
        let texts: Vec<&str> = rows.iter().map(|(_, t)| t.as_str()).collect();
        let vectors = enc.encode_query(&texts, batch, progress)?;
        let ids = rows.into_iter().map(|(id, _)| id).collect();
        Ok(Queries { ids, vectors })
    }

    /// Stored query vectors (`encode`'s output; ids from an `id` or `_id` column, else the row
    /// number).
    pub fn stored(store: &StoredEmbeddings) -> Result<Queries> {
        let mut ids = Vec::new();
        let mut data = Vec::new();
        let files = &store.files;
        let id_col = id_column(&files[0])?;
        for f in files {
            let cols: Vec<&str> = id_col
                .iter()
                .map(String::as_str)
                .chain([store.column.as_str()])
                .collect();
            for b in data::open(f, &cols)? {
                let b = b?;
                data.extend(b.flat_vectors(&store.column, store.meta.dim)?);
                match &id_col {
                    Some(c) => ids.extend(b.ids(c)?),
                    None => {
                        let at = ids.len();
                        ids.extend((at..at + b.num_rows()).map(|i| i.to_string()))
                    }
                }
            }
        }
        Ok(Queries {
            ids,
            vectors: Embeddings {
                dim: store.meta.dim,
                data,
            },
        })
    }
}

/// A store's id column (`_id` or `id`, as retrieval folders name it), if it has one.
pub(super) fn id_column(file: &Path) -> Result<Option<String>> {
    Ok(retrieval::find_column(file, &["_id", "id"])?.map(String::from))
}
