//! Throwaway PostgreSQL servers (the Debian `postgresql` package) for tests: a primary on a
//! free loopback port in a temporary directory, streaming replicas, promotion, TLS.
//!
//! Run as root (CI), the server runs as the `postgres` user through `runuser`; run as anyone
//! else, it runs as that user. Servers stop (immediately) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The superuser's password in every test cluster.
pub const PASSWORD: &str = "fairlead-test-password";

/// Errors from the fixture.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    /// The server binaries are missing; `scripts/setup` installs them.
    #[error(
        "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: install the Debian package `postgresql` (scripts/setup does)"
    )]
    NotInstalled,
    /// A command failed.
    #[error("{command}: {output}")]
    Command {
        /// What ran.
        command: String,
        /// What it printed.
        output: String,
    },
    /// Files could not be written.
    #[error("postgres fixture: {0}")]
    Io(#[from] std::io::Error),
}

/// TLS for a test server: certificate and key (PEM), and whether only TLS connections are
/// accepted.
#[derive(Clone, Debug)]
pub struct Tls {
    /// Server certificate, PEM.
    pub cert_pem: String,
    /// Server key, PEM.
    pub key_pem: String,
    /// Accept only TLS connections (`hostssl` in pg_hba.conf).
    pub required: bool,
}

/// A running server.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

fn bin_dir() -> Result<PathBuf, PostgresError> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| PostgresError::NotInstalled)?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop().ok_or(PostgresError::NotInstalled)
}

fn as_root() -> bool {
    std::env::var("USER").map(|u| u == "root").unwrap_or(false)
        || Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

/// Runs a server binary, as `postgres` when we are root.
fn run(
    bin: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Output, PostgresError> {
    let path = bin.join(program);
    let mut command = if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&path);
        c
    } else {
        Command::new(&path)
    };
    let output = command.args(args).envs(env.iter().copied()).output()?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(PostgresError::Command {
            command: format!("{program} {}", args.join(" ")),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        })
    }
}

fn owned_tempdir() -> Result<tempfile::TempDir, PostgresError> {
    let dir = tempfile::tempdir()?;
    if as_root() {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir.path())
            .status()?;
        if !status.success() {
            return Err(PostgresError::Command {
                command: "chown".into(),
                output: status.to_string(),
            });
        }
    }
    Ok(dir)
}

fn write_owned(path: &Path, text: &str, mode: u32) -> Result<(), PostgresError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if as_root() {
        Command::new("chown")
            .arg("postgres:postgres")
            .arg(path)
            .status()?;
    }
    Ok(())
}

impl Postgres {
    /// Starts a primary (superuser `postgres`, password [`PASSWORD`], scram authentication
    /// on 127.0.0.1, replication allowed).
    pub fn start(tls: Option<Tls>) -> Result<Self, PostgresError> {
        let bin = bin_dir()?;
        let dir = owned_tempdir()?;
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        write_owned(&pwfile, PASSWORD, 0o600)?;
        run(
            &bin,
            "initdb",
            &[
                "-D",
                data.to_str().unwrap_or_default(),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                "--pwfile",
                pwfile.to_str().unwrap_or_default(),
                "-E",
                "UTF8",
                "--no-sync",
            ],
            &[],
        )?;
        let port = super::free_port();
        let mut conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             wal_level = replica\nmax_wal_senders = 4\nfsync = off\nlogging_collector = off\n",
            data.display()
        );
        let mut hba = String::from("local all all trust\n");
        let host = match &tls {
            Some(t) => {
                write_owned(&data.join("server.crt"), &t.cert_pem, 0o600)?;
                write_owned(&data.join("server.key"), &t.key_pem, 0o600)?;
                conf.push_str(
                    "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n",
                );
                if t.required { "hostssl" } else { "host" }
            }
            None => "host",
        };
        hba.push_str(&format!("{host} all all 127.0.0.1/32 scram-sha-256\n{host} replication all 127.0.0.1/32 scram-sha-256\n"));
        let mut existing = std::fs::read_to_string(data.join("postgresql.conf"))?;
        existing.push_str(&conf);
        write_owned(&data.join("postgresql.conf"), &existing, 0o600)?;
        write_owned(&data.join("pg_hba.conf"), &hba, 0o600)?;
        let server = Self {
            bin,
            data,
            port,
            _dir: dir,
        };
        server.pg_ctl_start()?;
        Ok(server)
    }

    fn pg_ctl_start(&self) -> Result<(), PostgresError> {
        let log = self.data.join("server.log");
        run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap_or_default(),
                "-l",
                log.to_str().unwrap_or_default(),
                "-w",
                "-t",
                "30",
                "start",
            ],
            &[],
        )?;
        Ok(())
    }

    /// A streaming replica of this server, on its own port.
    pub fn replica(&self) -> Result<Self, PostgresError> {
        let dir = owned_tempdir()?;
        let data = dir.path().join("data");
        let port = self.port.to_string();
        run(
            &self.bin,
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                data.to_str().unwrap_or_default(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
            &[("PGPASSWORD", PASSWORD)],
        )?;
        let replica_port = super::free_port();
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf"))?;
        conf.push_str(&format!(
            "port = {replica_port}\nunix_socket_directories = '{}'\n",
            data.display()
        ));
        write_owned(&data.join("postgresql.conf"), &conf, 0o600)?;
        let replica = Self {
            bin: self.bin.clone(),
            data,
            port: replica_port,
            _dir: dir,
        };
        replica.pg_ctl_start()?;
        Ok(replica)
    }

    /// Promotes a replica to primary (waits until done).
    pub fn promote(&self) -> Result<(), PostgresError> {
        run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap_or_default(),
                "-w",
                "promote",
            ],
            &[],
        )?;
        Ok(())
    }

    /// Stops the server now.
    pub fn stop(&self) -> Result<(), PostgresError> {
        run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap_or_default(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            &[],
        )?;
        Ok(())
    }

    /// Runs SQL as the superuser through the local socket (fixture setup: users, grants).
    pub fn psql(&self, sql: &str) -> Result<String, PostgresError> {
        let port = self.port.to_string();
        let out = run(
            &self.bin,
            "psql",
            &[
                "-h",
                self.data.to_str().unwrap_or_default(),
                "-p",
                &port,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-At",
                "-c",
                sql,
            ],
            &[],
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
