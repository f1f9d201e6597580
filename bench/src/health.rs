//! `fairlead bench health`: probe throughput against the machine's own ceiling, and the time
//! from a port failing to its EndpointSlice changing. Prints a table for BENCHMARKS.md.
//!
//! - TCP: probes per second on one core (a current-thread runtime), a fresh connection each, as
//!   the kubelet does, against a plain connect/close loop on the same core and server.
//! - HTTP: probes per second on one core against `wrk -H 'Connection: close'` on the same
//!   server (when `wrk` is installed).
//! - Withdrawal: an agent and the embedded API server in this process; a backend closes its
//!   port and the time until the slice drops the pod is measured, against the bound
//!   `failureThreshold × periodSeconds`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fairlead_health_api::HttpProbe;

use fairlead_health::probe;

/// What to measure.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Probes per throughput figure.
    pub probes: usize,
    /// Probes in flight at once.
    pub concurrency: usize,
    /// Withdrawal trials.
    pub trials: usize,
}

use crate::Row;

fn one_core<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
        .block_on(future)
}

/// How many loopback addresses a benchmark server listens on. Probes go to many pods in real
/// use; against one address, every connection the client closes first sits in TIME_WAIT on
/// the one destination, and a run measures the kernel's search for a free ephemeral port
/// instead of the client.
const DESTINATIONS: u8 = 32;

/// What a benchmark server does with a connection.
#[derive(Clone, Copy)]
enum Serve {
    /// Accept and close.
    Close,
    /// Answer HTTP/1.1 requests with 200 `ok`.
    Http,
}

/// A server on [`DESTINATIONS`] loopback addresses (the same port on each), on its own thread
/// and core, so the measuring core only runs clients. `block` keeps the servers of
/// consecutive runs apart.
fn server(block: u8, serve: Serve) -> Vec<SocketAddr> {
    let first = std::net::TcpListener::bind(format!("127.0.{block}.1:0")).expect("bind");
    let port = first.local_addr().expect("addr").port();
    let mut listeners = vec![first];
    for last in 2..=DESTINATIONS {
        listeners.push(
            std::net::TcpListener::bind(format!("127.0.{block}.{last}:{port}")).expect("bind"),
        );
    }
    let addrs = listeners
        .iter()
        .map(|l| l.local_addr().expect("addr"))
        .collect();
    std::thread::spawn(move || {
        one_core(async move {
            let accepting = listeners.into_iter().map(|listener| async move {
                listener.set_nonblocking(true).expect("nonblocking");
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                while let Ok((stream, _)) = listener.accept().await {
                    match serve {
                        Serve::Close => drop(stream),
                        Serve::Http => {
                            tokio::spawn(answer(stream));
                        }
                    }
                }
            });
            futures::future::join_all(accepting).await;
        });
    });
    addrs
}

async fn answer(stream: tokio::net::TcpStream) {
    let service = hyper::service::service_fn(|_req| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
            bytes::Bytes::from_static(b"ok"),
        )))
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
}

/// Runs `count` attempts spread over `addrs` in turn.
fn spread<F, Fut>(options: Options, addrs: &[SocketAddr], attempt: F) -> f64
where
    F: Fn(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let next = std::cell::Cell::new(0_usize);
    let (took, ok) = one_core(run_many(options.probes, options.concurrency, || {
        attempt(addrs[next.replace(next.get() + 1) % addrs.len()])
    }));
    rate(ok, took)
}

async fn run_many<F, Fut>(count: usize, concurrency: usize, make: F) -> (Duration, usize)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    use futures::StreamExt;
    let started = Instant::now();
    let ok = futures::stream::iter(0..count)
        .map(|_| make())
        .buffer_unordered(concurrency.max(1))
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await;
    (started.elapsed(), ok)
}

fn rate(count: usize, took: Duration) -> f64 {
    count as f64 / took.as_secs_f64()
}

