//! The gateway controller's work per change: with many ClusterALBInstances reconciled and
//! settled on the embedded API server, one instance's spec changes at a time; what the
//! controller asks of the API server until the change shows in that instance's status and
//! everything is quiet again (read from the server's audit log: requests, writes, requests
//! naming another instance's objects), how many reconciles of an instance's Gateway it ran,
//! and how long the change took to show.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fairlead_edge_api::types::ClusterALBInstanceSpec;
use fairlead_edge_api::{ClusterALBInstance, InstanceSpec};
use fairlead_edge_controller::metrics::ControllerMetrics;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

/// The user the controller runs as (its requests are told apart in the audit log by it).
const CONTROLLER: &str = "bench-gateway-controller";

/// How long the audit log must not grow for the controller to count as done.
const QUIET: Duration = Duration::from_secs(1);

/// What one change cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// The controller's requests to the API server.
    pub requests: usize,
    /// Of those, writes (create, update, patch, delete).
    pub writes: usize,
    /// Requests naming an object of another instance (its Gateway, workload, certificate,
    /// status).
    pub others: usize,
    /// Reconciles of an instance's Gateway.
    pub reconciles: u64,
}

/// The figures of one run.
#[derive(Debug)]
pub struct Figures {
    /// How many instances the world holds.
    pub instances: usize,
    /// Creating them all until every status is written, and its cost.
    pub settle: (Duration, Cost),
    /// Each change: how long until the instance's status observed it, and its cost.
    pub changes: Vec<(Duration, Cost)>,
}

/// The name of instance `i` and of the Gateway it names: `i007`, `g007`.
fn names(i: usize) -> (String, String) {
    (format!("i{i:03}"), format!("g{i:03}"))
}

/// The instance an object's name belongs to (a `-` or `.` separated part `g007` or `i007`).
fn owner_of(name: &str) -> Option<usize> {
    name.split(['-', '.']).find_map(|part| {
        let digits = part.strip_prefix('g').or_else(|| part.strip_prefix('i'))?;
        (digits.len() == 3 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    })
}

/// The cost of the controller's requests in the audit `lines`, for a change of `changed`
/// (`None`: every instance is the subject).
fn cost(lines: &str, changed: Option<usize>) -> Cost {
    let mut cost = Cost::default();
    for event in lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["user"]["username"] == CONTROLLER)
    {
        cost.requests += 1;
        let verb = event["verb"].as_str().unwrap_or_default();
        if matches!(
            verb,
            "create" | "update" | "patch" | "delete" | "deletecollection"
        ) {
            cost.writes += 1;
        }
        let owner = event["objectRef"]["name"].as_str().and_then(owner_of);
        if let (Some(changed), Some(owner)) = (changed, owner)
            && owner != changed
        {
            cost.others += 1;
        }
    }
    cost
}

/// The audit log from `offset` once it has not grown for [`QUIET`]; its new length.
async fn quiet_since(log: &Path, offset: u64) -> anyhow::Result<(String, u64)> {
    let mut size = std::fs::metadata(log)?.len();
    loop {
        tokio::time::sleep(QUIET).await;
        let now = std::fs::metadata(log)?.len();
        if now == size {
            break;
        }
        size = now;
    }
    let text = std::fs::read(log)?;
    let start = usize::try_from(offset)?;
    let end = usize::try_from(size)?;
    Ok((
        String::from_utf8_lossy(&text[start..end]).into_owned(),
        size,
    ))
}

/// Reconciles of an instance's Gateway so far.
fn reconciles(metrics: &ControllerMetrics) -> u64 {
    metrics
        .duration
        .with_label_values(&[] as &[&str])
        .get_sample_count()
}

/// Whether every instance's status has observed its generation.
async fn observed(api: &Api<ClusterALBInstance>, expected: usize) -> anyhow::Result<bool> {
    let list = api.list(&Default::default()).await?;
    Ok(list.items.len() == expected
        && list.items.iter().all(|i| {
            i.status.as_ref().and_then(|s| s.observed_generation) == i.metadata.generation
        }))
}

