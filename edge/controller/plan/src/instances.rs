//! What ALB instances ask for, decided without I/O: which instance controls each Gateway
//! (the oldest by `creationTimestamp`, then kind and name), every instance's inlet (its own
//! proxies and Service: a younger instance naming the same Gateway serves it on its own
//! inlet, with the controlling instance's Gateway-level settings — Deckhouse's way to change
//! an inlet: a new instance, verified, then the old one deleted, its inlet going with it),
//! and the Gateway each controlling instance becomes:
//!
//! - class `d8-alb`, named `gatewayName`, in `d8-alb` for a ClusterALBInstance and in the
//!   instance's namespace for an ALBInstance;
//! - listener `d8-http` (port 80) unless `httpPort: 0`; `d8-https` (443, TLS terminated with
//!   the Secret [`certificate_secret`]) unless `httpsPort: 0` — the platform's certificate for
//!   its default domain, which Deckhouse's cert-manager writes there. The port is served
//!   whatever that Secret's state, so ListenerSets' HTTPS listeners with certificates of
//!   their own work without it (until it exists, `d8-https` alone is `ResolvedRefs=False`);
//!   `tcp-port-<port>` / `udp-port-<port>` for `inlet.additionalPorts`;
//! - `allowedListeners`: ListenerSets from every namespace for a ClusterALBInstance, from
//!   its own for an ALBInstance;
//! - the instance's annotation `fairlead.io/route-statistics` (statistics per route rule),
//!   passed on to the Gateway;
//! - owned by every instance naming it (the controlling one as controller), so the garbage
//!   collector removes it with the last of them, and a younger instance takes over without
//!   the Gateway going away; so are the proxies' ServiceAccount, bootstrap and certificate,
//!   while each inlet is owned by its instance alone.

use std::collections::BTreeMap;

use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Serialize;

pub use crate::instance::{CLUSTER_NAMESPACE, INSTANCE_LABEL, Instance, MANAGER};

/// The instance whose Gateway is the platform's default: of the ClusterALBInstances marked
/// `defaultDeckhouseGateway`, the oldest; with none marked, the one named `main`.
pub fn default_instance(instances: &[Instance]) -> Option<ObjectKey> {
    let cluster = || instances.iter().filter(|i| i.kind == "ClusterALBInstance");
    cluster()
        .filter(|i| i.default)
        .min_by(|a, b| a.order().cmp(&b.order()))
        .or_else(|| cluster().find(|i| i.key.name() == "main"))
        .map(|i| i.key.clone())
}

/// The Secret a managed Gateway's `d8-https` listener presents.
pub fn certificate_secret(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}-tls", gateway.name())
}

/// What one Gateway becomes.
#[derive(Debug)]
pub struct Plan {
    /// The Gateway.
    pub gateway: ObjectKey,
    /// The instance that controls it.
    pub controller: ObjectKey,
    /// The controlling instance's kind.
    pub controller_kind: &'static str,
    /// The Gateway object to apply.
    pub object: Gateway,
    /// The proxy workload ([`crate::workload::objects`]).
    pub workload: Result<crate::workload::Workload, crate::workload::RenderError>,
    /// What the controlling instance's `spec.geoIP` asks ([`crate::geoproxy::plan`]).
    pub geoip: crate::geoproxy::Plan,
    /// The owner references of everything made for the Gateway.
    pub owners: Vec<OwnerReference>,
    /// The other instances naming the Gateway: how each differs.
    pub conflicts: Vec<Conflict>,
    /// The other instances' inlets, one per entry of `conflicts` and in its order: each
    /// serves the Gateway through proxies of its own.
    pub sharing: Vec<Sharing>,
}

/// The inlet of an instance sharing a Gateway an older instance controls: its own proxies
/// and Service ([`crate::workload::Names::sharing`]), serving the Gateway as the controlling
/// instance configures it ([`sharing_instance`]).
#[derive(Debug)]
pub struct Sharing {
    /// Its kind.
    pub kind: &'static str,
    /// Its key.
    pub key: ObjectKey,
    /// Its proxies and Service.
    pub workload: Result<crate::workload::Workload, crate::workload::RenderError>,
}

