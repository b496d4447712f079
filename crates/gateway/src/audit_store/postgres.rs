//! The PostgreSQL backend: the same chained lines as the file, one row each, for several
//! gateway replicas on one database.
//!
//! **Appends are serialised.** A batch runs in one transaction that first locks the head
//! row (`SELECT … FOR UPDATE`), so the replicas extend one chain in turn: each batch
//! reads the head the previous one left, skips the ids already stored, inserts its lines
//! and moves the head, all or nothing. One chain, not one per page, so `verify` checks
//! the whole trail as one sequence, exactly as it checks a file. The cost is one commit
//! at a time across the deployment; a batch of 100 records is one commit, and the pages
//! send batches.
//!
//! **Durable before the acknowledgement.** Every connection sets
//! `synchronous_commit = on`, whatever the server's default: the commit returns after the
//! write-ahead log is flushed, and only then does the gateway answer. A replica killed
//! mid-append leaves an open transaction the server rolls back; a commit whose answer is
//! lost is found stored when the page sends the batch again (the ids are skipped, and
//! `record_id` is unique besides).
//!
//! **Anchored.** The head row holds the last seq and mac, keyed like the file's head:
//! without the key nobody can cut the tail or re-chain the rows unseen. Each append
//! checks the head's mac before extending it; `connect` checks that the last row is the
//! one the head names.

use std::str::FromStr as _;
use std::time::Duration;

use countersign::AuditRecord;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::Connection as _;

use super::{
    anchor, constant_time_eq, seal, sealed_part, verify_trail, Appended, ChainKey, ChainedLine,
    Head, StoreError, Trail, Verified, GENESIS,
};

/// A broken row of the database's trail.
fn broken(line: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Broken {
        trail: Trail::Database,
        line,
        reason: reason.into(),
    }
}

/// The database's head and rows do not match.
fn unanchored(reason: impl Into<String>) -> StoreError {
    StoreError::Unanchored {
        trail: Trail::Database,
        reason: reason.into(),
    }
}

/// How long one append may take, the wait for the head's lock included, before it is
/// refused (and rolled back): a database that went away answers 503 in bounded time.
const APPEND_DEADLINE: Duration = Duration::from_secs(10);

/// Connections per replica. Appends take turns at the head's lock anyway; more would
/// only queue at the database.
const CONNECTIONS: u32 = 8;

/// The PostgreSQL audit store. Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    key: ChainKey,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgStore(..)")
    }
}

/// A database error, said without the connection URL (it may hold a password).
fn db(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| {
        let cause = match e {
            sqlx::Error::Configuration(_) => "the connection settings are invalid".to_owned(),
            sqlx::Error::PoolTimedOut => "no connection within the deadline".to_owned(),
            other => other.to_string(),
        };
        StoreError::Database(format!("{context}: {cause}"))
    }
}

/// The schema the trail's tables (and their migrations' bookkeeping) live in, apart from
/// whatever else shares the database.
const SCHEMA: &str = "countersign";

/// The connection options for `url`: durable commits whatever the server's default (each
/// append also pins read-committed isolation and the commit mode itself), the trail's
/// own schema, and server-side limits so a
/// replica that vanishes mid-append (no FIN ever reaches the server) cannot hold the
/// head's lock for longer than moments.
fn options(url: &str) -> Result<PgConnectOptions, StoreError> {
    Ok(reading(url)?.options([
        ("search_path", SCHEMA),
        ("synchronous_commit", "on"),
        ("idle_in_transaction_session_timeout", "15s"),
        ("lock_timeout", "10s"),
        ("statement_timeout", "10s"),
    ]))
}

/// The options for reading the trail (`verify`): its schema, no statement limit.
fn reading(url: &str) -> Result<PgConnectOptions, StoreError> {
    let not_postgres = || {
        StoreError::Database(
            "the audit URL is not a PostgreSQL URL (postgres://user:password@host:port/database)"
                .into(),
        )
    };
    let parsed = url::Url::parse(url).map_err(|_| not_postgres())?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(not_postgres());
    }
    let options = PgConnectOptions::from_str(url).map_err(|_| not_postgres())?;
    Ok(options
        .application_name("countersign-gateway")
        .options([("search_path", SCHEMA)]))
}

/// The advisory lock replicas take turns under while creating the schema: an arbitrary
/// key of this crate's own.
const SCHEMA_LOCK: i64 = 7_219_851_234_567_001;

