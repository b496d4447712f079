//! Single use across processes, on a real PostgreSQL (a throw-away cluster): two
//! verifier processes sharing one database accept each token once between them, a
//! restarted one still refuses it, a database that is down refuses tokens and spends
//! none, and expired ids are pruned while live ones are kept.
//!
//! One binary, two roles: run plainly, it starts the cluster and spawns itself with
//! `--verifier <url>` as each verifier process, which reads tokens on stdin and answers
//! each with `ok` or the refusal's code.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use countersign_verify::{
    ApprovedBy, Claims, Expected, PgSpentTokens, Presence, Signer, Spent, SpentTokens, Verifier,
};
use serde_json::json;

#[path = "../../gateway/tests/support/postgres.rs"]
mod postgres;

use postgres::Cluster;

const VERIFIER: &str = "--verifier";
const ISSUER: &str = "countersign-gateway";

/// A scenario, run against the one cluster.
type Test = fn(&Cluster);

const TESTS: [(&str, Test); 5] = [
    (
        "a_token_is_accepted_once_by_two_processes_and_after_a_restart",
        a_token_is_accepted_once_by_two_processes_and_after_a_restart,
    ),
    (
        "tokens_raced_between_two_processes_are_each_accepted_once",
        tokens_raced_between_two_processes_are_each_accepted_once,
    ),
    (
        "expired_ids_are_pruned_and_live_ones_kept",
        expired_ids_are_pruned_and_live_ones_kept,
    ),
    (
        "a_url_that_is_not_postgres_or_leads_nowhere_is_said_without_secrets",
        a_url_that_is_not_postgres_or_leads_nowhere_is_said_without_secrets,
    ),
    (
        "a_database_that_is_down_refuses_tokens_and_spends_none",
        a_database_that_is_down_refuses_tokens_and_spends_none,
    ),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(VERIFIER) {
        return verifier_process(&args[2]);
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in TESTS {
            println!("{name}: test");
        }
        return;
    }
    let pg = Cluster::start();
    for (name, test) in TESTS {
        println!("test {name} ...");
        test(&pg);
        println!("test {name} ... ok");
    }
}

fn signer() -> Signer {
    Signer::from_seed(&[7; 32])
}

fn archive() -> Expected<'static> {
    Expected::call("archive_workspace", &json!({}))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token id never used before in this run.
fn fresh_jti() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{:016x}{:016x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// A token for `archive_workspace`, issued now, with a fresh id.
fn mint() -> String {
    let iat = now();
    let claims = Claims {
        iss: ISSUER.into(),
        sub: None,
        aud: countersign_verify::DEFAULT_AUDIENCE.into(),
        iat,
        nbf: iat,
        exp: iat + 120,
        jti: fresh_jti(),
        act: countersign_verify::Actor {
            sub: countersign::Caller::Assistant,
        },
        amr: Vec::new(),
        authorization_details: vec![countersign_verify::ActionDetail {
            type_: countersign_verify::ACTION_DETAIL_TYPE.into(),
            action: "archive_workspace".into(),
            kind: countersign::Kind::Danger,
            call: 1,
            tool_call_id: "call_1".into(),
            args_sha256: countersign::audit::ArgsDigest::of_value(&json!({})).to_hex(),
            card_sha256: Some("ab".repeat(32)),
            decision: ApprovedBy::Once,
            grant: None,
            session: "s1".into(),
            role: "admin".into(),
            presence: Presence::Click,
            passkey: None,
        }],
        log_index: None,
    };
    signer().sign(&claims).unwrap()
}

/// The verifier role: a backend's verifier on the database at `url`, one token a line.
fn verifier_process(url: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = PgSpentTokens::connect(url).await.unwrap();
        let verifier = Verifier::new(ISSUER)
            .trust(signer().verifying_key())
            .spent_tokens(store);
        println!("ready");
        for token in std::io::stdin().lock().lines() {
            let verdict = match verifier.verify_now(&token.unwrap(), &archive()).await {
                Ok(_) => "ok",
                Err(refused) => refused.code(),
            };
            println!("{verdict}");
        }
    });
}

