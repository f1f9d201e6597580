//! What the transcribed tests share: the suite's namespaces and Gateways, routing tables
//! (what a request must get, run on a Gateway's port), condition checks, and the HTTPS
//! listeners' client.

pub(crate) use fairlead_e2e::conformance::{
    Ask, FAILED, Redirect, TcpWant, Tls, Want, World, document, manifest, request, weighted,
};

pub(crate) const INFRA: &str = "gateway-conformance-infra";

pub(crate) const SAME_NAMESPACE: &str = "gateway-conformance-infra/same-namespace";

/// A listener's conditions when it is valid (the suite's `generateAcceptedListenerConditions`).
pub(crate) const VALID_LISTENER: [(&str, &str, &str); 3] = [
    ("ResolvedRefs", "True", ""),
    ("Accepted", "True", ""),
    ("Programmed", "True", ""),
];

/// A condition: type, status, reason (empty: any).
pub(crate) type Wanted<'a> = (&'a str, &'a str, &'a str);

/// Waits for each of `conditions` on the `kind` `key` (its `listener`'s, when named).
pub(crate) async fn conditions(
    world: &World,
    kind: &str,
    key: &str,
    listener: Option<&str>,
    conditions: &[(&str, &str, &str)],
) {
    for condition in conditions {
        world.condition(kind, key, listener, *condition).await;
    }
}

/// What a routing case expects: the infra backend that answers, a backend of another
/// namespace, or a status.
#[derive(Clone, Copy)]
pub(crate) enum Then {
    To(&'static str),
    In(&'static str, &'static str),
    Status(u16),
}

impl Then {
    /// What the suite asks of the answer.
    pub(crate) fn want(&self) -> Want<'_> {
        match self {
            Then::To(backend) => Want {
                backend: Some(*backend),
                namespace: INFRA,
                ..Want::default()
            },
            Then::In(backend, namespace) => Want {
                backend: Some(*backend),
                namespace,
                ..Want::default()
            },
            Then::Status(code) => Want {
                status: std::slice::from_ref(code),
                ..Want::default()
            },
        }
    }
}

/// A routing case: method, path (and query), headers, what it gets.
pub(crate) type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    Then,
);

/// Applies the test manifest `file` holding the HTTPRoute `route` on `same-namespace` and
/// runs its routing `cases` ([`routing_on`]).
pub(crate) async fn routing(world: &World, file: &str, route: &str, cases: &[Case]) {
    routing_on(world, file, SAME_NAMESPACE, &[route], cases).await;
}

/// Applies the test manifest `file` holding the HTTPRoutes `routes` (in the infra namespace)
/// on `gateway`, and runs its routing `cases` on the Gateway's port 80 (the suite's
/// `MakeRequestAndExpectEventuallyConsistentResponse` over a table; a `Host` among a case's
/// headers is the request's host), removing the manifests at the end.
pub(crate) async fn routing_on(
    world: &World,
    file: &str,
    gateway: &str,
    routes: &[&str],
    cases: &[Case],
) {
    let keys: Vec<String> = routes.iter().map(|r| format!("{INFRA}/{r}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let yaml = world
        .routes_accepted(file, "HTTPRoute", &keys, gateway)
        .await;
    expect_all(world, gateway, cases).await;
    world.delete(&yaml).await;
}

/// Runs routing `cases` on `gateway`'s port 80.
pub(crate) async fn expect_all(world: &World, gateway: &str, cases: &[Case]) {
    expect_on(world, gateway, 80, cases).await;
}

/// Runs routing `cases` on `gateway`'s `port`.
pub(crate) async fn expect_on(world: &World, gateway: &str, port: u16, cases: &[Case]) {
    for (method, path, headers, then) in cases {
        let want = then.want();
        world
            .expect(gateway, port, Ask::new(method, headers, path), want)
            .await;
    }
}

pub(crate) const V1: Then = Then::To("infra-backend-v1");

pub(crate) const V2: Then = Then::To("infra-backend-v2");

pub(crate) const V3: Then = Then::To("infra-backend-v3");

pub(crate) const NOT_FOUND: Then = Then::Status(404);

/// The pod of `gateway`'s port 80 that answers `GET /` (`headers` sent), if it answers 200.
pub(crate) async fn answering_pod(
    world: &World,
    gateway: &str,
    headers: &[(&str, &str)],
) -> Option<String> {
    let address = world.gateway(gateway, 80);
    let got = request(&address, &address, "GET", headers, "/").await?;
    (got.status == 200).then_some(got.echoed?.pod)
}

/// A redirect case: method, path, the status, where it sends the client.
pub(crate) type RedirectCase<'a> = (&'a str, &'a str, u16, Redirect<'a>);

/// A redirect to `path`.
pub(crate) const fn to_path(path: &str) -> Redirect<'_> {
    Redirect {
        scheme: None,
        host: None,
        port: None,
        path: Some(path),
    }
}

/// A redirect to `host`, with `port`, `scheme` and `path` when given.
pub(crate) const fn to_host<'a>(
    host: Option<&'a str>,
    port: Option<&'a str>,
    scheme: Option<&'a str>,
    path: Option<&'a str>,
) -> Redirect<'a> {
    Redirect {
        scheme,
        host,
        port,
        path,
    }
}

pub(crate) const SERVER_ERROR: Then = Then::Status(500);

pub(crate) const HTTPS_GATEWAY: &str =
    "gateway-conformance-infra/same-namespace-with-https-listener";

/// The suite's requests to `HTTPS_GATEWAY` for `host`: its server name, trusting the
/// listeners' certificate.
pub(crate) fn https_for<'a>(world: &'a World, host: &'a str) -> Tls<'a> {
    Tls {
        server_name: host,
        trust: &world
            .secrets
            .get("gateway-conformance-infra/tls-validity-checks-certificate")
            .cert_pem,
        client: None,
        http2: false,
    }
}
