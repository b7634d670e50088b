//! Tokenizer built from GGUF `tokenizer.ggml.*` metadata.