/// A verifier process, killed when dropped.
struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Process {
    fn start(pg: &Cluster) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([VERIFIER, &pg.url()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut process = Self {
            child,
            stdin,
            stdout,
        };
        assert_eq!(process.answer(), "ready");
        process
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(line.ends_with('\n'), "the verifier process ended");
        line.trim_end().to_owned()
    }

    fn verify(&mut self, token: &str) -> String {
        writeln!(self.stdin, "{token}").unwrap();
        self.answer()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn a_token_is_accepted_once_by_two_processes_and_after_a_restart(pg: &Cluster) {
    let mut a = Process::start(pg);
    let mut b = Process::start(pg);
    let token = mint();
    assert_eq!(a.verify(&token), "ok");
    assert_eq!(b.verify(&token), "replayed");
    assert_eq!(a.verify(&token), "replayed");
    // Killed and started again: the id is in the database, not in the process.
    drop(a);
    let mut a = Process::start(pg);
    assert_eq!(a.verify(&token), "replayed");
    // A new token is still taken, once.
    let other = mint();
    assert_eq!(a.verify(&other), "ok");
    assert_eq!(b.verify(&other), "replayed");
}

fn tokens_raced_between_two_processes_are_each_accepted_once(pg: &Cluster) {
    const N: usize = 300;
    let tokens: Vec<String> = (0..N).map(|_| mint()).collect();
    let mut processes = [Process::start(pg), Process::start(pg)];
    // Both get every token, in the same order, at the same time.
    let all = tokens.join("\n") + "\n";
    std::thread::scope(|scope| {
        for process in &mut processes {
            let stdin = &mut process.stdin;
            let all = &all;
            scope.spawn(move || stdin.write_all(all.as_bytes()).unwrap());
        }
    });
    let [a, b] = &mut processes;
    for i in 0..N {
        let mut verdicts = [a.answer(), b.answer()];
        verdicts.sort();
        assert_eq!(verdicts, ["ok", "replayed"], "token {i}");
    }
}

fn expired_ids_are_pruned_and_live_ones_kept(pg: &Cluster) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (old, live) = (fresh_jti(), fresh_jti());
        let now = now();
        let store = PgSpentTokens::connect(&pg.url()).await.unwrap();
        // Kept until two hours ago: past the hour an id is kept after its expiry.
        store.take(&old, now - 7200, now).await.unwrap();
        store.take(&live, now + 120, now).await.unwrap();
        assert_eq!(
            store.take(&old, now - 7200, now).await,
            Err(Spent::Replayed)
        );
        // Another instance prunes when it connects: the old id is gone, the live one kept.
        let store = PgSpentTokens::connect(&pg.url()).await.unwrap();
        assert_eq!(
            store.take(&live, now + 120, now).await,
            Err(Spent::Replayed)
        );
        assert_eq!(store.take(&old, now - 7200, now).await, Ok(()));
    });
}

fn a_url_that_is_not_postgres_or_leads_nowhere_is_said_without_secrets(_: &Cluster) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let refused = PgSpentTokens::connect("mysql://app:hunter2@127.0.0.1/app")
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("not a PostgreSQL URL"), "{refused}");
        // A port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://app:hunter2@127.0.0.1:{port}/app");
        let refused = PgSpentTokens::connect(&url).await.unwrap_err().to_string();
        assert!(
            refused.starts_with("the record of spent tokens in PostgreSQL is unavailable: "),
            "{refused}"
        );
        assert!(!refused.contains("hunter2"), "{refused}");
    });
}

fn a_database_that_is_down_refuses_tokens_and_spends_none(pg: &Cluster) {
    let mut a = Process::start(pg);
    let token = mint();
    pg.stop();
    assert_eq!(a.verify(&token), "unavailable");
    pg.start_again();
    // Nothing was spent while it was down: the token is taken now, once.
    assert_eq!(a.verify(&token), "ok");
    assert_eq!(a.verify(&token), "replayed");
}
