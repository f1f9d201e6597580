//! `auth-url`: the subrequest ingress-nginx's `auth_request` makes to an external
//! authentication service, made by the proxy's authentication service for each request of
//! the route. The subrequest goes to the URL exactly (its path, never the request's), with
//! the request's method and headers (no body) and the headers ingress-nginx adds
//! (`X-Original-URL`, `X-Original-Method`, `X-Sent-From`, `X-Real-IP`, `X-Forwarded-For`,
//! `X-Auth-Request-Redirect`); an `https` service's certificate is not verified, as nginx's
//! `proxy_ssl_verify` is off by default, and redirects are not followed.
//!
//! The answer decides ([`verdict`]): a `2xx` lets the request through with the route's
//! `auth-response-headers` copied from the answer onto the request to the backend (a header
//! the answer lacks is removed, so a client cannot send its own) and the answer's cookies set
//! on the response; a `401` becomes a `302` to `auth-signin` with `rd` (the original URL, its
//! path and query escaped as nginx's `$escaped_request_uri`), or is passed back with the
//! service's challenge when no sign-in is set; a `403` is passed back; anything else,
//! including no answer within [`AUTH_URL_TIMEOUT`], is a 500.

use std::collections::{BTreeMap, HashMap};

use fairlead_edge_model::annotations::ExternalAuth;
use fairlead_edge_model::names::AUTH_URL_TIMEOUT;

use super::Decision;

/// The request being authenticated, as Envoy describes it.
#[derive(Clone, Copy, Debug)]
pub struct Original<'a> {
    /// Its method.
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// Its host (`:authority`).
    pub host: &'a str,
    /// Its path and query.
    pub uri: &'a str,
    /// Its headers, names in lower case.
    pub headers: &'a HashMap<String, String>,
    /// The client's address.
    pub client: Option<&'a str>,
}

/// Headers of the request not passed to the service: hop-by-hop ones, the body's, and those
/// the subrequest sets itself (ingress-nginx clears `X-Forwarded-Proto`).
const DROPPED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "x-forwarded-proto",
    "x-original-url",
    "x-original-method",
    "x-sent-from",
    "x-real-ip",
    "x-forwarded-for",
    "x-auth-request-redirect",
];

/// The headers of the subrequest for `original`, by name.
pub fn request_headers(original: &Original<'_>) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = original
        .headers
        .iter()
        .filter(|(name, _)| !name.starts_with(':') && !DROPPED.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let url = format!("{}://{}{}", original.scheme, original.host, original.uri);
    out.insert("x-original-url".into(), url);
    out.insert("x-original-method".into(), original.method.to_owned());
    out.insert("x-sent-from".into(), "fairlead".into());
    out.insert("x-auth-request-redirect".into(), original.uri.to_owned());
    if let Some(client) = original.client {
        out.insert("x-real-ip".into(), client.to_owned());
        out.insert("x-forwarded-for".into(), client.to_owned());
    }
    out
}

/// The bytes nginx's `$escaped_request_uri` escapes (its `NGX_ESCAPE_ARGS`): space, `#`,
/// `%`, `&`, `+`, `;`, `?`, controls; non-ASCII bytes are always escaped.
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'#')
    .add(b'%')
    .add(b'&')
    .add(b'+')
    .add(b';')
    .add(b'?');

/// Where a `401` sends the client: `signin` with `rd`, the original URL (kept as it is when
/// `signin` carries an `rd` of its own), as ingress-nginx builds it.
pub fn sign_in_location(signin: &str, original: &Original<'_>) -> String {
    let query = url::Url::parse(signin)
        .ok()
        .and_then(|u| u.query().map(str::to_owned))
        .unwrap_or_default();
    if url::form_urlencoded::parse(query.as_bytes()).any(|(k, _)| k == "rd") {
        return signin.to_owned();
    }
    let separator = if query.is_empty() { '?' } else { '&' };
    let uri = percent_encoding::utf8_percent_encode(original.uri, ESCAPED);
    format!(
        "{signin}{separator}rd={}://{}{uri}",
        original.scheme, original.host
    )
}

/// What the service's answer (`status`, `headers` with names in lower case) makes of the
/// request.
pub fn verdict(
    auth: &ExternalAuth,
    original: &Original<'_>,
    status: u16,
    headers: &[(String, String)],
) -> Decision {
    let values = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let cookies = values("set-cookie");
    match status {
        200..=299 => Decision::Allow {
            upstream: auth
                .response_headers
                .iter()
                .map(|name| (name.clone(), values(name).into_iter().next()))
                .collect(),
            cookies,
        },
        401 => match &auth.signin {
            Some(signin) => Decision::Refuse {
                status: 302,
                headers: std::iter::once((
                    "location".to_owned(),
                    sign_in_location(signin, original),
                ))
                .chain(cookies.into_iter().map(|c| ("set-cookie".to_owned(), c)))
                .collect(),
            },
            None => Decision::Refuse {
                status: 401,
                headers: values("www-authenticate")
                    .into_iter()
                    .map(|v| ("www-authenticate".to_owned(), v))
                    .collect(),
            },
        },
        403 => Decision::Refuse {
            status: 403,
            headers: Vec::new(),
        },
        other => Decision::Broken(format!("{} answered {other}", auth.url)),
    }
}

/// The client of the subrequests: one connection each, TLS unverified.
#[derive(Clone, Debug)]
pub struct Client {
    tls: std::sync::Arc<rustls::ClientConfig>,
}

