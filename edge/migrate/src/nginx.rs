//! ingress-nginx's annotations (`nginx.ingress.kubernetes.io/*`) carried over, as Deckhouse's
//! mapping table says: most become the ALB annotation of the same meaning, `upstream-vhost`
//! a `URLRewrite` hostname, `backend-protocol: HTTPS` `backend-tls-settings` (unverified, as
//! nginx's default), `ssl-redirect` and `force-ssl-redirect` an HTTP → HTTPS redirect, and
//! snippets and the rest a note saying they were not carried.

use std::collections::BTreeMap;

use fairlead_edge_model::annotations::PREFIX as ALB;

/// ingress-nginx's annotation prefix.
pub const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// What an Ingress's annotations become for one of its hosts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapped {
    /// ALB annotations, full names.
    pub alb: BTreeMap<String, String>,
    /// What could not be carried, a sentence each.
    pub notes: Vec<String>,
    /// `upstream-vhost`: the Host requests reach the backend with.
    pub upstream_vhost: Option<String>,
    /// Paths are regular expressions (`use-regex`, or a `rewrite-target`, which turns them on
    /// in ingress-nginx).
    pub regex: bool,
    /// HTTP requests for a host with a certificate are redirected to HTTPS (`ssl-redirect`,
    /// on by default).
    pub ssl_redirect: bool,
    /// HTTP requests are redirected to HTTPS even without a certificate here
    /// (`force-ssl-redirect`).
    pub force_ssl_redirect: bool,
}

/// Annotations with no equivalent: a redesign.
const SNIPPETS: &[&str] = &[
    "configuration-snippet",
    "server-snippet",
    "auth-snippet",
    "stream-snippet",
    "modsecurity-snippet",
];

/// Annotations read together with another (no note of their own).
const COMPANIONS: &[&str] = &[
    "auth-type",
    "auth-secret",
    "auth-realm",
    "session-cookie-name",
    "session-cookie-path",
    "session-cookie-max-age",
    "session-cookie-expires",
    "proxy-send-timeout",
    "use-regex",
    "ssl-redirect",
    "force-ssl-redirect",
];

