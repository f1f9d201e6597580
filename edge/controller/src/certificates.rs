//! The controller's built-in CA and what it issues. The CA lives in the Secret
//! `d8-alb/alb-ca` (generated once, read back at every start, so what trusts it keeps
//! trusting it); it issues, as `kubernetes.io/tls` Secrets carrying `ca.crt` beside
//! `tls.crt`/`tls.key`:
//!
//! - the xDS server's serving certificate (`d8-alb/alb-xds-tls`) for the host proxies dial
//!   and the Service's names;
//! - each managed Gateway's proxy client certificate ([`crate::workload::client_secret`]),
//!   whose URI SAN names the Gateway ([`crate::workload::identity`]): the xDS server serves a
//!   proxy only the Gateway its certificate names.
//!
//! A certificate is issued again when it is missing, does not chain to the CA, names another
//! identity (its URI SAN, or a serving certificate's DNS names and addresses), or two thirds
//! of its lifetime have passed ([`renewal`], pure). A Secret whose owners or labels changed
//! (a second instance naming the Gateway) is written again with the same certificate.
//! Proxies read renewed files without a restart (the Secret volume swaps them; Envoy's SDS
//! watches them).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use fairlead_key::ObjectKey;
use fairlead_kit::pki::{Ca, CertifiedKey, PkiError};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::instances::{CLUSTER_NAMESPACE, MANAGER};

/// The Secret of the CA (in `d8-alb`).
pub const CA_SECRET: &str = "alb-ca";

/// The Secret of the xDS server's serving certificate (in `d8-alb`).
pub const XDS_SECRET: &str = "alb-xds-tls";

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

/// What a certificate must name.
#[derive(Clone, Copy, Debug)]
pub enum Names<'a> {
    /// This URI SAN alone (a proxy's identity).
    Identity(&'a str),
    /// These DNS names and addresses (a serving certificate), in this order.
    Hosts(&'a [String]),
}

/// The text of `key` in `secret`.
fn text(secret: &Secret, key: &str) -> Option<String> {
    data(secret, key).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Whether the Secret `stored` (its `ca.crt` and `tls.crt`) must be issued again by the CA
/// `ca_pem` to name `names`, at `now`.
pub fn renewal(
    stored: Option<&Secret>,
    ca_pem: &str,
    names: Names<'_>,
    now: SystemTime,
) -> Option<Renewal> {
    let text = |key: &str| stored.and_then(|s| text(s, key));
    let (Some(ca), Some(cert), Some(_)) = (text("ca.crt"), text("tls.crt"), text("tls.key")) else {
        return Some(Renewal::Missing);
    };
    if ca.trim() != ca_pem.trim() || !fairlead_kit::pki::issued_by(ca_pem, &cert) {
        return Some(Renewal::ForeignCa);
    }
    use rustls_pki_types::pem::PemObject as _;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).ok();
    let named = match names {
        Names::Identity(identity) => {
            der.map(|d| fairlead_kit::pki::uri_sans(&d))
                .unwrap_or_default()
                == [identity]
        }
        Names::Hosts(hosts) => {
            der.map(|d| fairlead_kit::pki::dns_sans(&d))
                .unwrap_or_default()
                == hosts
        }
    };
    if !named {
        return Some(Renewal::Identity);
    }
    fairlead_kit::pki::renewal_due(&cert, now).then_some(Renewal::Due)
}

/// The CA of the Secret `d8-alb/alb-ca`, if the controller has made it.
pub async fn stored_authority(client: &kube::Client) -> Result<Option<Ca>, CertificateError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), CLUSTER_NAMESPACE);
    let Some(secret) = api.get_opt(CA_SECRET).await? else {
        return Ok(None);
    };
    let text = |key: &str| text(&secret, key).unwrap_or_default();
    Ok(Some(Ca::restore(
        CA_NAME,
        &text("tls.crt"),
        &text("tls.key"),
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
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(CA_SECRET.to_owned()),
                namespace: Some(CLUSTER_NAMESPACE.to_owned()),
                labels: Some(managed_by()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(BTreeMap::from([
                (
                    "tls.crt".to_owned(),
                    ByteString(ca.cert_pem().as_bytes().to_vec()),
                ),
                (
                    "tls.key".to_owned(),
                    ByteString(ca.key_pem().as_bytes().to_vec()),
                ),
            ])),
            ..Secret::default()
        };
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

/// The labels of what the controller makes: `app.kubernetes.io/managed-by`.
pub fn managed_by() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_owned(),
        MANAGER.to_owned(),
    )])
}

