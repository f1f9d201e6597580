//! The translator on arbitrary Gateway API objects: bytes read as a YAML stream of objects
//! (seeded from the golden inputs, `fuzz/corpus/translate`); whatever reads as objects is
//! translated and rendered, which must never panic, and every resource rendered must decode
//! and keep Envoy's validation rules (the PGV check the goldens use).

#![no_main]

use envoy_types::pb::envoy::config::{cluster, endpoint, listener, route};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use fairlead_edge_model::Encoded;

/// Each of `resources`, decoded as `M`, checked against Envoy's rules.
fn check<M: prost::Message + prost::Name + Default>(resources: &[Encoded]) {
    for encoded in resources {
        let message: M = encoded
            .decode()
            .unwrap_or_else(|e| panic!("{} {} does not decode: {e}", M::full_name(), encoded.name));
        if let Err(e) = fairlead_envoy_protos::validate(&message) {
            panic!(
                "{} {} breaks Envoy's rules: {e}",
                M::full_name(),
                encoded.name
            );
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(input) = fairlead_edge_model::input::Input::from_yaml(text) else {
        return;
    };
    let translation = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
    for r in translation.gateways.values() {
        check::<listener::v3::Listener>(&r.listeners);
        check::<route::v3::RouteConfiguration>(&r.routes);
        check::<cluster::v3::Cluster>(&r.clusters);
        check::<endpoint::v3::ClusterLoadAssignment>(&r.endpoints);
        check::<Secret>(&r.secrets);
    }
});
