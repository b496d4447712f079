//! Single use: where spent token ids are kept, and the in-memory store for one process.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

/// Where a verifier records the token ids it accepted, so each token is spent once.
///
/// A token is single use only as far as its store reaches: [`MemorySpentTokens`] (the
/// default) covers one process until it stops; a store in a shared database covers every
/// replica that uses it, across restarts (the `postgres` feature's `PgSpentTokens`).
///
/// An implementation must be atomic (of concurrent takes of one id, at most one
/// succeeds), must refuse an id at least until its `until`, and must refuse when it
/// cannot tell (a database that is down): never accept on doubt.
pub trait SpentTokens: Send + Sync {
    /// Records `jti` as spent until `until` (Unix seconds: the token is refused as expired
    /// after that anyway), or refuses it. `now` is the verifier's clock.
    fn take(
        &self,
        jti: &str,
        until: u64,
        now: u64,
    ) -> impl Future<Output = Result<(), Spent>> + Send;
}

/// Why a token id was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spent {
    /// Taken before.
    Replayed,
    /// Expired by a time the store has already seen: its id may have been forgotten, so
    /// the token is refused whatever the clock says now.
    Expired,
    /// Full of unexpired ids: refused rather than forgetting one early.
    Full,
    /// The store cannot be reached (the cause, without secrets); nothing was taken.
    Unavailable(String),
}

/// Spent token ids in this process's memory, each kept until its token would be refused
/// as expired anyway. Right for one process; lost on restart, and not shared with other
/// replicas.
#[derive(Debug)]
pub struct MemorySpentTokens {
    state: Mutex<State>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct State {
    /// The ids, with the time until which each is kept.
    seen: HashMap<String, u64>,
    /// Every id ever dropped was kept until this time or earlier.
    forgotten_until: u64,
}

impl MemorySpentTokens {
    /// Remembers at most `capacity` unexpired ids; past that, new ones are refused
    /// ([`Spent::Full`]).
    pub fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State::default()),
            capacity,
        }
    }

    /// How many ids are remembered now.
    pub fn len(&self) -> usize {
        self.lock().seen.len()
    }

    /// Whether no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `jti` if it was never seen. When full, forgets the ids kept until `now` or
    /// earlier, and from then on refuses every token kept no later than the last of
    /// them: a clock that jumped ahead and stepped back cannot bring a forgotten id back.
    fn take_now(&self, jti: &str, until: u64, now: u64) -> Result<(), Spent> {
        let mut state = self.lock();
        if state.seen.contains_key(jti) {
            return Err(Spent::Replayed);
        }
        if state.seen.len() >= self.capacity {
            let mut forgotten_until = state.forgotten_until;
            state.seen.retain(|_, kept| {
                let keep = *kept > now;
                if !keep {
                    forgotten_until = forgotten_until.max(*kept);
                }
                keep
            });
            state.forgotten_until = forgotten_until;
        }
        if until <= state.forgotten_until {
            return Err(Spent::Expired);
        }
        if state.seen.len() >= self.capacity {
            return Err(Spent::Full);
        }
        state.seen.insert(jti.to_owned(), until);
        Ok(())
    }
}

impl Default for MemorySpentTokens {
    /// Up to 100,000 unexpired ids.
    fn default() -> Self {
        Self::new(100_000)
    }
}

impl SpentTokens for MemorySpentTokens {
    fn take(
        &self,
        jti: &str,
        until: u64,
        now: u64,
    ) -> impl Future<Output = Result<(), Spent>> + Send {
        std::future::ready(self.take_now(jti, until, now))
    }
}
