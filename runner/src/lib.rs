//! `fairlead up`'s local workload runner: the kubelet, scheduler, kube-proxy and storage
//! provisioner of the one local node, for the workloads it is told to run (Deployments,
//! DaemonSets and StatefulSets matching [`Config::selector`]; `fairlead up` names the gateway
//! controller's and the load tests'). Each round (every second) it:
//!
//! - runs the pods each workload wants here ([`pod::wanted`]: its replicas; one for a
//!   DaemonSet whose node selector the local Node matches), each on a loopback address of its
//!   own (`127.B.3.N`, the Pod's `podIP`; `B` the runner's block, see [`addresses`]) — see [`running`] for what running one means; a
//!   changed template gets new pods: a Deployment's within its rolling update's
//!   `maxSurge` and `maxUnavailable` ([`pod::Rollout`]), a DaemonSet's new pod first and
//!   the old one stopped once it is ready (a StatefulSet's pods, whose names are stable, are
//!   each stopped first and started again, one at a time from the highest ordinal, each once
//!   the others are ready); a pod leaves its Services' and host ports' targets before it is
//!   told to stop;
//! - makes a StatefulSet pod's PersistentVolumeClaims from its claim templates and binds
//!   them: a directory of the runner's ([`running::CLAIMS_DIR`]) stands in for each volume,
//!   and outlives the pod;
//! - gives each Gateway whose proxies it runs a loopback address of its own (`127.B.1.N`, the
//!   Gateway's annotation [`GatewayListeners::annotation`]): the Gateway's proxies bind its
//!   listeners there, sharing the ports (SO_REUSEPORT), and each also on its pod's address
//!   (`fairlead edge proxy --pod-address`), where its Services and host ports reach it — so a
//!   leaving proxy is out of their targets before it drains, and a connection queued on
//!   its listener when it exits is never one a Service sent it;
//! - writes the workloads' status (ready replicas, scheduled pods) as their controllers do;
//! - gives each Service selecting its pods a loopback address of its own (`127.B.2.N`; a
//!   LoadBalancer's in `status.loadBalancer.ingress`, where its pods' arguments name
//!   `<service>.<namespace>.svc` otherwise) and forwards its ports to the ready pods'
//!   `targetPort` ([`forward`]), and forwards each host port on `127.0.0.1` to its pod. A
//!   port that cannot be bound is in the Service's `ingress[].ports[].error`, or an Event on
//!   the Pod;
//! - writes each such Service's EndpointSlice ([`endpoints`]), as kube-controller-manager
//!   does, so a route to it reaches the pods.
//!
//! The controllers do not know they run on a laptop: they write what they write in a
//! cluster, and this is what makes it run.

mod account;
mod addresses;
mod alias;
mod endpoints;
mod forward;
pub mod pod;
mod running;
mod volumes;

