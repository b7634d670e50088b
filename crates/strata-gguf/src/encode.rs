//! Serialization of metadata values and the header (the inverse of `header.rs`).

use crate::header::MAGIC;
use crate::{Array, GgufError, Metadata, TensorInfo, Value};

/// Deepest array nesting the writer emits (the reader's limit).
const MAX_ARRAY_DEPTH: usize = 8;

pub(crate) fn put_u32(buf: &mut Vec<u8>, x: u32) {
    buf.extend_from_slice(&x.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut Vec<u8>, x: u64) {
    buf.extend_from_slice(&x.to_le_bytes());
}

fn put_string(buf: &mut Vec<u8>, s: &str) {
    put_u64(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

fn put_value(buf: &mut Vec<u8>, key: &str, v: &Value) -> Result<(), GgufError> {
    put_u32(buf, v.value_type().id());
    match v {
        Value::U8(x) => buf.push(*x),
        Value::I8(x) => buf.push(*x as u8),
        Value::U16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => buf.push(u8::from(*x)),
        Value::String(s) => put_string(buf, s),
        Value::Array(a) => put_array(buf, key, a, 1)?,
        Value::U64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => buf.extend_from_slice(&x.to_le_bytes()),
    }
    Ok(())
}

macro_rules! put_le {
    ($buf:expr, $v:expr) => {
        for x in $v {
            $buf.extend_from_slice(&x.to_le_bytes());
        }
    };
}

fn put_array(buf: &mut Vec<u8>, key: &str, a: &Array, depth: usize) -> Result<(), GgufError> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::Write(format!(
            "key '{key}': arrays nested more than {MAX_ARRAY_DEPTH} deep"
        )));
    }
    put_u32(buf, a.elem_type().id());
    put_u64(buf, a.len() as u64);
    match a {
        Array::U8(v) => buf.extend_from_slice(v),
        Array::I8(v) => buf.extend(v.iter().map(|&x| x as u8)),
        Array::U16(v) => put_le!(buf, v),
        Array::I16(v) => put_le!(buf, v),
        Array::U32(v) => put_le!(buf, v),
        Array::I32(v) => put_le!(buf, v),
        Array::F32(v) => put_le!(buf, v),
        Array::Bool(v) => buf.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| put_string(buf, s)),
        Array::Array(v) => {
            for inner in v {
                put_array(buf, key, inner, depth + 1)?;
            }
        }
        Array::U64(v) => put_le!(buf, v),
        Array::I64(v) => put_le!(buf, v),
        Array::F64(v) => put_le!(buf, v),
    }
    Ok(())
}

/// The header through the padding before the data section. `tensors` must carry final
/// offsets; the returned length is a multiple of `alignment`.
pub(crate) fn encode_header(
    version: u32,
    metadata: &Metadata,
    tensors: &[TensorInfo],
    alignment: u64,
) -> Result<Vec<u8>, GgufError> {
    let mut buf = Vec::new();
    buf.extend_from_slice(MAGIC);
    put_u32(&mut buf, version);
    put_u64(&mut buf, tensors.len() as u64);
    put_u64(&mut buf, metadata.len() as u64);
    for (key, value) in metadata.iter() {
        put_string(&mut buf, key);
        put_value(&mut buf, key, value)?;
    }
    for t in tensors {
        put_string(&mut buf, &t.name);
        put_u32(&mut buf, t.shape.len() as u32);
        for &d in &t.shape {
            put_u64(&mut buf, d);
        }
        put_u32(&mut buf, t.ggml_type.id());
        put_u64(&mut buf, t.offset);
    }
    let padded = (buf.len() as u64).div_ceil(alignment) * alignment;
    buf.resize(padded as usize, 0);
    Ok(buf)
}
