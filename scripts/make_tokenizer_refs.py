#!/usr/bin/env python3
"""Write llama.cpp's tokenization of tricky strings for the test models.

For each model in ``MODELS`` this loads the vocabulary with llama-cpp-python
(``Llama(model_path, vocab_only=True)``), tokenizes every string of ``STRINGS`` with
``add_special`` and ``parse_special`` both on and off (``llama_tokenize``), detokenizes the ids
(``llama_detokenize`` with remove_special=False, unparse_special=False and =True), and writes
``crates/strata-engine/tests/data/tokenizer/refs_<model>.json`` with the llama_cpp version and the
model file's sha256. ``crates/strata-engine/tests/tokenizer_models.rs`` compares every case.

Usage: scripts/make_tokenizer_refs.py [--models-dir DIR]   (default: $STRATA_MODELS_DIR or
~/.cache/strata/models; needs ``pip install llama-cpp-python==0.3.36``).
"""

import argparse
import ctypes
import hashlib
import json
import os
import sys
from pathlib import Path

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder": "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
}

STRINGS = [
    "",
    " ",
    "Hello world",
    " Hello world",
    "Hello, y'all! How're you? I'm fine, she'd've said. DON'T WON'T I'LL WE'VE",
    "🦙🚀😶\u200d🌫️ emoji 👨\u200d👩\u200d👧\u200d👦 family ✅",
    "你好，世界！这是一个测试。",
    "日本語のテキストとカタカナ、ひらがな。한국어 텍스트",
    "Mixed: English, Русский, العربية, हिन्दी, ελληνικά, עברית, ไทย",
    "Ça va? Où est l'hôtel? Über Straße naïve café résumé",
    "e\u0301 combining a\u0300 marks and Vie\u0323\u0302t",
    "def foo(x):\n\tif x > 0:\n\t\treturn x ** 2\n    else:\n        return -x\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).collect();\n}\n",
    "# Title\n\n- item 1\n- item 2\n\n```python\nprint('hi')\n```\n",
    "\n\n\n",
    "\n",
    "   leading and trailing spaces   ",
    "tabs\t\tand\t \tmixed \n \n  \n",
    "Multiple   spaces    between     words",
    "\r\nWindows\r\nline endings\r\n",
    "12345678901234567890",
    "3.14159 2,718 1e-10 0x1F 1_000_000 $1,234.56",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<|endoftext|><s></s><bos><eos> <pad><unk>",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "<unused0> <mask> [multimodal] <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "URL: https://example.com/path?q=1&r=2#frag and email a.b@c.de",
    "JSON {\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "Repeated!!!!!!???? ...... ------ ====== '''''' \"\"\"\"",
    "Zero\u200bwidth\u200cjoiner\u200d nbsp\u00a0here and\u3000ideographic space",
    "Math: ∑_{i=1}^{n} x_i² ≤ ∞ → ∀ε>0 ∃δ",
    "a" * 300 + " " + "ab" * 150,
    " ' '' d 's 'S 've 'LL",
]

FLAGS = [(False, False), (False, True), (True, False), (True, True)]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def detokenize(llama_cpp, vocab, ids, unparse_special):
    arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
    size = 64 + 64 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, unparse_special)
        if n >= 0:
            return buf.raw[:n]
        size = -n + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = os.environ.get("STRATA_MODELS_DIR", str(Path.home() / ".cache/strata/models"))
    ap.add_argument("--models-dir", default=default_dir)
    ap.add_argument(
        "--out-dir",
        default=str(Path(__file__).resolve().parent.parent / "crates/strata-engine/tests/data/tokenizer"),
    )
    args = ap.parse_args()

    import llama_cpp

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, file in MODELS.items():
        path = Path(args.models_dir) / file
        if not path.exists():
            print(f"missing model {path}", file=sys.stderr)
            return 1
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        vocab = llm._model.vocab
        cases = []
        for text in STRINGS:
            for add_special, parse_special in FLAGS:
                ids = llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)
                cases.append(
                    {
                        "text": text,
                        "add_special": add_special,
                        "parse_special": parse_special,
                        "ids": ids,
                        # llama_detokenize(ids, remove_special=false, unparse_special=false / true)
                        "decoded": detokenize(llama_cpp, vocab, ids, False).decode("utf-8", "replace"),
                        "decoded_special": detokenize(llama_cpp, vocab, ids, True).decode("utf-8", "replace"),
                    }
                )
        doc = {
            "generator": "scripts/make_tokenizer_refs.py",
            "llama_cpp_python": llama_cpp.__version__,
            "model_file": file,
            "model_sha256": sha256(path),
            "cases": cases,
        }
        dest = out_dir / f"refs_{name}.json"
        with open(dest, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{dest}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
