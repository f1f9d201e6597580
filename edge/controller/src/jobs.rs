//! The gateway controller's cluster-wide jobs, each a loop of its own beside the
//! per-instance reconciles (all while the controller holds the Lease):
//!
//! - the CA and what is not any one Gateway's: the namespace `d8-alb`, the xDS server's and
//!   the webhooks' serving certificates, the webhooks' registration; it hands the CA to the
//!   reconciles, and runs again when a certificate is due;
//! - what reads every instance: the binding that lets every proxy's and geoproxy's
//!   kube-rbac-proxy review its callers (written only when its subjects change), the condition
//!   of every Gateway of the class ([`crate::unmanaged`], written only where it changed), the
//!   proxies of Gateways no instance names when the controller provisions them
//!   ([`crate::provision`]), and the expiry series of certificates that are gone — from the
//!   controller's caches, on a change of an instance or a Gateway;
//! - cert-manager's HTTP-01 bridges ([`crate::http01`]), on a change of a solver route;
//! - the module's cleanup ([`crate::cleanup`]): while it is requested, it removes what the
//!   controller made, and the other work stops.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fairlead_key::ObjectKey;
use fairlead_kit::pki::Ca;
use fairlead_kit::reconcile::{Outcome, Pacing, Rounds, Wake};
use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::context::{Context, Due, ReconcileError};
use crate::instances::{CLUSTER_NAMESPACE, MANAGER};

/// The jobs' pace: changes collected for 50 ms, everything again every 30 s, retries from
/// 1 s.
pub const PACING: Pacing = Pacing {
    debounce: Duration::from_millis(50),
    resync: Duration::from_secs(30),
    retry: Duration::from_secs(1),
    max_doublings: 5,
};

/// Runs the jobs until `term`: `ca` is where the CA is handed on, `cleaning` whether the
/// module is going (`None` until the cleanup job has looked), `world` the changes of
/// instances (the controller's caches notify it).
pub(crate) async fn run(
    context: Arc<Context>,
    ca: watch::Sender<Option<Arc<Ca>>>,
    cleaning: watch::Sender<Option<bool>>,
    world: Arc<Notify>,
    term: CancellationToken,
) {
    let gateways = dynamic_cache(
        &context.client,
        &crate::crds::resource("Gateway"),
        watcher::Config::default(),
        world.clone(),
        term.clone(),
    );
    futures::join!(
        cleanup(&context, cleaning, &term),
        certificates(&context, ca, &term),
        every_instance(&context, &gateways, world, &term),
        http01(&context, &term),
    );
}

/// A cached watch of a kind known by its API resource, notifying `changes`.
fn dynamic_cache(
    client: &kube::Client,
    resource: &kube::discovery::ApiResource,
    config: watcher::Config,
    changes: Arc<Notify>,
    stop: CancellationToken,
) -> Store<DynamicObject> {
    let writer = reflector::store::Writer::new(resource.clone());
    let reader = writer.as_reader();
    let stream = watcher(
        Api::<DynamicObject>::all_with(client.clone(), resource),
        config,
    )
    .backoff(fairlead_kit::watch::backoff())
    .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                item = stream.next() => match item {
                    Some(Ok(_)) => changes.notify_one(),
                    Some(Err(e)) => tracing::debug!(error = %e, "a watch of the gateway controller"),
                    None => return,
                },
            }
        }
    });
    reader
}

/// Waits for the next round: `false` once `term` is cancelled.
async fn next(rounds: &mut Rounds, term: &CancellationToken) -> bool {
    match rounds.next(term).await {
        None => false,
        Some(Wake::Changed) => {
            rounds.settle().await;
            true
        }
        Some(Wake::Resync) => true,
    }
}

/// Records how a round of the job `what` went (a failed one is logged and retried with
/// backoff), counted with the reconciles.
fn finished(
    context: &Context,
    rounds: &mut Rounds,
    what: &str,
    result: Result<(), ReconcileError>,
) {
    context
        .metrics
        .reconciles
        .with_label_values(&[if result.is_ok() { "ok" } else { "error" }])
        .inc();
    let outcome = match result {
        Ok(()) => Outcome::Done,
        Err(e) => {
            tracing::warn!(job = what, error = %e, "a job of the gateway controller failed; retrying");
            Outcome::Failed
        }
    };
    rounds.finished(outcome);
}

