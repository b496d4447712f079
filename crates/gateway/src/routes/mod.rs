//! The routes, one file each.

pub(crate) mod audit;
pub(crate) mod chat;
pub(crate) mod countersign;
pub(crate) mod demo;
pub(crate) mod fallback;
pub(crate) mod health;
pub(crate) mod log;
pub(crate) mod models;
pub(crate) mod passkeys;
pub(crate) mod policy;
pub(crate) mod relay;
pub(crate) mod window;
