//! What the admission webhooks decide, without I/O: each rule is a function of the request
//! and of the objects the webhook server looked up for it.
//!
//! - **Instances** ([`instance`]): `spec.gatewayName` may not name a Gateway that exists and
//!   is not managed by an ALB instance (the controller would otherwise take over a user's
//!   Gateway). `spec.geoIP.headers` may not name a header requests and proxies rely on
//!   ([`fairlead_edge_api::geoip::header_problems`]) when they or `realIPHeader` change.
//!   `spec.inlet.additionalPorts` may not take the Gateway's HTTP and HTTPS ports (80, 443)
//!   nor a port the proxy pod holds for itself (admin, metrics, health, kube-rbac-proxy).
//!   Immutable fields are the CRD's `oldSelf` rules.
//! - **Managed Gateways** ([`gateway`]): created, changed or deleted only by the controller
//!   and the editors configured beside it (and by the cluster's garbage collector and
//!   namespace controller, or deletions deadlock); the status subresource is not reviewed; a change of finalizers alone is
//!   anyone's to make.
//! - **ListenerSets** ([`listener_set`]): a ListenerSet of an ALBInstance's Gateway must live
//!   in that Gateway's namespace; a listener claiming a port and hostname another ListenerSet
//!   of the Gateway claims is admitted with a warning: the conflict is the translator's to
//!   report in the ListenerSet's status (`Conflicted`, the older listener wins), as Deckhouse
//!   documents it and the Gateway API requires.
//! - **Routes** ([`route`]): an HTTPRoute whose `alb.network.deckhouse.io/*` annotation is
//!   malformed is refused, naming the annotation
//!   ([`fairlead_edge_model::annotations::Annotations::read`], what the translator reads);
//!   an undocumented ALB annotation (a typo) and the deprecated `response-headers-to-add` are
//!   warnings, as is a `sectionName` naming no listener of a `d8-alb` Gateway, and a route
//!   attaching to an instance Gateway's reserved listeners (`d8-http`, `d8-https`, or all of
//!   them without a `sectionName`): they serve the platform (load balancer health checks,
//!   HTTP-01, the platform's own routes), and applications belong on ListenerSets. A warning
//!   rather than a refusal: the controller's own routes attach there, and routes that did
//!   before keep serving while they move.
//!
//! Every denial names the field it is about.

use fairlead_key::ObjectKey;
use serde_json::Value;

use crate::instance::{CLUSTER_NAMESPACE, INSTANCE_LABEL, MANAGER};

/// The users allowed to change managed Gateways besides the controller: the garbage
/// collector (instances' deletions cascade) and the namespace controller.
pub const SYSTEM_USERS: &[&str] = &[
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:namespace-controller",
];

/// The operation under review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT` (never registered for).
    Connect,
}

impl Operation {
    /// The operation an AdmissionReview names.
    pub fn parse(text: &str) -> Self {
        match text {
            "CREATE" => Self::Create,
            "UPDATE" => Self::Update,
            "DELETE" => Self::Delete,
            _ => Self::Connect,
        }
    }

    /// Its name in AdmissionReviews and rules.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

/// One request, as the AdmissionReview carries it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// What is done.
    pub operation: Operation,
    /// The object's kind.
    pub kind: &'a str,
    /// Its namespace (empty for cluster-scoped objects).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The subresource (`status`), or empty.
    pub sub_resource: &'a str,
    /// Who asks.
    pub username: &'a str,
    /// The object after the request (none on delete).
    pub object: Option<&'a Value>,
    /// The object before it (none on create).
    pub old_object: Option<&'a Value>,
}

/// An AdmissionReview's `request`, read: what [`Request`] borrows.
#[derive(Clone, Debug, PartialEq)]
pub struct Review {
    operation: Operation,
    kind: String,
    namespace: String,
    name: String,
    sub_resource: String,
    username: String,
    object: Option<Value>,
    old_object: Option<Value>,
}

impl Review {
    /// Reads an AdmissionReview v1's `request`; what is missing or malformed (its kind and
    /// operation, which every request carries; an object or old object that is no object).
    /// Strings of any other type read as empty; an object that is null as none.
    pub fn decode(request: &Value) -> Result<Self, &'static str> {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let kind = text(&request["kind"]["kind"]);
        let Some(operation) = request["operation"].as_str() else {
            return Err("request.kind and request.operation");
        };
        if kind.is_empty() {
            return Err("request.kind and request.operation");
        }
        let present = |v: &Value| (!v.is_null()).then(|| v.clone());
        if [&request["object"], &request["oldObject"]]
            .iter()
            .any(|o| !o.is_null() && !o.is_object())
        {
            return Err("request.object and request.oldObject as objects");
        }
        Ok(Self {
            operation: Operation::parse(operation),
            kind,
            namespace: text(&request["namespace"]),
            name: text(&request["name"]),
            sub_resource: text(&request["subResource"]),
            username: text(&request["userInfo"]["username"]),
            object: present(&request["object"]),
            old_object: present(&request["oldObject"]),
        })
    }

    /// The request, as the rules read it.
    pub fn request(&self) -> Request<'_> {
        Request {
            operation: self.operation,
            kind: &self.kind,
            namespace: &self.namespace,
            name: &self.name,
            sub_resource: &self.sub_resource,
            username: &self.username,
            object: self.object.as_ref(),
            old_object: self.old_object.as_ref(),
        }
    }
}

