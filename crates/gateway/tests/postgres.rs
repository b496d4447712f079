//! The PostgreSQL trail, against a real PostgreSQL (a throw-away cluster per test): three
//! gateway replicas on one database, 10,000 records spread across them at once, one
//! replica SIGKILLed mid-append and the database stopped mid-run; then the trail holds
//! every acknowledged record once and verifies. And `verify --audit-url` finds what the
//! file's `verify` finds: a changed row, a cut tail, a wrong key.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use countersign_gateway::{verify_postgres, ChainKey, ChainedLine, PgStore, StoreError};

mod common;
#[path = "support/postgres.rs"]
mod postgres;

use postgres::Cluster;

const BIN: &str = env!("CARGO_BIN_EXE_countersign-gateway");
const KEY: &str = "5c0a1e7f3b2d4c6e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e";
const SIGNING: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

fn key() -> ChainKey {
    ChainKey::from_hex(KEY).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The shared key files an operator makes once and gives every replica.
fn shared_keys(dir: &std::path::Path) {
    std::fs::write(dir.join("audit.key"), KEY).unwrap();
    std::fs::write(dir.join("signing.key"), SIGNING).unwrap();
}

fn serve(dir: &std::path::Path, port: u16, url: &str, n: usize) -> Command {
    let mut c = Command::new(BIN);
    c.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--rate-per-minute", "0", "--audit-url", url])
        .arg("--audit-key-file")
        .arg(dir.join("audit.key"))
        .arg("--signing-key-file")
        .arg(dir.join("signing.key"))
        .arg("--passkey-file")
        .arg(dir.join(format!("passkeys-{n}.json")))
        .env("COUNTERSIGN_TOKEN", "tok")
        .env("RUST_LOG", "error")
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .env_remove("COUNTERSIGN_AUDIT_FILE");
    c
}

struct Replica {
    child: Child,
    base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_replicas(dir: &std::path::Path, url: &str, n: usize) -> Vec<Replica> {
    let client = reqwest::Client::new();
    let mut replicas = Vec::new();
    for i in 0..n {
        let port = free_port();
        let child = serve(dir, port, url, i)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        replicas.push(Replica {
            child,
            base: format!("http://127.0.0.1:{port}"),
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for replica in &replicas {
        loop {
            let up = client
                .get(format!("{}/v1/health", replica.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                break;
            }
            assert!(Instant::now() < deadline, "a replica did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    replicas
}

/// What the load saw.
#[derive(Default)]
struct Seen {
    acknowledged: HashSet<String>,
    /// The 503s: when, and their bodies.
    unavailable: Vec<(Instant, String)>,
    /// Replicas a request could not reach.
    unreachable: HashSet<usize>,
}

const BATCHES: usize = 1000;
const SIZE: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_keep_one_trail_through_a_kill_and_an_outage() {
    let pg = Arc::new(Cluster::start());
    let dir = tempfile::tempdir().unwrap();
    shared_keys(dir.path());
    let mut replicas = start_replicas(dir.path(), &pg.url(), 3).await;
    let bases: Arc<Vec<String>> = Arc::new(replicas.iter().map(|r| r.base.clone()).collect());
    let dead: Arc<[AtomicBool; 3]> = Arc::new(Default::default());
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    let mut workers = Vec::new();
    for _ in 0..12 {
        let (client, bases, dead, next, done, seen) = (
            client.clone(),
            Arc::clone(&bases),
            Arc::clone(&dead),
            Arc::clone(&next),
            Arc::clone(&done),
            Arc::clone(&seen),
        );
        workers.push(tokio::spawn(async move {
            loop {
                let b = next.fetch_add(1, Ordering::SeqCst);
                if b >= BATCHES {
                    return;
                }
                let records = common::records(SIZE, "rep", b * SIZE);
                assert_eq!(records.len(), SIZE);
                let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    assert!(attempt < 300, "batch {b} was never acknowledged");
                    let r = (b + attempt) % 3;
                    if dead[r].load(Ordering::SeqCst) {
                        continue;
                    }
                    let sent = client
                        .post(format!("{}/v1/audit", bases[r]))
                        .bearer_auth("tok")
                        .json(&records)
                        .send()
                        .await;
                    match sent {
                        Ok(response) if response.status() == 200 => {
                            let body: serde_json::Value = response.json().await.unwrap();
                            let stored = body["appended"].as_u64().unwrap()
                                + body["duplicates"].as_u64().unwrap();
                            assert_eq!(stored, SIZE as u64, "{body}");
                            seen.lock().unwrap().acknowledged.extend(ids);
                            done.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        Ok(response) => {
                            let status = response.status();
                            let body = response.text().await.unwrap();
                            assert_eq!(status, 503, "only 503 while the database is away: {body}");
                            seen.lock()
                                .unwrap()
                                .unavailable
                                .push((Instant::now(), body));
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(_) => {
                            seen.lock().unwrap().unreachable.insert(r);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            }
        }));
    }

    let wait_for = |n: usize| {
        let done = Arc::clone(&done);
        async move {
            let deadline = Instant::now() + Duration::from_secs(120);
            while done.load(Ordering::SeqCst) < n {
                assert!(
                    Instant::now() < deadline,
                    "the load stalled before {n} batches"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    // One replica SIGKILLed while batches are in flight to it.
    wait_for(250).await;
    replicas[1].child.kill().unwrap();
    replicas[1].child.wait().unwrap();
    dead[1].store(true, Ordering::SeqCst);
    // The database goes away mid-run, and comes back.
    wait_for(500).await;
    let db = Arc::clone(&pg);
    let away_from = Instant::now();
    tokio::task::spawn_blocking(move || db.stop())
        .await
        .unwrap();
    let stopped_at = done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let while_away = done.load(Ordering::SeqCst) - stopped_at;
    let db = Arc::clone(&pg);
    tokio::task::spawn_blocking(move || db.start_again())
        .await
        .unwrap();
    let back_at = Instant::now();
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(180), worker)
            .await
            .expect("the load did not finish")
            .unwrap();
    }

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "{} records acknowledged by 3 replicas (one killed), {} 503s in a {:?} outage, {while_away} batches acknowledged while away",
        seen.acknowledged.len(),
        seen.unavailable.len(),
        back_at - away_from
    );
    assert_eq!(seen.acknowledged.len(), BATCHES * SIZE);
    assert!(
        while_away <= 12,
        "{while_away} batches were acknowledged with the database away (at most the ones in flight)"
    );
    assert!(
        !seen.unavailable.is_empty(),
        "the outage gave no 503: it was not seen"
    );
    // Only the outage gives 503s: replicas writing at once never collide (the head's
    // lock serialises them), and the pool is back within moments of the database.
    for (at, body) in &seen.unavailable {
        assert!(
            *at >= away_from && *at <= back_at + Duration::from_secs(3),
            "a 503 outside the outage: {body}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "audit_unavailable", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nothing was acknowledged"),
            "{body}"
        );
    }
    assert_eq!(
        seen.unreachable.iter().copied().collect::<Vec<_>>(),
        [1],
        "only the killed replica is unreachable"
    );

    // The trail, as a live replica exports it: every acknowledged record, each once.
    let trail = common::exported(&client, &bases[2]).await;
    let lines: Vec<ChainedLine> = trail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: HashSet<String> = lines.iter().map(|l| l.record.id.to_string()).collect();
    assert_eq!(ids.len(), lines.len(), "a record appears twice");
    assert_eq!(lines.len(), BATCHES * SIZE);
    assert!(seen.acknowledged.iter().all(|id| ids.contains(id.as_str())));

    // And the chain verifies, through the command an operator runs.
    let verify = Command::new(BIN)
        .args(["verify", "--audit-url", &pg.url(), "--key-file"])
        .arg(dir.path().join("audit.key"))
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        said.starts_with(&format!("ok: {} records", BATCHES * SIZE)),
        "{said}"
    );
}

async fn sql(url: &str, statement: &str) {
    use sqlx::Connection as _;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query(statement).execute(&mut c).await.unwrap();
}

#[tokio::test]
async fn verify_finds_a_changed_row_a_cut_tail_and_a_wrong_key() {
    let pg = Cluster::start();
    let url = pg.url();
    // Another sqlx application already migrates this database: the trail keeps its
    // tables and its migrations' bookkeeping in its own schema, and neither disturbs
    // the other.
    sql(
        &url,
        "CREATE TABLE public._sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, checksum BYTEA NOT NULL, \
         execution_time BIGINT NOT NULL)",
    )
    .await;
    sql(
        &url,
        "INSERT INTO public._sqlx_migrations VALUES (1, 'theirs', now(), TRUE, '\\x00', 1)",
    )
    .await;
    let store = PgStore::connect(&url, key()).await.unwrap();
    let first = store.append(common::records(5, "v", 0)).await.unwrap();
    assert_eq!(
        (first.appended, first.duplicates, first.last_seq),
        (5, 0, 5)
    );
    // Idempotent by id: the same five again and two new ones, and a repeat inside the batch.
    let mut again = common::records(7, "v", 0);
    again.push(again[6].clone());
    let second = store.append(again).await.unwrap();
    assert_eq!(
        (second.appended, second.duplicates, second.last_seq),
        (2, 6, 7)
    );
    assert_eq!(store.count().await.unwrap(), 7);

    let ok = verify_postgres(&url, Some(&key())).await.unwrap();
    assert_eq!((ok.lines, ok.keyed), (7, true));
    // The same id with other contents is a conflict, never a silent duplicate.
    let mut changed = common::records(1, "v", 4);
    changed[0].summary.push_str(" (changed)");
    assert!(matches!(
        store.append(changed).await,
        Err(StoreError::Conflict(id)) if id == "v-4"
    ));
    let mut inside = common::records(2, "w", 0);
    inside.push(inside[1].clone());
    inside[2].summary.push_str(" (changed)");
    assert!(matches!(
        store.append(inside).await,
        Err(StoreError::Conflict(id)) if id == "w-1"
    ));
    assert_eq!(
        store.count().await.unwrap(),
        7,
        "nothing of the batch was written"
    );
    // The record_id column is outside the mac: a row whose column was changed (to
    // swallow a later record as a "duplicate") is caught by verify and by the append.
    sql(
        &url,
        "UPDATE countersign.countersign_audit SET record_id = 'v-99' WHERE seq = 2",
    )
    .await;
    let got = verify_postgres(&url, Some(&key())).await;
    assert!(
        matches!(got, Err(StoreError::Broken { line: 2, .. })),
        "{got:?}"
    );
    assert!(matches!(
        store.append(common::records(1, "v", 99)).await,
        Err(StoreError::Broken { .. })
    ));
    sql(
        &url,
        "UPDATE countersign.countersign_audit SET record_id = 'v-1' WHERE seq = 2",
    )
    .await;
    assert_eq!(verify_postgres(&url, Some(&key())).await.unwrap().lines, 7);
    // The last row rewritten with its mac field kept: a replica refuses to start on it.
    sql(&url, "UPDATE countersign.countersign_audit SET line = replace(line, '\"v-6\"', '\"v-y\"') WHERE seq = 7").await;
    assert!(matches!(
        PgStore::connect(&url, key()).await,
        Err(StoreError::Unanchored { .. })
    ));
    sql(&url, "UPDATE countersign.countersign_audit SET line = replace(line, '\"v-y\"', '\"v-6\"') WHERE seq = 7").await;
    PgStore::connect(&url, key()).await.unwrap();
    let structure = verify_postgres(&url, None).await.unwrap();
    assert_eq!((structure.lines, structure.keyed), (7, false));
    let other = ChainKey::new([9; 32]);
    assert!(matches!(
        verify_postgres(&url, Some(&other)).await,
        Err(StoreError::Broken { line: 1, .. })
    ));
    // A replica with another key is refused before it writes anything.
    assert!(matches!(
        PgStore::connect(&url, other).await,
        Err(StoreError::Unanchored { .. })
    ));

    // A row changed in place: its mac no longer matches.
    sql(
        &url,
        "UPDATE countersign.countersign_audit SET line = replace(line, '\"args_digest\":\"', '\"args_digest\":\"X') WHERE seq = 3",
    )
    .await;
    match verify_postgres(&url, Some(&key())).await {
        Err(StoreError::Broken {
            line: 3, reason, ..
        }) => assert!(reason.contains("mac"), "{reason}"),
        other => panic!("a changed row passed: {other:?}"),
    }
    sql(
        &url,
        "UPDATE countersign.countersign_audit SET line = replace(line, '\"args_digest\":\"X', '\"args_digest\":\"') WHERE seq = 3",
    )
    .await;
    assert_eq!(verify_postgres(&url, Some(&key())).await.unwrap().lines, 7);

    // The tail cut off: the head names a row that is gone. Without the key only the
    // structure is checked, and a cut tail cannot be seen, exactly as with a file.
    sql(
        &url,
        "DELETE FROM countersign.countersign_audit WHERE seq = 7",
    )
    .await;
    assert!(matches!(
        verify_postgres(&url, Some(&key())).await,
        Err(StoreError::Unanchored { .. })
    ));
    assert_eq!(verify_postgres(&url, None).await.unwrap().lines, 6);
    // A replica starting on the cut trail refuses to extend it, and so does a running one
    // whose next line would not follow the head.
    assert!(matches!(
        PgStore::connect(&url, key()).await,
        Err(StoreError::Unanchored { .. })
    ));
    // The head forged to the cut end, without the key: refused too.
    sql(
        &url,
        "UPDATE countersign.countersign_audit_head SET seq = 6, pending = 6",
    )
    .await;
    assert!(matches!(
        store.append(common::records(1, "late", 0)).await,
        Err(StoreError::Unanchored { .. })
    ));
    assert!(matches!(
        verify_postgres(&url, Some(&key())).await,
        Err(StoreError::Unanchored { .. })
    ));
}

#[tokio::test]
async fn a_bad_database_is_refused_at_start_and_its_password_never_said() {
    let dir = tempfile::tempdir().unwrap();
    shared_keys(dir.path());
    let port = free_port();
    let said = |url: &str| {
        let out = serve(dir.path(), free_port(), url, 0).output().unwrap();
        assert!(!out.status.success(), "the gateway started on {url}");
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
    };
    let unreachable = said(&format!(
        "postgres://someone:hunter2secret@127.0.0.1:{port}/trail"
    ));
    assert!(unreachable.contains("cannot connect"), "{unreachable}");
    assert!(!unreachable.contains("hunter2secret"), "{unreachable}");
    let garbage = said("postgres://someone:hunter2secret@127.0.0.1:notaport/trail");
    assert!(garbage.contains("not a PostgreSQL URL"), "{garbage}");
    assert!(!garbage.contains("hunter2secret"), "{garbage}");
    let not_postgres = said("mysql://someone:hunter2secret@127.0.0.1/trail");
    assert!(
        not_postgres.contains("not a PostgreSQL URL"),
        "{not_postgres}"
    );
    // Replicas share the keys: with a database, a missing key is not made up.
    std::fs::remove_file(dir.path().join("audit.key")).unwrap();
    let no_key = said(&format!("postgres://someone@127.0.0.1:{port}/trail"));
    assert!(no_key.contains("share it"), "{no_key}");
    assert!(!dir.path().join("audit.key").exists());
}

/// A countersigned call's record goes to the database as to a file: its arguments keyed,
/// never the plain SHA-256 its token binds, in no row of either table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_countersigned_call_leaves_only_a_keyed_digest_in_the_database() {
    use sqlx::Connection as _;
    let pg = Cluster::start();
    let url = pg.url();
    let store = PgStore::connect(&url, key()).await.unwrap();
    let state = countersign_gateway::AppState::new(common::config(None), store).unwrap();
    let base = common::serve(state).await;
    let args = serde_json::json!({"name": "all private notes of every user"});
    let plain = countersign::audit::ArgsDigest::of_value(&args).to_hex();
    let answer = common::countersign(&reqwest::Client::new(), &base, &args).await;
    let token = answer["countersignature"].as_str().unwrap();
    assert_eq!(
        common::claims_of(token)["authorization_details"][0]["args_sha256"],
        plain.as_str()
    );
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT row_to_json(a)::text FROM countersign.countersign_audit a \
         UNION ALL SELECT row_to_json(h)::text FROM countersign.countersign_audit_head h",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "one record and the head");
    for (row,) in &rows {
        assert!(!row.contains(&plain), "{row}");
    }
    let keyed = key().countersigned_digest(&plain);
    assert!(rows[0].0.contains(&keyed), "{}", rows[0].0);
    assert_eq!(verify_postgres(&url, Some(&key())).await.unwrap().lines, 1);
}

/// A replica the database refuses says which trail refused it: the audit database, not
/// a file. So does `verify --audit-url`.
#[tokio::test]
async fn a_replica_refused_by_its_database_names_the_database() {
    let pg = Cluster::start();
    let url = pg.url();
    // The trail was begun under another key than the replicas are given.
    let other = PgStore::connect(&url, ChainKey::new([9; 32]))
        .await
        .unwrap();
    other.append(common::records(2, "o", 0)).await.unwrap();
    drop(other);
    let dir = tempfile::tempdir().unwrap();
    shared_keys(dir.path());
    let out = serve(dir.path(), free_port(), &url, 0).output().unwrap();
    assert!(
        !out.status.success(),
        "a replica started on a foreign trail"
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("audit database does not match its head"),
        "{said}"
    );
    assert!(!said.contains("file"), "{said}");
    let verify = Command::new(BIN)
        .args(["verify", "--audit-url", &url, "--key-file"])
        .arg(dir.path().join("audit.key"))
        .env_remove("COUNTERSIGN_AUDIT_KEY")
        .env_remove("COUNTERSIGN_AUDIT_FILE")
        .output()
        .unwrap();
    assert!(!verify.status.success());
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(said.contains("audit database is broken at row 1"), "{said}");
    assert!(!said.contains("file"), "{said}");
}
