//! The Gateway tests: its own references (parameters, listeners' certificates), listeners
//! added and removed, generations, attached routes; the GatewayClass's generation.

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

/// GatewayInfrastructure: the labels and annotations of a Gateway's `spec.infrastructure` on
/// what is made for it (the controller provisions this Gateway, which no instance names:
/// the world's `up` runs with `--provision-gateways`).
pub(crate) async fn gateway_infrastructure(world: &World) {
    let yaml = manifest("gateway-infrastructure.yaml");
    world.apply(&yaml);
    let key = "gateway-conformance-infra/gateway-with-infrastructure-metadata";
    world
        .gateway_condition(key, "Accepted", "True", "Accepted")
        .await;
    let gateway = document(&yaml, "Gateway", "gateway-with-infrastructure-metadata");
    let map = |field: &str| -> std::collections::BTreeMap<String, String> {
        serde_json::from_value(gateway["spec"]["infrastructure"][field].clone())
            .expect("a map of strings")
    };
    world
        .infrastructure_propagated(key, &map("labels"), &map("annotations"))
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

/// GatewayInvalidRouteKind and GatewayListenerUnsupportedProtocol: a listener asked
/// for route kinds it cannot take is ResolvedRefs=False (InvalidRouteKinds), keeping those
/// it can; one of a protocol not supported is not accepted (UnsupportedProtocol), and a
/// Gateway with no valid listener is not either (ListenersNotValid).
pub(crate) async fn gateway_invalid_listeners(world: &World) {
    let yaml = manifest("gateway-invalid-route-kind.yaml");
    world.apply(&yaml);
    for gateway in [
        "gateway-only-invalid-route-kind",
        "gateway-supported-and-invalid-route-kind",
    ] {
        let gateway = format!("{INFRA}/{gateway}");
        world
            .condition(
                "Gateway",
                &gateway,
                Some("http"),
                ("ResolvedRefs", "False", "InvalidRouteKinds"),
            )
            .await;
        world.attached_routes(&gateway, "http", 0).await;
    }
    world.delete(&yaml).await;
    let yaml = manifest("gateway-invalid-listeners-unsupported-protocol.yaml");
    world.apply(&yaml);
    let only = format!("{INFRA}/gateway-only-unsupported-protocols");
    world
        .gateway_condition(&only, "Accepted", "False", "ListenersNotValid")
        .await;
    let some = format!("{INFRA}/gateway-supported-and-unsupported-protocols");
    world
        .gateway_condition(&some, "Accepted", "True", "ListenersNotValid")
        .await;
    world
        .condition(
            "Gateway",
            &some,
            Some("http"),
            ("Accepted", "True", "Accepted"),
        )
        .await;
    for gateway in [&only, &some] {
        world
            .condition(
                "Gateway",
                gateway,
                Some("invalid"),
                ("Accepted", "False", "UnsupportedProtocol"),
            )
            .await;
    }
    world.delete(&yaml).await;
}

/// GatewayOptionalAddressValue: an address asked for by type only is assigned one.
pub(crate) async fn gateway_optional_address_value(world: &World) {
    let yaml = manifest("gateway-optional-address-value.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-without-address-value");
    world
        .gateway_condition(&gateway, "Accepted", "True", "Accepted")
        .await;
    let (api, name) = world.api("Gateway", &gateway).await;
    fairlead_e2e::until("the Gateway's address assigned", async || {
        let gateway = api.get(name).await.ok()?;
        gateway.data["status"]["addresses"][0]["value"]
            .as_str()
            .filter(|a| !a.is_empty())
            .map(|_| ())
    })
    .await;
    world.delete(&yaml).await;
}

/// GatewayObservedGenerationBump and HTTPRouteObservedGenerationBump: a changed Gateway's
/// or route's conditions carry its new generation.
pub(crate) async fn observed_generation_bumps(world: &World) {
    let yaml = manifest("gateway-observed-generation-bump.yaml");
    world.apply(&yaml);
    let gateway = format!("{INFRA}/gateway-observed-generation-bump");
    world.latest_generation("Gateway", &gateway, 0).await;
    let mut changed = document(&yaml, "Gateway", "gateway-observed-generation-bump");
    let listeners = changed["spec"]["listeners"]
        .as_array_mut()
        .expect("its listeners");
    listeners.push(serde_json::json!({
        "name": "alternate", "hostname": "foo.com", "port": 80, "protocol": "HTTP",
        "allowedRoutes": {"namespaces": {"from": "All"}},
    }));
    world.apply_object(&changed);
    world.latest_generation("Gateway", &gateway, 1).await;
    world.delete(&yaml).await;
    let yaml = world
        .routes_accepted(
            "httproute-observed-generation-bump.yaml",
            "HTTPRoute",
            &[&format!("{INFRA}/observed-generation-bump")],
            SAME_NAMESPACE,
        )
        .await;
    let route = format!("{INFRA}/observed-generation-bump");
    world.latest_generation("HTTPRoute", &route, 0).await;
    let mut changed = document(&yaml, "HTTPRoute", "observed-generation-bump");
    changed["spec"]["rules"][0]["backendRefs"][0]["name"] = "infra-backend-v2".into();
    world.apply_object(&changed);
    world
        .route_accepted("HTTPRoute", &route, SAME_NAMESPACE)
        .await;
    world.latest_generation("HTTPRoute", &route, 1).await;
    world.delete(&yaml).await;
}

/// GatewayWithAttachedRoutes and GatewayWithAttachedRoutesWithPort8080: a listener counts the
/// routes attached to it (accepted or not resolved), not those it does not take.
pub(crate) async fn gateway_with_attached_routes(world: &World) {
    let yaml = manifest("gateway-with-attached-routes.yaml");
    world.apply_test(&yaml).await;
    let valid = [("Accepted", "True", ""), ("ResolvedRefs", "True", "")];
    for (gateway, routes) in [
        ("gateway-with-one-attached-route", 1),
        ("gateway-with-two-attached-routes", 2),
    ] {
        let gateway = format!("{INFRA}/{gateway}");
        for condition in valid {
            world
                .condition("Gateway", &gateway, Some("http"), condition)
                .await;
        }
        world.attached_routes(&gateway, "http", routes).await;
    }
    world
        .route_condition(
            "HTTPRoute",
            &format!("{INFRA}/http-route-not-accepted"),
            &format!("{INFRA}/gateway-with-two-attached-routes"),
            ("Accepted", "False", "NoMatchingListenerHostname"),
        )
        .await;
    let unresolved = format!("{INFRA}/unresolved-gateway-with-one-attached-unresolved-route");
    for condition in [("Programmed", "False", ""), ("ResolvedRefs", "False", "")] {
        world
            .condition("Gateway", &unresolved, Some("tls"), condition)
            .await;
    }
    world.attached_routes(&unresolved, "tls", 1).await;
    world
        .route_condition(
            "HTTPRoute",
            &format!("{INFRA}/http-route-4"),
            &unresolved,
            ("ResolvedRefs", "False", ""),
        )
        .await;
    world.delete(&yaml).await;
    let yaml = manifest("gateway-with-attached-routes-with-port-8080.yaml");
    world.apply_test(&yaml).await;
    let gateway = format!("{INFRA}/gateway-with-two-listeners-and-one-attached-route");
    for (listener, routes) in [("http-unattached", 0), ("http", 1)] {
        for condition in valid {
            world
                .condition("Gateway", &gateway, Some(listener), condition)
                .await;
        }
        world.attached_routes(&gateway, listener, routes).await;
    }
    world.delete(&yaml).await;
}

/// GatewayModifyListeners: a listener added to a Gateway is accepted, counts its routes and
/// serves them; a listener removed leaves the Gateway's status; each change bumps the
/// generation the conditions carry.
pub(crate) async fn gateway_modify_listeners(world: &World) {
    let yaml = manifest("gateway-modify-listeners.yaml");
    world.apply(&yaml);
    let valid: &[(&str, &str, &str)] = &[("Accepted", "True", ""), ("ResolvedRefs", "True", "")];
    let listener = |name, attached| ListenerWant {
        name,
        kinds: &["HTTPRoute"],
        attached,
        conditions: valid,
    };
    let added = format!("{INFRA}/gateway-add-listener");
    world.latest_generation("Gateway", &added, 0).await;
    let mut changed = document(&yaml, "Gateway", "gateway-add-listener");
    changed["spec"]["listeners"]
        .as_array_mut()
        .expect("its listeners")
        .push(serde_json::json!({
            "name": "http", "port": 80, "protocol": "HTTP", "hostname": "data.test.com",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }));
    world.apply_object(&changed);
    world
        .listeners(
            "Gateway",
            &added,
            &[listener("https", 1), listener("http", 1)],
        )
        .await;
    world.latest_generation("Gateway", &added, 1).await;
    world
        .expect(
            &added,
            80,
            Ask::new("GET", &[("Host", "data.test.com")], "/"),
            V1.want(),
        )
        .await;
    let removed = format!("{INFRA}/gateway-remove-listener");
    world.latest_generation("Gateway", &removed, 0).await;
    let mut changed = document(&yaml, "Gateway", "gateway-remove-listener");
    changed["spec"]["listeners"]
        .as_array_mut()
        .expect("its listeners")
        .retain(|l| l["name"] == "http");
    world.apply_object(&changed);
    world
        .listeners("Gateway", &removed, &[listener("http", 1)])
        .await;
    world.latest_generation("Gateway", &removed, 1).await;
    world.delete(&yaml).await;
}

/// GatewayClassObservedGenerationBump: a GatewayClass of fairlead's controller is accepted,
/// and a change of its spec bumps the generation its conditions carry.
pub(crate) async fn gateway_class_observed_generation_bump(world: &World) {
    let yaml = manifest("gatewayclass-observed-generation-bump.yaml");
    world.apply(&yaml);
    let class = "gatewayclass-observed-generation-bump";
    world
        .condition("GatewayClass", class, None, ("Accepted", "True", ""))
        .await;
    world.latest_generation("GatewayClass", class, 0).await;
    let mut changed = document(&yaml, "GatewayClass", class);
    changed["spec"]["description"] = "new".into();
    world.apply_object(&changed);
    world
        .condition("GatewayClass", class, None, ("Accepted", "True", ""))
        .await;
    world.latest_generation("GatewayClass", class, 1).await;
    world.delete(&yaml).await;
}

/// GatewayStaticAddresses: an address of a type fairlead does not take refuses the Gateway
/// (UnsupportedAddress); with an address its proxy cannot bind it is accepted but not
/// programmed (AddressNotUsable, from Envoy's refusal to bind); the usable address alone is
/// bound, reported in its status, and the Gateway programmed.
pub(crate) async fn gateway_static_addresses(world: &World) {
    // The suite's addresses as this machine has them: usable, the Gateway's own loopback
    // address (a proxy here binds it); unusable, one no interface here has (TEST-NET-1).
    const UNUSABLE: &str = "192.0.2.1";
    let key = format!("{INFRA}/gateway-static-addresses");
    let usable = world.address(&key);
    let yaml = manifest("gateway-static-addresses.yaml")
        .replace("PLACEHOLDER_UNUSABLE_ADDRS", UNUSABLE)
        .replace("PLACEHOLDER_USABLE_ADDRS", &usable);
    world.apply(&yaml);
    // Its proxy, connected from the start: what it can bind decides whether it is programmed.
    world.gateway(&key, 8080);
    world
        .gateway_condition(&key, "Accepted", "False", "UnsupportedAddress")
        .await;
    let mut changed = document(&yaml, "Gateway", "gateway-static-addresses");
    let addresses = |gateway: &mut serde_json::Value| {
        gateway["spec"]["addresses"]
            .as_array_mut()
            .expect("its addresses")
            .remove(0);
    };
    addresses(&mut changed);
    world.apply_object(&changed);
    world
        .gateway_condition(&key, "Accepted", "True", "Accepted")
        .await;
    world
        .gateway_condition(&key, "Programmed", "False", "AddressNotUsable")
        .await;
    addresses(&mut changed);
    world.apply_object(&changed);
    world
        .gateway_condition(&key, "Programmed", "True", "Programmed")
        .await;
    let valid: &[(&str, &str, &str)] = &[("Accepted", "True", ""), ("ResolvedRefs", "True", "")];
    world
        .listeners(
            "Gateway",
            &key,
            &[ListenerWant {
                name: "http",
                kinds: &["HTTPRoute"],
                attached: 0,
                conditions: valid,
            }],
        )
        .await;
    let (api, name) = world.api("Gateway", &key).await;
    fairlead_e2e::until(
        &format!("Gateway {key}: addresses [{usable}]"),
        async || {
            let gateway = api.get(name).await.ok()?;
            let want = serde_json::json!([{"type": "IPAddress", "value": usable}]);
            (gateway.data["status"]["addresses"] == want).then_some(())
        },
    )
    .await;
    world.delete(&yaml).await;
}
