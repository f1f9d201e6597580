//! The gateway controller's loop (a thin shell over [`crate::instances`] and
//! [`crate::workload`]): cached watches of both instance kinds, Gateways, the proxies'
//! workloads, Services and Pods, TLS Secrets (and, with HTTP-01 bridging, cert-manager's
//! solver routes) wake it; each round reads every instance, plans, keeps the CA and the xDS
//! server's certificate ([`crate::certificates`]), the webhooks' certificate and
//! registration ([`crate::webhook`]), server-side applies each controlling
//! instance's Gateway, its proxies' client certificate and workload (field manager
//! [`MANAGER`]; the namespace `d8-alb` is made when missing), and writes every instance's
//! status: the Gateway it names, `Conflict` (with the controlling instance's name), `Ready`
//! (the Gateway programmed by the control plane and a proxy ready) and the addresses clients
//! reach it on, and keeps the finalizer on instances ([`crate::finalizer`]). A round also runs
//! when the next certificate is due. While the module's
//! cleanup is requested ([`crate::cleanup`]) it only removes what it made. Failed rounds are
//! retried with backoff; what was made for an instance goes with its last owner (garbage
//! collection).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fairlead_edge_api::{ALBInstance, ClusterALBInstance};
use fairlead_key::ObjectKey;
use fairlead_kit::reconcile::{Outcome, Pacing, Rounds, Wake};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::instances::{self, CLUSTER_NAMESPACE, Instance, MANAGER, Plan};
use crate::workload::Proxies;

/// The Lease whose holder reconciles.
pub const LEASE: &str = "alb-gateway-controller-leader";

/// Rounds: changes collected for 50 ms, everything again every 30 s, retries from 1 s.
pub const PACING: Pacing = Pacing {
    debounce: Duration::from_millis(50),
    resync: Duration::from_secs(30),
    retry: Duration::from_secs(1),
    max_doublings: 5,
};

fn gateways(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &crate::crds::resource("Gateway"))
}

