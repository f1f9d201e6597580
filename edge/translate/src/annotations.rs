//! What an HTTPRoute's `alb.network.deckhouse.io/*` annotations ask, decided for the route:
//! read once per route ([`fairlead_edge_model::annotations`]) and shared by all its entries.
//! A malformed value rejects the route (`Accepted=False`, `UnsupportedValue`, the message
//! naming the annotation): a route is never served without the protection or behaviour it
//! asks for. `rewrite-target` is checked
//! against each rule's `RegularExpression` path matches (the groups it names must exist).
//! `tls-disable-protocol` shapes the HTTPS chains of the route's hostnames (the IR's
//! `http1_chains`).

use std::sync::Arc;

use fairlead_edge_model::annotations::{AnnotationError, Annotations, PREFIX};
use fairlead_edge_model::input::{HttpRule, UrlRewrite};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What every route without ALB annotations shares (most routes, and every GRPCRoute: they
/// cost no allocation).
static NONE: std::sync::LazyLock<Arc<Annotations>> = std::sync::LazyLock::new(Arc::default);

/// The annotations of a route that carries none.
pub(crate) fn none() -> Arc<Annotations> {
    NONE.clone()
}

/// Whether `annotations` ask nothing (the IR leaves them out).
pub fn asks_nothing(annotations: &Arc<Annotations>) -> bool {
    annotations.is_empty()
}

/// The annotations that may name a Secret or ConfigMap: a route carrying one is translated
/// afresh every time (its translation depends on the object, which the memo does not follow).
const NAMING_SECRETS: &[&str] = &["basic-auth-secret", "backend-tls-settings", "mod-security"];

/// Whether the route's translation may read a Secret or ConfigMap ([`NAMING_SECRETS`]).
pub(crate) fn reads_secrets(metadata: &ObjectMeta) -> bool {
    metadata.annotations.as_ref().is_some_and(|a| {
        NAMING_SECRETS
            .iter()
            .any(|name| a.contains_key(&format!("{PREFIX}{name}")))
    })
}

/// The route's annotations, or why the route is rejected.
pub(crate) fn read(metadata: &ObjectMeta) -> Result<Arc<Annotations>, String> {
    let Some(all) = metadata
        .annotations
        .as_ref()
        .filter(|a| a.keys().any(|k| k.starts_with(PREFIX)))
    else {
        return Ok(none());
    };
    let annotations = Annotations::read(all).map_err(|e| e.to_string())?;
    if annotations.is_empty() {
        return Ok(none());
    }
    Ok(Arc::new(annotations))
}

/// What the owner of the route of `metadata` is told in a Warning Event: that
/// `response-headers-to-add` is deprecated (Deckhouse's documentation says so; it is
/// served all the same).
pub(crate) fn notices(metadata: &ObjectMeta) -> Vec<crate::status::Notice> {
    let deprecated = format!("{PREFIX}response-headers-to-add");
    let carries = metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(&deprecated));
    if !carries {
        return Vec::new();
    }
    vec![crate::status::Notice {
        reason: "DeprecatedAnnotation",
        message: format!(
            "metadata.annotations[{deprecated}] is deprecated and served for now; add the headers with a ResponseHeaderModifier filter"
        ),
        generation: metadata.generation,
    }]
}

/// Checks `rewrite-target` against rule `field`: the groups it names exist in each of the
/// rule's `RegularExpression` path matches, and the rule rewrites no path of its own.
pub(crate) fn check_rule(
    annotations: &Annotations,
    field: &str,
    rule: &HttpRule,
    rewrite: Option<&UrlRewrite>,
) -> Result<(), String> {
    let Some(target) = &annotations.traffic.rewrite_target else {
        return Ok(());
    };
    let wanted = fairlead_edge_model::annotations::traffic::highest_group(target);
    let mut applies = false;
    for (m, spec) in rule.matches.iter().enumerate() {
        let Some(path) = &spec.path else { continue };
        if path.type_.as_deref() != Some("RegularExpression") {
            continue;
        }
        applies = true;
        let pattern = path.value.as_deref().unwrap_or("/");
        let groups = regex::Regex::new(pattern)
            .map(|r| r.captures_len() - 1)
            .unwrap_or(0);
        if usize::try_from(wanted).unwrap_or(usize::MAX) > groups {
            return Err(AnnotationError::new(
                "rewrite-target",
                format!(
                    "{target:?} names group \\{wanted}, but {field}.matches[{m}].path.value {pattern:?} has {groups}"
                ),
            )
            .to_string());
        }
    }
    if applies && rewrite.is_some_and(|r| r.path.is_some()) {
        return Err(AnnotationError::new(
            "rewrite-target",
            format!("{field} rewrites its path with a URLRewrite filter already"),
        )
        .to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn rule(path: &str) -> HttpRule {
        serde_json::from_value(serde_json::json!({
            "matches": [{"path": {"type": "RegularExpression", "value": path}}]
        }))
        .unwrap()
    }

    #[test]
    fn only_malformed_values_refuse_the_route() {
        assert!(read(&meta(&[("auth-url", "http://auth.example.com/")])).is_ok());
        assert!(read(&meta(&[("mod-security", "{\"mode\":\"on\"}")])).is_ok());
        let Err(message) = read(&meta(&[(
            "mod-security",
            "{\"mode\":\"on\",\"preset\":\"x\"}",
        )])) else {
            panic!("an unknown preset");
        };
        assert!(
            message.contains("mod-security") && message.contains("preset"),
            "{message}"
        );
        assert!(read(&meta(&[("limit-rps", "5")])).is_ok());
        assert!(read(&ObjectMeta::default()).unwrap().is_empty());
    }

    #[test]
    fn a_rewrite_names_only_groups_its_matches_have() {
        let a = read(&meta(&[("rewrite-target", "/v2/\\2")])).unwrap();
        assert!(check_rule(&a, "spec.rules[0]", &rule("/api/(v1)/(.*)"), None).is_ok());
        let Err(message) = check_rule(&a, "spec.rules[0]", &rule("/api/(.*)"), None) else {
            panic!("a group the match lacks");
        };
        assert!(
            message.contains("rewrite-target") && message.contains("spec.rules[0].matches[0]"),
            "{message}"
        );
        let prefix: HttpRule = serde_json::from_value(serde_json::json!({
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}]
        }))
        .unwrap();
        assert!(
            check_rule(&a, "spec.rules[0]", &prefix, None).is_ok(),
            "rules without expressions are not rewritten"
        );
    }
}
