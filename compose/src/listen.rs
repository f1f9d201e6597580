//! Where `fairlead up` listens, and how a second one on the machine keeps out of the first's
//! way. An address given (its flag or its environment variable) is used as given; a default
//! one that another process holds gives way to a free port on the same IP, so a second `up`
//! neither collides nor dies half-started. What was chosen is logged and written beside the
//! kubeconfig (`endpoints.json`), whose directory one `up` holds at a time.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// An address of `up`: the one given, else its default.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    /// From the command line or the environment.
    pub given: Option<SocketAddr>,
    /// The documented default.
    pub default: SocketAddr,
}

/// The address to listen on: the one given as it is (a failure to bind it is then the
/// component's error, naming it); else the default when it can be bound now, else a free
/// port on the default's IP.
pub fn choose(wanted: Wanted) -> std::io::Result<SocketAddr> {
    if let Some(addr) = wanted.given {
        return Ok(addr);
    }
    match TcpListener::bind(wanted.default) {
        Ok(_) => Ok(wanted.default),
        Err(e) if e.kind() == ErrorKind::AddrInUse => {
            TcpListener::bind(SocketAddr::new(wanted.default.ip(), 0))?.local_addr()
        }
        Err(e) => Err(e),
    }
}

/// What a running `up` serves, written to `endpoints.json` beside its kubeconfig.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    /// The `up` process.
    pub pid: u32,
    /// The API server's URL.
    pub api: String,
    /// The kubeconfig reaching it.
    pub kubeconfig: PathBuf,
    /// The admin server (`/metrics`, `/healthz`, `/readyz`).
    pub admin: String,
    /// The xDS server (`host:port`).
    pub xds: String,
    /// The relationship graph's viewer, when the gateway controller runs here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<String>,
    /// The ingress-nginx converter, when the gateway controller runs here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress2gateway: Option<String>,
    /// The local runner's loopback block `127.B.0.0/16`, when it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loopback_block: Option<u8>,
}

impl Endpoints {
    /// Writes them to `endpoints.json` in `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join("endpoints.json");
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

/// The directory of `up`'s kubeconfig, held by this process while it runs.
#[derive(Debug)]
pub struct Held {
    _lock: std::fs::File,
}

/// Holds `dir` (made when missing) for this process, or says which `up` holds it.
pub fn hold(dir: &Path) -> anyhow::Result<Held> {
    std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    let path = dir.join("up.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Held { _lock: file }),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another `fairlead up` runs with its kubeconfig in {} (its addresses: {}); start this \
             one from another directory, or give it --kubeconfig elsewhere",
            dir.display(),
            dir.join("endpoints.json").display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_default_gives_way_and_a_given_address_does_not() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = holder.local_addr().unwrap();
        let moved = choose(Wanted {
            given: None,
            default: taken,
        })
        .unwrap();
        assert_eq!(moved.ip(), taken.ip());
        assert_ne!(moved.port(), taken.port());
        let given = choose(Wanted {
            given: Some(taken),
            default: taken,
        })
        .unwrap();
        assert_eq!(given, taken, "what is given is used as given");
        drop(holder);
        let free = choose(Wanted {
            given: None,
            default: taken,
        })
        .unwrap();
        assert_eq!(free, taken, "a free default is kept");
    }

    #[test]
    fn one_up_holds_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let first = hold(dir.path()).unwrap();
        let second = hold(dir.path()).unwrap_err().to_string();
        assert!(second.contains("another `fairlead up`"), "{second}");
        drop(first);
        hold(dir.path()).unwrap();
    }
}
