//! The WAF a route asks for (`mod-security`), decided: the [`RuleSet`] its annotation and
//! ConfigMap make, in the documented order, checked by the [`Compile`] the translation was
//! given (the control plane's is the WAF engine itself, so a rule set that does not compile
//! is named in the route's status with the engine's message). `mode: off` asks for nothing.
//! A WAF that cannot be applied leaves the route [`Firewall::shut`]: it answers 503 and never
//! reaches its backends; a ConfigMap in another namespace is read only under a ReferenceGrant
//! (`from: HTTPRoute` of the route's namespace, `to: ConfigMap`). A route's own rules may not
//! reach files or programs ([`fairlead_edge_model::annotations::waf::reaching`]).

use std::sync::Arc;

use fairlead_edge_model::annotations::Annotations;
use fairlead_edge_model::annotations::waf::{self, Mode, RuleSet};
use fairlead_edge_model::input::{GATEWAY_GROUP, Input};
use fairlead_edge_model::names;

use crate::refs::{Grants, Unresolved};

/// What checks a rule set: the WAF engine compiling it.
pub trait Compile: Send + Sync + std::fmt::Debug {
    /// Whether `rules` compile; the engine's message when they do not.
    fn compile(&self, rules: &RuleSet) -> Result<(), String>;
}

/// A check that takes every rule set (translations outside the control plane: goldens, the
/// graph, benchmarks).
#[derive(Debug, Default)]
pub struct Unchecked;

impl Compile for Unchecked {
    fn compile(&self, _: &RuleSet) -> Result<(), String> {
        Ok(())
    }
}

/// What a build without the WAF engine says of every rule set: no route asking for the WAF
/// is served without it.
#[derive(Debug, Default)]
pub struct Missing;

impl Compile for Missing {
    fn compile(&self, _: &RuleSet) -> Result<(), String> {
        Err(
            "this fairlead is built without the WAF engine (cargo feature `waf`, libmodsecurity)"
                .to_owned(),
        )
    }
}

/// The status reason of a WAF configuration that cannot be used.
pub const INVALID: &str = "InvalidWAFConfiguration";

/// A route's WAF, decided.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Firewall {
    /// What the WAF compiles (absent when shut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<RuleSet>,
    /// The rule set's digest: routes with the same one share a compiled set.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// The WAF cannot be applied: the route answers 503.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shut: bool,
    /// Why its configuration cannot be used: the route is `Accepted=False` ([`INVALID`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
}

/// What a route's WAF is not: a reference that does not resolve (`ResolvedRefs=False`); a
/// configuration that cannot be used is the firewall's own [`Firewall::invalid`].
pub type Problem = Unresolved;

impl Firewall {
    fn shut() -> Arc<Self> {
        Arc::new(Self {
            rules: None,
            digest: String::new(),
            shut: true,
            invalid: None,
        })
    }

    fn invalid(message: String) -> (Option<Arc<Self>>, Option<Problem>) {
        let firewall = Self {
            invalid: Some(message),
            ..Self::shut().as_ref().clone()
        };
        (Some(Arc::new(firewall)), None)
    }

