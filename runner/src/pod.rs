//! The runner's decisions, without I/O: which pods a workload wants on the local node (and
//! the claims of a StatefulSet's), the Pod object and status the runner writes, which containers it can run (those whose
//! arguments are a fairlead subcommand; the rest are skipped, and said so), and how a
//! container's arguments read on this machine — as they would inside the pod:
//!
//! - `$(VAR)` is expanded from the container's environment, as the kubelet does;
//! - the pod's loopback (`127.0.0.1`) and its every-address (`0.0.0.0`) are the pod's own
//!   address, so pods do not collide on one machine;
//! - a path under a volume's `mountPath` is that volume's directory here;
//! - the names of Services the runner serves (`<name>.<namespace>.svc[.cluster.local]`) are
//!   their local addresses.

use std::collections::BTreeMap;
use std::net::IpAddr;

use fairlead_key::ObjectKey;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The top-level fairlead commands a container may run.
const FAIRLEAD_COMMANDS: &[&str] = &["echo", "edge", "health"];

/// The label the runner puts on the pods it runs.
pub const RUNNER_LABEL: &str = "fairlead.io/local-runner";

/// A pod a workload wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// Its name: the workload's, the template's hash, and its ordinal (a StatefulSet's:
    /// the workload's and its ordinal, stable across templates).
    pub name: String,
    /// The template's hash (a changed template is new pods, or a StatefulSet's pod
    /// replaced).
    pub hash: String,
    /// Its ordinal.
    pub ordinal: usize,
}

/// A StatefulSet's pod running an older template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outdated {
    /// Its StatefulSet.
    pub workload: ObjectKey,
    /// The pod.
    pub pod: ObjectKey,
    /// Its ordinal.
    pub ordinal: usize,
}

/// Which of `outdated` to stop this round, as the StatefulSet controller's rolling update
/// does: one pod per StatefulSet at a time, the highest ordinal first, and only once
/// `settled(statefulset)` (none of its pods stopping, and each already on the new template
/// running and ready).
pub fn replacements(outdated: &[Outdated], settled: impl Fn(&ObjectKey) -> bool) -> Vec<ObjectKey> {
    let mut highest: BTreeMap<&ObjectKey, &Outdated> = BTreeMap::new();
    for pod in outdated {
        let entry = highest.entry(&pod.workload).or_insert(pod);
        if pod.ordinal > entry.ordinal {
            *entry = pod;
        }
    }
    highest
        .into_iter()
        .filter(|(workload, _)| settled(workload))
        .map(|(_, pod)| pod.pod.clone())
        .collect()
}

/// How a Deployment replaces its pods (`spec.strategy`), as the Deployment controller
/// bounds it: at most `replicas + surge` pods at once, and (when replacing ready pods) at
/// least `replicas - unavailable` ready. `RollingUpdate`'s `maxSurge` and `maxUnavailable`
/// are a number or a percentage of the replicas (surge rounded up, unavailable down; 25 %
/// each when not given; both 0 is read as one unavailable, as the controller does);
/// `Recreate` is no surge and every replica unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rollout {
    /// The replicas wanted.
    pub replicas: usize,
    /// Pods beyond `replicas` that may run at once.
    pub surge: usize,
    /// Replicas that may be unready at once.
    pub unavailable: usize,
}

impl Rollout {
    /// The rollout of `workload`; `None` for other kinds than a Deployment.
    pub fn of(workload: &Value) -> Option<Self> {
        if workload["kind"] != "Deployment" {
            return None;
        }
        let replicas = workload["spec"]["replicas"]
            .as_u64()
            .map_or(1, |r| usize::try_from(r).unwrap_or(usize::MAX));
        let strategy = &workload["spec"]["strategy"];
        if strategy["type"] == "Recreate" {
            return Some(Self {
                replicas,
                surge: 0,
                unavailable: replicas,
            });
        }
        let rolling = &strategy["rollingUpdate"];
        let scaled = |value: &Value, up: bool| -> usize {
            let percent = match value {
                Value::Number(n) => {
                    return n.as_u64().map_or(0, |n| usize::try_from(n).unwrap_or(0));
                }
                Value::String(text) => text
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse::<usize>().ok())
                    .unwrap_or(0),
                _ => 25,
            };
            let share = replicas.saturating_mul(percent);
            if up { share.div_ceil(100) } else { share / 100 }
        };
        let surge = scaled(&rolling["maxSurge"], true);
        let unavailable = match scaled(&rolling["maxUnavailable"], false) {
            0 if surge == 0 => 1,
            n => n,
        };
        Some(Self {
            replicas,
            surge,
            unavailable,
        })
    }

    /// Whether another pod may start while `present` pods of the Deployment run (old and
    /// new, not those stopping).
    pub fn may_start(&self, present: usize) -> bool {
        present < self.replicas.saturating_add(self.surge)
    }
}

