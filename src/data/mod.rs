//! Datasets in, datasets out. Every reader yields Arrow record batches, streamed, whatever the file
//! format; `Batch` turns columns into texts or labels with errors that name file, row and column.
mod batch;
mod blocks;
mod columns;
mod convert;
mod delimited;
mod format;
pub mod guard;
pub use guard::Io;
mod ipc;
mod jsonl;
mod nli;
mod pairs;
mod parquet;
pub use parquet::schema_metadata;
mod corpus_texts;
mod plain_text;
mod reader;
pub mod retrieval;
mod source;
mod split;
mod vectors;
mod write;

pub use batch::Batch;
pub use blocks::{blocks, Blocks};
pub use columns::{Column, ColumnSpec};
pub use convert::{convert, Rows};
pub use corpus_texts::{for_each_text, for_each_text_of, read_texts};
pub use format::Format;
pub use nli::{entailments, read_classes, read_nli, NLI_CLASSES};
pub use pairs::{PairColumns, Pairs, DEFAULT_PAIR_COLUMNS};
pub use reader::{column_names, count_rows, file_xxh3, open, BatchReader};
pub use source::BATCH_ROWS;
pub use split::{hash_order, split_file, split_retrieval, FileSplit, QueryParts, RetrievalSplit};
pub use write::{
    stream_to_parquet, write_atomic, write_parquet, write_with, write_with_path, ParquetSink,
};
