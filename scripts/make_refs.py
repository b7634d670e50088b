#!/usr/bin/env python3
"""Reference logits and greedy continuations from llama.cpp, for Strata's model tests.

For each real model this writes tests/data/refs/<name>.json with
  - teacher_forced: llama.cpp's logits at every position of tests/data/reference_text.txt
    (top-K ids and logits, the log-sum-exp of the full row, and the logit of the true next
    token), so a test can compute same-top-1 %, KL(llama.cpp || ours) and perplexity;
  - greedy: for each prompt, llama.cpp's 32 greedy tokens and its top-K logits at every
    step, so a test can check our tokens up to llama.cpp's first near-tie.
  - self_consistency: how far llama.cpp is from itself when the same text is evaluated one
    token at a time instead of in 512-token batches (same top-1 %, mean KL, perplexity
    ratio). Quantized activations make every engine's logits move by ~0.15 under a change
    of float summation order, so this is the noise floor two correct engines can reach.
Every file records the llama.cpp (llama-cpp-python) version, this script's sha256 and the
model file's sha256; crates/strata-engine/tests/reference_llama_cpp.rs checks them.

Usage: python3 scripts/make_refs.py [--models-dir DIR] [name ...]
Needs: pip install llama-cpp-python==0.3.36 numpy (builds llama.cpp from source).
"""
import argparse, hashlib, json, os, sys, pathlib
import numpy as np
import llama_cpp

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = {
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-270m": "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
}
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "Water boils at 100 degrees Celsius at sea level. At higher altitudes,",
    "1, 2, 3, 5, 8, 13,",
]
TOP_K = 32
N_GREEDY = 32


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def top(row, k):
    idx = np.argpartition(-row, k)[:k]
    idx = idx[np.argsort(-row[idx], kind="stable")]
    return [int(i) for i in idx], [round(float(row[i]), 5) for i in idx]


def lse(row):
    m = float(row.max())
    return m + float(np.log(np.exp((row - m).astype(np.float64)).sum()))


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))


def self_consistency(path, toks, scores):
    """llama.cpp batched (the reference) against llama.cpp one token at a time."""
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=2048, n_batch=1, n_ubatch=1,
                          n_threads=2, logits_all=True, verbose=False, seed=0)
    llm.eval(toks)
    seq = np.array(llm.scores[: len(toks)], dtype=np.float32)
    lp, lq = log_softmax(scores)[:-1], log_softmax(seq)[:-1]
    nxt = np.array(toks[1:])
    rows = np.arange(len(nxt))
    kl = (np.exp(lp) * (lp - lq)).sum(1)
    ppl_p, ppl_q = np.exp(-lp[rows, nxt].mean()), np.exp(-lq[rows, nxt].mean())
    return {"same_top1": float((scores[:-1].argmax(1) == seq[:-1].argmax(1)).mean()),
            "mean_kl": float(kl.mean()), "ppl_ratio": float(ppl_q / ppl_p)}


def run(name, path):
    text = (ROOT / "tests/data/reference_text.txt").read_text()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=2048, n_batch=512, n_threads=2,
                          logits_all=True, verbose=False, seed=0)
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)
    llm.reset()
    llm.eval(toks)
    scores = np.array(llm.scores[: len(toks)], dtype=np.float32)
    tf = []
    for i in range(len(toks) - 1):
        ids, logits = top(scores[i], TOP_K)
        tf.append({"ids": ids, "logits": logits, "lse": round(lse(scores[i]), 5),
                   "next_logit": round(float(scores[i][toks[i + 1]]), 5)})
    greedy = []
    for prompt in PROMPTS:
        ptoks = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(ptoks)
        steps = []
        for _ in range(N_GREEDY):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            ids, logits = top(row, 8)
            steps.append({"ids": ids, "logits": logits})
            llm.eval([ids[0]])
        greedy.append({"prompt": prompt, "prompt_tokens": ptoks,
                       "tokens": [s["ids"][0] for s in steps], "steps": steps})
    return {
        "model": name,
        "model_file": path.name,
        "model_sha256": sha256(path),
        "llama_cpp_python_version": llama_cpp.__version__,
        "script_sha256": sha256(__file__),
        "settings": {"n_ctx": 2048, "n_batch": 512, "n_threads": 2, "kv": "f16 (default)"},
        "text_tokens": toks,
        "self_consistency": self_consistency(path, toks, scores),
        "teacher_forced": tf,
        "greedy": greedy,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.environ.get(
        "STRATA_MODELS_DIR", os.path.expanduser("~/.cache/strata/models")))
    ap.add_argument("names", nargs="*", default=list(MODELS))
    a = ap.parse_args()
    out_dir = ROOT / "tests/data/refs"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in a.names:
        path = pathlib.Path(a.models_dir) / MODELS[name]
        ref = run(name, path)
        (out_dir / f"{name}.json").write_text(json.dumps(ref, separators=(",", ":")) + "\n")
        print(f"{name}: {len(ref['text_tokens'])} tokens, {len(ref['greedy'])} prompts", file=sys.stderr)


if __name__ == "__main__":
    main()
