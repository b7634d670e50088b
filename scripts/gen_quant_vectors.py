#!/usr/bin/env python3
"""Generate crates/strata-quant/tests/data/quant_vectors.bin: reference vectors for strata-quant.

Sources of truth:
  * gguf-py (`gguf.quants.dequantize` / `quantize`): dequantization of every type it implements and
    quantization of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, BF16 and F16. The Rust tests compare bit for bit.
  * ggml's C reference, from llama-cpp-python's bundled libggml-base / libggml-cpu (called through
    ctypes; libggml-base is built without FMA, so its reference quantizers are exact to compare): `quantize_row_{q4_K,q5_K,q6_K,q8_K,q8_1}_ref` (bit for bit),
    `dequantize_row_q8_K`, and the `ggml_vec_dot_*` kernels ggml dispatches to on this CPU
    (compared with a tolerance: they sum in another order, with FMA), each first checked against
    the exact dot of the dequantized rows; for BF16 weights `ggml_vec_dot_bf16` against
    activations rounded by `ggml_cpu_fp32_to_bf16` (BF16's vec_dot type is BF16).
The script also checks gguf-py against ggml's C dequantizers where both exist.

Random blocks are random bytes whose f16/f32 scale fields are replaced by finite moderate values
(sign random, magnitude 2^U(-8, 3)), so no NaN/Inf appears; a few hand-picked edge blocks follow.

File format (all integers little-endian):
  b"SQV1", u32 header_len, header (UTF-8 JSON: generator, versions, seed, record counts)
  records until EOF, each:
    u8 kind (0 dequantize, 1 quantize, 2 vec_dot), u8 source (0 gguf-py, 1 ggml C), u16 zero,
    u32 ggml type id, u32 element count, then three byte fields, each u32 length + bytes:
      dequantize: a = block bytes,           b = expected f32 outputs, c = empty
      quantize:   a = f32 inputs,            b = expected block bytes, c = empty
      vec_dot:    a = weight row bytes,      b = activation row bytes (the type's vec_dot type),
                  c = expected f32 result
Needs: numpy, gguf, llama-cpp-python. Recorded in the header: script, gguf, numpy and
llama-cpp-python versions, whether ggml's BF16 dot ran AVX512-BF16, seed, record counts.
Usage: python3 scripts/gen_quant_vectors.py   (from anywhere; overwrites the output)
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import pathlib
import struct

import numpy as np
import gguf
import gguf.quants as gq
from gguf import GGMLQuantizationType as T

SEED = 0x5EED_0A17
OUT = pathlib.Path(__file__).resolve().parent.parent / "crates/strata-quant/tests/data/quant_vectors.bin"

RANDOM_BLOCKS = 24  # per type, plus the edge blocks
QK_K = 256

# Offsets of the f16 scale fields in each block (ggml-common.h layouts).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0],
    T.IQ1_S: [0], T.IQ4_NL: [0], T.IQ4_XS: [0],
    T.IQ1_M: [],  # its f16 scale is split over the top nibbles of four u16 (see set_iq1m_scale)
}
DEQUANT_TYPES = list(F16_FIELDS)
FLOAT_TYPES = [T.F32, T.F16, T.BF16]
GGUF_QUANT_TYPES = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]
GGML_QUANT_TYPES = ["q4_K", "q5_K", "q6_K", "q8_K", "q8_1"]
VEC_DOT = {  # weight type -> (vec_dot type, ggml kernel suffix)
    T.Q4_0: (T.Q8_0, "q4_0_q8_0"), T.Q4_1: (T.Q8_1, "q4_1_q8_1"),
    T.Q5_0: (T.Q8_0, "q5_0_q8_0"), T.Q5_1: (T.Q8_1, "q5_1_q8_1"),
    T.Q8_0: (T.Q8_0, "q8_0_q8_0"), T.IQ4_NL: (T.Q8_0, "iq4_nl_q8_0"),
    T.Q2_K: (T.Q8_K, "q2_K_q8_K"), T.Q3_K: (T.Q8_K, "q3_K_q8_K"), T.Q4_K: (T.Q8_K, "q4_K_q8_K"),
    T.Q5_K: (T.Q8_K, "q5_K_q8_K"), T.Q6_K: (T.Q8_K, "q6_K_q8_K"),
    T.IQ2_XXS: (T.Q8_K, "iq2_xxs_q8_K"), T.IQ2_XS: (T.Q8_K, "iq2_xs_q8_K"),
    T.IQ2_S: (T.Q8_K, "iq2_s_q8_K"), T.IQ3_XXS: (T.Q8_K, "iq3_xxs_q8_K"),
    T.IQ3_S: (T.Q8_K, "iq3_s_q8_K"), T.IQ1_S: (T.Q8_K, "iq1_s_q8_K"),
    T.IQ1_M: (T.Q8_K, "iq1_m_q8_K"), T.IQ4_XS: (T.Q8_K, "iq4_xs_q8_K"),
}

rng = np.random.default_rng(SEED)
records: list[bytes] = []
counts: dict[str, int] = {}


def sizes(ty: T) -> tuple[int, int]:
    # gguf-py still lists Q8_1 with f32 d and s (40 bytes); ggml's block_q8_1 has f16 ones.
    return (32, 36) if ty == T.Q8_1 else gguf.GGML_QUANT_SIZES[ty]


def f16_bits(value: float) -> int:
    return int(np.array([value], dtype=np.float16).view(np.uint16)[0])


def moderate() -> float:
    return float(rng.choice([-1.0, 1.0]) * 2.0 ** rng.uniform(-8, 3))


def set_f16(block: np.ndarray, off: int, bits: int) -> None:
    block[off] = bits & 0xFF
    block[off + 1] = bits >> 8


def set_iq1m_scale(block: np.ndarray, bits: int) -> None:
    # block_iq1_m: qs[32], qh[16], scales[8] = four u16; the f16 scale's nibble k sits in the top
    # nibble of u16 k.
    for k in range(4):
        off = 48 + 2 * k + 1
        block[off] = (block[off] & 0x0F) | (((bits >> (4 * k)) & 0xF) << 4)


def set_scales(ty: T, block: np.ndarray, bits_for_field) -> None:
    if ty == T.IQ1_M:
        set_iq1m_scale(block, bits_for_field(0))
    for i, off in enumerate(F16_FIELDS[ty]):
        set_f16(block, off, bits_for_field(i))


def random_blocks(ty: T, n: int) -> np.ndarray:
    _, type_size = sizes(ty)
    blocks = rng.integers(0, 256, size=(n, type_size), dtype=np.uint8)
    for b in blocks:
        set_scales(ty, b, lambda _i: f16_bits(moderate()))
    return blocks


def edge_blocks(ty: T) -> np.ndarray:
    _, type_size = sizes(ty)
    out = [np.zeros(type_size, np.uint8)]  # all zero: scales 0
    ones = np.full(type_size, 0xFF, np.uint8)  # every quant bit set, scales +1 / -1
    set_scales(ty, ones, lambda i: f16_bits(1.0 if i == 0 else -1.0))
    out.append(ones)
    big = rng.integers(0, 256, size=type_size, dtype=np.uint8)  # largest finite f16 scales
    set_scales(ty, big, lambda i: 0x7BFF if i == 0 else 0xFBFF)
    out.append(big)
    tiny = rng.integers(0, 256, size=type_size, dtype=np.uint8)  # subnormal f16 scales
    set_scales(ty, tiny, lambda i: 0x0001 if i == 0 else 0x83FF)
    out.append(tiny)
    return np.stack(out)


def add(kind: int, source: int, ty, n_elems: int, a: bytes, b: bytes, c: bytes = b"") -> None:
    rec = struct.pack("<BBHII", kind, source, 0, int(ty), n_elems)
    for field in (a, b, c):
        rec += struct.pack("<I", len(field)) + field
    records.append(rec)
    key = f"{['dequantize', 'quantize', 'vec_dot'][kind]}/{['gguf-py', 'ggml'][source]}"
    counts[key] = counts.get(key, 0) + 1


def f32_bytes(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x, dtype=np.float32).tobytes()


# ---------------------------------------------------------------- ggml C library (optional)

class Ggml:
    def __init__(self) -> None:
        import llama_cpp  # noqa: F401  (only to locate the bundled libraries)

        lib = pathlib.Path(llama_cpp.__file__).parent / "lib"
        self.base = ctypes.CDLL(str(lib / "libggml-base.so"))
        self.cpu = ctypes.CDLL(str(lib / "libggml-cpu.so"))
        self.cpu.ggml_cpu_init()
        self.version = importlib.metadata.version("llama_cpp_python")

    @staticmethod
    def _p(a: np.ndarray):
        return a.ctypes.data_as(ctypes.c_void_p)

    def quantize(self, name: str, x: np.ndarray) -> np.ndarray:
        ty = T[name.upper()]
        block_size, type_size = sizes(ty)
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.zeros(x.size // block_size * type_size, np.uint8)
        getattr(self.base, f"quantize_row_{name}_ref")(self._p(x), self._p(y), ctypes.c_int64(x.size))
        return y

    def dequantize(self, name: str, data: np.ndarray, n: int) -> np.ndarray:
        y = np.zeros(n, np.float32)
        data = np.ascontiguousarray(data)
        getattr(self.base, f"dequantize_row_{name}")(self._p(data), self._p(y), ctypes.c_int64(n))
        return y

    def fp32_to_bf16(self, x: np.ndarray) -> np.ndarray:
        """ggml-cpu's `from_float` of BF16 (`ggml_cpu_fp32_to_bf16`), as little-endian bytes."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.zeros(x.size, np.uint16)
        self.cpu.ggml_cpu_fp32_to_bf16(self._p(x), self._p(y), ctypes.c_int64(x.size))
        return y.view(np.uint8)

    def vec_dot(self, name: str, n: int, w: np.ndarray, act: np.ndarray) -> float:
        s = ctypes.c_float()
        fn = getattr(self.cpu, name)
        z = ctypes.c_size_t(0)
        fn(ctypes.c_int(n), ctypes.byref(s), z, self._p(w), z, self._p(act), z, ctypes.c_int(1))
        return s.value


