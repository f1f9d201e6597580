//! Envoy TLS `Secret`s from the IR: a certificate chain and its key, served over SDS to the
//! listeners that present them.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;

use fairlead_edge_model::Encoded;
use fairlead_edge_translate::ir::Certificate;

/// The secret of `c`.
pub fn encode(c: &Certificate) -> Encoded {
    let bytes = |b: &[u8]| core::DataSource {
        specifier: Some(core::data_source::Specifier::InlineBytes(b.to_vec())),
        ..Default::default()
    };
    let name = c.name.to_string();
    let secret = tls::Secret {
        name: name.clone(),
        r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
            certificate_chain: Some(bytes(&c.chain)),
            private_key: Some(bytes(&c.key)),
            ..Default::default()
        })),
    };
    Encoded::new(name, &secret)
}