    /// The WAF `annotations` ask of a route in `namespace`, checked by `compile`; `None` when
    /// none (or `mode: off`).
    pub fn of(
        annotations: &Annotations,
        namespace: &str,
        input: &Input,
        grants: &Grants<'_>,
        compile: &dyn Compile,
    ) -> (Option<Arc<Self>>, Option<Problem>) {
        let Some(asked) = annotations.waf.as_ref().filter(|w| w.mode != Mode::Off) else {
            return (None, None);
        };
        let field = "metadata.annotations[alb.network.deckhouse.io/mod-security]";
        let rules = match &asked.config_ref {
            None => String::new(),
            Some(reference) => {
                let cm_namespace = reference.namespace.as_deref().unwrap_or(namespace);
                let name = &reference.name;
                if !grants.allows(
                    (GATEWAY_GROUP, "HTTPRoute", namespace),
                    ("", "ConfigMap", cm_namespace, name),
                ) {
                    return (
                        Some(Self::shut()),
                        Some(Unresolved {
                            reason: "RefNotPermitted",
                            message: format!(
                                "{field}: configRef: ConfigMap {cm_namespace}/{name} is in another namespace and no ReferenceGrant there allows it; the route answers 503"
                            ),
                        }),
                    );
                }
                match config_map_rules(input, cm_namespace, name, reference.key.as_deref()) {
                    Ok(rules) => rules,
                    Err(message) => {
                        return (
                            Some(Self::shut()),
                            Some(Unresolved {
                                reason: INVALID,
                                message: format!(
                                    "{field}: configRef: {message}; the route answers 503"
                                ),
                            }),
                        );
                    }
                }
            }
        };
        let own = format!("{rules}\n{}", asked.directives.join("\n"));
        if let Some(word) = waf::reaching(&own) {
            return Self::invalid(format!(
                "{field}: the route's rules use {word:?}, which reaches beyond the rules (files, programs, logs) and is not allowed; the route answers 503"
            ));
        }
        let set = RuleSet {
            mode: asked.mode,
            crs_paranoia: asked.crs_paranoia,
            rules,
            directives: asked.directives.clone(),
        };
        if let Err(message) = compile.compile(&set) {
            return Self::invalid(format!(
                "{field}: the rules do not compile: {message}; the route answers 503"
            ));
        }
        let digest = set.digest();
        (
            Some(Arc::new(Self {
                rules: Some(set),
                digest,
                shut: false,
                invalid: None,
            })),
            None,
        )
    }
}

/// A Gateway's [`names::WAF_CONDITION`]: whether some route attached to it asks for the WAF
/// (and can have it: `asking`, the names of its entries that do), so its proxy pods run the
/// WAF beside Envoy.
pub fn condition<'a>(
    asking: impl Iterator<Item = &'a str>,
    generation: Option<i64>,
) -> crate::status::Condition {
    let mut routes: Vec<&str> = asking.map(route_of).collect();
    routes.sort_unstable();
    routes.dedup();
    let (reason, message) = if routes.is_empty() {
        ("NotRequested", "no route asks for the WAF".to_owned())
    } else {
        (
            "Requested",
            format!(
                "{} route(s) ask for the WAF (mod-security); the proxies run it beside Envoy",
                routes.len()
            ),
        )
    };
    crate::status::Condition::new(
        names::WAF_CONDITION,
        !routes.is_empty(),
        reason,
        message,
        generation,
    )
}

/// The `namespace/name` of the route of an entry named `namespace/name/rule/i/match/j`.
pub fn route_of(entry: &str) -> &str {
    let mut slashes = entry.match_indices('/').map(|(i, _)| i);
    match slashes.nth(1) {
        Some(end) => &entry[..end],
        None => entry,
    }
}

