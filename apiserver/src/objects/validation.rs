//! Validation of the built-in kinds that fairlead's components write and depend on: Services,
//! EndpointSlices and Secrets, as the real server validates (or decodes) them.

use std::net::IpAddr;

use serde_json::Value;

use crate::objects::errors::FieldCause;

/// Options of built-in validation.
#[derive(Clone, Copy, Debug, Default)]
pub struct ValidationOptions {
    /// Accept 127.0.0.0/8 in EndpointSlices (`fairlead up` does, so local processes can stand
    /// in for pods; the real server never does).
    pub allow_loopback_endpoints: bool,
}

/// Checks an object of a built-in kind; returns every problem found.
pub fn validate(kind: &str, object: &Value, options: ValidationOptions) -> Vec<FieldCause> {
    match kind {
        "Service" => service(object),
        "EndpointSlice" => endpoint_slice(object, options),
        "Secret" => secret(object),
        _ => Vec::new(),
    }
}

/// A Secret's `data` is base64 and its `stringData` (left when not all strings) text, as
/// the real server's decoding demands.
fn secret(object: &Value) -> Vec<FieldCause> {
    use base64::Engine as _;
    // Go's decoder, as lenient: line breaks skipped, trailing bits allowed.
    let go = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let mut causes = Vec::new();
    for (key, value) in object["data"].as_object().into_iter().flatten() {
        let decodes = value
            .as_str()
            .is_some_and(|v| go.decode(v.replace(['\r', '\n'], "")).is_ok());
        if !decodes {
            causes.push(FieldCause::new(
                "FieldValueInvalid",
                format!("data.{key}"),
                format!("Invalid value: {value}: must be base64-encoded bytes"),
            ));
        }
    }
    for (key, value) in object["stringData"].as_object().into_iter().flatten() {
        if !value.is_string() {
            causes.push(FieldCause::new(
                "FieldValueInvalid",
                format!("stringData.{key}"),
                format!("Invalid value: {value}: must be a string"),
            ));
        }
    }
    causes
}

fn port_in_range(value: &Value) -> bool {
    value.as_i64().is_some_and(|p| (1..=65535).contains(&p))
}