/// Maps `annotations` for a rule of `host`; `$host` in the authentication URLs becomes the
/// application domain of the DexAuthenticator they name (`authenticator_domain`), else
/// `host`.
pub fn map(
    annotations: &BTreeMap<String, String>,
    host: &str,
    authenticator_domain: Option<&str>,
) -> Mapped {
    let get = |name: &str| annotations.get(&format!("{NGINX}{name}")).map(|v| v.trim());
    let flag = |name: &str| get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut m = Mapped {
        ssl_redirect: get("ssl-redirect").is_none_or(|v| !v.eq_ignore_ascii_case("false")),
        force_ssl_redirect: flag("force-ssl-redirect"),
        regex: flag("use-regex") || get("rewrite-target").is_some(),
        ..Mapped::default()
    };
    let put = |m: &mut Mapped, name: &str, value: String| {
        m.alb.insert(format!("{ALB}{name}"), value);
    };
    for (full, value) in annotations {
        let Some(name) = full.strip_prefix(NGINX) else {
            continue;
        };
        let value = value.trim();
        match name {
            "whitelist-source-range" | "limit-rps" | "satisfy" | "auth-response-headers"
            | "proxy-buffer-size" => put(&mut m, name, value.to_owned()),
            "service-upstream" => put(&mut m, name, value.to_ascii_lowercase()),
            "upstream-vhost" => m.upstream_vhost = Some(value.to_owned()),
            "auth-url" => match substitute(value, authenticator_domain.unwrap_or(host)) {
                Some(url) => put(&mut m, name, url),
                None => m.notes.push(format!(
                    "{full}: {value:?} uses nginx variables the ALB does not substitute; write the URL out"
                )),
            },
            "auth-signin" => {
                match substitute(&without_rd(value), authenticator_domain.unwrap_or(host)) {
                    Some(url) => put(&mut m, name, url),
                    None => m.notes.push(format!(
                        "{full}: {value:?} uses nginx variables the ALB does not substitute; write the sign-in URL out"
                    )),
                }
            }
            "auth-type" if value == "basic" => match get("auth-secret") {
                Some(secret) if get("auth-secret-type").is_none_or(|t| t == "auth-file") => {
                    put(&mut m, "basic-auth-secret", secret.to_owned());
                }
                Some(_) => m.notes.push(format!(
                    "{NGINX}auth-secret-type: only auth-file (htpasswd under the key auth) is read by the ALB"
                )),
                None => m
                    .notes
                    .push(format!("{full}: basic without {NGINX}auth-secret: not carried")),
            },
            "proxy-body-size" => match size(value) {
                Some(0) => m.notes.push(format!(
                    "{full}: 0 (no limit): the ALB buffers no body unless asked; nothing to carry"
                )),
                Some(bytes) => put(&mut m, "buffer-max-request-bytes", bytes.to_string()),
                None => m.notes.push(format!("{full}: {value:?} is not a size")),
            },
            "proxy-read-timeout" => {
                let read: Option<u64> = value.parse().ok();
                let send: Option<u64> = get("proxy-send-timeout").and_then(|v| v.parse().ok());
                match read.max(send) {
                    Some(seconds) => put(&mut m, "idle-timeout", seconds.to_string()),
                    None => m.notes.push(format!("{full}: {value:?} is not seconds")),
                }
            }
            "affinity" if value == "cookie" => {
                let mut affinity = serde_json::Map::new();
                affinity.insert("mode".into(), "cookie".into());
                if let Some(name) = get("session-cookie-name") {
                    affinity.insert("cookieName".into(), name.into());
                }
                if let Some(path) = get("session-cookie-path") {
                    affinity.insert("path".into(), path.into());
                }
                let ttl = get("session-cookie-max-age")
                    .or_else(|| get("session-cookie-expires"))
                    .and_then(|v| v.parse::<u64>().ok());
                if let Some(ttl) = ttl {
                    affinity.insert("ttl".into(), ttl.into());
                }
                put(
                    &mut m,
                    "session-affinity",
                    serde_json::Value::Object(affinity).to_string(),
                );
            }
            "rewrite-target" => put(&mut m, name, groups(value)),
            "backend-protocol" => match value.to_ascii_uppercase().as_str() {
                "HTTP" => {}
                "HTTPS" => put(
                    &mut m,
                    "backend-tls-settings",
                    r#"{"mode": "SIMPLE", "insecureSkipVerify": true}"#.to_owned(),
                ),
                other => m.notes.push(format!(
                    "{full}: {other}: not carried (a gRPC backend is a GRPCRoute's)"
                )),
            },
            _ if SNIPPETS.contains(&name) => m.notes.push(format!(
                "{full}: nginx configuration has no equivalent on the ALB; redesign it (Gateway API filters, a policy)"
            )),
            _ if COMPANIONS.contains(&name) || name == "auth-secret-type" => {}
            _ => m.notes.push(format!("{full}: not carried by the converter")),
        }
    }
    m
}

/// `text` with `$host` and `$http_host` written out as `host`; `None` when another
/// variable remains.
fn substitute(text: &str, host: &str) -> Option<String> {
    let replaced = text.replace("$http_host", host).replace("$host", host);
    (!replaced.contains('$')).then_some(replaced)
}

/// A sign-in URL without its `rd` parameter: the ALB adds its own, as ingress-nginx does
/// when the URL has none.
fn without_rd(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_owned();
    };
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| k != "rd")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    parsed.to_string()
}

/// An nginx size (`1024`, `8k`, `10m`, `1g`) in bytes.
fn size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_lowercase()),
        _ => (text, 'b'),
    };
    let n: u64 = digits.parse().ok()?;
    let factor = match unit {
        'b' => 1,
        'k' => 1024,
        'm' => 1024 * 1024,
        'g' => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(factor)
}

