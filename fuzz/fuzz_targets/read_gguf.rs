//! Fuzz target: any byte string parses to a file or an error, never a panic, and a parsed
//! file's tensor views are exactly as long as their directory entries say.
//!
//! Run: `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run read_gguf` (seed corpus: any .gguf).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_gguf::GgufFile;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = GgufFile::from_bytes(data.to_vec()) {
        for (k, _) in f.metadata().iter() {
            let _ = f.metadata().u64(k);
        }
        for t in f.tensors() {
            assert_eq!(f.tensor_data(t).len() as u64, t.size_bytes);
        }
    }
});
