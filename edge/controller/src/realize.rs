//! What the gateway controller does for one Gateway, given its plan: applies the Gateway, the
//! proxies' client certificate (from the CA), the geoproxy (when its licence reads; the one
//! no longer asked for removed) and the proxies' workload, all typed, server-side as
//! [`MANAGER`]; reads back how they are; writes the status of every instance naming it. Thin:
//! the decisions are `fairlead_edge_controller_plan`'s.

use std::collections::BTreeMap;

use fairlead_key::ObjectKey;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::context::{Config, Context, Counted, Due, Read, ReconcileError};
use crate::instances::{Conflict, Instance, MANAGER, Plan};
use crate::workload::Proxies;

/// Everything for `gateway`: the finalizer on the instances naming it; with live ones, their
/// plan realized and every one's status written; without, what was made for it removed and
/// the deleting instances' finalizers released.
pub async fn gateway(
    context: &Context,
    ca: &fairlead_kit::pki::Ca,
    gateway: &ObjectKey,
    due: &mut Due,
) -> Result<(), ReconcileError> {
    let client = &context.client;
    let all = context.instances();
    let naming: Vec<&Read> = all
        .iter()
        .filter(|r| r.instance.gateway() == *gateway)
        .collect();
    // New instances get the finalizer before anything is made for them.
    for read in &naming {
        if let Some(change @ crate::finalizer::Change::Add(_)) = crate::finalizer::change(
            read.instance.kind,
            &read.meta,
            &read.instance.spec.gateway_name,
        ) {
            crate::finalizer::apply(client, &change, |_| true).await?;
        }
    }
    let live: Vec<Instance> = naming
        .iter()
        .filter(|r| r.meta.deletion_timestamp.is_none())
        .map(|r| r.instance.clone())
        .collect();
    let planned = !live.is_empty();
    if planned {
        realize_all(context, ca, gateway, &live, due).await?;
    } else {
        // Nobody names it any more (the last instance going, or renamed).
        crate::finalizer::remove_made(client, gateway).await?;
        prune_geoproxy(client, gateway).await?;
    }
    // Releases after the plan: a Gateway another instance took over has been applied
    // without the deleting one among its owners.
    let mut gone = Vec::new();
    for read in naming
        .iter()
        .filter(|r| r.meta.deletion_timestamp.is_some())
    {
        gone.push(((read.instance.kind, read.instance.key.clone()), None));
        if let Some(change @ crate::finalizer::Change::Release { .. }) = crate::finalizer::change(
            read.instance.kind,
            &read.meta,
            &read.instance.spec.gateway_name,
        ) {
            crate::finalizer::apply(client, &change, |_| planned).await?;
        }
    }
    context.count(gone);
    Ok(())
}

