//! Single use: token ids seen, kept until the token would have expired anyway.

use std::collections::HashMap;
use std::sync::Mutex;

/// The token ids already accepted, with their expiry (seconds).
#[derive(Debug)]
pub(crate) struct ReplayCache {
    seen: Mutex<HashMap<String, u64>>,
    capacity: usize,
    /// How long after `exp` a token is still accepted: an id is kept that much longer.
    pub(crate) leeway: u64,
}

/// Why a token id was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Spent {
    /// Seen before.
    Replayed,
    /// Full of unexpired ids: refuse rather than forget one.
    Full,
}

impl ReplayCache {
    pub(crate) fn new(capacity: usize, leeway: u64) -> Self {
        Self {
            seen: Mutex::new(HashMap::new()),
            capacity,
            leeway,
        }
    }

    /// Takes `jti` (valid until `exp`) if it was never seen; forgets expired ids first
    /// when full.
    pub(crate) fn take(&self, jti: &str, exp: u64, now: u64) -> Result<(), Spent> {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.contains_key(jti) {
            return Err(Spent::Replayed);
        }
        if seen.len() >= self.capacity {
            let leeway = self.leeway;
            seen.retain(|_, until| until.saturating_add(leeway) > now);
            if seen.len() >= self.capacity {
                return Err(Spent::Full);
            }
        }
        seen.insert(jti.to_owned(), exp);
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}
