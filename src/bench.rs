//! `fairlead bench …`: benchmarks that print a table (figures for BENCHMARKS.md).

use clap::{Args, Subcommand};

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The embedded API server: create and list throughput, watch fan-out, memory per object.
    Apiserver(ApiserverArgs),
    /// The health module: probe throughput against the machine's ceiling, withdrawal time.
    Health(HealthArgs),
    /// The edge control plane: translation time and memory, push latency.
    Edge(EdgeArgs),
    /// The gateway controller: what one instance's change costs among many (API requests and
    /// writes, reconciles, time to its status).
    Controller(ControllerArgs),
    /// The relationship graph: build and JSON time, memory per object, change-to-watch latency.
    Graph(GraphArgs),
}

/// Options of `fairlead bench graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// HTTPRoutes of the synthetic world (with half as many Services, each with an
    /// EndpointSlice: 5,000 make about 10,000 objects).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    routes: u64,
    /// Timings per figure (the median and maximum are reported).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Changes for the change-to-watch latency.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    changes: u64,
}

/// Options of `fairlead bench controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// ClusterALBInstances in the world, each naming a Gateway of its own.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..1000))]
    instances: u64,
    /// Changes of one instance, each measured once the controller is quiet again.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    changes: u64,
}

/// The rows of `fairlead bench controller`.
async fn controller_rows(args: &ControllerArgs) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    let figures = fairlead_bench::controller::per_change(
        usize::try_from(args.instances)?,
        usize::try_from(args.changes)?,
    )
    .await?;
    let n = figures.instances;
    let (settled, all) = &figures.settle;
    let mut rows = vec![fairlead_bench::Row {
        metric: format!("{n} instances created -> every status written"),
        value: format!(
            "{:.2} s; {} requests, {} writes, {} reconciles of an instance's Gateway",
            settled.as_secs_f64(),
            all.requests,
            all.writes,
            all.reconciles
        ),
    }];
    let median = |mut v: Vec<usize>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let range = |f: &dyn Fn(&fairlead_bench::controller::Cost) -> usize| {
        let values: Vec<usize> = figures.changes.iter().map(|(_, c)| f(c)).collect();
        let (min, max) = (
            values.iter().min().copied().unwrap_or_default(),
            values.iter().max().copied().unwrap_or_default(),
        );
        format!("median {}, {min}–{max}", median(values))
    };
    let changes = figures.changes.len();
    rows.push(fairlead_bench::Row {
        metric: format!("one of {n} instances changed ({changes} changes): controller's requests"),
        value: range(&|c| c.requests),
    });
    rows.push(fairlead_bench::Row {
        metric: "… of which writes".into(),
        value: range(&|c| c.writes),
    });
    rows.push(fairlead_bench::Row {
        metric: "… naming another instance's objects".into(),
        value: range(&|c| c.others),
    });
    rows.push(fairlead_bench::Row {
        metric: "… reconciles of an instance's Gateway".into(),
        value: range(&|c| usize::try_from(c.reconciles).unwrap_or(usize::MAX)),
    });
    let mut took: Vec<std::time::Duration> = figures.changes.iter().map(|(d, _)| *d).collect();
    took.sort_unstable();
    let ms = |q| fairlead_bench::percentile(&took, q).as_secs_f64() * 1000.0;
    rows.push(fairlead_bench::Row {
        metric: "change -> the instance's status observes it".into(),
        value: format!("p50 {:.1} ms, max {:.1} ms", ms(0.5), ms(1.0)),
    });
    Ok(rows)
}