try:
    ggml = Ggml()
except Exception as e:
    raise SystemExit(f"needs llama-cpp-python's bundled libggml for the ggml vectors: {e}")


# ---------------------------------------------------------------- dequantize (gguf-py)

for ty in DEQUANT_TYPES:
    block_size, _ = sizes(ty)
    blocks = np.concatenate([random_blocks(ty, RANDOM_BLOCKS), edge_blocks(ty)])
    expected = gq.dequantize(blocks.reshape(-1), ty)
    assert expected.dtype == np.float32 and np.all(np.isfinite(expected)), ty.name
    c = ggml.dequantize(ty.name.lower().replace("_k", "_K"), blocks, expected.size)
    assert np.array_equal(c.view(np.uint32), expected.view(np.uint32)), f"gguf-py != ggml for {ty.name}"
    add(0, 0, ty, expected.size, blocks.tobytes(), f32_bytes(expected))

finite = {
    T.F32: lambda n: rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
    T.F16: lambda n: rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16),
    T.BF16: lambda n: rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16),
}
exp_mask = {T.F32: 0x7F800000, T.F16: 0x7C00, T.BF16: 0x7F80}
for ty in FLOAT_TYPES:
    bits = finite[ty](512)
    bits = bits[(bits & exp_mask[ty]) != exp_mask[ty]][:256]  # drop Inf/NaN
    dtype = bits.dtype
    specials = [0, 1, exp_mask[ty] - 1, exp_mask[ty] >> 1]  # +0, min subnormal, max finite, ~1
    specials += [s | (1 << (8 * dtype.itemsize - 1)) for s in specials]  # and their negatives
    bits = np.concatenate([bits, np.array(specials, dtype=dtype)])
    data = bits.view(np.uint8)
    expected = gq.dequantize(data, ty)
    add(0, 0, ty, expected.size, data.tobytes(), f32_bytes(expected))


