//! One pod on this machine, as a kubelet runs it: its Pod object created, its volumes
//! materialized and kept current, its init containers run to completion in order (one that
//! fails is run again with backoff), then each container that is a fairlead command started
//! as a child process (`fairlead <args>`, in its own file tree, with its environment and its
//! arguments as they read inside the pod — the Services the runner serves as they are when
//! the container starts — its output in `<pod>/logs/<container>.log`), its readiness probe
//! polled, a container that exits restarted with backoff (counted in `restartCount`), and
//! the Pod's status written whenever it changes. Stopping runs the preStop pause, sends
//! SIGTERM and waits the grace period before killing; the Pod object goes last.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Config;
use super::account::Account;
use super::alias;
use super::pod::{self, ContainerState, Run, State, View};
use super::volumes::{self, Volumes};

/// A running pod.
pub struct Handle {
    /// The Pod's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its address.
    pub ip: IpAddr,
    /// Whether it is ready.
    pub ready: watch::Receiver<bool>,
    /// Stops it (preStop, SIGTERM, the grace period).
    pub stop: CancellationToken,
    /// Cancelled when the node itself is going (`fairlead up` stopping), before `stop` or
    /// while the pod is already stopping: no (more) preStop pause, and at most
    /// [`HURRIED_GRACE`] of the pod's grace period.
    pub hurry: CancellationToken,
    /// Ends once it has stopped and its Pod object is gone.
    pub done: tokio::task::JoinHandle<()>,
}

/// The Services the runner serves (`<name>.<namespace>`) and their addresses, as they
/// change.
pub type Services = watch::Receiver<BTreeMap<String, IpAddr>>;

/// Starts the pod `wanted` of `workload` on `ip`.
pub fn spawn(
    client: kube::Client,
    config: Arc<Config>,
    workload: &Value,
    wanted: &pod::Wanted,
    ip: IpAddr,
    services: Services,
) -> Handle {
    let object = pod::pod(workload, wanted, &config.node);
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let stop = CancellationToken::new();
    let hurry = CancellationToken::new();
    let (ready_tx, ready) = watch::channel(false);
    let done = tokio::spawn(run(
        client,
        config,
        object,
        ip,
        services,
        Stopping {
            stop: stop.clone(),
            hurry: hurry.clone(),
        },
        ready_tx,
    ));
    Handle {
        name: wanted.name.clone(),
        namespace,
        ip,
        ready,
        stop,
        hurry,
        done,
    }
}

/// The grace period of pods stopped because `fairlead up` is stopping.
pub const HURRIED_GRACE: Duration = Duration::from_secs(3);

/// How a pod is told to stop.
#[derive(Clone)]
struct Stopping {
    stop: CancellationToken,
    hurry: CancellationToken,
}

fn now() -> String {
    fairlead_kit::conditions::now()
}