/// Runs until `stop`; writes only while `leadership` holds the Lease (always without one).
pub async fn run(
    client: kube::Client,
    leadership: Option<fairlead_kit::lease::Leadership>,
    config: Config,
    metrics: crate::metrics::ControllerMetrics,
    stop: CancellationToken,
) {
    let changes = Arc::new(Notify::new());
    let clusters: Api<ClusterALBInstance> = Api::all(client.clone());
    let namespaced: Api<ALBInstance> = Api::all(client.clone());
    let clusters_seen = fairlead_kit::watch::cache(
        clusters.clone(),
        watcher::Config::default(),
        fairlead_kit::watch::without_managed_fields,
        changes.clone(),
        stop.clone(),
    );
    let namespaced_seen = fairlead_kit::watch::cache(
        namespaced.clone(),
        watcher::Config::default(),
        fairlead_kit::watch::without_managed_fields,
        changes.clone(),
        stop.clone(),
    );
    let gateway_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &crate::crds::resource("Gateway"));
    // Every Gateway: managed ones report whether they are programmed; the others of class
    // d8-alb are told why no proxy serves them.
    tokio::spawn(wake_on(
        gateway_api,
        watcher::Config::default(),
        changes.clone(),
        stop.clone(),
    ));
    // cert-manager's solver routes, bridged while HTTP-01 bridging is on.
    if config.http01_ingress_class.is_some() {
        let routes: Api<DynamicObject> =
            Api::all_with(client.clone(), &crate::crds::resource("HTTPRoute"));
        tokio::spawn(wake_on(
            routes,
            watcher::Config::default().labels(crate::http01::SOLVER_LABEL),
            changes.clone(),
            stop.clone(),
        ));
    }
    // The module's cleanup mark.
    let marker: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        CLUSTER_NAMESPACE,
        &crate::apply::resource("ConfigMap"),
    );
    tokio::spawn(wake_on(
        marker,
        watcher::Config::default().fields(&format!("metadata.name={}", crate::cleanup::MARKER)),
        changes.clone(),
        stop.clone(),
    ));
    // The workloads' and Services' statuses: proxies and geoproxies ready, load balancer
    // addresses.
    for kind in ["DaemonSet", "Deployment", "StatefulSet", "Service", "Pod"] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &crate::apply::resource(kind));
        tokio::spawn(wake_on(
            api,
            watcher::Config::default().labels(crate::pods::GATEWAY_LABEL),
            changes.clone(),
            stop.clone(),
        ));
    }
    // A certificate Secret appearing adds a Gateway's HTTPS listener.
    let secrets: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    );
    tokio::spawn(wake_on(
        secrets,
        watcher::Config::default().fields("type=kubernetes.io/tls"),
        changes.clone(),
        stop.clone(),
    ));
    // The first round waits for both caches to list (instances must not look absent).
    tokio::select! {
        () = stop.cancelled() => return,
        listed = async {
            clusters_seen.wait_until_ready().await?;
            namespaced_seen.wait_until_ready().await
        } => if let Err(e) = listed {
            tracing::error!(error = %e, "the instance watches never listed");
            return;
        },
    }
    let mut rounds = Rounds::new(PACING, changes.clone());
    let mut renewal = tokio::spawn(async {});
    loop {
        match rounds.next(&stop).await {
            None => return,
            Some(Wake::Changed) => rounds.settle().await,
            Some(Wake::Resync) => {}
        }
        if leadership.as_ref().is_some_and(|l| !l.is_leader()) {
            rounds.finished(Outcome::Done);
            continue;
        }
        let mut all: Vec<Instance> = clusters_seen
            .state()
            .iter()
            .filter(|i| i.metadata.deletion_timestamp.is_none())
            .map(|i| {
                let mut read = read("ClusterALBInstance", &i.metadata, i.spec.instance.clone());
                read.default = i.spec.default_deckhouse_gateway == Some(true);
                read
            })
            .collect();
        all.extend(
            namespaced_seen
                .state()
                .iter()
                .filter(|i| i.metadata.deletion_timestamp.is_none())
                .map(|i| read("ALBInstance", &i.metadata, i.spec.instance.clone())),
        );
        // Every instance's finalizer, the deleting ones' included.
        let finalizers: Vec<crate::finalizer::Change> = clusters_seen
            .state()
            .iter()
            .filter_map(|i| {
                crate::finalizer::change(
                    "ClusterALBInstance",
                    &i.metadata,
                    &i.spec.instance.gateway_name,
                )
            })
            .chain(namespaced_seen.state().iter().filter_map(|i| {
                crate::finalizer::change("ALBInstance", &i.metadata, &i.spec.instance.gateway_name)
            }))
            .collect();
        let started = std::time::Instant::now();
        let result = round(&client, &all, &finalizers, &config, &metrics).await;
        metrics
            .duration
            .with_label_values(&[] as &[&str])
            .observe(started.elapsed().as_secs_f64());
        metrics
            .reconciles
            .with_label_values(&[if result.is_ok() { "ok" } else { "error" }])
            .inc();
        let outcome = match result {
            Ok(due) => {
                // A round when the next certificate is due, whatever else happens.
                if let Some(after) = due.after() {
                    renewal.abort();
                    let changes = changes.clone();
                    renewal = tokio::spawn(async move {
                        tokio::time::sleep(after + Duration::from_millis(100)).await;
                        changes.notify_one();
                    });
                }
                Outcome::Done
            }
            Err(e) => {
                tracing::warn!(error = %e, "gateway controller round failed; retrying");
                Outcome::Failed
            }
        };
        rounds.finished(outcome);
    }
}

/// Wakes the loop on every change `api` (narrowed by `config`) sees: managed Gateways (their
/// status says whether they are programmed), TLS Secrets (a Gateway's certificate).
async fn wake_on(
    api: Api<DynamicObject>,
    config: watcher::Config,
    changes: Arc<Notify>,
    stop: CancellationToken,
) {
    use futures::StreamExt as _;
    let mut events = std::pin::pin!(kube::runtime::WatchStreamExt::default_backoff(watcher(
        api, config
    )));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(_)) => changes.notify_one(),
                Some(Err(e)) => tracing::debug!(error = %e, "a watch of the gateway controller"),
                None => return,
            },
        }
    }
}