pub use account::ApiAccess;
pub use addresses::Block;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlead_key::ObjectKey;
use fairlead_kit::Runtime;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The field manager of what the runner writes (statuses, the Gateways' listen addresses).
const MANAGER: &str = "fairlead-up-runner";

/// How long an old pod outlives a changed template's new pods that are not ready.
const SURGE: Duration = Duration::from_secs(30);

/// How the runner runs.
#[derive(Debug)]
pub struct Config {
    /// The local Node's name.
    pub node: String,
    /// Where the pods' files go (`<dir>/<namespace>_<pod>/`).
    pub dir: PathBuf,
    /// The `fairlead` binary containers run.
    pub fairlead: PathBuf,
    /// The Envoy binary proxies run (`FAIRLEAD_ENVOY` in their environment).
    pub envoy: Option<PathBuf>,
    /// The label selector of the workloads realized.
    pub selector: String,
    /// The pods that serve a Gateway's listeners, on an address of the Gateway's own (none:
    /// every pod serves on its own address).
    pub gateways: Option<GatewayListeners>,
    /// How often a pod's ConfigMap and Secret volumes are read again.
    pub refresh: Duration,
    /// Where pods reach the API server with their ServiceAccount's token (none: they get
    /// no token).
    pub api: Option<ApiAccess>,
    /// The block of loopback addresses given out, held while the runner lives.
    pub block: Block,
    /// Images whose containers were said to be skipped.
    skipped: Mutex<BTreeSet<String>>,
}

/// Which pods serve a Gateway's listeners, and where a Gateway's address is written.
#[derive(Clone, Debug)]
pub struct GatewayListeners {
    /// The pod template label naming the Gateway (in the workload's namespace).
    pub label: String,
    /// The pod template's `app.kubernetes.io/name` of the pods serving the Gateway (others
    /// carrying the label, such as its geoproxy, serve on their own address).
    pub app: String,
    /// The Gateway's annotation holding the address its pods bind its listeners to.
    pub annotation: String,
    /// The Gateway kind's API resource.
    pub resource: ApiResource,
}

impl Config {
    /// A runner for `node`, its files under `dir`, giving out the addresses of `block`, running
    /// the workloads `selector` selects.
    pub fn new(
        node: &str,
        dir: PathBuf,
        fairlead: PathBuf,
        envoy: Option<PathBuf>,
        block: Block,
        selector: String,
    ) -> Self {
        Self {
            node: node.to_owned(),
            dir,
            fairlead,
            envoy,
            selector,
            gateways: None,
            refresh: Duration::from_secs(2),
            api: None,
            block,
            skipped: Mutex::new(BTreeSet::new()),
        }
    }

    /// Says once per container name and image that it is not run here.
    fn say_skipped(&self, container: &Value) {
        let what = format!(
            "{} ({})",
            container["name"].as_str().unwrap_or_default(),
            container["image"].as_str().unwrap_or_default()
        );
        if self.skipped.lock().expect("skipped").insert(what.clone()) {
            tracing::info!(container = %what, "fairlead up runs only containers that are fairlead commands; this one is skipped (its pod is ready without it)");
        }
    }
}

/// The user the runner's requests carry (its client impersonates it): the admission
/// webhooks let it write a managed Gateway's listen address.
pub const USER: &str = "system:serviceaccount:kube-system:fairlead-up-runner";

/// Starts the runner in `runtime`; `client` should carry [`USER`].
pub fn start(runtime: &Runtime, client: kube::Client, config: Config) {
    let stop = runtime.shutdown.token();
    runtime.shutdown.spawn(run(client, Arc::new(config), stop));
}

/// A pod the runner runs.
struct Running {
    workload: ObjectKey,
    kind: String,
    /// Its template's hash.
    hash: String,
    /// Its own address (a Gateway's proxies listen on the Gateway's too, and on this one,
    /// where Services and host ports reach each of them).
    address: IpAddr,
    labels: BTreeMap<String, String>,
    /// Its host ports: (host port, UDP) → container port.
    host_ports: BTreeMap<(u16, bool), u16>,
    started: Instant,
    handle: running::Handle,
}

/// A port (and whether it is UDP).
type Port = (u16, bool);

/// A forwarder, or why its port could not be bound (and when that was tried).
type Forwarding = Result<forward::Forwarder, (String, Instant)>;

/// How long a port that could not be bound waits before it is tried again.
const BIND_RETRY: Duration = Duration::from_secs(30);

#[derive(Default)]
struct World {
    pods: BTreeMap<ObjectKey, Running>,
    stopping: Vec<running::Handle>,
    /// Each Service's address and forwarders.
    services: BTreeMap<ObjectKey, (IpAddr, BTreeMap<Port, Forwarding>)>,
    /// The Services' addresses by `<name>.<namespace>`, for the pods' arguments.
    addresses: watch::Sender<BTreeMap<String, IpAddr>>,
    /// Each host port's first claimant (the pod its Events name) and forwarder.
    host_ports: BTreeMap<Port, (ObjectKey, Forwarding)>,
    statuses: BTreeMap<(String, ObjectKey), Value>,
    /// The EndpointSlice last written for each Service.
    slices: BTreeMap<ObjectKey, Value>,
}

async fn run(client: kube::Client, config: Arc<Config>, stop: CancellationToken) {
    remove_stale_pods(&client).await;
    let mut world = World::default();
    loop {
        if let Err(e) = round(&client, &config, &mut world).await {
            tracing::warn!(error = %e, "a round of the local runner failed; trying again");
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    // Stopping: every pod gets SIGTERM and a short grace, as on a node shutting down, those
    // already stopping (a replaced template's, draining) too.
    for handle in &world.stopping {
        handle.hurry.cancel();
    }
    for (_, pod) in std::mem::take(&mut world.pods) {
        pod.handle.hurry.cancel();
        pod.handle.stop.cancel();
        world.stopping.push(pod.handle);
    }
    for handle in world.stopping {
        let _ = handle.done.await;
    }
}

/// Pods a runner before this one left in a kept data dir.
async fn remove_stale_pods(client: &kube::Client) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(client.clone());
    let Ok(list) = pods
        .list(&ListParams::default().labels(&format!("{}=true", pod::RUNNER_LABEL)))
        .await
    else {
        return;
    };
    for stale in list.items {
        let (Some(ns), Some(name)) = (stale.metadata.namespace, stale.metadata.name) else {
            continue;
        };
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
}

/// The API resource of a workload kind the runner runs.
fn workload_resource(kind: &str) -> ApiResource {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    match kind {
        "DaemonSet" => ApiResource::erase::<DaemonSet>(&()),
        "Deployment" => ApiResource::erase::<Deployment>(&()),
        _ => ApiResource::erase::<StatefulSet>(&()),
    }
}

fn workloads_api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &workload_resource(kind))
}

fn key_of(object: &Value) -> ObjectKey {
    ObjectKey::new(
        object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default"),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

fn labels_of(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

async fn round(
    client: &kube::Client,
    config: &Arc<Config>,
    world: &mut World,
) -> Result<(), kube::Error> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node_labels = nodes
        .get_opt(&config.node)
        .await?
        .and_then(|n| n.metadata.labels)
        .unwrap_or_default();
    let mut workloads: Vec<Value> = Vec::new();
    for kind in ["DaemonSet", "Deployment", "StatefulSet"] {
        let list = workloads_api(client, kind)
            .list(&ListParams::default().labels(&config.selector))
            .await?;
        workloads.extend(list.items.into_iter().filter_map(|o| {
            let mut value = serde_json::to_value(o).ok()?;
            value["kind"] = json!(kind);
            value["apiVersion"] = json!("apps/v1");
            (value["metadata"]["deletionTimestamp"].is_null()).then_some(value)
        }));
    }
    let addresses = gateway_addresses(client, config, &workloads).await?;
    // Which pods are wanted, and by whom.
    let mut wanted: BTreeMap<ObjectKey, (usize, pod::Wanted)> = BTreeMap::new();
    for (i, workload) in workloads.iter().enumerate() {
        // A proxy starts once its Gateway has its address (its listeners bind there).
        if let Some(gateway) = gateway_of(config.gateways.as_ref(), workload)
            && !addresses.contains_key(&gateway)
        {
            continue;
        }
        for w in pod::wanted(workload, &node_labels) {
            wanted.insert(
                ObjectKey::new(key_of(workload).namespace(), &w.name),
                (i, w),
            );
        }
    }
    // A StatefulSet's pod of an older template stops before its successor starts (its name
    // is the new one's), one at a time from the highest ordinal.
    let outdated: Vec<pod::Outdated> = world
        .pods
        .iter()
        .filter(|(_, p)| p.kind == "StatefulSet")
        .filter_map(|(key, p)| {
            let (_, w) = wanted.get(key).filter(|(_, w)| w.hash != p.hash)?;
            Some(pod::Outdated {
                workload: p.workload.clone(),
                pod: key.clone(),
                ordinal: w.ordinal,
            })
        })
        .collect();
    let settled = |set: &ObjectKey| {
        wanted
            .iter()
            .filter(|(_, (i, _))| {
                workloads[*i]["kind"] == "StatefulSet" && &key_of(&workloads[*i]) == set
            })
            .all(|(key, (_, w))| {
                let stopping = world
                    .stopping
                    .iter()
                    .any(|h| h.name == w.name && h.namespace == key.namespace());
                let current = world
                    .pods
                    .get(key)
                    .map(|p| p.hash != w.hash || *p.handle.ready.borrow());
                !stopping && current == Some(true)
            })
    };
    for key in pod::replacements(&outdated, settled) {
        if let Some(pod) = world.pods.remove(&key) {
            tracing::info!(pod = %key, "replacing a pod of an older template");
            pod.handle.stop.cancel();
            world.stopping.push(pod.handle);
        }
    }
    // Each Deployment's rollout, and how many of its pods run (old and new; not those
    // stopping): a new pod starts only within its surge.
    let rollouts: BTreeMap<ObjectKey, pod::Rollout> = workloads
        .iter()
        .filter_map(|w| Some((key_of(w), pod::Rollout::of(w)?)))
        .collect();
    let mut present: BTreeMap<ObjectKey, usize> = BTreeMap::new();
    for p in world.pods.values().filter(|p| p.kind == "Deployment") {
        *present.entry(p.workload.clone()).or_default() += 1;
    }
    // Start what is missing.
    let taken: BTreeSet<IpAddr> = world
        .pods
        .values()
        .map(|p| p.handle.ip)
        .chain(world.stopping.iter().map(|h| h.ip))
        .collect();
    let mut taken = taken;
    for (key, (i, w)) in &wanted {
        if world.pods.contains_key(key)
            || world
                .stopping
                .iter()
                .any(|h| h.name == w.name && h.namespace == key.namespace())
        {
            continue;
        }
        let workload = &workloads[*i];
        if let Some(rollout) = rollouts.get(&key_of(workload)) {
            let running = present.entry(key_of(workload)).or_default();
            if !rollout.may_start(*running) {
                continue;
            }
            *running += 1;
        }
        if let Err(e) = bind_claims(client, config, workload, w).await {
            tracing::warn!(pod = %key, error = %e, "the pod's claims are not bound yet");
            continue;
        }
        let Some(ip) = config.block.pods().free(&taken) else {
            tracing::error!(pod = %key, block = config.block.number, "no loopback address left for a pod (127.B.3.1-254)");
            continue;
        };
        taken.insert(ip);
        let handle = running::spawn(
            client.clone(),
            config.clone(),
            workload,
            w,
            ip,
            world.addresses.subscribe(),
        );
        let template = &workload["spec"]["template"];
        let mut labels = labels_of(&template["metadata"]["labels"]);
        labels.insert("pod-template-hash".into(), w.hash.clone());
        tracing::info!(pod = %key, address = %ip, "starting a pod");
        world.pods.insert(
            key.clone(),
            Running {
                workload: key_of(workload),
                kind: workload["kind"].as_str().unwrap_or_default().to_owned(),
                hash: w.hash.clone(),
                address: ip,
                labels,
                host_ports: host_ports(template),
                started: Instant::now(),
                handle,
            },
        );
    }
    // Stop what is no longer wanted ([`pod::superseded`]): a Deployment's pods within its
    // rollout; others at once when their workload is gone, else once the workload's wanted
    // pods are ready (or have had their time).
    let current: Vec<pod::Current> = world
        .pods
        .iter()
        .map(|(key, p)| pod::Current {
            pod: key.clone(),
            workload: (p.kind.clone(), p.workload.clone()),
            ready: *p.handle.ready.borrow(),
            overdue: p.started.elapsed() > SURGE,
            rollout: (p.kind == "Deployment")
                .then(|| rollouts.get(&p.workload).copied())
                .flatten(),
        })
        .collect();
    let leaving: Vec<(ObjectKey, Running)> =
        pod::superseded(&current, |key| wanted.contains_key(key))
            .into_iter()
            .filter_map(|key| Some((key.clone(), world.pods.remove(&key)?)))
            .collect();
    world.stopping.retain(|h| !h.done.is_finished());
    write_workload_statuses(client, &workloads, &wanted, world).await;
    // The pods leaving are out of every Service's and host port's targets (and EndpointSlice)
    // before they are told to stop, as a cluster takes a terminating pod out of its
    // Services before it drains: no new connection reaches a pod that is going.
    let served = services(client, &config.block, world).await;
    host_port_forwarders(client, world).await;
    for (key, pod) in leaving {
        tracing::info!(pod = %key, "stopping a pod");
        pod.handle.stop.cancel();
        world.stopping.push(pod.handle);
    }
    served
}

/// The Gateway a workload's pods serve the listeners of (their template's
/// [`GatewayListeners::label`], when their app is [`GatewayListeners::app`]).
fn gateway_of(gateways: Option<&GatewayListeners>, workload: &Value) -> Option<ObjectKey> {
    let gateways = gateways?;
    let labels = &workload["spec"]["template"]["metadata"]["labels"];
    if labels["app.kubernetes.io/name"] != gateways.app.as_str() {
        return None;
    }
    let gateway = labels[gateways.label.as_str()].as_str()?;
    Some(ObjectKey::new(key_of(workload).namespace(), gateway))
}

/// Makes and binds the PersistentVolumeClaims of a StatefulSet's pod `wanted` (each stands
/// for a directory of the runner's, [`running::CLAIMS_DIR`], empty when bound).
async fn bind_claims(
    client: &kube::Client,
    config: &Config,
    workload: &Value,
    wanted: &pod::Wanted,
) -> Result<(), kube::Error> {
    for claim in pod::claims(workload, wanted) {
        let key = key_of(&claim);
        let api: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(client.clone(), key.namespace());
        let existing = match api.get_opt(key.name()).await? {
            Some(existing) => existing,
            None => {
                let object = serde_json::from_value(claim).map_err(kube::Error::SerdeError)?;
                api.create(&kube::api::PostParams::default(), &object)
                    .await?
            }
        };
        let bound = existing.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        if bound {
            continue;
        }
        let dir = volumes::claim_dir(
            &config.dir.join(running::CLAIMS_DIR),
            key.namespace(),
            key.name(),
        );
        // A new claim is a new, empty volume: what an earlier claim of its name left goes.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                kube::Error::Service(format!("emptying {}: {e}", dir.display()).into())
            })?;
            tracing::info!(claim = %key, dir = %dir.display(), "an earlier claim's directory emptied for a new claim of its name");
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| kube::Error::Service(format!("making {}: {e}", dir.display()).into()))?;
        let spec = existing.spec.unwrap_or_default();
        let status = json!({"status": {"phase": "Bound",
            "accessModes": spec.access_modes,
            "capacity": spec.resources.and_then(|r| r.requests).unwrap_or_default()}});
        api.patch_status(key.name(), &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        tracing::info!(claim = %key, dir = %dir.display(), "a claim bound to a directory here");
    }
    Ok(())
}

/// The listen address of each Gateway whose proxies run here, as the Gateway holds it;
/// Gateways without one (or with one another Gateway holds) are given one, which the next
/// round reads back.
async fn gateway_addresses(
    client: &kube::Client,
    config: &Config,
    workloads: &[Value],
) -> Result<BTreeMap<ObjectKey, IpAddr>, kube::Error> {
    let Some(gateways) = &config.gateways else {
        return Ok(BTreeMap::new());
    };
    let (block, resource) = (&config.block, &gateways.resource);
    let annotation = gateways.annotation.as_str();
    let mut held: BTreeMap<ObjectKey, Option<IpAddr>> = BTreeMap::new();
    for gateway in workloads
        .iter()
        .filter_map(|w| gateway_of(Some(gateways), w))
    {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), gateway.namespace(), resource);
        let Some(object) = api.get_opt(gateway.name()).await? else {
            continue;
        };
        let address = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotation))
            .and_then(|a| a.parse::<IpAddr>().ok())
            .filter(|ip| block.gateways().contains(*ip));
        held.insert(gateway, address);
    }
    let assigned = block.gateways().assign(&held);
    let mut out = BTreeMap::new();
    for (gateway, address) in assigned {
        if held.get(&gateway).copied().flatten() == Some(address) {
            out.insert(gateway, address);
            continue;
        }
        let patch = json!({"apiVersion": resource.api_version, "kind": resource.kind,
            "metadata": {"name": gateway.name(), "namespace": gateway.namespace(),
                "annotations": {annotation: address.to_string()}}});
        Api::<DynamicObject>::namespaced_with(client.clone(), gateway.namespace(), resource)
            .patch(
                gateway.name(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await?;
        tracing::info!(%gateway, %address, "the Gateway's local proxies listen here");
    }
    Ok(out)
}

/// A template's host ports: (host port, UDP) → container port.
fn host_ports(template: &Value) -> BTreeMap<(u16, bool), u16> {
    template["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .filter_map(|p| {
            let host = u16::try_from(p["hostPort"].as_u64()?).ok()?;
            let container = u16::try_from(p["containerPort"].as_u64()?).ok()?;
            Some(((host, p["protocol"] == "UDP"), container))
        })
        .collect()
}