async fn run(
    client: kube::Client,
    config: Arc<Config>,
    object: Value,
    ip: IpAddr,
    services: Services,
    stopping: Stopping,
    ready: watch::Sender<bool>,
) {
    let stop = stopping.stop.clone();
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    if let Err(e) = create(&pods, &object).await {
        tracing::warn!(pod = %format!("{namespace}/{name}"), error = %e, "creating the Pod object failed; the pod runs without it");
    }
    let root = config.dir.join(format!("{namespace}_{name}"));
    // The containers' files, as the containers are given them: through a short link.
    let seen = alias::short(&root, config.block.number).unwrap_or_else(|e| {
        tracing::warn!(pod = %name, error = %e, "no short path to the pod's files; a Unix socket among them may have too long a path");
        root.clone()
    });
    let spec = &object["spec"];
    let mut volumes = Volumes::new(&root, &config.dir.join(CLAIMS_DIR), &namespace, spec);
    for unsupported in volumes.unsupported() {
        tracing::warn!(pod = %name, volume = %unsupported, "a volume of this kind is not made by fairlead up; the container sees an empty directory");
    }
    // Init containers first, then the others: the order of the states.
    let containers: Vec<(bool, Value)> = ["initContainers", "containers"]
        .into_iter()
        .flat_map(|field| {
            spec[field]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |c| (field == "initContainers", c))
        })
        .collect();
    let states = Arc::new(Mutex::new(
        containers
            .iter()
            .map(|(init, c)| ContainerState {
                name: c["name"].as_str().unwrap_or_default().to_owned(),
                init: *init,
                state: match pod::classify(c) {
                    Run::Skipped => State::Skipped,
                    Run::Fairlead(_) => State::Waiting(
                        if *init {
                            "PodInitializing"
                        } else {
                            "ContainerCreating"
                        }
                        .into(),
                        String::new(),
                    ),
                },
                ready: false,
                restarts: 0,
                last_exit: None,
            })
            .collect::<Vec<_>>(),
    ));
    let (changed_tx, changed) = watch::channel(());
    let writer = tokio::spawn(write_status(
        pods.clone(),
        name.clone(),
        ip,
        states.clone(),
        changed,
        ready,
    ));
    let mut account = config
        .api
        .as_ref()
        .and_then(|access| Account::of(&root, &namespace, spec, access));
    // Volumes (and the account's token) first: a container starts with its files in place.
    let mut backoff = Backoff::new();
    loop {
        let refreshed = match volumes.refresh(&client).await {
            Ok(()) => match account.as_mut() {
                Some(account) => account.refresh(&client).await.map_err(|e| e.to_string()),
                None => Ok(()),
            },
            Err(e) => Err(e.to_string()),
        };
        let Err(e) = refreshed else {
            break;
        };
        set(&states, &changed_tx, |all| {
            for c in all.iter_mut().filter(|c| c.state != State::Skipped) {
                c.state = State::Waiting("ContainerCreating".into(), e.to_string());
            }
        });
        tokio::select! {
            () = stop.cancelled() => return finish(&pods, &name, writer).await,
            () = tokio::time::sleep(backoff.next()) => {}
        }
    }
    let mut env_base = base_env(&config);
    if let Some(account) = &account {
        env_base.insert(
            "KUBECONFIG".into(),
            account.kubeconfig().display().to_string(),
        );
    }
    let fields = fields(&object, ip, &config.node);
    let grace = Duration::from_secs(spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30));
    let mut tasks = Vec::new();
    for (index, (init, container)) in containers.iter().enumerate() {
        let Run::Fairlead(args) = pod::classify(container) else {
            config.say_skipped(container);
            continue;
        };
        let (mounts, working) = match volumes::container_tree(&seen, &volumes, container) {
            Ok(tree) => tree,
            Err(e) => {
                set(&states, &changed_tx, |all| {
                    all[index].state = State::Waiting("CreateContainerError".into(), e.to_string());
                });
                if *init {
                    // The pod cannot initialize: it waits to be stopped.
                    stop.cancelled().await;
                    return finish(&pods, &name, writer).await;
                }
                continue;
            }
        };
        let env = environment(&client, &namespace, container, &env_base, &fields).await;
        let args: Vec<String> = args.iter().map(|a| pod::expand(a, &env)).collect();
        let process = Process {
            binary: config.fairlead.clone(),
            args,
            view: View {
                pod_ip: Some(ip),
                mounts,
                services: BTreeMap::new(),
            },
            services: services.clone(),
            env,
            working,
            log: root.join("logs").join(format!(
                "{}.log",
                container["name"].as_str().unwrap_or("container")
            )),
            probe: probe(container, ip),
            pre_stop: Duration::from_secs(
                container["lifecycle"]["preStop"]["sleep"]["seconds"]
                    .as_u64()
                    .unwrap_or(0),
            ),
            grace,
        };
        if *init {
            if !complete(&process, index, &states, &changed_tx, &stopping).await {
                return finish(&pods, &name, writer).await;
            }
            continue;
        }
        tasks.push(tokio::spawn(supervise(
            process,
            index,
            states.clone(),
            changed_tx.clone(),
            stopping.clone(),
        )));
    }
    // Volumes follow their ConfigMaps and Secrets (a renewed certificate reaches the files).
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(config.refresh) => {}
        }
        if let Err(e) = volumes.refresh(&client).await {
            tracing::warn!(pod = %name, error = %e, "refreshing the pod's volumes failed; keeping the files it has");
        }
        if let Some(account) = account.as_mut()
            && let Err(e) = account.refresh(&client).await
        {
            tracing::warn!(pod = %name, error = %e, "renewing the pod's token failed; it keeps the one it has");
        }
    }
    for task in tasks {
        let _ = task.await;
    }
    finish(&pods, &name, writer).await;
}