fn service(object: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let spec = &object["spec"];
    let ports = spec["ports"].as_array().cloned().unwrap_or_default();
    let headless = spec["clusterIP"].as_str() == Some("None");
    let external = spec["type"].as_str() == Some("ExternalName");
    if ports.is_empty() && !headless && !external {
        causes.push(FieldCause::new(
            "FieldValueRequired",
            "spec.ports",
            "Required value",
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        if !port_in_range(&port["port"]) {
            causes.push(FieldCause::new(
                if port["port"].is_null() {
                    "FieldValueRequired"
                } else {
                    "FieldValueInvalid"
                },
                format!("{path}.port"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive",
                    port["port"]
                ),
            ));
        }
        match &port["targetPort"] {
            Value::Null => {}
            Value::String(name) if !name.is_empty() && name.len() <= 15 => {}
            v if port_in_range(v) => {}
            v => causes.push(FieldCause::new(
                "FieldValueInvalid",
                format!("{path}.targetPort"),
                format!("Invalid value: {v}: must be a port number between 1 and 65535 or a name of at most 15 characters"),
            )),
        }
        if let Some(protocol) = port["protocol"].as_str()
            && !matches!(protocol, "TCP" | "UDP" | "SCTP")
        {
            causes.push(FieldCause::new(
                "FieldValueNotSupported",
                format!("{path}.protocol"),
                format!("Unsupported value: \"{protocol}\": supported values: \"SCTP\", \"TCP\", \"UDP\""),
            ));
        }
        if ports.len() > 1 {
            match port["name"].as_str() {
                None | Some("") => causes.push(FieldCause::new(
                    "FieldValueRequired",
                    format!("{path}.name"),
                    "Required value",
                )),
                Some(name) if !names.insert(name.to_owned()) => causes.push(FieldCause::new(
                    "FieldValueDuplicate",
                    format!("{path}.name"),
                    format!("Duplicate value: \"{name}\""),
                )),
                Some(_) => {}
            }
        }
    }
    causes
}

fn endpoint_slice(object: &Value, options: ValidationOptions) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let address_type = object["addressType"].as_str().unwrap_or_default();
    if !matches!(address_type, "IPv4" | "IPv6" | "FQDN") {
        causes.push(FieldCause::new(
            "FieldValueNotSupported",
            "addressType",
            format!("Unsupported value: \"{address_type}\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""),
        ));
    }
    for (i, port) in object["ports"].as_array().into_iter().flatten().enumerate() {
        if !port["port"].is_null() && !port_in_range(&port["port"]) {
            causes.push(FieldCause::new(
                "FieldValueInvalid",
                format!("ports[{i}].port"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive",
                    port["port"]
                ),
            ));
        }
    }
    let endpoints = object["endpoints"].as_array().cloned().unwrap_or_default();
    if endpoints.len() > 1000 {
        causes.push(FieldCause::new(
            "FieldValueTooMany",
            "endpoints",
            format!(
                "Too many: {}: must have at most 1000 items",
                endpoints.len()
            ),
        ));
    }
    for (i, endpoint) in endpoints.iter().enumerate() {
        let addresses = endpoint["addresses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if addresses.len() != 1 {
            causes.push(FieldCause::new(
                if addresses.is_empty() {
                    "FieldValueRequired"
                } else {
                    "FieldValueTooMany"
                },
                format!("endpoints[{i}].addresses"),
                "must contain exactly one address",
            ));
        }
        for (j, address) in addresses.iter().enumerate() {
            let path = format!("endpoints[{i}].addresses[{j}]");
            let text = address.as_str().unwrap_or_default();
            if let Some(problem) = address_problem(address_type, text, options) {
                causes.push(FieldCause::new(
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: \"{text}\": {problem}"),
                ));
            }
        }
    }
    causes
}

fn address_problem(address_type: &str, text: &str, options: ValidationOptions) -> Option<String> {
    let ip = match address_type {
        "IPv4" | "IPv6" => match text.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => return Some(format!("must be a valid {address_type} address")),
        },
        _ => return None,
    };
    if (address_type == "IPv4") != ip.is_ipv4() {
        return Some(format!("must be a valid {address_type} address"));
    }
    let loopback_allowed = options.allow_loopback_endpoints && ip.is_ipv4();
    if ip.is_unspecified() {
        return Some("may not be unspecified (0.0.0.0)".into());
    }
    if ip.is_loopback() && !loopback_allowed {
        return Some("may not be in the loopback range (127.0.0.0/8, ::1/128)".into());
    }
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if link_local {
        return Some("may not be in the link-local range (169.254.0.0/16, fe80::/10)".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_ports_are_checked_with_paths() {
        let svc = json!({"spec": {"ports": [
            {"name": "a", "port": 0}, {"name": "a", "port": 80, "targetPort": "this-name-is-too-long"},
            {"port": 81, "protocol": "HTTP"}]}});
        let fields: Vec<String> = service(&svc).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            vec![
                "spec.ports[0].port",
                "spec.ports[1].targetPort",
                "spec.ports[1].name",
                "spec.ports[2].protocol",
                "spec.ports[2].name"
            ]
        );
        assert!(
            service(&json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}})).is_empty()
        );
    }

    #[test]
    fn secrets_hold_base64_data_and_string_strings() {
        let mut written = json!({"data": {"a": "eA==\n", "b": "not base64!"},
            "stringData": {"c": "text", "d": 5}});
        crate::objects::defaults::on_write("Secret", &mut written);
        let causes: Vec<(String, String)> = secret(&written)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect();
        assert_eq!(
            causes,
            [
                (
                    "data.b".to_owned(),
                    "Invalid value: \"not base64!\": must be base64-encoded bytes".to_owned()
                ),
                (
                    "stringData.d".to_owned(),
                    "Invalid value: 5: must be a string".to_owned()
                ),
            ]
        );
        let mut fine = json!({"data": {"a": "eA=="}, "stringData": {"c": "text"}});
        crate::objects::defaults::on_write("Secret", &mut fine);
        assert!(secret(&fine).is_empty(), "{fine}");
    }

    #[test]
    fn endpoint_addresses_follow_the_real_rules_with_a_loopback_switch() {
        let slice = |addr: &str| json!({"addressType": "IPv4", "endpoints": [{"addresses": [addr]}], "ports": [{"port": 80}]});
        let strict = ValidationOptions::default();
        let local = ValidationOptions {
            allow_loopback_endpoints: true,
        };
        assert!(endpoint_slice(&slice("10.0.0.1"), strict).is_empty());
        assert_eq!(
            endpoint_slice(&slice("127.0.0.1"), strict)[0].field,
            "endpoints[0].addresses[0]"
        );
        assert!(endpoint_slice(&slice("127.0.0.2"), local).is_empty());
        assert!(!endpoint_slice(&slice("169.254.1.1"), local).is_empty());
        assert!(!endpoint_slice(&slice("0.0.0.0"), local).is_empty());
        assert!(!endpoint_slice(&slice("::1"), local).is_empty());
        assert!(!endpoint_slice(&json!({"addressType": "IPv5"}), strict).is_empty());
    }
}
