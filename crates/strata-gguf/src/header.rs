//! Parsing of the GGUF header, metadata and tensor directory from a byte slice.
//!
//! Layout (all little-endian): magic `GGUF`, `u32` version, `u64` tensor count, `u64` kv
//! count, the kv pairs, the tensor infos, zero padding to `general.alignment`, tensor data.
//! Every count, length, offset and shape is checked against the bytes actually present.

use std::collections::HashSet;

use crate::cursor::Cursor;
use crate::tensor::tensor_size;
use crate::value::ValueType;
use crate::{Array, GgmlType, GgufError, Metadata, TensorInfo, Value};

/// The 4 bytes every GGUF file starts with.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Key holding the data alignment (`u32`, a nonzero power of two).
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Arrays nested deeper than this are rejected (no real file nests at all; the limit keeps
/// hostile input from exhausting the stack).
const MAX_ARRAY_DEPTH: usize = 8;
/// Largest alignment accepted (1 GiB).
const MAX_ALIGNMENT: u64 = 1 << 30;
/// Smallest tensor info: empty name (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
const MIN_TENSOR_INFO_BYTES: usize = 32;
/// Smallest kv pair: empty key (8) + type (4) + one-byte value (1).
const MIN_KV_BYTES: usize = 13;

/// Everything in a GGUF file except the tensor bytes.
#[derive(Debug)]
pub(crate) struct Header {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute byte offset of the data section.
    pub data_offset: u64,
}

pub(crate) fn parse(bytes: &[u8]) -> Result<Header, GgufError> {
    let mut c = Cursor::new(bytes);
    check_magic(bytes)?;
    c.take(4, "magic")?;
    let version = check_version(c.u32("version")?)?;
    let tensor_count = c.count(MIN_TENSOR_INFO_BYTES, "tensor_count")?;
    let kv_count = c.count(MIN_KV_BYTES, "kv_count")?;

    let mut metadata = Metadata::new();
    let mut alignment_at = 0;
    for i in 0..kv_count {
        let at = c.pos();
        let key = c.string(&format!("metadata key #{i}"))?;
        let field = format!("key '{key}'");
        let value = read_value(&mut c, &field)?;
        if key == ALIGNMENT_KEY {
            alignment_at = at;
        }
        if metadata.contains(&key) {
            return Err(GgufError::malformed(at, field, "duplicate metadata key"));
        }
        metadata.set(key, value);
    }
    let alignment = alignment(&metadata, alignment_at)?;

    let mut tensors = Vec::with_capacity(tensor_count);
    let mut offset_fields = Vec::with_capacity(tensor_count);
    let mut names = HashSet::with_capacity(tensor_count);
    for i in 0..tensor_count {
        let at = c.pos();
        let (info, offset_at) = read_tensor_info(&mut c, i, alignment)?;
        if !names.insert(info.name.clone()) {
            let field = format!("tensor '{}'", info.name);
            return Err(GgufError::malformed(at, field, "duplicate tensor name"));
        }
        tensors.push(info);
        offset_fields.push(offset_at);
    }

    let end_of_infos = c.pos() as u64;
    let aligned = end_of_infos.div_ceil(alignment) * alignment;
    let file_len = bytes.len() as u64;
    let data_offset = if tensors.is_empty() {
        aligned.min(file_len)
    } else if aligned > file_len {
        return Err(GgufError::malformed(
            c.pos(),
            "data section",
            format!(
                "truncated: data section would start at byte {aligned}, file has {file_len} bytes"
            ),
        ));
    } else {
        aligned
    };
    check_data_ranges(&tensors, &offset_fields, file_len - data_offset)?;
    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

fn check_magic(bytes: &[u8]) -> Result<(), GgufError> {
    let head = &bytes[..bytes.len().min(4)];
    if head.len() < 4 && MAGIC.starts_with(head) {
        let reason = if bytes.is_empty() {
            "file is empty".to_string()
        } else {
            format!("truncated: file has {} bytes", bytes.len())
        };
        return Err(GgufError::malformed(0, "magic", reason));
    }
    if head != MAGIC {
        return Err(GgufError::BadMagic {
            found: head.escape_ascii().to_string(),
        });
    }
    Ok(())
}

fn check_version(version: u32) -> Result<u32, GgufError> {
    match version {
        2 | 3 => Ok(version),
        1 => Err(GgufError::UnsupportedVersion {
            version,
            hint: " (GGUF v1 used 32-bit counts; convert the file with a current llama.cpp)",
        }),
        v if (1..=3).contains(&v.swap_bytes()) => Err(GgufError::BigEndian {
            version: v.swap_bytes(),
        }),
        _ => Err(GgufError::UnsupportedVersion {
            version,
            hint: " (this reader supports versions 2 and 3)",
        }),
    }
}

fn alignment(metadata: &Metadata, at: usize) -> Result<u64, GgufError> {
    let field = format!("key '{ALIGNMENT_KEY}'");
    let align = match metadata.get(ALIGNMENT_KEY) {
        None => return Ok(DEFAULT_ALIGNMENT),
        Some(v) => v.as_integer().ok_or_else(|| {
            let found = v.type_description();
            GgufError::malformed(at, &field, format!("must be an integer, found {found}"))
        })?,
    };
    if align <= 0 || align > MAX_ALIGNMENT as i128 || (align as u64).count_ones() != 1 {
        return Err(GgufError::malformed(
            at,
            field,
            format!("alignment {align} must be a nonzero power of two at most {MAX_ALIGNMENT}"),
        ));
    }
    Ok(align as u64)
}

fn read_value_type(c: &mut Cursor, field: &str) -> Result<ValueType, GgufError> {
    let at = c.pos();
    let id = c.u32(field)?;
    ValueType::from_id(id).ok_or_else(|| {
        GgufError::malformed(
            at,
            field,
            format!("unknown value type id {id} (valid: 0 to 12)"),
        )
    })
}

fn read_value(c: &mut Cursor, field: &str) -> Result<Value, GgufError> {
    let ty = read_value_type(c, field)?;
    let mut bytes = |n| c.take(n, field);
    Ok(match ty {
        ValueType::U8 => Value::U8(bytes(1)?[0]),
        ValueType::I8 => Value::I8(bytes(1)?[0] as i8),
        ValueType::U16 => Value::U16(u16::from_le_bytes(fixed(bytes(2)?))),
        ValueType::I16 => Value::I16(i16::from_le_bytes(fixed(bytes(2)?))),
        ValueType::U32 => Value::U32(u32::from_le_bytes(fixed(bytes(4)?))),
        ValueType::I32 => Value::I32(i32::from_le_bytes(fixed(bytes(4)?))),
        ValueType::F32 => Value::F32(f32::from_le_bytes(fixed(bytes(4)?))),
        ValueType::U64 => Value::U64(u64::from_le_bytes(fixed(bytes(8)?))),
        ValueType::I64 => Value::I64(i64::from_le_bytes(fixed(bytes(8)?))),
        ValueType::F64 => Value::F64(f64::from_le_bytes(fixed(bytes(8)?))),
        ValueType::Bool => Value::Bool(read_bool(c, field)?),
        ValueType::String => Value::String(c.string(field)?),
        ValueType::Array => Value::Array(read_array(c, field, 1)?),
    })
}

fn fixed<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(b);
    out
}

fn read_bool(c: &mut Cursor, field: &str) -> Result<bool, GgufError> {
    let at = c.pos();
    match c.u8(field)? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(GgufError::malformed(
            at,
            field,
            format!("bool byte is {b}, must be 0 or 1"),
        )),
    }
}

