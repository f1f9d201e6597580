//! What a test asks and what it must get: the suite's `Request` ([`Ask`]), `ExpectedResponse`
//! ([`Want`], its redirects [`Redirect`]), one request over plain HTTP ([`request`]) or TLS
//! ([`super::tls`]), and its weighted-distribution check ([`weighted`]).

use std::collections::BTreeMap;
use std::time::Duration;

use super::tls::Tls;
use crate::echo::Echoed;

/// The suite's `TestWeightedDistribution`: 500 requests, ten at a time, each sent by `send`
/// (the pod that answered, or `None` for a failed one), must spread over the backends as
/// `want` says (backend, share), within 5 points, none elsewhere; ten tries, as the suite
/// allows. Fails with the last counts.
pub async fn weighted<F, Fut>(mut send: F, want: &[(&str, f64)])
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let mut last = String::new();
    for _ in 0..10 {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..50 {
            let batch = futures::future::join_all((0..10).map(|_| send())).await;
            for pod in batch.into_iter().flatten() {
                // The Deployment's name: the pod's without its two generated parts.
                let backend = pod.rsplitn(3, '-').nth(2).unwrap_or(&pod).to_owned();
                *counts.entry(backend).or_default() += 1;
            }
        }
        let total: usize = counts.values().sum();
        let holds = total == 500
            && counts
                .keys()
                .all(|backend| want.iter().any(|(b, share)| b == backend && *share > 0.0))
            && want.iter().all(|(backend, share)| {
                let got = *counts.get(*backend).unwrap_or(&0) as f64 / 500.0;
                (got - share).abs() <= 0.05
            });
        if holds {
            return;
        }
        last = format!("{counts:?}");
    }
    panic!("the answers never spread as {want:?} within 5 points; last: {last}");
}

/// A request of a test (the suite's `Request`): method, headers, and its target, made anew
/// for each try (a retry test's `uuid`).
pub struct Ask<'a> {
    /// The method.
    pub method: &'a str,
    /// Headers to send.
    pub headers: &'a [(&'a str, &'a str)],
    /// Makes the target (path and query) of each try.
    pub target: Box<dyn FnMut() -> String + 'a>,
    /// Over TLS, made so; plain HTTP when `None`.
    pub tls: Option<Tls<'a>>,
    /// Plain HTTP/2 without an upgrade (prior knowledge), not HTTP/1.1.
    pub h2c: bool,
}

impl<'a> Ask<'a> {
    /// `GET path`.
    pub fn get(path: &'a str) -> Self {
        Self::new("GET", &[], path)
    }

    /// `method path` with `headers`.
    pub fn new(method: &'a str, headers: &'a [(&'a str, &'a str)], path: &'a str) -> Self {
        Self {
            method,
            headers,
            target: Box::new(move || path.to_owned()),
            tls: None,
            h2c: false,
        }
    }

    /// The same, over TLS made as `tls` says.
    pub fn over(self, tls: Tls<'a>) -> Self {
        Self {
            tls: Some(tls),
            ..self
        }
    }

    /// The same, over plain HTTP/2 with prior knowledge.
    pub fn h2c(self) -> Self {
        Self { h2c: true, ..self }
    }

    /// `GET` of the target `target()` makes for each try.
    pub fn each(target: impl FnMut() -> String + 'a) -> Self {
        Self {
            method: "GET",
            headers: &[],
            target: Box::new(target),
            tls: None,
            h2c: false,
        }
    }
}

/// The statuses of a request that fails as the suite's `MakeRequestAndExpectFailure` wants:
/// answered, but not 200, nor a timeout (408, 504).
pub static FAILED: std::sync::LazyLock<Vec<u16>> = std::sync::LazyLock::new(|| {
    (100..600)
        .filter(|s| ![200, 408, 504].contains(s))
        .collect()
});

/// Where a redirect must send the client (the suite's `RedirectRequest`): what is `None` is
/// the request's own (its scheme `http` and its path; any host; the scheme's default port,
/// written or not).
#[derive(Clone, Copy, Debug, Default)]
pub struct Redirect<'a> {
    /// The scheme.
    pub scheme: Option<&'a str>,
    /// The host.
    pub host: Option<&'a str>,
    /// The port.
    pub port: Option<&'a str>,
    /// The path.
    pub path: Option<&'a str>,
}

impl Redirect<'_> {
    /// Whether `location` (a redirect's `Location`) goes where wanted for a request of `target`.
    fn holds(&self, location: &str, target: &str) -> bool {
        let Ok(url) = reqwest::Url::parse(location) else {
            return false;
        };
        let scheme = self.scheme.unwrap_or("http");
        let port = url.port().map(|p| p.to_string());
        let port_holds = match self.port {
            Some(want) => port.as_deref() == Some(want),
            None => match url.scheme() {
                "http" => port.is_none_or(|p| p == "80"),
                "https" => port.is_none_or(|p| p == "443"),
                _ => true,
            },
        };
        let path = target.split('?').next().unwrap_or(target);
        url.scheme() == scheme
            && self.host.is_none_or(|h| url.host_str() == Some(h))
            && port_holds
            && url.path() == self.path.unwrap_or(path)
    }
}

