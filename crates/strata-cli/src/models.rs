//! Known model names.
