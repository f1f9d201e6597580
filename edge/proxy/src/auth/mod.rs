//! The proxy's authentication service beside Envoy: Envoy's `ext_authz` filter asks it, over
//! a Unix socket in the supervisor's work directory (gRPC), about each request of a route
//! with `basic-auth-secret` or `auth-url`. The route's configuration travels with the
//! question (its `context_extensions` entry [`fairlead_edge_model::names::AUTH_CONTEXT`], a
//! JSON object): the htpasswd users (`htpasswd`), under `satisfy: any` (`any`) whether the
//! route's allowlist lets the client through without credentials — the verdict Envoy's RBAC
//! filter left in the request's metadata on the address Envoy settled for the client — and
//! the external service (`external`, asked by [`external`]). Basic auth goes first: a request
//! passes with a user's password ([`verify`]), otherwise the answer is 401 with
//! `WWW-Authenticate`, as nginx gives; its answers are cached by what decided them (the
//! users' text and the credentials, as a digest), so bcrypt's cost is paid once per client
//! rather than per request. Then the external service, if any, decides.
//!
//! Envoy refuses a route's requests when this service cannot answer (`failure_mode_allow`
//! off): a protected route is never served unprotected.

pub mod external;
pub mod verify;

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::service::auth::v3 as auth;
use envoy_types::pb::envoy::r#type::v3 as types;
use sha1::Digest as _;

/// The socket's name in the work directory.
pub const SOCKET: &str = "auth.sock";

/// The name of the cluster Envoy reaches the service by (`--config-yaml`).
pub const CLUSTER: &str = fairlead_edge_model::names::AUTH_CLUSTER;

/// The realm of the `WWW-Authenticate` challenge.
const REALM: &str = "Authentication Required";

/// How many decisions are kept.
const CACHED: usize = 4096;

/// What a request gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Through, with these headers set on the request to the backend (`None`: removed) and
    /// these `Set-Cookie` values added to the response.
    Allow {
        /// Request headers.
        upstream: Vec<(String, Option<String>)>,
        /// Response cookies.
        cookies: Vec<String>,
    },
    /// 401 with the basic challenge.
    Challenge,
    /// Refused with this status and these response headers.
    Refuse {
        /// The status.
        status: u16,
        /// Response headers.
        headers: Vec<(String, String)>,
    },
    /// The route's configuration cannot be used, or its external service failed (500).
    Broken(String),
}

impl Decision {
    /// Through, nothing changed.
    pub fn allow() -> Self {
        Self::Allow {
            upstream: Vec::new(),
            cookies: Vec::new(),
        }
    }
}

/// A route's guard as the question carries it.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Guard {
    /// The users.
    #[serde(default)]
    pub htpasswd: Option<String>,
    /// `satisfy: any`: the allowlist's verdict lets a request through.
    #[serde(default)]
    pub any: bool,
    /// The external service of `auth-url`.
    #[serde(default)]
    pub external: Option<fairlead_edge_model::annotations::ExternalAuth>,
}

/// The guard of a question's context; a context without one is a broken route.
pub fn guard(context: &HashMap<String, String>) -> Result<Guard, String> {
    let text = context
        .get(fairlead_edge_model::names::AUTH_CONTEXT)
        .ok_or("the route's question carries no guard")?;
    serde_json::from_str(text).map_err(|e| format!("the route's guard: {e}"))
}

/// Decides a request by basic auth: `context` is the route's guard, `allowlisted` whether
/// the route's allowlist judged the client allowed, `authorization` the request's header.
pub fn decide(context: &Guard, allowlisted: bool, authorization: Option<&str>) -> Decision {
    if context.any && allowlisted {
        return Decision::allow();
    }
    let Some(text) = &context.htpasswd else {
        return Decision::Broken("no users for the route".into());
    };
    let users = match fairlead_edge_model::htpasswd::parse(text) {
        Ok(users) => users,
        Err(e) => return Decision::Broken(e.to_string()),
    };
    let Some((name, password)) = authorization.and_then(credentials) else {
        return Decision::Challenge;
    };
    let known = users
        .iter()
        .find(|u| u.name == name)
        .is_some_and(|u| verify::matches(&u.hash, &password));
    if known {
        Decision::allow()
    } else {
        Decision::Challenge
    }
}