fn read(
    kind: &'static str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: fairlead_edge_api::InstanceSpec,
) -> Instance {
    let name = meta.name.clone().unwrap_or_default();
    Instance {
        kind,
        key: match &meta.namespace {
            Some(ns) => ObjectKey::new(ns, &name),
            None => ObjectKey::cluster(&name),
        },
        uid: meta.uid.clone().unwrap_or_default(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        generation: meta.generation.unwrap_or_default(),
        default: false,
        route_statistics: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(fairlead_edge_model::names::ROUTE_STATISTICS))
            .is_some_and(|v| v == "true"),
        spec,
    }
}

/// What the loop is configured with (the controller's flags).
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// How proxy workloads are made.
    pub workload: crate::workload::Settings,
    /// How long issued certificates are valid (renewed at two thirds).
    pub lifetime: Option<Duration>,
    /// The ingress class of cert-manager's HTTP-01 bridges (none: no bridging).
    pub http01_ingress_class: Option<String>,
    /// Where the API server reaches the admission webhooks (none: not registered).
    pub webhook: Option<crate::webhook::WebhookService>,
}

impl Config {
    fn lifetime(&self) -> Duration {
        self.lifetime
            .unwrap_or(crate::certificates::DEFAULT_LIFETIME)
    }
}

/// Why a round failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// The API refused a read or a write.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A certificate could not be kept.
    #[error(transparent)]
    Certificate(#[from] crate::certificates::CertificateError),
    /// A workload could not be rendered.
    #[error("{0}")]
    Render(String),
}

/// The names of the xDS server's serving certificate: the host proxies dial and its
/// Service's names.
fn xds_names(host: &str) -> (Vec<String>, Vec<std::net::IpAddr>) {
    let mut names: Vec<String> = Vec::new();
    let mut ips = Vec::new();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ips.push(ip),
        Err(_) => names.push(host.to_owned()),
    }
    for name in [
        "alb-xds".to_owned(),
        format!("alb-xds.{CLUSTER_NAMESPACE}.svc"),
        format!("alb-xds.{CLUSTER_NAMESPACE}.svc.cluster.local"),
    ] {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    (names, ips)
}