/// Creates the trail's schema if it is missing, one replica at a time (two concurrent
/// `CREATE SCHEMA IF NOT EXISTS` can collide). A schema made beforehand by a database
/// administrator is used as it is: the role then needs no right to create schemas.
async fn create_schema(connection: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(SCHEMA)
            .fetch_one(&mut *connection)
            .await?;
    if exists {
        return Ok(());
    }
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(SCHEMA_LOCK)
        .execute(&mut *connection)
        .await?;
    let created = sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
        .execute(&mut *connection)
        .await;
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(SCHEMA_LOCK)
        .execute(&mut *connection)
        .await?;
    created.map(|_| ())
}

/// Reads the head row.
const SELECT_HEAD: &str = "SELECT seq, last, pending, mac FROM countersign_audit_head";
/// Reads the head row and holds its lock to the end of the transaction.
const LOCK_HEAD: &str = "SELECT seq, last, pending, mac FROM countersign_audit_head FOR UPDATE";

/// The head row as stored.
type HeadRow = (i64, String, i64, String);

fn head_of(row: HeadRow) -> Result<Head, StoreError> {
    let (seq, last, pending, mac) = row;
    let count = |n: i64| u64::try_from(n).map_err(|_| unanchored("the head's seq is negative"));
    Ok(Head {
        seq: count(seq)?,
        last,
        pending: count(pending)?,
        mac,
    })
}

/// The head row, its mac checked under `key`.
fn checked(row: Option<HeadRow>, key: &ChainKey) -> Result<Head, StoreError> {
    let head = head_of(row.ok_or_else(|| {
        unanchored("the head row is missing: the trail's end cannot be checked")
    })?)?;
    if !head.holds(key) {
        return Err(unanchored(
            "the head's mac does not match: it was changed, or the key is wrong",
        ));
    }
    Ok(head)
}

/// The ids of the batch already stored. A row whose `record_id` is not its line's record
/// id was changed (the column is outside the mac): refused, never taken as "stored". A
/// stored record that differs from the one sent under its id is a conflict: the page's
/// record is not dropped as a duplicate.
fn already_stored(
    rows: Vec<(String, String)>,
    batch: &super::StoredIds,
) -> Result<std::collections::HashSet<String>, StoreError> {
    let mut stored = std::collections::HashSet::new();
    for (id, line) in rows {
        let line: ChainedLine = serde_json::from_str(&line).map_err(|e| {
            broken(
                0,
                format!("the row of record `{id}` is not a chained line ({e})"),
            )
        })?;
        if line.record.id != id {
            return Err(broken(
                line.seq,
                "its record_id column is not its record's id: the row was changed",
            ));
        }
        if batch
            .get(&id)
            .is_some_and(|sent| *sent != super::record_digest(&line.record))
        {
            return Err(StoreError::Conflict(id));
        }
        stored.insert(id);
    }
    Ok(stored)
}

fn seq_value(seq: u64) -> Result<i64, StoreError> {
    i64::try_from(seq).map_err(|_| StoreError::Database("the trail is full".into()))
}