/// While the module's cleanup is requested (its marker ConfigMap in `d8-alb`), removes what
/// the controller made, and says so on `cleaning`.
async fn cleanup(
    context: &Context,
    cleaning: watch::Sender<Option<bool>>,
    term: &CancellationToken,
) {
    let changes = Arc::new(Notify::new());
    let _marker = dynamic_cache(
        &context.client,
        &crate::apply::resource("ConfigMap"),
        watcher::Config::default().fields(&format!(
            "metadata.name={},metadata.namespace={CLUSTER_NAMESPACE}",
            crate::cleanup::MARKER
        )),
        changes.clone(),
        term.clone(),
    );
    changes.notify_one();
    let mut rounds = Rounds::new(PACING, changes);
    while next(&mut rounds, term).await {
        let result = async {
            let requested = crate::cleanup::requested(&context.client).await?;
            cleaning.send_if_modified(|now| now.replace(requested) != Some(requested));
            if requested {
                let asked = crate::cleanup::remove_all(&context.client).await?;
                if asked > 0 {
                    tracing::info!(
                        objects = asked,
                        "module cleanup requested: removing what the controller made"
                    );
                }
            }
            Ok(())
        }
        .await;
        finished(context, &mut rounds, "cleanup", result);
    }
}

/// The names of the xDS server's serving certificate: the host proxies dial and its
/// Service's names; for a loopback host (`fairlead up`), `localhost` too, which local
/// clients (a gRPC client's bootstrap) write as often as the address.
fn xds_names(host: &str) -> (Vec<String>, Vec<std::net::IpAddr>) {
    let mut names: Vec<String> = Vec::new();
    let mut ips = Vec::new();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ips.push(ip),
        Err(_) => names.push(host.to_owned()),
    }
    if ips.iter().any(std::net::IpAddr::is_loopback) && !names.iter().any(|n| n == "localhost") {
        names.push("localhost".to_owned());
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

/// The namespace `d8-alb`, made when missing.
async fn ensure_namespace(client: &kube::Client) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(CLUSTER_NAMESPACE).await?.is_some() {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(CLUSTER_NAMESPACE.to_owned()),
            labels: Some(
                [("heritage", "deckhouse"), ("module", "alb")]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Namespace::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Keeps the CA, the xDS server's and the webhooks' certificates and the webhooks'
/// registration; hands the CA on. Again when a certificate is due, and every resync.
async fn certificates(
    context: &Context,
    ca: watch::Sender<Option<Arc<Ca>>>,
    term: &CancellationToken,
) {
    let due = Arc::new(Notify::new());
    let mut renewal = tokio::spawn(async {});
    let mut cleaning = context.cleaning.clone();
    let changes = Arc::new(Notify::new());
    changes.notify_one();
    let forward = {
        let changes = changes.clone();
        let due = due.clone();
        async move {
            loop {
                tokio::select! {
                    () = due.notified() => {}
                    Ok(()) = cleaning.changed() => {}
                }
                changes.notify_one();
            }
        }
    };
    let work = async {
        let mut rounds = Rounds::new(PACING, changes);
        while next(&mut rounds, term).await {
            if *context.cleaning.borrow() != Some(false) {
                // Not known yet, or the module is going: no CA for the reconciles.
                ca.send_replace(None);
                continue;
            }
            let result = keep_certificates(context, &ca).await.map(|next| {
                // A round when the next certificate is due, whatever else happens.
                if let Some(after) = next.after() {
                    renewal.abort();
                    let due = due.clone();
                    renewal = tokio::spawn(async move {
                        tokio::time::sleep(after + Duration::from_millis(100)).await;
                        due.notify_one();
                    });
                }
            });
            finished(context, &mut rounds, "certificates", result);
        }
    };
    tokio::select! {
        () = work => {}
        () = forward => {}
    }
}

/// One round of [`certificates`]: when the next one is due.
async fn keep_certificates(
    context: &Context,
    handed: &watch::Sender<Option<Arc<Ca>>>,
) -> Result<Due, ReconcileError> {
    let client = &context.client;
    let config = &context.config;
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
            &context.metrics,
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
                &context.metrics,
                |ca| {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    ca.issue_server_for(&names, &[], lifetime)
                },
            )
            .await?,
        );
        crate::webhook::register(client, service, ca.cert_pem()).await?;
    }
    let same = handed
        .borrow()
        .as_ref()
        .is_some_and(|held| held.cert_pem() == ca.cert_pem());
    if !same {
        handed.send_replace(Some(Arc::new(ca)));
    }
    Ok(due)
}

/// What reads every instance: the proxies' kube-rbac-proxy binding, the condition of every
/// Gateway of the class, the proxies of the Gateways the controller provisions, and the
/// expiry series of certificates that are gone.
async fn every_instance(
    context: &Context,
    gateways: &Store<DynamicObject>,
    world: Arc<Notify>,
    term: &CancellationToken,
) {
    let mut bound: Option<Vec<ObjectKey>> = None;
    let mut provisioner = crate::provision::Provisioner::default();
    let mut rounds = Rounds::new(PACING, world);
    while next(&mut rounds, term).await {
        if *context.cleaning.borrow() != Some(false) {
            continue;
        }
        let Some(ca) = context.ca.borrow().clone() else {
            // Not yet: the certificates job has not made or read the CA. Soon again, not at
            // the next resync.
            rounds.finished(Outcome::Failed);
            continue;
        };
        let result =
            every_instance_round(context, &ca, gateways, &mut bound, &mut provisioner).await;
        finished(context, &mut rounds, "every instance", result);
    }
}

