//! Who may pass a route: `whitelist-source-range` (client address ranges),
//! `basic-auth-secret` (htpasswd users in a Secret), `auth-url` with `auth-signin` and
//! `auth-response-headers` (an external authentication service, as ingress-nginx calls one),
//! and `satisfy` (whether the allowlist and basic auth must both pass, or either).

use serde::Serialize;

use super::AnnotationError;
use super::values::{self, is_header_name};
use crate::instance::Cidr;

/// The response headers of an external authentication service copied to the backend without
/// `auth-response-headers`: the user, e-mail, groups and preferred name that
/// oauth2-proxy-style authenticators (Deckhouse's DexAuthenticator among them) answer with.
pub const DEFAULT_AUTH_RESPONSE_HEADERS: &[&str] = &[
    "X-Auth-Request-User",
    "X-Auth-Request-Email",
    "X-Auth-Request-Groups",
    "X-Auth-Request-Preferred-Username",
];

/// Whether the allowlist and basic auth must both pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Satisfy {
    /// Both (the default).
    #[default]
    All,
    /// Either.
    Any,
}

/// A Secret named by an annotation: its namespace (the route's when absent) and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretRef {
    /// Namespace, if the annotation names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl SecretRef {
    fn read(annotation: &'static str, field: &str, text: &str) -> Result<Self, AnnotationError> {
        let (namespace, name) = values::reference(annotation, field, text)?;
        Ok(Self {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        })
    }

    /// Its namespace, the route's (`route_namespace`) when the annotation names none.
    pub fn namespace_or<'a>(&'a self, route_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(route_namespace)
    }
}

/// `basic-auth-secret`: htpasswd users in a Secret's `auth` key, as ingress-nginx reads them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BasicAuth {
    /// The Secret.
    pub secret: SecretRef,
}

/// `auth-url`, `auth-signin`, `auth-response-headers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuth {
    /// The service asked about every request (`http` or `https`, absolute).
    pub url: String,
    /// Where a `401` of the service sends the client (with `rd`, the original URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signin: Option<String>,
    /// Headers of the service's `2xx` answer copied to the request to the backend.
    pub response_headers: Vec<String>,
}

/// Who may pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// `whitelist-source-range`: the client addresses allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_from: Option<Vec<Cidr>>,
    /// `basic-auth-secret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
    /// `satisfy`.
    #[serde(skip_serializing_if = "is_all")]
    pub satisfy: Satisfy,
    /// `auth-url` and its companions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalAuth>,
}

fn is_all(s: &Satisfy) -> bool {
    *s == Satisfy::All
}

/// An absolute `http` or `https` URL.
fn http_url(annotation: &'static str, text: &str) -> Result<String, AnnotationError> {
    let text = text.trim();
    match url::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
            Ok(text.to_owned())
        }
        _ => Err(AnnotationError::new(
            annotation,
            format!("{text:?} is not an absolute http or https URL"),
        )),
    }
}

