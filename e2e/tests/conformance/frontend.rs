//! The frontend TLS tests (GEP-91): clients' certificates checked per port, the insecure
//! fallback, and validation configurations that do not resolve.

use super::common::*;

/// A client of the suite's frontend-validation tests: the HTTPS listeners' certificate
/// trusted, for `host`, presenting the client certificate of the Secret `client` (none when
/// `None`).
pub(crate) fn client_of<'a>(world: &'a World, host: &'a str, client: Option<&str>) -> Tls<'a> {
    Tls {
        client: client.map(|name| {
            let certified = world.secrets.get(&format!("{INFRA}/{name}"));
            (certified.cert_pem.as_str(), certified.key_pem.as_str())
        }),
        ..https_for(world, host)
    }
}

pub(crate) const DEFAULT_CLIENT: Option<&str> = Some("tls-validity-checks-client-certificate");

pub(crate) const PER_PORT_CLIENT: Option<&str> =
    Some("tls-validity-checks-per-port-client-certificate");

/// `GET /` of `host` on `gateway`'s `port` with `client`'s certificate answered by `backend`.
pub(crate) async fn served_to(
    world: &World,
    gateway: &str,
    (port, host): (u16, &str),
    client: Option<&str>,
    backend: &str,
) {
    world
        .expect(
            gateway,
            port,
            Ask::get("/").over(client_of(world, host, client)),
            Want {
                backend: Some(backend),
                namespace: INFRA,
                ..Want::default()
            },
        )
        .await;
}

/// GatewayFrontendClientCertificateValidation: a port asks for a client certificate chaining
/// to its CAs (its own per port, or the default); a certificate of another CA is refused.
pub(crate) async fn gateway_with_client_certificate_validation(world: &World) {
    let gateway = format!("{INFRA}/client-validation-default");
    let yaml = world
        .routes_accepted(
            "gateway-with-clientcertificate-validation.yaml",
            "HTTPRoute",
            &[
                &format!("{INFRA}/client-certificate-validation-https-test"),
                &format!("{INFRA}/client-certificate-validation-https-test-no-hostname"),
            ],
            &gateway,
        )
        .await;
    let (default_port, per_port) = ((443, "example.org"), (8443, "second-example.org"));
    served_to(
        world,
        &gateway,
        default_port,
        DEFAULT_CLIENT,
        "infra-backend-v1",
    )
    .await;
    world
        .expect_failure(
            &gateway,
            443,
            Ask::get("/").over(client_of(world, "example.org", PER_PORT_CLIENT)),
        )
        .await;
    served_to(
        world,
        &gateway,
        per_port,
        PER_PORT_CLIENT,
        "infra-backend-v2",
    )
    .await;
    world
        .expect_failure(
            &gateway,
            8443,
            Ask::get("/").over(client_of(world, "second-example.org", DEFAULT_CLIENT)),
        )
        .await;
    world.delete(&yaml).await;
}

/// GatewayFrontendClientCertificateValidationInsecureFallback: with `AllowInsecureFallback`
/// clients with the port's certificate, another's, or none are all served, and the Gateway
/// says so (InsecureFrontendValidationMode).
pub(crate) async fn gateway_client_certificate_insecure_fallback(world: &World) {
    let gateway = format!("{INFRA}/client-validation-insecure-fallback");
    let yaml = world
        .routes_accepted(
            "gateway-with-clientcertificate-validation-insecure-fallback.yaml",
            "HTTPRoute",
            &[
                &format!("{INFRA}/client-cert-validation-insecure-fallback-test"),
                &format!("{INFRA}/client-cert-validation-insecure-fallback-test-no-hostname"),
            ],
            &gateway,
        )
        .await;
    world
        .condition(
            "Gateway",
            &gateway,
            None,
            (
                "InsecureFrontendValidationMode",
                "True",
                "ConfigurationChanged",
            ),
        )
        .await;
    for (port, backend) in [
        ((443, "example.org"), "infra-backend-v1"),
        ((8443, "second-example.org"), "infra-backend-v2"),
    ] {
        for client in [DEFAULT_CLIENT, PER_PORT_CLIENT, None] {
            served_to(world, &gateway, port, client, backend).await;
        }
    }
    world.delete(&yaml).await;
}

/// The conditions of a listener whose CA references do not resolve, for `reason`.
pub(crate) fn no_valid_ca(reason: &str) -> [Wanted<'_>; 3] {
    [
        ("ResolvedRefs", "False", reason),
        ("Accepted", "False", "NoValidCACertificate"),
        ("Programmed", "False", ""),
    ]
}

/// GatewayInvalidFrontendClientCertificateValidation and
/// GatewayFrontendInvalidDefaultClientCertificateValidation: a port whose CA reference does
/// not resolve (missing, another kind, another namespace without a grant) is not accepted and
/// not served; the other ports, and a plain HTTP port, serve.
pub(crate) async fn gateway_invalid_client_certificate_validation(world: &World) {
    let yaml = manifest("gateway-with-invalid-clientcertificate-validation.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-with-invalid-client-cert-validation");
    conditions(world, "Gateway", &gateway, Some("https"), &VALID_LISTENER).await;
    for (listener, reason) in [
        ("https-unresolved", "InvalidCACertificateRef"),
        ("https-invalid-kind", "InvalidCACertificateKind"),
        ("https-grant-missing", "RefNotPermitted"),
    ] {
        conditions(
            world,
            "Gateway",
            &gateway,
            Some(listener),
            &no_valid_ca(reason),
        )
        .await;
    }
    world.delete(&yaml).await;
    let yaml = manifest("gateway-invalid-default-frontend-client-certificate-validation.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/invalid-default-client-validation-config");
    conditions(world, "Gateway", &gateway, Some("http"), &VALID_LISTENER).await;
    expect_all(
        world,
        &gateway,
        &[("GET", "/", &[("Host", "example.org")], V1)],
    )
    .await;
    conditions(
        world,
        "Gateway",
        &gateway,
        Some("https"),
        &no_valid_ca("InvalidCACertificateRef"),
    )
    .await;
    world
        .expect_failure(
            &gateway,
            443,
            Ask::get("/").over(https_for(world, "example.org")),
        )
        .await;
    world.delete(&yaml).await;
}
