//! `strata pull`.
