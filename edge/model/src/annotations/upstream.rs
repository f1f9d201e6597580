//! How a route's backends are reached: `session-affinity` (a cookie pins a client to an
//! endpoint), `hash-key: source-ip` (consistent hashing by client address),
//! `service-upstream` (the Service's cluster IP instead of its endpoints) and
//! `backend-tls-settings` (TLS to the backends).

use serde::{Deserialize, Serialize};

use super::access::SecretRef;
use super::{AnnotationError, values};

/// How requests stick to endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Affinity {
    /// `session-affinity` in cookie mode: the proxy sets the cookie when a request has none.
    Cookie {
        /// The cookie's name.
        name: String,
        /// Its path.
        path: String,
        /// Its lifetime in seconds (0: a session cookie).
        ttl_seconds: u32,
    },
    /// `hash-key: source-ip`.
    SourceIp,
}

/// The cookie ingress-nginx names when its annotations name none.
pub const DEFAULT_AFFINITY_COOKIE: &str = "INGRESSCOOKIE";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SessionAffinity {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    cookie_name: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    ttl: Option<u32>,
}

/// `backend-tls-settings`: TLS to the backends. Certificates are PEM, written inline or taken
/// from `secret` (`ca.crt`, `tls.crt`, `tls.key`, as Istio's `credentialName` reads them).
/// Its `Debug` leaves the private key out.
#[derive(Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsSettings {
    /// `MUTUAL` (a client certificate is presented) rather than `SIMPLE`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mutual: bool,
    /// The backend's certificate is not checked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
    /// Trust anchors, PEM (the system's when absent and no `secret` has `ca.crt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_certificates: Option<String>,
    /// Client certificate, PEM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
    /// Its key, PEM.
    #[serde(skip_serializing)]
    pub private_key: Option<String>,
    /// The SNI (and name checked), the backend Service's hostname when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// A Secret with the certificates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretRef>,
}

impl std::fmt::Debug for BackendTlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendTlsSettings")
            .field("mutual", &self.mutual)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .field("ca_certificates", &self.ca_certificates.is_some())
            .field("client_certificate", &self.client_certificate.is_some())
            .field("private_key", &self.private_key.is_some())
            .field("sni", &self.sni)
            .field("secret", &self.secret)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TlsSettings {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    insecure_skip_verify: bool,
    #[serde(default)]
    ca_certificates: Option<String>,
    #[serde(default)]
    client_certificate: Option<String>,
    #[serde(default)]
    private_key: Option<String>,
    #[serde(default)]
    sni: Option<String>,
    #[serde(default)]
    secret: Option<String>,
}

/// How backends are reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Upstream {
    /// `session-affinity` or `hash-key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// `service-upstream: "true"`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub service_upstream: bool,
    /// `backend-tls-settings` (`None` also for `mode: DISABLE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<BackendTlsSettings>,
}

