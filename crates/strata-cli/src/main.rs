//! The `strata` command.

mod inspect;
mod models;
mod pull;

fn main() {}