/// What a request must get (the suite's `ExpectedResponse`): one of `status`; for a 2xx
/// answer with `backend`, from a pod of `backend` in `namespace`; response headers with one of
/// their valid values (spaces ignored, as the suite's `IgnoreWhitespace`), and headers absent;
/// the path, host and request headers the backend saw (a header's values joined by `,`, as
/// the suite compares them) and headers it did not see (its `ExpectedRequest`); where a
/// redirect sends the client (its `RedirectRequest`); what a TLS backend saw of the
/// connection (its server name, the client's certificate).
#[derive(Clone, Copy, Debug)]
pub struct Want<'a> {
    /// The statuses that hold.
    pub status: &'a [u16],
    /// The Deployment whose pod answers (its name's prefix).
    pub backend: Option<&'a str>,
    /// The pod's namespace.
    pub namespace: &'a str,
    /// Response headers and their valid values.
    pub headers: &'a [(&'a str, &'a [&'a str])],
    /// Response headers that must be absent.
    pub absent: &'a [&'a str],
    /// Request headers the backend must have seen, with these values.
    pub seen: &'a [(&'a str, &'a str)],
    /// Request headers the backend must not have seen.
    pub unseen: &'a [&'a str],
    /// The path the backend must have seen.
    pub path: Option<&'a str>,
    /// The host the backend must have seen.
    pub host: Option<&'a str>,
    /// Where the answer must redirect to.
    pub redirect: Option<Redirect<'a>>,
    /// The server name (SNI) a TLS backend must have been asked for.
    pub sni: Option<&'a str>,
    /// The client certificate (PEM) a TLS backend must have been shown.
    pub client_certificate: Option<&'a str>,
}

impl Default for Want<'_> {
    fn default() -> Self {
        Self {
            status: &[200],
            backend: None,
            namespace: "",
            headers: &[],
            absent: &[],
            seen: &[],
            unseen: &[],
            path: None,
            host: None,
            redirect: None,
            sni: None,
            client_certificate: None,
        }
    }
}

/// What came back: the status, the response headers (names lower case), what the echo server
/// saw (when it answered).
#[derive(Debug)]
pub struct Got {
    /// The status.
    pub status: u16,
    /// The response headers.
    pub headers: BTreeMap<String, String>,
    /// What the backend saw.
    pub echoed: Option<Echoed>,
}

impl Got {
    /// An answer of `status` with `headers` (a header's values joined by `,`) and `body`
    /// (what the echo server saw, when it is its JSON).
    pub fn of(status: u16, headers: &http::HeaderMap, body: &[u8]) -> Self {
        let mut joined: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            joined
                .entry(name.as_str().to_owned())
                .and_modify(|all| {
                    all.push(',');
                    all.push_str(&value);
                })
                .or_insert_with(|| value.into_owned());
        }
        Self {
            status,
            headers: joined,
            echoed: serde_json::from_slice(body).ok(),
        }
    }
}

impl Want<'_> {
    /// Whether `got` is what is wanted for a request of `target`.
    pub(super) fn holds(&self, got: &Got, target: &str) -> bool {
        let squeeze = |v: &str| v.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        self.status.contains(&got.status)
            && (!(200..300).contains(&got.status)
                || self.backend.is_none_or(|backend| {
                    got.echoed.as_ref().is_some_and(|e| {
                        e.pod.starts_with(backend) && e.namespace == self.namespace
                    })
                }))
            && self.headers.iter().all(|(name, valid)| {
                got.headers
                    .get(&name.to_ascii_lowercase())
                    .is_some_and(|v| valid.iter().any(|ok| squeeze(ok) == squeeze(v)))
            })
            && self
                .absent
                .iter()
                .all(|name| !got.headers.contains_key(&name.to_ascii_lowercase()))
            && (self.seen.is_empty() && self.unseen.is_empty()
                || got.echoed.as_ref().is_some_and(|e| {
                    let saw = |name: &str| {
                        e.headers
                            .iter()
                            .find(|(n, _)| n.eq_ignore_ascii_case(name))
                            .map(|(_, values)| values.join(","))
                    };
                    self.seen
                        .iter()
                        .all(|(name, value)| saw(name).as_deref() == Some(*value))
                        && self.unseen.iter().all(|name| saw(name).is_none())
                }))
            && (self.path.is_none() && self.host.is_none()
                || got.echoed.as_ref().is_some_and(|e| {
                    self.path.is_none_or(|p| e.path == p) && self.host.is_none_or(|h| e.host == h)
                }))
            && (self.sni.is_none() && self.client_certificate.is_none()
                || got
                    .echoed
                    .as_ref()
                    .and_then(|e| e.tls.as_ref())
                    .is_some_and(|tls| {
                        self.sni.is_none_or(|sni| tls.server_name == sni)
                            && self.client_certificate.is_none_or(|cert| {
                                tls.peer_certificates
                                    .iter()
                                    .any(|c| c.trim() == cert.trim())
                            })
                    }))
            && self.redirect.is_none_or(|redirect| {
                got.headers
                    .get("location")
                    .is_some_and(|location| redirect.holds(location, target))
            })
    }
}