/// A pod running here, as the decision to stop it sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// The pod.
    pub pod: ObjectKey,
    /// Its workload's kind and key.
    pub workload: (String, ObjectKey),
    /// Whether it is ready.
    pub ready: bool,
    /// Whether it has had longer than the surge to become ready.
    pub overdue: bool,
    /// Its workload's rollout, when it is a Deployment that still exists.
    pub rollout: Option<Rollout>,
}

/// Which of the `running` pods to stop. A Deployment's pods no longer `wanted` (an older
/// template's, or beyond its replicas) stop as its rolling update allows ([`Rollout`]): an
/// unready one at once, a ready one while the Deployment keeps `replicas - unavailable`
/// ready pods without it. Other pods no longer wanted stop at once when their workload
/// wants no pod running here, else once every wanted pod of their workload is ready — or
/// has had its time ([`Current::overdue`]) without becoming ready (a DaemonSet's pod is
/// replaced so, the new one first: the runner forwards host ports, so the two never
/// contend for one).
pub fn superseded(running: &[Current], wanted: impl Fn(&ObjectKey) -> bool) -> Vec<ObjectKey> {
    let mut stopped = Vec::new();
    // Ready pods each rolling Deployment still counts on, as its old pods are stopped.
    let mut ready: BTreeMap<&(String, ObjectKey), usize> = BTreeMap::new();
    let mut old: Vec<&Current> = running.iter().filter(|p| !wanted(&p.pod)).collect();
    // Unready pods go first: stopping them costs no availability.
    old.sort_by_key(|p| p.ready);
    for p in old {
        let Some(rollout) = p.rollout else {
            let successors: Vec<&Current> = running
                .iter()
                .filter(|q| wanted(&q.pod) && q.workload == p.workload)
                .collect();
            if successors.is_empty()
                || successors.iter().all(|q| q.ready)
                || successors.iter().all(|q| q.overdue)
            {
                stopped.push(p.pod.clone());
            }
            continue;
        };
        let left = ready.entry(&p.workload).or_insert_with(|| {
            running
                .iter()
                .filter(|q| q.workload == p.workload && q.ready)
                .count()
        });
        if !p.ready {
            stopped.push(p.pod.clone());
        } else if *left > rollout.replicas.saturating_sub(rollout.unavailable) {
            *left -= 1;
            stopped.push(p.pod.clone());
        }
    }
    stopped
}

/// A short stable hash of `value` (its JSON text), for names.
pub fn hash(value: &Value) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(value.to_string().as_bytes());
    digest[..5].iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `node_labels` satisfy the template's `nodeSelector`.
fn schedulable(template: &Value, node_labels: &BTreeMap<String, String>) -> bool {
    template["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| node_labels.get(k).map(String::as_str) == v.as_str())
}

/// The pods `workload` (a Deployment or DaemonSet) wants on the local node.
pub fn wanted(workload: &Value, node_labels: &BTreeMap<String, String>) -> Vec<Wanted> {
    let template = &workload["spec"]["template"];
    let name = workload["metadata"]["name"].as_str().unwrap_or_default();
    let hash = hash(template);
    let count = match workload["kind"].as_str() {
        Some("DaemonSet") => usize::from(schedulable(template, node_labels)),
        _ => workload["spec"]["replicas"]
            .as_u64()
            .map_or(1, |r| usize::try_from(r).unwrap_or(0)),
    };
    let stateful = workload["kind"] == "StatefulSet";
    (0..count)
        .map(|i| Wanted {
            name: if stateful {
                format!("{name}-{i}")
            } else {
                format!("{name}-{hash}-{i}")
            },
            hash: hash.clone(),
            ordinal: i,
        })
        .collect()
}

/// The PersistentVolumeClaims of a StatefulSet's pod `wanted`, as the StatefulSet
/// controller makes them from its `volumeClaimTemplates`: `<template>-<set>-<ordinal>`,
/// labelled with the set's selector, owned by the set when its retention policy deletes
/// them with it.
pub fn claims(workload: &Value, wanted: &Wanted) -> Vec<Value> {
    let set = workload["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = workload["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let owned = workload["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete";
    workload["spec"]["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|template| {
            let name = template["metadata"]["name"].as_str()?;
            let mut claim = json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": format!("{name}-{set}-{}", wanted.ordinal),
                    "namespace": namespace,
                    "labels": workload["spec"]["selector"]["matchLabels"].clone(),
                },
                "spec": template["spec"].clone(),
            });
            if owned {
                claim["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "apps/v1", "kind": "StatefulSet", "name": set,
                    "uid": workload["metadata"]["uid"], "controller": true,
                    "blockOwnerDeletion": true}]);
            }
            Some(claim)
        })
        .collect()
}

