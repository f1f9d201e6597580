//! Where databases come from, and asking for one: MaxMind's current API (Basic auth
//! `accountID:licenseKey`; a metadata call announces the database's MD5, so an unchanged one
//! is not downloaded; the download follows redirects), MaxMind's legacy URL when there is no
//! account ID (`license_key=…&edition_id=…&suffix=tar.gz`; an unchanged download is
//! recognised by its MD5 after the fact), or a mirror (`<url>/<Edition>.tar.gz`, asked with
//! `If-None-Match` so a geoproxy answers 304). Network errors, 5xx, 408 and 429 are retried
//! with a doubling backoff; other answers (401: a wrong licence) are errors at once. The
//! licence key is never shown: errors name URLs without their query.

use std::time::Duration;

use crate::Edition;
use crate::archive::MAX_DATABASE_BYTES;
use crate::http::{Http, HttpError, shown};
use crate::store::Held;

/// MaxMind's update host.
pub const MAXMIND_HOST: &str = "https://updates.maxmind.com";

/// MaxMind's legacy download host.
pub const LEGACY_HOST: &str = "https://download.maxmind.com";

/// A source of databases.
#[derive(Clone)]
pub enum Source {
    /// MaxMind's current API.
    MaxMind {
        /// Its base URL ([`MAXMIND_HOST`]).
        host: String,
        /// The account ID.
        account_id: String,
        /// The licence key.
        license_key: String,
    },
    /// MaxMind's legacy download URL (a licence key without an account ID).
    Legacy {
        /// Its base URL ([`LEGACY_HOST`]).
        host: String,
        /// The licence key.
        license_key: String,
    },
    /// A mirror serving `<url>/<Edition>.tar.gz` (a geoproxy's `/download`).
    Mirror {
        /// Its base URL.
        url: String,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::MaxMind {
                host, account_id, ..
            } => f
                .debug_struct("MaxMind")
                .field("host", host)
                .field("account_id", account_id)
                .finish_non_exhaustive(),
            Source::Legacy { host, .. } => f
                .debug_struct("Legacy")
                .field("host", host)
                .finish_non_exhaustive(),
            Source::Mirror { url } => f.debug_struct("Mirror").field("url", url).finish(),
        }
    }
}

/// What asking gave.
#[derive(Debug)]
pub enum Fetched {
    /// What is held is current.
    Unchanged,
    /// A download (not checked yet).
    New {
        /// The tarball.
        tarball: Vec<u8>,
        /// Its `Last-Modified` (seconds since the epoch), when the source said.
        modified: Option<u64>,
    },
}

/// Why asking failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The exchange failed.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The source answered with an error status.
    #[error("GET {url}: {status}")]
    Status {
        /// The URL, without its query.
        url: String,
        /// The status.
        status: http::StatusCode,
    },
    /// MaxMind's metadata did not name the edition.
    #[error("MaxMind's metadata for {edition}: {message}")]
    Metadata {
        /// The edition.
        edition: Edition,
        /// What was wrong.
        message: String,
    },
}

impl FetchError {
    /// Whether trying again may help (network errors, 5xx, 408, 429).
    pub fn transient(&self) -> bool {
        match self {
            FetchError::Http(HttpError::Transport { .. }) => true,
            FetchError::Status { status, .. } => {
                status.is_server_error()
                    || *status == http::StatusCode::REQUEST_TIMEOUT
                    || *status == http::StatusCode::TOO_MANY_REQUESTS
            }
            _ => false,
        }
    }
}

/// How asking is retried.
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// Attempts in all.
    pub attempts: u32,
    /// The first wait (doubled after each failure).
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 6,
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

fn basic(user: &str, password: &str) -> http::HeaderValue {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut value = http::HeaderValue::from_str(&format!("Basic {token}"))
        .expect("base64 is a valid header value");
    value.set_sensitive(true);
    value
}

