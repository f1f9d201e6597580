//! What a geoproxy serves from its store: `GET|HEAD /download/<Edition>.tar.gz` (and
//! `.mmdb`), with `ETag` and `Last-Modified`, `If-None-Match` / `If-Modified-Since` answered
//! 304, and single `Range`s answered 206 (416 when unsatisfiable); an edition not held is
//! 404. Bytes served are counted. The decisions (which status, which headers, which bytes)
//! are [`answer`], a pure function of the request's headers and the file.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::Edition;

/// A file to serve and what identifies its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// Its bytes' length.
    pub len: u64,
    /// Its entity tag (quoted).
    pub etag: String,
    /// Its modification time (seconds since the epoch).
    pub modified: u64,
}

/// What to answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The byte range to send (`start..end`), when a body is sent.
    pub range: Option<std::ops::Range<u64>>,
    /// `Content-Range`, for 206 and 416.
    pub content_range: Option<String>,
}

/// The answer to a request with `headers` for `file`.
pub fn answer(headers: &HeaderMap, file: &File) -> Answer {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let not_modified = Answer {
        status: StatusCode::NOT_MODIFIED,
        range: None,
        content_range: None,
    };
    if let Some(tags) = text(header::IF_NONE_MATCH) {
        if tags
            .split(',')
            .map(str::trim)
            .any(|t| t == "*" || t.trim_start_matches("W/") == file.etag)
        {
            return not_modified;
        }
    } else if let Some(since) = text(header::IF_MODIFIED_SINCE)
        .and_then(|t| httpdate::parse_http_date(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        && file.modified <= since.as_secs()
    {
        return not_modified;
    }
    let whole = Answer {
        status: StatusCode::OK,
        range: Some(0..file.len),
        content_range: None,
    };
    let Some(range) = text(header::RANGE) else {
        return whole;
    };
    // `If-Range` with another version: the whole file.
    if text(header::IF_RANGE).is_some_and(|tag| tag != file.etag) {
        return whole;
    }
    match byte_range(range, file.len) {
        Some(Ok(r)) => Answer {
            status: StatusCode::PARTIAL_CONTENT,
            content_range: Some(format!("bytes {}-{}/{}", r.start, r.end - 1, file.len)),
            range: Some(r),
        },
        Some(Err(())) => Answer {
            status: StatusCode::RANGE_NOT_SATISFIABLE,
            range: None,
            content_range: Some(format!("bytes */{}", file.len)),
        },
        // Several ranges, or a unit other than bytes: the whole file.
        None => whole,
    }
}

/// The one byte range of `Range: bytes=…` in a file of `len` bytes: `None` when the header
/// is not one byte range, `Err` when it cannot be satisfied.
fn byte_range(header: &str, len: u64) -> Option<Result<std::ops::Range<u64>, ()>> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    let range = if first.is_empty() {
        let suffix: u64 = last.parse().ok()?;
        if suffix == 0 {
            return Some(Err(()));
        }
        len.saturating_sub(suffix)..len
    } else {
        let start: u64 = first.parse().ok()?;
        let end = if last.is_empty() {
            len
        } else {
            let last: u64 = last.parse().ok()?;
            if last < start {
                return None;
            }
            (last + 1).min(len)
        };
        start..end
    };
    if range.start >= len {
        return Some(Err(()));
    }
    Some(Ok(range))
}

/// What the server reads its files and versions from.
pub trait Files: Clone + Send + Sync + 'static {
    /// The file `name`, opened, and its version, when it is held: opened where the version
    /// is read, so a replacement in between cannot pair new bytes with an old entity tag.
    fn file(&self, name: &str) -> Option<(std::fs::File, File)>;
    /// Counts `bytes` served.
    fn served(&self, bytes: u64);
}

/// The router serving `files` under `/download/`.
pub fn router<F: Files>(files: F) -> Router {
    Router::new()
        .route("/download/{name}", axum::routing::get(download::<F>))
        .with_state(files)
}

/// The edition and the form a file name asks for.
pub fn parse_name(name: &str) -> Option<(Edition, bool)> {
    if let Some(id) = name.strip_suffix(".tar.gz") {
        return Some((id.parse().ok()?, true));
    }
    let id = name.strip_suffix(".mmdb")?;
    Some((id.parse().ok()?, false))
}