fn wrk(addr: SocketAddr) -> Option<f64> {
    let output = std::process::Command::new("wrk")
        .args(["-t1", "-c16", "-d3s", "-H", "Connection: close"])
        .arg(format!("http://{addr}/healthz"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find(|l| l.starts_with("Requests/sec:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// Runs the throughput figures (blocking: each on its own current-thread runtime).
///
/// Interleaved with their ceilings, best of three each, every run on servers of its own
/// (see [`DESTINATIONS`]). The TCP ceiling does what the probe does on the wire (connect,
/// then close first with a FIN) and nothing else: no timeout, no error reporting. The HTTP
/// ceiling is `wrk -t1 -c16 -H 'Connection: close'` against the same kind of server.
pub fn throughput(options: Options) -> Vec<Row> {
    let timeout = Duration::from_secs(1);
    let (mut tcp_ceiling, mut tcp_rate) = (0.0_f64, 0.0_f64);
    let (mut http_ceiling, mut http_rate) = (None::<f64>, 0.0_f64);
    let spec = |port: u16| HttpProbe {
        target_port: i32::from(port),
        path: Some("/healthz".into()),
        scheme: "HTTP".into(),
        method: "GET".into(),
        ..HttpProbe::default()
    };
    for trial in 0..3_u8 {
        let block = 10 + trial * 4;
        let plain = spread(options, &server(block, Serve::Close), |addr| async move {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(mut stream) => {
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
                    true
                }
                Err(_) => false,
            }
        });
        tcp_ceiling = tcp_ceiling.max(plain);
        let probed = spread(
            options,
            &server(block + 1, Serve::Close),
            |addr| async move { probe::tcp::probe(addr, timeout).await.is_ok() },
        );
        tcp_rate = tcp_rate.max(probed);

        let addrs = server(block + 2, Serve::Http);
        let http = spec(addrs[0].port());
        let probed = spread(options, &addrs, |addr| {
            let http = http.clone();
            async move { probe::http::probe(addr, &http, timeout).await.is_ok() }
        });
        http_rate = http_rate.max(probed);
        if let Some(ceiling) = wrk(server(block + 3, Serve::Http)[0]) {
            http_ceiling = Some(http_ceiling.unwrap_or_default().max(ceiling));
        }
    }
    let http = match http_ceiling {
        Some(ceiling) => format!(
            "{http_rate:.0} ({:.0}% of wrk -H 'Connection: close' at {ceiling:.0}/s)",
            100.0 * http_rate / ceiling
        ),
        None => format!("{http_rate:.0} (wrk not installed: no ceiling measured)"),
    };
    vec![
        Row {
            metric: "TCP probes/s, one core (best of 3)".into(),
            value: format!(
                "{tcp_rate:.0} ({:.0}% of a plain connect/close loop at {tcp_ceiling:.0}/s)",
                100.0 * tcp_rate / tcp_ceiling
            ),
        },
        Row {
            metric: "HTTP probes/s, one core (best of 3)".into(),
            value: http,
        },
    ]
}

/// An in-process API server with the CRD installed, and a client.
async fn cluster() -> anyhow::Result<(fairlead_apiserver::ApiServer, kube::Client)> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config {
        allow_loopback_endpoints: true,
        ..fairlead_apiserver::Config::default()
    })
    .await?;
    let client = server.client().await?;
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&Default::default(), &fairlead_health_api::crd())
        .await?;
    Ok((server, client))
}

/// Measures the time from a port failing to its slice dropping the pod.
pub async fn withdrawal(options: Options) -> anyhow::Result<Row> {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::json;

    let (_server, client) = cluster().await?;
    let metrics =
        fairlead_health::metrics::HealthMetrics::new(&fairlead_kit::Metrics::new("bench")?)?;
    let stop = tokio_util::sync::CancellationToken::new();
    let settings = fairlead_health::agent::Settings {
        node: "bench".into(),
        concurrency: 64,
        verbose_status: false,
    };
    tokio::spawn(fairlead_health::agent::run(
        client.clone(),
        settings,
        metrics,
        stop.clone(),
        || {},
    ));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let swhs: Api<fairlead_health_api::ServiceWithHealthchecks> =
        Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let ip = "127.0.0.20";
    let mut samples = Vec::new();
    for trial in 0..options.trials {
        let listener = std::net::TcpListener::bind((ip, 0)).context("binding a backend")?;
        let port = listener.local_addr()?.port();
        let name = format!("w{trial}");
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": name}},
            "spec": {"nodeName": "bench", "containers": [{"name": "c", "image": "i"}]}}))?;
        pods.create(&PostParams::default(), &pod).await?;
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running",
            "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]}}))).await?;
        let swh = serde_json::from_value(
            json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
            "metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"name": "p", "port": 80, "targetPort": port}],
            "healthcheck": {"initialDelaySeconds": 0, "periodSeconds": 1, "probes": [{"mode": "TCP", "tcp": {"targetPort": port}, "failureThreshold": 1}]}}}),
        )?;
        swhs.create(&PostParams::default(), &swh).await?;
        let slice = format!("{name}-bench-p-ipv4-0");
        let published = |slices: Api<EndpointSlice>, slice: String| async move {
            slices
                .get_opt(&slice)
                .await
                .ok()
                .flatten()
                .is_some_and(|s| !s.endpoints.unwrap_or_default().is_empty())
        };
        while !published(slices.clone(), slice.clone()).await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let failed_at = Instant::now();
        drop(listener);
        while published(slices.clone(), slice.clone()).await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        samples.push(failed_at.elapsed());
    }
    stop.cancel();
    samples.sort();
    let max = samples.last().copied().unwrap_or_default();
    let median = samples.get(samples.len() / 2).copied().unwrap_or_default();
    Ok(Row {
        metric: format!(
            "port failing -> slice withdrawn (failureThreshold 1, periodSeconds 1, {} trials)",
            samples.len()
        ),
        value: format!(
            "median {:.0} ms, max {:.0} ms (bound: 1000 ms + 50 ms)",
            median.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0
        ),
    })
}

