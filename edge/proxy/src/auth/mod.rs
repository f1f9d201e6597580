//! The proxy's authentication service beside Envoy: Envoy's `ext_authz` filter asks it, over
//! a Unix socket in the supervisor's work directory (gRPC), about each request of a route
//! with `basic-auth-secret`. The route's configuration travels with the question (its
//! `context_extensions` entry [`fairlead_edge_model::names::AUTH_CONTEXT`], a JSON object):
//! the htpasswd users (`htpasswd`) and, under `satisfy: any` (`any`), whether the route's
//! allowlist lets the client through without credentials — the verdict Envoy's RBAC filter
//! left in the request's metadata on the address Envoy settled for the client. A request passes with a user's
//! password ([`verify`]); otherwise the answer is 401 with `WWW-Authenticate`, as nginx
//! gives. Answers are cached by what decided them (the users' text and the credentials, as
//! a digest), so bcrypt's cost is paid once per client rather than per request.
//!
//! Envoy refuses a route's requests when this service cannot answer (`failure_mode_allow`
//! off): a protected route is never served unprotected.

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
    /// Through.
    Allow,
    /// 401 with a challenge.
    Challenge,
    /// The route's configuration cannot be used (500).
    Broken(String),
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
}

/// The guard of a question's context; a context without one is a broken route.
pub fn guard(context: &HashMap<String, String>) -> Result<Guard, String> {
    let text = context
        .get(fairlead_edge_model::names::AUTH_CONTEXT)
        .ok_or("the route's question carries no guard")?;
    serde_json::from_str(text).map_err(|e| format!("the route's guard: {e}"))
}

/// Decides a request: `context` is the route's guard, `allowlisted` whether the route's
/// allowlist judged the client allowed, `authorization` the request's header.
pub fn decide(context: &Guard, allowlisted: bool, authorization: Option<&str>) -> Decision {
    if context.any && allowlisted {
        return Decision::Allow;
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
        Decision::Allow
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
#[derive(Debug, Default)]
pub struct Service {
    cache: Mutex<HashMap<[u8; 20], Decision>>,
}

impl Service {
    fn cached(
        &self,
        context: &HashMap<String, String>,
        allowlisted: bool,
        authorization: Option<&str>,
    ) -> Decision {
        let mut key = sha1::Sha1::new();
        for part in [
            context
                .get(fairlead_edge_model::names::AUTH_CONTEXT)
                .map(String::as_str),
            authorization,
        ] {
            key.update(part.unwrap_or_default());
            key.update([0]);
        }
        key.update([u8::from(allowlisted)]);
        let key: [u8; 20] = key.finalize().into();
        if let Some(d) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return d;
        }
        let decision = match guard(context) {
            Ok(g) => decide(&g, allowlisted, authorization),
            Err(why) => Decision::Broken(why),
        };
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
        Decision::Allow => (0, HttpResponse::OkResponse(auth::OkHttpResponse::default())),
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
        Decision::Broken(why) => {
            tracing::error!(%why, "a route's basic auth cannot be checked");
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
        let headers = attributes
            .request
            .and_then(|r| r.http)
            .map(|h| h.headers)
            .unwrap_or_default();
        let authorization = headers.get("authorization").map(String::as_str);
        let decision = self.cached(&attributes.context_extensions, allowlisted, authorization);
        Ok(tonic::Response::new(answer(&decision)))
    }
}

/// Serves the service on `socket` until `stop`.
pub async fn serve(
    socket: std::path::PathBuf,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)?;
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    tonic::transport::Server::builder()
        .add_service(auth::authorization_server::AuthorizationServer::new(
            Service::default(),
        ))
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await
        .map_err(std::io::Error::other)
}

/// The `--config-yaml` part giving Envoy the service's cluster at `socket`.
pub fn cluster(socket: &std::path::Path) -> serde_json::Value {
    serde_json::json!({
        "name": CLUSTER,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        },
        "load_assignment": {
            "cluster_name": CLUSTER,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {
                "path": socket.display().to_string()
            }}}}]}]
        }
    })
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
            any: false,
        };
        assert_eq!(decide(&context, false, None), Decision::Challenge);
        assert_eq!(
            decide(&context, false, Some(&basic("alice", "secret"))),
            Decision::Allow
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
        assert_eq!(decide(&any, true, None), Decision::Allow, "satisfy: any");
        assert_eq!(decide(&any, false, None), Decision::Challenge);
        let broken = Guard {
            htpasswd: Some("x".to_owned()),
            any: false,
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