/// Writes each workload's status as its controller would (when it changed).
async fn write_workload_statuses(
    client: &kube::Client,
    workloads: &[Value],
    wanted: &BTreeMap<ObjectKey, (usize, pod::Wanted)>,
    world: &mut World,
) {
    for (i, workload) in workloads.iter().enumerate() {
        let key = key_of(workload);
        let kind = workload["kind"].as_str().unwrap_or_default();
        let mine: Vec<&Running> = world
            .pods
            .values()
            .filter(|p| p.workload == key && p.kind == kind)
            .collect();
        let desired = wanted.values().filter(|(w, _)| *w == i).count();
        let current = mine.len();
        let ready = mine.iter().filter(|p| *p.handle.ready.borrow()).count();
        let updated = mine
            .iter()
            .filter(|p| {
                wanted
                    .values()
                    .any(|(w, x)| *w == i && x.name == p.handle.name)
            })
            .count();
        let generation = workload["metadata"]["generation"].clone();
        let status = if kind == "DaemonSet" {
            json!({"desiredNumberScheduled": desired, "currentNumberScheduled": current,
                "numberReady": ready, "numberAvailable": ready,
                "numberUnavailable": desired.saturating_sub(ready),
                "updatedNumberScheduled": updated, "numberMisscheduled": 0,
                "observedGeneration": generation})
        } else if kind == "StatefulSet" {
            let revision = pod::hash(&workload["spec"]["template"]);
            json!({"replicas": current, "readyReplicas": ready, "availableReplicas": ready,
                "currentReplicas": updated, "updatedReplicas": updated,
                "currentRevision": revision, "updateRevision": revision,
                "observedGeneration": generation})
        } else {
            json!({"replicas": current, "readyReplicas": ready, "availableReplicas": ready,
                "updatedReplicas": updated, "unavailableReplicas": desired.saturating_sub(ready),
                "observedGeneration": generation,
                "conditions": [{"type": "Available", "status": if ready > 0 { "True" } else { "False" },
                    "reason": if ready > 0 { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" }}]})
        };
        let cache_key = (kind.to_owned(), key.clone());
        if world.statuses.get(&cache_key) == Some(&status) {
            continue;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), key.namespace(), &workload_resource(kind));
        match api
            .patch_status(
                key.name(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
        {
            Ok(_) => {
                world.statuses.insert(cache_key, status);
            }
            Err(e) => tracing::debug!(workload = %key, error = %e, "writing a workload's status"),
        }
    }
}

/// The Services selecting the runner's pods: an address each, forwarders to the ready pods,
/// and a LoadBalancer's status.
async fn services(
    client: &kube::Client,
    block: &Block,
    world: &mut World,
) -> Result<(), kube::Error> {
    let api: Api<k8s_openapi::api::core::v1::Service> = Api::all(client.clone());
    let mut seen = BTreeSet::new();
    for service in api.list(&ListParams::default()).await?.items {
        let spec = service.spec.clone().unwrap_or_default();
        let load_balancer = spec.type_.as_deref() == Some("LoadBalancer");
        if !load_balancer && spec.type_.as_deref().is_some_and(|t| t != "ClusterIP") {
            continue;
        }
        let selector = spec.selector.clone().unwrap_or_default();
        let selects = |p: &Running| {
            !selector.is_empty() && selector.iter().all(|(k, v)| p.labels.get(k) == Some(v))
        };
        if !world.pods.values().any(selects) {
            continue;
        }
        let key = ObjectKey::new(
            service.metadata.namespace.as_deref().unwrap_or("default"),
            service.metadata.name.as_deref().unwrap_or_default(),
        );
        seen.insert(key.clone());
        let taken: BTreeSet<IpAddr> = world
            .services
            .iter()
            .filter(|(k, _)| **k != key)
            .map(|(_, (ip, _))| *ip)
            .collect();
        let held = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .and_then(|i| i.first())
            .and_then(|i| i.ip.as_deref())
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .filter(|ip| block.services().contains(*ip) && !taken.contains(ip));
        let address = match world.services.get(&key) {
            Some((ip, _)) => *ip,
            None => match held.or_else(|| block.services().free(&taken)) {
                Some(ip) => ip,
                None => continue,
            },
        };
        // The pods it selects: the address each serves on, and whether it is ready.
        let selected: Vec<(IpAddr, bool)> = world
            .pods
            .values()
            .filter(|p| selects(p))
            .map(|p| (p.address, *p.handle.ready.borrow()))
            .collect();
        let entry = world
            .services
            .entry(key.clone())
            .or_insert_with(|| (address, BTreeMap::new()));
        let mut ports_status = Vec::new();
        let mut wanted_ports = BTreeSet::new();
        for port in spec.ports.iter().flatten() {
            let udp = port.protocol.as_deref() == Some("UDP");
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            wanted_ports.insert((number, udp));
            let targets = endpoints::targets(port, &selected);
            let forwarder = match entry.1.remove(&(number, udp)) {
                Some(Ok(f)) => Ok(f),
                Some(Err((e, at))) if at.elapsed() < BIND_RETRY => Err((e, at)),
                previous => {
                    let started = forward::start(SocketAddr::new(address, number), udp, Vec::new());
                    match (started, previous) {
                        (Ok(f), _) => Ok(f),
                        (Err(e), Some(Err((before, _)))) if before == e => Err((e, Instant::now())),
                        (Err(e), _) => {
                            tracing::warn!(service = %key, error = %e, "a Service port cannot be served here; trying again every 30 s");
                            Err((e, Instant::now()))
                        }
                    }
                }
            };
            if let Ok(f) = &forwarder {
                f.targets.send_if_modified(|t| {
                    let changed = *t != targets;
                    *t = targets.clone();
                    changed
                });
            }
            let mut status = json!({"port": number, "protocol": if udp { "UDP" } else { "TCP" }});
            if let Err((e, _)) = &forwarder {
                status["error"] = json!(if e.contains("permission denied") {
                    "PermissionDenied"
                } else {
                    "PortUnavailable"
                });
            }
            ports_status.push(status);
            entry.1.insert((number, udp), forwarder);
        }
        entry.1.retain(|p, _| wanted_ports.contains(p));
        let uid = service.metadata.uid.as_deref().unwrap_or_default();
        let slice = endpoints::slice(&key, uid, &spec, &selected);
        if world.slices.get(&key) != Some(&slice) {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                key.namespace(),
                &kube::discovery::ApiResource::erase::<
                    k8s_openapi::api::discovery::v1::EndpointSlice,
                >(&()),
            );
            api.patch(
                &endpoints::name(&key),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&slice),
            )
            .await?;
            world.slices.insert(key.clone(), slice);
        }
        let status = json!({"loadBalancer": {"ingress": [{"ip": address.to_string(), "ipMode": "VIP", "ports": ports_status}]}});
        let stored = serde_json::to_value(&service.status).unwrap_or_default();
        if load_balancer && stored["loadBalancer"] != status["loadBalancer"] {
            let api: Api<k8s_openapi::api::core::v1::Service> =
                Api::namespaced(client.clone(), key.namespace());
            api.patch_status(
                key.name(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await?;
        }
    }
    world.services.retain(|k, _| seen.contains(k));
    // A Service gone, or selecting none of the pods here any more: its slice goes.
    let gone: Vec<ObjectKey> = world
        .slices
        .keys()
        .filter(|k| !seen.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        let api: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
            Api::namespaced(client.clone(), key.namespace());
        match api
            .delete(&endpoints::name(&key), &DeleteParams::default())
            .await
        {
            Ok(_) => {
                world.slices.remove(&key);
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {
                world.slices.remove(&key);
            }
            Err(e) => return Err(e),
        }
    }
    let addresses: BTreeMap<String, IpAddr> = world
        .services
        .iter()
        .map(|(k, (ip, _))| (format!("{}.{}", k.name(), k.namespace()), *ip))
        .collect();
    world.addresses.send_if_modified(|held| {
        let changed = *held != addresses;
        *held = addresses;
        changed
    });
    Ok(())
}

/// Host ports on 127.0.0.1, each to the ready pods that ask for it; one that cannot be bound
/// is an Event on the pod (once). A port's forwarder stays bound while some pod asks for it:
/// a pod replaced by another (a new template's, beside it until it is ready) only changes
/// where new connections go, so a rollout never closes a port that serves.
async fn host_port_forwarders(client: &kube::Client, world: &mut World) {
    let mut wanted: BTreeMap<(u16, bool), (ObjectKey, Vec<SocketAddr>)> = BTreeMap::new();
    for (key, pod) in &world.pods {
        for (&(host, udp), &container) in &pod.host_ports {
            let (_, targets) = wanted
                .entry((host, udp))
                .or_insert_with(|| (key.clone(), Vec::new()));
            if *pod.handle.ready.borrow() {
                targets.push(SocketAddr::new(pod.address, container));
            }
        }
    }
    // A port no pod asks for is closed; one that could not be bound is tried again after a
    // while.
    world.host_ports.retain(|port, (_, forwarder)| {
        wanted.contains_key(port)
            && !matches!(forwarder, Err((_, at)) if at.elapsed() >= BIND_RETRY)
    });
    for ((host, udp), (owner, targets)) in wanted {
        if let std::collections::btree_map::Entry::Vacant(slot) =
            world.host_ports.entry((host, udp))
        {
            let started = forward::start(SocketAddr::from(([127, 0, 0, 1], host)), udp, Vec::new())
                .map_err(|e| (e, Instant::now()));
            if let Err((e, _)) = &started {
                tracing::warn!(pod = %owner, error = %e, "a host port cannot be bound");
                let events = fairlead_kit::events::Events::new(client.clone(), MANAGER, None);
                let reference = k8s_openapi::api::core::v1::ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(owner.name().to_owned()),
                    namespace: Some(owner.namespace().to_owned()),
                    ..Default::default()
                };
                events
                    .warning(&reference, "HostPortUnavailable", "BindHostPort", e.clone())
                    .await;
            }
            slot.insert((owner.clone(), started));
        }
        if let Some((_, Ok(forwarder))) = world.host_ports.get(&(host, udp)) {
            forwarder.targets.send_if_modified(|t| {
                let changed = *t != targets;
                *t = targets.clone();
                changed
            });
        }
    }
}
