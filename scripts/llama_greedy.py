#!/usr/bin/env python3
"""Greedy tokens from llama.cpp, through llama-cpp-python, for a GGUF file.

Usage: llama_greedy.py MODEL.gguf N TOKEN_ID [TOKEN_ID ...]

Loads MODEL (CPU, f16 KV cache, context 256), feeds the given prompt token ids and decodes N
tokens greedily (argmax; no penalties). Prints one JSON line to stdout:
{"n_vocab": int, "n_params": int, "tokens": [N ids], "llama_cpp_python_version": str}.
Exit status 1 with the reason on stderr when llama.cpp cannot load the file. Everything the
native library prints goes to stderr. Used by crates/strata-cli/tests/synth.rs to check that
llama.cpp loads files written by `strata synth`; needs `pip install llama-cpp-python numpy`.
"""

import json
import os
import sys


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    prompt = [int(t) for t in sys.argv[3:]]
    # Keep stdout for the JSON line; native logs go to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import llama_cpp
    import numpy as np

    try:
        llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_threads=2, verbose=False)
    except Exception as e:  # llama-cpp-python raises ValueError for a file it cannot load
        print(f"llama.cpp cannot load {path}: {e}", file=sys.stderr)
        sys.exit(1)
    tokens = []
    llm.eval(prompt)
    for _ in range(n):
        # Only the last position's logits exist (logits_all is off).
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        tok = int(np.argmax(logits))
        tokens.append(tok)
        llm.eval([tok])
    out.write(
        json.dumps(
            {
                "n_vocab": llm.n_vocab(),
                "n_params": llm._model.n_params(),
                "tokens": tokens,
                "llama_cpp_python_version": llama_cpp.__version__,
            }
        )
        + "\n"
    )
    out.flush()


if __name__ == "__main__":
    main()