/// A PEM text given, or `None` for an absent or empty one.
fn given(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

impl Upstream {
    /// Whether nothing is asked.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    pub(super) fn read<'a>(
        get: &impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Self, AnnotationError> {
        let cookie = get("session-affinity")
            .map(|text| {
                let a: SessionAffinity = values::json("session-affinity", text)?;
                if a.mode.as_deref().is_some_and(|m| m != "cookie") {
                    return Err(AnnotationError::new(
                        "session-affinity",
                        format!(
                            "mode {:?}: only cookie is supported",
                            a.mode.unwrap_or_default()
                        ),
                    ));
                }
                let name = a
                    .cookie_name
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| DEFAULT_AFFINITY_COOKIE.to_owned());
                if !values::is_header_name(&name) {
                    return Err(AnnotationError::new(
                        "session-affinity",
                        format!("cookieName {name:?} is not a cookie name"),
                    ));
                }
                let path = a
                    .path
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "/".into());
                if !path.starts_with('/') {
                    return Err(AnnotationError::new(
                        "session-affinity",
                        format!("path {path:?} must start with /"),
                    ));
                }
                Ok(Affinity::Cookie {
                    name,
                    path,
                    ttl_seconds: a.ttl.unwrap_or(0),
                })
            })
            .transpose()?;
        let source_ip = match get("hash-key").map(str::trim) {
            None => None,
            Some("source-ip") => Some(Affinity::SourceIp),
            Some(other) => {
                return Err(AnnotationError::new(
                    "hash-key",
                    format!("{other:?}: only source-ip is supported"),
                ));
            }
        };
        if cookie.is_some() && source_ip.is_some() {
            return Err(AnnotationError::new(
                "hash-key",
                "cannot be combined with alb.network.deckhouse.io/session-affinity",
            ));
        }
        let service_upstream = match get("service-upstream").map(str::trim) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(AnnotationError::new(
                    "service-upstream",
                    format!("{other:?}: must be \"true\" or \"false\""),
                ));
            }
        };
        let tls = get("backend-tls-settings").map(tls).transpose()?.flatten();
        Ok(Self {
            affinity: cookie.or(source_ip),
            service_upstream,
            tls,
        })
    }
}

