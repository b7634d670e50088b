#!/usr/bin/env python3
"""Teacher-forced logits from llama.cpp, through llama-cpp-python, for `strata quality`.

Usage: llama_logits.py REQUEST.json

REQUEST: {"model": GGUF path, "n_ctx": int, "threads": int, "first": int,
          "chunks": [[token ids], ...]}  (every chunk at most n_ctx tokens)

Writes to stdout one JSON line {"n_vocab", "llama_cpp_python_version"} and then, for every
chunk, the float32 little-endian logits of positions first .. len(chunk)-2 (the rows that
predict tokens first+1 .. len-1), n_vocab floats each, chunk by chunk as they are computed.
Each chunk starts from an empty KV cache (llama.cpp's default f16 KV), like llama-perplexity.
Everything else llama.cpp prints goes to stderr. `strata quality` embeds this file and runs it
with `python3 -c`; it needs `pip install llama-cpp-python numpy`.
"""

import json
import os
import sys


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    # Logits go to the original stdout; anything native code prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import llama_cpp
    import numpy as np

    n_ctx = int(req["n_ctx"])
    llm = llama_cpp.Llama(
        model_path=req["model"],
        n_ctx=n_ctx,
        n_batch=n_ctx,
        n_ubatch=min(512, n_ctx),
        n_threads=int(req["threads"]),
        logits_all=True,
        verbose=False,
        seed=0,
    )
    n_vocab = llm.n_vocab()
    header = {"n_vocab": n_vocab, "llama_cpp_python_version": llama_cpp.__version__}
    out.write((json.dumps(header) + "\n").encode())
    out.flush()
    first = int(req["first"])
    for toks in req["chunks"]:
        llm.reset()
        llm.eval(toks)
        rows = np.ascontiguousarray(llm.scores[first : len(toks) - 1], dtype="<f4")
        out.write(rows.tobytes())
        out.flush()


if __name__ == "__main__":
    main()