/// One try of a request at `address` (`ip:port`), or what failed: over TLS when `tls` says so (for the
/// `Host` among `headers`, or else its server name), plain HTTP otherwise (for the `Host`
/// among `headers`, or else the address).
pub async fn send(address: &str, ask: &Ask<'_>, target: &str) -> Result<Got, String> {
    let (method, headers) = (ask.method, ask.headers);
    let Some(tls) = &ask.tls else {
        return exchange(address, address, method, headers, target, ask.h2c)
            .await
            .ok_or_else(|| "no HTTP answer".to_owned());
    };
    let host = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("host"))
        .map_or(tls.server_name, |(_, value)| *value);
    let others: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("host"))
        .copied()
        .collect();
    super::tls::request(address, tls, method, host, &others, target).await
}

/// One request to `address` (`ip:port`) for `host` (unless `headers` name a `Host`):
/// `method` of `target` with `headers`; a response header's values joined by `,`.
pub async fn request(
    address: &str,
    host: &str,
    method: &str,
    headers: &[(&str, &str)],
    target: &str,
) -> Option<Got> {
    exchange(address, host, method, headers, target, false).await
}

/// One request over a connection made by the caller (plain or TLS): HTTP/2 or HTTP/1.1,
/// `method` of `target` for `host` (`Host`, or HTTP/2's `:authority` with `scheme`) with
/// `headers`.
pub(super) struct Exchange<'a> {
    /// HTTP/2, not HTTP/1.1.
    pub http2: bool,
    /// `http`, `https`.
    pub scheme: &'a str,
    /// The method.
    pub method: &'a str,
    /// The host.
    pub host: &'a str,
    /// Headers besides the host.
    pub headers: &'a [(&'a str, &'a str)],
    /// Path and query.
    pub target: &'a str,
}

impl Exchange<'_> {
    /// Sends the request over `io` and reads the whole answer, within 10 s; what failed, if
    /// anything did.
    pub async fn over<IO>(&self, io: IO) -> Result<Got, String>
    where
        IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        use http_body_util::BodyExt as _;
        let failed = |e: &dyn std::fmt::Display| e.to_string();
        let mut builder = http::Request::builder().method(self.method);
        builder = if self.http2 {
            builder.uri(format!("{}://{}{}", self.scheme, self.host, self.target))
        } else {
            builder.uri(self.target).header("host", self.host)
        };
        for (name, value) in self.headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .map_err(|e| failed(&e))?;
        let exchange = async {
            let response = if self.http2 {
                let (mut sender, connection) =
                    hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                        .await
                        .map_err(|e| failed(&e))?;
                tokio::spawn(connection);
                sender.send_request(request).await
            } else {
                let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
                    .await
                    .map_err(|e| failed(&e))?;
                tokio::spawn(connection);
                sender.send_request(request).await
            }
            .map_err(|e| failed(&e))?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(|e| failed(&e))?.to_bytes();
            Ok(Got::of(parts.status.as_u16(), &parts.headers, &body))
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .map_err(|_| "no answer within 10 s".to_owned())?
    }
}

/// [`request`] over HTTP/1.1, or with `h2c` over HTTP/2 with prior knowledge.
async fn exchange(
    address: &str,
    host: &str,
    method: &str,
    headers: &[(&str, &str)],
    target: &str,
    h2c: bool,
) -> Option<Got> {
    if h2c {
        let host = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("host"))
            .map_or(host, |(_, value)| *value);
        let others: Vec<(&str, &str)> = headers
            .iter()
            .filter(|(name, _)| !name.eq_ignore_ascii_case("host"))
            .copied()
            .collect();
        let stream = tokio::net::TcpStream::connect(address).await.ok()?;
        let ask = Exchange {
            http2: true,
            scheme: "http",
            method,
            host,
            headers: &others,
            target,
        };
        return ask.over(hyper_util::rt::TokioIo::new(stream)).await.ok();
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let mut request = client
        .request(
            method.parse().expect("a method"),
            format!("http://{address}{target}"),
        )
        .header(
            "host",
            headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("host"))
                .map_or(host, |(_, value)| *value),
        );
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("host") {
            request = request.header(*name, *value);
        }
    }
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.ok()?;
    Some(Got::of(status, &headers, &body))
}