/// What a webhook answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted, with warnings for the client.
    Allow(Vec<String>),
    /// Refused: the HTTP code and the message (which names the field).
    Deny(u16, String),
}

impl Verdict {
    fn allow() -> Self {
        Self::Allow(Vec::new())
    }

    fn forbidden(message: String) -> Self {
        Self::Deny(403, message)
    }

    fn invalid(message: String) -> Self {
        Self::Deny(422, message)
    }
}

/// The listeners an instance's Gateway keeps for the platform.
const RESERVED_LISTENERS: &[&str] = &["d8-http", "d8-https"];

/// Whether `object` is a Gateway the controller manages.
pub fn is_managed(object: &Value) -> bool {
    object["metadata"]["labels"]["app.kubernetes.io/managed-by"] == MANAGER
}

/// The instance a managed Gateway's label names (`ALBInstance.shop` → `("ALBInstance",
/// "shop")`).
fn managing_instance(gateway: &Value) -> Option<(&str, &str)> {
    gateway["metadata"]["labels"][INSTANCE_LABEL]
        .as_str()?
        .split_once('.')
}

/// The Gateway an instance under review names.
pub fn instance_gateway(request: &Request<'_>) -> Option<ObjectKey> {
    let name = request.object?["spec"]["gatewayName"].as_str()?;
    let namespace = if request.kind == "ClusterALBInstance" {
        CLUSTER_NAMESPACE
    } else {
        request.namespace
    };
    Some(ObjectKey::new(namespace, name))
}

/// What an instance's GeoIP headers hang on: the headers and the client-address header.
fn header_inputs(instance: &Value) -> (&Value, &Value) {
    let spec = &instance["spec"];
    (
        &spec["geoIP"]["headers"],
        &spec["originalIPDetection"]["realIPHeader"],
    )
}

/// What is wrong with the GeoIP headers `instance` names, when they are new or changed
/// (an instance admitted before a rule existed still loses its finalizer).
fn header_problems(instance: &Value, old: Option<&Value>) -> Vec<String> {
    let inputs = header_inputs(instance);
    if old.is_some_and(|old| header_inputs(old) == inputs) {
        return Vec::new();
    }
    let headers = serde_json::from_value(inputs.0.clone()).unwrap_or_default();
    fairlead_edge_api::geoip::header_problems(&headers, inputs.1.as_str())
}

/// The `additionalPorts` of `instance` that collide with the Gateway's own listeners or the
/// proxy pod's own ports, each a message naming the field.
fn port_problems(instance: &Value) -> Vec<String> {
    use crate::workload::OWN_PORTS;
    use fairlead_edge_model::names::container_port;
    let ports = instance["spec"]["inlet"]["additionalPorts"].as_array();
    ports
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, p)| {
            let port = u16::try_from(p["port"].as_u64()?).ok()?;
            let field = format!("spec.inlet.additionalPorts[{i}].port");
            if port == 80 || port == 443 {
                return Some(format!(
                    "{field}: {port} is the Gateway's {} port (listener d8-{}); pick another",
                    if port == 80 { "HTTP" } else { "HTTPS" },
                    if port == 80 { "http" } else { "https" }
                ));
            }
            let inside = container_port(port);
            OWN_PORTS.iter().find(|(own, _)| *own == inside).map(|(_, what)| {
                format!(
                    "{field}: {port} is served at container port {inside}, {what} port in the proxy pod; pick another"
                )
            })
        })
        .collect()
}

/// An instance may not name a Gateway that exists and is no instance's, nor GeoIP headers
/// that would break requests; `existing` is the Gateway [`instance_gateway`] names, if
/// there is one.
pub fn instance(request: &Request<'_>, existing: Option<&Value>) -> Verdict {
    if request.operation == Operation::Delete || !request.sub_resource.is_empty() {
        return Verdict::allow();
    }
    if let Some(object) = request.object {
        let mut problems = header_problems(object, request.old_object);
        problems.extend(port_problems(object));
        if !problems.is_empty() {
            return Verdict::invalid(problems.join("; "));
        }
    }
    let Some(gateway) = instance_gateway(request) else {
        return Verdict::allow();
    };
    let unchanged = request.old_object.is_some_and(|old| {
        old["spec"]["gatewayName"] == request.object.unwrap_or(old)["spec"]["gatewayName"]
    });
    match existing {
        Some(existing) if !unchanged && !is_managed(existing) => Verdict::invalid(format!(
            "spec.gatewayName: Gateway {gateway} already exists and is not managed by an ALB instance; name another Gateway, or delete that one first"
        )),
        _ => Verdict::allow(),
    }
}

