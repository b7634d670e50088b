//! Gathering rows of a weight table (token embeddings, PLE n-gram rows) into f32 activations.

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, grid, push, u32_of, Kernels};
use crate::matmul::QMatrix;
use crate::recorder::Recorder;
use crate::shaders;

impl Kernels {
    /// Records `out[i] = scale · table[ids[i]]` (`out`: `[ids.len()][table.cols]` f32),
    /// dequantizing each row from its block layout: the engine's `embed` (one id per token)
    /// and `embed_rows` (`per_row` ids per token, side by side: the same memory as
    /// `[T·per_row][cols]`). The ids are uploaded within the batch.
    ///
    /// Errors: [`VkError::Shape`] naming the first id outside the table, or an `out` that is
    /// too small; [`VkError::UnsupportedType`]; allocation errors.
    pub fn get_rows<'a>(
        &self,
        rec: &mut Recorder<'a>,
        table: &'a QMatrix,
        ids: &[u32],
        scale: f32,
        out: &'a Buffer,
    ) -> Result<(), VkError> {
        if let Some((i, id)) = ids
            .iter()
            .enumerate()
            .find(|(_, &id)| id as usize >= table.rows)
        {
            return Err(VkError::Shape {
                op: "get_rows",
                what: format!(
                    "id {id} (at {i}) is outside the table's {} rows",
                    table.rows
                ),
            });
        }
        check_f32("get_rows", "out", out, ids.len() * table.cols)?;
        if ids.is_empty() {
            return Ok(());
        }
        let (name, spirv) =
            shaders::get_rows(table.ty).ok_or(VkError::UnsupportedType(table.ty))?;
        let tables = self.tables_for(table.ty)?;
        let p = self.pipeline(name, spirv, 3 + tables.is_some() as u32, 20, &[self.wg])?;
        let id_bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        let id_buf = Buffer::new(rec.device(), id_bytes.len() as u64, crate::Location::Device)?;
        // The ids live in a buffer the recorder keeps (`keep`), hence the crate-internal calls.
        let mut staging = Buffer::new(rec.device(), id_bytes.len() as u64, crate::Location::Host)?;
        if let Some(m) = staging.mapped_mut() {
            m[..id_bytes.len()].copy_from_slice(&id_bytes);
        }
        rec.record_copy(&staging, &id_buf, id_buf.size())?;
        rec.keep(staging);
        let args = push(&[
            u32_of("get_rows", table.rows)?,
            u32_of("get_rows", table.cols)?,
            u32_of("get_rows", table.row_bytes)?,
            u32_of("get_rows", ids.len())?,
            scale.to_bits(),
        ]);
        let groups = grid(u32_of("get_rows", ids.len())?);
        match &tables {
            Some(t) => {
                rec.keep_shared(t);
                rec.record_dispatch(&p, &[&table.buf, &id_buf, out, t], &args, groups)?;
            }
            None => rec.record_dispatch(&p, &[&table.buf, &id_buf, out], &args, groups)?,
        }
        rec.keep(id_buf);
        Ok(())
    }
}
