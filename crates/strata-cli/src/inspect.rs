//! `strata inspect`.