/// Options of `fairlead bench edge`.
#[derive(Debug, Args)]
pub struct EdgeArgs {
    /// Translations per figure (the median and maximum are reported).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Route changes for the push latency.
    #[arg(long, default_value_t = 200)]
    changes: usize,
    /// Route changes per size for the Envoy figure.
    #[arg(long, default_value_t = 50)]
    envoy_changes: usize,
    /// Numbers of routes of the Envoy figure (each also with statistics per route rule
    /// when 1,000).
    #[arg(long, value_delimiter = ',', default_value = "10,1000")]
    envoy_routes: Vec<usize>,
    /// Seconds of the control plane's CPU figure (one route change a second).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..))]
    cpu_seconds: u64,
    /// Routes of the control plane's CPU figure.
    #[arg(long, default_value_t = 1_000)]
    cpu_routes: usize,
    /// Rounds per side of the GeoIP figure (interleaved, after a warm-up round each).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    geoip_rounds: u64,
    /// Seconds of load per round of the GeoIP figure.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    geoip_seconds: u64,
    /// Rounds per side of the load generators' figure (interleaved, after a warm-up each).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    loadgen_rounds: u64,
    /// Seconds of load per round of the load generators' figure.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    loadgen_seconds: u64,
    /// The fixed rate of the route-scale figure, requests/s.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(1..))]
    scale_rate: u32,
    /// The most HTTPRoutes of the route-scale figure (of 10, 100 and 1,000).
    #[arg(long, default_value_t = 1_000)]
    scale_largest: usize,
    /// Rounds per side and size of the route-scale figure (interleaved, after a warm-up each).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    scale_rounds: u64,
    /// Seconds of load per round of the route-scale figure.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    scale_seconds: u64,
    /// The `limit-rps` of the rate-limit figure, requests/s.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    ratelimit_limit: u32,
    /// Seconds of load per run of the rate-limit figure.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    ratelimit_seconds: u64,
    /// Rounds per world of the WAF figure (interleaved, after a warm-up each).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    waf_rounds: u64,
    /// Seconds of load per round and load of the WAF figure.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    waf_seconds: u64,
    /// Which figures to measure (all when not given).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<EdgePart>,
}

/// The figures of `fairlead bench edge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EdgePart {
    /// Translation time and allocation per shape.
    Translation,
    /// Route change to the new RouteConfiguration at a client.
    Push,
    /// Resident memory of `fairlead edge xds` at 1,000 routes.
    Rss,
    /// Route change (API write) to the first request a real Envoy serves under it, at 10 and
    /// 1,000 routes (`--envoy-routes`), beside Envoy's file-based RDS.
    Envoy,
    /// CPU of `fairlead edge xds` while one of 1,000 routes (`--cpu-routes`) changes every
    /// second.
    Cpu,
    /// Requests/s and latency of a real Envoy with an instance's GeoIP filter, beside the
    /// same listeners without it (wrk, interleaved rounds).
    Geoip,
    /// Requests/s and latency through a real Envoy: k6 beside wrk on fairlead's
    /// configuration, and wrk on it beside a minimal static one (interleaved rounds).
    Loadgen,
    /// Requests/s, p50/p99/p99.9 and Envoy's CPU and memory at a fixed rate through a real
    /// Envoy carrying 10, 100 and 1,000 HTTPRoutes (Envoy Gateway's benchmark shape), beside
    /// the same configuration as static resources (interleaved rounds).
    Scale,
    /// What a `limit-rps` route passes and refuses at rates below, at and above its limit,
    /// beside nginx configured as ingress-nginx renders the annotation.
    Ratelimit,
    /// Requests/s and latency of a route with the WAF (OWASP CRS, paranoia 1) beside the
    /// same route without it, and of the listener's unannotated route in both worlds (a
    /// build with the cargo feature `waf`).
    Waf,
}

/// Bytes this thread has allocated and not freed (jemalloc's counters).
fn held() -> u64 {
    let freed = tikv_jemalloc_ctl::thread::deallocatedp::read()
        .map(|p| p.get())
        .unwrap_or_default();
    allocated().saturating_sub(freed)
}