/// nginx's `$1` groups as the ALB writes them (`\1`).
fn groups(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('\\');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{NGINX}{k}"), (*v).to_owned()))
            .collect()
    }

    fn alb(m: &Mapped, name: &str) -> Option<String> {
        m.alb.get(&format!("{ALB}{name}")).cloned()
    }

    #[test]
    fn the_mapping_table_carries_each_annotation() {
        let m = map(
            &annotations(&[
                ("whitelist-source-range", "10.0.0.0/8,192.168.0.0/16"),
                ("limit-rps", "5"),
                ("proxy-body-size", "8m"),
                ("proxy-buffer-size", "16k"),
                ("proxy-read-timeout", "30"),
                ("proxy-send-timeout", "120"),
                ("affinity", "cookie"),
                ("session-cookie-name", "route"),
                ("session-cookie-max-age", "3600"),
                ("rewrite-target", "/$2"),
                ("auth-type", "basic"),
                ("auth-secret", "vault/users"),
                ("service-upstream", "True"),
                ("upstream-vhost", "internal.svc"),
                ("backend-protocol", "HTTPS"),
            ]),
            "app.example.com",
            None,
        );
        assert_eq!(
            alb(&m, "whitelist-source-range").as_deref(),
            Some("10.0.0.0/8,192.168.0.0/16")
        );
        assert_eq!(
            alb(&m, "buffer-max-request-bytes").as_deref(),
            Some("8388608")
        );
        assert_eq!(
            alb(&m, "idle-timeout").as_deref(),
            Some("120"),
            "the longer of the two"
        );
        assert_eq!(
            alb(&m, "session-affinity").as_deref(),
            Some(r#"{"cookieName":"route","mode":"cookie","ttl":3600}"#)
        );
        assert_eq!(alb(&m, "rewrite-target").as_deref(), Some("/\\2"));
        assert_eq!(alb(&m, "basic-auth-secret").as_deref(), Some("vault/users"));
        assert_eq!(alb(&m, "service-upstream").as_deref(), Some("true"));
        assert!(
            alb(&m, "backend-tls-settings")
                .unwrap()
                .contains("insecureSkipVerify")
        );
        assert_eq!(m.upstream_vhost.as_deref(), Some("internal.svc"));
        assert!(m.regex && m.ssl_redirect && !m.force_ssl_redirect);
        assert!(m.notes.is_empty(), "{:?}", m.notes);
        // Every ALB annotation made is one the ALB reads.
        let read = fairlead_edge_model::annotations::Annotations::read(&m.alb).unwrap();
        assert!(fairlead_edge_model::annotations::Annotations::unknown(&m.alb).is_empty());
        assert_eq!(read.traffic.limit_rps, Some(5));
    }

    #[test]
    fn authentication_urls_are_written_out() {
        let m = map(
            &annotations(&[
                (
                    "auth-url",
                    "https://dash-dex-authenticator.ops.svc.cluster.local/dex-authenticator/auth",
                ),
                (
                    "auth-signin",
                    "https://$host/dex-authenticator/sign_in?rd=$escaped_request_uri",
                ),
                ("auth-response-headers", "X-Auth-Request-User,Authorization"),
            ]),
            "dash.example.com",
            None,
        );
        assert_eq!(
            alb(&m, "auth-signin").as_deref(),
            Some("https://dash.example.com/dex-authenticator/sign_in")
        );
        let dex = map(
            &annotations(&[("auth-signin", "https://$host/sign_in")]),
            "www.dash.example.com",
            Some("dash.example.com"),
        );
        assert_eq!(
            alb(&dex, "auth-signin").as_deref(),
            Some("https://dash.example.com/sign_in"),
            "the DexAuthenticator's domain"
        );
        let unknown = map(
            &annotations(&[("auth-url", "http://$best_http_host/auth")]),
            "a",
            None,
        );
        assert!(unknown.alb.is_empty() && unknown.notes[0].contains("auth-url"));
    }

    #[test]
    fn what_has_no_equivalent_is_said() {
        let m = map(
            &annotations(&[
                ("configuration-snippet", "more_set_headers \"X: y\";"),
                ("proxy-body-size", "0"),
                ("enable-cors", "true"),
                ("backend-protocol", "GRPC"),
                ("ssl-redirect", "false"),
            ]),
            "a.example.com",
            None,
        );
        assert!(m.alb.is_empty());
        assert_eq!(m.notes.len(), 4, "{:?}", m.notes);
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("configuration-snippet") && n.contains("redesign"))
        );
        assert!(m.notes.iter().any(|n| n.contains("enable-cors")));
        assert!(!m.ssl_redirect);
        assert_eq!(size("1G"), Some(1 << 30));
        assert_eq!(size("12x"), None);
    }
}
