//! Reading the `.npy` arrays of the transformers references (NumPy format 1.0–3.0, little
//! endian, C order): `<f4` and `<i4` only.

use std::path::Path;

/// An array's shape and its values.
pub struct Npy<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

/// The header's shape and element type (`descr`), and where the data starts.
fn header(bytes: &[u8]) -> (Vec<usize>, String, usize) {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "not an .npy file");
    let (len, at) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    let h = std::str::from_utf8(&bytes[at..at + len]).unwrap();
    assert!(h.contains("'fortran_order': False"), "C order only: {h}");
    let field = |name: &str| -> &str {
        let i = h.find(name).unwrap_or_else(|| panic!("{name} in {h}")) + name.len();
        h[i..].trim_start_matches([':', ' '])
    };
    let descr = field("'descr'");
    let descr = descr[1..descr[1..].find('\'').unwrap() + 1].to_string();
    let shape = field("'shape'");
    let shape = &shape[1..shape.find(')').unwrap()];
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (shape, descr, at + len)
}

fn read<T>(path: &Path, descr: &str, from: impl Fn([u8; 4]) -> T) -> Npy<T> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (shape, d, at) = header(&bytes);
    assert_eq!(d, descr, "{}: element type", path.display());
    let data = bytes[at..]
        .chunks_exact(4)
        .map(|b| from([b[0], b[1], b[2], b[3]]))
        .collect();
    Npy { shape, data }
}

/// A float32 array.
pub fn f32s(path: &Path) -> Npy<f32> {
    read(path, "<f4", f32::from_le_bytes)
}

/// An int32 array.
pub fn i32s(path: &Path) -> Npy<i32> {
    read(path, "<i4", i32::from_le_bytes)
}
