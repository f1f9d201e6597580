//! Gateways of class `d8-alb` that no instance names, provisioned the Gateway API's way when
//! the controller is asked to (`--provision-gateways`; off in Deckhouse's model, where an
//! instance is what asks for proxies): the Gateway itself asks for them. Each becomes the
//! workload an ALBInstance's Gateway gets ([`crate::workload::objects`]: two spread proxies
//! with a disruption budget, their ServiceAccount, bootstrap, client certificate and
//! LoadBalancer Service, in the Gateway's namespace and named after it), with
//!
//! - the ports of the Gateway's own listeners (one per port and transport; HTTP, HTTPS, TLS
//!   and TCP listeners are TCP ports, UDP listeners UDP ports), not the instance's
//!   `d8-http`/`d8-https`;
//! - the labels and annotations of its `spec.infrastructure` on every object and pod, beside
//!   the Gateway API's `gateway.networking.k8s.io/gateway-name` ([`crate::pods::labels`]);
//! - the WAF beside Envoy when a route of the Gateway asks for it (its `WAF` condition);
//! - the Gateway as the owner of everything, so all of it goes with the Gateway; the label
//!   `alb.deckhouse.io/instance: Gateway.<name>` says what made it, so an instance that
//!   names the Gateway later replaces the proxies with its own.

use std::collections::BTreeSet;

use fairlead_edge_api::InstanceSpec;
use fairlead_edge_api::types::{AdditionalPort, Inlet, LoadBalancerInlet};
use fairlead_edge_model::input::Gateway;
use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::instance::Instance;
use crate::workload::{RenderError, Settings, Workload};

/// The kind of the [`Instance`] standing for a provisioned Gateway.
pub use crate::instance::PROVISIONED_KIND as KIND;

/// What a provisioned Gateway becomes.
#[derive(Debug)]
pub struct Provision {
    /// The Gateway.
    pub gateway: ObjectKey,
    /// The Gateway as the owner of everything made for it.
    pub owners: Vec<OwnerReference>,
    /// Its proxy workload.
    pub workload: Result<Workload, RenderError>,
}

/// The instance `gateway` stands for when it is provisioned (`waf`: a route of it asks for
/// the WAF); `None` for a Gateway without a name or namespace.
pub fn instance(gateway: &Gateway, waf: bool) -> Option<Instance> {
    let meta = &gateway.metadata;
    let mut ports = BTreeSet::new();
    for listener in &gateway.spec.listeners {
        let transport = if listener.protocol == "UDP" {
            "UDP"
        } else {
            "TCP"
        };
        ports.insert((listener.port, transport));
    }
    let additional_ports = ports
        .into_iter()
        .map(|(port, protocol)| AdditionalPort {
            port,
            protocol: protocol.to_owned(),
        })
        .collect();
    // A Gateway is namespaced: one read without its namespace is not planned.
    meta.namespace.as_ref()?;
    let spec = InstanceSpec {
        gateway_name: meta.name.clone()?,
        inlet: Some(Inlet {
            type_: "LoadBalancer".to_owned(),
            load_balancer: Some(LoadBalancerInlet {
                http_port: Some(0),
                https_port: Some(0),
                ..LoadBalancerInlet::default()
            }),
            additional_ports: Some(additional_ports),
            ..Inlet::default()
        }),
        ..InstanceSpec::default()
    };
    Some(Instance {
        waf,
        infrastructure: gateway.spec.infrastructure.clone().unwrap_or_default(),
        ..Instance::read(KIND, meta, spec)
    })
}

