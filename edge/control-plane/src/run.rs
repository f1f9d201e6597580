//! The control plane's loop: wait for the index to publish a snapshot (it settles the changes
//! arriving together first), translate every Gateway, publish the xDS snapshots (unchanged
//! ones wake nobody), and hand the statuses to the status writer, which — on the Lease holder
//! only — writes those that changed (and the Gateways' `Synced` as proxies ACK) in a task of
//! its own: a round never waits for status
//! writes (a thousand routes' first statuses take seconds), and the writer always writes the
//! latest statuses, retrying failures with backoff.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairlead_edge_index::Index;
use fairlead_edge_model::ObjectKey;
use fairlead_edge_translate::status::{Notice, RouteKey, Statuses};
use fairlead_edge_xds::cache::short;
use fairlead_edge_xds::cache::{Cache, Snapshot};
use fairlead_edge_xds::metrics::XdsMetrics;
use fairlead_edge_xds::progress::Progress;
use fairlead_edge_xds::server::Nack;
use fairlead_kit::lease::{self, LeaseConfig};
use fairlead_kit::reconcile::{Outcome, Pacing, Rounds, Wake};
use tokio_util::sync::CancellationToken;

use crate::status::StatusWriter;

/// The Lease of the status writer.
pub const LEASE: &str = "alb-xds-status-writer";

/// The translation loop's rounds: one per snapshot the index publishes (it has let the
/// changes arriving together settle, [`fairlead_edge_index::settle`], so no debounce here),
/// everything is translated again every 30 s even without events (a missed event cannot
/// last), and failed status writes are retried after half a second, doubling per round.
pub const PACING: Pacing = Pacing {
    debounce: Duration::ZERO,
    resync: Duration::from_secs(30),
    retry: Duration::from_millis(500),
    max_doublings: 6,
};

/// How long a translation waits for watches that have not listed yet.
const LISTED_WAIT: Duration = Duration::from_secs(10);

/// The loop's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The GatewayClass controller name served.
    pub controller_name: String,
    /// The status writer's Lease.
    pub lease: LeaseConfig,
    /// What checks the WAF rule sets of routes (the engine of a build with the WAF, or
    /// [`fairlead_edge_translate::waf::Missing`]).
    pub waf: Arc<dyn fairlead_edge_translate::waf::Compile>,
}

