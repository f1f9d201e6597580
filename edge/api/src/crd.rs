//! The CRDs: generated from the types, then given the rules a schema can say — which the API
//! server (the embedded one too) enforces with the field named:
//!
//! - `useProxyProtocol` and `enableHTTP3` are not both true;
//! - the inlet carries the block of its type and not the other; an ALBInstance has no
//!   `HostPort` inlet; `inlet.type` and `inlet.loadBalancer.loadBalancerClass` never change
//!   (transition rules on `oldSelf`);
//! - a HostPort inlet has at least one port, a LoadBalancer inlet not both ports 0;
//! - every address range is a CIDR;
//! - at most four GeoIP editions, each one MaxMind publishes, none twice, with a licence or
//!   a mirror to get them from; GeoIP headers keyed by the provider's fields, named as HTTP
//!   headers, each served by an edition named (see [`crate::geoip`]);
//! - `gatewayName` is a DNS label.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::geoip::{Edition, Field, Slot};
use crate::{ALBInstance, ClusterALBInstance};

/// At most this many editions per instance.
pub const MAX_GEOIP_EDITIONS: usize = 4;

fn rule(rule: &str, message: &str, field: Option<&str>) -> Value {
    let mut value = json!({"rule": rule, "message": message});
    if let Some(field) = field {
        value["fieldPath"] = json!(field);
    }
    value
}

/// Every item of the list at `list` must be a CIDR.
fn cidrs(list: &mut Value, what: &str) {
    list["items"]["x-kubernetes-validations"] = json!([rule(
        "isCIDR(self)",
        &format!("{what} must be CIDRs, such as 10.0.0.0/8 or 2001:db8::/32"),
        None
    )]);
}