/// `value` without what a finalizer change leaves untouched: status and the server-kept
/// metadata.
fn comparable(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("status");
    }
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "finalizers",
            "managedFields",
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            metadata.remove(field);
        }
    }
    value
}

/// The first field where `a` and `b` differ, as a path (`spec.listeners[0].port`).
pub fn first_difference(a: &Value, b: &Value) -> Option<String> {
    fn walk(a: &Value, b: &Value, path: &str) -> Option<String> {
        if a == b {
            return None;
        }
        let join = |key: &str| {
            if path.is_empty() {
                key.to_owned()
            } else if key.contains(['.', '/']) {
                format!("{path}[{key}]")
            } else {
                format!("{path}.{key}")
            }
        };
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
                keys.sort();
                keys.dedup();
                keys.into_iter().find_map(|k| {
                    walk(
                        a.get(k).unwrap_or(&Value::Null),
                        b.get(k).unwrap_or(&Value::Null),
                        &join(k),
                    )
                })
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(n, (x, y))| walk(x, y, &format!("{path}[{n}]"))),
            _ => Some(path.to_owned()),
        }
    }
    walk(a, b, "")
}

/// Managed Gateways change only through the controller; `editors` are the users allowed to
/// (the controller's, and whoever else is configured).
pub fn gateway(request: &Request<'_>, editors: &[String]) -> Verdict {
    if !request.sub_resource.is_empty()
        || editors.iter().any(|e| e == request.username)
        || SYSTEM_USERS.contains(&request.username)
    {
        return Verdict::allow();
    }
    let managed = |o: Option<&Value>| o.is_some_and(is_managed);
    if !managed(request.object) && !managed(request.old_object) {
        return Verdict::allow();
    }
    let key = ObjectKey::new(request.namespace, request.name);
    let owner = request
        .old_object
        .or(request.object)
        .and_then(managing_instance)
        .map_or_else(
            || "an ALB instance".to_owned(),
            |(kind, name)| format!("{kind} {name}"),
        );
    let what = match (request.operation, request.old_object, request.object) {
        (Operation::Update, Some(old), Some(new)) => {
            match first_difference(&comparable(old), &comparable(new)) {
                None => return Verdict::allow(),
                Some(field) => format!("{field}: Gateway {key} is managed by {owner}"),
            }
        }
        (Operation::Delete, _, _) => format!(
            "metadata.labels[{INSTANCE_LABEL}]: Gateway {key} is managed by {owner}; it goes when that instance is deleted or names another Gateway"
        ),
        _ => format!(
            "metadata.labels[app.kubernetes.io/managed-by]: only the gateway controller creates Gateways it manages ({key})"
        ),
    };
    Verdict::forbidden(format!(
        "{what}; change the instance instead (only {MANAGER} edits it)"
    ))
}

/// The Gateway a ListenerSet under review attaches to (`spec.parentRef`).
pub fn listener_set_parent(request: &Request<'_>) -> Option<ObjectKey> {
    let parent = &request.object?["spec"]["parentRef"];
    let kind = parent["kind"].as_str().unwrap_or("Gateway");
    let group = parent["group"]
        .as_str()
        .unwrap_or(fairlead_edge_model::input::GATEWAY_GROUP);
    if kind != "Gateway" || group != fairlead_edge_model::input::GATEWAY_GROUP {
        return None;
    }
    let namespace = parent["namespace"].as_str().unwrap_or(request.namespace);
    Some(ObjectKey::new(namespace, parent["name"].as_str()?))
}

/// What a listener claims: its transport, port and hostname (empty: every hostname).
fn claim(listener: &Value) -> (bool, Option<u64>, &str) {
    (
        listener["protocol"] == "UDP",
        listener["port"].as_u64(),
        listener["hostname"].as_str().unwrap_or_default(),
    )
}

