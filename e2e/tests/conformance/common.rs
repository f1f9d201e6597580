//! What the transcribed tests share: the suite's namespaces and Gateways, routing tables
//! (what a request must get, run on a Gateway's port), condition checks, and the HTTPS
//! listeners' client.

pub(crate) use fairlead_e2e::conformance::{
    Ask, Call, FAILED, GrpcWant, ListenerWant, Redirect, TcpWant, Tls, Want, World, document,
    manifest, request, weighted,
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

/// Routes of `kind` that do not resolve or attach, each (manifest, Gateway, route, the
/// condition it must have on the Gateway): one not accepted is counted on no listener; one
/// accepted with a reference that does not resolve stays accepted.
pub(crate) async fn unresolved_or_unattached(
    world: &World,
    kind: &str,
    cases: &[(&str, &str, &str, Wanted<'_>)],
) {
    let key = |name: &str| format!("{INFRA}/{name}");
    for (file, gateway, route, condition) in cases {
        let yaml = manifest(file);
        world.apply_test(&yaml).await;
        let (gateway, route) = (key(gateway), key(route));
        world
            .route_condition(kind, &route, &gateway, *condition)
            .await;
        if condition.0 == "Accepted" {
            world.zero_routes(&gateway).await;
        } else {
            world
                .route_condition(kind, &route, &gateway, ("Accepted", "True", ""))
                .await;
        }
        world.delete(&yaml).await;
    }
}

/// The suite's `…MultipleRoutesAttachment`: `file` brings a Gateway with one listener
/// `listener` and the route `older` of `kind`; a second later the route `newer` (to the
/// Service `newer_backend` at `backend_port`) joins it. Both are accepted and counted, but
/// each of `probes` probes (`probe`: the pod that answered) reaches the older route's
/// backend, `older_backend`.
pub(crate) async fn oldest_route_serves<F, Fut>(
    world: &World,
    (kind, file, gateway, listener): (&str, &str, &str, &str),
    (older, older_backend): (&str, &str),
    (newer, newer_backend, backend_port): (&str, &str, u16),
    (probes, mut probe): (usize, F),
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let key = |name: &str| format!("{INFRA}/{name}");
    let gateway = key(gateway);
    let yaml = world
        .routes_accepted(file, kind, &[&key(older)], &gateway)
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let gateway_name = gateway.split_once('/').map_or("", |(_, n)| n);
    let newer_route = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": newer, "namespace": INFRA},
        "spec": {
            "parentRefs": [{"name": gateway_name, "sectionName": listener}],
            "rules": [{"backendRefs": [{"name": newer_backend, "port": backend_port}]}],
        },
    });
    let newer_route = serde_yaml_ng::to_string(&newer_route).expect("YAML");
    world.up.apply(&newer_route);
    for route in [older, newer] {
        world
            .route_condition(
                kind,
                &key(route),
                &gateway,
                ("Accepted", "True", "Accepted"),
            )
            .await;
    }
    world.attached_routes(&gateway, listener, 2).await;
    let prefix = format!("{older_backend}-");
    fairlead_e2e::until(
        &format!("{gateway} answered by {older_backend}"),
        async || {
            probe()
                .await
                .filter(|pod| pod.starts_with(&prefix))
                .map(|_| ())
        },
    )
    .await;
    for n in 0..probes {
        let pod = probe()
            .await
            .unwrap_or_else(|| panic!("probe {n} got no answer"));
        assert!(
            pod.starts_with(&prefix),
            "probe {n} reached {pod}: only the oldest route serves the listener"
        );
    }
    world.delete(&newer_route).await;
    world.delete(&yaml).await;
}

/// Runs `cases` — `GET` of a path for a host, and what it gets — on `gateway`'s port 80.
pub(crate) async fn expect_hosts<H: AsRef<str>>(
    world: &World,
    gateway: &str,
    cases: &[(H, &str, Then)],
) {
    for (host, path, then) in cases {
        let headers = [("Host", host.as_ref())];
        world
            .expect(gateway, 80, Ask::new("GET", &headers, path), then.want())
            .await;
    }
}

/// A listener with the suite's accepted conditions and HTTPRoute among its kinds, counting
/// `attached` routes (`generateSupportedRouteKinds`, `generateAcceptedListenerConditions`).
pub(crate) fn accepted_listener(name: &str, attached: i64) -> ListenerWant<'_> {
    ListenerWant {
        name,
        kinds: &["HTTPRoute"],
        attached,
        conditions: &VALID_LISTENER,
    }
}