/// `younger` as its proxies run when `controlling` controls their Gateway: every
/// Gateway-level setting (listeners and additional ports, PROXY protocol, HTTP/3, client
/// addresses, GeoIP, tracing) the controlling instance's, since every proxy of a Gateway
/// takes one configuration; its own only what makes the inlet — the inlet's type, load
/// balancer and host ports, the nodes, tolerations and log level.
pub fn sharing_instance(younger: &Instance, controlling: &Instance) -> Instance {
    let own = &younger.spec;
    let mut spec = controlling.spec.clone();
    spec.gateway_name.clone_from(&own.gateway_name);
    spec.inlet = own.inlet.clone().map(|mut inlet| {
        inlet.additional_ports = controlling
            .spec
            .inlet
            .as_ref()
            .and_then(|i| i.additional_ports.clone());
        inlet
    });
    spec.node_selector.clone_from(&own.node_selector);
    spec.tolerations.clone_from(&own.tolerations);
    spec.envoy_log_level.clone_from(&own.envoy_log_level);
    spec.istio_sidecar = own.istio_sidecar;
    Instance {
        spec,
        ..younger.clone()
    }
}

/// A younger instance naming a Gateway another controls.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// Its kind.
    pub kind: &'static str,
    /// Its key.
    pub key: ObjectKey,
    /// The message its `Conflict` condition carries.
    pub message: String,
    /// Its Gateway-level settings the Gateway does not follow.
    pub differences: crate::conflict::Differences,
    /// The controlling instance's name (the `…Owner` fields).
    pub owner: String,
}

/// The instance controlling each Gateway `instances` name (the oldest naming it): what the
/// cluster-wide jobs need, without planning every Gateway's workload.
pub fn controlling(instances: &[Instance]) -> BTreeMap<ObjectKey, &Instance> {
    let mut out: BTreeMap<ObjectKey, &Instance> = BTreeMap::new();
    for i in instances {
        let slot = out.entry(i.gateway()).or_insert(i);
        if i.order() < slot.order() {
            *slot = i;
        }
    }
    out
}

/// The instances of `all` naming `gateway`.
pub fn sharing<'a>(all: &'a [Instance], gateway: &ObjectKey) -> Vec<&'a Instance> {
    all.iter().filter(|i| i.gateway() == *gateway).collect()
}

/// The plans for `instances`.
pub fn plan(instances: &[Instance], settings: &crate::workload::Settings) -> Vec<Plan> {
    let mut by_gateway: BTreeMap<ObjectKey, Vec<&Instance>> = BTreeMap::new();
    for i in instances {
        by_gateway.entry(i.gateway()).or_default().push(i);
    }
    by_gateway
        .into_iter()
        .map(|(gateway, mut sharing)| {
            sharing.sort_by(|a, b| a.order().cmp(&b.order()));
            let controlling = sharing[0];
            let conflicts = sharing[1..]
                .iter()
                .map(|i| {
                    let differences =
                        crate::conflict::differences(&i.spec, &controlling.spec);
                    let fields = differences.fields();
                    let ignored = if fields.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; its own {} differ and are ignored",
                            fields.join(", ")
                        )
                    };
                    Conflict {
                        kind: i.kind,
                        key: i.key.clone(),
                        message: format!(
                            "Gateway {gateway} is controlled by {} {}, the oldest instance naming it; this one serves it on its own inlet{ignored}",
                            controlling.kind, controlling.key
                        ),
                        differences,
                        owner: controlling.key.name().to_owned(),
                    }
                })
                .collect();
            let owners: Vec<OwnerReference> = sharing
                .iter()
                .enumerate()
                .map(|(n, i)| i.reference(n == 0))
                .collect();
            let geoip = crate::geoproxy::plan(controlling, &gateway);
            let inlet = |i: &Instance, names: &crate::workload::Names| {
                crate::workload::objects_named(
                    i,
                    &gateway,
                    &crate::workload::Owners {
                        shared: &owners,
                        inlet: &[i.reference(true)],
                    },
                    names,
                    geoip.downloads.as_ref(),
                    settings,
                )
            };
            let sharing = sharing[1..]
                .iter()
                .map(|i| Sharing {
                    kind: i.kind,
                    key: i.key.clone(),
                    workload: inlet(
                        &sharing_instance(i, controlling),
                        &crate::workload::Names::sharing(i, &gateway),
                    ),
                })
                .collect();
            let names = if controlling.own_inlet {
                crate::workload::Names::sharing(controlling, &gateway)
            } else {
                crate::workload::Names::gateway(&gateway)
            };
            Plan {
                object: gateway_object(controlling, &gateway, owners.clone()),
                workload: inlet(controlling, &names),
                sharing,
                geoip,
                owners,
                gateway,
                controller: controlling.key.clone(),
                controller_kind: controlling.kind,
                conflicts,
            }
        })
        .collect()
}