impl Access {
    /// Whether nothing is asked.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    pub(super) fn read<'a>(
        get: &impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Self, AnnotationError> {
        let allow_from = get("whitelist-source-range")
            .map(|text| {
                values::list("whitelist-source-range", text)?
                    .into_iter()
                    .map(|item| {
                        Cidr::parse(item).ok_or_else(|| {
                            AnnotationError::new(
                                "whitelist-source-range",
                                format!("{item:?} is not an address range (CIDR)"),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let basic_auth = get("basic-auth-secret")
            .map(|text| {
                SecretRef::read("basic-auth-secret", "", text).map(|secret| BasicAuth { secret })
            })
            .transpose()?;
        let satisfy = match get("satisfy").map(str::trim) {
            None | Some("all") => Satisfy::All,
            Some("any") => Satisfy::Any,
            Some(other) => {
                return Err(AnnotationError::new(
                    "satisfy",
                    format!("{other:?}: must be all or any"),
                ));
            }
        };
        let signin = get("auth-signin")
            .map(|text| {
                if text.contains('$') {
                    return Err(AnnotationError::new(
                        "auth-signin",
                        format!("{text:?}: nginx variables are not substituted; write the domain"),
                    ));
                }
                http_url("auth-signin", text)
            })
            .transpose()?;
        let response_headers = get("auth-response-headers")
            .map(|text| {
                values::list("auth-response-headers", text)?
                    .into_iter()
                    .map(|name| {
                        if is_header_name(name) {
                            Ok(name.to_owned())
                        } else {
                            Err(AnnotationError::new(
                                "auth-response-headers",
                                format!("{name:?} is not a header name"),
                            ))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let external = match get("auth-url") {
            Some(text) => Some(ExternalAuth {
                url: http_url("auth-url", text)?,
                signin,
                response_headers: DEFAULT_AUTH_RESPONSE_HEADERS
                    .iter()
                    .map(|h| (*h).to_owned())
                    .chain(response_headers.unwrap_or_default())
                    .collect(),
            }),
            None if signin.is_some() || response_headers.is_some() => {
                return Err(AnnotationError::new(
                    if signin.is_some() {
                        "auth-signin"
                    } else {
                        "auth-response-headers"
                    },
                    "has no effect without alb.network.deckhouse.io/auth-url",
                ));
            }
            None => None,
        };
        Ok(Self {
            allow_from,
            basic_auth,
            satisfy,
            external,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(pairs: &[(&str, &str)]) -> Result<Access, AnnotationError> {
        let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        Access::read(&|name: &str| map.get(name).copied())
    }

    #[test]
    fn allowlists_take_the_documented_forms() {
        let a = read(&[(
            "whitelist-source-range",
            "10.1.1.10/32, 10.2.2.0/24,192.0.2.7",
        )])
        .unwrap();
        let ranges: Vec<String> = a
            .allow_from
            .unwrap()
            .iter()
            .map(|c| format!("{}/{}", c.address, c.prefix))
            .collect();
        assert_eq!(ranges, ["10.1.1.10/32", "10.2.2.0/24", "192.0.2.7/32"]);
        let e = read(&[("whitelist-source-range", "10.0.0.0/8,nonsense")]).unwrap_err();
        assert_eq!(e.annotation, "whitelist-source-range");
        assert!(e.message.contains("\"nonsense\""), "{e}");
        assert!(read(&[("whitelist-source-range", "")]).is_err());
    }

    #[test]
    fn basic_auth_and_satisfy() {
        let a = read(&[("basic-auth-secret", "team/users"), ("satisfy", "any")]).unwrap();
        let secret = &a.basic_auth.unwrap().secret;
        assert_eq!(secret.namespace_or("apps"), "team");
        assert_eq!(a.satisfy, Satisfy::Any);
        let own = read(&[("basic-auth-secret", "users")]).unwrap();
        assert_eq!(own.basic_auth.unwrap().secret.namespace_or("apps"), "apps");
        assert_eq!(
            read(&[("satisfy", "some")]).unwrap_err().annotation,
            "satisfy"
        );
    }

    #[test]
    fn external_auth_takes_absolute_urls_and_adds_the_default_headers() {
        let a = read(&[
            ("auth-url", "https://auth.team.svc/dex-authenticator/auth"),
            (
                "auth-signin",
                "https://app.example.com/dex-authenticator/sign_in",
            ),
            ("auth-response-headers", "Authorization"),
        ])
        .unwrap();
        let e = a.external.unwrap();
        assert_eq!(
            e.response_headers.last().map(String::as_str),
            Some("Authorization")
        );
        assert!(
            e.response_headers
                .iter()
                .any(|h| h == "X-Auth-Request-Email")
        );
        let variable = read(&[
            ("auth-url", "http://auth/"),
            ("auth-signin", "https://$host/sign_in"),
        ])
        .unwrap_err();
        assert_eq!(variable.annotation, "auth-signin");
        assert_eq!(
            read(&[("auth-url", "/auth")]).unwrap_err().annotation,
            "auth-url"
        );
        assert_eq!(
            read(&[("auth-signin", "https://a/")])
                .unwrap_err()
                .annotation,
            "auth-signin",
            "a sign-in without a service is a mistake"
        );
    }
}
