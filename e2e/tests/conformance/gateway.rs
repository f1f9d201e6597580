//! The Gateway tests of its own references: parameters, listeners' certificates.

use super::common::*;

/// GatewayInvalidParametersRef: parameters the class does not take are refused.
pub(crate) async fn gateway_invalid_parameters_ref(world: &World) {
    let yaml = manifest("gateway-invalid-parameters-ref.yaml");
    world.apply(&yaml);
    world
        .gateway_condition(
            "gateway-conformance-infra/gateway-invalid-parameters-ref",
            "Accepted",
            "False",
            "InvalidParameters",
        )
        .await;
    world.delete(&yaml).await;
}

/// A Gateway's `https` listener, its conditions and no attached route (the suite's
/// `GatewayStatusMustHaveListeners` for one listener).
pub(crate) async fn https_listener(world: &World, gateway: &str, conditions: &[Wanted<'_>]) {
    for condition in conditions {
        world
            .condition("Gateway", gateway, Some("https"), *condition)
            .await;
    }
    world.attached_routes(gateway, "https", 0).await;
}

/// GatewaySecretInvalidReferenceGrant, GatewaySecretMissingReferenceGrant,
/// GatewaySecretReferenceGrantAllInNamespace, GatewaySecretReferenceGrantSpecific and
/// GatewayInvalidTLSConfiguration: a certificate in another namespace is used only with a
/// grant (all Secrets of the namespace, or the one); without one, or with one that grants
/// something else, the listener is ResolvedRefs=False (RefNotPermitted); a certificate
/// reference that does not resolve (missing, another group or kind, malformed) is
/// InvalidCertificateRef.
pub(crate) async fn gateway_certificate_references(world: &World) {
    const NOT_PERMITTED: [Wanted<'_>; 1] = [("ResolvedRefs", "False", "RefNotPermitted")];
    const RESOLVED: [Wanted<'_>; 2] = [
        ("Programmed", "True", "Programmed"),
        ("ResolvedRefs", "True", ""),
    ];
    for (name, conditions) in [
        ("gateway-secret-invalid-reference-grant", &NOT_PERMITTED[..]),
        ("gateway-secret-missing-reference-grant", &NOT_PERMITTED[..]),
        (
            "gateway-secret-reference-grant-all-in-namespace",
            &RESOLVED[..],
        ),
        ("gateway-secret-reference-grant-specific", &RESOLVED[..]),
    ] {
        let yaml = manifest(&format!("{name}.yaml"));
        world.apply(&yaml);
        https_listener(world, &format!("{INFRA}/{name}"), conditions).await;
        world.delete(&yaml).await;
    }
    let yaml = manifest("gateway-invalid-tls-configuration.yaml");
    world.apply(&yaml);
    for name in [
        "gateway-certificate-nonexistent-secret",
        "gateway-certificate-unsupported-group",
        "gateway-certificate-unsupported-kind",
        "gateway-certificate-malformed-secret",
    ] {
        https_listener(
            world,
            &format!("{INFRA}/{name}"),
            &[("ResolvedRefs", "False", "InvalidCertificateRef")],
        )
        .await;
    }
    world.delete(&yaml).await;
}
