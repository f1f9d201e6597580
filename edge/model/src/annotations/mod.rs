//! The `alb.network.deckhouse.io/*` annotations of an HTTPRoute, as Deckhouse's ALB documents
//! them: read from the route's `metadata.annotations` (only HTTPRoutes carry them) into typed
//! values, each malformed value an [`AnnotationError`] naming the annotation. Syntax only:
//! what a value refers to (a Secret, a ReferenceGrant, the route's path matches) is the
//! translate stage's to decide. The admission webhook and the translator share this reading,
//! so what the webhook refuses is what the route's status reports.
//!
//! One module per family: [`access`] (who may pass: allowlist, basic auth, external auth,
//! `satisfy`), [`traffic`] (what a request and its answer may be: rate, buffers, timeouts,
//! rewrites, headers), [`upstream`] (how backends are reached: affinity, hashing, the Service
//! address, TLS), [`waf`] (the web application firewall), [`values`] (the shared value
//! syntaxes).

pub mod access;
pub mod traffic;
pub mod upstream;
pub mod values;
pub mod waf;

use std::collections::BTreeMap;

use serde::Serialize;

pub use access::{Access, BasicAuth, ExternalAuth, Satisfy, SecretRef};
pub use traffic::Traffic;
pub use upstream::{Affinity, BackendTlsSettings, Upstream};
pub use waf::Waf;

/// The prefix of every ALB annotation.
pub const PREFIX: &str = "alb.network.deckhouse.io/";

/// The documented annotations, by their name after [`PREFIX`].
pub const NAMES: &[&str] = &[
    "tls-disable-protocol",
    "whitelist-source-range",
    "response-headers-to-add",
    "session-affinity",
    "hash-key",
    "service-upstream",
    "basic-auth-secret",
    "satisfy",
    "auth-url",
    "auth-signin",
    "auth-response-headers",
    "mod-security",
    "rewrite-target",
    "buffer-max-request-bytes",
    "limit-rps",
    "backend-tls-settings",
    "idle-timeout",
    "proxy-buffer-size",
];

/// A malformed annotation value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("metadata.annotations[{PREFIX}{annotation}]: {message}")]
pub struct AnnotationError {
    /// The annotation, after [`PREFIX`].
    pub annotation: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

impl AnnotationError {
    /// An error of `annotation`.
    pub fn new(annotation: &'static str, message: impl Into<String>) -> Self {
        Self {
            annotation,
            message: message.into(),
        }
    }
}

/// What a route's annotations ask, typed. Empty (the default) when it carries none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who may pass.
    #[serde(skip_serializing_if = "Access::is_empty")]
    pub access: Access,
    /// Limits and changes of requests and answers.
    #[serde(skip_serializing_if = "Traffic::is_empty")]
    pub traffic: Traffic,
    /// How backends are reached.
    #[serde(skip_serializing_if = "Upstream::is_empty")]
    pub upstream: Upstream,
    /// `tls-disable-protocol: http2`: the HTTPS chains of the route's hostnames offer no `h2`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_http2: bool,
    /// `mod-security`: the WAF the route asks for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waf: Option<Waf>,
}

impl Annotations {
    /// Whether the route asks nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Reads the ALB annotations among `annotations`; the first malformed one is the error.
    pub fn read(annotations: &BTreeMap<String, String>) -> Result<Self, AnnotationError> {
        let get = |name: &str| {
            annotations
                .get(&format!("{PREFIX}{name}"))
                .map(String::as_str)
        };
        let disable_http2 = match get("tls-disable-protocol") {
            None => false,
            Some(v) if v.trim().eq_ignore_ascii_case("http2") => true,
            Some(v) => {
                return Err(AnnotationError::new(
                    "tls-disable-protocol",
                    format!("{v:?}: only http2 can be disabled"),
                ));
            }
        };
        Ok(Self {
            access: Access::read(&get)?,
            traffic: Traffic::read(&get)?,
            upstream: Upstream::read(&get)?,
            disable_http2,
            waf: get(waf::ANNOTATION).map(Waf::read).transpose()?,
        })
    }

    /// The annotations under [`PREFIX`] that are not documented ones (a webhook warns of
    /// them: a typo does nothing).
    pub fn unknown(annotations: &BTreeMap<String, String>) -> Vec<String> {
        annotations
            .keys()
            .filter_map(|k| k.strip_prefix(PREFIX))
            .filter(|name| !NAMES.contains(name))
            .map(|name| format!("{PREFIX}{name}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<Annotations, AnnotationError> {
        Annotations::read(
            &pairs
                .iter()
                .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn no_annotation_asks_nothing_and_others_are_ignored() {
        let mut plain = BTreeMap::new();
        plain.insert("example.com/owner".to_owned(), "team".to_owned());
        assert!(Annotations::read(&plain).unwrap().is_empty());
        plain.insert(format!("{PREFIX}limit-rsp"), "5".to_owned());
        assert_eq!(
            Annotations::unknown(&plain),
            [format!("{PREFIX}limit-rsp")],
            "a typo is named"
        );
    }

    #[test]
    fn errors_name_the_annotation() {
        let e = read(&[("tls-disable-protocol", "tls1.0")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "metadata.annotations[alb.network.deckhouse.io/tls-disable-protocol]: \"tls1.0\": only http2 can be disabled"
        );
        assert!(
            read(&[("tls-disable-protocol", "HTTP2")])
                .unwrap()
                .disable_http2
        );
        let waf = read(&[("mod-security", "{\"mode\": \"on\"}")]).unwrap();
        assert_eq!(waf.waf.map(|w| w.mode), Some(waf::Mode::On));
        assert!(read(&[("mod-security", "on")]).is_err());
    }
}
