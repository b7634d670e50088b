//! Ordered metadata (key -> [`Value`]) with typed getters whose errors name the key.

use std::collections::HashMap;

use crate::{Array, GgufError, Value};

/// The key/value section of a GGUF file, in file order.
///
/// Typed getters come in pairs: `u32(key)` fails with [`GgufError::MissingKey`] when the key
/// is absent, `opt_u32(key)` returns `Ok(None)`. Both fail with [`GgufError::WrongType`] when
/// the stored type does not convert. Integer getters accept any stored integer type whose
/// value fits (files store counts as `u32`, `i32` or `u64`); float getters accept `f32` and
/// `f64`.
///
/// ```
/// use strata_gguf::{Metadata, Value};
/// let mut m = Metadata::new();
/// m.insert("llama.block_count", Value::I32(32)).unwrap();
/// assert_eq!(m.u64("llama.block_count").unwrap(), 32);
/// assert!(m.opt_u32("llama.expert_count").unwrap().is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

macro_rules! int_getters {
    ($($get:ident, $opt:ident, $t:ty);*) => {$(
        #[doc = concat!("The integer at `key` as `", stringify!($t), "`; any integer type whose value fits is accepted.")]
        pub fn $get(&self, key: &str) -> Result<$t, GgufError> {
            self.$opt(key)?.ok_or_else(|| missing(key))
        }

        #[doc = concat!("Like [`Metadata::", stringify!($get), "`], but `Ok(None)` when `key` is absent.")]
        pub fn $opt(&self, key: &str) -> Result<Option<$t>, GgufError> {
            let Some(v) = self.get(key) else { return Ok(None) };
            let n = v.as_integer().ok_or_else(|| wrong(key, stringify!($t), v))?;
            <$t>::try_from(n).map(Some).map_err(|_| GgufError::OutOfRange {
                key: key.to_string(),
                expected: stringify!($t),
                value: n.to_string(),
            })
        }
    )*};
}

macro_rules! int_array_getters {
    ($($get:ident, $opt:ident, $t:ty);*) => {$(
        #[doc = concat!("The integer array at `key` converted to `", stringify!($t), "`; any integer element type whose values fit is accepted.")]
        pub fn $get(&self, key: &str) -> Result<Vec<$t>, GgufError> {
            self.$opt(key)?.ok_or_else(|| missing(key))
        }

        #[doc = concat!("Like [`Metadata::", stringify!($get), "`], but `Ok(None)` when `key` is absent.")]
        pub fn $opt(&self, key: &str) -> Result<Option<Vec<$t>>, GgufError> {
            let Some(v) = self.get(key) else { return Ok(None) };
            let expected = concat!("array of ", stringify!($t));
            let ints = match v {
                Value::Array(a) => a.integers(),
                _ => None,
            }
            .ok_or_else(|| wrong(key, expected, v))?;
            ints.into_iter()
                .map(|n| {
                    <$t>::try_from(n).map_err(|_| GgufError::OutOfRange {
                        key: key.to_string(),
                        expected: stringify!($t),
                        value: n.to_string(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        }
    )*};
}

impl Metadata {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key`; fails when it is already present (GGUF keys are unique).
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        value: impl Into<Value>,
    ) -> Result<(), GgufError> {
        let key = key.into();
        if self.index.contains_key(&key) {
            return Err(GgufError::Write(format!("duplicate metadata key '{key}'")));
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value.into()));
        Ok(())
    }

    /// Sets `key`, replacing an existing value in place or appending a new key.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = value.into(),
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value.into()));
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.index.remove(key)?;
        let (_, v) = self.entries.remove(i);
        for idx in self.index.values_mut() {
            if *idx > i {
                *idx -= 1;
            }
        }
        Some(v)
    }

    /// The value at `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// True when `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// All pairs in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    int_getters!(u8, opt_u8, u8; u16, opt_u16, u16; u32, opt_u32, u32; u64, opt_u64, u64;
        i32, opt_i32, i32; i64, opt_i64, i64; usize, opt_usize, usize);

    int_array_getters!(u32_array, opt_u32_array, u32; i32_array, opt_i32_array, i32;
        u64_array, opt_u64_array, u64; i64_array, opt_i64_array, i64);

    /// The float at `key` (`f32`, or `f64` narrowed to `f32`).
    pub fn f32(&self, key: &str) -> Result<f32, GgufError> {
        self.opt_f32(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::f32`], but `Ok(None)` when `key` is absent.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        Ok(self.opt_f64(key)?.map(|x| x as f32))
    }

    /// The float at `key` (`f32` or `f64`).
    pub fn f64(&self, key: &str) -> Result<f64, GgufError> {
        self.opt_f64(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::f64`], but `Ok(None)` when `key` is absent.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(f64::from(*x))),
            Some(Value::F64(x)) => Ok(Some(*x)),
            Some(v) => Err(wrong(key, "f32", v)),
        }
    }

    /// The bool at `key`.
    pub fn bool(&self, key: &str) -> Result<bool, GgufError> {
        self.opt_bool(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::bool`], but `Ok(None)` when `key` is absent.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong(key, "bool", v)),
        }
    }

    /// The string at `key`.
    pub fn str(&self, key: &str) -> Result<&str, GgufError> {
        self.opt_str(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::str`], but `Ok(None)` when `key` is absent.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(wrong(key, "string", v)),
        }
    }

    /// The array at `key`, any element type.
    pub fn array(&self, key: &str) -> Result<&Array, GgufError> {
        self.opt_array(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::array`], but `Ok(None)` when `key` is absent.
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(wrong(key, "array", v)),
        }
    }

    /// The string array at `key` (e.g. `tokenizer.ggml.tokens`), borrowed.
    pub fn string_array(&self, key: &str) -> Result<&[String], GgufError> {
        self.opt_string_array(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::string_array`], but `Ok(None)` when `key` is absent.
    pub fn opt_string_array(&self, key: &str) -> Result<Option<&[String]>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(Array::String(v))) => Ok(Some(v)),
            Some(v) => Err(wrong(key, "array of string", v)),
        }
    }

    /// The float array at `key` (`f32` elements, or `f64` narrowed), e.g. `tokenizer.ggml.scores`.
    pub fn f32_array(&self, key: &str) -> Result<Vec<f32>, GgufError> {
        self.opt_f32_array(key)?.ok_or_else(|| missing(key))
    }

    /// Like [`Metadata::f32_array`], but `Ok(None)` when `key` is absent.
    pub fn opt_f32_array(&self, key: &str) -> Result<Option<Vec<f32>>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(Array::F32(v))) => Ok(Some(v.clone())),
            Some(Value::Array(Array::F64(v))) => Ok(Some(v.iter().map(|&x| x as f32).collect())),
            Some(v) => Err(wrong(key, "array of f32", v)),
        }
    }
}