# ---------------------------------------------------------------- quantize (gguf-py)

def quant_inputs(block_size: int, n_random: int) -> np.ndarray:
    rows = [rng.standard_normal(block_size) * 2.0 ** rng.uniform(-6, 6) for _ in range(n_random)]
    rows.append(rng.standard_t(2, block_size))  # heavy tails
    rows.append(rng.uniform(0.1, 1.0, block_size))  # all positive
    rows.append(-rng.uniform(0.1, 1.0, block_size))  # all negative
    rows.append(np.zeros(block_size))
    rows.append(np.full(block_size, 0.7))
    rows.append(np.full(block_size, -3.0))
    spike = rng.standard_normal(block_size) * 1e-3
    spike[5] = 1000.0
    rows.append(spike)
    ties = rng.integers(-254, 255, block_size) * 0.5  # half-integers: rounding ties when d == 1
    ties[0] = 127.0
    rows.append(ties)
    rows.append(rng.standard_normal(block_size) * 1e-6)  # scale underflows f16
    rows.append(rng.standard_normal(block_size) * 3e3)  # large but finite scales
    return np.stack(rows).astype(np.float32)


for ty in GGUF_QUANT_TYPES:
    block_size, _ = sizes(ty)
    x = quant_inputs(block_size, RANDOM_BLOCKS)
    with np.errstate(over="ignore"):
        q = gq.quantize(x, ty)
    c = ggml.quantize(ty.name.lower(), x.reshape(-1))
    assert np.array_equal(c, q.reshape(-1)), f"gguf-py quantize != ggml for {ty.name}"
    add(1, 0, ty, x.size, f32_bytes(x), q.tobytes())