/// Runs until `stop` over the snapshots of `index`; `ready` is called after the first
/// translation. Proxies' rejections arriving on `nacks` become Warning Events on their
/// Gateway (once per version).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: kube::Client,
    index: Arc<Index>,
    cache: Arc<Cache>,
    settings: Settings,
    metrics: XdsMetrics,
    mut nacks: tokio::sync::mpsc::UnboundedReceiver<Nack>,
    stop: CancellationToken,
    ready: impl FnOnce(),
) {
    let events = fairlead_kit::events::Events::new(
        client.clone(),
        "fairlead-edge-xds",
        Some(settings.lease.identity.clone()),
    );
    let mut reported: BTreeSet<(ObjectKey, &'static str, String)> = BTreeSet::new();
    let mut snapshots = index.subscribe();
    let (leadership, _lease) = lease::spawn(client.clone(), settings.lease.clone(), stop.clone());
    let writer = StatusWriter::new(client, &settings.controller_name);
    let (statuses, latest) = tokio::sync::watch::channel(None);
    tokio::spawn(write_statuses(
        writer,
        events.clone(),
        index.clone(),
        cache.progress().clone(),
        latest,
        leadership,
        metrics.clone(),
        stop.clone(),
    ));
    let mut rounds = Rounds::new(PACING, snapshots.clone());
    let mut ready = Some(ready);
    // Remembers the last translation: a change costs what it touches.
    let mut pipeline = fairlead_edge_render::Pipeline::with_waf(settings.waf.clone());
    loop {
        tokio::select! {
            wake = rounds.next(&stop) => match wake {
                None => return,
                Some(Wake::Changed) => rounds.settle().await,
                Some(Wake::Resync) => {}
            },
            Some(nack) = nacks.recv() => {
                // Many proxies reject the same version: one Event per version.
                if reported.insert((nack.group.clone(), nack.type_name, nack.version.clone())) {
                    report(&events, &index, &nack).await;
                }
                continue;
            }
        }
        // The first lists, but never for long: a kind whose watch keeps failing (RBAC, a
        // broken conversion) must not stop every Gateway's configuration; it reads as empty
        // and its watch keeps retrying (and warning).
        // Shutdown ends the wait too: the watches stop then, so they may never list.
        let listed = snapshots.wait_for(|s| s.listed);
        tokio::select! {
            waited = tokio::time::timeout(LISTED_WAIT, listed) => if waited.is_err() {
                tracing::warn!("some watches have not listed yet; translating what is known");
            },
            () = stop.cancelled() => return,
        }
        let snapshot = snapshots.borrow_and_update().clone();
        let span = tracing::info_span!("xds.translate", gateways = tracing::field::Empty);
        let _entered = span.enter();
        let started = Instant::now();
        if snapshot.skipped > 0 {
            metrics
                .errors
                .with_label_values(&["read"])
                .inc_by(u64::try_from(snapshot.skipped).unwrap_or_default());
        }
        let translation = pipeline.run(&snapshot.input, &settings.controller_name);
        metrics
            .translation
            .with_label_values(&[] as &[&str])
            .observe(started.elapsed().as_secs_f64());
        span.record("gateways", translation.gateways.len());
        let keep: BTreeSet<ObjectKey> = translation.gateways.keys().cloned().collect();
        let snapshots: Vec<(ObjectKey, Snapshot)> = translation
            .gateways
            .into_iter()
            .map(|(gateway, resources)| {
                let snapshot = Snapshot::after(resources, &cache.get(&gateway));
                (gateway, snapshot)
            })
            .collect();
        // The span ends with the translation and its snapshots, before anything is pushed
        // (and not after the status writes).
        drop(_entered);
        drop(span);
        for (gateway, snapshot) in snapshots {
            for (type_url, count) in snapshot.sizes() {
                metrics
                    .snapshot
                    .with_label_values(&[gateway.as_str(), short(type_url)])
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
            if cache.set(&gateway, snapshot) {
                tracing::debug!(gateway = %gateway, "published a new snapshot");
            }
        }
        cache.retain(&keep);
        if let Some(ready) = ready.take() {
            cache.first_published();
            ready();
        }
        statuses.send_replace(Some(Arc::new(translation.statuses)));
        rounds.finished(Outcome::Done);
    }
}

/// How long the status writer lets proxies' ACKs gather before it writes the Gateways'
/// `Synced` conditions they change: a push is ACKed within milliseconds, so a change is
/// written once (not `False` then `True`), and route churn costs no status write per push.
const SYNC_SETTLE: Duration = Duration::from_secs(1);

/// Writes the latest statuses `latest` holds whenever they change (and this replica holds
/// the Lease; the 30 s resync hands them again, so a new leader writes within it), until
/// `stop`, and tells each route's notices in Warning Events (once per route generation and
/// message). A change of the proxies' `progress` alone rewrites only the Gateways' statuses,
/// [`SYNC_SETTLE`] after it. Failed writes are retried with backoff (`PACING`'s), with
/// whatever is latest by then.
///
/// The tally is this replica's streams: with several control plane replicas, `Synced`
/// speaks for the proxies connected to the Lease holder.
#[allow(clippy::too_many_arguments)]
async fn write_statuses(
    writer: StatusWriter,
    events: fairlead_kit::events::Events,
    index: Arc<Index>,
    progress: Arc<Progress>,
    mut latest: tokio::sync::watch::Receiver<Option<Arc<Statuses>>>,
    leadership: lease::Leadership,
    metrics: XdsMetrics,
    stop: CancellationToken,
) {
    let mut told: BTreeSet<(RouteKey, Notice)> = BTreeSet::new();
    let longest = PACING.retry * 2u32.pow(PACING.max_doublings);
    let mut tallies = progress.subscribe();
    loop {
        let only_gateways = tokio::select! {
            () = stop.cancelled() => return,
            changed = latest.changed() => if changed.is_err() { return } else { false },
            changed = tallies.changed() => {
                if changed.is_err() {
                    return;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(SYNC_SETTLE) => {}
                }
                tallies.mark_unchanged();
                // A translation that arrived meanwhile writes everything.
                !latest.has_changed().unwrap_or(false)
            }
        };
        let mut backoff = PACING.retry;
        loop {
            let Some(statuses) = latest.borrow_and_update().clone() else {
                break;
            };
            if !leadership.is_leader() {
                break;
            }
            let written = if only_gateways {
                writer.write_gateways(&index, &statuses, &progress).await
            } else {
                let written = writer.write(&index, &statuses, &progress).await;
                tell(&events, &index, &statuses, &mut told).await;
                written
            };
            metrics
                .status_writes
                .with_label_values(&["ok"])
                .inc_by(u64::try_from(written.writes).unwrap_or_default());
            if written.failures == 0 {
                break;
            }
            metrics
                .status_writes
                .with_label_values(&["error"])
                .inc_by(u64::try_from(written.failures).unwrap_or_default());
            metrics.errors.with_label_values(&["status"]).inc();
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(longest);
        }
    }
}

/// A Warning Event for each route notice of `statuses` not told before (`told`).
async fn tell(
    events: &fairlead_kit::events::Events,
    index: &Index,
    statuses: &Statuses,
    told: &mut BTreeSet<(RouteKey, Notice)>,
) {
    told.retain(|(route, notice)| {
        statuses
            .notices
            .get(route)
            .is_some_and(|n| n.contains(notice))
    });
    for (route, notices) in &statuses.notices {
        for notice in notices {
            if !told.insert((route.clone(), notice.clone())) {
                continue;
            }
            let Some(object) = index.object(route.kind, &route.key) else {
                continue;
            };
            let reference = k8s_openapi::api::core::v1::ObjectReference {
                api_version: object["apiVersion"].as_str().map(str::to_owned),
                kind: Some(route.kind.to_owned()),
                name: Some(route.key.name().to_owned()),
                namespace: Some(route.key.namespace().to_owned()),
                uid: object["metadata"]["uid"].as_str().map(str::to_owned),
                ..Default::default()
            };
            events
                .warning(&reference, notice.reason, "Translate", &notice.message)
                .await;
        }
    }
}

/// A Warning Event on the Gateway whose proxies rejected a version.
async fn report(events: &fairlead_kit::events::Events, index: &Index, nack: &Nack) {
    let Some(gateway) = index.object("Gateway", &nack.group) else {
        return;
    };
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: gateway["apiVersion"].as_str().map(str::to_owned),
        kind: Some("Gateway".into()),
        name: Some(nack.group.name().to_owned()),
        namespace: Some(nack.group.namespace().to_owned()),
        uid: gateway["metadata"]["uid"].as_str().map(str::to_owned),
        ..Default::default()
    };
    let note = format!(
        "a proxy rejected {} version {}: {}",
        nack.type_name, nack.version, nack.message
    );
    events
        .warning(&reference, "ConfigurationRejected", "Push", note)
        .await;
}
