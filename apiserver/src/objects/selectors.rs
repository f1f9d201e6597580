//! Label selectors (every operator of the API: `=`, `==`, `!=`, `in`, `notin`, existence and
//! `!key`) and field selectors (`=`, `==`, `!=` on the fields the real server indexes).

use serde_json::Value;

/// A requirement of a label selector.
#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// A selector that does not parse, or names a field that cannot be selected on.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// Splits on commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn check_key(key: &str, whole: &str) -> Result<String, SelectorError> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_owned())
    } else {
        Err(SelectorError(format!(
            "unable to parse requirement: invalid label key {key:?} in {whole:?}"
        )))
    }
}

fn set_values(text: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("expected a parenthesised set in {whole:?}")))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let requirement = if let Some(key) = term.strip_prefix('!') {
                Requirement::DoesNotExist(check_key(key.trim(), text)?)
            } else if let Some((key, value)) = term.split_once("!=") {
                Requirement::NotEquals(check_key(key.trim(), text)?, value.trim().to_owned())
            } else if let Some((key, value)) = term.split_once("==") {
                Requirement::Equals(check_key(key.trim(), text)?, value.trim().to_owned())
            } else if let Some((key, value)) = term.split_once('=') {
                Requirement::Equals(check_key(key.trim(), text)?, value.trim().to_owned())
            } else if let Some((key, rest)) = term.split_once(" notin ") {
                Requirement::NotIn(check_key(key.trim(), text)?, set_values(rest, text)?)
            } else if let Some((key, rest)) = term.split_once(" in ") {
                Requirement::In(check_key(key.trim(), text)?, set_values(rest, text)?)
            } else {
                Requirement::Exists(check_key(term, text)?)
            };
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    /// Converts a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`); an absent
    /// or empty selector matches everything.
    pub fn from_object(selector: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
            let value = value.as_str().unwrap_or_default().to_owned();
            requirements.push(Requirement::Equals(key.clone(), value));
        }
        for expression in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = expression["key"].as_str().unwrap_or_default().to_owned();
            let values: Vec<String> = expression["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            requirements.push(match expression["operator"].as_str() {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::DoesNotExist(key),
                other => {
                    return Err(SelectorError(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            });
        }
        Ok(Self(requirements))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let get = |key: &str| labels.get(key).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// The selector as the real server prints one (`labels.Selector.String()`): requirements
/// sorted by key, set values sorted, `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = |r: &Requirement| match r {
            Requirement::Equals(k, _)
            | Requirement::NotEquals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k.clone(),
        };
        let mut requirements: Vec<&Requirement> = self.0.iter().collect();
        requirements.sort_by_key(|r| key(r));
        let set = |values: &[String]| {
            let mut values = values.to_vec();
            values.sort();
            values.join(",")
        };
        let terms: Vec<String> = requirements
            .into_iter()
            .map(|r| match r {
                Requirement::Equals(k, v) => format!("{k}={v}"),
                Requirement::NotEquals(k, v) => format!("{k}!={v}"),
                Requirement::In(k, vs) => format!("{k} in ({})", set(vs)),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", set(vs)),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
            })
            .collect();
        f.write_str(&terms.join(","))
    }
}

/// The fields every kind can be selected on, and those of particular kinds.
fn field_value<'a>(kind: &str, object: &'a Value, field: &str) -> Option<Option<&'a str>> {
    let value = match (kind, field) {
        (_, "metadata.name") => object["metadata"]["name"].as_str(),
        (_, "metadata.namespace") => object["metadata"]["namespace"].as_str(),
        ("Pod", "spec.nodeName") => object["spec"]["nodeName"].as_str(),
        ("Pod" | "Namespace", "status.phase") => object["status"]["phase"].as_str(),
        ("Secret", "type") => object["type"].as_str(),
        ("Event", "involvedObject.name") => object["involvedObject"]["name"].as_str(),
        ("Event", "involvedObject.kind") => object["involvedObject"]["kind"].as_str(),
        ("Event", "reason") => object["reason"].as_str(),
        _ => return None,
    };
    Some(value)
}

impl FieldSelector {
    /// Parses the `fieldSelector` parameter for a kind; unknown fields are rejected as the real
    /// server rejects them.
    pub fn parse(text: &str, kind: &str) -> Result<Self, SelectorError> {
        let probe = serde_json::json!({});
        let mut terms = Vec::new();
        for term in split_terms(text) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError(format!(
                    "invalid field selector {text:?}: expected field=value"
                )));
            };
            let field = field.trim();
            if field_value(kind, &probe, field).is_none() {
                return Err(SelectorError(format!("field label not supported: {field}")));
            }
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    /// Whether an object satisfies every term (a missing field counts as the empty string).
    pub fn matches(&self, kind: &str, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field_value(kind, object, field)
                .flatten()
                .unwrap_or_default();
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_the_real_server_prints_them() {
        let selector = LabelSelector::from_object(&serde_json::json!({
            "matchLabels": {"tier": "web", "app": "shop"},
            "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b", "a"]},
                {"key": "canary", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert_eq!(
            selector.to_string(),
            "app=shop,!canary,tier=web,zone notin (a,b)"
        );
        assert_eq!(LabelSelector::default().to_string(), "");
    }
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let obj = labelled(json!({"app": "web", "tier": "front"}));
        for (selector, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier in (front)", true),
            ("app=web,tier=back", false),
        ] {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&obj), expected, "{selector:?}");
        }
        assert!(LabelSelector::parse("a b c").is_err());
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn selector_objects() {
        let obj = labelled(json!({"app": "web", "tier": "front"}));
        let s = LabelSelector::from_object(&json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(s.matches(&obj));
        assert!(
            LabelSelector::from_object(&Value::Null)
                .unwrap()
                .matches(&obj)
        );
        let s = LabelSelector::from_object(
            &json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}),
        )
        .unwrap();
        assert!(!s.matches(&obj));
        assert!(
            LabelSelector::from_object(
                &json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})
            )
            .is_err()
        );
    }

    #[test]
    fn field_selectors_by_kind() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"},
                         "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let s = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", "Pod").unwrap();
        assert!(s.matches("Pod", &pod));
        let s = FieldSelector::parse("spec.nodeName=n2", "Pod").unwrap();
        assert!(!s.matches("Pod", &pod));
        let err = FieldSelector::parse("spec.nodeName=n1", "ConfigMap").unwrap_err();
        assert_eq!(err.0, "field label not supported: spec.nodeName");
        let secret = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls"});
        assert!(
            FieldSelector::parse("type=kubernetes.io/tls", "Secret")
                .unwrap()
                .matches("Secret", &secret)
        );
    }
}