/// One round of [`every_instance`]; `bound` is the binding's subjects as last written.
async fn every_instance_round(
    context: &Context,
    ca: &Ca,
    gateways: &Store<DynamicObject>,
    bound: &mut Option<Vec<ObjectKey>>,
    provisioner: &mut crate::provision::Provisioner,
) -> Result<(), ReconcileError> {
    let live = context.live();
    let controlling = crate::instances::controlling(&live);
    let gateways = gateways.state();
    // Gateways no instance names get proxies of their own, when the controller is asked to.
    let (provisioned, provisioning) = if context.config.provision_gateways {
        provisioner
            .round(context, ca, &gateways, &controlling)
            .await
    } else {
        (BTreeMap::new(), Ok(()))
    };
    // Every proxy's and geoproxy's kube-rbac-proxy may review its callers.
    let accounts: Vec<ObjectKey> = controlling
        .iter()
        .flat_map(|(gateway, instance)| {
            let proxies =
                ObjectKey::new(gateway.namespace(), crate::workload::workload_name(gateway));
            let geoproxy = crate::geoproxy::plan(instance, gateway)
                .geoproxy
                .map(|_| ObjectKey::new(gateway.namespace(), crate::geoproxy::name(gateway)));
            std::iter::once(proxies).chain(geoproxy)
        })
        .chain(
            provisioned
                .keys()
                .map(|g| ObjectKey::new(g.namespace(), crate::workload::workload_name(g))),
        )
        .collect();
    if bound.as_ref() != Some(&accounts) {
        let binding = crate::workload::rbac_proxy_binding(accounts.iter().cloned());
        fairlead_kit::apply::apply(&Api::all(context.client.clone()), MANAGER, &binding, None)
            .await?;
        *bound = Some(accounts);
    }
    crate::unmanaged::mark(&context.client, &gateways, &controlling, &provisioned).await?;
    // Gateways gone leave no expiry series behind.
    let kept: BTreeSet<String> = std::iter::once(ObjectKey::new(
        CLUSTER_NAMESPACE,
        crate::certificates::XDS_SECRET,
    ))
    .chain(
        context
            .config
            .webhook
            .as_ref()
            .map(|_| ObjectKey::new(CLUSTER_NAMESPACE, crate::webhook::SECRET)),
    )
    .chain(
        controlling
            .keys()
            .chain(provisioned.keys())
            .map(|g| ObjectKey::new(g.namespace(), crate::workload::client_secret(g))),
    )
    .map(|k| k.to_string())
    .collect();
    context.metrics.retain_expiry(&kept);
    provisioning
}

/// cert-manager's HTTP-01 solver routes bridged through Ingresses of the configured class
/// (none without one).
async fn http01(context: &Context, term: &CancellationToken) {
    let Some(class) = context.config.http01_ingress_class.clone() else {
        return;
    };
    let changes = Arc::new(Notify::new());
    let _routes = dynamic_cache(
        &context.client,
        &crate::crds::resource("HTTPRoute"),
        watcher::Config::default().labels(crate::http01::SOLVER_LABEL),
        changes.clone(),
        term.clone(),
    );
    let mut rounds = Rounds::new(PACING, changes);
    while next(&mut rounds, term).await {
        if *context.cleaning.borrow() != Some(false) {
            continue;
        }
        let result = crate::http01::sync(&context.client, &class)
            .await
            .map_err(ReconcileError::from);
        finished(context, &mut rounds, "HTTP-01 bridging", result);
    }
}

#[cfg(test)]
mod tests {
    use super::xds_names;

    #[test]
    fn a_loopback_xds_server_is_named_localhost_too() {
        let (names, ips) = xds_names("127.0.0.1");
        assert_eq!(ips, ["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]);
        assert!(names.contains(&"localhost".to_owned()), "{names:?}");
        assert!(names.contains(&"alb-xds.d8-alb.svc".to_owned()));
        let (names, ips) = xds_names("alb-xds.d8-alb.svc");
        assert!(ips.is_empty());
        assert!(!names.contains(&"localhost".to_owned()), "{names:?}");
        let (names, _) = xds_names("10.0.0.1");
        assert!(!names.contains(&"localhost".to_owned()), "{names:?}");
    }
}