/// The rows of `fairlead bench graph`.
async fn graph_rows(args: &GraphArgs) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    let routes = usize::try_from(args.routes)?;
    let runs = usize::try_from(args.runs)?;
    let figures =
        tokio::task::spawn_blocking(move || fairlead_bench::graph::figures(routes, runs, &held))
            .await?;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let timing = |(median, max): (std::time::Duration, std::time::Duration)| {
        format!("median {:.2} ms, max {:.2} ms", ms(median), ms(max))
    };
    let world = format!(
        "{} objects, {} nodes and edges",
        figures.objects, figures.elements
    );
    let mut rows = vec![
        fairlead_bench::Row {
            metric: format!("graph build ({world})"),
            value: timing(figures.build),
        },
        fairlead_bench::Row {
            metric: "graph rebuilt after an EndpointSlice changed (with the memo)".into(),
            value: timing(figures.rebuild),
        },
        fairlead_bench::Row {
            metric: "every element's digest made (a first version's publishing)".into(),
            value: timing(figures.publish),
        },
        fairlead_bench::Row {
            metric: format!("graph JSON, whole, written from its elements ({world})"),
            value: timing(figures.json),
        },
        fairlead_bench::Row {
            metric: "a user's view and its JSON (one namespace)".into(),
            value: timing(figures.view),
        },
        fairlead_bench::Row {
            metric: "graph state held per object (graph, memo, digests)".into(),
            value: format!(
                "{:.0} bytes ({:.1} MiB for {} objects)",
                figures.bytes as f64 / figures.objects as f64,
                figures.bytes as f64 / 1_048_576.0,
                figures.objects
            ),
        },
    ];
    let changes = usize::try_from(args.changes)?;
    let (graph, watch, objects) = fairlead_bench::graph::change_latency(routes, changes).await?;
    let p = |sorted: &[std::time::Duration], q| ms(fairlead_bench::percentile(sorted, q));
    rows.push(fairlead_bench::Row {
        metric: format!("change -> diff at a graph watch ({objects} objects, {changes} changes)"),
        value: format!(
            "p50 {:.2} ms, p99 {:.2} ms",
            p(&graph, 0.5),
            p(&graph, 0.99)
        ),
    });
    rows.push(fairlead_bench::Row {
        metric: "same change -> event at a plain Kubernetes watch (the floor)".into(),
        value: format!(
            "p50 {:.2} ms, p99 {:.2} ms",
            p(&watch, 0.5),
            p(&watch, 0.99)
        ),
    });
    Ok(rows)
}

/// Bytes allocated by this thread so far (jemalloc's counter).
fn allocated() -> u64 {
    tikv_jemalloc_ctl::thread::allocatedp::read()
        .map(|p| p.get())
        .unwrap_or_default()
}

fn edge_rows(runs: usize) -> Vec<fairlead_bench::Row> {
    use fairlead_bench::edge as bench;
    let mut rows = Vec::new();
    let mib = |b: u64| b as f64 / 1048576.0;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let shapes: Vec<(String, usize, usize, usize)> = [10, 100, 1_000, 10_000]
        .into_iter()
        .map(|n| {
            (
                format!("{n} HTTPRoutes, {} Services", (n / 2).max(1)),
                n,
                0,
                (n / 2).max(1),
            )
        })
        .chain(std::iter::once((
            "Envoy Gateway's large: 500 HTTPRoutes, 250 GRPCRoutes, 500 Services".to_owned(),
            500,
            250,
            500,
        )))
        .collect();
    let row =
        |metric: String, (median, max, bytes): (std::time::Duration, std::time::Duration, u64)| {
            fairlead_bench::Row {
                metric,
                value: format!(
                    "median {:.2} ms, max {:.2} ms, {:.1} MiB allocated",
                    ms(median),
                    ms(max),
                    mib(bytes)
                ),
            }
        };
    for (label, http, grpc, services) in shapes {
        let input = bench::input(http, grpc, services);
        rows.push(row(
            format!("translation of {label}"),
            bench::translation(&input, runs, &allocated),
        ));
        if http >= 1_000 || grpc > 0 {
            rows.push(row(
                format!("translation after one HTTPRoute changed, {label}"),
                bench::retranslation(&input, runs, &allocated),
            ));
        }
    }
    rows
}

