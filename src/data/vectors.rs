//! Vector columns (a teacher's embeddings, as `condenser encode` writes them): fixed-size or
//! variable lists of floats, one vector per row.
use super::Batch;
use crate::error::Result;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

impl Batch {
    /// One Vec<f32> per row; null rows, null or non-finite entries are errors naming the row.
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