/// A ListenerSet of a `d8-alb` Gateway: in the namespace of an ALBInstance's Gateway; a
/// warning for each listener claiming a port and hostname a sibling claims. `parent` is the
/// Gateway [`listener_set_parent`] names, `siblings` the other ListenerSets naming it.
pub fn listener_set(request: &Request<'_>, parent: Option<&Value>, siblings: &[Value]) -> Verdict {
    if request.operation == Operation::Delete || !request.sub_resource.is_empty() {
        return Verdict::allow();
    }
    let (Some(object), Some(parent), Some(key)) =
        (request.object, parent, listener_set_parent(request))
    else {
        return Verdict::allow();
    };
    if parent["spec"]["gatewayClassName"] != fairlead_edge_model::names::GATEWAY_CLASS {
        return Verdict::allow();
    }
    if let Some(("ALBInstance", instance)) = managing_instance(parent)
        && key.namespace() != request.namespace
    {
        return Verdict::invalid(format!(
            "spec.parentRef.namespace: Gateway {key} belongs to ALBInstance {}/{instance} and takes ListenerSets from its own namespace only",
            key.namespace()
        ));
    }
    let mut warnings = Vec::new();
    let listeners = object["spec"]["listeners"].as_array().into_iter().flatten();
    for (n, listener) in listeners.enumerate() {
        let wanted = claim(listener);
        for sibling in siblings {
            let same = sibling["metadata"]["namespace"] == request.namespace
                && sibling["metadata"]["name"] == request.name;
            if same {
                continue;
            }
            let taken = sibling["spec"]["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|l| claim(l) == wanted);
            if let Some(taken) = taken {
                let hostname = match wanted.2 {
                    "" => "any hostname".to_owned(),
                    h => format!("hostname {h}"),
                };
                warnings.push(format!(
                    "spec.listeners[{n}]: port {} with {hostname} is already claimed on Gateway {key} by ListenerSet {}/{} (listener {}); the younger listener is Conflicted and not served",
                    wanted.1.unwrap_or_default(),
                    sibling["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default(),
                    sibling["metadata"]["name"].as_str().unwrap_or_default(),
                    taken["name"].as_str().unwrap_or_default(),
                ));
                break;
            }
        }
    }
    Verdict::Allow(warnings)
}

/// The Gateways a route under review names (`spec.parentRefs[n]`, kind Gateway), with `n`.
pub fn route_parents(request: &Request<'_>) -> Vec<(usize, ObjectKey)> {
    let Some(object) = request.object else {
        return Vec::new();
    };
    object["spec"]["parentRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, r)| {
            r["kind"].as_str().unwrap_or("Gateway") == "Gateway"
                && r["group"]
                    .as_str()
                    .unwrap_or(fairlead_edge_model::input::GATEWAY_GROUP)
                    == fairlead_edge_model::input::GATEWAY_GROUP
        })
        .filter_map(|(n, r)| {
            let namespace = r["namespace"].as_str().unwrap_or(request.namespace);
            Some((n, ObjectKey::new(namespace, r["name"].as_str()?)))
        })
        .collect()
}

/// The verdict on an HTTPRoute's ALB annotations: refused when one is malformed; warnings
/// for undocumented ALB annotations and the deprecated `response-headers-to-add`.
fn annotations(object: &Value) -> Result<Vec<String>, String> {
    use fairlead_edge_model::annotations::{Annotations, PREFIX};
    let Ok(map) = serde_json::from_value::<std::collections::BTreeMap<String, String>>(
        object["metadata"]["annotations"].clone(),
    ) else {
        return Ok(Vec::new());
    };
    let read = Annotations::read(&map).map_err(|e| e.to_string())?;
    let mut warnings: Vec<String> = Annotations::unknown(&map)
        .into_iter()
        .map(|name| {
            format!("metadata.annotations[{name}]: not an annotation of the ALB; it does nothing")
        })
        .collect();
    if !read.traffic.response_headers.is_empty() {
        warnings.push(format!(
            "metadata.annotations[{PREFIX}response-headers-to-add]: deprecated; use a ResponseHeaderModifier filter"
        ));
    }
    Ok(warnings)
}

/// Routes are admitted unless an HTTPRoute's ALB annotation is malformed ([`annotations`]);
/// a `sectionName` naming no listener of a `d8-alb` Gateway is a warning. `parents` are the
/// Gateways [`route_parents`] names that exist, by index.
pub fn route(request: &Request<'_>, parents: &[(usize, Value)]) -> Verdict {
    let Some(object) = request.object else {
        return Verdict::allow();
    };
    let mut warnings = Vec::new();
    if request.kind == "HTTPRoute" {
        match annotations(object) {
            Ok(found) => warnings.extend(found),
            Err(message) => return Verdict::invalid(message),
        }
    }
    for (n, gateway) in parents {
        if gateway["spec"]["gatewayClassName"] != fairlead_edge_model::names::GATEWAY_CLASS {
            continue;
        }
        let reference = &object["spec"]["parentRefs"][*n];
        let section = reference["sectionName"].as_str();
        if is_managed(gateway) && section.is_none_or(|s| RESERVED_LISTENERS.contains(&s)) {
            warnings.push(format!(
                "spec.parentRefs[{n}]: listener(s) {} of Gateway {}/{} are reserved for the platform (health checks, HTTP-01, its own routes); publish applications through a ListenerSet of their own",
                section.map_or_else(|| RESERVED_LISTENERS.join(" and "), str::to_owned),
                gateway["metadata"]["namespace"].as_str().unwrap_or_default(),
                gateway["metadata"]["name"].as_str().unwrap_or_default(),
            ));
        }
        let Some(section) = section else {
            continue;
        };
        let names: Vec<&str> = gateway["spec"]["listeners"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["name"].as_str())
            .collect();
        if !names.contains(&section) {
            warnings.push(format!(
                "spec.parentRefs[{n}].sectionName: Gateway {}/{} has no listener {section:?} (its listeners: {}); the route does not attach there",
                gateway["metadata"]["namespace"].as_str().unwrap_or_default(),
                gateway["metadata"]["name"].as_str().unwrap_or_default(),
                names.join(", ")
            ));
        }
    }
    Verdict::Allow(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CONTROLLER: &str = "system:serviceaccount:d8-alb:alb-gateway-controller";

    #[test]
    fn a_review_is_decoded_or_refused_naming_what_is_wrong() {
        let review = json!({"uid": "1", "kind": {"kind": "Gateway"}, "operation": "UPDATE",
            "namespace": "d8-alb", "name": "public", "userInfo": {"username": "bob"},
            "object": {"metadata": {"name": "public"}}, "oldObject": null});
        let read = Review::decode(&review).unwrap();
        let request = read.request();
        assert_eq!(
            (request.operation, request.kind, request.username),
            (Operation::Update, "Gateway", "bob")
        );
        assert!(request.old_object.is_none());
        for (field, value) in [("kind", json!(null)), ("operation", json!(7))] {
            let mut broken = review.clone();
            broken[field] = value;
            assert_eq!(
                Review::decode(&broken),
                Err("request.kind and request.operation")
            );
        }
        // Found by fuzzing: an old object that is a string reached the rules, which read
        // its metadata.
        let mut broken = review.clone();
        broken["oldObject"] = json!("d8-alb");
        assert_eq!(
            Review::decode(&broken),
            Err("request.object and request.oldObject as objects")
        );
        let odd = json!({"metadata": "x", "spec": {}});
        let managed = json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": MANAGER}}});
        let verdict = gateway(&request_of(Operation::Update, &managed, &odd), &editors());
        assert!(matches!(verdict, Verdict::Deny(..)), "{verdict:?}");
    }

    fn request_of<'a>(operation: Operation, object: &'a Value, old: &'a Value) -> Request<'a> {
        request(
            operation,
            "Gateway",
            "d8-alb",
            "bob",
            Some(object),
            Some(old),
        )
    }

    fn editors() -> Vec<String> {
        vec![CONTROLLER.to_owned()]
    }

    fn request<'a>(
        operation: Operation,
        kind: &'a str,
        namespace: &'a str,
        username: &'a str,
        object: Option<&'a Value>,
        old_object: Option<&'a Value>,
    ) -> Request<'a> {
        Request {
            operation,
            kind,
            namespace,
            name: "x",
            sub_resource: "",
            username,
            object,
            old_object,
        }
    }

    fn managed_gateway(instance: &str) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "shop", "namespace": "team", "resourceVersion": "5",
                "labels": {"app.kubernetes.io/managed-by": MANAGER, INSTANCE_LABEL: instance}},
            "spec": {"gatewayClassName": "d8-alb", "listeners": [
                {"name": "d8-http", "port": 80, "protocol": "HTTP"}]}})
    }

    #[test]
    fn an_instance_may_not_take_over_a_gateway_of_its_own() {
        let instance = json!({"spec": {"gatewayName": "shop"}});
        let create = request(
            Operation::Create,
            "ALBInstance",
            "team",
            "alice",
            Some(&instance),
            None,
        );
        assert_eq!(
            instance_gateway(&create),
            Some(ObjectKey::new("team", "shop"))
        );
        let users = json!({"metadata": {"name": "shop", "namespace": "team"},
            "spec": {"gatewayClassName": "other"}});
        let Verdict::Deny(422, message) = super::instance(&create, Some(&users)) else {
            panic!("a user's Gateway is not taken over");
        };
        assert!(
            message.starts_with("spec.gatewayName: Gateway team/shop already exists"),
            "{message}"
        );
        assert_eq!(super::instance(&create, None), Verdict::allow());
        assert_eq!(
            super::instance(&create, Some(&managed_gateway("ALBInstance.other"))),
            Verdict::allow(),
            "sharing a managed Gateway is a Conflict in status, not a denial"
        );
        // A ClusterALBInstance's Gateway is in d8-alb.
        let cluster = request(
            Operation::Create,
            "ClusterALBInstance",
            "",
            "alice",
            Some(&instance),
            None,
        );
        assert_eq!(
            instance_gateway(&cluster),
            Some(ObjectKey::new(CLUSTER_NAMESPACE, "shop"))
        );
        // An update that keeps the name is not held to it.
        let update = request(
            Operation::Update,
            "ALBInstance",
            "team",
            "alice",
            Some(&instance),
            Some(&instance),
        );
        assert_eq!(super::instance(&update, Some(&users)), Verdict::allow());
    }

    #[test]
    fn geoip_headers_that_would_break_requests_are_refused_by_field() {
        let instance = json!({"spec": {"gatewayName": "shop",
            "originalIPDetection": {"realIPHeader": "X-Client-IP"},
            "geoIP": {"headers": {"city": "x-city", "country": "x-client-ip"}}}});
        let create = request(
            Operation::Create,
            "ALBInstance",
            "team",
            "alice",
            Some(&instance),
            None,
        );
        let Verdict::Deny(422, message) = super::instance(&create, None) else {
            panic!("the client's address header is not overwritten");
        };
        assert!(
            message.starts_with(
                "spec.geoIP.headers.country: \"x-client-ip\" is spec.originalIPDetection.realIPHeader"
            ),
            "{message}"
        );
        let fine = json!({"spec": {"gatewayName": "shop",
            "geoIP": {"headers": {"city": "x-city"}}}});
        let create = request(
            Operation::Create,
            "ALBInstance",
            "team",
            "alice",
            Some(&fine),
            None,
        );
        assert_eq!(super::instance(&create, None), Verdict::allow());
        // Admitted before the rule: updates that leave the headers alone still go through.
        let mut finalized = instance.clone();
        finalized["metadata"] = json!({"finalizers": []});
        let update = request(
            Operation::Update,
            "ALBInstance",
            "team",
            "alice",
            Some(&finalized),
            Some(&instance),
        );
        assert_eq!(super::instance(&update, None), Verdict::allow());
        let renamed = request(
            Operation::Update,
            "ALBInstance",
            "team",
            "alice",
            Some(&instance),
            Some(&fine),
        );
        assert!(matches!(
            super::instance(&renamed, None),
            Verdict::Deny(422, _)
        ));
    }

    #[test]
    fn only_the_controller_edits_a_managed_gateway() {
        let old = managed_gateway("ClusterALBInstance.main");
        let mut new = old.clone();
        new["spec"]["listeners"][0]["port"] = json!(8080);
        let by = |user, operation, object, old_object| {
            gateway(
                &request(operation, "Gateway", "team", user, object, old_object),
                &editors(),
            )
        };
        let Verdict::Deny(403, message) = by("alice", Operation::Update, Some(&new), Some(&old))
        else {
            panic!("a user's edit is refused");
        };
        assert!(
            message.starts_with(
                "spec.listeners[0].port: Gateway team/x is managed by ClusterALBInstance main"
            ),
            "{message}"
        );
        assert_eq!(
            by(CONTROLLER, Operation::Update, Some(&new), Some(&old)),
            Verdict::allow()
        );
        let Verdict::Deny(403, message) = by("alice", Operation::Delete, None, Some(&old)) else {
            panic!("a user's deletion is refused");
        };
        assert!(
            message.contains("it goes when that instance is deleted"),
            "{message}"
        );
        assert_eq!(
            by(SYSTEM_USERS[0], Operation::Delete, None, Some(&old)),
            Verdict::allow(),
            "the garbage collector deletes it with its instances"
        );
        // Finalizers (and what the server keeps) are anyone's, so deletions finish.
        let mut finalized = old.clone();
        finalized["metadata"]["finalizers"] = json!(["example.com/keep"]);
        finalized["metadata"]["resourceVersion"] = json!("6");
        finalized["status"] = json!({"conditions": []});
        assert_eq!(
            by("alice", Operation::Update, Some(&finalized), Some(&old)),
            Verdict::allow()
        );
        // Taking the labels off is an edit of them.
        let mut unlabelled = old.clone();
        unlabelled["metadata"]["labels"] = json!({});
        let Verdict::Deny(_, message) =
            by("alice", Operation::Update, Some(&unlabelled), Some(&old))
        else {
            panic!("removing the labels is refused");
        };
        assert!(
            message.starts_with("metadata.labels[alb.deckhouse.io/instance]"),
            "{message}"
        );
        // Creating a Gateway that claims to be managed.
        let Verdict::Deny(_, message) = by("alice", Operation::Create, Some(&old), None) else {
            panic!("a forged managed Gateway is refused");
        };
        assert!(
            message.starts_with("metadata.labels[app.kubernetes.io/managed-by]"),
            "{message}"
        );
        // Others' Gateways, and the status subresource, are not this webhook's.
        let users = json!({"metadata": {"labels": {}}, "spec": {}});
        assert_eq!(
            by("alice", Operation::Delete, None, Some(&users)),
            Verdict::allow()
        );
        let mut status = request(
            Operation::Update,
            "Gateway",
            "team",
            "alice",
            Some(&new),
            Some(&old),
        );
        status.sub_resource = "status";
        assert_eq!(gateway(&status, &editors()), Verdict::allow());
    }

    fn listener_set_object(namespace: &str, name: &str, listeners: Value) -> Value {
        json!({"metadata": {"namespace": namespace, "name": name},
            "spec": {"parentRef": {"name": "shop", "namespace": "team"}, "listeners": listeners}})
    }

    #[test]
    fn listener_sets_stay_with_their_gateway_and_are_warned_of_claimed_ports() {
        let parent = managed_gateway("ClusterALBInstance.main");
        let mine = listener_set_object(
            "team",
            "x",
            json!([{"name": "a", "port": 8443, "hostname": "a.example.com", "protocol": "HTTPS"},
                {"name": "b", "port": 8443, "hostname": "b.example.com", "protocol": "HTTPS"}]),
        );
        let create = request(
            Operation::Create,
            "ListenerSet",
            "team",
            "alice",
            Some(&mine),
            None,
        );
        assert_eq!(
            listener_set_parent(&create),
            Some(ObjectKey::new("team", "shop"))
        );
        let other = listener_set_object(
            "team",
            "other",
            json!([{"name": "bee", "port": 8443, "hostname": "b.example.com", "protocol": "HTTPS"}]),
        );
        assert_eq!(
            listener_set(&create, Some(&parent), std::slice::from_ref(&other)),
            Verdict::Allow(vec![
                "spec.listeners[1]: port 8443 with hostname b.example.com is already claimed on Gateway team/shop by ListenerSet team/other (listener bee); the younger listener is Conflicted and not served".to_owned()
            ]),
            "a claimed port and hostname is admitted with a warning"
        );
        // Its own earlier version is no sibling; another hostname is free.
        let earlier = listener_set_object("team", "x", mine["spec"]["listeners"].clone());
        assert_eq!(
            listener_set(&create, Some(&parent), &[earlier]),
            Verdict::allow()
        );
        let elsewhere = listener_set_object(
            "team",
            "other",
            json!([{"name": "c", "port": 8443, "hostname": "c.example.com"}]),
        );
        assert_eq!(
            listener_set(&create, Some(&parent), &[elsewhere]),
            Verdict::allow()
        );
        // Another class's Gateway is not ours to police.
        let mut foreign = parent.clone();
        foreign["spec"]["gatewayClassName"] = json!("other");
        assert_eq!(
            listener_set(&create, Some(&foreign), &[other]),
            Verdict::allow()
        );
        // An ALBInstance's Gateway takes ListenerSets from its namespace only.
        let namespaced = managed_gateway("ALBInstance.shop");
        let visiting = listener_set_object("guests", "x", json!([]));
        let from_elsewhere = request(
            Operation::Create,
            "ListenerSet",
            "guests",
            "alice",
            Some(&visiting),
            None,
        );
        let Verdict::Deny(422, message) = listener_set(&from_elsewhere, Some(&namespaced), &[])
        else {
            panic!("a ListenerSet from another namespace is refused");
        };
        assert!(
            message.starts_with(
                "spec.parentRef.namespace: Gateway team/shop belongs to ALBInstance team/shop"
            ),
            "{message}"
        );
        assert_eq!(
            listener_set(&from_elsewhere, Some(&parent), &[]),
            Verdict::allow(),
            "a ClusterALBInstance's Gateway takes them from everywhere"
        );
    }

    #[test]
    fn a_route_naming_a_missing_listener_is_warned_about() {
        let route_object = json!({"spec": {"parentRefs": [
            {"name": "shop", "namespace": "team", "sectionName": "d8-htps"},
            {"name": "shop", "namespace": "team", "sectionName": "d8-http"},
            {"name": "svc", "kind": "Service", "group": ""}]}});
        let create = request(
            Operation::Create,
            "HTTPRoute",
            "apps",
            "alice",
            Some(&route_object),
            None,
        );
        let parents = route_parents(&create);
        assert_eq!(
            parents,
            [
                (0, ObjectKey::new("team", "shop")),
                (1, ObjectKey::new("team", "shop"))
            ]
        );
        let gateway = managed_gateway("ClusterALBInstance.main");
        let found: Vec<(usize, Value)> = parents
            .into_iter()
            .map(|(n, _)| (n, gateway.clone()))
            .collect();
        let Verdict::Allow(warnings) = route(&create, &found) else {
            panic!("a route without annotations is not refused");
        };
        assert_eq!(
            warnings,
            [
                "spec.parentRefs[0].sectionName: Gateway team/shop has no listener \"d8-htps\" (its listeners: d8-http); the route does not attach there",
                "spec.parentRefs[1]: listener(s) d8-http of Gateway team/shop are reserved for the platform (health checks, HTTP-01, its own routes); publish applications through a ListenerSet of their own"
            ]
        );
        let whole = json!({"spec": {"parentRefs": [{"name": "shop", "namespace": "team"}]}});
        let attach = request(
            Operation::Create,
            "HTTPRoute",
            "apps",
            "alice",
            Some(&whole),
            None,
        );
        let Verdict::Allow(warnings) = route(&attach, &[(0, gateway.clone())]) else {
            panic!("warned, not refused");
        };
        assert!(warnings[0].contains("d8-http and d8-https"), "{warnings:?}");
        let mut plain = gateway.clone();
        plain["metadata"]["labels"] = json!({});
        let Verdict::Allow(warnings) = route(&attach, &[(0, plain)]) else {
            panic!("allowed");
        };
        assert!(
            warnings.is_empty(),
            "a Gateway of the user's own: {warnings:?}"
        );
    }

    #[test]
    fn a_malformed_alb_annotation_refuses_the_route_naming_it() {
        let annotated = |annotations: Value| json!({"metadata": {"annotations": annotations}, "spec": {"parentRefs": []}});
        let verdict = |object: &Value, kind: &str| {
            route(
                &request(Operation::Create, kind, "apps", "alice", Some(object), None),
                &[],
            )
        };
        let malformed = annotated(json!({"alb.network.deckhouse.io/limit-rps": "fast"}));
        assert_eq!(
            verdict(&malformed, "HTTPRoute"),
            Verdict::Deny(
                422,
                "metadata.annotations[alb.network.deckhouse.io/limit-rps]: \"fast\" is not a positive integer".into()
            )
        );
        assert_eq!(
            verdict(&malformed, "GRPCRoute"),
            Verdict::allow(),
            "only HTTPRoutes carry them"
        );
        let Verdict::Allow(warnings) = verdict(
            &annotated(json!({
                "alb.network.deckhouse.io/limit-rsp": "5",
                "alb.network.deckhouse.io/response-headers-to-add": "{\"X-A\": \"1\"}"
            })),
            "HTTPRoute",
        ) else {
            panic!("a typo and a deprecated annotation are warnings");
        };
        assert_eq!(
            warnings,
            [
                "metadata.annotations[alb.network.deckhouse.io/limit-rsp]: not an annotation of the ALB; it does nothing",
                "metadata.annotations[alb.network.deckhouse.io/response-headers-to-add]: deprecated; use a ResponseHeaderModifier filter"
            ]
        );
    }

    #[test]
    fn additional_ports_may_not_take_the_proxys_own() {
        let instance = json!({"spec": {"gatewayName": "main", "inlet": {"type": "LoadBalancer",
            "additionalPorts": [{"port": 5432}, {"port": 19001}, {"port": 443}, {"port": 9000}]}}});
        let review = request(
            Operation::Create,
            "ClusterALBInstance",
            "",
            "alice",
            Some(&instance),
            None,
        );
        let Verdict::Deny(422, message) = super::instance(&review, None) else {
            panic!("colliding ports are refused");
        };
        assert_eq!(
            message,
            "spec.inlet.additionalPorts[1].port: 19001 is served at container port 19001, the supervisor's metrics port in the proxy pod; pick another; spec.inlet.additionalPorts[2].port: 443 is the Gateway's HTTPS port (listener d8-https); pick another"
        );
        let fine = json!({"spec": {"gatewayName": "main", "inlet": {"type": "LoadBalancer",
            "additionalPorts": [{"port": 5432}, {"port": 9000}]}}});
        let review = request(
            Operation::Create,
            "ClusterALBInstance",
            "",
            "alice",
            Some(&fine),
            None,
        );
        assert_eq!(super::instance(&review, None), Verdict::allow());
    }

    #[test]
    fn differences_are_named_by_path() {
        let a = json!({"spec": {"listeners": [{"port": 80}], "x": 1}, "metadata": {"labels": {"a.io/b": "1"}}});
        let mut b = a.clone();
        b["spec"]["listeners"][0]["port"] = json!(81);
        assert_eq!(
            first_difference(&a, &b).as_deref(),
            Some("spec.listeners[0].port")
        );
        let mut c = a.clone();
        c["metadata"]["labels"]["a.io/b"] = json!("2");
        assert_eq!(
            first_difference(&a, &c).as_deref(),
            Some("metadata.labels[a.io/b]")
        );
        let mut d = a.clone();
        d["spec"]["listeners"] = json!([]);
        assert_eq!(first_difference(&a, &d).as_deref(), Some("spec.listeners"));
        assert_eq!(first_difference(&a, &a), None);
    }
}