/// The resident memory of a `fairlead edge xds` process serving `routes` HTTPRoutes (the
/// synthetic input of the translation figures, created in an embedded API server), once it
/// is ready, a proxy holds its configuration, and 15 s have passed (statuses written, freed
/// memory returned).
async fn edge_rss(routes: usize) -> anyhow::Result<fairlead_bench::Row> {
    let (server, client) =
        fairlead_bench::edge_cluster(fairlead_apiserver::Config::default()).await?;
    let dir = std::env::temp_dir().join(format!("fairlead-bench-edge-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("objects.yaml"),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: bench}}\n---\n{}",
            fairlead_bench::edge::yaml(routes, 0, (routes / 2).max(1))
        ),
    )?;
    fairlead_apiserver::manifests::apply_dir(&client, server.registry(), &dir).await?;
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let xds = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let admin = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .args(fairlead_bench::xds_args(xds.port(), admin.port()))
        .env("KUBECONFIG", &kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let measured = async {
        let holding = fairlead_edge_xds::client::fetch_routes(xds, "bench/gw", "http-80").await?;
        // The statuses of every route are written after the first translation; let them land
        // and the allocator return what the first translations freed (its decay is 10 s).
        tokio::time::sleep(std::time::Duration::from_secs(15)).await;
        anyhow::Ok((holding, fairlead_bench::resident(child.id())))
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let (virtual_hosts, rss) = measured?;
    Ok(fairlead_bench::Row {
        metric: format!(
            "`fairlead edge xds` RSS at {routes} HTTPRoutes ({virtual_hosts} virtual hosts served)"
        ),
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

/// Options of `fairlead bench health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Probes per throughput figure.
    #[arg(long, default_value_t = 20_000)]
    probes: usize,
    /// Probes in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Withdrawal trials.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Which figures to measure (all when not given).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<HealthPart>,
}

/// The figures of `fairlead bench health`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum HealthPart {
    /// TCP and HTTP probes per second against the machine's ceiling.
    Throughput,
    /// Time from a port failing to its slice dropping the pod.
    Withdrawal,
    /// Agent RSS at 1k and 10k targets.
    Rss,
}

/// Options of `fairlead bench apiserver`.
#[derive(Debug, Args)]
pub struct ApiserverArgs {
    /// Objects to create (and hold for the memory figure).
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Concurrent creating clients.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Watchers for the fan-out latency.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Fan-out rounds.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
}

/// The median of `values` (not empty).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// A side's requests/s (median and the rounds' spread) and median p50 and p99.
fn describe(side: &fairlead_bench::geoip::Side) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let lowest = side.rates.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = side.rates.iter().copied().fold(0.0, f64::max);
    let p50: Vec<f64> = side.latency.iter().map(|(p, _)| ms(*p)).collect();
    let p99: Vec<f64> = side.latency.iter().map(|(_, p)| ms(*p)).collect();
    format!(
        "{:.0} req/s (rounds {lowest:.0}–{highest:.0}), p50 {:.3} ms, p99 {:.3} ms",
        median(&side.rates),
        median(&p50),
        median(&p99)
    )
}

/// The rows of the GeoIP figure: each side's requests/s (median and spread) and latency,
/// and the ratio of the medians.
async fn geoip_rows(rounds: u64, seconds: u64) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    let rounds = usize::try_from(rounds)?;
    let shapes =
        fairlead_bench::geoip::filter_cost(&std::env::current_exe()?, rounds, seconds).await?;
    let mut rows = Vec::new();
    for figures in shapes {
        let shape = match figures.shape {
            fairlead_bench::geoip::Shape::Redirect => "a redirect the proxy answers",
            fairlead_bench::geoip::Shape::Proxied => "proxied to a backend",
        };
        let ratio = median(&figures.with.rates) / median(&figures.without.rates);
        rows.extend([
            fairlead_bench::Row {
                metric: format!(
                    "{shape}: Envoy with the GeoIP filter (City: country, city, region), {rounds} × {seconds} s"
                ),
                value: describe(&figures.with),
            },
            fairlead_bench::Row {
                metric: format!("{shape}: the same listeners without it, interleaved"),
                value: describe(&figures.without),
            },
            fairlead_bench::Row {
                metric: format!("{shape}: with / without (goal ≥ 0.95)"),
                value: format!("{ratio:.3}"),
            },
        ]);
    }
    Ok(rows)
}

/// The rows of the WAF figure: each load in both worlds, and the ratios against the goals.
async fn waf_rows(rounds: u64, seconds: u64) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    use fairlead_bench::waf::Load;
    let rounds = usize::try_from(rounds)?;
    let loads = fairlead_bench::waf::cost(&std::env::current_exe()?, rounds, seconds).await?;
    let mut rows = Vec::new();
    for figures in loads {
        let (load, goal) = match figures.load {
            Load::Get => ("a GET on the route", "goal ≥ 0.5"),
            Load::Post => ("a 16 KiB form POST on the route", "no goal"),
            Load::Neighbour => ("a GET on the listener's unannotated route", "goal ≥ 0.98"),
        };
        let ratio = median(&figures.with.rates) / median(&figures.without.rates);
        rows.extend([
            fairlead_bench::Row {
                metric: format!(
                    "{load}: with the WAF on the route (OWASP CRS, paranoia 1), {rounds} × {seconds} s"
                ),
                value: describe(&figures.with),
            },
            fairlead_bench::Row {
                metric: format!("{load}: no WAF anywhere, interleaved"),
                value: describe(&figures.without),
            },
            fairlead_bench::Row {
                metric: format!("{load}: with / without ({goal})"),
                value: format!("{ratio:.3}"),
            },
        ]);
        if !figures.nginx_with.rates.is_empty() {
            let peer = median(&figures.nginx_with.rates) / median(&figures.nginx_without.rates);
            rows.extend([
                fairlead_bench::Row {
                    metric: format!(
                        "{load}: nginx with ModSecurity (ingress-nginx's engine, the same rules), interleaved"
                    ),
                    value: describe(&figures.nginx_with),
                },
                fairlead_bench::Row {
                    metric: format!("{load}: the same nginx without it"),
                    value: describe(&figures.nginx_without),
                },
                fairlead_bench::Row {
                    metric: format!("{load}: nginx with / without ModSecurity"),
                    value: format!("{peer:.3}"),
                },
            ]);
        }
    }
    Ok(rows)
}

