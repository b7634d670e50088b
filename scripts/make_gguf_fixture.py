#!/usr/bin/env python3
"""Writes crates/strata-gguf/tests/data/python_fixture.gguf with the `gguf` Python package
(llama.cpp's gguf-py, tested with 0.19.0), so the Rust reader is checked against a file it
did not write. The expected values are repeated in crates/strata-gguf/tests/python_fixture.rs;
change both together.

Usage: python3 scripts/make_gguf_fixture.py [OUT]
"""
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGUFValueType as T

ROOT = Path(__file__).resolve().parent.parent
out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "crates/strata-gguf/tests/data/python_fixture.gguf"

w = gguf.GGUFWriter(str(out), "llama")  # writes general.architecture = "llama"
w.add_custom_alignment(64)
w.add_name("fixture")
w.add_uint8("test.u8", 200)
w.add_int8("test.i8", -100)
w.add_uint16("test.u16", 60000)
w.add_int16("test.i16", -30000)
w.add_uint32("test.u32", 4000000000)
w.add_int32("test.i32", -2000000000)
w.add_float32("test.f32", 0.5)
w.add_bool("test.bool", True)
w.add_string("test.string", "héllo ✓")
w.add_uint64("test.u64", 2**63 + 5)
w.add_int64("test.i64", -(2**62))
w.add_float64("test.f64", 3.141592653589793)
w.add_array("test.tokens", ["<s>", "</s>", "hello", "wörld"])
w.add_key_value("test.scores", [0.0, -1.5, 2.25], T.ARRAY, sub_type=T.FLOAT32)
w.add_key_value("test.token_type", [1, 3, 1, 1], T.ARRAY, sub_type=T.INT32)
w.add_key_value("test.u64s", [1, 2**40], T.ARRAY, sub_type=T.UINT64)
w.add_key_value("test.bools", [True, False, True], T.ARRAY, sub_type=T.BOOL)
w.add_key_value("test.nested", [["a", "b"], ["c"]], T.ARRAY, sub_type=T.ARRAY)
w.add_block_count(2)
w.add_context_length(4096)

# F32 [row 8, 2 rows]: 0..16; F16 [4]: 1,2,3,4; Q8_0: 2 rows of one block each, raw bytes
# 0..67 (gguf-py takes the byte shape and derives the element shape [32, 2]).
w.add_tensor("blk.0.attn_q.weight", np.arange(16, dtype=np.float32).reshape(2, 8))
w.add_tensor("output_norm.weight", np.array([1, 2, 3, 4], dtype=np.float16))
w.add_tensor("blk.0.ffn_down.weight", np.arange(68, dtype=np.uint8).reshape(2, 34),
             raw_dtype=gguf.GGMLQuantizationType.Q8_0)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {out} ({out.stat().st_size} bytes)")