/// A certificate the controller keeps: where it is stored and what it is.
pub struct Leaf<'a> {
    /// The Secret.
    pub secret: ObjectKey,
    /// Its owners (a proxy certificate goes with its Gateway's instances).
    pub owners: &'a [OwnerReference],
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// What it must name.
    pub names: Names<'a>,
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
            metrics.expires(&name, i64::try_from(at).unwrap_or(i64::MAX));
        }
    };
    let secret = |cert: &str, key: &str| Secret {
        metadata: ObjectMeta {
            name: Some(leaf.secret.name().to_owned()),
            namespace: Some(leaf.secret.namespace().to_owned()),
            labels: Some(leaf.labels.clone()),
            owner_references: Some(leaf.owners.to_vec()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            (
                "ca.crt".to_owned(),
                ByteString(ca.cert_pem().as_bytes().to_vec()),
            ),
            ("tls.crt".to_owned(), ByteString(cert.as_bytes().to_vec())),
            ("tls.key".to_owned(), ByteString(key.as_bytes().to_vec())),
        ])),
        ..Secret::default()
    };
    let apply = |object: Secret| {
        let api = api.clone();
        async move {
            api.patch(
                leaf.secret.name(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
        }
    };
    let Some(why) = renewal(
        stored.as_ref(),
        ca.cert_pem(),
        leaf.names,
        SystemTime::now(),
    ) else {
        // Kept: written again only when its owners or labels changed.
        let stored = stored.as_ref().expect("a kept certificate is stored");
        let (Some(cert), Some(key)) = (text(stored, "tls.crt"), text(stored, "tls.key")) else {
            return Ok(None);
        };
        let owners_changed = stored
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default()
            != leaf.owners;
        let stored_labels = stored.metadata.labels.as_ref();
        let labels_changed = leaf
            .labels
            .iter()
            .any(|(k, v)| stored_labels.and_then(|l| l.get(k)) != Some(v));
        if owners_changed || labels_changed {
            apply(secret(&cert, &key)).await?;
        }
        expires(&cert);
        return Ok(fairlead_kit::pki::renewal_at(&cert));
    };
    let issued = issue(ca)?;
    apply(secret(&issued.cert_pem, &issued.key_pem)).await?;
    tracing::info!(secret = %leaf.secret, reason = why.as_str(), "issued a certificate");
    metrics
        .issued
        .with_label_values(&[name.as_str(), why.label()])
        .inc();
    expires(&issued.cert_pem);
    Ok(fairlead_kit::pki::renewal_at(&issued.cert_pem))
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
        assert_eq!(
            renewal(Some(&stored), ca.cert_pem(), Names::Identity(id), now),
            None
        );
        assert_eq!(
            renewal(None, ca.cert_pem(), Names::Identity(id), now),
            Some(Renewal::Missing)
        );
        let other = Ca::generate("ca").unwrap();
        assert_eq!(
            renewal(Some(&stored), other.cert_pem(), Names::Identity(id), now),
            Some(Renewal::ForeignCa)
        );
        assert_eq!(
            renewal(
                Some(&stored),
                ca.cert_pem(),
                Names::Identity("spiffe://cluster.local/ns/d8-alb/gateway/other"),
                now
            ),
            Some(Renewal::Identity)
        );
        assert_eq!(
            renewal(
                Some(&stored),
                ca.cert_pem(),
                Names::Identity(id),
                now + lifetime * 2 / 3
            ),
            Some(Renewal::Due)
        );
    }
}
