//! The gate's promises, one module each: what the person approves is exactly what runs,
//! and nothing runs that nobody approved. Tests named `break_*` each demonstrated a real
//! break (they failed on the code they were written against) and now guard its fix.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

mod arguments;
mod audit;
mod bad_input;
mod batches;
mod callers;
mod canonical;
mod countersigned;
mod digests;
mod edits;
mod grants;
mod handoffs;
mod hooks;
mod matrix;
mod modes;
mod paths;
mod pipeline;
mod poisoning;
mod policy_file;
mod properties;
mod questions;
mod refusals;
mod registrations;
mod reload;
mod safeguards;
mod schema;
mod text;
mod tickets;
mod untrusted;