/// The rows of the load generators' figure: each side, and the ratios k6 / wrk (on
/// fairlead's Envoy) and fairlead / static (with wrk).
async fn loadgen_rows(rounds: u64, seconds: u64) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    use fairlead_bench::loadgen::Load;
    let rounds = usize::try_from(rounds)?;
    let sides =
        fairlead_bench::loadgen::generators(&std::env::current_exe()?, rounds, seconds).await?;
    let rate = |load: Load| {
        sides
            .iter()
            .find(|(l, _)| *l == load)
            .map_or(f64::NAN, |(_, side)| median(&side.rates))
    };
    let mut rows: Vec<fairlead_bench::Row> = sides
        .iter()
        .map(|(load, side)| fairlead_bench::Row {
            metric: match load {
                Load::K6 => {
                    format!("k6 (32 VUs) -> fairlead's Envoy -> backend, {rounds} × {seconds} s")
                }
                Load::Wrk => "wrk (-c32) -> fairlead's Envoy -> backend, interleaved".to_owned(),
                Load::WrkEquivalent => {
                    "wrk (-c32) -> fairlead's configuration as static resources -> backend, interleaved"
                        .to_owned()
                }
                Load::WrkEquivalentUnlogged => {
                    "wrk (-c32) -> the same static resources without the access log -> backend, interleaved"
                        .to_owned()
                }
                Load::WrkEquivalentUntraced => {
                    "wrk (-c32) -> the same static resources without the access log and tracing -> backend, interleaved"
                        .to_owned()
                }
                Load::WrkStatic => {
                    "wrk (-c32) -> a static minimal Envoy -> backend, interleaved".to_owned()
                }
            },
            value: describe(side),
        })
        .collect();
    rows.extend([
        fairlead_bench::Row {
            metric: "k6 / wrk on fairlead's Envoy".into(),
            value: format!("{:.3}", rate(Load::K6) / rate(Load::Wrk)),
        },
        fairlead_bench::Row {
            metric: "fairlead's Envoy / the same configuration static (wrk; goal ≥ 0.98)".into(),
            value: format!("{:.3}", rate(Load::Wrk) / rate(Load::WrkEquivalent)),
        },
        fairlead_bench::Row {
            metric: "the static resources with / without the access log (wrk)".into(),
            value: format!(
                "{:.3}",
                rate(Load::WrkEquivalent) / rate(Load::WrkEquivalentUnlogged)
            ),
        },
        fairlead_bench::Row {
            metric: "the static resources without the access log, with / without tracing (wrk)"
                .into(),
            value: format!(
                "{:.3}",
                rate(Load::WrkEquivalentUnlogged) / rate(Load::WrkEquivalentUntraced)
            ),
        },
        fairlead_bench::Row {
            metric: "fairlead's Envoy / a minimal static one (wrk)".into(),
            value: format!("{:.3}", rate(Load::Wrk) / rate(Load::WrkStatic)),
        },
    ]);
    Ok(rows)
}