impl PgStore {
    /// Connects to the database at `url`, runs the migrations (safe while other replicas
    /// start: they take turns), creates the head under `key` if the trail is new, and
    /// checks it: a head sealed under another key, or a trail whose last row is not the
    /// one its head names, is refused. Checking every row is `verify --audit-url`'s job,
    /// so a replica starts in constant time.
    pub async fn connect(url: &str, key: ChainKey) -> Result<Self, StoreError> {
        let options = options(url)?;
        // One connection first, so a refusal is told as itself, not as a pool timeout;
        // the schema and the migrations on it, without the appends' time limits (a
        // migration on a large trail, or a wait for another replica's, takes longer).
        let mut first = sqlx::PgConnection::connect_with(&reading(url)?)
            .await
            .map_err(db("cannot connect"))?;
        create_schema(&mut first)
            .await
            .map_err(db("cannot create the schema `countersign`"))?;
        sqlx::migrate!("./migrations")
            .run(&mut first)
            .await
            .map_err(|e| StoreError::Database(format!("the migrations failed: {e}")))?;
        first.close().await.map_err(db("cannot connect"))?;
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(db("cannot connect"))?;
        // A pooler that drops startup options would put the trail elsewhere: refused.
        let schema: Option<String> = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&pool)
            .await
            .map_err(db("cannot read the schema"))?;
        if schema.as_deref() != Some(SCHEMA) {
            return Err(StoreError::Database(format!(
                "the connection's schema is {schema:?}, not `{SCHEMA}`: something between the gateway and the database drops its startup options"
            )));
        }
        let genesis = Head::sealed(&key, 0, GENESIS, 0);
        sqlx::query(
            "INSERT INTO countersign_audit_head (one, seq, last, pending, mac) \
             VALUES (TRUE, 0, $1, 0, $2) ON CONFLICT (one) DO NOTHING",
        )
        .bind(GENESIS)
        .bind(&genesis.mac)
        .execute(&pool)
        .await
        .map_err(db("cannot create the head"))?;
        let store = Self { pool, key };
        store.check_anchor().await?;
        Ok(store)
    }

    /// The head is genuine under this key, the row at its seq carries its mac, and no
    /// row lies beyond it.
    async fn check_anchor(&self) -> Result<(), StoreError> {
        // One statement, one snapshot: appends by other replicas cannot fall between.
        let row: Option<(i64, String, i64, String, Option<String>, i64)> = sqlx::query_as(
            "SELECT h.seq, h.last, h.pending, h.mac, \
                    (SELECT line FROM countersign_audit WHERE seq = h.seq), \
                    (SELECT count(*) FROM countersign_audit WHERE seq > h.seq) \
             FROM countersign_audit_head h",
        )
        .fetch_optional(&self.pool)
        .await
        .map_err(db("cannot read the head"))?;
        let (head_row, at_head, beyond) = match row {
            Some((seq, last, pending, mac, at_head, beyond)) => {
                (Some((seq, last, pending, mac)), at_head, beyond)
            }
            None => (None, None, 0),
        };
        let head = checked(head_row, &self.key)?;
        // The row the head names, its own mac checked: a rewritten last row is caught
        // before anything is chained onto it.
        let genuine = at_head.as_deref().is_some_and(|line| {
            let sealed: Option<Vec<u8>> = sealed_part(line.as_bytes());
            let parsed = serde_json::from_str::<ChainedLine>(line).ok();
            match (sealed, parsed) {
                (Some(sealed), Some(parsed)) => {
                    parsed.seq == head.seq
                        && parsed.mac == head.last
                        && constant_time_eq(
                            self.key.mac(&[&sealed]).as_bytes(),
                            parsed.mac.as_bytes(),
                        )
                }
                _ => false,
            }
        });
        if head.seq > 0 && !genuine {
            return Err(unanchored(format!(
                "row {} is not the row the head acknowledged: rows were cut or rewritten",
                head.seq
            )));
        }
        if beyond > 0 {
            return Err(unanchored(format!(
                "{beyond} rows lie beyond the head: the head was put back from earlier"
            )));
        }
        Ok(())
    }

    /// Appends the records not stored yet, in order, chained, in one transaction that
    /// holds the head's lock; returns once the commit is durable. Refused after
    /// ten seconds (the wait for the lock included), rolled back.
    pub async fn append(&self, records: Vec<AuditRecord>) -> Result<Appended, StoreError> {
        tokio::time::timeout(APPEND_DEADLINE, self.append_now(records))
            .await
            .map_err(|_| StoreError::Database("the append did not finish in time".into()))?
    }

    async fn append_now(&self, records: Vec<AuditRecord>) -> Result<Appended, StoreError> {
        let mut fresh = super::StoredIds::new();
        let mut duplicates = 0;
        let mut batch = Vec::with_capacity(records.len());
        for record in records {
            let digest = super::record_digest(&record);
            let id = record.id.as_str();
            match fresh.get(id) {
                Some(seen) if *seen == digest => duplicates += 1,
                Some(_) => return Err(StoreError::Conflict(id.to_owned())),
                None => {
                    fresh.insert(id.to_owned(), digest);
                    batch.push(record);
                }
            }
        }
        let mut tx = self.pool.begin().await.map_err(db("cannot begin"))?;
        // Pinned here too, whatever a connection pooler in between did to the options.
        for setting in [
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "SET LOCAL synchronous_commit = on",
        ] {
            sqlx::query(setting)
                .execute(&mut *tx)
                .await
                .map_err(db("cannot begin"))?;
        }
        let row: Option<HeadRow> = sqlx::query_as(LOCK_HEAD)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("cannot lock the head"))?;
        let head = checked(row, &self.key)?;
        let ids: Vec<String> = batch.iter().map(|r| r.id.to_string()).collect();
        let stored: Vec<(String, String)> = sqlx::query_as(
            "SELECT record_id, line FROM countersign_audit WHERE record_id = ANY($1)",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db("cannot look up the ids"))?;
        let stored = already_stored(stored, &fresh)?;
        let (mut seq, mut last) = (head.seq, head.last);
        let (mut seqs, mut record_ids, mut lines) = (Vec::new(), Vec::new(), Vec::new());
        for record in &batch {
            if stored.contains(record.id.as_str()) {
                duplicates += 1;
                continue;
            }
            seq += 1;
            let (line, mac) = seal(&self.key, Trail::Database, seq, &last, record)?;
            last = mac;
            seqs.push(seq_value(seq)?);
            record_ids.push(record.id.to_string());
            lines.push(
                String::from_utf8(line).map_err(|_| broken(seq, "a sealed line is not UTF-8"))?,
            );
        }
        let appended = lines.len();
        if appended > 0 {
            sqlx::query(
                "INSERT INTO countersign_audit (seq, record_id, line) \
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[])",
            )
            .bind(&seqs)
            .bind(&record_ids)
            .bind(&lines)
            .execute(&mut *tx)
            .await
            .map_err(db("cannot insert"))?;
            let moved = Head::sealed(&self.key, seq, &last, seq);
            sqlx::query(
                "UPDATE countersign_audit_head SET seq = $1, last = $2, pending = $1, mac = $3",
            )
            .bind(seq_value(seq)?)
            .bind(&moved.last)
            .bind(&moved.mac)
            .execute(&mut *tx)
            .await
            .map_err(db("cannot move the head"))?;
        }
        // INVARIANT: acknowledged only after the commit returned (synchronous_commit = on).
        tx.commit().await.map_err(db("the commit failed"))?;
        Ok(Appended {
            appended,
            duplicates,
            last_seq: seq,
        })
    }

    /// The key the trail is chained under.
    pub(crate) fn key(&self) -> &ChainKey {
        &self.key
    }

    /// The whole trail as JSON Lines, read in one snapshot.
    pub async fn export(&self) -> Result<Vec<u8>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db("cannot begin"))?;
        let (bytes, _) = read_trail(&mut tx).await?;
        tx.commit().await.map_err(db("cannot end the read"))?;
        Ok(bytes)
    }

    /// How many records are stored (the head's seq).
    pub async fn count(&self) -> Result<u64, StoreError> {
        let row: Option<HeadRow> = sqlx::query_as(SELECT_HEAD)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("cannot read the head"))?;
        Ok(checked(row, &self.key)?.seq)
    }
}