/// Runs the figure: `instances` ClusterALBInstances, then `changes` changes of one
/// instance's `nodeSelector` each (a different instance every time).
pub async fn per_change(instances: usize, changes: usize) -> anyhow::Result<Figures> {
    let audit: PathBuf = std::env::temp_dir().join(format!(
        "fairlead-bench-controller-{}.log",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&audit);
    let (server, admin) = crate::edge_cluster(fairlead_apiserver::Config {
        audit_log: Some(audit.clone()),
        ..fairlead_apiserver::Config::default()
    })
    .await?;
    let controller = server.client_as(CONTROLLER, &["system:masters"]).await?;
    let metrics = ControllerMetrics::unregistered();
    let stop = CancellationToken::new();
    tokio::spawn(fairlead_edge_controller::reconcile::run(
        controller,
        None,
        fairlead_edge_controller::reconcile::Config::default(),
        metrics.clone(),
        stop.clone(),
    ));
    let api: Api<ClusterALBInstance> = Api::all(admin);
    let (_, mut offset) = quiet_since(&audit, 0).await?;
    let before = reconciles(&metrics);
    let started = Instant::now();
    for i in 0..instances {
        let (name, gateway) = names(i);
        let instance = ClusterALBInstance::new(
            &name,
            ClusterALBInstanceSpec {
                instance: InstanceSpec {
                    gateway_name: gateway,
                    ..InstanceSpec::default()
                },
                default_deckhouse_gateway: None,
            },
        );
        api.create(&PostParams::default(), &instance).await?;
    }
    while !observed(&api, instances).await? {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let settled = started.elapsed();
    let (lines, end) = quiet_since(&audit, offset).await?;
    offset = end;
    let mut settle = cost(&lines, None);
    settle.reconciles = reconciles(&metrics) - before;
    let mut figures = Figures {
        instances,
        settle: (settled, settle),
        changes: Vec::with_capacity(changes),
    };
    for change in 0..changes {
        let subject = (change * 37 + 11) % instances;
        let (name, _) = names(subject);
        let before = reconciles(&metrics);
        let started = Instant::now();
        let patched = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(
                    serde_json::json!({"spec": {"nodeSelector": {"bench": change.to_string()}}}),
                ),
            )
            .await?;
        loop {
            let status = api.get_status(&name).await?.status;
            if status.and_then(|s| s.observed_generation) == patched.metadata.generation {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let took = started.elapsed();
        let (lines, end) = quiet_since(&audit, offset).await?;
        offset = end;
        let mut cost = cost(&lines, Some(subject));
        cost.reconciles = reconciles(&metrics) - before;
        figures.changes.push((took, cost));
    }
    stop.cancel();
    let _ = std::fs::remove_file(&audit);
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_told_apart_by_the_instance_in_their_names() {
        assert_eq!(owner_of("g007"), Some(7));
        assert_eq!(owner_of("i042"), Some(42));
        assert_eq!(owner_of("d8-alb-g007-xds-client"), Some(7));
        assert_eq!(owner_of("d8-alb-g1000"), None);
        assert_eq!(owner_of("d8-alb"), None);
        assert_eq!(owner_of("alb-gateway-controller-leader"), None);
    }

    #[test]
    fn only_the_controllers_requests_count_and_writes_and_others_are_told_apart() {
        let lines = [
            r#"{"user": {"username": "bench-gateway-controller"}, "verb": "patch", "objectRef": {"name": "d8-alb-g007"}}"#,
            r#"{"user": {"username": "bench-gateway-controller"}, "verb": "get", "objectRef": {"name": "g008"}}"#,
            r#"{"user": {"username": "bench-gateway-controller"}, "verb": "list", "objectRef": {}}"#,
            r#"{"user": {"username": "admin"}, "verb": "patch", "objectRef": {"name": "i008"}}"#,
        ]
        .join("\n");
        assert_eq!(
            cost(&lines, Some(7)),
            Cost {
                requests: 3,
                writes: 1,
                others: 1,
                reconciles: 0
            }
        );
        assert_eq!(cost(&lines, None).others, 0);
    }

    /// A change of one instance makes the controller reconcile and write for it alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_costs_the_changed_instance_only() {
        let figures = per_change(4, 3).await.unwrap();
        assert!(figures.settle.1.reconciles >= 4, "{figures:?}");
        for (_, cost) in &figures.changes {
            assert!(cost.writes >= 1 && cost.reconciles >= 1, "{figures:?}");
            assert_eq!(cost.others, 0, "{figures:?}");
        }
    }
}
