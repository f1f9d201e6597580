//! The controller's built-in CA and what it issues. The CA lives in the Secret
//! `d8-alb/alb-ca` (generated once, read back at every start, so what trusts it keeps
//! trusting it); it issues, as `kubernetes.io/tls` Secrets carrying `ca.crt` beside
//! `tls.crt`/`tls.key`:
//!
//! - the xDS server's serving certificate (`d8-alb/alb-xds-tls`) for the host proxies dial
//!   and the Service's names;
//! - each managed Gateway's proxy client certificate ([`crate::workload::client_secret`]),
//!   whose URI SAN names the Gateway ([`crate::workload::identity`]): the xDS server serves a
//!   proxy only the Gateway its certificate names;
//! - the admission webhooks' serving certificate (`d8-alb/alb-webhook-tls`).
//!
//! A certificate is issued again when it is missing, does not chain to the CA, names
//! something else, or two thirds of its lifetime have passed ([`renewal`], pure). Proxies read
//! renewed files without a restart (the Secret volume swaps them; Envoy's SDS watches them).

use std::time::{Duration, SystemTime};

use fairlead_key::ObjectKey;
use fairlead_kit::pki::{Ca, CertifiedKey, PkiError};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::instances::{CLUSTER_NAMESPACE, MANAGER};

/// The Secret of the CA (in `d8-alb`).
pub const CA_SECRET: &str = "alb-ca";

/// The Secret of the xDS server's serving certificate (in `d8-alb`).
pub const XDS_SECRET: &str = "alb-xds-tls";

/// The Secret of the webhooks' serving certificate (in `d8-alb`).
pub const WEBHOOK_SECRET: &str = "alb-webhook-tls";

/// The CA's common name.
const CA_NAME: &str = "d8-alb gateway controller CA";

/// Why a certificate could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// The API refused a read or a write.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Issuing failed, or the stored CA does not load.
    #[error(transparent)]
    Pki(#[from] PkiError),
}

/// Why a certificate is (re)issued; `None` from [`renewal`] when it is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// There is none.
    Missing,
    /// It was issued by another CA.
    ForeignCa,
    /// It names another identity.
    Identity,
    /// Two thirds of its lifetime have passed.
    Due,
}

impl Renewal {
    /// The metric label.
    fn label(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::ForeignCa => "foreign_ca",
            Self::Identity => "identity",
            Self::Due => "due",
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::ForeignCa => "issued by another CA",
            Self::Identity => "names another identity",
            Self::Due => "two thirds of its lifetime passed",
        }
    }
}

/// Whether the Secret `stored` (its `ca.crt` and `tls.crt`) must be issued again by the CA
/// `ca_pem` for `identity` (a URI SAN, when it must carry one), at `now`.
pub fn renewal(
    stored: Option<&Secret>,
    ca_pem: &str,
    identity: Option<&str>,
    now: SystemTime,
) -> Option<Renewal> {
    let data = |key: &str| {
        stored
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    };
    let (Some(ca), Some(cert), Some(_)) = (data("ca.crt"), data("tls.crt"), data("tls.key")) else {
        return Some(Renewal::Missing);
    };
    if ca.trim() != ca_pem.trim() || !fairlead_kit::pki::issued_by(ca_pem, &cert) {
        return Some(Renewal::ForeignCa);
    }
    if let Some(identity) = identity {
        use rustls_pki_types::pem::PemObject as _;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes());
        let sans = der
            .map(|d| fairlead_kit::pki::uri_sans(&d))
            .unwrap_or_default();
        if sans != [identity] {
            return Some(Renewal::Identity);
        }
    }
    fairlead_kit::pki::renewal_due(&cert, now).then_some(Renewal::Due)
}

/// The CA of the Secret `d8-alb/alb-ca`, if the controller has made it.
pub async fn stored_authority(client: &kube::Client) -> Result<Option<Ca>, CertificateError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), CLUSTER_NAMESPACE);
    let Some(secret) = api.get_opt(CA_SECRET).await? else {
        return Ok(None);
    };
    let data = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default()
    };
    Ok(Some(Ca::restore(
        CA_NAME,
        &data("tls.crt"),
        &data("tls.key"),
    )?))
}

/// The CA of the Secret `d8-alb/alb-ca`, made (and stored) when there is none.
pub async fn authority(client: &kube::Client) -> Result<Ca, CertificateError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), CLUSTER_NAMESPACE);
    loop {
        if let Some(ca) = stored_authority(client).await? {
            return Ok(ca);
        }
        let ca = Ca::generate(CA_NAME)?;
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": CA_SECRET, "namespace": CLUSTER_NAMESPACE,
                "labels": {"app.kubernetes.io/managed-by": MANAGER}},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": encode(ca.cert_pem()), "tls.key": encode(ca.key_pem())},
        }))
        .map_err(kube::Error::SerdeError)?;
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::info!(secret = %format!("{CLUSTER_NAMESPACE}/{CA_SECRET}"), "generated the gateway controller's CA");
                return Ok(ca);
            }
            // Another replica made it first: read theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
}