# Float conversions: ties, overflow, subnormals, NaN and infinities.
fx = np.concatenate([
    rng.standard_normal(200).astype(np.float32) * np.float32(2.0) ** rng.integers(-30, 30, 200),
    np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 65520.0, 70000.0, 1e-8, 6e-8, 3e-5, 1e38, -1e-45,
              np.inf, -np.inf, np.nan], dtype=np.float32),
    # exact f16 / bf16 rounding ties: 1 + half an ulp, 1 + 1.5 ulp
    np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-8, 1 + 3 * 2.0**-8], dtype=np.float32),
]).astype(np.float32)
fx = np.concatenate([fx, np.array([0x7FC00001, 0xFF800001, 0x7F80FFFF], dtype=np.uint32).view(np.float32)])
with np.errstate(over="ignore", invalid="ignore"):
    add(1, 0, T.BF16, fx.size, f32_bytes(fx), gq.quantize(fx, T.BF16).view(np.uint8).tobytes())
    add(1, 0, T.F16, fx.size, f32_bytes(fx), gq.quantize(fx, T.F16).view(np.uint8).tobytes())


# ---------------------------------------------------------------- ggml C reference vectors

for name in GGML_QUANT_TYPES:
    ty = T[name.upper()]
    block_size, _ = sizes(ty)
    x = quant_inputs(block_size, RANDOM_BLOCKS).reshape(-1)
    q = ggml.quantize(name, x)
    add(1, 1, ty, x.size, f32_bytes(x), q.tobytes())
    if ty == T.Q8_K:
        y = ggml.dequantize("q8_K", q, x.size)
        add(0, 1, ty, x.size, q.tobytes(), f32_bytes(y))



def dequantize_act(act_ty: T, act: np.ndarray, n: int) -> np.ndarray:
    if act_ty == T.Q8_K:
        return ggml.dequantize("q8_K", act, n)
    if act_ty == T.Q8_0:
        return gq.dequantize(act, T.Q8_0)
    blocks = act.reshape(-1, 36)  # Q8_1: f16 d, f16 s, 32 x i8
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    return (blocks[:, 4:].copy().view(np.int8).astype(np.float32) * d).reshape(-1)


