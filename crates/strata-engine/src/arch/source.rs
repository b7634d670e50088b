//! Where an architecture's weights come from: a [`TensorSource`] hands out tensors by GGUF name
//! and expected shape. [`FileTensors`] reads them from a mapped file (checking shape and type);
//! [`Recorder`] only writes down what was asked for, so running an architecture's loader on it
//! yields the architecture's tensor list (what `strata synth` writes) from the same code that
//! loads a file — one place names every tensor.

use std::cell::RefCell;

use strata_gguf::{GgufModel, Tensor};

use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::ops::moe::ExpertTensor;

/// What kind of tensor an architecture asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A weight matrix `[rows][cols]`, read in place in any supported ggml type.
    Matrix,
    /// A 3-D expert tensor `[n_expert][rows][cols]`, read in place.
    Experts,
    /// A one-row weight read in place (stored as `[cols]` or `[cols, 1]`).
    RowVector,
    /// A small tensor (norm weights, biases, SSM parameters) copied out as f32.
    Floats,
}

/// One tensor of an architecture's list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// GGUF name (`blk.3.ffn_down_exps.weight`).
    pub name: String,
    /// ggml order: `shape[0]` is the row length.
    pub shape: Vec<u64>,
    pub kind: TensorKind,
}

/// Hands out tensors by name and expected shape (ggml order). Errors name the tensor.
pub trait TensorSource {
    /// `[rows][cols]`.
    fn matrix(&self, name: &str, cols: usize, rows: usize) -> Result<Matrix<'static>, EngineError>;
    /// `[n_expert][rows][cols]`, viewed per expert.
    fn experts(
        &self,
        name: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
    ) -> Result<ExpertTensor<'static>, EngineError>;
    /// A one-row weight as a `[1][cols]` matrix.
    fn row_vector(&self, name: &str, cols: usize) -> Result<Matrix<'static>, EngineError>;
    /// A small tensor of exactly `shape`, as f32.
    fn floats(&self, name: &str, shape: &[u64]) -> Result<Vec<f32>, EngineError>;
    /// Whether an optional tensor is there. `usual`: whether files of this architecture
    /// normally have it (what a [`Recorder`] answers).
    fn has(&self, name: &str, usual: bool) -> bool;

    /// A 1-D tensor of `len` elements, as f32.
    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>, EngineError> {
        self.floats(name, &[len as u64])
    }

    /// [`TensorSource::vector`] if the tensor is there (see [`TensorSource::has`]).
    fn opt_vector(
        &self,
        name: &str,
        len: usize,
        usual: bool,
    ) -> Result<Option<Vec<f32>>, EngineError> {
        match self.has(name, usual) {
            true => self.vector(name, len).map(Some),
            false => Ok(None),
        }
    }
}

/// The tensors of a mapped GGUF file.
pub struct FileTensors {
    pub gguf: &'static GgufModel,
}

impl FileTensors {
    fn tensor(&self, name: &str, shape: &[u64]) -> Result<Tensor<'static>, EngineError> {
        let t = self
            .gguf
            .tensor(name)
            .ok_or_else(|| EngineError::MissingTensor(name.to_string()))?;
        if t.info.shape != shape {
            return Err(EngineError::BadShape {
                name: name.into(),
                expected: shape.to_vec(),
                found: t.info.shape.clone(),
            });
        }
        Ok(t)
    }

    /// `t` as `[rows][cols]` once its type is known to be supported.
    fn typed_matrix(
        name: &str,
        t: Tensor<'static>,
        cols: usize,
        rows: usize,
    ) -> Result<Matrix<'static>, EngineError> {
        if !strata_quant::supports_dequantize(t.info.ggml_type) {
            return Err(EngineError::BadMetadata {
                key: name.into(),
                reason: format!("ggml type {} is not supported", t.info.ggml_type),
            });
        }
        Ok(Matrix {
            ty: t.info.ggml_type,
            rows,
            cols,
            data: t.data,
        })
    }
}

impl TensorSource for FileTensors {
    fn matrix(&self, name: &str, cols: usize, rows: usize) -> Result<Matrix<'static>, EngineError> {
        let t = self.tensor(name, &[cols as u64, rows as u64])?;
        Self::typed_matrix(name, t, cols, rows)
    }

    fn experts(
        &self,
        name: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
    ) -> Result<ExpertTensor<'static>, EngineError> {
        let t = self.tensor(name, &[cols as u64, rows as u64, n_expert as u64])?;
        let all = Self::typed_matrix(name, t, cols, rows * n_expert)?;
        Ok(ExpertTensor::new(all, n_expert))
    }

    fn row_vector(&self, name: &str, cols: usize) -> Result<Matrix<'static>, EngineError> {
        let shape = match self.gguf.tensor(name) {
            Some(t) if t.info.shape == [cols as u64] => vec![cols as u64],
            _ => vec![cols as u64, 1],
        };
        let t = self.tensor(name, &shape)?;
        Self::typed_matrix(name, t, cols, 1)
    }

    fn floats(&self, name: &str, shape: &[u64]) -> Result<Vec<f32>, EngineError> {
        let t = self.tensor(name, shape)?;
        let mut out = vec![0.0; shape.iter().product::<u64>() as usize];
        strata_quant::dequantize(t.info.ggml_type, t.data, &mut out)?;
        Ok(out)
    }

    fn has(&self, name: &str, _usual: bool) -> bool {
        self.gguf.tensor(name).is_some()
    }
}

/// Records every tensor asked for, in order, and hands out empty stand-ins (matrices with
/// no bytes, zero vectors): the weights it helps build are only for listing, never run.
#[derive(Default)]
pub struct Recorder {
    specs: RefCell<Vec<TensorSpec>>,
}

impl Recorder {
    /// The tensors asked for so far, in order.
    pub fn into_specs(self) -> Vec<TensorSpec> {
        self.specs.into_inner()
    }

    fn note(&self, name: &str, shape: Vec<u64>, kind: TensorKind) {
        self.specs.borrow_mut().push(TensorSpec {
            name: name.to_string(),
            shape,
            kind,
        });
    }
}

/// A matrix view with no bytes (the recorder's stand-in).
fn empty_matrix(cols: usize, rows: usize) -> Matrix<'static> {
    Matrix {
        ty: strata_gguf::GgmlType::F32,
        rows,
        cols,
        data: &[],
    }
}

impl TensorSource for Recorder {
    fn matrix(&self, name: &str, cols: usize, rows: usize) -> Result<Matrix<'static>, EngineError> {
        self.note(name, vec![cols as u64, rows as u64], TensorKind::Matrix);
        Ok(empty_matrix(cols, rows))
    }

    fn experts(
        &self,
        name: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
    ) -> Result<ExpertTensor<'static>, EngineError> {
        let shape = vec![cols as u64, rows as u64, n_expert as u64];
        self.note(name, shape, TensorKind::Experts);
        Ok(ExpertTensor::new(
            empty_matrix(cols, rows * n_expert),
            n_expert,
        ))
    }

    fn row_vector(&self, name: &str, cols: usize) -> Result<Matrix<'static>, EngineError> {
        self.note(name, vec![cols as u64], TensorKind::RowVector);
        Ok(empty_matrix(cols, 1))
    }

    fn floats(&self, name: &str, shape: &[u64]) -> Result<Vec<f32>, EngineError> {
        self.note(name, shape.to_vec(), TensorKind::Floats);
        Ok(vec![0.0; shape.iter().product::<u64>() as usize])
    }

    fn has(&self, _name: &str, usual: bool) -> bool {
        usual
    }
}