/// Plans the Gateway of the `live` instances naming it, applies what it makes, and writes
/// each one's status.
async fn realize_all(
    context: &Context,
    ca: &fairlead_kit::pki::Ca,
    gateway: &ObjectKey,
    live: &[Instance],
    due: &mut Due,
) -> Result<(), ReconcileError> {
    let client = &context.client;
    let mut live = live.to_vec();
    // The controlling instance keeps the inlet it had while it shared the Gateway.
    if let Some(oldest) = live.iter_mut().min_by(|a, b| a.order().cmp(&b.order())) {
        oldest.own_inlet = has_own_inlet(client, oldest, gateway).await?;
    }
    // The WAF beside Envoy when some route of the Gateway asks for it (every inlet serves
    // the same routes).
    let waf = gateway_asks_for_waf(client, gateway).await?;
    for instance in &mut live {
        instance.waf = waf;
    }
    let live = &live[..];
    prune_inlets(client, gateway, live).await?;
    let plan = crate::instances::plan(live, &context.config.workload)
        .into_iter()
        .next()
        .expect("live instances name the Gateway");
    let controlling = live
        .iter()
        .find(|i| i.key == plan.controller && i.kind == plan.controller_kind);
    let mut state = realize(
        client,
        ca,
        &plan,
        controlling,
        &context.config,
        &context.metrics,
        due,
    )
    .await?;
    if plan.geoip.geoproxy.is_none() {
        prune_geoproxy(client, gateway).await?;
    }
    // The platform's default Gateway is decided among every ClusterALBInstance.
    let default = crate::instances::default_instance(&context.live());
    let ready = state.programmed && state.proxies.0 > 0;
    let mut counts = Vec::new();
    if let Some(instance) = controlling {
        write_status(client, instance, gateway, None, &state, default.as_ref()).await?;
        let counted = if ready {
            Counted::Ready
        } else {
            Counted::NotReady
        };
        counts.push(((instance.kind, instance.key.clone()), Some(counted)));
    }
    for (conflict, sharing) in plan.conflicts.iter().zip(&plan.sharing) {
        let Some(instance) = live
            .iter()
            .find(|i| i.key == conflict.key && i.kind == conflict.kind)
        else {
            continue;
        };
        let workload = sharing
            .workload
            .as_ref()
            .map_err(|e| ReconcileError::Render(e.to_string()))?;
        let (proxies, addresses) = realize_inlet(client, workload, gateway).await?;
        let inlet = State {
            programmed: state.programmed,
            synced: state.synced,
            proxies,
            addresses,
            ..State::default()
        };
        write_status(
            client,
            instance,
            gateway,
            Some(conflict),
            &inlet,
            default.as_ref(),
        )
        .await?;
        let counted = if !conflict.differences.fields().is_empty() {
            Counted::Conflict
        } else if inlet.programmed && inlet.proxies.0 > 0 {
            Counted::Ready
        } else {
            Counted::NotReady
        };
        counts.push(((conflict.kind, conflict.key.clone()), Some(counted)));
    }
    context.count(counts);
    if let Some(why) = state.taken.take() {
        return Err(ReconcileError::Taken(why));
    }
    match state.geoproxy_failed.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn gateways(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &crate::crds::resource("Gateway"))
}

