//! The unpacked sources of a crate of the workspace's lock file, for tests that check files
//! committed from a crate (`.proto` copies, tables generated from its code) against it.
//! cargo unpacks a crate to build it, so a test that depends on the crate finds it.

use std::path::{Path, PathBuf};

/// The version of `name` in the workspace's `Cargo.lock` (the first, if several).
pub fn locked_version(name: &str) -> String {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    let text = std::fs::read_to_string(&lock)
        .unwrap_or_else(|e| panic!("reading {}: {e}", lock.display()));
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"") {
            let version = lines.next().unwrap_or_default();
            return version
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_else(|| panic!("no version line after {name} in Cargo.lock"))
                .to_owned();
        }
    }
    panic!("{name} is not in Cargo.lock");
}

/// The folder of `name`'s sources at its locked version, in cargo's registry cache.
pub fn crate_source(name: &str) -> PathBuf {
    let version = locked_version(name);
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME is set");
    let registry = home.join("registry/src");
    std::fs::read_dir(&registry)
        .unwrap_or_else(|e| panic!("{}: {e}", registry.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(format!("{name}-{version}")))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "{name} {version} is not unpacked under {}",
                registry.display()
            )
        })
}