/// The user and password of a `Basic` authorization header.
fn credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The service.
#[derive(Debug)]
pub struct Service {
    cache: Mutex<HashMap<[u8; 20], Decision>>,
    external: external::Client,
}

impl Service {
    /// The service, with its client of `auth-url` services.
    pub fn new() -> Result<Self, fairlead_kit::pki::PkiError> {
        Ok(Self {
            cache: Mutex::default(),
            external: external::Client::new()?,
        })
    }

    /// Basic auth's decision for `guard` (whose text is `context`), from the cache when the
    /// same users and credentials were decided before.
    fn basic(
        &self,
        context: &str,
        guard: &Guard,
        allowlisted: bool,
        authorization: Option<&str>,
    ) -> Decision {
        let mut key = sha1::Sha1::new();
        for part in [Some(context), authorization] {
            key.update(part.unwrap_or_default());
            key.update([0]);
        }
        key.update([u8::from(allowlisted)]);
        let key: [u8; 20] = key.finalize().into();
        if let Some(d) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return d;
        }
        let decision = decide(guard, allowlisted, authorization);
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHED {
                cache.clear();
            }
            cache.insert(key, decision.clone());
        }
        decision
    }
}

fn header(key: &str, value: &str) -> core::HeaderValueOption {
    core::HeaderValueOption {
        header: Some(core::HeaderValue {
            key: key.to_owned(),
            value: value.to_owned(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A header replacing any the request carries.
fn replace(key: &str, value: &str) -> core::HeaderValueOption {
    core::HeaderValueOption {
        append_action: core::header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..header(key, value)
    }
}

/// The answer Envoy reads.
fn answer(decision: &Decision) -> auth::CheckResponse {
    use auth::check_response::HttpResponse;
    let denied = |code: types::StatusCode, headers: Vec<core::HeaderValueOption>, body: &str| {
        HttpResponse::DeniedResponse(auth::DeniedHttpResponse {
            status: Some(types::HttpStatus { code: code as i32 }),
            headers,
            body: body.to_owned(),
        })
    };
    let (code, response) = match decision {
        Decision::Allow { upstream, cookies } => (
            0,
            HttpResponse::OkResponse(auth::OkHttpResponse {
                headers: upstream
                    .iter()
                    .filter_map(|(name, value)| Some(replace(name, value.as_deref()?)))
                    .collect(),
                headers_to_remove: upstream
                    .iter()
                    .filter(|(_, value)| value.is_none())
                    .map(|(name, _)| name.to_ascii_lowercase())
                    .collect(),
                response_headers_to_add: cookies.iter().map(|c| header("set-cookie", c)).collect(),
                ..Default::default()
            }),
        ),
        Decision::Challenge => (
            16,
            denied(
                types::StatusCode::Unauthorized,
                vec![header(
                    "www-authenticate",
                    &format!("Basic realm=\"{REALM}\""),
                )],
                "401 Authorization Required\n",
            ),
        ),
        Decision::Refuse { status, headers } => (
            7,
            HttpResponse::DeniedResponse(auth::DeniedHttpResponse {
                status: Some(types::HttpStatus {
                    code: i32::from(*status),
                }),
                headers: headers.iter().map(|(k, v)| header(k, v)).collect(),
                body: String::new(),
            }),
        ),
        Decision::Broken(why) => {
            tracing::error!(%why, "a route's authentication cannot be decided");
            (
                13,
                denied(types::StatusCode::InternalServerError, Vec::new(), ""),
            )
        }
    };
    auth::CheckResponse {
        status: Some(envoy_types::pb::google::rpc::Status {
            code,
            ..Default::default()
        }),
        http_response: Some(response),
        ..Default::default()
    }
}

#[tonic::async_trait]
impl auth::authorization_server::Authorization for Service {
    async fn check(
        &self,
        request: tonic::Request<auth::CheckRequest>,
    ) -> Result<tonic::Response<auth::CheckResponse>, tonic::Status> {
        let attributes = request.into_inner().attributes.unwrap_or_default();
        let (namespace, key) = fairlead_edge_model::names::RBAC_VERDICT;
        let allowlisted = attributes
            .metadata_context
            .as_ref()
            .and_then(|m| m.filter_metadata.get(namespace))
            .and_then(|s| s.fields.get(key))
            .and_then(|v| v.kind.as_ref())
            .is_some_and(|k| {
                matches!(k, envoy_types::pb::google::protobuf::value::Kind::StringValue(v) if v == "allowed")
            });
        let http = attributes.request.and_then(|r| r.http).unwrap_or_default();
        let authorization = http.headers.get("authorization").map(String::as_str);
        let context = attributes
            .context_extensions
            .get(fairlead_edge_model::names::AUTH_CONTEXT);
        let decision = match guard(&attributes.context_extensions) {
            Err(why) => Decision::Broken(why),
            Ok(g) => {
                let basic = match (&g.htpasswd, context) {
                    (Some(_), Some(text)) => self.basic(text, &g, allowlisted, authorization),
                    _ => Decision::allow(),
                };
                match (&g.external, basic) {
                    (Some(service), Decision::Allow { .. }) => {
                        let client =
                            attributes.source.and_then(|s| s.address).and_then(|a| {
                                match a.address? {
                                    core::address::Address::SocketAddress(s) => Some(s.address),
                                    _ => None,
                                }
                            });
                        let original = external::Original {
                            method: &http.method,
                            scheme: &http.scheme,
                            host: &http.host,
                            uri: &http.path,
                            headers: &http.headers,
                            client: client.as_deref(),
                        };
                        self.external.ask(service, &original).await
                    }
                    (_, basic) => basic,
                }
            }
        };
        Ok(tonic::Response::new(answer(&decision)))
    }
}

/// Serves the service on `socket` until `stop`.
pub async fn serve(
    socket: std::path::PathBuf,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let incoming = fairlead_kit::socket::unix_incoming(&socket)?;
    tonic::transport::Server::builder()
        .add_service(auth::authorization_server::AuthorizationServer::new(
            Service::new().map_err(std::io::Error::other)?,
        ))
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await
        .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    #[test]
    fn credentials_or_an_allowed_address_pass() {
        let context = Guard {
            htpasswd: Some("alice:$apr1$fairlead$t6vvlCQ7SxpycJ3UcbhX50".to_owned()),
            ..Guard::default()
        };
        assert_eq!(decide(&context, false, None), Decision::Challenge);
        assert_eq!(
            decide(&context, false, Some(&basic("alice", "secret"))),
            Decision::allow()
        );
        assert_eq!(
            decide(&context, false, Some(&basic("alice", "wrong"))),
            Decision::Challenge
        );
        assert_eq!(
            decide(&context, false, Some(&basic("mallory", "secret"))),
            Decision::Challenge
        );
        assert_eq!(
            decide(&context, true, None),
            Decision::Challenge,
            "satisfy: all — the allowlist is not enough"
        );
        let any = Guard {
            any: true,
            ..context
        };
        assert_eq!(decide(&any, true, None), Decision::allow(), "satisfy: any");
        assert_eq!(decide(&any, false, None), Decision::Challenge);
        let broken = Guard {
            htpasswd: Some("x".to_owned()),
            ..Guard::default()
        };
        assert!(matches!(decide(&broken, false, None), Decision::Broken(_)));
        let question: HashMap<String, String> = [(
            fairlead_edge_model::names::AUTH_CONTEXT.to_owned(),
            r#"{"htpasswd": "a:{SHA}x", "any": true}"#.to_owned(),
        )]
        .into();
        assert!(guard(&question).unwrap().any);
        assert!(guard(&HashMap::new()).is_err());
    }

    #[test]
    fn a_challenge_is_what_nginx_answers() {
        let response = answer(&Decision::Challenge);
        let Some(auth::check_response::HttpResponse::DeniedResponse(denied)) =
            response.http_response
        else {
            panic!("denied");
        };
        assert_eq!(denied.status.unwrap().code, 401);
        assert_eq!(
            denied.headers[0].header.as_ref().unwrap().value,
            "Basic realm=\"Authentication Required\""
        );
    }
}