/// The rules of an instance's spec schema; `cluster` for a ClusterALBInstance.
fn constrain(spec: &mut Value, cluster: bool) {
    let mut spec_rules = vec![rule(
        "!(has(self.useProxyProtocol) && self.useProxyProtocol && has(self.enableHTTP3) && self.enableHTTP3)",
        "useProxyProtocol and enableHTTP3 cannot both be true: QUIC carries no PROXY header",
        Some(".enableHTTP3"),
    )];
    if !cluster {
        spec_rules.push(rule(
            "!has(self.inlet) || self.inlet.type != 'HostPort'",
            "a HostPort inlet is for ClusterALBInstance only; an ALBInstance takes a LoadBalancer",
            Some(".inlet.type"),
        ));
    }
    spec["x-kubernetes-validations"] = json!(spec_rules);
    let properties = &mut spec["properties"];
    properties["gatewayName"]["pattern"] = json!("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
    properties["gatewayName"]["maxLength"] = json!(63);
    let inlet = &mut properties["inlet"];
    inlet["x-kubernetes-validations"] = json!([
        rule(
            "self.type != 'LoadBalancer' || !has(self.hostPort)",
            "a LoadBalancer inlet takes loadBalancer settings, not hostPort",
            Some(".hostPort"),
        ),
        rule(
            "self.type != 'HostPort' || !has(self.loadBalancer)",
            "a HostPort inlet takes hostPort settings, not loadBalancer",
            Some(".loadBalancer"),
        ),
        rule(
            "self.type == oldSelf.type",
            "inlet.type is immutable: create a new instance with the same gatewayName",
            Some(".type"),
        ),
    ]);
    let inlet = &mut inlet["properties"];
    inlet["loadBalancer"]["x-kubernetes-validations"] = json!([
        rule(
            "!(has(self.httpPort) && self.httpPort == 0 && has(self.httpsPort) && self.httpsPort == 0)",
            "httpPort and httpsPort cannot both be 0",
            None,
        ),
        rule(
            "has(self.loadBalancerClass) == has(oldSelf.loadBalancerClass) && (!has(self.loadBalancerClass) || self.loadBalancerClass == oldSelf.loadBalancerClass)",
            "loadBalancerClass is immutable",
            Some(".loadBalancerClass"),
        ),
    ]);
    cidrs(
        &mut inlet["loadBalancer"]["properties"]["loadBalancerSourceRanges"],
        "loadBalancerSourceRanges",
    );
    inlet["hostPort"]["x-kubernetes-validations"] = json!([rule(
        "has(self.httpPort) || has(self.httpsPort)",
        "a HostPort inlet needs httpPort, httpsPort or both",
        None
    )]);
    inlet["additionalPorts"]["x-kubernetes-list-type"] = json!("map");
    inlet["additionalPorts"]["x-kubernetes-list-map-keys"] = json!(["port", "protocol"]);
    cidrs(&mut properties["acceptRequestsFrom"], "acceptRequestsFrom");
    cidrs(
        &mut properties["originalIPDetection"]["properties"]["setRealIPFrom"],
        "setRealIPFrom",
    );
    properties["openTelemetry"]["properties"]["tracing"]["x-kubernetes-validations"] = json!([
        rule(
            "has(self.service) != has(self.url)",
            "tracing names its collector by service or by url, one of them",
            None
        ),
        rule(
            "!has(self.url) || self.url.startsWith('http://') || self.url.startsWith('https://')",
            "url must be http:// or https://",
            Some(".url")
        ),
        rule(
            "!has(self.path) || self.path.startsWith('/')",
            "path must start with /",
            Some(".path")
        ),
    ]);
    geoip(&mut properties["geoIP"]);
}

/// A CEL list literal of `items`.
fn cel_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items.into_iter().map(|i| format!("'{i}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The rules of `spec.geoIP`: known editions, at most [`MAX_GEOIP_EDITIONS`], a source for
/// them; header keys the provider knows, valued with header names, each served by a named
/// edition (Envoy would look up a database it does not have).
fn geoip(geoip: &mut Value) {
    let mut rules = vec![rule(
        "!has(self.maxmindEditionIDs) || size(self.maxmindEditionIDs) == 0 || has(self.licenseKeySecretRef) || has(self.maxmindMirror)",
        "geoIP needs licenseKeySecretRef or maxmindMirror to get the databases of maxmindEditionIDs",
        Some(".maxmindEditionIDs"),
    )];
    let mut groups: Vec<(&'static [Slot], Vec<Field>)> = Vec::new();
    for field in Field::ALL {
        match groups.iter_mut().find(|(slots, _)| *slots == field.slots()) {
            Some((_, fields)) => fields.push(field),
            None => groups.push((field.slots(), vec![field])),
        }
    }
    for (_, fields) in groups {
        let editions: Vec<&str> = fields[0].editions().into_iter().map(Edition::id).collect();
        let keys: Vec<&str> = fields.iter().map(|f| f.key()).collect();
        // `headers` is an object of fixed properties: `has()` each (CEL's `in` is for
        // lists and maps only).
        let named: Vec<String> = keys
            .iter()
            .map(|k| format!("has(self.headers.{k})"))
            .collect();
        rules.push(rule(
            &format!(
                "!has(self.headers) || !({named}) || (has(self.maxmindEditionIDs) && self.maxmindEditionIDs.exists(e, e in {editions}))",
                named = named.join(" || "),
                editions = cel_list(editions.iter().copied()),
            ),
            &format!(
                "headers {} need one of {} in maxmindEditionIDs",
                keys.join(", "),
                editions.join(", ")
            ),
            Some(".headers"),
        ));
    }
    geoip["x-kubernetes-validations"] = json!(rules);
    let properties = &mut geoip["properties"];
    let editions = &mut properties["maxmindEditionIDs"];
    editions["maxItems"] = json!(MAX_GEOIP_EDITIONS);
    editions["x-kubernetes-list-type"] = json!("set");
    editions["items"]["enum"] = json!(Edition::ALL.map(Edition::id));
    // One property per field the provider knows (a map's keys cannot be bounded in a
    // schema, and a CEL rule over unbounded keys costs too much for a real API server): an
    // unknown key is an unknown field, refused under kubectl's strict field validation.
    let headers = &mut properties["headers"];
    let description = headers["description"].clone();
    *headers = json!({
        "type": "object",
        "nullable": true,
        "description": description,
        "properties": Field::ALL
            .iter()
            .map(|f| {
                (
                    f.key().to_owned(),
                    // An HTTP header name (an RFC 9110 token; the translator lower-cases it).
                    json!({"type": "string", "maxLength": 128,
                        "pattern": "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"}),
                )
            })
            .collect::<serde_json::Map<String, Value>>(),
    });
    properties["maxmindMirror"]["properties"]["url"]["x-kubernetes-validations"] = json!([rule(
        "self.startsWith('http://') || self.startsWith('https://')",
        "maxmindMirror.url must be http:// or https://",
        None
    )]);
}

fn finish(crd: CustomResourceDefinition, cluster: bool) -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(crd).expect("the CRD serializes");
    crd["metadata"]["labels"] = json!({"heritage": "deckhouse", "module": "alb"});
    let schema = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    constrain(&mut schema["spec"], cluster);
    let conditions = &mut schema["status"]["properties"]["conditions"];
    conditions["x-kubernetes-list-type"] = json!("map");
    conditions["x-kubernetes-list-map-keys"] = json!(["type"]);
    serde_json::from_value(crd).expect("the constrained CRD is still a CRD")
}

/// The `clusteralbinstances.network.deckhouse.io` CRD.
pub fn cluster_alb_instance() -> CustomResourceDefinition {
    finish(ClusterALBInstance::crd(), true)
}

/// The `albinstances.network.deckhouse.io` CRD.
pub fn alb_instance() -> CustomResourceDefinition {
    finish(ALBInstance::crd(), false)
}

/// Both CRDs.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![cluster_alb_instance(), alb_instance()]
}
