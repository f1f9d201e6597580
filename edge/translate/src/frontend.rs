//! A Gateway's frontend TLS (GEP-91): which client certificates its listeners that terminate
//! TLS ask for. A port's own settings (`spec.tls.frontend.perPort`) or else the default
//! name the CAs a client's certificate must chain to (ConfigMaps with `ca.crt`; one in another
//! namespace only with a ReferenceGrant there). `AllowValidOnly` (the default) refuses a
//! client without a valid certificate; `AllowInsecureFallback` serves it too, and the Gateway
//! says so in its `InsecureFrontendValidationMode` condition. When no CA reference of a port
//! resolves, its listeners are not served (`ResolvedRefs=False` for the first reference's
//! reason, `Accepted=False`/`NoValidCACertificate`): never served without the check asked for.

use std::sync::Arc;

use fairlead_edge_model::input::{FrontendValidation, Gateway, Input};

use crate::ca_bundle::{self, Referrer};
use crate::refs::Grants;

/// The Gateway condition saying some port serves clients without a valid certificate.
pub const INSECURE_CONDITION: &str = "InsecureFrontendValidationMode";

/// How a listener checks its clients' certificates.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientValidation {
    /// The CA bundle a client certificate must chain to, PEM.
    #[serde(serialize_with = "crate::backend_tls::text")]
    pub ca: Vec<u8>,
    /// Clients without a valid certificate are served too (`AllowInsecureFallback`).
    pub insecure_fallback: bool,
}

/// Why a port's listeners are not served: the `ResolvedRefs` reason and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// `InvalidCACertificateRef`, `InvalidCACertificateKind` or `RefNotPermitted`.
    pub reason: &'static str,
    /// The references that do not resolve, by field.
    pub message: String,
}

/// What `port`'s listeners that terminate TLS ask of clients, with the field it comes from.
fn settings(gateway: &Gateway, port: u16) -> Option<(String, &FrontendValidation)> {
    let frontend = gateway.spec.tls.as_ref()?.frontend.as_ref()?;
    match frontend
        .per_port
        .iter()
        .enumerate()
        .find(|(_, p)| i32::from(port) == p.port)
    {
        Some((i, own)) => own
            .tls
            .validation
            .as_ref()
            .map(|v| (format!("spec.tls.frontend.perPort[{i}].tls.validation"), v)),
        None => frontend
            .default
            .validation
            .as_ref()
            .map(|v| ("spec.tls.frontend.default.validation".to_owned(), v)),
    }
}

/// Whether `validation` serves clients without a valid certificate.
fn insecure(validation: &FrontendValidation) -> bool {
    validation.mode.as_deref() == Some("AllowInsecureFallback")
}

/// The client validation of `port` on `gateway`: `None` when clients are not asked for a
/// certificate; refused when none of its CA references resolves.
pub fn of(
    gateway: &Gateway,
    port: u16,
    input: &Input,
    grants: &Grants<'_>,
) -> Result<Option<Arc<ClientValidation>>, Refused> {
    let Some((field, validation)) = settings(gateway, port) else {
        return Ok(None);
    };
    let namespace = gateway.metadata.namespace.as_deref().unwrap_or_default();
    let referrer = Referrer {
        kind: "Gateway",
        namespace,
        kind_reason: "InvalidCACertificateKind",
    };
    let field = format!("{field}.caCertificateRefs");
    let bundle = ca_bundle::read(
        &field,
        &validation.ca_certificate_refs,
        &referrer,
        input,
        grants,
    );
    if bundle.pem.is_empty() {
        return Err(Refused {
            reason: bundle.reason.unwrap_or("InvalidCACertificateRef"),
            message: if bundle.problems.is_empty() {
                format!("{field}: no CA certificate is named")
            } else {
                bundle.problems.join("; ")
            },
        });
    }
    Ok(Some(Arc::new(ClientValidation {
        ca: bundle.pem,
        insecure_fallback: insecure(validation),
    })))
}

/// Whether some port of `gateway` with a listener that terminates TLS (`tls_ports`) serves
/// clients without a valid certificate.
pub fn insecure_on(gateway: &Gateway, mut tls_ports: impl Iterator<Item = u16>) -> bool {
    tls_ports.any(|port| settings(gateway, port).is_some_and(|(_, v)| insecure(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(tls: serde_json::Value) -> Gateway {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "g", "namespace": "infra"},
            "spec": {"gatewayClassName": "d8-alb", "tls": tls},
        }))
        .unwrap()
    }

    fn input(config_maps: &[(&str, &str, &str)]) -> Input {
        let mut input = Input::default();
        for (namespace, name, pem) in config_maps {
            input.config_maps.push(Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": namespace},
                    "data": {"ca.crt": pem},
                }))
                .unwrap(),
            ));
        }
        input
    }

    fn refs(refs: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"validation": {"caCertificateRefs": refs}})
    }

    fn tls() -> serde_json::Value {
        let config_map = serde_json::json!({"kind": "ConfigMap", "group": "", "name": "ca"});
        let service = serde_json::json!({"kind": "Service", "group": "", "name": "s"});
        let mut fallback = refs(serde_json::json!([service, config_map]));
        fallback["validation"]["mode"] = "AllowInsecureFallback".into();
        serde_json::json!({"frontend": {
            "default": refs(serde_json::json!([config_map])),
            "perPort": [
                {"port": 8443, "tls": fallback},
                {"port": 7443, "tls": refs(serde_json::json!([
                    {"kind": "ConfigMap", "group": "", "name": "ca", "namespace": "other"}]))},
                {"port": 6443, "tls": refs(serde_json::json!([service]))},
                {"port": 5443, "tls": {}},
            ],
        }})
    }

    /// A port's own settings over the default; insecure fallback said; every unresolved
    /// reference named by its field and reason; a port with its own settings and no
    /// validation asks for no certificate.
    #[test]
    fn ports_take_their_own_settings_or_the_default() {
        let ca = fairlead_kit::pki::Ca::generate("clients").unwrap();
        let input = input(&[
            ("infra", "ca", ca.cert_pem()),
            ("other", "ca", ca.cert_pem()),
        ]);
        let grants = Grants::new(&input);
        let g = gateway(tls());
        let strict = of(&g, 443, &input, &grants).unwrap().unwrap();
        assert!(!strict.insecure_fallback);
        assert_eq!(
            strict.ca,
            format!("{}\n", ca.cert_pem().trim_end()).into_bytes()
        );
        let fallback = of(&g, 8443, &input, &grants).unwrap().unwrap();
        assert!(fallback.insecure_fallback);
        let not_permitted = of(&g, 7443, &input, &grants).unwrap_err();
        assert_eq!(not_permitted.reason, "RefNotPermitted");
        assert!(
            not_permitted
                .message
                .starts_with("spec.tls.frontend.perPort[1].tls.validation.caCertificateRefs[0]")
        );
        assert_eq!(
            of(&g, 6443, &input, &grants).unwrap_err().reason,
            "InvalidCACertificateKind"
        );
        assert_eq!(of(&g, 5443, &input, &grants).unwrap(), None);
        assert!(insecure_on(&g, [443, 8443].into_iter()));
        assert!(!insecure_on(&g, [443, 7443].into_iter()));
        let missing = of(&g, 443, &Input::default(), &grants).unwrap_err();
        assert_eq!(missing.reason, "InvalidCACertificateRef");
        assert!(missing.message.contains("ConfigMap infra/ca not found"));
        assert_eq!(
            of(&gateway(serde_json::json!({})), 443, &input, &grants).unwrap(),
            None
        );
    }
}
