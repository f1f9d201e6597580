//! `fairlead bench edge`'s load figures run end to end (k6, wrk and real Envoys), so they cannot
//! rot unnoticed.

use std::process::Command;

/// The load generators' benchmark runs end to end (one short round; its figures belong in
/// BENCHMARKS.md, not here): `fairlead edge xds` as the benchmarks start it, k6, wrk, the
/// configuration made static from Envoy's dump and the minimal peer through real Envoys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_loadgen_measures_k6_wrk_and_a_static_envoy_through_real_envoys() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["bench", "edge", "--only", "loadgen"])
        .args(["--loadgen-rounds", "1", "--loadgen-seconds", "1"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for side in [
        "k6 (32 VUs)",
        "wrk (-c32) -> fairlead's",
        "wrk (-c32) -> the same static resources without the access log ->",
        "wrk (-c32) -> the same static resources without the access log and tracing",
        "wrk (-c32) -> a static",
    ] {
        let line = printed
            .lines()
            .find(|l| l.contains(side))
            .unwrap_or_default();
        let rate: f64 = line
            .split("| ")
            .nth(2)
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        assert!(rate > 0.0, "{side}: {line}\n{printed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_scale_measures_a_fixed_rate_through_routes_from_xds_and_static() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["bench", "edge", "--only", "scale", "--scale-largest", "10"])
        .args([
            "--scale-rate",
            "200",
            "--scale-rounds",
            "1",
            "--scale-seconds",
            "2",
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for side in ["10 HTTPRoutes, k6 at 200 req/s", "10 HTTPRoutes: the same"] {
        let line = printed
            .lines()
            .find(|l| l.contains(side))
            .unwrap_or_default();
        // The rate held (within k6's rounding), and the proxy's CPU and memory were read.
        let rate: f64 = line
            .split("| ")
            .nth(2)
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        assert!((190.0..=210.0).contains(&rate), "{side}: {line}\n{printed}");
        // Envoy's own quantiles were read too (its histograms merged at a stats flush).
        assert!(
            line.contains("(Envoy's own: ")
                && line.contains("% of a core")
                && !line.contains("NaN"),
            "{line}"
        );
        assert!(!line.contains(" 0 MiB"), "{line}");
    }
    assert!(!printed.contains("100 HTTPRoutes"), "{printed}");
}

/// The rate-limit figure runs end to end: a `limit-rps` route through a real Envoy and nginx
/// configured as ingress-nginx renders the annotation, both loaded by k6 at half, twice and
/// ten times the limit: nothing refused below it, and well above it both hold the limit
/// beyond the burst, refusing the rest with 429 and failing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_ratelimit_holds_the_limit_beside_nginx() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["bench", "edge", "--only", "ratelimit"])
        .args(["--ratelimit-limit", "20", "--ratelimit-seconds", "4"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for side in ["fairlead's Envoy", "nginx limit_req"] {
        let row = |offered: u32| {
            printed
                .lines()
                .find(|l| l.contains(&format!(", {offered} r/s offered")) && l.contains(side))
                .unwrap_or_else(|| panic!("no row at {offered} r/s for {side}:\n{printed}"))
                .to_owned()
        };
        assert!(row(10).contains("none refused, 0 other"), "{}", row(10));
        // Twice the limit for four seconds stays within the burst (5 × 20).
        assert!(row(40).contains(" 0 other"), "{}", row(40));
        let line = row(200);
        assert!(line.contains(" 0 other"), "{line}");
        let held: f64 = line
            .split("held ")
            .nth(1)
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!((15.0..=25.0).contains(&held), "{line}");
    }
}

/// `fairlead bench edge --only waf`, short: both worlds measured for every load, the WAF
/// route slower than the plain one (it inspects), the neighbour route's ratio printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_waf_measures_both_worlds() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["bench", "edge", "--only", "waf"])
        .args(["--waf-rounds", "1", "--waf-seconds", "1"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ratio = |load: &str| -> f64 {
        printed
            .lines()
            .find(|l| l.contains(load) && l.contains("with / without"))
            .and_then(|l| l.trim_end_matches(" |").rsplit("| ").next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no ratio for {load}:\n{printed}"))
    };
    for load in [
        "a GET on the route",
        "a 16 KiB form POST",
        "unannotated route",
    ] {
        assert!(ratio(load) > 0.0, "{load}:\n{printed}");
    }
    assert!(
        ratio("a GET on the route") < 1.0,
        "the CRS costs something:\n{printed}"
    );
}

/// `fairlead bench edge --only envoy,cpu`, short: a route change measured through
/// `fairlead edge xds` and a real Envoy beside Envoy's file-based RDS, Envoy's heap before and
/// after, and the control plane's CPU from `/proc` while a route changes every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_route_change_and_control_plane_cpu() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let out = Command::new(fairlead_e2e::binary::path())
        .args([
            "bench",
            "edge",
            "--only",
            "envoy,cpu",
            "--envoy-routes",
            "10",
        ])
        .args([
            "--envoy-changes",
            "3",
            "--cpu-routes",
            "100",
            "--cpu-seconds",
            "5",
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |what: &str| -> String {
        printed
            .lines()
            .find(|l| l.contains(what))
            .and_then(|l| l.split("| ").nth(2))
            .unwrap_or_else(|| panic!("no row with {what}:\n{printed}"))
            .to_owned()
    };
    for side in ["fairlead: API write -> Envoy serves it", "file-based RDS"] {
        let p99: f64 = value(side)
            .split("p99 ")
            .nth(1)
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        assert!(p99 > 0.0 && p99 < 10_000.0, "{side}:\n{printed}");
    }
    let heap: Vec<f64> = value("Envoy's heap before and after")
        .split(" -> ")
        .filter_map(|v| v.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        heap.len() == 2 && heap.iter().all(|h| *h > 0.0),
        "{printed}"
    );
    let cores: f64 = value("CPU of fairlead edge xds")
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0);
    // Some CPU (statuses written, a translation a second), far from a core.
    assert!(cores > 0.0 && cores < 1.0, "{printed}");
}