async fn finish(pods: &Api<Pod>, name: &str, writer: tokio::task::JoinHandle<()>) {
    writer.abort();
    match pods.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => tracing::warn!(pod = %name, error = %e, "deleting the Pod object failed"),
    }
}

async fn create(pods: &Api<Pod>, object: &Value) -> Result<(), kube::Error> {
    let pod: Pod = serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    match pods.create(&PostParams::default(), &pod).await {
        Err(kube::Error::Api(e)) if e.code == 409 => {
            pods.delete(&name, &DeleteParams::default()).await?;
            pods.create(&PostParams::default(), &pod).await.map(drop)
        }
        other => other.map(drop),
    }
}

fn set(
    states: &Mutex<Vec<ContainerState>>,
    changed: &watch::Sender<()>,
    change: impl FnOnce(&mut Vec<ContainerState>),
) {
    let mut all = states.lock().expect("container states");
    let before = all.clone();
    change(&mut all);
    if *all != before {
        changed.send_replace(());
    }
}

/// Writes the Pod's status at every change, and tells `ready` the pod's readiness.
async fn write_status(
    pods: Api<Pod>,
    name: String,
    ip: IpAddr,
    states: Arc<Mutex<Vec<ContainerState>>>,
    mut changed: watch::Receiver<()>,
    ready: watch::Sender<bool>,
) {
    let started = now();
    loop {
        let snapshot = states.lock().expect("container states").clone();
        let status = pod::status(ip, &started, &snapshot);
        ready.send_replace(status["conditions"][3]["status"] == "True");
        let patch = json!({"status": status});
        if let Err(e) = pods
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(pod = %name, error = %e, "writing the Pod's status");
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

/// The environment every container of the pod starts from: what locates the tools and the
/// telemetry collector, and the runner's own binaries.
fn base_env(config: &Config) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| k == "PATH" || k.starts_with("OTEL_") || k == "FAIRLEAD_ENVOY")
        .collect();
    if let Some(envoy) = &config.envoy {
        env.insert("FAIRLEAD_ENVOY".into(), envoy.display().to_string());
    }
    // A pod's processes end with `fairlead up`, however it ends.
    env.insert(
        "FAIRLEAD_PARENT_PID".into(),
        fairlead_kit::process::pid().to_string(),
    );
    env
}

/// A container's environment: the base, then its `env` in order (`value` with `$(VAR)`
/// expanded, `valueFrom` a field of the pod, a Secret's or a ConfigMap's key).
async fn environment(
    client: &kube::Client,
    namespace: &str,
    container: &Value,
    base: &BTreeMap<String, String>,
    fields: &BTreeMap<&'static str, String>,
) -> BTreeMap<String, String> {
    let mut env = base.clone();
    for var in container["env"].as_array().into_iter().flatten() {
        let Some(name) = var["name"].as_str() else {
            continue;
        };
        let value = if let Some(value) = var["value"].as_str() {
            Some(pod::expand(value, &env))
        } else if let Some(field) = var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            fields.get(field).cloned()
        } else if let Some(key) = var["valueFrom"]["secretKeyRef"].as_object() {
            let api: Api<k8s_openapi::api::core::v1::Secret> =
                Api::namespaced(client.clone(), namespace);
            match (
                key.get("name").and_then(Value::as_str),
                key.get("key").and_then(Value::as_str),
            ) {
                (Some(n), Some(k)) => api.get_opt(n).await.ok().flatten().and_then(|s| {
                    s.data?
                        .get(k)
                        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                }),
                _ => None,
            }
        } else if let Some(key) = var["valueFrom"]["configMapKeyRef"].as_object() {
            let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
                Api::namespaced(client.clone(), namespace);
            match (
                key.get("name").and_then(Value::as_str),
                key.get("key").and_then(Value::as_str),
            ) {
                (Some(n), Some(k)) => api
                    .get_opt(n)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|c| c.data?.get(k).cloned()),
                _ => None,
            }
        } else {
            None
        };
        if let Some(value) = value {
            env.insert(name.to_owned(), value);
        }
    }
    env
}

