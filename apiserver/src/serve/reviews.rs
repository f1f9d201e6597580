//! The kinds that are asked, not stored: a created review comes back with its `status` and
//! is kept nowhere — `TokenReview` and `SelfSubjectReview` (`kubectl auth whoami`) of
//! authentication.k8s.io; `SubjectAccessReview`, `LocalSubjectAccessReview`,
//! `SelfSubjectAccessReview` (`kubectl auth can-i`) and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`) of authorization.k8s.io — and the TokenRequest of a
//! ServiceAccount (`POST …/serviceaccounts/<name>/token`, `kubectl create token`).

use serde_json::{Value, json};

use crate::access::rbac::{self, Attributes};
use crate::access::user::UserInfo;
use crate::objects::errors::{ApiError, FieldCause};
use crate::objects::resources::ResourceType;
use crate::serve::request::ApiState;
use crate::storage::store::StoreKey;

/// The attributes a SubjectAccessReview's spec asks about.
fn asked(spec: &Value, namespace: Option<&str>) -> Result<Attributes, ApiError> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    if let Some(resource) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        let mut attrs = Attributes::resource(
            &text(&resource["verb"]),
            &text(&resource["group"]),
            &text(&resource["resource"]),
            namespace.unwrap_or(resource["namespace"].as_str().unwrap_or_default()),
            &text(&resource["name"]),
        );
        attrs.subresource = text(&resource["subresource"]);
        return Ok(attrs);
    }
    if let Some(path) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        return Ok(Attributes::non_resource(
            &text(&path["verb"]),
            &text(&path["path"]),
        ));
    }
    Err(ApiError::invalid(
        "SubjectAccessReview",
        "",
        vec![FieldCause::new(
            "FieldValueRequired",
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
    ))
}

fn decision(state: &ApiState, user: &UserInfo, attrs: &Attributes) -> Value {
    // As the RBAC authorizer: a reason for an allow, none for a denial (no rule matched).
    if rbac::allowed(&state.store, user, attrs) {
        json!({"allowed": true, "reason": "allowed by RBAC"})
    } else {
        json!({"allowed": false})
    }
}

/// Answers the review `object` of kind `rt` created by `user`.
pub fn create(
    state: &ApiState,
    user: &UserInfo,
    rt: &ResourceType,
    namespace: Option<&str>,
    mut object: Value,
) -> Result<Value, ApiError> {
    let spec = object["spec"].clone();
    let status = match rt.kind.as_str() {
        "TokenReview" => {
            let token = spec["token"].as_str().unwrap_or_default();
            let audiences = audiences(&spec);
            match crate::serve::authn::user_of_token(state, token, &audiences) {
                Ok(reviewed) => {
                    json!({"authenticated": true, "user": reviewed.to_json(), "audiences": audiences})
                }
                Err(why) => json!({"authenticated": false, "error": why}),
            }
        }
        "SelfSubjectReview" => json!({"userInfo": user.to_json()}),
        "SelfSubjectAccessReview" => decision(state, user, &asked(&spec, None)?),
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let subject = UserInfo {
                username: spec["user"].as_str().unwrap_or_default().to_owned(),
                uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
                groups: spec["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| g.as_str().map(str::to_owned))
                    .collect(),
            };
            decision(state, &subject, &asked(&spec, namespace)?)
        }
        "SelfSubjectRulesReview" => {
            let namespace = spec["namespace"].as_str().unwrap_or_default();
            let rules = rbac::rules_for(&state.store, user, namespace);
            let resource_rules: Vec<Value> = rules
                .iter()
                .filter(|r| r["nonResourceURLs"].as_array().is_none_or(Vec::is_empty))
                .map(|r| {
                    json!({"verbs": r["verbs"], "apiGroups": r["apiGroups"],
                        "resources": r["resources"], "resourceNames": r["resourceNames"]})
                })
                .collect();
            let non_resource_rules: Vec<Value> = rules
                .iter()
                .filter(|r| {
                    r["nonResourceURLs"]
                        .as_array()
                        .is_some_and(|u| !u.is_empty())
                })
                .map(|r| json!({"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]}))
                .collect();
            let mut status = json!({"resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules, "incomplete": false});
            if user.groups.iter().any(|g| g == "system:masters") {
                status["resourceRules"] =
                    json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]);
                status["nonResourceRules"] = json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]);
            }
            status
        }
        other => {
            return Err(ApiError::method_not_allowed(format!(
                "{other} is not a review"
            )));
        }
    };
    object["apiVersion"] = json!(rt.api_version());
    object["kind"] = json!(rt.kind);
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    object["status"] = status;
    Ok(object)
}

/// The audiences a spec names (`spec.audiences`), the API server's when none.
fn audiences(spec: &Value) -> Vec<String> {
    let named: Vec<String> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    if named.is_empty() {
        vec![crate::access::tokens::ISSUER.to_owned()]
    } else {
        named
    }
}

/// A token for the ServiceAccount `namespace/name`, as the TokenRequest `request` asks.
pub fn token_request(
    state: &ApiState,
    namespace: &str,
    name: &str,
    mut request: Value,
) -> Result<Value, ApiError> {
    let key = StoreKey::new("serviceaccounts", namespace, name);
    let account = state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found("serviceaccounts", name))?;
    let uid = account["metadata"]["uid"].as_str().unwrap_or_default();
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(crate::access::tokens::DEFAULT_EXPIRATION);
    if seconds < crate::access::tokens::MIN_EXPIRATION {
        return Err(ApiError::invalid(
            "TokenRequest",
            name,
            vec![FieldCause::new(
                "FieldValueInvalid",
                "spec.expirationSeconds",
                format!(
                    "Invalid value: {seconds}: may not specify a duration less than {} seconds",
                    crate::access::tokens::MIN_EXPIRATION
                ),
            )],
        ));
    }
    let audiences = audiences(&request["spec"]);
    let issued = crate::access::tokens::unix_now();
    let token = state
        .signer
        .issue(namespace, name, uid, &audiences, issued, seconds);
    let expires = chrono::DateTime::from_timestamp(issued + seconds, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] = json!({"name": name, "namespace": namespace,
        "creationTimestamp": null});
    request["spec"]["audiences"] = json!(audiences);
    request["spec"]["expirationSeconds"] = json!(seconds);
    request["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(request)
}