/// Reads `count` little-endian values of `N` bytes each, converted by `f`.
fn read_fixed<const N: usize, T>(
    c: &mut Cursor,
    count: usize,
    field: &str,
    f: fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    // `count` was checked against the remaining bytes, so this cannot overflow.
    let raw = c.take(count * N, field)?;
    Ok(raw.chunks_exact(N).map(|b| f(fixed(b))).collect())
}

fn read_array(c: &mut Cursor, field: &str, depth: usize) -> Result<Array, GgufError> {
    let at = c.pos();
    if depth > MAX_ARRAY_DEPTH {
        let reason = format!("arrays nested more than {MAX_ARRAY_DEPTH} deep");
        return Err(GgufError::malformed(at, field, reason));
    }
    let elem = read_value_type(c, field)?;
    let n = c.count(elem.min_size(), field)?;
    Ok(match elem {
        ValueType::U8 => Array::U8(c.take(n, field)?.to_vec()),
        ValueType::I8 => Array::I8(read_fixed(c, n, field, |b: [u8; 1]| b[0] as i8)?),
        ValueType::U16 => Array::U16(read_fixed(c, n, field, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(read_fixed(c, n, field, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(read_fixed(c, n, field, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(read_fixed(c, n, field, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(read_fixed(c, n, field, f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(read_fixed(c, n, field, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(read_fixed(c, n, field, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(read_fixed(c, n, field, f64::from_le_bytes)?),
        ValueType::Bool => Array::Bool(
            (0..n)
                .map(|_| read_bool(c, field))
                .collect::<Result<_, _>>()?,
        ),
        ValueType::String => {
            Array::String((0..n).map(|_| c.string(field)).collect::<Result<_, _>>()?)
        }
        ValueType::Array => Array::Array(
            (0..n)
                .map(|_| read_array(c, field, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Reads one tensor info; returns it and the byte offset of its `offset` field.
fn read_tensor_info(
    c: &mut Cursor,
    index: usize,
    alignment: u64,
) -> Result<(TensorInfo, usize), GgufError> {
    let name = c.string(&format!("tensor #{index} name"))?;
    let field = |what: &str| format!("tensor '{name}' {what}");

    let at = c.pos();
    let n_dims = c.u32(&field("n_dims"))?;
    if !(1..=4).contains(&n_dims) {
        let reason = format!("n_dims is {n_dims}, must be 1 to 4");
        return Err(GgufError::malformed(at, field("n_dims"), reason));
    }
    let mut shape = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        let at = c.pos();
        let ne = c.u64(&field("dims"))?;
        if ne == 0 || ne > i64::MAX as u64 {
            let reason = format!("dim {d} is {ne}, must be 1 to 2^63-1");
            return Err(GgufError::malformed(at, field("dims"), reason));
        }
        shape.push(ne);
    }

    let at = c.pos();
    let id = c.u32(&field("type"))?;
    let ggml_type = GgmlType::from_id(id).ok_or_else(|| GgufError::UnknownType {
        offset: at as u64,
        id,
        tensor: name.clone(),
    })?;
    let size_bytes =
        tensor_size(ggml_type, &shape).map_err(|r| GgufError::malformed(at, field("shape"), r))?;

    let offset_at = c.pos();
    let offset = c.u64(&field("offset"))?;
    if offset % alignment != 0 {
        let reason = format!("offset {offset} is not a multiple of the alignment {alignment}");
        return Err(GgufError::malformed(offset_at, field("offset"), reason));
    }
    let info = TensorInfo {
        name,
        ggml_type,
        shape,
        offset,
        size_bytes,
    };
    Ok((info, offset_at))
}

/// Every tensor's bytes lie inside the data section and no two tensors overlap.
fn check_data_ranges(
    tensors: &[TensorInfo],
    offset_fields: &[usize],
    data_len: u64,
) -> Result<(), GgufError> {
    for (t, &at) in tensors.iter().zip(offset_fields) {
        let end = t.offset.checked_add(t.size_bytes);
        if !matches!(end, Some(end) if end <= data_len) {
            let reason = format!(
                "data at offset {} with {} bytes runs past the end of the data section ({data_len} bytes)",
                t.offset, t.size_bytes
            );
            return Err(GgufError::malformed(
                at,
                format!("tensor '{}' offset", t.name),
                reason,
            ));
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| tensors[i].offset);
    for pair in order.windows(2) {
        let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
        if a.offset + a.size_bytes > b.offset {
            let reason = format!("data overlaps tensor '{}'", a.name);
            let field = format!("tensor '{}' offset", b.name);
            return Err(GgufError::malformed(offset_fields[pair[1]], field, reason));
        }
    }
    Ok(())
}
