//! A throw-away PostgreSQL cluster for tests and benchmarks: Debian's server binaries,
//! `initdb` into a temporary folder, `pg_ctl` on a free loopback port, owned by an
//! unprivileged user (`postgres` when run as root, since the server refuses root), and
//! removed afterwards. `cargo xtask setup` installs the `postgresql` package.
#![allow(unreachable_pub, dead_code, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster in a temporary folder; stopped and removed on drop.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has `initdb`.
fn server_bin() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "the PostgreSQL server (initdb, pg_ctl) is not installed: run `cargo xtask setup` (Debian package postgresql)"
        )
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

impl Cluster {
    /// Creates and starts a cluster; its superuser is `countersign`, trusted on loopback.
    pub fn start() -> Self {
        let bin = server_bin();
        let dir = tempfile::Builder::new()
            .prefix("countersign-pg")
            .tempdir()
            .unwrap_or_else(|e| panic!("no temporary folder: {e}"));
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "cannot give the cluster's folder to the postgres user"
            );
        }
        let cluster = Self {
            dir,
            bin,
            port: free_port(),
            as_postgres,
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data().display().to_string(),
                "-U",
                "countersign",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale",
                "C",
            ],
        );
        cluster.start_again();
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://countersign@127.0.0.1:{}/postgres", self.port)
    }

    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let output = command
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            output.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the server (again, after [`Cluster::stop`]) and waits until it accepts.
    pub fn start_again(&self) {
        let socket_dir = self.dir.path().display().to_string();
        let settings = format!(
            "-p {} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=100",
            self.port
        );
        let log = log_path(self.dir.path());
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-o",
                &settings,
                "-l",
                &log.display().to_string(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    /// Stops the server now (`-m fast`: open transactions are rolled back, connections
    /// closed), as a database going away would.
    pub fn stop(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("server.log")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let path = self.bin.join("pg_ctl");
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let _ = command
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
    }
}