/// How a realized Gateway is doing.
#[derive(Debug, Default)]
pub struct State {
    /// The control plane has programmed it.
    pub programmed: bool,
    /// Its proxies run what the control plane last translated for it (the Gateway's
    /// `Synced` condition).
    pub synced: bool,
    /// Proxies ready, of proxies wanted.
    pub proxies: (i64, i64),
    /// Where clients reach it.
    pub addresses: Vec<String>,
    /// The instance's `GeoIP` condition ([`crate::geoproxy::condition`]).
    pub geoip: Option<(bool, &'static str, String)>,
    /// Why applying the geoproxy failed: the proxies were applied all the same (those
    /// holding their databases keep serving), and the reconcile is retried.
    pub geoproxy_failed: Option<ReconcileError>,
    /// Why the proxies could not be applied: a name they need is another's
    /// ([`ReconcileError::Taken`]); said in the status, and the reconcile is retried.
    pub taken: Option<String>,
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
/// An object of its name that the controller did not make for the same Gateway and
/// application is left as it is ([`crate::pods::claim`]): [`ReconcileError::Taken`].
async fn apply_object<K>(client: &kube::Client, object: &K) -> Result<K, ReconcileError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let meta = object.meta();
    let key = ObjectKey::new(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    );
    let api: Api<K> = Api::namespaced(client.clone(), key.namespace());
    // Listed by name: the controller may list what it makes, not get it.
    let named = kube::api::ListParams::default().fields(&format!("metadata.name={}", key.name()));
    if let Some(live) = api.list_metadata(&named).await?.items.first()
        && let Err(why) = crate::pods::claim(live.metadata.labels.as_ref(), meta.labels.as_ref())
    {
        return Err(ReconcileError::Taken(format!(
            "{} {key}: {why}",
            K::kind(&K::DynamicType::default())
        )));
    }
    Ok(api
        .patch(
            key.name(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(object),
        )
        .await?)
}

/// Applies the geoproxy `plan` asks for (when its licence reads), before the proxies that
/// download from it; the instance's `GeoIP` condition.
async fn realize_geoproxy(
    client: &kube::Client,
    plan: &Plan,
    instance: &Instance,
    config: &Config,
) -> Result<Option<(bool, &'static str, String)>, ReconcileError> {
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

/// Removes `gateway`'s geoproxy when its controlling instance no longer asks for one (its
/// licence or its editions taken out of `spec.geoIP`, or no instance left naming the
/// Gateway): the objects it was made of, by name — when its StatefulSet or its Lease's
/// binding (which no owner reference takes away) is still there, found by their labels.
pub async fn prune_geoproxy(client: &kube::Client, gateway: &ObjectKey) -> Result<(), kube::Error> {
    use crate::geoproxy::{GATEWAY_NAMESPACE_LABEL, LEASE_NAMESPACE, SELECTOR};
    let its = format!(
        "{SELECTOR},{}={}",
        crate::pods::GATEWAY_LABEL,
        gateway.name()
    );
    let any = async |kind: &str, namespace: &str, selector: &str| {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &crate::apply::resource(kind));
        let params = kube::api::ListParams::default().labels(selector).limit(1);
        api.list(&params).await.map(|l| !l.items.is_empty())
    };
    let binding = format!("{its},{GATEWAY_NAMESPACE_LABEL}={}", gateway.namespace());
    if !any("StatefulSet", gateway.namespace(), &its).await?
        && !any("RoleBinding", LEASE_NAMESPACE, &binding).await?
    {
        return Ok(());
    }
    tracing::info!(%gateway, "removing the geoproxy its instance no longer asks for");
    for (kind, key) in crate::geoproxy::made(gateway) {
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
    Ok(())
}

/// Applies a plan's Gateway, the proxies' client certificate, the geoproxy and the
/// proxies' workload; how they are.
pub async fn realize(
    client: &kube::Client,
    ca: &fairlead_kit::pki::Ca,
    plan: &Plan,
    instance: Option<&Instance>,
    config: &Config,
    metrics: &crate::metrics::ControllerMetrics,
    due: &mut Due,
) -> Result<State, ReconcileError> {
    let (programmed, synced) = apply_gateway(client, plan).await?;
    due.add(
        keep_client_certificate(client, ca, &plan.gateway, &plan.owners, config, metrics).await?,
    );
    let workload = plan
        .workload
        .as_ref()
        .map_err(|e| ReconcileError::Render(e.to_string()))?;
    let mut state = State {
        programmed,
        synced,
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
    match apply_workload(client, workload, &plan.gateway).await {
        Ok(applied) => (state.proxies, state.addresses) = applied,
        Err(ReconcileError::Taken(why)) => state.taken = Some(why),
        Err(e) => return Err(e),
    }
    Ok(state)
}

/// Keeps the client certificate `gateway`'s proxies present to the xDS server (its
/// identity, [`crate::workload::identity`]) issued by `ca`, owned by `owners`; when it is due
/// next.
pub(crate) async fn keep_client_certificate(
    client: &kube::Client,
    ca: &fairlead_kit::pki::Ca,
    gateway: &ObjectKey,
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    config: &Config,
    metrics: &crate::metrics::ControllerMetrics,
) -> Result<Option<std::time::SystemTime>, ReconcileError> {
    let identity = crate::workload::identity(&config.workload.trust_domain, gateway);
    let lifetime = config.lifetime();
    Ok(crate::certificates::keep(
        client,
        ca,
        &crate::certificates::Leaf {
            secret: ObjectKey::new(gateway.namespace(), crate::workload::client_secret(gateway)),
            owners,
            labels: BTreeMap::from([
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    MANAGER.to_owned(),
                ),
                (
                    crate::pods::GATEWAY_LABEL.to_owned(),
                    gateway.name().to_owned(),
                ),
            ]),
            names: crate::certificates::Names::Identity(&identity),
        },
        metrics,
        |ca| ca.issue_client_uri(&identity, lifetime),
    )
    .await?)
}

/// Applies `gateway`'s proxy workload — its ServiceAccount, bootstrap and inlet
/// ([`realize_inlet`]); how many proxies are ready of how many wanted, and where clients
/// reach them.
pub(crate) async fn apply_workload(
    client: &kube::Client,
    workload: &crate::workload::Workload,
    gateway: &ObjectKey,
) -> Result<((i64, i64), Vec<String>), ReconcileError> {
    apply_object(client, &workload.service_account).await?;
    apply_object(client, &workload.bootstrap).await?;
    realize_inlet(client, workload, gateway).await
}

/// The kinds an inlet is made of.
const INLET_KINDS: &[&str] = &["DaemonSet", "Deployment", "PodDisruptionBudget", "Service"];

/// Deletes the inlets of `gateway` whose instance is not among `live` (its `gatewayName`
/// changed, or it is going): an inlet is owned by its instance alone, so the garbage
/// collector would keep one while its instance lives on under another Gateway.
async fn prune_inlets(
    client: &kube::Client,
    gateway: &ObjectKey,
    live: &[Instance],
) -> Result<(), kube::Error> {
    let naming: std::collections::BTreeSet<String> = live.iter().map(Instance::label).collect();
    let selector = format!(
        "{}={},app.kubernetes.io/name={},app.kubernetes.io/managed-by={MANAGER}",
        crate::pods::GATEWAY_LABEL,
        gateway.name(),
        crate::pods::PROXY_APP,
    );
    for kind in INLET_KINDS {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            gateway.namespace(),
            &crate::apply::resource(kind),
        );
        let listed = api
            .list_metadata(&kube::api::ListParams::default().labels(&selector))
            .await?;
        for object in listed.items {
            let instance = object
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(crate::instance::INSTANCE_LABEL));
            if instance.is_none_or(|i| naming.contains(i)) {
                continue;
            }
            let name = object.metadata.name.unwrap_or_default();
            match api
                .delete(&name, &kube::api::DeleteParams::background())
                .await
            {
                Ok(_) => {
                    tracing::info!(%gateway, %kind, %name, "deleted: its instance no longer names the Gateway");
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Whether `instance` already runs proxies named after itself for `gateway`
/// ([`crate::workload::Names::sharing`]): listed by name, which the controller's rules
/// allow (they grant no `get` of workloads).
async fn has_own_inlet(
    client: &kube::Client,
    instance: &Instance,
    gateway: &ObjectKey,
) -> Result<bool, kube::Error> {
    let name = crate::workload::Names::sharing(instance, gateway).workload;
    let by_name = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
    let namespace = gateway.namespace();
    Ok(if instance.kind == "ClusterALBInstance" {
        !Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(client.clone(), namespace)
            .list_metadata(&by_name)
            .await?
            .items
            .is_empty()
    } else {
        !Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), namespace)
            .list_metadata(&by_name)
            .await?
            .items
            .is_empty()
    })
}

/// Whether some route of the live `gateway` asks for the WAF ([`asks_for_waf`]). A Gateway
/// not made yet asks nothing; once the control plane writes the condition, the Gateway's
/// change wakes the reconcile again.
async fn gateway_asks_for_waf(
    client: &kube::Client,
    gateway: &ObjectKey,
) -> Result<bool, kube::Error> {
    Ok(gateways(client, gateway.namespace())
        .get_opt(gateway.name())
        .await?
        .is_some_and(|object| asks_for_waf(&object.data)))
}

/// Whether some route of a Gateway (its object's data) asks for the WAF: its `WAF`
/// condition, which the control plane writes ([`fairlead_edge_model::names::WAF_CONDITION`]).
pub(crate) fn asks_for_waf(gateway: &Value) -> bool {
    gateway["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == fairlead_edge_model::names::WAF_CONDITION && c["status"] == "True")
}

/// Applies an inlet of `gateway` — its proxies and their Service — and reads back how many
/// proxies are ready of how many wanted, and where clients reach them.
async fn realize_inlet(
    client: &kube::Client,
    workload: &crate::workload::Workload,
    gateway: &ObjectKey,
) -> Result<((i64, i64), Vec<String>), ReconcileError> {
    let proxies = match &workload.proxies {
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
    let mut addresses = Vec::new();
    if let Some(service) = &workload.service {
        let applied = apply_object(client, service).await?;
        addresses = applied
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.or(i.hostname))
            .collect();
    }
    if workload.host_ports() {
        addresses = crate::apply::node_addresses(client, gateway).await?;
    }
    Ok((proxies, addresses))
}

/// Applies the plan's Gateway; whether the control plane has programmed it, and whether
/// its proxies run that configuration (its `Synced` condition).
async fn apply_gateway(client: &kube::Client, plan: &Plan) -> Result<(bool, bool), kube::Error> {
    let api = gateways(client, plan.gateway.namespace());
    let applied = api
        .patch(
            plan.gateway.name(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&plan.object),
        )
        .await?;
    let holds = |type_: &str| {
        applied.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    };
    Ok((holds("Programmed"), holds("Synced")))
}

/// Writes `instance`'s status: its Gateway, `Conflict` (with `conflict`'s message and the
/// `conflict…` flags of its differing settings, each naming the controlling instance),
/// `Ready`, `synced`, whether its Gateway is the platform's default (ClusterALBInstance),
/// and `IstioSidecar` (unsupported) when it asks for one.
pub async fn write_status(
    client: &kube::Client,
    instance: &Instance,
    gateway: &ObjectKey,
    conflict: Option<&Conflict>,
    state: &State,
    default: Option<&ObjectKey>,
) -> Result<(), kube::Error> {
    let now = fairlead_kit::conditions::now();
    let generation = instance.generation;
    let (ready_proxies, wanted) = state.proxies;
    // In conflict: some Gateway-level setting of its own is not the Gateway's.
    let conflicting = conflict.is_some_and(|c| !c.differences.fields().is_empty());
    let (ready, reason, message) = match state.programmed {
        _ if state.taken.is_some() => (
            false,
            "NameTaken",
            format!(
                "the proxies of Gateway {gateway} are not applied: {}",
                state.taken.as_deref().unwrap_or_default()
            ),
        ),
        false => (
            false,
            "GatewayNotProgrammed",
            format!("Gateway {gateway} is not programmed by the control plane yet"),
        ),
        true if ready_proxies == 0 => (
            false,
            "ProxiesNotReady",
            format!("Gateway {gateway} is programmed; {ready_proxies} of {wanted} proxies ready"),
        ),
        true => (
            true,
            "Ready",
            format!("Gateway {gateway} is programmed; {ready_proxies} of {wanted} proxies ready"),
        ),
    };
    let mut conditions = vec![
        json!({"type": "Ready", "status": if ready { "True" } else { "False" }, "reason": reason,
               "message": message, "observedGeneration": generation, "lastTransitionTime": now}),
        json!({"type": "Conflict", "status": if conflicting { "True" } else { "False" },
               "reason": match (conflict, conflicting) {
                   (None, _) => "NoConflict",
                   (Some(_), false) => "GatewayShared",
                   (Some(_), true) => "SettingsIgnored",
               },
               "message": conflict.map_or_else(|| "this instance controls its Gateway".into(), |c| c.message.clone()),
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
        "gateway": gateway.name(),
        "ready": ready,
        "synced": state.synced,
        "conditions": conditions,
        "addresses": state.addresses,
        "observedGeneration": generation,
    });
    let differences = conflict.map(|c| &c.differences);
    for (flag, fields) in [
        ("conflictPorts", differences.map(|d| &d.ports)),
        ("conflictFrontendTLS", differences.map(|d| &d.frontend)),
        ("conflictBackendTLS", differences.map(|d| &d.backend)),
    ] {
        let conflicting = fields.is_some_and(|f| !f.is_empty());
        status[flag] = json!(conflicting);
        // A merge patch's null removes the owner once the conflict is gone.
        status[format!("{flag}Owner")] = match conflict {
            Some(c) if conflicting => json!(c.owner),
            _ => Value::Null,
        };
    }
    if instance.kind == "ClusterALBInstance" {
        status["defaultDeckhouseGateway"] = json!(default == Some(&instance.key));
    }
    let flags = [
        "synced",
        "conflictPorts",
        "conflictPortsOwner",
        "conflictFrontendTLS",
        "conflictFrontendTLSOwner",
        "conflictBackendTLS",
        "conflictBackendTLSOwner",
    ];
    if stored["gateway"] == status["gateway"]
        && stored["ready"] == status["ready"]
        && flags.iter().all(|f| stored[*f] == status[*f])
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
