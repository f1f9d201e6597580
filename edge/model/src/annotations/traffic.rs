//! What a request and its answer may be: `limit-rps` (requests per second),
//! `buffer-max-request-bytes` (request bodies buffered up to a size, larger ones refused),
//! `proxy-buffer-size` (the largest response headers taken from a backend), `idle-timeout`
//! (seconds without activity), `rewrite-target` (the path rewritten from the groups of a
//! `RegularExpression` path match) and `response-headers-to-add`.

use serde::Serialize;

use super::AnnotationError;
use super::values::{self, is_header_name};
use crate::input::Header;

/// Limits and changes of requests and answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Traffic {
    /// `limit-rps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_rps: Option<u32>,
    /// `buffer-max-request-bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_max_request_bytes: Option<u32>,
    /// `proxy-buffer-size`, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_buffer_size: Option<u32>,
    /// `idle-timeout`, in seconds (0: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<u32>,
    /// `rewrite-target`, as written (`\1` … `\9` stand for the match's groups).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite_target: Option<String>,
    /// `response-headers-to-add`, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub response_headers: Vec<Header>,
}

impl Traffic {
    /// Whether nothing is asked.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    pub(super) fn read<'a>(
        get: &impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Self, AnnotationError> {
        let limit_rps = get("limit-rps")
            .map(|t| values::positive("limit-rps", t))
            .transpose()?;
        let buffer_max_request_bytes = get("buffer-max-request-bytes")
            .map(|t| values::positive("buffer-max-request-bytes", t))
            .transpose()?;
        let proxy_buffer_size = get("proxy-buffer-size")
            .map(|t| values::size("proxy-buffer-size", t))
            .transpose()?;
        let idle_timeout_seconds = get("idle-timeout")
            .map(|t| {
                t.trim().parse::<u32>().map_err(|_| {
                    AnnotationError::new(
                        "idle-timeout",
                        format!("{t:?} is not a whole number of seconds"),
                    )
                })
            })
            .transpose()?;
        let rewrite_target = get("rewrite-target").map(rewrite_target).transpose()?;
        let response_headers = match get("response-headers-to-add") {
            None => Vec::new(),
            Some(text) => {
                let map: std::collections::BTreeMap<String, String> =
                    values::json("response-headers-to-add", text)?;
                if let Some(bad) = map.keys().find(|k| !is_header_name(k)) {
                    return Err(AnnotationError::new(
                        "response-headers-to-add",
                        format!("{bad:?} is not a header name"),
                    ));
                }
                map.into_iter()
                    .map(|(name, value)| Header { name, value })
                    .collect()
            }
        };
        Ok(Self {
            limit_rps,
            buffer_max_request_bytes,
            proxy_buffer_size,
            idle_timeout_seconds,
            rewrite_target,
            response_headers,
        })
    }
}

/// The highest group `\N` a rewrite target refers to (0 when none).
pub fn highest_group(target: &str) -> u32 {
    let bytes = target.as_bytes();
    bytes
        .windows(2)
        .filter(|w| w[0] == b'\\' && w[1].is_ascii_digit())
        .map(|w| u32::from(w[1] - b'0'))
        .max()
        .unwrap_or(0)
}

fn rewrite_target(text: &str) -> Result<String, AnnotationError> {
    if !text.starts_with('/') {
        return Err(AnnotationError::new(
            "rewrite-target",
            format!("{text:?} must start with /"),
        ));
    }
    if text.contains("\\0") {
        return Err(AnnotationError::new(
            "rewrite-target",
            format!("{text:?}: groups are \\1 to \\9"),
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(pairs: &[(&str, &str)]) -> Result<Traffic, AnnotationError> {
        let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        Traffic::read(&|name: &str| map.get(name).copied())
    }

    #[test]
    fn numbers_sizes_and_seconds() {
        let t = read(&[
            ("limit-rps", "50"),
            ("buffer-max-request-bytes", "1048576"),
            ("proxy-buffer-size", "16k"),
            ("idle-timeout", "30"),
        ])
        .unwrap();
        assert_eq!(t.limit_rps, Some(50));
        assert_eq!(t.buffer_max_request_bytes, Some(1 << 20));
        assert_eq!(t.proxy_buffer_size, Some(16 * 1024));
        assert_eq!(t.idle_timeout_seconds, Some(30));
        for (name, bad) in [
            ("limit-rps", "0"),
            ("limit-rps", "fast"),
            ("buffer-max-request-bytes", "1m"),
            ("proxy-buffer-size", "big"),
            ("idle-timeout", "30s"),
        ] {
            assert_eq!(read(&[(name, bad)]).unwrap_err().annotation, name, "{bad}");
        }
    }

    #[test]
    fn rewrites_and_headers() {
        let t = read(&[
            ("rewrite-target", "/my-path/\\2/\\1"),
            (
                "response-headers-to-add",
                r#"{"Strict-Transport-Security": "max-age=31536000; includeSubDomains"}"#,
            ),
        ])
        .unwrap();
        assert_eq!(highest_group(t.rewrite_target.as_deref().unwrap()), 2);
        assert_eq!(t.response_headers[0].name, "Strict-Transport-Security");
        assert!(read(&[("rewrite-target", "my-path")]).is_err());
        let e = read(&[("response-headers-to-add", r#"{"bad name": "x"}"#)]).unwrap_err();
        assert!(e.message.contains("bad name"), "{e}");
        let e = read(&[("response-headers-to-add", r#"["a"]"#)]).unwrap_err();
        assert!(e.message.starts_with("not the documented JSON"), "{e}");
    }
}
