//! The checker finds broken protoc-gen-validate rules, also inside `Any` fields, and the JSON
//! rendering expands `Any`s.

use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

fn listener_with(manager: &HttpConnectionManager) -> Listener {
    Listener {
        name: "l".into(),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(Any {
                    type_url: HttpConnectionManager::type_url(),
                    value: manager.encode_to_vec(),
                })),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn rules_are_checked_inside_typed_config() {
    use envoy_types::pb::envoy::config::core::v3::{
        AggregatedConfigSource, ConfigSource, config_source,
    };
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        Rds, http_connection_manager::RouteSpecifier,
    };
    let good = HttpConnectionManager {
        stat_prefix: "ingress".into(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ConfigSource {
                config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
                    AggregatedConfigSource {},
                )),
                ..Default::default()
            }),
            route_config_name: "r".into(),
        })),
        ..Default::default()
    };
    fairlead_envoy_protos::validate(&listener_with(&good)).expect("a valid listener");

    // stat_prefix has `min_len: 1`: the listener itself is fine, its typed_config is not.
    let bad = HttpConnectionManager {
        stat_prefix: String::new(),
        ..good
    };
    let error = fairlead_envoy_protos::validate(&listener_with(&bad)).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("HttpConnectionManager"), "{text}");
    assert!(text.contains("stat_prefix"), "{text}");
}

#[test]
fn json_expands_any_fields() {
    let manager = HttpConnectionManager {
        stat_prefix: "ingress".into(),
        ..Default::default()
    };
    let json = fairlead_envoy_protos::to_json(&listener_with(&manager)).unwrap();
    let typed = &json["filterChains"][0]["filters"][0]["typedConfig"];
    assert_eq!(typed["@type"], HttpConnectionManager::type_url());
    assert_eq!(typed["statPrefix"], "ingress");
}
