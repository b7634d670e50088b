#!/usr/bin/env python3
"""llama.cpp's quantizer (llama_model_quantize, through llama-cpp-python) on a GGUF file.

Usage: llama_quantize.py SRC.gguf DST.gguf FTYPE

FTYPE is a llama_ftype value (15 = Q4_K_M, 20 = IQ2_XS, 23 = IQ3_XXS). The i-quants refuse to
run without an importance matrix, so one is always passed: uniform (every column of every
matrix weighs 1), which is what a file of random weights calls for. Used by
crates/strata-cli/tests/synth.rs to check that `strata synth`'s mixes choose llama-quantize's
tensor types; needs `pip install llama-cpp-python gguf`. Exit status: the quantizer's.
"""

import ctypes
import sys


def main():
    src, dst, ftype = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import gguf
    import llama_cpp

    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 1
    keep = []
    entries = []
    for t in gguf.GGUFReader(src).tensors:
        if len(t.shape) >= 2:
            # One weight per input column (and per expert of a 3-D expert tensor).
            n = int(t.shape[0]) * (int(t.shape[2]) if len(t.shape) == 3 else 1)
            buf = (ctypes.c_float * n)(*([1.0] * n))
            keep.append(buf)
            entries.append((t.name.encode(), buf, n))
    arr = (llama_cpp.llama_model_imatrix_data * (len(entries) + 1))()
    for i, (name, buf, n) in enumerate(entries):
        arr[i].name = name
        arr[i].data = ctypes.cast(buf, ctypes.POINTER(ctypes.c_float))
        arr[i].size = n
    p.imatrix = ctypes.cast(arr, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
    sys.exit(llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)))


if __name__ == "__main__":
    main()