/// What a container is to the runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Run {
    /// A fairlead subcommand, run with these arguments.
    Fairlead(Vec<String>),
    /// Something else (kube-rbac-proxy): not run here.
    Skipped,
}

/// Whether the runner runs `container`: a fairlead image's entrypoint (no `command`, or
/// `fairlead`) with a fairlead subcommand as its first argument.
pub fn classify(container: &Value) -> Run {
    let command: Vec<&str> = container["command"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let args: Vec<String> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let fairlead_entrypoint = command.is_empty()
        || (command.len() == 1 && Path::new(command[0]).file_name() == Some("fairlead".as_ref()));
    match args.first() {
        Some(first) if fairlead_entrypoint && FAIRLEAD_COMMANDS.contains(&first.as_str()) => {
            Run::Fairlead(args)
        }
        _ => Run::Skipped,
    }
}

/// What a container's view of the machine is made of.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// The pod's address.
    pub pod_ip: Option<IpAddr>,
    /// Each volume mount's path, and its directory here.
    pub mounts: Vec<(String, PathBuf)>,
    /// Service names the runner serves, and their addresses.
    pub services: BTreeMap<String, IpAddr>,
}

/// `$(VAR)` in `text` expanded from `env` (unknown variables stay as written, `$$` is `$`).
pub fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
            && let Some(value) = env.get(&inner[..end])
        {
            out.push_str(value);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// An argument as it reads in `view` (after [`expand`]).
pub fn localize(arg: &str, view: &View) -> String {
    let mut arg = arg.to_owned();
    if let Some(ip) = view.pod_ip {
        arg = arg
            .replace("127.0.0.1", &ip.to_string())
            .replace("0.0.0.0", &ip.to_string());
    }
    for (name, ip) in &view.services {
        arg = arg
            .replace(&format!("{name}.svc.cluster.local"), &ip.to_string())
            .replace(&format!("{name}.svc"), &ip.to_string());
    }
    // A path argument (`/mount/file`, `--flag=/mount/file`) under a mount, longest first.
    let mut mounts: Vec<&(String, PathBuf)> = view.mounts.iter().collect();
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let (prefix, path) = match arg.split_once('=') {
        Some((flag, value)) if value.starts_with('/') => (format!("{flag}="), value.to_owned()),
        _ => (String::new(), arg.clone()),
    };
    for (mount, dir) in mounts {
        let mount = mount.trim_end_matches('/');
        if path == mount {
            return format!("{prefix}{}", dir.display());
        }
        if let Some(below) = path.strip_prefix(&format!("{mount}/")) {
            return format!("{prefix}{}", dir.join(below).display());
        }
    }
    arg
}

/// The Pod object of `wanted`, from its workload.
pub fn pod(workload: &Value, wanted: &Wanted, node: &str) -> Value {
    let template = &workload["spec"]["template"];
    let namespace = workload["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let mut labels = template["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[RUNNER_LABEL] = json!("true");
    labels["pod-template-hash"] = json!(wanted.hash);
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!(node);
    if workload["kind"] == "StatefulSet" {
        labels["statefulset.kubernetes.io/pod-name"] = json!(wanted.name);
        labels["controller-revision-hash"] = json!(wanted.hash);
        // Each claim template is a volume of the pod, its claim named for the pod.
        for claim in claims(workload, wanted) {
            let template = claim["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .strip_suffix(&format!(
                    "-{}-{}",
                    workload["metadata"]["name"].as_str().unwrap_or_default(),
                    wanted.ordinal
                ))
                .unwrap_or_default()
                .to_owned();
            let volumes = spec["volumes"].as_array_mut();
            let volume = json!({"name": template,
                "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}});
            match volumes {
                Some(list) => list.push(volume),
                None => spec["volumes"] = json!([volume]),
            }
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": wanted.name,
            "namespace": namespace,
            "labels": labels,
            "annotations": template["metadata"]["annotations"].clone(),
            "ownerReferences": [{
                "apiVersion": workload["apiVersion"], "kind": workload["kind"],
                "name": workload["metadata"]["name"], "uid": workload["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// How one container is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerState {
    /// Its name.
    pub name: String,
    /// An init container (run to completion, in order, before the others start).
    pub init: bool,
    /// `running` (since when), `waiting` (why), or skipped by the runner.
    pub state: State,
    /// Whether its readiness probe passes.
    pub ready: bool,
    /// How often it was restarted.
    pub restarts: u32,
    /// How it ended the last time, if it did.
    pub last_exit: Option<(i32, String)>,
}

/// A container's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Running since the time given (RFC 3339).
    Running(String),
    /// Not running: the reason and message.
    Waiting(String, String),
    /// Not run by the runner.
    Skipped,
    /// Exited successfully (an init container that did its work).
    Completed,
}

/// A Pod's status from its containers' (init containers first): `Pending` until every
/// init container completed, ready once every container the runner runs is.
pub fn status(pod_ip: IpAddr, started: &str, containers: &[ContainerState]) -> Value {
    let (inits, regular): (Vec<&ContainerState>, Vec<&ContainerState>) =
        containers.iter().partition(|c| c.init);
    let initialized = inits
        .iter()
        .all(|c| matches!(c.state, State::Completed | State::Skipped));
    let ran: Vec<&&ContainerState> = regular
        .iter()
        .filter(|c| c.state != State::Skipped)
        .collect();
    let ready = initialized && !ran.is_empty() && ran.iter().all(|c| c.ready);
    let condition = |kind: &str, ok: bool| {
        json!({"type": kind, "status": if ok { "True" } else { "False" },
            "lastTransitionTime": started})
    };
    let of = |c: &&ContainerState| {
        let state = match &c.state {
            State::Running(since) => json!({"running": {"startedAt": since}}),
            State::Waiting(reason, message) => {
                json!({"waiting": {"reason": reason, "message": message}})
            }
            State::Skipped => json!({"waiting": {"reason": "NotRunLocally",
                "message": "fairlead up runs only the containers that are fairlead commands"}}),
            State::Completed => json!({"terminated": {"exitCode": 0, "reason": "Completed"}}),
        };
        let mut status = json!({"name": c.name, "ready": c.ready, "restartCount": c.restarts,
            "started": matches!(c.state, State::Running(_)), "state": state,
            "image": "", "imageID": ""});
        if let Some((code, reason)) = &c.last_exit {
            status["lastState"] = json!({"terminated": {"exitCode": code, "reason": reason}});
        }
        status
    };
    let mut status = json!({
        "phase": if initialized { "Running" } else { "Pending" },
        "podIP": pod_ip.to_string(),
        "podIPs": [{"ip": pod_ip.to_string()}],
        "hostIP": "127.0.0.1",
        "startTime": started,
        "conditions": [
            condition("PodScheduled", true),
            condition("Initialized", initialized),
            condition("ContainersReady", ready),
            condition("Ready", ready),
        ],
        "containerStatuses": regular.iter().map(of).collect::<Vec<_>>(),
    });
    if !inits.is_empty() {
        status["initContainerStatuses"] = json!(inits.iter().map(of).collect::<Vec<_>>());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_want_their_replicas_or_one_pod_on_a_matching_node() {
        let deployment = json!({"kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": []}}}});
        let pods = wanted(&deployment, &BTreeMap::new());
        assert_eq!(pods.len(), 2);
        assert!(pods[0].name.starts_with("web-") && pods[0].name.ends_with("-0"));
        assert_ne!(pods[0].name, pods[1].name);
        let daemons = json!({"kind": "DaemonSet", "metadata": {"name": "proxy"},
            "spec": {"template": {"spec": {"nodeSelector": {"role": "edge"}}}}});
        assert!(
            wanted(&daemons, &BTreeMap::new()).is_empty(),
            "the node does not match"
        );
        let edge = BTreeMap::from([("role".to_owned(), "edge".to_owned())]);
        assert_eq!(wanted(&daemons, &edge).len(), 1);
        // A changed template is new pods.
        let mut changed = deployment.clone();
        changed["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        assert_ne!(wanted(&changed, &edge)[0].hash, pods[0].hash);
    }

    #[test]
    fn only_fairlead_commands_run() {
        assert_eq!(
            classify(&json!({"args": ["edge", "proxy", "--x"]})),
            Run::Fairlead(vec!["edge".into(), "proxy".into(), "--x".into()])
        );
        assert_eq!(
            classify(&json!({"command": ["/usr/bin/fairlead"], "args": ["edge", "proxy"]})),
            Run::Fairlead(vec!["edge".into(), "proxy".into()])
        );
        assert_eq!(
            classify(&json!({"args": ["--secure-listen-address=:1"]})),
            Run::Skipped
        );
        assert_eq!(
            classify(&json!({"command": ["sh"], "args": ["edge"]})),
            Run::Skipped
        );
    }

    #[test]
    fn arguments_read_as_inside_the_pod() {
        let env = BTreeMap::from([("POD_IP".to_owned(), "10.0.0.1".to_owned())]);
        assert_eq!(
            expand("--a=$(POD_IP):1 $(NONE) $$(POD_IP)", &env),
            "--a=10.0.0.1:1 $(NONE) $(POD_IP)"
        );
        let view = View {
            pod_ip: Some("127.0.3.4".parse().unwrap()),
            mounts: vec![
                ("/etc/fairlead".into(), PathBuf::from("/r/etc")),
                ("/etc/fairlead/xds-tls".into(), PathBuf::from("/r/tls")),
            ],
            services: BTreeMap::from([("geo.d8-alb".to_owned(), "127.0.2.9".parse().unwrap())]),
        };
        assert_eq!(localize("127.0.0.1:19001", &view), "127.0.3.4:19001");
        assert_eq!(localize("0.0.0.0:19002", &view), "127.0.3.4:19002");
        assert_eq!(
            localize("/etc/fairlead/xds-tls/ca.crt", &view),
            "/r/tls/ca.crt"
        );
        assert_eq!(
            localize("--ca=/etc/fairlead/other", &view),
            "--ca=/r/etc/other"
        );
        assert_eq!(
            localize("/etc/fairleadx", &view),
            "/etc/fairleadx",
            "not under the mount"
        );
        assert_eq!(
            localize("http://geo.d8-alb.svc:8080/x", &view),
            "http://127.0.2.9:8080/x"
        );
    }

    #[test]
    fn a_pod_is_ready_when_every_container_it_runs_is() {
        let running = ContainerState {
            name: "proxy".into(),
            init: false,
            state: State::Running("t".into()),
            ready: true,
            restarts: 2,
            last_exit: Some((1, "Error".into())),
        };
        let skipped = ContainerState {
            name: "kube-rbac-proxy".into(),
            init: false,
            state: State::Skipped,
            ready: false,
            restarts: 0,
            last_exit: None,
        };
        let ip: IpAddr = "127.0.3.1".parse().unwrap();
        let s = status(ip, "t", &[running.clone(), skipped.clone()]);
        assert_eq!(
            s["conditions"][3],
            json!({"type": "Ready", "status": "True", "lastTransitionTime": "t"})
        );
        assert_eq!(s["containerStatuses"][0]["restartCount"], 2);
        assert_eq!(
            s["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            1
        );
        assert_eq!(
            s["containerStatuses"][1]["state"]["waiting"]["reason"],
            "NotRunLocally"
        );
        let starting = ContainerState {
            ready: false,
            ..running.clone()
        };
        assert_eq!(
            status(ip, "t", &[starting, skipped.clone()])["conditions"][3]["status"],
            "False"
        );
        // An init container that has not completed holds the pod in Pending, not ready.
        let mut init = ContainerState {
            name: "geo-downloader-init".into(),
            init: true,
            state: State::Waiting("CrashLoopBackOff".into(), "back-off".into()),
            ready: false,
            restarts: 1,
            last_exit: Some((1, "Error".into())),
        };
        let pending = status(ip, "t", &[init.clone(), running.clone(), skipped.clone()]);
        assert_eq!(pending["phase"], "Pending");
        assert_eq!(pending["conditions"][1]["status"], "False");
        assert_eq!(pending["conditions"][3]["status"], "False");
        assert_eq!(
            pending["initContainerStatuses"][0]["state"]["waiting"]["reason"],
            "CrashLoopBackOff"
        );
        assert_eq!(pending["containerStatuses"].as_array().unwrap().len(), 2);
        init.state = State::Completed;
        let done = status(ip, "t", &[init, running, skipped]);
        assert_eq!(done["phase"], "Running");
        assert_eq!(done["conditions"][3]["status"], "True");
        assert_eq!(
            done["initContainerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
    }

    #[test]
    fn a_rollout_reads_the_strategy_as_the_deployment_controller_does() {
        let deployment = |replicas: u64, strategy: Value| json!({"kind": "Deployment", "spec": {"replicas": replicas, "strategy": strategy}});
        let rollout = |d: Value| Rollout::of(&d).unwrap();
        let bounds = |r: Rollout| (r.replicas, r.surge, r.unavailable);
        // The ALBInstance's proxies: one more at a time, none unavailable.
        assert_eq!(
            bounds(rollout(deployment(
                2,
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
            ))),
            (2, 1, 0)
        );
        // 25 % each by default: surge rounded up, unavailable down.
        assert_eq!(bounds(rollout(deployment(2, json!({})))), (2, 1, 0));
        assert_eq!(bounds(rollout(deployment(10, json!({})))), (10, 3, 2));
        assert_eq!(
            bounds(rollout(deployment(
                4,
                json!({"rollingUpdate": {"maxSurge": "50%", "maxUnavailable": "50%"}})
            ))),
            (4, 2, 2)
        );
        // Neither may be 0 at once: one unavailable.
        assert_eq!(
            bounds(rollout(deployment(
                3,
                json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}})
            ))),
            (3, 0, 1)
        );
        assert_eq!(
            bounds(rollout(deployment(3, json!({"type": "Recreate"})))),
            (3, 0, 3)
        );
        assert_eq!(Rollout::of(&json!({"kind": "DaemonSet"})), None);
        let r = rollout(deployment(
            2,
            json!({"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        ));
        assert!(
            r.may_start(2) && !r.may_start(3),
            "at most three pods at once"
        );
    }

    /// The ALBInstance's proxies (two replicas, one surge, none unavailable) replaced round
    /// by round: never more than three pods, never fewer than two ready.
    #[test]
    fn a_deployment_rolls_within_its_surge_and_availability() {
        let rollout = Rollout {
            replicas: 2,
            surge: 1,
            unavailable: 0,
        };
        let pod = |name: &str, ready: bool| Current {
            pod: ObjectKey::new("d8-alb", name),
            workload: ("Deployment".into(), ObjectKey::new("d8-alb", "web")),
            ready,
            overdue: false,
            rollout: Some(rollout),
        };
        let new = |k: &ObjectKey| k.name().starts_with("new");
        // One new pod beside the two old ones, not ready: nothing stops.
        let running = [pod("old-0", true), pod("old-1", true), pod("new-0", false)];
        assert!(superseded(&running, new).is_empty());
        // Ready: one old pod stops, two stay ready.
        let running = [pod("old-0", true), pod("old-1", true), pod("new-0", true)];
        assert_eq!(
            superseded(&running, new),
            [ObjectKey::new("d8-alb", "old-0")]
        );
        // An old pod that is not ready stops at once; the ready one waits.
        let running = [pod("old-0", false), pod("old-1", true), pod("new-0", true)];
        assert_eq!(
            superseded(&running, new),
            [ObjectKey::new("d8-alb", "old-0")]
        );
        // A new pod that never gets ready holds the old ones (no overdue stop for a
        // Deployment: its rollout waits, as in a cluster).
        let mut stuck = pod("new-0", false);
        stuck.overdue = true;
        let running = [pod("old-0", true), pod("old-1", true), stuck];
        assert!(superseded(&running, new).is_empty());
        // With an unavailable replica allowed, an old pod may stop before its successor.
        let mut lenient = [pod("old-0", true), pod("old-1", true)];
        for p in &mut lenient {
            p.rollout = Some(Rollout {
                surge: 0,
                unavailable: 1,
                ..rollout
            });
        }
        assert_eq!(superseded(&lenient, new).len(), 1);
    }

    #[test]
    fn old_pods_stop_once_their_successors_are_ready_or_overdue() {
        let pod = |name: &str, workload: &str, ready: bool, overdue: bool| Current {
            pod: ObjectKey::new("d8-alb", name),
            workload: ("DaemonSet".into(), ObjectKey::new("d8-alb", workload)),
            ready,
            overdue,
            rollout: None,
        };
        let wanted =
            |names: &'static [&'static str]| move |k: &ObjectKey| names.contains(&k.name());
        // A new template's pod not ready yet: the old one keeps serving.
        let running = [
            pod("web-old", "web", true, false),
            pod("web-new", "web", false, false),
        ];
        assert!(superseded(&running, wanted(&["web-new"])).is_empty());
        // Ready: the old one stops.
        let running = [
            pod("web-old", "web", true, false),
            pod("web-new", "web", true, false),
        ];
        assert_eq!(
            superseded(&running, wanted(&["web-new"])),
            [ObjectKey::new("d8-alb", "web-old")]
        );
        // Never ready, but past the surge: the old one stops all the same.
        let running = [
            pod("web-old", "web", true, false),
            pod("web-new", "web", false, true),
        ];
        assert_eq!(superseded(&running, wanted(&["web-new"])).len(), 1);
        // A workload gone (nothing of it wanted): its pods stop at once; another workload's
        // new pods do not hold them.
        let running = [
            pod("gone-1", "gone", true, false),
            pod("web-new", "web", false, false),
        ];
        assert_eq!(
            superseded(&running, wanted(&["web-new"])),
            [ObjectKey::new("d8-alb", "gone-1")]
        );
        // A workload of another kind with the same name is another workload.
        let mut other = pod("web-set-0", "web", false, false);
        other.workload.0 = "StatefulSet".into();
        let running = [pod("web-old", "web", true, false), other];
        assert_eq!(superseded(&running, wanted(&["web-set-0"])).len(), 1);
    }

    #[test]
    fn a_stateful_set_wants_stable_names_and_claims_per_pod() {
        let set = json!({"kind": "StatefulSet", "apiVersion": "apps/v1",
            "metadata": {"name": "geo", "namespace": "d8-alb", "uid": "u1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "geo"}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                "template": {"metadata": {"labels": {"app": "geo"}},
                    "spec": {"containers": [], "volumes": [{"name": "tmp", "emptyDir": {}}]}}}});
        let pods = wanted(&set, &BTreeMap::new());
        assert_eq!(
            pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["geo-0", "geo-1"]
        );
        let mut changed = set.clone();
        changed["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        let again = wanted(&changed, &BTreeMap::new());
        assert_eq!(again[1].name, "geo-1", "the same name for a new template");
        assert_ne!(again[1].hash, pods[1].hash);
        let claims = claims(&set, &pods[1]);
        assert_eq!(claims[0]["metadata"]["name"], "data-geo-1");
        assert_eq!(claims[0]["metadata"]["labels"], json!({"app": "geo"}));
        assert_eq!(claims[0]["metadata"]["ownerReferences"][0]["uid"], "u1");
        let object = pod(&set, &pods[1], "node");
        assert_eq!(
            object["spec"]["volumes"][1],
            json!({"name": "data", "persistentVolumeClaim": {"claimName": "data-geo-1"}})
        );
        assert_eq!(
            object["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
            "geo-1"
        );
    }

    #[test]
    fn a_stateful_set_is_replaced_from_its_highest_ordinal_one_pod_at_a_time() {
        let geo = ObjectKey::new("d8-alb", "geo");
        let other = ObjectKey::new("team", "other");
        let outdated = |workload: &ObjectKey, ordinal: usize| Outdated {
            workload: workload.clone(),
            pod: ObjectKey::new(
                workload.namespace(),
                format!("{}-{ordinal}", workload.name()),
            ),
            ordinal,
        };
        let all = [
            outdated(&geo, 0),
            outdated(&geo, 2),
            outdated(&geo, 1),
            outdated(&other, 0),
        ];
        assert_eq!(
            replacements(&all, |_| true),
            [
                ObjectKey::new("d8-alb", "geo-2"),
                ObjectKey::new("team", "other-0")
            ]
        );
        assert_eq!(
            replacements(&all, |w| w != &geo),
            [ObjectKey::new("team", "other-0")],
            "a StatefulSet still rolling waits"
        );
        assert!(replacements(&[], |_| true).is_empty());
    }
}
