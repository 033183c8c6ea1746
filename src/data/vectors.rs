//! Vector columns (a teacher's embeddings, as `condenser encode` writes them): fixed-size or
//! variable lists of floats, one vector per row.
use super::Batch;
use crate::error::Result;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

impl Batch {
    /// The vectors of column `name` end to end (rows of `dim`): a zero-copy read of a
    /// fixed-size list of f32 without nulls (what `encode` writes), else through `vectors`.
    /// A vector of another width, null or non-finite is an error naming the row.
    pub fn flat_vectors(&self, name: &str, dim: usize) -> Result<Vec<f32>> {
        let col = self.column(name)?;
        if let DataType::FixedSizeList(item, n) = col.data_type() {
            let list = col.as_fixed_size_list();
            if *n as usize == dim
                && item.data_type() == &DataType::Float32
                && list.null_count() == 0
            {
                let child = list.values().as_primitive::<Float32Type>();
                if child.null_count() == 0 {
                    let start = list.value_offset_at(0);
                    let v = &child.values()[start..start + list.len() * dim];
                    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                        let row = self.first_row + i / dim + 1;
                        return Err(crate::error::Error::cell(
                            &self.path,
                            row,
                            name,
                            "non-finite value in the vector",
                        ));
                    }
                    return Ok(v.to_vec());
                }
            }
        }
        let rows = self.vectors(name)?;
        if let Some(i) = rows.iter().position(|r| r.len() != dim) {
            return Err(crate::error::Error::cell(
                &self.path,
                self.first_row + i + 1,
                name,
                format!("a vector of {} values, expected {dim}", rows[i].len()),
            ));
        }
        Ok(rows.concat())
    }

    /// One `Vec<f32>` per row; null rows, null or non-finite entries are errors naming the row.
    pub fn vectors(&self, name: &str) -> Result<Vec<Vec<f32>>> {
        let col = self.column(name)?;
        let rows: Vec<Option<ArrayRef>> = match col.data_type() {
            DataType::FixedSizeList(..) => col.as_fixed_size_list().iter().collect(),
            DataType::List(_) => col.as_list::<i32>().iter().collect(),
            DataType::LargeList(_) => col.as_list::<i64>().iter().collect(),
            t => {
                return Err(crate::error::Error::column(
                    &self.path,
                    name,
                    format!("wrong column type {t}, expected a list of floats (a vector)"),
                ))
            }
        };
        let mut out = Vec::with_capacity(rows.len());
        for (i, r) in rows.into_iter().enumerate() {
            let bad =
                |m: &str| crate::error::Error::cell(&self.path, self.first_row + i + 1, name, m);
            let r = r.ok_or_else(|| bad("null vector"))?;
            if r.null_count() > 0 {
                return Err(bad("null entry in the vector"));
            }
            let v: Vec<f32> = match r.data_type() {
                DataType::Float32 => r.as_primitive::<Float32Type>().values().to_vec(),
                DataType::Float64 => r
                    .as_primitive::<Float64Type>()
                    .values()
                    .iter()
                    .map(|&x| x as f32)
                    .collect(),
                t => return Err(bad(&format!("vector of {t}, expected floats"))),
            };
            if v.iter().any(|x| !x.is_finite()) {
                return Err(bad("non-finite value in the vector"));
            }
            out.push(v);
        }
        Ok(out)
    }
}
