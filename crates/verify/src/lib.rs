#![doc = include_str!("../README.md")]

mod claims;
mod jwk;
pub mod log;
#[cfg(feature = "postgres")]
mod postgres;
mod receipt;
mod replay;
mod sign;
mod token;
#[cfg(feature = "axum")]
mod web;

pub use claims::{
    ActionDetail, Actor, ApprovedBy, Claims, Presence, ACTION_DETAIL_TYPE, DEFAULT_AUDIENCE,
};
pub use jwk::{Jwk, JwkSet, JwksError};
#[cfg(feature = "postgres")]
pub use postgres::{PgSpentTokens, PgUnavailable};
pub use receipt::{token_sha256, CallOutcome, ReceiptClaims, RECEIPT_TYPE};
pub use replay::{MemorySpentTokens, Spent, SpentTokens};
pub use sign::Signer;
pub use token::{Expected, Verifier, VerifyError, ALG, MAX_TOKEN_BYTES, TOKEN_TYPE};
#[cfg(feature = "axum")]
pub use web::{CountersignatureHeader, HEADER};

/// Re-exported so a backend can hold keys without naming the dependency.
pub use ed25519_dalek::{SigningKey, VerifyingKey};