/// The rows of the rate-limit figure: each side at half, twice and ten times the limit.
async fn ratelimit_rows(limit: u32, seconds: u64) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    use fairlead_bench::ratelimit::Limiter;
    let offered = [limit / 2, limit * 2, limit * 10];
    let runs =
        fairlead_bench::ratelimit::limits(&std::env::current_exe()?, limit, &offered, seconds)
            .await?;
    Ok(runs
        .iter()
        .map(|run| fairlead_bench::Row {
            metric: format!(
                "limit-rps {limit} (burst {}), {} r/s offered for {seconds} s: {}",
                limit * 5,
                run.offered,
                match run.limiter {
                    Limiter::Fairlead => "fairlead's Envoy",
                    Limiter::Nginx => "nginx limit_req (ingress-nginx's rendering)",
                }
            ),
            value: if run.refused == 0 {
                format!("{} passed, none refused, {} other", run.passed, run.other)
            } else {
                format!(
                    "{} passed, {} refused (429), {} other; held {:.1} r/s beyond the burst",
                    run.passed,
                    run.refused,
                    run.other,
                    run.held(limit)
                )
            },
        })
        .collect())
}

/// The rows of the route-scale figure: at each size, both sides' medians over the rounds.
async fn scale_rows(args: &EdgeArgs) -> anyhow::Result<Vec<fairlead_bench::Row>> {
    use fairlead_bench::scale::Round;
    let (rate, rounds, seconds) = (
        args.scale_rate,
        usize::try_from(args.scale_rounds)?,
        args.scale_seconds,
    );
    let sizes = fairlead_bench::scale::fixed_rate(
        &std::env::current_exe()?,
        args.scale_largest,
        rate,
        rounds,
        seconds,
    )
    .await?;
    let describe = |side: &[Round]| {
        let of = |f: &dyn Fn(&Round) -> f64| median(&side.iter().map(f).collect::<Vec<_>>());
        let ms = |i: usize| move |r: &Round| r.latency[i].as_secs_f64() * 1000.0;
        let envoy = |i: usize| move |r: &Round| r.envoy_latency.map_or(f64::NAN, |l| l[i]);
        format!(
            "{:.0} req/s ({:.0}/s dropped), p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms (Envoy's own: {:.2} / {:.2} / {:.2} ms); Envoy {:.0}% of a core, {:.0} MiB ({:.0} anonymous)",
            of(&|r| r.rate),
            of(&|r| r.dropped),
            of(&ms(0)),
            of(&ms(1)),
            of(&ms(2)),
            of(&envoy(0)),
            of(&envoy(1)),
            of(&envoy(2)),
            of(&|r| r.cpu * 100.0),
            of(&|r| r.rss.0 as f64 / 1_048_576.0),
            of(&|r| r.rss.1 as f64 / 1_048_576.0),
        )
    };
    let mut rows = Vec::new();
    for figures in sizes {
        let routes = figures.routes;
        rows.extend([
            fairlead_bench::Row {
                metric: format!(
                    "{routes} HTTPRoutes, k6 at {rate} req/s -> fairlead's Envoy (xDS) -> backend, {rounds} × {seconds} s"
                ),
                value: describe(&figures.xds),
            },
            fairlead_bench::Row {
                metric: format!(
                    "{routes} HTTPRoutes: the same configuration as static resources, interleaved"
                ),
                value: describe(&figures.equivalent),
            },
        ]);
    }
    Ok(rows)
}

