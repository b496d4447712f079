//! Spent token ids in PostgreSQL: one record for every replica, kept across restarts.

use std::str::FromStr as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::replay::{Spent, SpentTokens};

/// An id is kept this long after its token expired before it is pruned, by the
/// database's clock: replicas whose clocks disagree by less than this cannot be handed a
/// pruned id.
const KEPT_AFTER_EXPIRY_SECS: i64 = 3600;

/// Every this many takes, one instance prunes (and once when it connects).
const PRUNE_EVERY: u64 = 1000;

/// The advisory lock under which instances take turns creating the table.
const CREATE_LOCK: i64 = 7_219_851_234_567_002;

const CREATE: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS countersign_spent_tokens \
     (id bytea PRIMARY KEY, until bigint NOT NULL)",
    "CREATE INDEX IF NOT EXISTS countersign_spent_tokens_until \
     ON countersign_spent_tokens (until)",
];

/// Spent token ids in a PostgreSQL table (`countersign_spent_tokens`, created if
/// missing): every verifier on the same database refuses a token any of them accepted,
/// and a restart forgets nothing. Each id is stored as its SHA-256, with the time until
/// which it is kept; taking one is a single atomic insert, refused on conflict. When the
/// database cannot be reached, tokens are refused ([`Spent::Unavailable`]), never
/// accepted on doubt.
pub struct PgSpentTokens {
    pool: PgPool,
    takes: AtomicU64,
}

impl std::fmt::Debug for PgSpentTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgSpentTokens(..)")
    }
}

/// PostgreSQL could not be reached or set up (the cause, said without the URL: it may
/// hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the record of spent tokens in PostgreSQL is unavailable: {0}")]
pub struct PgUnavailable(pub String);

/// A database error, said without the connection URL.
fn cause(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Configuration(_) => "the connection settings are invalid".to_owned(),
        sqlx::Error::PoolTimedOut => "no connection to PostgreSQL within 5 s".to_owned(),
        other => format!("PostgreSQL: {other}"),
    }
}

fn unavailable(e: sqlx::Error) -> PgUnavailable {
    PgUnavailable(cause(&e))
}

impl PgSpentTokens {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`)
    /// with a small pool of its own, creates the table if it is missing, and prunes it.
    /// Commits are durable whatever the server's default (`synchronous_commit = on`); a
    /// statement or a wait for a connection takes at most 5 s.
    pub async fn connect(url: &str) -> Result<Self, PgUnavailable> {
        let not_postgres = || {
            PgUnavailable(
                "not a PostgreSQL URL (postgres://user:password@host:port/database)".into(),
            )
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(not_postgres());
        }
        let options = PgConnectOptions::from_str(url)
            .map_err(|_| not_postgres())?
            .application_name("countersign-verify")
            .options([("synchronous_commit", "on"), ("statement_timeout", "5s")]);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(unavailable)?;
        let mut tx = pool.begin().await.map_err(unavailable)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(CREATE_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        for statement in CREATE {
            sqlx::query(statement)
                .execute(&mut *tx)
                .await
                .map_err(unavailable)?;
        }
        tx.commit().await.map_err(unavailable)?;
        let store = Self {
            pool,
            takes: AtomicU64::new(1),
        };
        store.prune().await.map_err(unavailable)?;
        Ok(store)
    }

    /// Deletes the ids kept until more than [`KEPT_AFTER_EXPIRY_SECS`] ago.
    async fn prune(&self) -> Result<(), sqlx::Error> {
        sqlx::query(
            "DELETE FROM countersign_spent_tokens \
             WHERE until < extract(epoch FROM now())::bigint - $1",
        )
        .bind(KEPT_AFTER_EXPIRY_SECS)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn take_once(&self, jti: &str, until: u64) -> Result<(), Spent> {
        if self.takes.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == 0 {
            self.prune()
                .await
                .map_err(|e| Spent::Unavailable(cause(&e)))?;
        }
        let inserted = sqlx::query(
            "INSERT INTO countersign_spent_tokens (id, until) VALUES ($1, $2) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(Sha256::digest(jti.as_bytes()).as_slice())
        .bind(i64::try_from(until).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .map_err(|e| Spent::Unavailable(cause(&e)))?;
        if inserted.rows_affected() == 1 {
            Ok(())
        } else {
            Err(Spent::Replayed)
        }
    }
}

impl SpentTokens for PgSpentTokens {
    fn take(
        &self,
        jti: &str,
        until: u64,
        _now: u64,
    ) -> impl std::future::Future<Output = Result<(), Spent>> + Send {
        self.take_once(jti, until)
    }
}
