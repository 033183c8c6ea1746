//! What a search of stored embeddings depends on, by content: each store file's size and a hash of
//! its Parquet footer (which changes with any re-encode), and an index's description and file
//! likewise. An index records its store so (description.rs), and a shard manifest records its
//! inputs so, so that a store re-encoded or an index rebuilt between two shards stops their merge
//! where the paths alone would let it through.
use super::description::finished_info_path;
use super::store::{StoreFile, StoredEmbeddings};
use crate::error::Result;
use crate::shard::Settings;
use std::path::Path;

/// `settings` (a shard manifest's) with the fingerprint of the stores and the index a run reads.
pub fn with_inputs(
    mut settings: Settings,
    stores: &[&Path],
    index: Option<&Path>,
) -> Result<Settings> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut add =
        |f: &StoreFile| h.update(serde_json::to_string(f).expect("serializes").as_bytes());
    for s in stores {
        StoredEmbeddings::open_as_made(s)?
            .fingerprints()?
            .iter()
            .for_each(&mut add);
    }
    if let Some(p) = index {
        add(&StoreFile::of(&finished_info_path(p)?)?);
        add(&StoreFile::of(p)?);
    }
    let f = format!("{:016x}", h.digest());
    settings.insert("inputs_fingerprint".into(), f.into());
    Ok(settings)
}
