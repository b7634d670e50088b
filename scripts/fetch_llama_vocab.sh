#!/usr/bin/env bash
# Fetch llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*.gguf with .inp/.out test
# vectors) from the llama-cpp-python 0.3.36 source package, for
# crates/strata-engine/tests/tokenizer_*.rs.
#
# Idempotent: does nothing when the files are already there; reuses the source tarball when it
# has been downloaded before.
#
#   STRATA_LLAMA_VOCAB_DIR  destination   (default ~/.cache/strata/llama-vocab)
#   STRATA_SRC_CACHE        tarball cache (default ~/.cache/strata/src)
set -euo pipefail

VERSION=0.3.36
DEST="${STRATA_LLAMA_VOCAB_DIR:-$HOME/.cache/strata/llama-vocab}"
CACHE="${STRATA_SRC_CACHE:-$HOME/.cache/strata/src}"
TARBALL="$CACHE/llama_cpp_python-$VERSION.tar.gz"
PREFIX="llama_cpp_python-$VERSION/vendor/llama.cpp/models"

have_all() {
    for v in gpt-2 llama-bpe llama-spm qwen2 qwen35; do
        for ext in "" .inp .out; do
            [[ -s "$DEST/ggml-vocab-$v.gguf$ext" ]] || return 1
        done
    done
}

if have_all; then
    echo "llama.cpp test vocabularies already in $DEST"
    exit 0
fi

mkdir -p "$CACHE" "$DEST"
if [[ ! -s "$TARBALL" ]]; then
    echo "downloading llama-cpp-python==$VERSION source into $CACHE"
    python3 -m pip download --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$CACHE"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$TARBALL" -C "$tmp" --wildcards "$PREFIX/ggml-vocab-*"
mv -f "$tmp/$PREFIX"/ggml-vocab-* "$DEST/"

if have_all; then
    echo "extracted $(ls "$DEST" | wc -l) files into $DEST"
else
    echo "error: $TARBALL lacks some ggml-vocab test files" >&2
    exit 1
fi
