#![doc = include_str!("../README.md")]

mod approval_window;
pub mod assistant;
mod attention;
mod audit_ship;
mod audit_spill;
mod batch;
mod clock;
mod conversation;
mod countersign;
mod countersigner;
mod dock;
mod dock_state;
mod event_brand;
mod grant_store;
mod highlight;
mod http;
mod i18n;
mod list_map;
mod mcp_relay;
mod page_registry;
mod passkey;
mod pending_store;
mod provider;
mod restore;
mod use_action;
mod use_page_state;
mod use_target;
mod webauthn;
mod webmcp;

pub use assistant::{
    Assistant, AssistantError, Fallback, FallbackSwitch, ModelClient, OpenAiCompatible,
    PhraseError, Reply, Rule, Scripted,
};
pub use audit_ship::ShippingStatus;
pub use batch::BatchView;
pub use countersign::Countersign;
pub use dock::{AgentDock, Placement, Theme, DOCK_CSS};
pub use dock_state::{Activity, DockState, LogEntry};
pub use grant_store::StoredGrant;
pub use highlight::HIGHLIGHT_CLASS;
pub use http::post_countersigned;
pub use i18n::{Locale, Strings};
pub use provider::{
    provide_countersign, use_countersign, CountersignContext, CountersignOptions, ProvideError,
    READ_PAGE_STATE,
};
pub use use_action::{
    use_action, use_action_with_options, Registered, UseActionOptions, UseActionReturn,
};
pub use use_page_state::use_page_state;
pub use use_target::{use_target, use_target_ref};
