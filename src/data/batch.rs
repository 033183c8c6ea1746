use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use std::path::PathBuf;
use std::sync::Arc;

/// One record batch of a dataset file, knowing where its rows sit in the file so that every error
/// can name file, row (1-based) and column.
pub struct Batch {
    pub path: Arc<PathBuf>,
    /// 0-based index in the file of this batch's first row.
    pub first_row: usize,
    pub data: RecordBatch,
}

impl Batch {
    pub fn num_rows(&self) -> usize {
        self.data.num_rows()
    }

    pub fn column(&self, name: &str) -> Result<&ArrayRef> {
        self.data
            .column_by_name(name)
            .ok_or_else(|| Error::column(&self.path, name, "missing column"))
    }

    fn cell_error(&self, i: usize, column: &str, msg: impl Into<crate::error::BoxError>) -> Error {
        Error::cell(&self.path, self.first_row + i + 1, column, msg)
    }

    /// The column as text, one &str per row. Nulls and non-UTF-8 bytes are errors.
    pub fn texts(&self, name: &str) -> Result<Vec<&str>> {
        self.optional_texts(name)?
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.ok_or_else(|| self.cell_error(i, name, "null text")))
            .collect()
    }

    /// The column as text, None for a null (an optional field such as a BEIR title).
    pub fn optional_texts(&self, name: &str) -> Result<Vec<Option<&str>>> {
        let col = self.column(name)?;
        Ok(match col.data_type() {
            DataType::Utf8 => col.as_string::<i32>().iter().collect(),
            DataType::LargeUtf8 => col.as_string::<i64>().iter().collect(),
            DataType::Utf8View => col.as_string_view().iter().collect(),
            DataType::Binary => self.utf8(col.as_binary::<i32>().iter(), name)?,
            DataType::LargeBinary => self.utf8(col.as_binary::<i64>().iter(), name)?,
            DataType::BinaryView => self.utf8(col.as_binary_view().iter(), name)?,
            DataType::Dictionary(_, v) if **v == DataType::Utf8 => {
                let d = col.as_any_dictionary();
                let values = d.values().as_string::<i32>();
                let keys = d.normalized_keys();
                (0..col.len())
                    .map(|i| (!col.is_null(i)).then(|| values.value(keys[i])))
                    .collect()
            }
            // an all-null column (a JSON key whose every value is null) has no text type
            DataType::Null => vec![None; col.len()],
            t => {
                return Err(Error::column(
                    &self.path,
                    name,
                    format!("wrong column type {t}, expected text (string)"),
                ))
            }
        })
    }

    /// Identifiers: text, or integers written as decimal text.
    pub fn ids(&self, name: &str) -> Result<Vec<String>> {
        let col = self.column(name)?;
        match col.data_type() {
            DataType::Int64 | DataType::Int32 | DataType::UInt64 | DataType::UInt32 => Ok(self
                .labels(name)?
                .into_iter()
                .map(|v| (v as i64).to_string())
                .collect()),
            _ => Ok(self.texts(name)?.into_iter().map(String::from).collect()),
        }
    }

    fn utf8<'a>(
        &self,
        bytes: impl Iterator<Item = Option<&'a [u8]>>,
        name: &str,
    ) -> Result<Vec<Option<&'a str>>> {
        bytes
            .enumerate()
            .map(|(i, b)| {
                b.map(|b| {
                    std::str::from_utf8(b).map_err(|e| {
                        self.cell_error(i, name, format!("not valid UTF-8 text ({e})"))
                    })
                })
                .transpose()
            })
            .collect()
    }

    /// The column as numeric labels. Integers, floats, booleans and numeric strings (CSV) are
    /// accepted; null, NaN and unparsable values are errors naming the row.
    pub fn labels(&self, name: &str) -> Result<Vec<f64>> {
        let mut out = Vec::new();
        for (i, v) in self.optional_labels(name)?.into_iter().enumerate() {
            out.push(v.ok_or_else(|| self.cell_error(i, name, "null label"))?);
        }
        Ok(out)
    }

    /// As `labels`, with null (or empty CSV) cells as None: unlabelled rows.
    pub fn optional_labels(&self, name: &str) -> Result<Vec<Option<f64>>> {
        let col = self.column(name)?;
        let values: Vec<Option<f64>> = match col.data_type() {
            DataType::Float64 => col.as_primitive::<Float64Type>().iter().collect(),
            DataType::Float32 => col
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::Float16 => col
                .as_primitive::<Float16Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::Int64 => col
                .as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map(|x| x as f64))
                .collect(),
            DataType::Int32 => col
                .as_primitive::<Int32Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::Int16 => col
                .as_primitive::<Int16Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::Int8 => col
                .as_primitive::<Int8Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::UInt64 => col
                .as_primitive::<UInt64Type>()
                .iter()
                .map(|v| v.map(|x| x as f64))
                .collect(),
            DataType::UInt32 => col
                .as_primitive::<UInt32Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::UInt16 => col
                .as_primitive::<UInt16Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::UInt8 => col
                .as_primitive::<UInt8Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
            DataType::Boolean => col
                .as_boolean()
                .iter()
                .map(|v| v.map(|b| b as u8 as f64))
                .collect(),
            DataType::Null => vec![None; col.len()],
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let mut out = Vec::with_capacity(col.len());
                for (i, s) in self.texts(name)?.into_iter().enumerate() {
                    if s.trim().is_empty() {
                        out.push(None); // an empty CSV cell: an unlabelled row
                        continue;
                    }
                    let v = s.trim().parse::<f64>().map_err(|_| {
                        self.cell_error(i, name, format!("label '{s}' is not a number"))
                    })?;
                    out.push(Some(v));
                }
                out
            }
            t => {
                return Err(Error::column(
                    &self.path,
                    name,
                    format!("wrong column type {t}, expected a numeric label"),
                ))
            }
        };
        for (i, v) in values.iter().enumerate() {
            if v.is_some_and(f64::is_nan) {
                return Err(self.cell_error(i, name, "NaN label"));
            }
        }
        Ok(values)
    }
}