/// A managed Gateway, as the controller applies it: the fields it owns.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    /// `gateway.networking.k8s.io/v1`.
    pub api_version: &'static str,
    /// `Gateway`.
    pub kind: &'static str,
    /// Name, namespace, labels, annotations, owners.
    pub metadata: ObjectMeta,
    /// Its spec.
    pub spec: GatewaySpec,
}

/// A managed Gateway's spec.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// Always [`fairlead_edge_model::names::GATEWAY_CLASS`].
    pub gateway_class_name: &'static str,
    /// Its listeners.
    pub listeners: Vec<Listener>,
    /// Which namespaces' ListenerSets attach.
    pub allowed_listeners: Namespaces,
}

/// A managed Gateway's listener.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    /// Its name (the Service port's).
    pub name: String,
    /// Its port.
    pub port: u16,
    /// `HTTP`, `HTTPS`, `TCP` or `UDP`.
    pub protocol: &'static str,
    /// Routes from every namespace.
    pub allowed_routes: Namespaces,
    /// For HTTPS: terminated with the Secret [`certificate_secret`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
}

/// `allowedRoutes` or `allowedListeners`: from which namespaces.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Namespaces {
    /// `{from: All | Same}`.
    pub namespaces: From,
}

/// `from`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct From {
    /// `All` or `Same`.
    pub from: &'static str,
}

/// A listener's TLS.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate`.
    pub mode: &'static str,
    /// The certificate Secret.
    pub certificate_refs: Vec<SecretName>,
}

/// A Secret by name, in the Gateway's namespace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SecretName {
    /// Its name.
    pub name: String,
}

