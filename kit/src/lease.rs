//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! One contender holds the Lease and renews it every `renew_interval`; the others retry and
//! take it over once `renewTime + leaseDurationSeconds` has passed. Leadership is a
//! [`Leadership`] watch: writers that only the leader may run check it, and stop when it turns
//! false (a renewal that keeps failing past the lease duration, or shutdown). On shutdown the
//! holder releases the Lease (empty holder, 1-second duration), so a successor takes over at
//! once instead of after expiry.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Which Lease, who is asking, and the timings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease name (one per singleton component).
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This contender's identity (the pod name in a cluster).
    pub identity: String,
    /// How long a holder's claim lasts without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews, and the others retry.
    pub renew_interval: Duration,
}

impl LeaseConfig {
    /// Defaults as client-go uses them: 15 s lease, renewal every 2 s.
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(2),
        }
    }
}

/// Whether this process leads. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
}

impl Leadership {
    /// Whether this process holds the Lease now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until this process leads (returns at once if it does).
    pub async fn leading(&mut self) {
        let _ = self.rx.wait_for(|leading| *leading).await;
    }

    /// Waits until this process stops leading: the signal that stops the holder's writers.
    pub async fn lost(&mut self) {
        let _ = self.rx.wait_for(|leading| !*leading).await;
    }
}

/// What one attempt decided.
#[derive(Debug, PartialEq)]
enum Attempt {
    Leading,
    Following(Option<String>),
}

fn micro(t: Timestamp) -> MicroTime {
    MicroTime(t)
}

/// Whether a lease held by someone else has expired at `now`.
fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().map(|t| t.0) else {
        return true;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    renewed + SignedDuration::from_secs(duration) < now
}

async fn attempt(api: &Api<Lease>, config: &LeaseConfig) -> Result<Attempt, kube::Error> {
    let now = Timestamp::now();
    let seconds = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(micro(now)),
                renew_time: Some(micro(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Leading),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Following(None)),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let mine = holder.as_deref() == Some(config.identity.as_str());
    if !mine && holder.is_some() && !expired(spec, now) {
        return Ok(Attempt::Following(holder));
    }
    if !mine {
        spec.acquire_time = Some(micro(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        spec.holder_identity = Some(config.identity.clone());
    }
    spec.renew_time = Some(micro(now));
    spec.lease_duration_seconds = Some(seconds);
    // The resourceVersion of the read is kept: a concurrent taker makes this a 409.
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(Attempt::Leading),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Following(None)),
        Err(e) => Err(e),
    }
}

async fn release(api: &Api<Lease>, config: &LeaseConfig) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(micro(Timestamp::now()));
    api.replace(&config.name, &PostParams::default(), &lease)
        .await
        .map(|_| ())
}

/// Contends for the Lease until `stop` is cancelled, then releases it if held. Returns the
/// leadership watch and the task.
pub fn spawn(
    client: kube::Client,
    config: LeaseConfig,
    stop: CancellationToken,
) -> (Leadership, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let task = tokio::spawn(async move {
        let mut last_renewal: Option<tokio::time::Instant> = None;
        loop {
            match attempt(&api, &config).await {
                Ok(Attempt::Leading) => {
                    last_renewal = Some(tokio::time::Instant::now());
                    if !*tx.borrow() {
                        tracing::info!(lease = %config.name, identity = %config.identity, "acquired the lease; leading");
                        let _ = tx.send(true);
                    }
                }
                Ok(Attempt::Following(holder)) => {
                    if *tx.borrow() {
                        tracing::warn!(lease = %config.name, holder = ?holder, "lost the lease; stopping leader-only work");
                        let _ = tx.send(false);
                    }
                }
                Err(err) => {
                    tracing::warn!(lease = %config.name, error = %err, "lease renewal failed; retrying");
                    let overdue =
                        last_renewal.is_some_and(|t| t.elapsed() >= config.lease_duration);
                    if *tx.borrow() && overdue {
                        tracing::warn!(lease = %config.name, "could not renew within the lease duration; stopping leader-only work");
                        let _ = tx.send(false);
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(config.renew_interval) => {}
            }
        }
        if *tx.borrow() {
            let _ = tx.send(false);
            match release(&api, &config).await {
                Ok(()) => tracing::info!(lease = %config.name, "released the lease"),
                Err(err) => {
                    tracing::warn!(lease = %config.name, error = %err, "releasing the lease")
                }
            }
        }
    });
    (Leadership { rx }, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_follows_renew_time_and_duration() {
        let now = Timestamp::now();
        let spec = |renewed_ago: i64, duration: i32| LeaseSpec {
            renew_time: Some(micro(now - SignedDuration::from_secs(renewed_ago))),
            lease_duration_seconds: Some(duration),
            ..LeaseSpec::default()
        };
        assert!(!expired(&spec(5, 15), now));
        assert!(expired(&spec(20, 15), now));
        assert!(expired(&LeaseSpec::default(), now));
    }
}