/// Runs a benchmark and prints its table.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Apiserver(args) => {
            let rows = fairlead_bench::apiserver::run(fairlead_bench::apiserver::Options {
                objects: args.objects,
                concurrency: args.concurrency,
                watchers: args.watchers,
                rounds: args.rounds,
            })
            .await?;
            print!("{}", fairlead_bench::table(&rows));
        }
        BenchCommand::Controller(args) => {
            print!("{}", fairlead_bench::table(&controller_rows(&args).await?));
        }
        BenchCommand::Graph(args) => {
            print!("{}", fairlead_bench::table(&graph_rows(&args).await?));
        }
        BenchCommand::Edge(args) => {
            let wanted = |part| args.only.is_empty() || args.only.contains(&part);
            let mut rows = Vec::new();
            if wanted(EdgePart::Translation) {
                let runs = args.runs;
                rows.extend(tokio::task::spawn_blocking(move || edge_rows(runs)).await?);
            }
            if wanted(EdgePart::Push) {
                if wanted(EdgePart::Translation) {
                    // The translation figures end by freeing some 200 MiB (10,000 routes):
                    // the push figure starts once the allocator has returned it (its decays
                    // are 3 s), not while its background thread is still at it.
                    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
                }
                let (p50, p99) = fairlead_bench::edge::push_latency(1_000, args.changes).await?;
                rows.push(fairlead_bench::Row {
                    metric: format!(
                        "route change -> new RouteConfiguration at a client (1,000 routes, {} changes)",
                        args.changes
                    ),
                    value: format!(
                        "p50 {:.2} ms, p99 {:.2} ms",
                        p50.as_secs_f64() * 1000.0,
                        p99.as_secs_f64() * 1000.0
                    ),
                });
            }
            if wanted(EdgePart::Rss) {
                rows.push(edge_rss(1_000).await?);
            }
            if wanted(EdgePart::Geoip) {
                rows.extend(geoip_rows(args.geoip_rounds, args.geoip_seconds).await?);
            }
            if wanted(EdgePart::Loadgen) {
                rows.extend(loadgen_rows(args.loadgen_rounds, args.loadgen_seconds).await?);
            }
            if wanted(EdgePart::Scale) {
                rows.extend(scale_rows(&args).await?);
            }
            if wanted(EdgePart::Ratelimit) {
                rows.extend(ratelimit_rows(args.ratelimit_limit, args.ratelimit_seconds).await?);
            }
            if wanted(EdgePart::Waf) {
                rows.extend(waf_rows(args.waf_rounds, args.waf_seconds).await?);
            }
            if wanted(EdgePart::Envoy) {
                let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
                let sizes = args.envoy_routes.iter().flat_map(|&routes| {
                    std::iter::once((routes, false))
                        .chain((routes == 1_000).then_some((routes, true)))
                });
                for (routes, statistics) in sizes {
                    let figures = fairlead_bench::envoy::route_change(
                        &std::env::current_exe()?,
                        routes,
                        args.envoy_changes,
                        statistics,
                    )
                    .await?;
                    let routes = if statistics {
                        format!("{routes} routes with route statistics")
                    } else {
                        format!("{routes} routes")
                    };
                    for (how, (p50, p99)) in [
                        ("fairlead: API write -> Envoy serves it", figures.fairlead),
                        (
                            "peer, Envoy's file-based RDS: file renamed -> Envoy serves it",
                            figures.file,
                        ),
                    ] {
                        rows.push(fairlead_bench::Row {
                            metric: format!(
                                "route change -> first request under it, {routes}, {how}"
                            ),
                            value: format!("p50 {:.1} ms, p99 {:.1} ms", ms(p50), ms(p99)),
                        });
                    }
                    let (before, after) = figures.envoy_allocated;
                    let mib = |b: u64| b as f64 / 1048576.0;
                    rows.push(fairlead_bench::Row {
                        metric: format!(
                            "Envoy's heap before and after the {} changes, {routes}",
                            args.envoy_changes
                        ),
                        value: format!("{:.1} MiB -> {:.1} MiB", mib(before), mib(after)),
                    });
                }
            }
            if wanted(EdgePart::Cpu) {
                let cores = fairlead_bench::envoy::control_plane_cpu(
                    &std::env::current_exe()?,
                    args.cpu_routes,
                    args.cpu_seconds,
                )
                .await?;
                rows.push(fairlead_bench::Row {
                    metric: format!(
                        "CPU of fairlead edge xds, one of {} routes changed every second for {} s",
                        args.cpu_routes, args.cpu_seconds
                    ),
                    value: format!("{cores:.4} cores"),
                });
            }
            print!("{}", fairlead_bench::table(&rows));
        }
        BenchCommand::Health(args) => {
            use fairlead_bench::health as bench;
            let options = bench::Options {
                probes: args.probes,
                concurrency: args.concurrency,
                trials: args.trials,
            };
            let wanted = |part| args.only.is_empty() || args.only.contains(&part);
            let mut rows = Vec::new();
            if wanted(HealthPart::Throughput) {
                rows.extend(tokio::task::spawn_blocking(move || bench::throughput(options)).await?);
            }
            if wanted(HealthPart::Withdrawal) {
                rows.push(bench::withdrawal(options).await?);
            }
            if wanted(HealthPart::Rss) {
                for targets in [1_000, 10_000] {
                    rows.push(bench::agent_rss(targets).await?);
                }
            }
            let rows: Vec<fairlead_bench::Row> = rows
                .into_iter()
                .map(|r| fairlead_bench::Row {
                    metric: r.metric,
                    value: r.value,
                })
                .collect();
            print!("{}", fairlead_bench::table(&rows));
        }
    }
    Ok(())
}