impl Client {
    /// A client that does not verify certificates nor follow redirects, giving up after
    /// [`AUTH_URL_TIMEOUT`].
    pub fn new() -> Result<Self, fairlead_kit::pki::PkiError> {
        let tls = fairlead_kit::pki::insecure_client_config(&[b"http/1.1"])?;
        Ok(Self {
            tls: std::sync::Arc::new(tls),
        })
    }

    /// Asks `auth`'s service about `original`.
    pub async fn ask(&self, auth: &ExternalAuth, original: &Original<'_>) -> Decision {
        match tokio::time::timeout(AUTH_URL_TIMEOUT, self.send(auth, original)).await {
            Ok(Ok((status, headers))) => verdict(auth, original, status, &headers),
            Ok(Err(e)) => Decision::Broken(format!("{}: {e}", auth.url)),
            Err(_) => Decision::Broken(format!(
                "{}: no answer within {AUTH_URL_TIMEOUT:?}",
                auth.url
            )),
        }
    }

    async fn send(
        &self,
        auth: &ExternalAuth,
        original: &Original<'_>,
    ) -> Result<(u16, Vec<(String, String)>), String> {
        let uri: http::Uri = auth.url.parse().map_err(|e| format!("{e}"))?;
        let method =
            http::Method::from_bytes(original.method.as_bytes()).map_err(|e| format!("{e}"))?;
        let mut headers = http::HeaderMap::new();
        for (name, value) in request_headers(original) {
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_str(&value),
            ) else {
                continue;
            };
            headers.append(name, value);
        }
        let response = fairlead_kit::exchange::exchange(&self.tls, method, &uri, &headers)
            .await
            .map_err(|e| e.to_string())?;
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        Ok((response.status().as_u16(), headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(signin: Option<&str>) -> ExternalAuth {
        ExternalAuth {
            url: "https://auth.team.svc/dex-authenticator/auth".into(),
            signin: signin.map(str::to_owned),
            response_headers: vec!["X-Auth-Request-User".into(), "Authorization".into()],
        }
    }

    fn original(headers: &HashMap<String, String>) -> Original<'_> {
        Original {
            method: "POST",
            scheme: "https",
            host: "app.example.com",
            uri: "/orders?id=1&by=a b",
            headers,
            client: Some("192.0.2.7"),
        }
    }

    #[test]
    fn the_subrequest_carries_what_ingress_nginx_sends() {
        let headers: HashMap<String, String> = [
            (":path", "/orders"),
            ("cookie", "_oauth2_proxy=abc"),
            ("content-length", "12"),
            ("x-forwarded-for", "203.0.113.9"),
            ("x-original-url", "https://evil.example/"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let sent = request_headers(&original(&headers));
        assert_eq!(sent["cookie"], "_oauth2_proxy=abc");
        assert_eq!(
            sent["x-original-url"], "https://app.example.com/orders?id=1&by=a b",
            "never the client's own"
        );
        assert_eq!(sent["x-original-method"], "POST");
        assert_eq!(sent["x-forwarded-for"], "192.0.2.7");
        assert_eq!(sent["x-auth-request-redirect"], "/orders?id=1&by=a b");
        assert!(!sent.contains_key("content-length") && !sent.contains_key(":path"));
    }

    #[test]
    fn a_401_goes_to_the_sign_in_with_the_escaped_original_url() {
        let headers = HashMap::new();
        let o = original(&headers);
        assert_eq!(
            sign_in_location("https://app.example.com/dex-authenticator/sign_in", &o),
            "https://app.example.com/dex-authenticator/sign_in?rd=https://app.example.com/orders%3Fid=1%26by=a%20b"
        );
        assert!(
            sign_in_location("https://a.example/in?x=1", &o)
                .starts_with("https://a.example/in?x=1&rd=")
        );
        assert_eq!(
            sign_in_location("https://a.example/in?rd=/home", &o),
            "https://a.example/in?rd=/home",
            "an rd of the sign-in's own is kept"
        );
        let cookie = ("set-cookie".to_owned(), "csrf=1".to_owned());
        let Decision::Refuse { status, headers } = verdict(
            &auth(Some("https://s.example/in")),
            &o,
            401,
            std::slice::from_ref(&cookie),
        ) else {
            panic!("refused");
        };
        assert_eq!(status, 302);
        assert!(
            headers[0]
                .1
                .starts_with("https://s.example/in?rd=https://app.example.com/")
        );
        assert_eq!(
            headers[1], cookie,
            "the service's cookie reaches the client"
        );
    }

    #[test]
    fn the_answer_decides_as_auth_request_does() {
        let headers = HashMap::new();
        let o = original(&headers);
        let answer = [
            ("x-auth-request-user".to_owned(), "alice".to_owned()),
            ("set-cookie".to_owned(), "_oauth2_proxy=new".to_owned()),
        ];
        assert_eq!(
            verdict(&auth(None), &o, 202, &answer),
            Decision::Allow {
                upstream: vec![
                    ("X-Auth-Request-User".into(), Some("alice".into())),
                    ("Authorization".into(), None),
                ],
                cookies: vec!["_oauth2_proxy=new".into()],
            }
        );
        let challenge = [("www-authenticate".to_owned(), "Bearer".to_owned())];
        assert_eq!(
            verdict(&auth(None), &o, 401, &challenge),
            Decision::Refuse {
                status: 401,
                headers: challenge.to_vec()
            }
        );
        assert_eq!(
            verdict(&auth(Some("https://s/")), &o, 403, &[]),
            Decision::Refuse {
                status: 403,
                headers: Vec::new()
            }
        );
        assert!(matches!(
            verdict(&auth(None), &o, 302, &[]),
            Decision::Broken(_)
        ));
        assert!(matches!(
            verdict(&auth(None), &o, 503, &[]),
            Decision::Broken(_)
        ));
    }
}