/// One round over `all` live instances, then the `finalizers` changes.
async fn round(
    client: &kube::Client,
    all: &[Instance],
    finalizers: &[crate::finalizer::Change],
    config: &Config,
    metrics: &crate::metrics::ControllerMetrics,
) -> Result<Due, RoundError> {
    // The module is going: nothing is made any more, and what was made goes.
    if crate::cleanup::requested(client).await? {
        let asked = crate::cleanup::remove_all(client).await?;
        if asked > 0 {
            tracing::info!(
                objects = asked,
                "module cleanup requested: removing what the controller made"
            );
        }
        return Ok(Due::default());
    }
    let mut certificates = std::collections::BTreeSet::new();
    for instance in all {
        let gateway = instance.gateway();
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(client.clone(), gateway.namespace());
        if api
            .get_opt(&instances::certificate_secret(&gateway))
            .await?
            .is_some()
        {
            certificates.insert(gateway);
        }
    }
    ensure_namespace(client).await?;
    let ca = crate::certificates::authority(client).await?;
    let lifetime = config.lifetime();
    let (names, ips) = xds_names(&config.workload.xds.0);
    // What the serving certificate names, as it reads back (names, then addresses).
    let hosts: Vec<String> = names
        .iter()
        .cloned()
        .chain(ips.iter().map(ToString::to_string))
        .collect();
    let mut due = Due::default();
    due.add(
        crate::certificates::keep(
            client,
            &ca,
            &crate::certificates::Leaf {
                secret: ObjectKey::new(CLUSTER_NAMESPACE, crate::certificates::XDS_SECRET),
                owners: &[],
                labels: crate::certificates::managed_by(),
                names: crate::certificates::Names::Hosts(&hosts),
            },
            metrics,
            |ca| {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                ca.issue_server_for(&names, &ips, lifetime)
            },
        )
        .await?,
    );
    if let Some(service) = &config.webhook {
        let names = service.names();
        due.add(
            crate::certificates::keep(
                client,
                &ca,
                &crate::certificates::Leaf {
                    secret: ObjectKey::new(CLUSTER_NAMESPACE, crate::webhook::SECRET),
                    owners: &[],
                    labels: crate::certificates::managed_by(),
                    names: crate::certificates::Names::Hosts(&names),
                },
                metrics,
                |ca| {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    ca.issue_server_for(&names, &[], lifetime)
                },
            )
            .await?,
        );
        crate::webhook::register(client, service, ca.cert_pem()).await?;
    }
    // New instances get the finalizer before anything is made for them.
    for change in finalizers
        .iter()
        .filter(|c| matches!(c, crate::finalizer::Change::Add(_)))
    {
        crate::finalizer::apply(client, change, |_| true).await?;
    }
    let plans = instances::plan(all, |g| certificates.contains(g), &config.workload);
    // Every proxy's and geoproxy's kube-rbac-proxy may review its callers.
    let accounts = plans.iter().flat_map(|p| {
        let proxies = ObjectKey::new(
            p.gateway.namespace(),
            crate::workload::workload_name(&p.gateway),
        );
        let geoproxy = p
            .geoip
            .geoproxy
            .as_ref()
            .map(|_| ObjectKey::new(p.gateway.namespace(), crate::geoproxy::name(&p.gateway)));
        std::iter::once(proxies).chain(geoproxy)
    });
    let binding = crate::workload::rbac_proxy_binding(accounts);
    fairlead_kit::apply::apply(&Api::all(client.clone()), MANAGER, &binding, None).await?;
    let default = instances::default_instance(all);
    let mut first_error: Option<RoundError> = None;
    let mut counts: std::collections::BTreeMap<(&str, &str), i64> = Default::default();
    let mut readiness = Vec::new();
    for plan in &plans {
        let controller = all
            .iter()
            .find(|i| i.key == plan.controller && i.kind == plan.controller_kind);
        match realize(client, &ca, plan, controller, config, metrics, &mut due).await {
            Ok(mut state) => {
                if let Some(e) = state.geoproxy_failed.take() {
                    first_error.get_or_insert(e.into());
                }
                let ready = state.programmed && state.proxies.0 > 0;
                readiness.push((plan.controller_kind, plan.controller.to_string(), ready));
                *counts
                    .entry((
                        plan.controller_kind,
                        if ready { "ready" } else { "not_ready" },
                    ))
                    .or_default() += 1;
                for (kind, _, _) in &plan.conflicts {
                    *counts.entry((*kind, "conflict")).or_default() += 1;
                }
                if let Some(instance) = controller {
                    write_status(
                        client,
                        instance,
                        &plan.gateway,
                        None,
                        &state,
                        default.as_ref(),
                    )
                    .await?;
                }
                for (kind, key, message) in &plan.conflicts {
                    if let Some(instance) = all.iter().find(|i| i.key == *key && i.kind == *kind) {
                        write_status(
                            client,
                            instance,
                            &plan.gateway,
                            Some(message),
                            &State::default(),
                            default.as_ref(),
                        )
                        .await?;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(gateway = %plan.gateway, error = %e, "realizing the managed Gateway failed");
                first_error.get_or_insert(e);
            }
        }
    }
    if first_error.is_none() {
        // Instances gone leave no series behind, nor do their certificates.
        let kept: std::collections::BTreeSet<String> = std::iter::once(ObjectKey::new(
            CLUSTER_NAMESPACE,
            crate::certificates::XDS_SECRET,
        ))
        .chain(
            config
                .webhook
                .as_ref()
                .map(|_| ObjectKey::new(CLUSTER_NAMESPACE, crate::webhook::SECRET)),
        )
        .chain(plans.iter().map(|p| {
            ObjectKey::new(
                p.gateway.namespace(),
                crate::workload::client_secret(&p.gateway),
            )
        }))
        .map(|k| k.to_string())
        .collect();
        metrics.retain_expiry(&kept);
        metrics.instance_ready.reset();
        for (kind, instance, ready) in &readiness {
            metrics
                .instance_ready
                .with_label_values(&[kind, instance.as_str()])
                .set(i64::from(*ready));
        }
        for kind in crate::metrics::KINDS {
            for state in crate::metrics::STATES {
                metrics
                    .instances
                    .with_label_values(&[kind, state])
                    .set(counts.get(&(kind, state)).copied().unwrap_or(0));
            }
        }
    }
    // Releases after the plans: a Gateway another instance took over has been applied
    // without the deleting one among its owners.
    for change in finalizers
        .iter()
        .filter(|c| matches!(c, crate::finalizer::Change::Release { .. }))
    {
        if let Err(e) =
            crate::finalizer::apply(client, change, |g| plans.iter().any(|p| &p.gateway == g)).await
        {
            tracing::warn!(error = %e, "keeping an instance's finalizer failed");
            first_error.get_or_insert(e.into());
        }
    }
    if let Err(e) = prune_geoproxies(client, &plans).await {
        tracing::warn!(error = %e, "removing geoproxies no instance asks for failed");
        first_error.get_or_insert(e.into());
    }
    crate::unmanaged::mark(client, &plans).await?;
    if let Some(class) = &config.http01_ingress_class {
        crate::http01::sync(client, class).await?;
    }
    first_error.map_or(Ok(due), Err)
}

/// The earliest time a certificate the controller keeps is due for renewal.
#[derive(Clone, Copy, Debug, Default)]
pub struct Due(Option<std::time::SystemTime>);

impl Due {
    fn add(&mut self, at: Option<std::time::SystemTime>) {
        self.0 = match (self.0, at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// How long from now until then (`None` when nothing is due).
    pub fn after(self) -> Option<Duration> {
        self.0.map(|at| {
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        })
    }
}

/// How a realized Gateway is doing.
#[derive(Debug, Default)]
struct State {
    /// The control plane has programmed it.
    programmed: bool,
    /// Proxies ready, of proxies wanted.
    proxies: (i64, i64),
    /// Where clients reach it.
    addresses: Vec<String>,
    /// The instance's `GeoIP` condition ([`crate::geoproxy::condition`]).
    geoip: Option<(bool, &'static str, String)>,
    /// Why applying the geoproxy failed: the proxies were applied all the same (those
    /// holding their databases keep serving), and the round is retried.
    geoproxy_failed: Option<kube::Error>,
}

/// Reads the licence Secret of `geoproxy` (why there is none).
async fn licence(
    client: &kube::Client,
    geoproxy: &crate::geoproxy::Geoproxy,
) -> Result<Result<crate::geoproxy::Licence, crate::geoproxy::LicenceError>, kube::Error> {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), geoproxy.licence.namespace());
    let Some(secret) = secrets.get_opt(geoproxy.licence.name()).await? else {
        return Ok(Err(crate::geoproxy::LicenceError::NotFound(
            geoproxy.licence.clone(),
        )));
    };
    let data: Option<std::collections::BTreeMap<String, Vec<u8>>> = secret
        .data
        .map(|d| d.into_iter().map(|(k, v)| (k, v.0)).collect());
    Ok(crate::geoproxy::Licence::read(
        &geoproxy.licence,
        data.as_ref(),
    ))
}

/// Applies `object` (server-side, as [`MANAGER`]) in its namespace; what the API holds.
async fn apply_object<K>(client: &kube::Client, object: &K) -> Result<K, kube::Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let meta = object.meta();
    let api: Api<K> = Api::namespaced(
        client.clone(),
        meta.namespace.as_deref().unwrap_or_default(),
    );
    api.patch(
        meta.name.as_deref().unwrap_or_default(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
}

/// Applies the geoproxy `plan` asks for (when its licence reads), before the proxies that
/// download from it; the instance's `GeoIP` condition.
async fn realize_geoproxy(
    client: &kube::Client,
    plan: &Plan,
    instance: &Instance,
    config: &Config,
) -> Result<Option<(bool, &'static str, String)>, kube::Error> {
    let Some(geoproxy) = &plan.geoip.geoproxy else {
        return Ok(crate::geoproxy::condition(&plan.geoip, None, (0, 0)));
    };
    let licence = licence(client, geoproxy).await?;
    let mut replicas = (0, i64::from(config.workload.geoproxy.replicas));
    match &licence {
        Ok(read) => {
            let images = crate::geoproxy::Images {
                geoproxy: &config.workload.proxy_image,
                rbac_proxy: &config.workload.rbac_proxy_image,
            };
            let objects = crate::geoproxy::objects(
                instance,
                &plan.gateway,
                &plan.owners,
                geoproxy,
                read,
                &config.workload.geoproxy,
                images,
            );
            apply_object(client, &objects.licence).await?;
            apply_object(client, &objects.service_account).await?;
            apply_object(client, &objects.binding).await?;
            apply_object(client, &objects.service).await?;
            let set = apply_object(client, &objects.stateful_set).await?;
            replicas.0 = set
                .status
                .and_then(|s| s.ready_replicas)
                .map_or(0, i64::from);
        }
        Err(why) => {
            tracing::warn!(gateway = %plan.gateway, reason = %why, "the geoproxy's licence cannot be read; not applying it");
        }
    }
    Ok(crate::geoproxy::condition(
        &plan.geoip,
        Some(&licence),
        replicas,
    ))
}

/// Removes the geoproxy of every Gateway whose controlling instance no longer asks for one
/// (its licence or its editions taken out of `spec.geoIP`, or the instance gone): the
/// objects it was made of, by name — found by its StatefulSet, or by its Lease's binding,
/// which no owner reference takes away.
async fn prune_geoproxies(client: &kube::Client, plans: &[Plan]) -> Result<(), kube::Error> {
    use crate::geoproxy::{GATEWAY_NAMESPACE_LABEL, LEASE_NAMESPACE, SELECTOR};
    let params = kube::api::ListParams::default().labels(SELECTOR);
    let label = |object: &DynamicObject, key: &str| {
        object
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
    };
    let mut found = std::collections::BTreeSet::new();
    let sets: Api<DynamicObject> =
        Api::all_with(client.clone(), &crate::apply::resource("StatefulSet"));
    for set in sets.list(&params).await?.items {
        if let (Some(namespace), Some(name)) = (
            set.metadata.namespace.clone(),
            label(&set, crate::pods::GATEWAY_LABEL),
        ) {
            found.insert(ObjectKey::new(&namespace, &name));
        }
    }
    let bindings: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        LEASE_NAMESPACE,
        &crate::apply::resource("RoleBinding"),
    );
    for binding in bindings.list(&params).await?.items {
        if let (Some(namespace), Some(name)) = (
            label(&binding, GATEWAY_NAMESPACE_LABEL),
            label(&binding, crate::pods::GATEWAY_LABEL),
        ) {
            found.insert(ObjectKey::new(&namespace, &name));
        }
    }
    for gateway in found {
        let wanted = plans
            .iter()
            .any(|p| p.gateway == gateway && p.geoip.geoproxy.is_some());
        if wanted {
            continue;
        }
        tracing::info!(%gateway, "removing the geoproxy its instance no longer asks for");
        for (kind, key) in crate::geoproxy::made(&gateway) {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                key.namespace(),
                &crate::apply::resource(kind),
            );
            match api
                .delete(key.name(), &kube::api::DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Applies a plan's Gateway, the proxies' client certificate, the geoproxy and the
/// proxies' workload; how they are.
async fn realize(
    client: &kube::Client,
    ca: &fairlead_kit::pki::Ca,
    plan: &Plan,
    instance: Option<&Instance>,
    config: &Config,
    metrics: &crate::metrics::ControllerMetrics,
    due: &mut Due,
) -> Result<State, RoundError> {
    let programmed = apply_gateway(client, plan).await?;
    let identity = crate::workload::identity(&config.workload.trust_domain, &plan.gateway);
    let lifetime = config.lifetime();
    due.add(
        crate::certificates::keep(
            client,
            ca,
            &crate::certificates::Leaf {
                secret: ObjectKey::new(
                    plan.gateway.namespace(),
                    crate::workload::client_secret(&plan.gateway),
                ),
                owners: &plan.owners,
                labels: BTreeMap::from([
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        MANAGER.to_owned(),
                    ),
                    (
                        crate::pods::GATEWAY_LABEL.to_owned(),
                        plan.gateway.name().to_owned(),
                    ),
                ]),
                names: crate::certificates::Names::Identity(&identity),
            },
            metrics,
            |ca| ca.issue_client_uri(&identity, lifetime),
        )
        .await?,
    );
    let workload = plan
        .workload
        .as_ref()
        .map_err(|e| RoundError::Render(e.to_string()))?;
    let mut state = State {
        programmed,
        ..State::default()
    };
    if let Some(instance) = instance {
        match realize_geoproxy(client, plan, instance, config).await {
            Ok(geoip) => state.geoip = geoip,
            Err(e) => {
                tracing::warn!(gateway = %plan.gateway, error = %e, "applying the geoproxy failed; applying the proxies all the same");
                state.geoip = Some((
                    false,
                    "GeoproxyNotApplied",
                    format!("applying the geoproxy failed: {e}"),
                ));
                state.geoproxy_failed = Some(e);
            }
        }
    }
    apply_object(client, &workload.service_account).await?;
    apply_object(client, &workload.bootstrap).await?;
    state.proxies = match &workload.proxies {
        Proxies::DaemonSet(set) => {
            let status = apply_object(client, set.as_ref()).await?.status;
            status.map_or((0, 0), |s| {
                (
                    i64::from(s.number_ready),
                    i64::from(s.desired_number_scheduled),
                )
            })
        }
        Proxies::Deployment(deployment, budget) => {
            let applied = apply_object(client, deployment.as_ref()).await?;
            apply_object(client, budget.as_ref()).await?;
            (
                applied
                    .status
                    .and_then(|s| s.ready_replicas)
                    .map_or(0, i64::from),
                i64::from(
                    deployment
                        .spec
                        .as_ref()
                        .and_then(|s| s.replicas)
                        .unwrap_or(0),
                ),
            )
        }
    };
    if let Some(service) = &workload.service {
        let applied = apply_object(client, service).await?;
        state.addresses = applied
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.or(i.hostname))
            .collect();
    }
    let host_ports = workload.host_ports();
    if host_ports {
        state.addresses = crate::apply::node_addresses(client, &plan.gateway).await?;
    }
    Ok(state)
}

async fn ensure_namespace(client: &kube::Client) -> Result<(), kube::Error> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    if namespaces.get_opt(CLUSTER_NAMESPACE).await?.is_some() {
        return Ok(());
    }
    let namespace = serde_json::from_value(json!({"metadata": {"name": CLUSTER_NAMESPACE,
        "labels": {"heritage": "deckhouse", "module": "alb"}}}))
    .map_err(kube::Error::SerdeError)?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Applies the plan's Gateway; whether the control plane has programmed it.
async fn apply_gateway(client: &kube::Client, plan: &Plan) -> Result<bool, kube::Error> {
    let api = gateways(client, plan.gateway.namespace());
    let applied = api
        .patch(
            plan.gateway.name(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&plan.object),
        )
        .await?;
    Ok(applied.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Programmed" && c["status"] == "True"))
}

/// Writes `instance`'s status: its Gateway, `Conflict` (with `conflict`'s message), `Ready`,
/// whether its Gateway is the platform's default (ClusterALBInstance), and `IstioSidecar`
/// (unsupported) when it asks for one.
async fn write_status(
    client: &kube::Client,
    instance: &Instance,
    gateway: &ObjectKey,
    conflict: Option<&String>,
    state: &State,
    default: Option<&ObjectKey>,
) -> Result<(), kube::Error> {
    let now = fairlead_kit::conditions::now();
    let generation = instance.generation;
    let (ready_proxies, wanted) = state.proxies;
    let (ready, reason, message) = match (conflict, state.programmed) {
        (Some(_), _) => (
            false,
            "Conflict",
            "another instance controls the Gateway".to_owned(),
        ),
        (None, false) => (
            false,
            "GatewayNotProgrammed",
            format!("Gateway {gateway} is not programmed by the control plane yet"),
        ),
        (None, true) if ready_proxies == 0 => (
            false,
            "ProxiesNotReady",
            format!("Gateway {gateway} is programmed; {ready_proxies} of {wanted} proxies ready"),
        ),
        (None, true) => (
            true,
            "Ready",
            format!("Gateway {gateway} is programmed; {ready_proxies} of {wanted} proxies ready"),
        ),
    };
    let mut conditions = vec![
        json!({"type": "Ready", "status": if ready { "True" } else { "False" }, "reason": reason,
               "message": message, "observedGeneration": generation, "lastTransitionTime": now}),
        json!({"type": "Conflict", "status": if conflict.is_some() { "True" } else { "False" },
               "reason": if conflict.is_some() { "GatewayControlledByAnother" } else { "NoConflict" },
               "message": conflict.cloned().unwrap_or_else(|| "this instance controls its Gateway".into()),
               "observedGeneration": generation, "lastTransitionTime": now}),
    ];
    if let Some((ready, reason, message)) = &state.geoip {
        conditions.push(
            json!({"type": "GeoIP", "status": if *ready { "True" } else { "False" },
            "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": now}),
        );
    }
    if instance.spec.istio_sidecar == Some(true) {
        conditions.push(
            json!({"type": "IstioSidecar", "status": "False", "reason": "Unsupported",
            "message": "fairlead runs no Istio sidecar beside its proxies; the setting is ignored",
            "observedGeneration": generation, "lastTransitionTime": now}),
        );
    }
    let resource = crate::apply::resource(instance.kind);
    let api: Api<DynamicObject> = if instance.kind == "ClusterALBInstance" {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), instance.key.namespace(), &resource)
    };
    let current = api.get_status(instance.key.name()).await?;
    let stored = &current.data["status"];
    let conditions = fairlead_kit::conditions::merge(conditions, Some(&stored["conditions"]), &now);
    let mut status: Value = json!({
        "gateway": gateway.to_string(),
        "conditions": conditions,
        "addresses": state.addresses,
        "observedGeneration": generation,
    });
    if instance.kind == "ClusterALBInstance" {
        status["defaultDeckhouseGateway"] = json!(default == Some(&instance.key));
    }
    if stored["gateway"] == status["gateway"]
        && stored["addresses"]
            .as_array()
            .map_or(state.addresses.is_empty(), |a| {
                *a == status["addresses"].as_array().cloned().unwrap_or_default()
            })
        && stored["observedGeneration"] == status["observedGeneration"]
        && stored["defaultDeckhouseGateway"] == status["defaultDeckhouseGateway"]
        && strip_times(&stored["conditions"]) == strip_times(&status["conditions"])
    {
        return Ok(());
    }
    api.patch_status(
        instance.key.name(),
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await?;
    Ok(())
}

fn strip_times(conditions: &Value) -> Value {
    let mut conditions = conditions.clone();
    for c in conditions.as_array_mut().into_iter().flatten() {
        if let Some(map) = c.as_object_mut() {
            map.remove("lastTransitionTime");
        }
    }
    conditions
}
