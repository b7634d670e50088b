//! The error type of every fallible entry point in this crate.

use std::fmt;

use strata_gguf::GgmlType;

use crate::Isa;

/// An operation of this crate, named in [`QuantError::Unsupported`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`crate::dequantize`]: quantized row -> f32.
    Dequantize,
    /// [`crate::quantize`]: f32 -> quantized row.
    Quantize,
    /// [`crate::dot_f32`]: quantized row · f32 vector.
    DotF32,
    /// [`crate::vec_dot`]: quantized row · quantized activation row.
    VecDot,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Dequantize => "dequantize",
            Op::Quantize => "quantize",
            Op::DotF32 => "dot_f32",
            Op::VecDot => "vec_dot",
        })
    }
}

/// Why a quantization call was refused. No call writes partial output before returning one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// A row length (in elements) is not a whole number of blocks of `ty`.
    #[error(
        "{ty}: a row of {elements} elements is not a whole number of {block_size}-element blocks"
    )]
    PartialBlock {
        /// The element type of the row.
        ty: GgmlType,
        /// The row length that was given, in elements.
        elements: usize,
        /// Elements per block of `ty`.
        block_size: usize,
    },
    /// A buffer has the wrong length for the row it should hold.
    #[error("{ty}: {what} has length {got}, expected {expected}")]
    LengthMismatch {
        /// The element type the buffer holds.
        ty: GgmlType,
        /// Which buffer, with its unit (for example `"quantized row (bytes)"`).
        what: &'static str,
        /// The length the other arguments imply.
        expected: usize,
        /// The length that was given.
        got: usize,
    },
    /// This crate does not implement `op` for `ty`; the `supports_*` functions say what it does.
    #[error("{op} is not implemented for {ty} in strata-quant")]
    Unsupported {
        /// The element type.
        ty: GgmlType,
        /// The operation that was asked for.
        op: Op,
    },
    /// A `*_on` call named an instruction set this CPU does not have ([`Isa::is_available`]).
    #[error("the {isa} kernels need CPU features this machine lacks; use Isa::best()")]
    IsaUnavailable {
        /// The instruction set that was asked for.
        isa: Isa,
    },
}