/// The fields of the pod a container may read through `fieldRef`.
fn fields(object: &Value, ip: IpAddr, node: &str) -> BTreeMap<&'static str, String> {
    let meta = &object["metadata"];
    BTreeMap::from([
        (
            "metadata.name",
            meta["name"].as_str().unwrap_or_default().to_owned(),
        ),
        (
            "metadata.namespace",
            meta["namespace"].as_str().unwrap_or_default().to_owned(),
        ),
        ("spec.nodeName", node.to_owned()),
        (
            "spec.serviceAccountName",
            object["spec"]["serviceAccountName"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        ("status.podIP", ip.to_string()),
        ("status.hostIP", "127.0.0.1".to_owned()),
    ])
}

/// A readiness probe: its URL and timing.
#[derive(Clone, Debug)]
struct Probe {
    url: String,
    period: Duration,
    failures: u32,
}

/// The container's `readinessProbe.httpGet` on the pod's address (`None`: ready once
/// running).
fn probe(container: &Value, ip: IpAddr) -> Option<Probe> {
    let probe = &container["readinessProbe"];
    let get = probe.get("httpGet")?;
    let port = match &get["port"] {
        Value::Number(n) => n.as_u64()?,
        Value::String(named) => container["ports"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == named.as_str())?["containerPort"]
            .as_u64()?,
        _ => return None,
    };
    Some(Probe {
        url: format!("http://{ip}:{port}{}", get["path"].as_str().unwrap_or("/")),
        period: Duration::from_secs(probe["periodSeconds"].as_u64().unwrap_or(10).max(1)),
        failures: u32::try_from(probe["failureThreshold"].as_u64().unwrap_or(3)).unwrap_or(3),
    })
}

/// Where the runner keeps the directories of PersistentVolumeClaims, under its own.
pub const CLAIMS_DIR: &str = "claims";

/// How one container runs.
struct Process {
    binary: PathBuf,
    /// Its arguments, expanded from its environment (localized at each start).
    args: Vec<String>,
    /// What its arguments are localized against (but the Services).
    view: View,
    /// The Services the runner serves, as they are when it starts.
    services: Services,
    env: BTreeMap<String, String>,
    working: PathBuf,
    log: PathBuf,
    probe: Option<Probe>,
    pre_stop: Duration,
    grace: Duration,
}

/// Backoff of restarts: 1 s doubling to 30 s.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(Duration::from_millis(500))
    }
    fn next(&mut self) -> Duration {
        self.0 = (self.0 * 2).min(Duration::from_secs(30));
        self.0
    }
}

impl Process {
    /// Its arguments as they read in the pod now.
    fn localized(&self) -> Vec<String> {
        let view = View {
            services: self.services.borrow().clone(),
            ..self.view.clone()
        };
        self.args.iter().map(|a| pod::localize(a, &view)).collect()
    }

    /// Starts it, its output appended to its log.
    fn start(&self) -> std::io::Result<tokio::process::Child> {
        if let Some(parent) = self.log.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let err = log.try_clone()?;
        tokio::process::Command::new(&self.binary)
            .args(self.localized())
            .env_clear()
            .envs(&self.env)
            .current_dir(&self.working)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
    }
}