fn encode(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A certificate the controller keeps: where it is stored and what it is.
pub struct Leaf<'a> {
    /// The Secret.
    pub secret: ObjectKey,
    /// Its owners (a proxy certificate goes with its Gateway's instances).
    pub owners: &'a [Value],
    /// Its labels.
    pub labels: Value,
    /// The URI SAN it must carry, if any.
    pub identity: Option<&'a str>,
}

/// When the certificate of `pem` is due for renewal (two thirds of its lifetime).
fn due_at(pem: &str) -> Option<SystemTime> {
    let (from, until) = fairlead_kit::pki::validity_of(pem).ok()?;
    Some(from + until.duration_since(from).unwrap_or_default() * 2 / 3)
}

/// Keeps `leaf` issued by `ca` (with `issue` when [`renewal`] says so); when it is due next.
pub async fn keep(
    client: &kube::Client,
    ca: &Ca,
    leaf: &Leaf<'_>,
    metrics: &crate::metrics::ControllerMetrics,
    issue: impl FnOnce(&Ca) -> Result<CertifiedKey, PkiError>,
) -> Result<Option<SystemTime>, CertificateError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), leaf.secret.namespace());
    let stored = api.get_opt(leaf.secret.name()).await?;
    let name = leaf.secret.to_string();
    let expires = |pem: &str| {
        if let Ok((_, until)) = fairlead_kit::pki::validity_of(pem) {
            let at = until
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            metrics
                .expiry
                .with_label_values(&[name.as_str()])
                .set(i64::try_from(at).unwrap_or(i64::MAX));
        }
    };
    let Some(why) = renewal(
        stored.as_ref(),
        ca.cert_pem(),
        leaf.identity,
        SystemTime::now(),
    ) else {
        let pem = stored
            .as_ref()
            .and_then(|s| data(s, "tls.crt"))
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        if let Some(pem) = &pem {
            expires(pem);
        }
        return Ok(pem.as_deref().and_then(due_at));
    };
    let issued = issue(ca)?;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": leaf.secret.name(), "namespace": leaf.secret.namespace(),
            "labels": leaf.labels, "ownerReferences": leaf.owners},
        "type": "kubernetes.io/tls",
        "data": {"ca.crt": encode(ca.cert_pem()), "tls.crt": encode(&issued.cert_pem),
            "tls.key": encode(&issued.key_pem)},
    });
    api.patch(
        leaf.secret.name(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&secret),
    )
    .await?;
    tracing::info!(secret = %leaf.secret, reason = why.as_str(), "issued a certificate");
    metrics
        .issued
        .with_label_values(&[name.as_str(), why.label()])
        .inc();
    expires(&issued.cert_pem);
    Ok(due_at(&issued.cert_pem))
}

/// The data of a stored certificate Secret as bytes, for tests and readers.
pub fn data(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|ByteString(b)| b.clone())
}

/// How long what the controller issues is valid (the controller's `--certificate-lifetime`).
pub const DEFAULT_LIFETIME: Duration = fairlead_kit::pki::LEAF_VALIDITY;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn secret(ca: &str, cert: &CertifiedKey) -> Secret {
        Secret {
            data: Some(BTreeMap::from([
                ("ca.crt".to_owned(), ByteString(ca.as_bytes().to_vec())),
                (
                    "tls.crt".to_owned(),
                    ByteString(cert.cert_pem.as_bytes().to_vec()),
                ),
                (
                    "tls.key".to_owned(),
                    ByteString(cert.key_pem.as_bytes().to_vec()),
                ),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn certificates_are_reissued_when_missing_foreign_misnamed_or_due() {
        let ca = Ca::generate("ca").unwrap();
        let id = "spiffe://cluster.local/ns/d8-alb/gateway/main";
        let lifetime = Duration::from_secs(600);
        let cert = ca.issue_client_uri(id, lifetime).unwrap();
        let now = SystemTime::now();
        let stored = secret(ca.cert_pem(), &cert);
        assert_eq!(renewal(Some(&stored), ca.cert_pem(), Some(id), now), None);
        assert_eq!(
            renewal(None, ca.cert_pem(), Some(id), now),
            Some(Renewal::Missing)
        );
        let other = Ca::generate("ca").unwrap();
        assert_eq!(
            renewal(Some(&stored), other.cert_pem(), Some(id), now),
            Some(Renewal::ForeignCa)
        );
        assert_eq!(
            renewal(
                Some(&stored),
                ca.cert_pem(),
                Some("spiffe://cluster.local/ns/d8-alb/gateway/other"),
                now
            ),
            Some(Renewal::Identity)
        );
        assert_eq!(
            renewal(
                Some(&stored),
                ca.cert_pem(),
                Some(id),
                now + lifetime * 2 / 3
            ),
            Some(Renewal::Due)
        );
    }
}
