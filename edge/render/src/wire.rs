//! Protobuf fields written one at a time, for the messages the translator encodes as it
//! builds them (a route configuration, field by field, instead of a decoded tree of routes).
//! The output is what prost writes for the whole message when the fields come in number order.

use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};

/// A length-delimited field `tag` holding `value` (a string, bytes, or an encoded message).
pub fn bytes(tag: u32, value: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(value.len() as u64, out);
    out.extend_from_slice(value);
}

/// A string field `tag` (proto3: an empty string is not written).
pub fn string(tag: u32, value: &str, out: &mut Vec<u8>) {
    if !value.is_empty() {
        bytes(tag, value.as_bytes(), out);
    }
}

/// A message field `tag`.
pub fn message<M: Message>(tag: u32, value: &M, out: &mut Vec<u8>) {
    prost::encoding::message::encode(tag, value, out);
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};

    use super::*;

    #[test]
    fn fields_written_in_order_are_what_prost_writes_for_the_message() {
        let route = Route {
            name: "r".into(),
            ..Default::default()
        };
        let whole = RouteConfiguration {
            name: "http-80".into(),
            virtual_hosts: vec![VirtualHost {
                name: "a".into(),
                domains: vec!["a".into(), "a:80".into()],
                routes: vec![route.clone(), route.clone()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut host = Vec::new();
        string(1, "a", &mut host);
        string(2, "a", &mut host);
        string(2, "a:80", &mut host);
        message(3, &route, &mut host);
        message(3, &route, &mut host);
        let mut config = Vec::new();
        string(1, "http-80", &mut config);
        bytes(2, &host, &mut config);
        assert_eq!(config, whole.encode_to_vec());
    }
}