fn tls(text: &str) -> Result<Option<BackendTlsSettings>, AnnotationError> {
    const NAME: &str = "backend-tls-settings";
    let t: TlsSettings = values::json(NAME, text)?;
    let mutual = match t.mode.as_deref().unwrap_or("SIMPLE") {
        "SIMPLE" => false,
        "MUTUAL" => true,
        "DISABLE" => return Ok(None),
        other => {
            return Err(AnnotationError::new(
                NAME,
                format!("mode {other:?}: must be SIMPLE, MUTUAL or DISABLE"),
            ));
        }
    };
    let secret = t
        .secret
        .filter(|s| !s.is_empty())
        .map(|s| {
            values::reference(NAME, "secret ", &s).map(|(namespace, name)| SecretRef {
                namespace: namespace.map(str::to_owned),
                name: name.to_owned(),
            })
        })
        .transpose()?;
    let settings = BackendTlsSettings {
        mutual,
        insecure_skip_verify: t.insecure_skip_verify,
        ca_certificates: given(t.ca_certificates),
        client_certificate: given(t.client_certificate),
        private_key: given(t.private_key),
        sni: given(t.sni),
        secret,
    };
    if let Some(sni) = settings.sni.as_deref().filter(|s| !values::is_host_name(s)) {
        return Err(AnnotationError::new(
            NAME,
            format!(
                "sni {:?}: must be a DNS host name (labels of letters, digits and hyphens, at most 253 bytes)",
                sni.chars().take(64).collect::<String>()
            ),
        ));
    }
    if settings.client_certificate.is_some() != settings.private_key.is_some() {
        return Err(AnnotationError::new(
            NAME,
            "clientCertificate and privateKey go together",
        ));
    }
    if mutual && settings.client_certificate.is_none() && settings.secret.is_none() {
        return Err(AnnotationError::new(
            NAME,
            "mode MUTUAL needs clientCertificate and privateKey, or a secret",
        ));
    }
    for (field, pem) in [
        ("caCertificates", &settings.ca_certificates),
        ("clientCertificate", &settings.client_certificate),
        ("privateKey", &settings.private_key),
    ] {
        if pem.as_deref().is_some_and(|p| !p.contains("-----BEGIN ")) {
            return Err(AnnotationError::new(
                NAME,
                format!("{field}: not PEM (certificates are written inline)"),
            ));
        }
    }
    Ok(Some(settings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(pairs: &[(&str, &str)]) -> Result<Upstream, AnnotationError> {
        let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        Upstream::read(&|name: &str| map.get(name).copied())
    }

    #[test]
    fn affinity_by_cookie_or_address() {
        let u = read(&[(
            "session-affinity",
            r#"{"mode": "cookie", "path": "/path", "cookieName": "mycookie", "ttl": 60}"#,
        )])
        .unwrap();
        assert_eq!(
            u.affinity,
            Some(Affinity::Cookie {
                name: "mycookie".into(),
                path: "/path".into(),
                ttl_seconds: 60
            })
        );
        let defaults = read(&[("session-affinity", "{}")]).unwrap();
        assert!(
            matches!(defaults.affinity, Some(Affinity::Cookie { ref name, .. }) if name == DEFAULT_AFFINITY_COOKIE)
        );
        let e = read(&[("session-affinity", r#"{"cookie": "x"}"#)]).unwrap_err();
        assert!(e.message.contains("unknown field `cookie`"), "{e}");
        assert_eq!(
            read(&[("hash-key", "source-ip")]).unwrap().affinity,
            Some(Affinity::SourceIp)
        );
        assert_eq!(
            read(&[("hash-key", "$request_uri")])
                .unwrap_err()
                .annotation,
            "hash-key"
        );
        assert!(read(&[("hash-key", "source-ip"), ("session-affinity", "{}")]).is_err());
    }

    #[test]
    fn service_upstream_and_tls() {
        assert!(
            read(&[("service-upstream", "true")])
                .unwrap()
                .service_upstream
        );
        assert!(read(&[("service-upstream", "yes")]).is_err());
        let dex = read(&[(
            "backend-tls-settings",
            r#"{"mode": "SIMPLE", "insecureSkipVerify": true}"#,
        )])
        .unwrap();
        assert!(dex.tls.unwrap().insecure_skip_verify);
        let template = read(&[(
            "backend-tls-settings",
            r#"{"mode": "SIMPLE", "insecureSkipVerify": false, "clientCertificate": "", "privateKey": "", "caCertificates": "", "sni": "example.com", "secret": "team/backend-ca"}"#,
        )])
        .unwrap()
        .tls
        .unwrap();
        assert_eq!(template.sni.as_deref(), Some("example.com"));
        // Found by fuzzing (fuzz/regressions/translate): an SNI Envoy refuses (over 255
        // bytes) was rendered; a server name is a DNS host name, or the annotation is refused.
        let long = format!("{}.example.com", "a".repeat(300));
        for sni in [
            long.as_str(),
            "bad host",
            "-x.example.com",
            "a..b",
            "1.2.3.4:443",
        ] {
            let err = read(&[(
                "backend-tls-settings",
                &format!(r#"{{"mode": "SIMPLE", "sni": "{sni}"}}"#),
            )])
            .unwrap_err();
            assert!(err.to_string().contains("sni"), "{sni}: {err}");
        }
        assert_eq!(template.secret.unwrap().namespace_or("apps"), "team");
        assert_eq!(
            read(&[("backend-tls-settings", r#"{"mode": "DISABLE"}"#)])
                .unwrap()
                .tls,
            None
        );
        for bad in [
            r#"{"mode": "ISTIO_MUTUAL"}"#,
            r#"{"mode": "MUTUAL"}"#,
            r#"{"caCertificates": "/etc/ca.pem"}"#,
            r#"{"clientCertificate": "-----BEGIN CERTIFICATE-----"}"#,
        ] {
            assert_eq!(
                read(&[("backend-tls-settings", bad)])
                    .unwrap_err()
                    .annotation,
                "backend-tls-settings",
                "{bad}"
            );
        }
    }

    #[test]
    fn a_private_key_is_never_shown() {
        let u = read(&[(
            "backend-tls-settings",
            r#"{"mode": "MUTUAL", "clientCertificate": "-----BEGIN CERTIFICATE-----x", "privateKey": "-----BEGIN PRIVATE KEY-----k3yb1t5"}"#,
        )])
        .unwrap();
        let shown = format!("{u:?}");
        assert!(
            !shown.contains("PRIVATE KEY") && !shown.contains("k3yb1t5"),
            "{shown}"
        );
    }
}
