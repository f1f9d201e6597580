//! `fairlead bench graph`: the relationship graph of a synthetic world of about 10,000
//! objects (the edge benchmark's: one Gateway, HTTPRoutes, Services with EndpointSlices, with
//! the statuses the translator decides) — time to build it and to render its JSON, a user's
//! filtered view, the memory it holds per object — and, against the embedded API server, the
//! time from a change to the diff at a watching client, beside the time the same change takes
//! to reach a plain Kubernetes watch (the floor any consumer of the API has).

use std::time::{Duration, Instant};

use fairlead_edge_model::input::Input;
use fairlead_graph::filter::{Filter, view};
use fairlead_graph::world::{World, decided_statuses, from_yaml};
use fairlead_graph::{Graph, Memo, render};

/// The world of `routes` HTTPRoutes and `routes / 2` Services, with decided statuses.
pub fn world(routes: usize) -> (Input, World) {
    let yaml = crate::edge::yaml(routes, 0, (routes / 2).max(1));
    let (input, mut world) = from_yaml(&yaml).expect("the synthetic world reads");
    decided_statuses(&input, &mut world);
    (input, world)
}

/// How many objects `input` holds.
pub fn objects(input: &Input) -> usize {
    input.gateway_classes.len()
        + input.gateways.len()
        + input.http_routes.len()
        + input.services.len()
        + input.endpoint_slices.len()
}

/// Median and maximum of `runs` timings of `once`.
fn timed(runs: usize, mut once: impl FnMut()) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            once();
            started.elapsed()
        })
        .collect();
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

/// The figures of the pure parts.
pub struct Figures {
    /// Objects in the world.
    pub objects: usize,
    /// Nodes and edges in the graph.
    pub elements: usize,
    /// Building the graph.
    pub build: (Duration, Duration),
    /// Building it again after an EndpointSlice changed, with the last build's memo.
    pub rebuild: (Duration, Duration),
    /// Every element's digest made, as publishing a first version does.
    pub publish: (Duration, Duration),
    /// The API's JSON document of the whole graph, written from its elements.
    pub json: (Duration, Duration),
    /// A user's view (a namespace they may see, everything else filtered out) and its JSON.
    pub view: (Duration, Duration),
    /// Bytes the graph's state holds (allocated and not freed while it is kept): the graph,
    /// the builder's memo and the elements' kept digests.
    pub bytes: u64,
}

/// Measures the pure parts at `routes` HTTPRoutes; `held` reads the bytes the calling
/// thread holds (jemalloc's allocated minus deallocated).
pub fn figures(routes: usize, runs: usize, held: &dyn Fn() -> u64) -> Figures {
    let (input, world) = world(routes);
    let now = 1_800_000_000;
    let build = timed(runs, || {
        std::hint::black_box(fairlead_graph::build(&input, &world, now));
    });
    let before = held();
    let mut memo = Memo::default();
    let graph = fairlead_graph::build_with(&input, &world, now, &mut memo);
    // Every element's digest is kept in it once a version has been made.
    std::hint::black_box(render::document(&graph));
    let bytes = held().saturating_sub(before);
    // One EndpointSlice's endpoint turns not ready, and back, each a build with the memo.
    let mut changed = input.clone();
    if let Some(endpoint) = changed
        .endpoint_slices
        .first_mut()
        .and_then(|s| std::sync::Arc::make_mut(s).endpoints.as_mut())
        .and_then(|e| e.first_mut())
    {
        endpoint.conditions = Some(k8s_openapi::api::discovery::v1::EndpointConditions {
            ready: Some(false),
            ..Default::default()
        });
    }
    let mut flip = false;
    let rebuild = timed(runs, || {
        flip = !flip;
        let next = if flip { &changed } else { &input };
        std::hint::black_box(fairlead_graph::build_with(next, &world, now, &mut memo));
    });
    // What publishing a version does once (every element's digest made, none kept yet), then
    // what a request for the whole graph does once per version: write its JSON.
    let mut unrendered: Vec<Graph> = (0..runs.max(1)).map(|_| copy(&graph)).collect();
    let publish = timed(runs, || {
        let fresh = unrendered.pop().unwrap_or_else(|| copy(&graph));
        std::hint::black_box(render::version(&fresh));
    });
    let json = timed(runs, || {
        std::hint::black_box(render::document(&graph));
    });
    let filter = Filter {
        namespace: Some("bench".into()),
        ..Filter::default()
    };
    let view_time = timed(runs, || {
        let seen: Graph = view(&graph, &|n| n.namespace.is_some(), &filter).expect("no root");
        std::hint::black_box(render::document(&seen));
    });
    Figures {
        objects: objects(&input),
        elements: graph.len(),
        build,
        rebuild,
        publish,
        json,
        view: view_time,
        bytes,
    }
}

