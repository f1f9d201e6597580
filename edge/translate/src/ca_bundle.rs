//! CA bundles named by `caCertificateRefs` (ConfigMaps with a `ca.crt` key), as a
//! BackendTLSPolicy names the CAs a backend's certificate must chain to and a Gateway's
//! frontend validation the CAs of its clients' certificates: each reference checked (its kind,
//! a ReferenceGrant when it is in another namespace, the ConfigMap, a PEM bundle the proxy can
//! read), the valid ones concatenated, the others named by field and reason.

use fairlead_edge_model::input::{Input, ObjectRef};

use crate::refs::Grants;

/// What the references resolve to.
#[derive(Debug, Default)]
pub(crate) struct Bundle {
    /// The valid bundles, concatenated (empty: none valid).
    pub pem: Vec<u8>,
    /// Each invalid reference, named by its field.
    pub problems: Vec<String>,
    /// The reason of the first invalid reference (`ResolvedRefs=False`), if any.
    pub reason: Option<&'static str>,
}

/// Who names the references: its kind, its namespace (where a reference without a namespace
/// points), and the reason a reference to another kind than ConfigMap gets.
pub(crate) struct Referrer<'a> {
    /// `Gateway` or `BackendTLSPolicy`.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: &'a str,
    /// `InvalidKind`, `InvalidCACertificateKind`.
    pub kind_reason: &'static str,
}

/// Reads the bundles of `refs` (the field `field`) as `referrer` names them.
pub(crate) fn read(
    field: &str,
    refs: &[ObjectRef],
    referrer: &Referrer<'_>,
    input: &Input,
    grants: &Grants<'_>,
) -> Bundle {
    let mut bundle = Bundle::default();
    for (i, r) in refs.iter().enumerate() {
        let field = format!("{field}[{i}]");
        let group = r.group.as_deref().unwrap_or_default();
        let kind = r.kind.as_deref().unwrap_or_default();
        let namespace = r.namespace.as_deref().unwrap_or(referrer.namespace);
        let problem = if !group.is_empty() || kind != "ConfigMap" {
            Some((
                referrer.kind_reason,
                format!("{field}: {group}/{kind} is not supported (ConfigMap is)"),
            ))
        } else if !grants.allows(
            (
                fairlead_edge_model::input::GATEWAY_GROUP,
                referrer.kind,
                referrer.namespace,
            ),
            ("", "ConfigMap", namespace, &r.name),
        ) {
            Some((
                "RefNotPermitted",
                format!(
                    "{field}: ConfigMap {namespace}/{} needs a ReferenceGrant in its namespace",
                    r.name
                ),
            ))
        } else {
            let found = input.config_maps.iter().find(|c| {
                c.metadata.namespace.as_deref() == Some(namespace)
                    && c.metadata.name.as_deref() == Some(r.name.as_str())
            });
            let invalid =
                |why: String| Some(("InvalidCACertificateRef", format!("{field}: {why}")));
            match found.map(|c| c.data.as_ref().and_then(|d| d.get("ca.crt"))) {
                None => invalid(format!("ConfigMap {namespace}/{} not found", r.name)),
                Some(None) => invalid(format!(
                    "ConfigMap {namespace}/{} has no key ca.crt",
                    r.name
                )),
                Some(Some(pem)) if !certificates(pem) => invalid(format!(
                    "ca.crt of ConfigMap {namespace}/{} is not a PEM bundle of X.509 certificates",
                    r.name
                )),
                Some(Some(pem)) => {
                    bundle.pem.extend_from_slice(pem.trim_end().as_bytes());
                    bundle.pem.push(b'\n');
                    None
                }
            }
        };
        if let Some((reason, message)) = problem {
            bundle.reason.get_or_insert(reason);
            bundle.problems.push(message);
        }
    }
    bundle
}

/// Whether `pem` holds one or more certificates, each readable as a trust anchor (what the
/// proxy will parse: a bundle it cannot read would fail the whole update).
fn certificates(pem: &str) -> bool {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut any = false;
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let Ok(cert) = cert else {
            return false;
        };
        if webpki::anchor_from_trusted_cert(&cert).is_err() {
            return false;
        }
        any = true;
    }
    any
}