/// `text` with every byte but the unreserved ones percent-encoded (RFC 3986).
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn modified_of(headers: &http::HeaderMap) -> Option<u64> {
    let text = headers.get(http::header::LAST_MODIFIED)?.to_str().ok()?;
    let time = httpdate::parse_http_date(text).ok()?;
    Some(time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

/// The ETag a geoproxy gives a tarball of MD5 `md5`.
pub fn tarball_etag(md5: &str) -> String {
    format!("\"{md5}.tar.gz\"")
}

impl Source {
    /// Asks for `edition`, `held` being what is held of it, retrying transient failures per
    /// `retry`.
    pub async fn fetch(
        &self,
        http: &Http,
        edition: Edition,
        held: Option<&Held>,
        retry: Retry,
    ) -> Result<Fetched, FetchError> {
        let mut wait = retry.first;
        let mut attempt = 1;
        loop {
            match self.fetch_once(http, edition, held).await {
                Err(e) if e.transient() && attempt < retry.attempts => {
                    tracing::warn!(%edition, attempt, error = %e, retry_in = ?wait, "GeoIP download failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(retry.max);
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    async fn fetch_once(
        &self,
        http: &Http,
        edition: Edition,
        held: Option<&Held>,
    ) -> Result<Fetched, FetchError> {
        let limit = usize::try_from(MAX_DATABASE_BYTES).unwrap_or(usize::MAX);
        let mut headers = http::HeaderMap::new();
        let url = match self {
            Source::MaxMind {
                host,
                account_id,
                license_key,
            } => {
                headers.insert(
                    http::header::AUTHORIZATION,
                    basic(account_id.trim(), license_key.trim()),
                );
                let host = host.trim_end_matches('/');
                let url = format!("{host}/geoip/updates/metadata?edition_id={}", edition.id());
                let answer = ok(http.get(&url, &headers, 1 << 20).await?, &url)?;
                let metadata: serde_json::Value =
                    serde_json::from_slice(&answer.body).map_err(|e| FetchError::Metadata {
                        edition,
                        message: e.to_string(),
                    })?;
                let entry = metadata["databases"]
                    .as_array()
                    .and_then(|d| d.iter().find(|d| d["edition_id"] == edition.id()))
                    .ok_or_else(|| FetchError::Metadata {
                        edition,
                        message: "the edition is not listed".into(),
                    })?;
                if held.is_some_and(|held| entry["md5"] == held.md5.as_str()) {
                    return Ok(Fetched::Unchanged);
                }
                let date = entry["date"].as_str().unwrap_or_default().replace('-', "");
                format!(
                    "{host}/geoip/databases/{}/download?date={date}&suffix=tar.gz",
                    edition.id()
                )
            }
            Source::Legacy { host, license_key } => format!(
                "{}/app/geoip_download?license_key={}&edition_id={}&suffix=tar.gz",
                host.trim_end_matches('/'),
                percent_encoded(license_key.trim()),
                edition.id()
            ),
            Source::Mirror { url } => {
                if let Some(held) = held.filter(|h| !h.tarball_md5.is_empty()) {
                    headers.insert(
                        http::header::IF_NONE_MATCH,
                        http::HeaderValue::from_str(&tarball_etag(&held.tarball_md5))
                            .expect("an MD5 is a valid header value"),
                    );
                }
                format!("{}/{}", url.trim_end_matches('/'), edition.tarball())
            }
        };
        let answer = http.get(&url, &headers, limit).await?;
        if answer.status == http::StatusCode::NOT_MODIFIED && held.is_some() {
            return Ok(Fetched::Unchanged);
        }
        let answer = ok(answer, &url)?;
        Ok(Fetched::New {
            modified: modified_of(&answer.headers),
            tarball: answer.body,
        })
    }
}

fn ok(answer: crate::http::Response, url: &str) -> Result<crate::http::Response, FetchError> {
    if answer.status.is_success() {
        Ok(answer)
    } else {
        Err(FetchError::Status {
            url: url
                .parse()
                .map_or_else(|_| "<an invalid URL>".to_owned(), |u| shown(&u)),
            status: answer.status,
        })
    }
}