/// `graph` with every element copied (so none is rendered yet).
fn copy(graph: &Graph) -> Graph {
    Graph {
        nodes: graph
            .nodes
            .iter()
            .map(|(id, n)| (id.clone(), std::sync::Arc::new((**n).clone())))
            .collect(),
        edges: graph
            .edges
            .iter()
            .map(|(id, e)| (id.clone(), std::sync::Arc::new((**e).clone())))
            .collect(),
    }
}

/// Reads Server-Sent Events from a response, up to the next event of `kind`.
async fn next_event(
    response: &mut reqwest::Response,
    buffer: &mut String,
    kind: &str,
) -> anyhow::Result<()> {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.lines().any(|l| {
                l.trim() == format!("event: {kind}") || l.trim() == format!("event:{kind}")
            }) {
                return Ok(());
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .map_err(|_| anyhow::anyhow!("no {kind} event within 30 s"))??
            .ok_or_else(|| anyhow::anyhow!("the watch ended"))?;
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Latencies from `changes` changes (an EndpointSlice's endpoint turning not ready, then
/// ready again) to the diff at a client of the graph's watch, and to the event at a plain
/// watch of EndpointSlices, in a world of `routes` HTTPRoutes served by the embedded API
/// server.
pub async fn change_latency(
    routes: usize,
    changes: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>, usize)> {
    use futures::{StreamExt as _, TryStreamExt as _};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Api, Patch, PatchParams};

    let (server, client) = crate::edge_cluster(fairlead_apiserver::Config::default()).await?;
    let namespace =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    fairlead_apiserver::manifests::apply_value(&client, server.registry(), &namespace).await?;
    let yaml = crate::edge::yaml(routes, 0, (routes / 2).max(1));
    let documents: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .map(serde_yaml_ng::from_str)
        .collect::<Result<_, _>>()?;
    let objects = documents.len();
    futures::stream::iter(documents)
        .map(|d| {
            let (client, registry) = (client.clone(), server.registry());
            async move { fairlead_apiserver::manifests::apply_value(&client, registry, &d).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let index = fairlead_edge_index::Index::start(client.clone(), stop.clone());
    let registry = fairlead_kit::metrics::Metrics::new("bench-graph")?;
    let (addr, feed) = fairlead_graph_service::start(
        client.clone(),
        index,
        fairlead_graph_service::Settings {
            addr: "127.0.0.1:0".parse()?,
            prometheus_url: None,
            anonymous: None,
            reviews: false,
        },
        fairlead_graph_service::metrics::GraphMetrics::new(&registry)?,
        stop.clone(),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while feed.current().graph.nodes.len() < objects {
        anyhow::ensure!(Instant::now() < deadline, "the graph never held the world");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut sse = reqwest::Client::new()
        .get(format!("http://{addr}/api/v1/graph/watch"))
        .header("x-remote-user", "bench")
        .send()
        .await?
        .error_for_status()?;
    let mut buffer = String::new();
    next_event(&mut sse, &mut buffer, "graph").await?;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "bench");
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let watched = kube::runtime::watcher(
        slices.clone(),
        kube::runtime::watcher::Config::default().fields("metadata.name=s0"),
    );
    tokio::spawn(async move {
        let mut watched = std::pin::pin!(watched);
        let mut listed_tx = Some(listed_tx);
        // An error is the watcher's to recover from (it relists); only its end ends this.
        while let Some(event) = watched.next().await {
            match event {
                Ok(kube::runtime::watcher::Event::Apply(_)) => {
                    let _ = seen_tx.send(Instant::now());
                }
                Ok(kube::runtime::watcher::Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    // A change made before the watch has listed would arrive in its list, never as an event.
    tokio::time::timeout(Duration::from_secs(30), listed).await??;
    let (mut graph, mut watch) = (Vec::new(), Vec::new());
    for i in 0..changes {
        let ready = i % 2 == 1;
        let patch = serde_json::json!({"endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": ready}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": true}},
            {"addresses": ["10.0.0.3"], "conditions": {"ready": true}},
        ]});
        while seen.try_recv().is_ok() {}
        let started = Instant::now();
        slices
            .patch("s0", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        next_event(&mut sse, &mut buffer, "diff").await?;
        graph.push(started.elapsed());
        let at = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the watch ended"))?;
        watch.push(at.saturating_duration_since(started));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    graph.sort();
    watch.sort();
    Ok((graph, watch, objects))
}
