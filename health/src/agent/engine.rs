//! The agent's loop: one task owns the targets, their counters and the timer heap; probes run
//! as short tasks bounded by a semaphore; verdict changes and watch events replan the affected
//! resources, and only what changed is written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairlead_health_api::{
    EndpointStatus, POSTGRESQL_CREDENTIALS_TYPE, ProbeMode, ServiceWithHealthchecks,
};
use fairlead_health_plan::publish::{Publication, publish};
use fairlead_health_plan::schedule::{Millis, Timers, first_due, next_due, phase};
use fairlead_health_plan::targets::{NodePod, TargetKey, pods_of, swh_key, targets};
use fairlead_health_plan::{Counter, Verdict};
use fairlead_key::ObjectKey;
use fairlead_kit::reconcile::{Outcome, Pacing, Rounds, Wake};
use fairlead_kit::watch::{Projection, cache, keep, project, without_managed_fields};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::writer::Writer;
use crate::metrics::HealthMetrics;
use crate::probe::{self, ProbeFailure};

/// The agent's rounds: events arriving within 20 ms are handled together, everything is
/// recomputed every minute even without events (missed events cannot last), and failed
/// writes are retried after half a second, doubling per failed round.
const PACING: Pacing = Pacing {
    debounce: Duration::from_millis(20),
    resync: Duration::from_secs(60),
    retry: Duration::from_millis(500),
    max_doublings: 6,
};

/// The agent's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This node.
    pub node: String,
    /// Probes running at once.
    pub concurrency: usize,
    /// Write `lastProbeTime` on every probe, not only on transitions.
    pub verbose_status: bool,
}

struct TargetState {
    /// The pod's name (for Events).
    pod: String,
    counter: Counter,
    generation: u64,
    reason: Option<String>,
}

struct ProbeResult {
    key: TargetKey,
    generation: u64,
    outcome: Result<(), ProbeFailure>,
}

struct Stores {
    swhs: Store<ServiceWithHealthchecks>,
    pods: Projection<NodePod>,
    secrets: Store<Secret>,
    slices: Store<EndpointSlice>,
}

/// What the agent reads of a resource: its spec and conditions (its own endpoint statuses
/// it remembers itself).
fn trim_swh(swh: &mut ServiceWithHealthchecks) {
    swh.metadata.managed_fields = None;
    swh.metadata.annotations = None;
    if let Some(status) = swh.status.as_mut() {
        status.endpoint_statuses = Vec::new();
    }
}

/// Runs the agent until `stop`; `ready` is called once every watch has its initial list.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: HealthMetrics,
    stop: CancellationToken,
    ready: impl FnOnce(),
) {
    let notify = Arc::new(Notify::new());
    let node_field = format!("spec.nodeName={}", settings.node);
    let stores = Stores {
        swhs: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            trim_swh,
            notify.clone(),
            stop.clone(),
        ),
        pods: project(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().fields(&node_field),
            NodePod::of,
            notify.clone(),
            stop.clone(),
        ),
        secrets: cache(
            Api::all(client.clone()),
            watcher::Config::default().fields(&format!("type={POSTGRESQL_CREDENTIALS_TYPE}")),
            without_managed_fields,
            notify.clone(),
            stop.clone(),
        ),
        // The apply helper compares with the slices' managedFields: they are kept.
        slices: cache(
            Api::all(client.clone()),
            watcher::Config::default().labels(&format!(
                "endpointslice.kubernetes.io/managed-by={},{}={}",
                fairlead_health_api::MANAGED_BY,
                fairlead_health_plan::NODE_LABEL,
                settings.node
            )),
            keep,
            notify.clone(),
            stop.clone(),
        ),
    };
    let all_listed = async {
        stores.swhs.wait_until_ready().await.is_ok()
            && stores.pods.wait_until_ready().await.is_ok()
            && stores.secrets.wait_until_ready().await.is_ok()
            && stores.slices.wait_until_ready().await.is_ok()
    };
    tokio::select! {
        () = stop.cancelled() => return,
        listed = all_listed => if !listed { return },
    }
    ready();
    tracing::info!(node = %settings.node, "agent watching; probing the pods of this node");
    let mut engine = Engine {
        events: fairlead_kit::events::Events::new(
            client.clone(),
            "fairlead-health-agent",
            Some(settings.node.clone()),
        ),
        pending_events: Vec::new(),
        writer: Writer::new(client.clone(), &settings.node, metrics.clone()),
        semaphore: Arc::new(Semaphore::new(settings.concurrency.max(1))),
        client,
        settings,
        metrics,
        stores,
        started: Instant::now(),
        targets: HashMap::new(),
        timers: Timers::default(),
        next_generation: 0,
        written_status: HashMap::new(),
    };
    engine.run(notify, stop).await;
}

