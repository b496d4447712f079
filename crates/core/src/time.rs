//! Time as the core sees it: a value passed in, never read from a clock.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Whole milliseconds since an epoch the host chooses; the core never reads a clock.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The timestamp `millis` milliseconds after the host's epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the host's epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// This timestamp moved `duration` later, saturating at the end of time.
    pub fn saturating_add(self, duration: Duration) -> Self {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(millis))
    }

    /// How long after `earlier` this is; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}