/// Runs an init container until it exits successfully (again with backoff after each
/// failure, as under `restartPolicy: Always`); `false` when the pod was stopped first.
async fn complete(
    process: &Process,
    index: usize,
    states: &Mutex<Vec<ContainerState>>,
    changed: &watch::Sender<()>,
    stopping: &Stopping,
) -> bool {
    let stop = &stopping.stop;
    let mut backoff = Backoff::new();
    loop {
        let exited = match process.start() {
            Ok(mut child) => {
                set(states, changed, |all| {
                    all[index].state = State::Running(now());
                });
                tokio::select! {
                    status = child.wait() => status.ok(),
                    () = stop.cancelled() => {
                        terminate(&mut child, process, &stopping.hurry).await;
                        return false;
                    }
                }
            }
            Err(e) => {
                set(states, changed, |all| {
                    all[index].state = State::Waiting("RunContainerError".into(), e.to_string());
                });
                None
            }
        };
        if exited.is_some_and(|s| s.success()) {
            set(states, changed, |all| all[index].state = State::Completed);
            return true;
        }
        let code = exited.and_then(|s| s.code()).unwrap_or(-1);
        let delay = backoff.next();
        tracing::warn!(container = %process.log.display(), exit_code = code, restart_in_s = delay.as_secs_f64(), "an init container failed; running it again (its log: the file named)");
        set(states, changed, |all| {
            let c = &mut all[index];
            c.restarts += 1;
            c.last_exit = Some((code, "Error".into()));
            c.state = State::Waiting(
                // kubectl shows `Init:CrashLoopBackOff`, composing it from this.
                "CrashLoopBackOff".into(),
                format!(
                    "back-off {}s restarting a failed init container",
                    delay.as_secs()
                ),
            );
        });
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Runs one container until `stop`, restarting it with backoff when it exits.
async fn supervise(
    process: Process,
    index: usize,
    states: Arc<Mutex<Vec<ContainerState>>>,
    changed: watch::Sender<()>,
    stopping: Stopping,
) {
    let stop = stopping.stop.clone();
    let mut backoff = Backoff::new();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .expect("a plain HTTP client builds");
    loop {
        let mut child = match process.start() {
            Ok(child) => child,
            Err(e) => {
                set(&states, &changed, |all| {
                    all[index].state = State::Waiting("RunContainerError".into(), e.to_string());
                });
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff.next()) => continue,
                }
            }
        };
        set(&states, &changed, |all| {
            all[index].state = State::Running(now());
            all[index].ready = process.probe.is_none();
        });
        let mut failures = 0;
        let exited = loop {
            let period = process
                .probe
                .as_ref()
                .map_or(Duration::from_secs(3600), |p| {
                    p.period.min(Duration::from_secs(2))
                });
            tokio::select! {
                status = child.wait() => break status,
                () = stop.cancelled() => {
                    terminate(&mut child, &process, &stopping.hurry).await;
                    return;
                }
                () = tokio::time::sleep(period) => {}
            }
            if let Some(probe) = &process.probe {
                let passed = http
                    .get(&probe.url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                failures = if passed { 0 } else { failures + 1 };
                let ready = passed
                    || (failures < probe.failures
                        && states.lock().expect("container states")[index].ready);
                set(&states, &changed, |all| all[index].ready = ready);
            }
        };
        let (code, reason) = match exited {
            Ok(status) => (
                status.code().unwrap_or(-1),
                if status.success() {
                    "Completed"
                } else {
                    "Error"
                },
            ),
            Err(_) => (-1, "Unknown"),
        };
        let delay = backoff.next();
        tracing::warn!(container = %process.log.display(), exit_code = code, restart_in_s = delay.as_secs_f64(), "a container exited; restarting it (its log: the file named)");
        set(&states, &changed, |all| {
            let c = &mut all[index];
            c.restarts += 1;
            c.ready = false;
            c.last_exit = Some((code, reason.to_owned()));
            c.state = State::Waiting(
                "CrashLoopBackOff".into(),
                format!(
                    "back-off {}s restarting a failed container",
                    delay.as_secs()
                ),
            );
        });
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Stops a container as the kubelet does: the preStop pause, SIGTERM, then SIGKILL when
/// the grace period is over — or, once `hurry` is cancelled (the node going, now or while
/// it waits), no more pause and at most [`HURRIED_GRACE`].
async fn terminate(
    child: &mut tokio::process::Child,
    process: &Process,
    hurry: &CancellationToken,
) {
    tokio::select! {
        () = tokio::time::sleep(process.pre_stop) => {}
        () = hurry.cancelled() => {}
    }
    let grace = if hurry.is_cancelled() {
        HURRIED_GRACE
    } else {
        process.grace.saturating_sub(process.pre_stop)
    };
    if let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let mut deadline = tokio::time::Instant::now() + grace;
    let mut hurried = hurry.is_cancelled();
    let exited = loop {
        tokio::select! {
            status = child.wait() => break status.is_ok(),
            () = tokio::time::sleep_until(deadline) => break false,
            () = hurry.cancelled(), if !hurried => {
                hurried = true;
                deadline = deadline.min(tokio::time::Instant::now() + HURRIED_GRACE);
            }
        }
    };
    if !exited {
        tracing::warn!(container = %process.log.display(), "a container outlived its grace period; killing it");
        let _ = child.kill().await;
    }
}