/// Every row in seq order as JSON Lines, and the head row, from one snapshot.
async fn read_trail(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
) -> Result<(Vec<u8>, Option<Head>), StoreError> {
    for setting in [
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        "SET LOCAL statement_timeout = 0",
        "SET LOCAL idle_in_transaction_session_timeout = 0",
    ] {
        sqlx::query(setting)
            .execute(&mut **tx)
            .await
            .map_err(db("cannot take a snapshot"))?;
    }
    let row: Option<HeadRow> = sqlx::query_as(SELECT_HEAD)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db("cannot read the head"))?;
    let rows: Vec<(i64, String, String)> =
        sqlx::query_as("SELECT seq, record_id, line FROM countersign_audit ORDER BY seq")
            .fetch_all(&mut **tx)
            .await
            .map_err(db("cannot read the trail"))?;
    let mut bytes = Vec::with_capacity(rows.iter().map(|r| r.2.len() + 1).sum());
    for (seq, id, line) in rows {
        // The columns outside the mac must say what the sealed line says.
        if let Ok(parsed) = serde_json::from_str::<ChainedLine>(&line) {
            if i64::try_from(parsed.seq).ok() != Some(seq) || parsed.record.id != id {
                return Err(broken(
                    parsed.seq,
                    "its seq or record_id column differs from its sealed line: the row was changed",
                ));
            }
        }
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    Ok((bytes, row.map(head_of).transpose()?))
}

/// The trail in the database at `url` as JSON Lines, read in one snapshot, without the
/// key and without writing (for `evidence`).
pub async fn read_postgres(url: &str) -> Result<Vec<u8>, StoreError> {
    let mut connection = sqlx::PgConnection::connect_with(&reading(url)?)
        .await
        .map_err(db("cannot connect"))?;
    let mut tx = connection.begin().await.map_err(db("cannot begin"))?;
    let (bytes, _) = read_trail(&mut tx).await?;
    tx.commit().await.map_err(db("cannot end the read"))?;
    Ok(bytes)
}

/// Verifies the trail in the database at `url`, read-only (no migration, no head is
/// created): with the key, every mac and the head, exactly as [`super::verify_file`]
/// checks a file; without it, the structure only.
pub async fn verify_postgres(url: &str, key: Option<&ChainKey>) -> Result<Verified, StoreError> {
    let mut connection = sqlx::PgConnection::connect_with(&reading(url)?)
        .await
        .map_err(db("cannot connect"))?;
    let mut tx = connection.begin().await.map_err(db("cannot begin"))?;
    let (bytes, head) = read_trail(&mut tx).await?;
    tx.commit().await.map_err(db("cannot end the read"))?;
    let (mut verified, _) = verify_trail(&bytes, key, Trail::Database)?;
    if let Some(key) = key {
        anchor(&mut verified, &bytes, head.as_ref(), key, Trail::Database)?;
    }
    Ok(verified)
}