/// The resident memory of a `fairlead health agent` process serving `targets` targets (pods
/// of its node, one TCP probe each, spread over ten resources), after its first probe round
/// and status writes.
pub async fn agent_rss(targets: usize) -> anyhow::Result<Row> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::json;

    let (server, client) = cluster().await?;
    let swhs: Api<fairlead_health_api::ServiceWithHealthchecks> =
        Api::namespaced(client.clone(), "default");
    for s in 0..10 {
        let swh = serde_json::from_value(
            json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
            "metadata": {"name": format!("s{s}")}, "spec": {"selector": {"app": format!("s{s}")}, "ports": [{"name": "p", "port": 80, "targetPort": 9}],
            "healthcheck": {"initialDelaySeconds": 0, "periodSeconds": 10, "probes": [{"mode": "TCP", "tcp": {"targetPort": 9}}]}}}),
        )?;
        swhs.create(&PostParams::default(), &swh).await?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    {
        use futures::StreamExt;
        futures::stream::iter(0..targets)
            .map(|i| {
                let pods = pods.clone();
                async move {
                    let name = format!("p{i}");
                    let ip = format!("127.3.{}.{}", i / 250, i % 250 + 1);
                    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": format!("s{}", i % 10)}},
                        "spec": {"nodeName": "bench", "containers": [{"name": "c", "image": "i"}]}}))?;
                    pods.create(&PostParams::default(), &pod).await?;
                    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running",
                        "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]}}))).await?;
                    Ok::<_, anyhow::Error>(())
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
    }
    let dir = tempfile_dir()?;
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let mut agent = std::process::Command::new(std::env::current_exe()?)
        .args([
            "--log-level",
            "error",
            "health",
            "agent",
            "--node-name",
            "bench",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // One probe period (10 s) plus its writes.
    tokio::time::sleep(Duration::from_secs(14)).await;
    let rss = crate::resident(agent.id());
    let _ = agent.kill();
    let _ = agent.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Row {
        metric: format!("agent RSS at {targets} targets"),
        value: rss.map_or_else(
            || "n/a".into(),
            |(all, anon)| {
                format!(
                    "{:.1} MiB ({:.1} MiB anonymous)",
                    all as f64 / 1048576.0,
                    anon as f64 / 1048576.0
                )
            },
        ),
    })
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("fairlead-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