/// The Gateway `instance` becomes.
fn gateway_object(
    instance: &Instance,
    gateway: &ObjectKey,
    owners: Vec<OwnerReference>,
) -> Gateway {
    let listeners = crate::workload::ports(&instance.spec)
        .iter()
        .filter_map(|p| {
            let protocol = p.listener_protocol?;
            Some(Listener {
                name: p.name.clone(),
                port: p.listener,
                protocol,
                allowed_routes: Namespaces {
                    namespaces: From { from: "All" },
                },
                tls: (protocol == "HTTPS").then(|| ListenerTls {
                    mode: "Terminate",
                    certificate_refs: vec![SecretName {
                        name: certificate_secret(gateway),
                    }],
                }),
            })
        })
        .collect();
    let from = if instance.kind == "ClusterALBInstance" {
        "All"
    } else {
        "Same"
    };
    let mut annotations = BTreeMap::new();
    if instance.route_statistics {
        annotations.insert(
            fairlead_edge_model::names::ROUTE_STATISTICS.to_owned(),
            "true".to_owned(),
        );
    }
    Gateway {
        api_version: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        metadata: ObjectMeta {
            name: Some(gateway.name().to_owned()),
            namespace: Some(gateway.namespace().to_owned()),
            labels: Some(BTreeMap::from([
                (INSTANCE_LABEL.to_owned(), instance.label()),
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    MANAGER.to_owned(),
                ),
            ])),
            annotations: Some(annotations),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        spec: GatewaySpec {
            gateway_class_name: fairlead_edge_model::names::GATEWAY_CLASS,
            listeners,
            allowed_listeners: Namespaces {
                namespaces: From { from },
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::value;
    use fairlead_edge_api::InstanceSpec;
    use fairlead_edge_api::types::{AdditionalPort, Inlet, LoadBalancerInlet};
    use serde_json::json;

    fn instance(kind: &'static str, key: ObjectKey, created: &str, gateway: &str) -> Instance {
        Instance {
            kind,
            key,
            uid: format!("uid-{created}"),
            created: created.into(),
            generation: 1,
            default: false,
            route_statistics: false,
            own_inlet: false,
            infrastructure: Default::default(),
            waf: false,
            spec: InstanceSpec {
                gateway_name: gateway.into(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_oldest_instance_controls_a_shared_gateway() {
        let older = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("main"),
            "2026-01-01T00:00:00Z",
            "public",
        );
        let younger = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("second"),
            "2026-02-01T00:00:00Z",
            "public",
        );
        // An ALBInstance in d8-alb names the same Gateway.
        let local = instance(
            "ALBInstance",
            ObjectKey::new("d8-alb", "local"),
            "2026-03-01T00:00:00Z",
            "public",
        );
        let other = instance(
            "ALBInstance",
            ObjectKey::new("team", "t"),
            "2026-01-15T00:00:00Z",
            "public",
        );
        let plans = plan(
            &[younger.clone(), local, older.clone(), other],
            &Default::default(),
        );
        assert_eq!(plans.len(), 2, "d8-alb/public and team/public");
        let public = plans
            .iter()
            .find(|p| p.gateway == ObjectKey::new("d8-alb", "public"))
            .unwrap();
        assert_eq!(public.controller, older.key);
        assert_eq!(public.conflicts.len(), 2);
        assert!(
            public.conflicts[0]
                .message
                .contains("controlled by ClusterALBInstance main"),
            "{:?}",
            public.conflicts
        );
        let object = value(&public.object);
        let owners = object["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(owners.len(), 3, "every instance naming it owns it");
        assert_eq!(owners[0]["name"], "main");
        assert_eq!(owners[0]["controller"], true);
        assert_eq!(owners[1]["controller"], false);
        let team = plans
            .iter()
            .find(|p| p.gateway == ObjectKey::new("team", "public"))
            .unwrap();
        assert!(team.conflicts.is_empty());
        assert_eq!(
            value(&team.object)["spec"]["allowedListeners"]["namespaces"]["from"],
            "Same"
        );
        assert_eq!(
            value(&public.object)["spec"]["allowedListeners"]["namespaces"]["from"],
            "All"
        );
    }

    /// A younger instance with a new inlet serves the Gateway on its own proxies and
    /// Service, named after itself and selecting its pods only, configured as the
    /// controlling instance says; each inlet is its own instance's alone, the Gateway's
    /// shared objects every instance's.
    #[test]
    fn a_younger_instance_serves_the_gateway_on_its_own_inlet() {
        let mut older = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("old"),
            "2026-01-01T00:00:00Z",
            "public",
        );
        older.spec.inlet = Some(Inlet {
            type_: "LoadBalancer".into(),
            additional_ports: Some(vec![AdditionalPort {
                port: 5432,
                protocol: "TCP".into(),
            }]),
            ..Inlet::default()
        });
        let mut younger = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("new"),
            "2026-02-01T00:00:00Z",
            "public",
        );
        younger.spec.inlet = Some(Inlet {
            type_: "LoadBalancer".into(),
            load_balancer: Some(LoadBalancerInlet {
                http_port: Some(8080),
                load_balancer_class: Some("metal".into()),
                ..LoadBalancerInlet::default()
            }),
            ..Inlet::default()
        });
        // Its own HTTP/3 is not the Gateway's: its proxies follow the Gateway.
        younger.spec.enable_http3 = Some(true);
        let plans = plan(&[younger.clone(), older.clone()], &Default::default());
        let public = &plans[0];
        assert_eq!(public.sharing.len(), 1);
        assert_eq!(public.sharing[0].key, younger.key);
        let theirs = public.sharing[0].workload.as_ref().unwrap().values();
        let ours = public.workload.as_ref().unwrap().values();
        let find = |values: &[serde_json::Value], kind: &str| {
            values
                .iter()
                .find(|v| v["kind"] == kind)
                .cloned()
                .unwrap_or_else(|| panic!("no {kind}"))
        };
        let set = find(&theirs, "DaemonSet");
        assert_eq!(set["metadata"]["name"], "d8-alb-public-new");
        assert_eq!(
            set["spec"]["selector"]["matchLabels"]["alb.deckhouse.io/instance"],
            "ClusterALBInstance.new"
        );
        assert_eq!(
            set["metadata"]["ownerReferences"],
            json!([younger.reference(true)]),
            "its inlet goes with it alone"
        );
        let ports: Vec<String> = set["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p["name"].as_str().unwrap(),
                    p["protocol"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            ports,
            [
                "d8-http/TCP",
                "d8-https/TCP",
                "tcp-port-5432/TCP",
                "health/TCP"
            ],
            "the Gateway's listeners (the old instance's additional port, no QUIC)"
        );
        assert_eq!(
            set["spec"]["template"]["spec"]["serviceAccountName"], "d8-alb-public",
            "the Gateway's ServiceAccount"
        );
        let service = find(&theirs, "Service");
        assert_eq!(
            service["metadata"]["name"],
            "d8-alb-public-new-loadbalancer"
        );
        assert_eq!(service["spec"]["loadBalancerClass"], "metal");
        assert_eq!(service["spec"]["ports"][0]["port"], 8080, "its own port");
        assert_eq!(
            service["spec"]["selector"]["alb.deckhouse.io/instance"],
            "ClusterALBInstance.new"
        );
        // The controlling instance's inlet keeps the Gateway's names, its own alone; its
        // Service now selects its own pods only.
        let set = find(&ours, "DaemonSet");
        assert_eq!(set["metadata"]["name"], "d8-alb-public");
        assert_eq!(
            set["metadata"]["ownerReferences"],
            json!([older.reference(true)])
        );
        assert_eq!(
            find(&ours, "Service")["spec"]["selector"]["alb.deckhouse.io/instance"],
            "ClusterALBInstance.old"
        );
        let account = find(&ours, "ServiceAccount");
        assert_eq!(
            account["metadata"]["ownerReferences"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "the Gateway's: every instance's"
        );
        // Once the old one is gone, the new one controls the Gateway and keeps its inlet.
        let mut taken_over = younger.clone();
        taken_over.own_inlet = true;
        let plans = plan(&[taken_over], &Default::default());
        let values = plans[0].workload.as_ref().unwrap().values();
        assert_eq!(
            find(&values, "DaemonSet")["metadata"]["name"],
            "d8-alb-public-new"
        );
        assert_eq!(
            find(&values, "Service")["metadata"]["name"],
            "d8-alb-public-new-loadbalancer"
        );
        assert!(plans[0].sharing.is_empty());
    }

    #[test]
    fn each_gateway_is_controlled_by_the_oldest_instance_naming_it() {
        let older = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("a"),
            "2026-01-01T00:00:00Z",
            "public",
        );
        let younger = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("b"),
            "2026-02-01T00:00:00Z",
            "public",
        );
        let team = instance(
            "ALBInstance",
            ObjectKey::new("team", "t"),
            "2026-03-01T00:00:00Z",
            "public",
        );
        let all = [younger.clone(), team.clone(), older.clone()];
        let controllers = controlling(&all);
        assert_eq!(controllers.len(), 2);
        assert_eq!(
            controllers[&ObjectKey::new("d8-alb", "public")].key,
            older.key
        );
        assert_eq!(controllers[&ObjectKey::new("team", "public")].key, team.key);
        let plans = plan(&all, &Default::default());
        for p in &plans {
            assert_eq!(
                controllers[&p.gateway].key, p.controller,
                "as the plans say"
            );
        }
        assert_eq!(sharing(&all, &ObjectKey::new("d8-alb", "public")).len(), 2);
    }

    #[test]
    fn the_default_gateway_is_the_oldest_marked_or_main() {
        let main = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("main"),
            "2026-03-01T00:00:00Z",
            "a",
        );
        let mut first = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("first"),
            "2026-01-01T00:00:00Z",
            "b",
        );
        let mut later = instance(
            "ClusterALBInstance",
            ObjectKey::cluster("later"),
            "2026-02-01T00:00:00Z",
            "c",
        );
        let local = instance(
            "ALBInstance",
            ObjectKey::new("team", "main"),
            "2025-01-01T00:00:00Z",
            "d",
        );
        assert_eq!(
            default_instance(&[first.clone(), later.clone(), main.clone(), local.clone()]),
            Some(ObjectKey::cluster("main")),
            "none marked: main"
        );
        first.default = true;
        later.default = true;
        assert_eq!(
            default_instance(&[later, main, first, local.clone()]),
            Some(ObjectKey::cluster("first")),
            "the oldest marked"
        );
        assert_eq!(
            default_instance(&[local]),
            None,
            "an ALBInstance is never the default"
        );
    }

    #[test]
    fn listeners_follow_the_inlet_and_the_certificate() {
        let mut i = instance("ClusterALBInstance", ObjectKey::cluster("main"), "t", "gw");
        i.spec.inlet = Some(Inlet {
            type_: "LoadBalancer".into(),
            load_balancer: Some(LoadBalancerInlet {
                https_port: Some(443),
                ..Default::default()
            }),
            additional_ports: Some(vec![
                AdditionalPort {
                    port: 5432,
                    protocol: "TCP".into(),
                },
                AdditionalPort {
                    port: 53,
                    protocol: "UDP".into(),
                },
            ]),
            ..Default::default()
        });
        let names = |i: &Instance| -> Vec<String> {
            value(&plan(std::slice::from_ref(i), &Default::default())[0].object)["spec"]["listeners"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            names(&i),
            ["d8-http", "d8-https", "tcp-port-5432", "udp-port-53"],
            "d8-https whatever the platform certificate's state"
        );
        let https = &value(&plan(std::slice::from_ref(&i), &Default::default())[0].object)["spec"]
            ["listeners"][1];
        assert_eq!(https["tls"]["certificateRefs"][0]["name"], "d8-alb-gw-tls");
        // httpPort: 0 disables the HTTP listener.
        i.spec
            .inlet
            .as_mut()
            .unwrap()
            .load_balancer
            .as_mut()
            .unwrap()
            .http_port = Some(0);
        assert_eq!(names(&i), ["d8-https", "tcp-port-5432", "udp-port-53"]);
    }

    #[test]
    fn route_statistics_are_asked_for_on_the_instance() {
        let mut i = instance("ClusterALBInstance", ObjectKey::cluster("main"), "t", "gw");
        let annotations = |i: &Instance| {
            value(&plan(std::slice::from_ref(i), &Default::default())[0].object)
                ["metadata"]["annotations"]
                .clone()
        };
        assert_eq!(annotations(&i), json!({}));
        i.route_statistics = true;
        assert_eq!(
            annotations(&i),
            json!({"fairlead.io/route-statistics": "true"})
        );
    }
}
