//! The backend TLS tests: BackendTLSPolicy (hostname, SANs, conflicts, CA references,
//! generations) and the Gateway's client certificate for its backends.

use super::common::*;

/// A policy's conditions when it is accepted with its references resolved.
pub(crate) const POLICY_VALID: [Wanted<'_>; 2] = [
    ("Accepted", "True", "Accepted"),
    ("ResolvedRefs", "True", "ResolvedRefs"),
];

/// Waits for each of `conditions` of the BackendTLSPolicy `name` (infra) on `gateway`.
pub(crate) async fn policy(world: &World, name: &str, gateway: &str, conditions: &[Wanted<'_>]) {
    for condition in conditions {
        world
            .policy_condition(&format!("{INFRA}/{name}"), gateway, *condition)
            .await;
    }
}

/// `GET path` of `abc.example.com` on `gateway`'s port 80: answered 200 by a TLS backend that
/// was asked for `sni` (and shown `client`'s certificate), or failing (`sni` `None`).
pub(crate) async fn through_tls_backend(
    world: &World,
    gateway: &str,
    path: &str,
    sni: Option<&str>,
    client: Option<&str>,
) {
    let headers = [("Host", "abc.example.com")];
    let want = match sni {
        Some(sni) => Want {
            sni: Some(sni),
            client_certificate: client,
            ..Want::default()
        },
        None => Want {
            status: &FAILED,
            ..Want::default()
        },
    };
    world
        .expect(gateway, 80, Ask::new("GET", &headers, path), want)
        .await;
}

/// BackendTLSPolicy: the proxy reaches the Service over TLS, asking for the policy's
/// hostname and checking the certificate against its CA (behind HTTP and HTTPS listeners);
/// a wrong hostname or CA fails the request; a policy whose CA ConfigMap is missing, then
/// made, then emptied, then filled again follows each change in its conditions.
pub(crate) async fn backend_tls_policy(world: &World) {
    let yaml = manifest("backendtlspolicy.yaml");
    world.apply_test(&yaml).await;
    world
        .route_accepted(
            "HTTPRoute",
            &format!("{INFRA}/backendtlspolicy-reencrypt"),
            HTTPS_GATEWAY,
        )
        .await;
    policy(world, "normative-test", HTTPS_GATEWAY, &POLICY_VALID).await;
    let headers = [("Host", "https-listener.org")];
    world
        .expect(
            HTTPS_GATEWAY,
            443,
            Ask::new("GET", &headers, "/backendtlspolicy")
                .over(https_for(world, "https-listener.org")),
            Want {
                path: Some("/backendtlspolicy"),
                sni: Some("abc.example.com"),
                ..Want::default()
            },
        )
        .await;
    world
        .route_accepted(
            "HTTPRoute",
            &format!("{INFRA}/backendtlspolicy"),
            SAME_NAMESPACE,
        )
        .await;
    policy(world, "normative-test", SAME_NAMESPACE, &POLICY_VALID).await;
    through_tls_backend(
        world,
        SAME_NAMESPACE,
        "/backendtlspolicy",
        Some("abc.example.com"),
        None,
    )
    .await;
    for (name, path) in [
        ("host-mismatch", "/backendtlspolicy-host-mismatch"),
        ("cert-mismatch", "/backendtlspolicy-cert-mismatch"),
    ] {
        policy(world, name, SAME_NAMESPACE, &POLICY_VALID).await;
        through_tls_backend(world, SAME_NAMESPACE, path, None, None).await;
    }
    // Reconciled with its CA ConfigMap: pointed at one that does not exist yet.
    policy(world, "reconcile-test", SAME_NAMESPACE, &POLICY_VALID).await;
    let original = document(&yaml, "BackendTLSPolicy", "reconcile-test");
    let mut pointed = original.clone();
    let test_map = "tls-checks-ca-certificate-reconcile-test";
    pointed["spec"]["validation"]["caCertificateRefs"][0]["name"] = test_map.into();
    world.apply_object(&pointed);
    const INVALID: [Wanted<'_>; 2] = [
        ("Accepted", "False", "NoValidCACertificate"),
        ("ResolvedRefs", "False", "InvalidCACertificateRef"),
    ];
    policy(world, "reconcile-test", SAME_NAMESPACE, &INVALID).await;
    let map = |ca: &str| {
        serde_yaml_ng::to_string(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": test_map, "namespace": INFRA},
            "data": {"ca.crt": ca},
        }))
        .expect("YAML")
    };
    let ca = world
        .secrets
        .ca_of(&format!("{INFRA}/tls-checks-ca-certificate"))
        .to_owned();
    world.up.apply(&map(&ca));
    policy(world, "reconcile-test", SAME_NAMESPACE, &POLICY_VALID).await;
    world.up.apply(&map(""));
    policy(world, "reconcile-test", SAME_NAMESPACE, &INVALID).await;
    world.up.apply(&map(&ca));
    policy(world, "reconcile-test", SAME_NAMESPACE, &POLICY_VALID).await;
    world.apply_object(&original);
    world.delete(&map(&ca)).await;
    world.delete(&yaml).await;
}