async fn download<F: Files>(
    State(files): State<F>,
    UrlPath(name): UrlPath<String>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Response {
    let Some((opened, file)) = files.file(&name) else {
        return (StatusCode::NOT_FOUND, format!("{name}: not held\n")).into_response();
    };
    let decided = answer(&headers, &file);
    let mut response = Response::builder()
        .status(decided.status)
        .header(header::ETAG, &file.etag)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(
            header::LAST_MODIFIED,
            httpdate::fmt_http_date(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(file.modified),
            ),
        );
    if let Some(range) = &decided.content_range {
        response = response.header(header::CONTENT_RANGE, range);
    }
    let Some(range) = decided.range else {
        return response.body(Body::empty()).unwrap_or_default();
    };
    let content_type = if name.ends_with(".tar.gz") {
        "application/gzip"
    } else {
        "application/octet-stream"
    };
    response = response
        .header(header::CONTENT_TYPE, HeaderValue::from_static(content_type))
        .header(header::CONTENT_LENGTH, range.end - range.start);
    if method == axum::http::Method::HEAD {
        return response.body(Body::empty()).unwrap_or_default();
    }
    match streamed(opened, range.clone()).await {
        Ok(body) => {
            files.served(range.end - range.start);
            response.body(body).unwrap_or_default()
        }
        Err(e) => {
            tracing::warn!(file = %name, error = %e, "reading a database to serve");
            (StatusCode::SERVICE_UNAVAILABLE, format!("{name}: {e}\n")).into_response()
        }
    }
}

/// The bytes `range` of `file`, streamed (a database is not held in memory per request).
async fn streamed(file: std::fs::File, range: std::ops::Range<u64>) -> std::io::Result<Body> {
    use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
    let mut file = tokio::fs::File::from_std(file);
    file.seek(std::io::SeekFrom::Start(range.start)).await?;
    let reader = file.take(range.end - range.start);
    Ok(Body::from_stream(tokio_util::io::ReaderStream::new(reader)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> File {
        File {
            len: 100,
            etag: "\"abc.tar.gz\"".into(),
            modified: 1_700_000_000,
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), HeaderValue::from_str(v).unwrap()))
            .collect()
    }

    #[test]
    fn conditional_requests_get_304_for_the_version_held() {
        let f = file();
        assert_eq!(
            answer(&headers(&[(header::IF_NONE_MATCH, "\"abc.tar.gz\"")]), &f).status,
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            answer(
                &headers(&[(header::IF_NONE_MATCH, "\"old\", W/\"abc.tar.gz\"")]),
                &f
            )
            .status,
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            answer(&headers(&[(header::IF_NONE_MATCH, "\"old\"")]), &f).status,
            StatusCode::OK
        );
        let later = httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_001),
        );
        let earlier = httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_699_999_999),
        );
        assert_eq!(
            answer(&headers(&[(header::IF_MODIFIED_SINCE, &later)]), &f).status,
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            answer(&headers(&[(header::IF_MODIFIED_SINCE, &earlier)]), &f).status,
            StatusCode::OK
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            answer(
                &headers(&[
                    (header::IF_NONE_MATCH, "\"old\""),
                    (header::IF_MODIFIED_SINCE, &later)
                ]),
                &f
            )
            .status,
            StatusCode::OK
        );
    }

    #[test]
    fn one_byte_range_is_served_partially() {
        let f = file();
        let a = answer(&headers(&[(header::RANGE, "bytes=10-19")]), &f);
        assert_eq!(
            (a.status, a.range, a.content_range.as_deref()),
            (
                StatusCode::PARTIAL_CONTENT,
                Some(10..20),
                Some("bytes 10-19/100")
            )
        );
        assert_eq!(
            answer(&headers(&[(header::RANGE, "bytes=90-")]), &f).range,
            Some(90..100)
        );
        assert_eq!(
            answer(&headers(&[(header::RANGE, "bytes=-5")]), &f).range,
            Some(95..100)
        );
        assert_eq!(
            answer(&headers(&[(header::RANGE, "bytes=95-200")]), &f).range,
            Some(95..100)
        );
        let beyond = answer(&headers(&[(header::RANGE, "bytes=100-")]), &f);
        assert_eq!(
            (beyond.status, beyond.content_range.as_deref()),
            (StatusCode::RANGE_NOT_SATISFIABLE, Some("bytes */100"))
        );
        assert_eq!(
            answer(&headers(&[(header::RANGE, "bytes=0-1,5-6")]), &f).status,
            StatusCode::OK
        );
        assert_eq!(
            answer(
                &headers(&[(header::RANGE, "bytes=0-1"), (header::IF_RANGE, "\"old\"")]),
                &f
            )
            .status,
            StatusCode::OK
        );
    }

    #[test]
    fn names_are_an_edition_and_a_form() {
        assert_eq!(
            parse_name("GeoIP2-City.tar.gz"),
            Some((Edition::City, true))
        );
        assert_eq!(
            parse_name("GeoLite2-ASN.mmdb"),
            Some((Edition::LiteAsn, false))
        );
        assert_eq!(parse_name("GeoIP2-Country.tar.gz"), None);
        assert_eq!(parse_name("../state.json"), None);
    }
}
