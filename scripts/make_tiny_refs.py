#!/usr/bin/env python3
"""llama.cpp references for the tiny random models of scripts/make_tiny_models.py.

For each model and type this writes tests/data/tiny_refs/<model>-<type>.json with, per prompt:
  - prompt_tokens (llama.cpp's tokenization);
  - logits of every prompt position: the full rows (base64 of little-endian f32, exact) for
    F32/F16/BF16, and the top-8 ids and logits for quantized types;
  - greedy: 16 greedy tokens from the prompt and llama.cpp's top-8 at each step.
Each file records the llama-cpp-python version, this script's sha256, make_tiny_models.py's
sha256 and the model file's sha256; crates/strata-engine/tests/reference_tiny_moe.rs (MoE) and
reference_tiny_dense.rs (dense) check them. The dense models get two prompts (one of 27 tokens,
over gemma3-tiny's window of 8) to keep the committed full rows small.

Usage: python3 scripts/make_tiny_refs.py [--tiny-dir DIR] [--models NAME ...]
Needs: llama-cpp-python==0.3.36, numpy; the models from scripts/make_tiny_models.sh.
"""
import argparse, base64, hashlib, json, os, pathlib, sys

import numpy as np
import llama_cpp

ROOT = pathlib.Path(__file__).resolve().parent.parent
TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q6_K"]
DENSE_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_K_M"]
FULL_ROWS = {"F32", "F16", "BF16"}
PROMPTS = [
    "The capital of France is",
    "def add(a, b):\n    return",
    "Once upon a time, in a small village by the sea, there lived",
]
DENSE_PROMPTS = [
    "Once upon a time, in a small village by the sea, there lived",
    "fn main() {",
]
# name -> (types, prompts)
MODELS = {
    "qwen3moe-tiny": (TYPES, PROMPTS),
    "qwen3next-tiny": (TYPES, PROMPTS),
    **{m: (DENSE_TYPES, DENSE_PROMPTS)
       for m in ["qwen3-tiny", "qwen2-tiny", "llama-tiny", "gemma3-tiny"]},
}
TOP_K = 8
N_GREEDY = 16


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def top(row, k):
    idx = np.argsort(-row, kind="stable")[:k]
    return {"ids": [int(i) for i in idx], "logits": [float(row[i]) for i in idx]}


def llm_for(path):
    # An f32 KV cache: with f16, a 1e-7 difference that crosses an f16 rounding boundary moves
    # a logit by ~1e-3, which would hide real errors behind the F32 tolerance.
    return llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=512, n_threads=2,
                           logits_all=True, verbose=False, seed=0,
                           type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)


def case(path, prompt, full):
    llm = llm_for(path)
    toks = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    llm.eval(toks)
    rows = np.array(llm.scores[: len(toks)], dtype=np.float32)
    out = {"prompt": prompt, "prompt_tokens": toks}
    if full:
        out["logits_f32_b64"] = base64.b64encode(rows.astype("<f4").tobytes()).decode()
    out["top"] = [top(r, TOP_K) for r in rows]
    # A fresh context for the continuation keeps recurrent state handling out of the picture.
    llm = llm_for(path)
    llm.eval(toks)
    steps = []
    for _ in range(N_GREEDY):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        steps.append(top(row, TOP_K))
        llm.eval([steps[-1]["ids"][0]])
    out["greedy"] = {"tokens": [s["ids"][0] for s in steps], "steps": steps}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny-dir", default=os.environ.get(
        "STRATA_TINY_DIR", os.path.expanduser("~/.cache/strata/tiny")))
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS),
                    help="only these models (the others' files must then be for this script too)")
    a = ap.parse_args()
    out_dir = ROOT / "tests/data/tiny_refs"
    out_dir.mkdir(parents=True, exist_ok=True)
    for model in a.models:
        types, prompts = MODELS[model]
        for ty in types:
            path = pathlib.Path(a.tiny_dir) / model / f"{model}-{ty}.gguf"
            ref = {
                "model": model, "type": ty, "model_file": path.name,
                "model_sha256": sha256(path),
                "llama_cpp_python_version": llama_cpp.__version__,
                "script_sha256": sha256(__file__),
                "models_script_sha256": sha256(ROOT / "scripts/make_tiny_models.py"),
                "settings": {"n_ctx": 256, "n_batch": 512, "n_threads": 2, "kv": "f32"},
                "cases": [case(path, p, ty in FULL_ROWS) for p in prompts],
            }
            (out_dir / f"{model}-{ty}.json").write_text(json.dumps(ref, separators=(",", ":")) + "\n")
            print(f"{model}-{ty}: {[len(c['prompt_tokens']) for c in ref['cases']]} prompt tokens",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
