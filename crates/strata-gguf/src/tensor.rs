//! Tensor directory entries and zero-copy views of tensor data.

use crate::GgmlType;

/// One entry of a GGUF tensor directory.
///
/// `shape` is in ggml order: `shape[0]` is the row length (`ne0`, contiguous in memory),
/// `shape[1..]` count rows. A PyTorch `[out, in]` weight is stored as `shape = [in, out]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// GGUF tensor name, e.g. `blk.0.ffn_gate_exps.weight`.
    pub name: String,
    /// Element type of the data.
    pub ggml_type: GgmlType,
    /// Dimensions, 1 to 4, each >= 1, ggml order.
    pub shape: Vec<u64>,
    /// Byte offset of the data relative to the start of the file's data section.
    pub offset: u64,
    /// Bytes of data: `row_bytes() * n_rows()`.
    pub size_bytes: u64,
}

impl TensorInfo {
    /// Total element count (product of `shape`).
    pub fn n_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Number of rows: the product of `shape[1..]` (1 for a 1-D tensor).
    pub fn n_rows(&self) -> u64 {
        self.shape.iter().skip(1).product()
    }

    /// Elements per row (`shape[0]`).
    pub fn row_len(&self) -> u64 {
        self.shape.first().copied().unwrap_or(0)
    }

    /// Bytes of one row (`shape[0]` elements, a whole number of blocks).
    pub fn row_bytes(&self) -> u64 {
        self.ggml_type.row_bytes(self.row_len()).unwrap_or(0)
    }
}

/// Bytes of a tensor of `ty` with `shape`, or a reason why the shape is invalid
/// (row length not a whole number of blocks, or size overflow).
pub(crate) fn tensor_size(ty: GgmlType, shape: &[u64]) -> Result<u64, String> {
    let row_len = shape.first().copied().unwrap_or(0);
    let row = ty.row_bytes(row_len).ok_or_else(|| {
        format!(
            "row length {row_len} is not a multiple of the {ty} block size {}",
            ty.block_size()
        )
    })?;
    shape[1.min(shape.len())..]
        .iter()
        .try_fold(row, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("shape {shape:?} of {ty} overflows 64-bit size"))
}

/// A tensor of a loaded model: its directory entry and its bytes, borrowed from the mmap.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'a> {
    /// Name, type, shape, offset.
    pub info: &'a TensorInfo,
    /// Exactly `info.size_bytes` bytes, in the file's layout for `info.ggml_type`.
    pub data: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_rows() {
        let t = TensorInfo {
            name: "w".into(),
            ggml_type: GgmlType::Q8_0,
            shape: vec![64, 3, 2],
            offset: 0,
            size_bytes: 0,
        };
        assert_eq!(t.n_elements(), 384);
        assert_eq!(t.n_rows(), 6);
        assert_eq!(t.row_bytes(), 68);
        assert_eq!(tensor_size(GgmlType::Q8_0, &[64, 3, 2]), Ok(408));
        assert!(tensor_size(GgmlType::Q8_0, &[33]).is_err());
        assert!(tensor_size(GgmlType::F32, &[u64::MAX / 2, 4]).is_err());
    }
}