/// What `gateway` becomes when provisioned ([`instance`]), its proxies made as `settings`
/// say.
pub fn plan(gateway: &Gateway, waf: bool, settings: &Settings) -> Option<Provision> {
    let instance = instance(gateway, waf)?;
    let key = instance.gateway();
    let owners = vec![instance.reference(true)];
    let workload = crate::workload::objects(&instance, &key, &owners, None, settings);
    Some(Provision {
        gateway: key,
        owners,
        workload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Proxies;
    use serde_json::json;

    fn gateway(spec: serde_json::Value) -> Gateway {
        serde_json::from_value(json!({
            "metadata": {"name": "shop", "namespace": "team", "uid": "g-1", "generation": 3},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_provisioned_gateway_exposes_its_own_listener_ports_once_per_transport() {
        let gateway = gateway(json!({"gatewayClassName": "d8-alb", "listeners": [
            {"name": "http", "port": 8080, "protocol": "HTTP"},
            {"name": "http-other", "hostname": "b.example", "port": 8080, "protocol": "HTTP"},
            {"name": "tls", "port": 8443, "protocol": "TLS"},
            {"name": "dns", "port": 5353, "protocol": "UDP"},
        ]}));
        let plan = plan(&gateway, false, &Settings::default()).unwrap();
        let workload = plan.workload.unwrap();
        let ports: Vec<(String, i32, String)> = workload
            .service
            .unwrap()
            .spec
            .unwrap()
            .ports
            .unwrap()
            .into_iter()
            .map(|p| (p.name.unwrap(), p.port, p.protocol.unwrap()))
            .collect();
        assert_eq!(
            ports,
            [
                ("udp-port-5353".to_owned(), 5353, "UDP".to_owned()),
                ("tcp-port-8080".to_owned(), 8080, "TCP".to_owned()),
                ("tcp-port-8443".to_owned(), 8443, "TCP".to_owned()),
            ]
        );
        let Proxies::Deployment(deployment, _) = &workload.proxies else {
            panic!("a provisioned Gateway's proxies are a Deployment");
        };
        assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    }

    #[test]
    fn everything_made_is_owned_by_the_gateway_and_carries_its_infrastructure() {
        let gateway = gateway(json!({"gatewayClassName": "d8-alb",
            "infrastructure": {
                "labels": {"team": "shop", "alb.deckhouse.io/gateway": "not-this"},
                "annotations": {"example.com/owner": "shop-team"}},
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}));
        let plan = plan(&gateway, false, &Settings::default()).unwrap();
        assert_eq!(plan.gateway, ObjectKey::new("team", "shop"));
        let owner = &plan.owners[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str()
            ),
            ("gateway.networking.k8s.io/v1", "Gateway", "shop", "g-1")
        );
        let workload = plan.workload.unwrap();
        let Proxies::Deployment(deployment, budget) = &workload.proxies else {
            panic!("a Deployment");
        };
        let template = deployment.spec.as_ref().unwrap().template.metadata.clone();
        let metas = [
            workload.service_account.metadata.clone(),
            workload.bootstrap.metadata.clone(),
            deployment.metadata.clone(),
            budget.metadata.clone(),
            workload.service.as_ref().unwrap().metadata.clone(),
            template.unwrap(),
        ];
        for meta in metas {
            let labels = meta.labels.unwrap();
            assert_eq!(labels["team"], "shop");
            assert_eq!(labels["gateway.networking.k8s.io/gateway-name"], "shop");
            assert_eq!(
                labels["alb.deckhouse.io/gateway"], "shop",
                "the controller's own labels are kept"
            );
            assert_eq!(labels["alb.deckhouse.io/instance"], "Gateway.shop");
            assert_eq!(meta.annotations.unwrap()["example.com/owner"], "shop-team");
        }
        assert_eq!(
            workload.service_account.metadata.owner_references,
            Some(plan.owners.clone())
        );
    }

    #[test]
    fn a_gateway_whose_routes_ask_for_the_waf_runs_it_beside_envoy() {
        let gateway = gateway(json!({"gatewayClassName": "d8-alb",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}));
        let containers = |waf| {
            let workload = plan(&gateway, waf, &Settings::default())
                .unwrap()
                .workload
                .unwrap();
            let Proxies::Deployment(deployment, _) = workload.proxies else {
                panic!("a Deployment");
            };
            deployment
                .spec
                .unwrap()
                .template
                .spec
                .unwrap()
                .containers
                .into_iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
        };
        assert!(!containers(false).iter().any(|c| c == "waf"));
        assert!(containers(true).iter().any(|c| c == "waf"));
    }
}