/// The rules of ConfigMap `namespace/name`: the value of `key`, or of every key in sorted
/// order, continuation lines joined.
fn config_map_rules(
    input: &Input,
    namespace: &str,
    name: &str,
    key: Option<&str>,
) -> Result<String, String> {
    let map = input
        .config_maps
        .iter()
        .find(|c| {
            c.metadata.namespace.as_deref() == Some(namespace)
                && c.metadata.name.as_deref() == Some(name)
        })
        .ok_or_else(|| {
            format!("ConfigMap {namespace}/{name} not found, or it holds no SecLang directives")
        })?;
    let data = map.data.clone().unwrap_or_default();
    let texts: Vec<&String> = match key {
        Some(key) => vec![data.get(key).ok_or_else(|| {
            format!("ConfigMap {namespace}/{name} has no key {key:?} holding SecLang directives")
        })?],
        // A BTreeMap: sorted by key.
        None => data
            .iter()
            .filter(|(k, _)| *k != "ca.crt")
            .map(|(_, v)| v)
            .collect(),
    };
    Ok(texts
        .iter()
        .map(|t| waf::join_continuations(t))
        .collect::<Vec<_>>()
        .join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(value: &str) -> Annotations {
        Annotations::read(
            &[(
                format!("{}mod-security", fairlead_edge_model::annotations::PREFIX),
                value.to_owned(),
            )]
            .into(),
        )
        .unwrap()
    }

    const RULES: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: waf-rules, namespace: team}
data:
  b.conf: |
    SecRule ARGS:b \"@streq 2\" \\
        \"id:1002,phase:1,deny\"
  a.conf: 'SecRule ARGS:a \"@streq 1\" \"id:1001,phase:1,deny\"'
";

    #[derive(Debug)]
    struct Refuses;
    impl Compile for Refuses {
        fn compile(&self, rules: &RuleSet) -> Result<(), String> {
            if rules.directives.iter().any(|d| d.contains("Broken")) {
                return Err("Rules error. Expecting an action".into());
            }
            Ok(())
        }
    }

    #[test]
    fn the_rule_set_follows_the_documented_order() {
        let input = Input::from_yaml(RULES).unwrap();
        let grants = Grants::new(&input);
        let asks = annotations(
            r#"{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": 2,
                "configRef": {"name": "waf-rules"}, "directives": ["SecRuleRemoveById 942100"]}"#,
        );
        let (firewall, problem) = Firewall::of(&asks, "team", &input, &grants, &Refuses);
        assert_eq!(problem, None);
        let rules = firewall.unwrap().rules.clone().unwrap();
        assert_eq!(rules.crs_paranoia, Some(2));
        let (a, b) = (
            rules.rules.find("id:1001").unwrap(),
            rules.rules.find("id:1002").unwrap(),
        );
        assert!(a < b, "keys in sorted order: {}", rules.rules);
        assert!(
            rules.rules.contains("\"@streq 2\"     \"id:1002"),
            "joined: {}",
            rules.rules
        );
        assert_eq!(rules.directives, ["SecRuleRemoveById 942100"]);
        let off = annotations(r#"{"mode": "off", "preset": "owasp-crs"}"#);
        assert_eq!(
            Firewall::of(&off, "team", &input, &grants, &Refuses),
            (None, None)
        );
    }

    #[test]
    fn what_cannot_be_applied_shuts_the_route_and_says_why() {
        let input = Input::from_yaml(RULES).unwrap();
        let grants = Grants::new(&input);
        let elsewhere = annotations(
            r#"{"mode": "on", "configRef": {"namespace": "team", "name": "waf-rules"}}"#,
        );
        let (firewall, problem) = Firewall::of(&elsewhere, "apps", &input, &grants, &Refuses);
        assert!(firewall.unwrap().shut, "no grant: shut, never open");
        let Some(u) = problem else { panic!("resolved") };
        assert_eq!(u.reason, "RefNotPermitted");
        let missing =
            annotations(r#"{"mode": "on", "configRef": {"name": "waf-rules", "key": "c.conf"}}"#);
        let (firewall, problem) = Firewall::of(&missing, "team", &input, &grants, &Refuses);
        assert!(firewall.unwrap().shut);
        assert!(matches!(problem, Some(u) if u.reason == INVALID && u.message.contains("c.conf")));
        assert_eq!(route_of("team/shop/rule/0/match/1"), "team/shop");
        let broken = annotations(r#"{"mode": "on", "directives": ["SecRule Broken"]}"#);
        let (firewall, problem) = Firewall::of(&broken, "team", &input, &grants, &Refuses);
        let firewall = firewall.unwrap();
        assert!(firewall.shut && problem.is_none());
        assert!(
            firewall
                .invalid
                .as_deref()
                .unwrap()
                .contains("Expecting an action"),
            "{firewall:?}"
        );
        let reaching = annotations(r#"{"mode": "on", "directives": ["Include /etc/passwd"]}"#);
        let (firewall, _) = Firewall::of(&reaching, "team", &input, &grants, &Unchecked);
        let firewall = firewall.unwrap();
        assert!(firewall.shut && firewall.invalid.as_deref().unwrap().contains("\"include\""));
        let (firewall, _) = Firewall::of(
            &annotations(r#"{"mode": "on"}"#),
            "team",
            &input,
            &grants,
            &Missing,
        );
        assert!(
            firewall
                .unwrap()
                .invalid
                .as_deref()
                .unwrap()
                .contains("without the WAF engine")
        );
    }
}