/// BackendTLSPolicySANValidation: the backend's certificate must carry one of the policy's
/// subjectAltNames (a DNS name or a URI), whatever the hostname.
pub(crate) async fn backend_tls_policy_san_validation(world: &World) {
    let yaml = world
        .routes_accepted(
            "backendtlspolicy-san.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/backendtlspolicy-san-test")],
            SAME_NAMESPACE,
        )
        .await;
    const SNI: Option<&str> = Some("abc.example.com");
    for (name, path, sni) in [
        ("san-dns", "/backendtlspolicy-san-dns", SNI),
        (
            "san-dns-mismatch",
            "/backendtlspolicy-san-dns-mismatch",
            None,
        ),
        ("san-uri", "/backendtlspolicy-san-uri", SNI),
        (
            "san-uri-mismatch",
            "/backendtlspolicy-san-uri-mismatch",
            None,
        ),
        ("multiple-sans", "/backendtlspolicy-multiple-sans", SNI),
        (
            "multiple-mismatch-sans",
            "/backendtlspolicy-multiple-mismatch-sans",
            None,
        ),
    ] {
        policy(
            world,
            name,
            SAME_NAMESPACE,
            &[("Accepted", "True", "Accepted")],
        )
        .await;
        through_tls_backend(world, SAME_NAMESPACE, path, sni, None).await;
    }
    world.delete(&yaml).await;
}

