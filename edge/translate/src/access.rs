//! Who may pass a route, decided: `basic-auth-secret` resolved to the htpasswd users of the
//! Secret's `auth` key (ingress-nginx's), under `satisfy: any` the allowlist's ranges
//! that pass without credentials, and the external authentication service of `auth-url`
//! (asked after basic auth, whatever `satisfy` says, as ingress-nginx's `auth_request`). A Secret in another namespace is read only under a
//! ReferenceGrant (`from: HTTPRoute` of the route's namespace, `to: Secret`); one that cannot
//! be read, or whose users the proxy cannot check, leaves the route [`Guard::shut`]: it
//! answers 503 and never reaches its backends.

use std::sync::Arc;

use fairlead_edge_model::annotations::{Annotations, ExternalAuth, Satisfy};
use fairlead_edge_model::input::{GATEWAY_GROUP, Input};
use fairlead_edge_model::instance::Cidr;

use crate::refs::{Grants, Unresolved};

/// A route's guard: the users that pass, and the ranges that pass without credentials. Its
/// `Debug` shows how many users, not their hashes.
#[derive(Clone, Default, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Guard {
    /// The htpasswd text of the users (never written out: the IR shows how many).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "users")]
    pub users: Option<String>,
    /// `satisfy: any`: client ranges that pass without credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub any_from: Option<Vec<Cidr>>,
    /// `auth-url`: the external authentication service asked about every request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalAuth>,
    /// The guard cannot be applied: the route answers 503.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shut: bool,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("users", &self.users.as_deref().map(|t| t.lines().count()))
            .field("any_from", &self.any_from)
            .field("external", &self.external)
            .field("shut", &self.shut)
            .finish()
    }
}

fn users<S: serde::Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    let count = text
        .as_deref()
        .and_then(|t| fairlead_edge_model::htpasswd::parse(t).ok())
        .map_or(0, |u| u.len());
    s.serialize_str(&format!("{count} users"))
}

impl Guard {
    /// The guard `annotations` ask of a route in `namespace`; `None` without basic auth or
    /// an external service. A Secret that cannot be used is the [`Unresolved`] reference.
    pub fn of(
        annotations: &Annotations,
        namespace: &str,
        input: &Input,
        grants: &Grants<'_>,
    ) -> (Option<Arc<Self>>, Option<Unresolved>) {
        let access = &annotations.access;
        let external = access.external.clone();
        let Some(basic) = &access.basic_auth else {
            let guard = external.map(|external| {
                Arc::new(Self {
                    external: Some(external),
                    ..Self::default()
                })
            });
            return (guard, None);
        };
        let field = "metadata.annotations[alb.network.deckhouse.io/basic-auth-secret]";
        let secret_namespace = basic.secret.namespace_or(namespace);
        let name = &basic.secret.name;
        let shut = |reason: &'static str, message: String| {
            (
                Some(Arc::new(Self {
                    shut: true,
                    ..Self::default()
                })),
                Some(Unresolved { reason, message }),
            )
        };
        if !grants.allows(
            (GATEWAY_GROUP, "HTTPRoute", namespace),
            ("", "Secret", secret_namespace, name),
        ) {
            return shut(
                "RefNotPermitted",
                format!(
                    "{field}: Secret {secret_namespace}/{name} is in another namespace and no ReferenceGrant there allows it"
                ),
            );
        }
        let text = crate::refs::secret(input, secret_namespace, name)
            .and_then(|s| s.data.as_ref()?.get("auth"))
            .map(|v| String::from_utf8_lossy(&v.0).into_owned());
        let Some(text) = text else {
            return shut(
                "InvalidSecret",
                format!(
                    "{field}: Secret {secret_namespace}/{name} not found, or without the key auth"
                ),
            );
        };
        if let Err(e) = fairlead_edge_model::htpasswd::parse(&text) {
            return shut(
                "InvalidSecret",
                format!("{field}: Secret {secret_namespace}/{name}: auth: {e}"),
            );
        }
        let guard = Self {
            users: Some(text),
            any_from: (access.satisfy == Satisfy::Any)
                .then(|| access.allow_from.clone())
                .flatten(),
            external,
            shut: false,
        };
        (Some(Arc::new(guard)), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        Annotations::read(
            &pairs
                .iter()
                .map(|(k, v)| {
                    (
                        format!("{}{k}", fairlead_edge_model::annotations::PREFIX),
                        (*v).to_owned(),
                    )
                })
                .collect(),
        )
        .unwrap()
    }

    const USERS: &str = "apiVersion: v1
kind: Secret
metadata: {name: users, namespace: team}
type: Opaque
data: {auth: YWxpY2U6e1NIQX01ZW42RzZNZXpScm9UM1hLcWtkUE9tWS9CZlE9}
---
apiVersion: v1
kind: Secret
metadata: {name: plain, namespace: team}
type: Opaque
data: {auth: YWxpY2U6c2VjcmV0}
";

    #[test]
    fn users_come_from_a_secret_the_route_may_read() {
        let input = Input::from_yaml(USERS).unwrap();
        let grants = Grants::new(&input);
        let asks = annotations(&[("basic-auth-secret", "team/users")]);
        let (guard, unresolved) = Guard::of(&asks, "team", &input, &grants);
        assert!(unresolved.is_none());
        let guard = guard.unwrap();
        assert!(!guard.shut && guard.users.as_deref().unwrap().starts_with("alice:{SHA}"));
        let (elsewhere, unresolved) = Guard::of(&asks, "apps", &input, &grants);
        assert!(elsewhere.unwrap().shut, "no grant: shut, never open");
        assert_eq!(unresolved.unwrap().reason, "RefNotPermitted");
        let plain = annotations(&[("basic-auth-secret", "plain")]);
        let (guard, unresolved) = Guard::of(&plain, "team", &input, &grants);
        assert!(guard.unwrap().shut, "a plain-text password is not checked");
        assert!(unresolved.unwrap().message.contains("only bcrypt"));
    }

    #[test]
    fn satisfy_any_lets_the_allowlist_pass_without_credentials() {
        let input = Input::from_yaml(USERS).unwrap();
        let grants = Grants::new(&input);
        let any = annotations(&[
            ("basic-auth-secret", "users"),
            ("whitelist-source-range", "10.0.0.0/8"),
            ("satisfy", "any"),
        ]);
        let (guard, _) = Guard::of(&any, "team", &input, &grants);
        assert_eq!(guard.unwrap().any_from.as_ref().map(Vec::len), Some(1));
        let all = annotations(&[
            ("basic-auth-secret", "users"),
            ("whitelist-source-range", "10.0.0.0/8"),
        ]);
        let (guard, _) = Guard::of(&all, "team", &input, &grants);
        assert_eq!(guard.unwrap().any_from, None, "satisfy: all — both apply");
    }
}