fn missing(key: &str) -> GgufError {
    GgufError::MissingKey {
        key: key.to_string(),
    }
}

fn wrong(key: &str, expected: &'static str, found: &Value) -> GgufError {
    GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: found.type_description(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Metadata {
        let mut m = Metadata::new();
        m.insert("a.count_u32", 7u32).unwrap();
        m.insert("a.count_i32", -3i32).unwrap();
        m.insert("a.big", u64::MAX).unwrap();
        m.insert("a.eps", 1e-6f64).unwrap();
        m.insert("a.name", "qwen").unwrap();
        m.insert("a.tokens", vec!["x", "y"]).unwrap();
        m.insert("a.ids", vec![1u8, 2, 3]).unwrap();
        m
    }

    #[test]
    fn integer_getters_accept_any_width_that_fits() {
        let m = sample();
        assert_eq!(m.u32("a.count_u32").unwrap(), 7);
        assert_eq!(m.u64("a.count_u32").unwrap(), 7);
        assert_eq!(m.i32("a.count_i32").unwrap(), -3);
        assert!(matches!(
            m.u32("a.count_i32"),
            Err(GgufError::OutOfRange { .. })
        ));
        assert!(matches!(m.u32("a.big"), Err(GgufError::OutOfRange { .. })));
        assert_eq!(m.u64("a.big").unwrap(), u64::MAX);
        assert_eq!(m.u32_array("a.ids").unwrap(), vec![1, 2, 3]);
        assert_eq!(m.i32_array("a.ids").unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn errors_name_the_key() {
        let m = sample();
        let e = m.u32("a.name").unwrap_err().to_string();
        assert!(e.contains("a.name") && e.contains("string"), "{e}");
        let e = m.str("nope").unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        assert_eq!(m.opt_str("nope").unwrap(), None);
        assert!(m.opt_str("a.count_u32").is_err());
    }

    #[test]
    fn float_string_and_array_getters() {
        let m = sample();
        assert_eq!(m.f32("a.eps").unwrap(), 1e-6f32);
        assert_eq!(m.str("a.name").unwrap(), "qwen");
        assert_eq!(m.string_array("a.tokens").unwrap(), ["x", "y"]);
        assert!(m.f32_array("a.tokens").is_err());
    }

    #[test]
    fn insert_rejects_duplicates_and_order_is_kept() {
        let mut m = sample();
        assert!(m.insert("a.name", "again").is_err());
        m.set("a.name", "llama");
        assert_eq!(m.str("a.name").unwrap(), "llama");
        assert_eq!(m.remove("a.big"), Some(Value::U64(u64::MAX)));
        let keys: Vec<_> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys[..3], ["a.count_u32", "a.count_i32", "a.eps"]);
        assert_eq!(m.f64("a.eps").unwrap(), 1e-6);
    }
}
