//! Metadata values: the 13 GGUF value types, scalar and array.
//!
//! Source: the `gguf_metadata_value_type` enum of the GGUF spec (ids 0..=12).

use std::fmt;

/// A GGUF value type id as stored in the file (`u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type with id `id`, or `None` for ids above 12.
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The id stored in the file.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Bytes one value of this type takes in the file, or `None` for strings and arrays
    /// (variable length).
    pub fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// Smallest number of bytes one value of this type can take in the file: a string is at
    /// least its `u64` length, an array at least its `u32` type and `u64` count.
    pub fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }

    /// Lower-case name (`"u32"`, `"string"`, …).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A GGUF array: one element type, stored as a typed vector (a 262k-token vocabulary is one
/// `Vec<String>`, token scores one `Vec<f32>`).
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    /// Nested arrays; each inner array has its own element type.
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Value {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        use Value::*;
        match self {
            U8(_) => ValueType::U8,
            I8(_) => ValueType::I8,
            U16(_) => ValueType::U16,
            I16(_) => ValueType::I16,
            U32(_) => ValueType::U32,
            I32(_) => ValueType::I32,
            F32(_) => ValueType::F32,
            Bool(_) => ValueType::Bool,
            String(_) => ValueType::String,
            Array(_) => ValueType::Array,
            U64(_) => ValueType::U64,
            I64(_) => ValueType::I64,
            F64(_) => ValueType::F64,
        }
    }

    /// A short type description for messages: `"u32"`, `"array of string"`.
    pub fn type_description(&self) -> String {
        match self {
            Value::Array(a) => format!("array of {}", a.elem_type()),
            v => v.value_type().name().to_string(),
        }
    }

    /// The value as an `i128` when it is an integer of any width (not bool, not float).
    pub fn as_integer(&self) -> Option<i128> {
        use Value::*;
        Some(match *self {
            U8(v) => v.into(),
            I8(v) => v.into(),
            U16(v) => v.into(),
            I16(v) => v.into(),
            U32(v) => v.into(),
            I32(v) => v.into(),
            U64(v) => v.into(),
            I64(v) => v.into(),
            _ => return None,
        })
    }
}

impl Array {
    /// Element type.
    pub fn elem_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::String(v) => v.len(),
            Self::Array(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
        }
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`Value`] (cloned), or `None` past the end. For display and tests;
    /// use the typed vectors for bulk access.
    pub fn get(&self, i: usize) -> Option<Value> {
        use Array as A;
        Some(match self {
            A::U8(v) => Value::U8(*v.get(i)?),
            A::I8(v) => Value::I8(*v.get(i)?),
            A::U16(v) => Value::U16(*v.get(i)?),
            A::I16(v) => Value::I16(*v.get(i)?),
            A::U32(v) => Value::U32(*v.get(i)?),
            A::I32(v) => Value::I32(*v.get(i)?),
            A::F32(v) => Value::F32(*v.get(i)?),
            A::Bool(v) => Value::Bool(*v.get(i)?),
            A::String(v) => Value::String(v.get(i)?.clone()),
            A::Array(v) => Value::Array(v.get(i)?.clone()),
            A::U64(v) => Value::U64(*v.get(i)?),
            A::I64(v) => Value::I64(*v.get(i)?),
            A::F64(v) => Value::F64(*v.get(i)?),
        })
    }

    /// All elements as `i128` when the element type is an integer type, else `None`.
    pub fn integers(&self) -> Option<Vec<i128>> {
        Some(match self {
            Self::U8(v) => v.iter().map(|&x| x.into()).collect(),
            Self::I8(v) => v.iter().map(|&x| x.into()).collect(),
            Self::U16(v) => v.iter().map(|&x| x.into()).collect(),
            Self::I16(v) => v.iter().map(|&x| x.into()).collect(),
            Self::U32(v) => v.iter().map(|&x| x.into()).collect(),
            Self::I32(v) => v.iter().map(|&x| x.into()).collect(),
            Self::U64(v) => v.iter().map(|&x| x.into()).collect(),
            Self::I64(v) => v.iter().map(|&x| x.into()).collect(),
            _ => return None,
        })
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Self { Value::$v(x) }
        }
        impl From<Vec<$t>> for Array {
            fn from(x: Vec<$t>) -> Self { Array::$v(x) }
        }
        impl From<Vec<$t>> for Value {
            fn from(x: Vec<$t>) -> Self { Value::Array(Array::$v(x)) }
        }
    )*};
}

from_scalar!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64);

impl From<&str> for Value {
    fn from(x: &str) -> Self {
        Value::String(x.to_string())
    }
}

impl From<Array> for Value {
    fn from(x: Array) -> Self {
        Value::Array(x)
    }
}

impl From<Vec<&str>> for Value {
    fn from(x: Vec<&str>) -> Self {
        Value::Array(Array::String(x.into_iter().map(str::to_string).collect()))
    }
}

impl From<Vec<Array>> for Value {
    fn from(x: Vec<Array>) -> Self {
        Value::Array(Array::Array(x))
    }
}