struct Engine {
    client: kube::Client,
    events: fairlead_kit::events::Events,
    /// Warning Events to publish: (resource key, note).
    pending_events: Vec<(ObjectKey, String)>,
    settings: Settings,
    metrics: HealthMetrics,
    stores: Stores,
    writer: Writer,
    started: Instant,
    targets: HashMap<TargetKey, TargetState>,
    timers: Timers<TargetKey>,
    next_generation: u64,
    semaphore: Arc<Semaphore>,
    written_status: HashMap<ObjectKey, BTreeMap<String, EndpointStatus>>,
}

fn wall_age_millis(created: Option<&str>) -> u64 {
    created
        .and_then(|c| c.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(0, |t| {
            let age = k8s_openapi::jiff::Timestamp::now().duration_since(t);
            u64::try_from(age.as_millis()).unwrap_or(0)
        })
}

impl Engine {
    fn now(&self) -> Millis {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn swh(&self, key: &ObjectKey) -> Option<Arc<ServiceWithHealthchecks>> {
        self.stores
            .swhs
            .get(&ObjectRef::new(key.name()).within(key.namespace()))
    }

    async fn run(&mut self, notify: Arc<Notify>, stop: CancellationToken) {
        let (tx, mut rx) = mpsc::unbounded_channel::<ProbeResult>();
        let mut rounds = Rounds::new(PACING, notify);
        loop {
            let next = self.timers.next_due().map(|due| {
                tokio::time::Instant::from_std(self.started + Duration::from_millis(due))
            });
            let mut dirty: BTreeSet<ObjectKey> = BTreeSet::new();
            tokio::select! {
                wake = rounds.next(&stop) => match wake {
                    None => return,
                    Some(Wake::Changed) => {
                        rounds.settle().await;
                        dirty = self.sync();
                    }
                    Some(Wake::Resync) => dirty = self.sync(),
                },
                () = async {
                    match next {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => self.dispatch(&tx),
                Some(result) = rx.recv() => {
                    dirty.extend(self.record(result));
                    while let Ok(result) = rx.try_recv() {
                        dirty.extend(self.record(result));
                    }
                }
            }
            let published = !dirty.is_empty();
            for key in dirty {
                self.publish(&key).await;
            }
            self.flush_events().await;
            // Everything is replanned after a backoff that doubles per failed round.
            rounds.finished(if self.writer.take_failed() {
                Outcome::Failed
            } else if published {
                Outcome::Done
            } else {
                Outcome::Idle
            });
        }
    }

    /// Recomputes the targets from the watched state; returns every resource to republish.
    fn sync(&mut self) -> BTreeSet<ObjectKey> {
        let pods = self.stores.pods.state();
        let mut wanted: BTreeMap<TargetKey, (String, Option<String>)> = BTreeMap::new();
        let mut resources = BTreeSet::new();
        for swh in self.stores.swhs.state() {
            resources.insert(swh_key(&swh));
            let views = pods_of(&swh, pods.iter().map(AsRef::as_ref));
            wanted.extend(targets(&swh, &views));
        }
        self.targets.retain(|key, _| wanted.contains_key(key));
        let now = self.now();
        for (key, (pod, created)) in wanted {
            if self.targets.contains_key(&key) {
                continue;
            }
            let Some(swh) = self.swh(&key.swh) else {
                continue;
            };
            let healthcheck = &swh.spec.healthcheck;
            let period =
                Duration::from_secs(u64::try_from(healthcheck.period_seconds.max(1)).unwrap_or(1));
            let initial = Duration::from_secs(
                u64::try_from(healthcheck.initial_delay_seconds.max(0)).unwrap_or(0),
            );
            let created_at = now.saturating_sub(wall_age_millis(created.as_deref()));
            let due = first_due(created_at, initial, phase(&key.text(), period), now);
            self.next_generation += 1;
            self.timers.push(due, self.next_generation, key.clone());
            self.targets.insert(
                key,
                TargetState {
                    pod,
                    counter: Counter::default(),
                    generation: self.next_generation,
                    reason: None,
                },
            );
        }
        for swh in self.written_status.keys() {
            resources.insert(swh.clone());
        }
        resources.extend(self.writer.resources_with_slices(&self.stores.slices));
        resources
    }

    /// Starts the probes that are due and schedules their next runs.
    fn dispatch(&mut self, tx: &mpsc::UnboundedSender<ProbeResult>) {
        let now = self.now();
        let due_now = self.timers.pop_due(now);
        let round = tracing::info_span!("probe.round", probes = due_now.len());
        let _entered = round.enter();
        for (due, generation, key) in due_now {
            let Some(state) = self.targets.get(&key) else {
                continue;
            };
            if state.generation != generation {
                continue;
            }
            let Some(swh) = self.swh(&key.swh) else {
                continue;
            };
            let Some(probe) = swh.spec.healthcheck.probes.get(key.probe).cloned() else {
                continue;
            };
            let period = Duration::from_secs(
                u64::try_from(swh.spec.healthcheck.period_seconds.max(1)).unwrap_or(1),
            );
            self.timers
                .push(next_due(due, period, now), generation, key.clone());
            let secret = probe
                .postgresql
                .as_ref()
                .and_then(|pg| pg.auth_secret_name.clone())
                .map(|name| (swh.metadata.namespace.clone().unwrap_or_default(), name));
            let cached = secret
                .as_ref()
                .and_then(|(ns, name)| self.stores.secrets.get(&ObjectRef::new(name).within(ns)));
            let semaphore = self.semaphore.clone();
            let tx = tx.clone();
            let client = self.client.clone();
            let metrics = self.metrics.clone();
            let namespace = swh.metadata.namespace.clone().unwrap_or_default();
            let name = swh.metadata.name.clone().unwrap_or_default();
            let span = tracing::info_span!("probe", swh = %key.swh, mode = probe.mode.label(), port = probe.target_port().unwrap_or(0));
            tokio::spawn(async move {
                let Ok(_permit) = semaphore.acquire_owned().await else {
                    return;
                };
                let port = probe.target_port().unwrap_or(0);
                let addr = SocketAddr::new(key.ip, u16::try_from(port).unwrap_or(0));
                let timeout =
                    Duration::from_secs(u64::try_from(probe.timeout_seconds.max(1)).unwrap_or(1));
                let started = Instant::now();
                let outcome = tracing::Instrument::instrument(
                    run_probe(&probe, addr, timeout, secret, cached, client),
                    span.clone(),
                )
                .await;
                if let Err(failure) = &outcome {
                    span.in_scope(|| tracing::info!(reason = %failure, "probe failed"));
                }
                metrics.observe_probe(
                    &namespace,
                    &name,
                    port,
                    probe.mode.label(),
                    outcome.is_ok(),
                    started.elapsed(),
                );
                let _ = tx.send(ProbeResult {
                    key,
                    generation,
                    outcome,
                });
            });
        }
    }

    /// Counts a result; returns the resource to republish when the verdict changed.
    fn record(&mut self, result: ProbeResult) -> Option<ObjectKey> {
        let swh = self.swh(&result.key.swh)?;
        let probe = swh.spec.healthcheck.probes.get(result.key.probe)?;
        let state = self.targets.get_mut(&result.key)?;
        if state.generation != result.generation {
            return None;
        }
        let success = result.outcome.is_ok();
        let reason = result.outcome.err().map(|e| e.to_string());
        let reason_changed = state.reason != reason;
        state.reason = reason;
        let changed = state.counter.record(
            success,
            u32::try_from(probe.success_threshold).unwrap_or(1),
            u32::try_from(probe.failure_threshold).unwrap_or(3),
        );
        if state.counter.verdict() == Verdict::Failing
            && (changed || reason_changed)
            && let Some(reason) = &state.reason
        {
            let port = probe.target_port().unwrap_or(0);
            let note = format!(
                "pod {}: {}:{}:{port}: {reason}",
                state.pod,
                probe.mode.label(),
                result.key.ip
            );
            self.pending_events.push((result.key.swh.clone(), note));
        }
        (changed
            || (reason_changed && state.counter.verdict() == Verdict::Failing)
            || self.settings.verbose_status)
            .then(|| result.key.swh.clone())
    }

    /// Publishes the Warning Events of probes that started failing (or fail differently).
    async fn flush_events(&mut self) {
        for (key, note) in std::mem::take(&mut self.pending_events) {
            if let Some(swh) = self.swh(&key) {
                let reference = kube::Resource::object_ref(swh.as_ref(), &());
                self.events
                    .warning(&reference, "ProbeFailed", "Probe", note)
                    .await;
            }
        }
    }

    /// Plans and writes one resource's slices and this node's status entries.
    async fn publish(&mut self, key: &ObjectKey) {
        let started = Instant::now();
        let Some(swh) = self.swh(key) else {
            self.writer.remove_resource(key, &self.stores.slices).await;
            self.written_status.remove(key);
            return;
        };
        let pods = self.stores.pods.state();
        let views: Vec<_> = pods_of(&swh, pods.iter().map(AsRef::as_ref))
            .into_iter()
            .map(|(pod, _)| pod)
            .collect();
        let Publication { slices, statuses } =
            publish(&swh, &self.settings.node, &views, |pod, ip, probe| {
                let target = TargetKey {
                    swh: key.clone(),
                    pod_uid: pod.uid.clone(),
                    ip,
                    probe,
                };
                self.targets
                    .get(&target)
                    .map_or((Verdict::Pending, None), |s| {
                        (s.counter.verdict(), s.reason.clone())
                    })
            });
        self.metrics.set_endpoints(&swh, &slices);
        self.writer
            .write_slices(key, &slices, &self.stores.slices)
            .await;
        let previous = self.written_status.get(key).cloned().unwrap_or_default();
        if let Some(written) = self
            .writer
            .write_status(&swh, &previous, statuses, self.settings.verbose_status)
            .await
        {
            self.written_status.insert(key.to_owned(), written);
        }
        self.metrics.observe_sync("agent", started.elapsed());
    }
}

async fn run_probe(
    probe: &fairlead_health_api::Probe,
    addr: SocketAddr,
    timeout: Duration,
    secret: Option<(String, String)>,
    cached: Option<Arc<Secret>>,
    client: kube::Client,
) -> Result<(), ProbeFailure> {
    match probe.mode {
        ProbeMode::Tcp => probe::tcp::probe(addr, timeout).await,
        ProbeMode::Http => match &probe.http {
            Some(http) => probe::http::probe(addr, http, timeout).await,
            None => Err(ProbeFailure::Config(
                "mode HTTP without an http block".into(),
            )),
        },
        ProbeMode::PostgreSql => {
            let Some(spec) = &probe.postgresql else {
                return Err(ProbeFailure::Config(
                    "mode PostgreSQL without a postgreSQL block".into(),
                ));
            };
            let Some((namespace, name)) = secret else {
                return Err(ProbeFailure::Config(
                    "postgreSQL.authSecretName is not set".into(),
                ));
            };
            let secret = match cached {
                Some(secret) => secret,
                // Not in the cache of typed Secrets: read it to say why (missing, wrong type).
                None => match Api::<Secret>::namespaced(client, &namespace)
                    .get_opt(&name)
                    .await
                {
                    Ok(Some(secret)) => Arc::new(secret),
                    Ok(None) => {
                        return Err(ProbeFailure::Config(format!(
                            "Secret {namespace}/{name} not found"
                        )));
                    }
                    Err(err) => {
                        return Err(ProbeFailure::Config(format!(
                            "reading Secret {namespace}/{name}: {err}"
                        )));
                    }
                },
            };
            let credentials = probe::postgres::Credentials::from_secret(&secret)?;
            probe::postgres::probe(addr, spec, &credentials, timeout).await
        }
    }
}