/// BackendTLSPolicyConflictResolution: of two policies on the same Service (or the same
/// port of it), the older (then the first by name) applies and the other is Conflicted; a
/// policy on one port and one on the whole Service do not conflict.
pub(crate) async fn backend_tls_policy_conflict_resolution(world: &World) {
    let yaml = world
        .routes_accepted(
            "backendtlspolicy-conflict-resolution.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/backendtlspolicy-conflict-resolution")],
            SAME_NAMESPACE,
        )
        .await;
    const ACCEPTED: [Wanted<'_>; 1] = [("Accepted", "True", "Accepted")];
    const CONFLICTED: [Wanted<'_>; 1] = [("Accepted", "False", "Conflicted")];
    const OTHER: Option<&str> = Some("other.example.com");
    for section in ["without", "with"] {
        policy(
            world,
            &format!("conflicted-{section}-section-name-1"),
            SAME_NAMESPACE,
            &ACCEPTED,
        )
        .await;
        policy(
            world,
            &format!("conflicted-{section}-section-name-2"),
            SAME_NAMESPACE,
            &CONFLICTED,
        )
        .await;
        let path = format!("/backendtlspolicy-conflicted-{section}-section-name");
        through_tls_backend(world, SAME_NAMESPACE, &path, OTHER, None).await;
    }
    for name in [
        "not-conflicted-with-section-name",
        "not-conflicted-without-section-name",
    ] {
        policy(world, name, SAME_NAMESPACE, &ACCEPTED).await;
    }
    through_tls_backend(
        world,
        SAME_NAMESPACE,
        "/backendtlspolicy-not-conflicted-with-section-name",
        OTHER,
        None,
    )
    .await;
    through_tls_backend(
        world,
        SAME_NAMESPACE,
        "/backendtlspolicy-not-conflicted-without-section-name",
        Some("abc.example.com"),
        None,
    )
    .await;
    world.delete(&yaml).await;
}

/// BackendTLSPolicyInvalidCACertificateRef and BackendTLSPolicyInvalidKind: a policy none of
/// whose CA references resolves is not accepted (NoValidCACertificate) and its backend is
/// never reached unchecked (a 5xx).
pub(crate) async fn backend_tls_policy_invalid_references(world: &World) {
    let server_errors = [500, 502, 503];
    for (file, route, cases) in [
        (
            "backendtlspolicy-invalid-ca-certificate-ref.yaml",
            "backendtlspolicy-invalid-ca-certificate-ref",
            &[
                ("nonexistent-ca-certificate-ref", "InvalidCACertificateRef"),
                ("malformed-ca-certificate-ref", "InvalidCACertificateRef"),
            ][..],
        ),
        (
            "backendtlspolicy-invalid-kind.yaml",
            "backendtlspolicy-invalid-kind-test",
            &[("invalid-kind", "InvalidKind")][..],
        ),
    ] {
        let yaml = world
            .routes_accepted(
                file,
                "HTTPRoute",
                &[&format!("{INFRA}/{route}")],
                SAME_NAMESPACE,
            )
            .await;
        for (name, reason) in cases {
            policy(
                world,
                name,
                SAME_NAMESPACE,
                &[
                    ("Accepted", "False", "NoValidCACertificate"),
                    ("ResolvedRefs", "False", reason),
                ],
            )
            .await;
            let headers = [("Host", "abc.example.com")];
            let path = format!("/backendtlspolicy-{name}");
            world
                .expect(
                    SAME_NAMESPACE,
                    80,
                    Ask::new("GET", &headers, &path),
                    Want {
                        status: &server_errors,
                        ..Want::default()
                    },
                )
                .await;
        }
        world.delete(&yaml).await;
    }
}

/// BackendTLSPolicyObservedGenerationBump: a changed policy's conditions carry its new
/// generation.
pub(crate) async fn backend_tls_policy_observed_generation_bump(world: &World) {
    let yaml = manifest("backendtlspolicy-observed-generation-bump.yaml");
    world.apply_test(&yaml).await;
    policy(
        world,
        "observed-generation-bump",
        SAME_NAMESPACE,
        &[("Accepted", "True", "")],
    )
    .await;
    let mut changed = document(&yaml, "BackendTLSPolicy", "observed-generation-bump");
    changed["spec"]["validation"]["hostname"] = "foo.example.com".into();
    world.apply_object(&changed);
    let key = format!("{INFRA}/observed-generation-bump");
    let (api, name) = world.api("BackendTLSPolicy", &key).await;
    fairlead_e2e::until("the policy's generation bumped", async || {
        let policy = api.get(name).await.ok()?;
        (policy.metadata.generation? > 1).then_some(())
    })
    .await;
    policy(
        world,
        "observed-generation-bump",
        SAME_NAMESPACE,
        &[("Accepted", "True", "")],
    )
    .await;
    world.delete(&yaml).await;
}

/// GatewayTLSBackendClientCertificate: the Gateway's client certificate is presented to a
/// backend that asks for one, and the Gateway says its reference resolved.
pub(crate) async fn gateway_tls_backend_client_certificate(world: &World) {
    let gateway = format!("{INFRA}/gateway-tls-backend-client-certificate");
    let yaml = world
        .routes_accepted(
            "gateway-tls-backend-client-certificate.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/gateway-tls-backend-client-certificate")],
            &gateway,
        )
        .await;
    policy(
        world,
        "gateway-tls-backend-client-certificate-test",
        &gateway,
        &[("Accepted", "True", "")],
    )
    .await;
    world
        .gateway_condition(&gateway, "ResolvedRefs", "True", "ResolvedRefs")
        .await;
    let client = &world
        .secrets
        .get(&format!("{INFRA}/tls-checks-client-certificate"))
        .cert_pem;
    through_tls_backend(
        world,
        &gateway,
        "/",
        Some("abc.example.com"),
        Some(client.as_str()),
    )
    .await;
    world.delete(&yaml).await;
}

/// GatewayInvalidTLSBackendConfiguration: a client certificate reference that does not
/// resolve (missing, another group or kind, malformed, another namespace without a grant)
/// is ResolvedRefs=False for its reason; the Gateway stays accepted.
pub(crate) async fn gateway_invalid_tls_backend_configuration(world: &World) {
    let yaml = manifest("gateway-invalid-tls-backend-configuration.yaml");
    world.apply(&yaml);
    for (name, reason) in [
        (
            "gateway-client-certificate-nonexistent-secret",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-unsupported-group",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-unsupported-kind",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-malformed-secret",
            "InvalidClientCertificateRef",
        ),
        (
            "gateway-client-certificate-missing-reference-grant",
            "RefNotPermitted",
        ),
    ] {
        let gateway = format!("{INFRA}/{name}");
        world
            .gateway_condition(&gateway, "ResolvedRefs", "False", reason)
            .await;
        world
            .gateway_condition(&gateway, "Accepted", "True", "Accepted")
            .await;
    }
    world.delete(&yaml).await;
}
