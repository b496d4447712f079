//! The dock in headless Chromium: each test mounts a small page, drives the dock with
//! real DOM events, and asserts both the outcome the model gets and the page state.
//! One test binary: the tests are in `dock/`, a file for each feature, all on the page
//! and helpers of `dock/harness.rs`.
#![cfg(target_arch = "wasm32")]
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

#[path = "dock/harness.rs"]
mod harness;

#[path = "dock/cards.rs"]
mod cards;

#[path = "dock/edits.rs"]
mod edits;
#[path = "dock/person.rs"]
mod person;

#[path = "dock/batches.rs"]
mod batches;

#[path = "dock/questions.rs"]
mod questions;

#[path = "dock/handoffs.rs"]
mod handoffs;

#[path = "dock/grants.rs"]
mod grants;

#[path = "dock/policy.rs"]
mod policy;

#[path = "dock/gestures.rs"]
mod gestures;

#[path = "dock/reload.rs"]
mod reload;

#[path = "dock/conversation.rs"]
mod conversation;

#[path = "dock/streaming.rs"]
mod streaming;

#[path = "dock/attention.rs"]
mod attention;

#[path = "dock/locale.rs"]
mod locale;

#[path = "dock/layout.rs"]
mod layout;

#[path = "dock/audit.rs"]
mod audit;

#[path = "dock/audit_spill.rs"]
mod audit_spill;

#[path = "dock/long_session.rs"]
mod long_session;

#[path = "dock/webmcp.rs"]
mod webmcp;

#[path = "dock/mcp_relay.rs"]
mod mcp_relay;

#[path = "dock/registration.rs"]
mod registration;