# Expected results come from the kernel ggml dispatches to on this CPU (its SIMD path), after
# checking it against the exact dot of the dequantized rows. The `_generic` kernels are only
# cross-checked: in this build ggml_vec_dot_q5_0_q8_0_generic disagrees with the exact dot.
generic_disagrees = set()
for ty, (act_ty, suffix) in VEC_DOT.items():
    block_size, _ = sizes(ty)
    n = 512 if block_size == QK_K else 256
    for _row in range(4):
        w = random_blocks(ty, n // block_size).reshape(-1)
        x = (rng.standard_normal(n) * 2.0 ** rng.uniform(-4, 4)).astype(np.float32)
        act = ggml.quantize(act_ty.name.lower().replace("_k", "_K"), x)
        wd = gq.dequantize(w, ty).astype(np.float64)
        if act_ty == T.Q8_1:
            # The Q4_1/Q5_1 kernels take Σ over a block of m * a from Q8_1's stored f16
            # s = d * Σq, not from the quants: split the weight's minimum m off.
            m = np.repeat(w.reshape(n // 32, -1)[:, 2:4].copy().view(np.float16).astype(np.float64), 32)
            s_y = act.reshape(-1, 36)[:, 2:4].copy().view(np.float16).astype(np.float64)
            terms = np.concatenate([(wd - m) * dequantize_act(act_ty, act, n), m[::32] * s_y[:, 0]])
        else:
            terms = wd * dequantize_act(act_ty, act, n)
        exact, tol = terms.sum(), 1e-5 * np.abs(terms).sum()
        s = ggml.vec_dot(f"ggml_vec_dot_{suffix}", n, w, act)
        assert abs(s - exact) <= tol, f"ggml_vec_dot_{suffix}: {s} vs exact {exact}"
        if abs(ggml.vec_dot(f"ggml_vec_dot_{suffix}_generic", n, w, act) - exact) > tol:
            generic_disagrees.add(f"ggml_vec_dot_{suffix}_generic")
        add(2, 1, ty, n, w.tobytes(), act.tobytes(), f32_bytes(np.array([s], np.float32)))
if generic_disagrees:
    print(f"note: disagree with the exact dot: {sorted(generic_disagrees)}")

# BF16 weights against BF16 activations: ggml_vec_dot_bf16 (vdpbf16ps over 64 elements a step
# where the CPU has AVX512-BF16, then a scalar tail), on lengths with and without that tail.
for n in (256, 100):
    for _row in range(4):
        w = (rng.standard_normal(n) * 2.0 ** rng.uniform(-4, 4)).astype(np.float32)
        w = gq.quantize(w, T.BF16)
        x = (rng.standard_normal(n) * 2.0 ** rng.uniform(-4, 4)).astype(np.float32)
        act = ggml.fp32_to_bf16(x)
        terms = gq.dequantize(w, T.BF16).astype(np.float64) * gq.dequantize(act, T.BF16)
        exact, tol = terms.sum(), 1e-5 * np.abs(terms).sum()
        s = ggml.vec_dot("ggml_vec_dot_bf16", n, w, act)
        assert abs(s - exact) <= tol, f"ggml_vec_dot_bf16: {s} vs exact {exact}"
        add(2, 1, T.BF16, n, w.tobytes(), act.tobytes(), f32_bytes(np.array([s], np.float32)))


# ---------------------------------------------------------------- write

header = {
    "generator": "scripts/gen_quant_vectors.py",
    "gguf_version": importlib.metadata.version("gguf"),
    "numpy_version": np.__version__,
    "llama_cpp_python_version": ggml.version,
    # Whether ggml_vec_dot_bf16 ran vdpbf16ps (a build with AVX512-BF16) for the BF16 vectors.
    "ggml_avx512_bf16": bool(ggml.cpu.ggml_cpu_has_avx512_bf16()),
    "seed": SEED,
    "records": counts,
}
hdr = json.dumps(header, sort_keys=True).encode()
OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_bytes(b"SQV1" + struct.pack("<I", len(hdr)) + hdr + b"".join(records))
print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {header}")
