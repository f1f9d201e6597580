//! The geoproxy against a fake MaxMind on loopback (Basic auth, the metadata call, a
//! redirect to storage on another host, the legacy URL, failures) and against a mirror (a
//! geoproxy's own server): downloads, unchanged databases not fetched again, transient
//! failures retried, wrong and corrupt downloads refused with the good database kept, a
//! restart that does not download again, and conditional and ranged serving.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use fairlead_edge_geoip::Edition;
use fairlead_edge_geoip::archive::{self, Database};
use fairlead_edge_geoip::geoproxy::{GeoproxyMetrics, Shared, refresh_one};
use fairlead_edge_geoip::http::Http;
use fairlead_edge_geoip::source::{Retry, Source};
use fairlead_edge_geoip::store::{Store, md5_hex};
use fairlead_edge_geoip::update::{Outcome, UpdateError};

const ACCOUNT: &str = "42";
const KEY: &str = "s3cret-licence";

fn database(edition: Edition, file: &str) -> Database {
    let bytes = std::fs::read(format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    archive::check(edition, bytes, None).unwrap()
}

/// What the fake MaxMind serves and what it saw.
#[derive(Default)]
struct Fake {
    /// The tarball served per edition ID.
    tarballs: BTreeMap<String, Vec<u8>>,
    /// The MD5 announced per edition ID.
    md5: BTreeMap<String, String>,
    /// Answers of 503 still to give.
    failures: usize,
    /// Requests by path.
    seen: Vec<String>,
    /// Whether the storage host saw an Authorization header.
    leaked_auth: bool,
    /// Where downloads are redirected to.
    storage: Option<SocketAddr>,
}

type FakeState = Arc<Mutex<Fake>>;

fn authorized(headers: &HeaderMap) -> bool {
    use base64::Engine as _;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT}:{KEY}"))
    );
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

async fn metadata(
    State(fake): State<FakeState>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let mut fake = fake.lock().unwrap();
    fake.seen.push("metadata".into());
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if fake.failures > 0 {
        fake.failures -= 1;
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let edition = q.get("edition_id").cloned().unwrap_or_default();
    let md5 = fake.md5.get(&edition).cloned().unwrap_or_default();
    axum::Json(serde_json::json!({"databases": [{"edition_id": edition, "md5": md5, "date": "2026-11-30"}]}))
        .into_response()
}

async fn download(
    State(fake): State<FakeState>,
    headers: HeaderMap,
    axum::extract::Path(edition): axum::extract::Path<String>,
) -> Response {
    let mut fake = fake.lock().unwrap();
    fake.seen.push(format!("download {edition}"));
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let storage = fake.storage.unwrap();
    (
        StatusCode::FOUND,
        [(
            "location",
            format!("http://{storage}/r2/{edition}?X-Amz-Signature=abc"),
        )],
    )
        .into_response()
}

async fn storage(
    State(fake): State<FakeState>,
    headers: HeaderMap,
    axum::extract::Path(edition): axum::extract::Path<String>,
) -> Response {
    let mut fake = fake.lock().unwrap();
    fake.seen.push(format!("storage {edition}"));
    if headers.contains_key("authorization") {
        fake.leaked_auth = true;
    }
    match fake.tarballs.get(&edition) {
        Some(t) => (
            [("last-modified", "Mon, 30 Nov 2026 10:00:00 GMT")],
            t.clone(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn legacy(
    State(fake): State<FakeState>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let mut fake = fake.lock().unwrap();
    fake.seen.push("legacy".into());
    if q.get("license_key").map(String::as_str) != Some(KEY)
        || q.get("suffix").map(String::as_str) != Some("tar.gz")
    {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let edition = q.get("edition_id").cloned().unwrap_or_default();
    match fake.tarballs.get(&edition) {
        Some(t) => t.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn serve(ip: &str, router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A fake MaxMind on 127.0.0.1 redirecting downloads to storage on 127.0.0.2.
async fn fake_maxmind() -> (FakeState, String) {
    let fake: FakeState = Arc::default();
    let storage_addr = serve(
        "127.0.0.2",
        axum::Router::new()
            .route("/r2/{edition}", axum::routing::get(storage))
            .with_state(fake.clone()),
    )
    .await;
    fake.lock().unwrap().storage = Some(storage_addr);
    let addr = serve(
        "127.0.0.1",
        axum::Router::new()
            .route("/geoip/updates/metadata", axum::routing::get(metadata))
            .route(
                "/geoip/databases/{edition}/download",
                axum::routing::get(download),
            )
            .route("/app/geoip_download", axum::routing::get(legacy))
            .with_state(fake.clone()),
    )
    .await;
    (fake, format!("http://{addr}"))
}

fn publish(fake: &FakeState, database: &Database, tarball: Vec<u8>) {
    let mut fake = fake.lock().unwrap();
    fake.md5
        .insert(database.edition.id().into(), md5_hex(&database.mmdb));
    fake.tarballs.insert(database.edition.id().into(), tarball);
}

fn shared(dir: &std::path::Path) -> Shared {
    let metrics = fairlead_kit::metrics::Metrics::new("test").unwrap();
    Shared {
        store: Arc::new(Mutex::new(Store::open(dir).unwrap())),
        metrics: GeoproxyMetrics::new(&metrics, &Edition::ALL).unwrap(),
    }
}

const QUICK: Retry = Retry {
    attempts: 4,
    first: Duration::from_millis(10),
    max: Duration::from_millis(40),
};

fn downloads(fake: &FakeState) -> usize {
    fake.lock()
        .unwrap()
        .seen
        .iter()
        .filter(|s| s.starts_with("storage"))
        .count()
}

#[tokio::test]
async fn the_current_api_downloads_once_and_skips_an_unchanged_database() {
    let (fake, host) = fake_maxmind().await;
    let city = database(Edition::City, "GeoIP2-City-Test.mmdb");
    publish(&fake, &city, archive::pack(&city).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let http = Http::new(None).unwrap();
    let source = Source::MaxMind {
        host,
        account_id: ACCOUNT.into(),
        license_key: KEY.into(),
    };
    let outcome = refresh_one(&shared, &http, &source, Edition::City, QUICK)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Updated {
            build_epoch: city.build_epoch
        }
    );
    assert_eq!(
        std::fs::read(dir.path().join("GeoIP2-City.mmdb")).unwrap(),
        city.mmdb
    );
    assert!(
        !fake.lock().unwrap().leaked_auth,
        "the licence went to the storage host"
    );
    let held = shared
        .store
        .lock()
        .unwrap()
        .held(Edition::City)
        .unwrap()
        .clone();
    assert_eq!(held.modified, 1_796_032_800, "Last-Modified kept");
    // The same database announced: not downloaded again.
    let outcome = refresh_one(&shared, &http, &source, Edition::City, QUICK)
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Unchanged);
    assert_eq!(downloads(&fake), 1);
    let metrics = shared
        .metrics
        .downloads
        .with_label_values(&["GeoIP2-City", "unchanged"])
        .get();
    assert_eq!(metrics, 1);
    // A restart reads what it holds and when it last asked: nothing is due.
    drop(shared);
    let store = Store::open(dir.path()).unwrap();
    assert!(!store.due(Edition::City, 86_400, held.checked + 60));
}

#[tokio::test]
async fn transient_failures_are_retried_and_a_wrong_licence_is_not() {
    let (fake, host) = fake_maxmind().await;
    let asn = database(Edition::LiteAsn, "GeoLite2-ASN-Test.mmdb");
    publish(&fake, &asn, archive::pack(&asn).unwrap());
    fake.lock().unwrap().failures = 2;
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let http = Http::new(None).unwrap();
    let good = Source::MaxMind {
        host: host.clone(),
        account_id: ACCOUNT.into(),
        license_key: KEY.into(),
    };
    let outcome = refresh_one(&shared, &http, &good, Edition::LiteAsn, QUICK)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Updated { .. }));
    assert_eq!(
        fake.lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| *s == "metadata")
            .count(),
        3
    );
    let wrong = Source::MaxMind {
        host,
        account_id: ACCOUNT.into(),
        license_key: "wrong".into(),
    };
    let before = fake.lock().unwrap().seen.len();
    let err = refresh_one(&shared, &http, &wrong, Edition::LiteAsn, QUICK)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");
    assert_eq!(
        fake.lock().unwrap().seen.len(),
        before + 1,
        "a 401 is not retried"
    );
    assert_eq!(
        shared
            .metrics
            .download_error
            .with_label_values(&["GeoLite2-ASN"])
            .get(),
        1
    );
    assert!(
        shared
            .store
            .lock()
            .unwrap()
            .held(Edition::LiteAsn)
            .is_some(),
        "the good one is kept"
    );
}

#[tokio::test]
async fn corrupt_and_wrong_downloads_never_replace_a_good_database() {
    let (fake, host) = fake_maxmind().await;
    let city = database(Edition::City, "GeoIP2-City-Test.mmdb");
    publish(&fake, &city, archive::pack(&city).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let http = Http::new(None).unwrap();
    let legacy = Source::Legacy {
        host,
        license_key: KEY.into(),
    };
    refresh_one(&shared, &http, &legacy, Edition::City, QUICK)
        .await
        .unwrap();
    for (what, tarball) in [
        ("corrupt", b"\x1f\x8b broken".to_vec()),
        (
            "the wrong edition",
            archive::pack(&database(Edition::LiteAsn, "GeoLite2-ASN-Test.mmdb")).unwrap(),
        ),
    ] {
        fake.lock()
            .unwrap()
            .tarballs
            .insert("GeoIP2-City".into(), tarball);
        let err = refresh_one(&shared, &http, &legacy, Edition::City, QUICK)
            .await
            .unwrap_err();
        assert!(matches!(err, UpdateError::Rejected(_)), "{what}: {err}");
        assert_eq!(
            std::fs::read(dir.path().join("GeoIP2-City.mmdb")).unwrap(),
            city.mmdb,
            "{what} replaced the database"
        );
    }
    assert_eq!(
        shared
            .metrics
            .downloads
            .with_label_values(&["GeoIP2-City", "rejected"])
            .get(),
        2
    );
    // The legacy URL sends the same database again: unchanged.
    fake.lock()
        .unwrap()
        .tarballs
        .insert("GeoIP2-City".into(), archive::pack(&city).unwrap());
    let outcome = refresh_one(&shared, &http, &legacy, Edition::City, QUICK)
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Unchanged);
}

#[tokio::test]
async fn a_mirror_is_asked_with_its_entity_tag_and_serves_ranges() {
    // A geoproxy holding the City database serves as the mirror.
    let upstream_dir = tempfile::tempdir().unwrap();
    let upstream = shared(upstream_dir.path());
    let city = database(Edition::City, "GeoIP2-City-Test.mmdb");
    upstream
        .store
        .lock()
        .unwrap()
        .keep(&city, None, 1_700_000_000, 1)
        .unwrap();
    let addr = serve(
        "127.0.0.1",
        fairlead_edge_geoip::serve::router(upstream.clone()),
    )
    .await;
    let mirror = Source::Mirror {
        url: format!("http://{addr}/download"),
    };
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let http = Http::new(None).unwrap();
    assert!(matches!(
        refresh_one(&shared, &http, &mirror, Edition::City, QUICK)
            .await
            .unwrap(),
        Outcome::Updated { .. }
    ));
    let served = upstream
        .metrics
        .served
        .with_label_values(&[] as &[&str])
        .get();
    assert!(served > 0);
    assert_eq!(
        refresh_one(&shared, &http, &mirror, Edition::City, QUICK)
            .await
            .unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(
        upstream
            .metrics
            .served
            .with_label_values(&[] as &[&str])
            .get(),
        served,
        "answered 304, no body"
    );
    // Ranges of the database itself.
    let mut headers = http::HeaderMap::new();
    headers.insert("range", "bytes=0-15".parse().unwrap());
    let part = http
        .get(
            &format!("http://{addr}/download/GeoIP2-City.mmdb"),
            &headers,
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(part.status, 206);
    assert_eq!(part.body, city.mmdb[..16]);
    let missing = http
        .get(
            &format!("http://{addr}/download/GeoLite2-ASN.tar.gz"),
            &http::HeaderMap::new(),
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_downloads_and_the_other_replica_fetches_from_it() {
    let (fake, host) = fake_maxmind().await;
    let city = database(Edition::City, "GeoIP2-City-Test.mmdb");
    publish(&fake, &city, archive::pack(&city).unwrap());
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config::default())
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let addr = serve(
            "127.0.0.1",
            fairlead_edge_geoip::serve::router(shared.clone()),
        )
        .await;
        replicas.push((dir, shared, addr));
    }
    for (i, (_, shared, _)) in replicas.iter().enumerate() {
        // Each fetches from the other when it does not hold the Lease (in a cluster: the
        // Service, which sends it only to replicas that hold every edition).
        let peer = replicas[1 - i].2;
        let (leadership, _lease) = fairlead_kit::lease::spawn(
            client.clone(),
            fairlead_kit::lease::LeaseConfig::new(
                "geoproxy-leader",
                "default",
                &format!("geoproxy-{i}"),
            ),
            stop.clone(),
        );
        let settings = fairlead_edge_geoip::geoproxy::Settings {
            editions: vec![Edition::City],
            interval: Duration::from_secs(3_600),
            source: Source::MaxMind {
                host: host.clone(),
                account_id: ACCOUNT.into(),
                license_key: KEY.into(),
            },
            peers: Some(format!("http://{peer}/download")),
            retry: QUICK,
        };
        tokio::spawn(fairlead_edge_geoip::geoproxy::run(
            shared.clone(),
            Http::new(None).unwrap(),
            settings,
            Some(leadership),
            |_| {},
            stop.clone(),
        ));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !replicas
        .iter()
        .all(|(_, shared, _)| shared.store.lock().unwrap().held(Edition::City).is_some())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "both replicas never held the database"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        downloads(&fake),
        1,
        "only the Lease holder asked MaxMind for the database"
    );
    for (dir, _, _) in &replicas {
        assert_eq!(
            std::fs::read(dir.path().join("GeoIP2-City.mmdb")).unwrap(),
            city.mmdb
        );
    }
    stop.cancel();
}

#[tokio::test]
async fn a_licence_key_is_never_shown() {
    let (_fake, host) = fake_maxmind().await;
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let http = Http::new(None).unwrap();
    for key in ["bad key\n", "wrong-but-plain", "https://x?y"] {
        let source = Source::Legacy {
            host: host.clone(),
            license_key: key.into(),
        };
        let err = refresh_one(&shared, &http, &source, Edition::City, QUICK)
            .await
            .unwrap_err();
        let shown = format!("{err} {err:?} {source:?}");
        assert!(shown.contains("401"), "{shown}");
        for part in key.split_whitespace() {
            assert!(!shown.contains(part), "{part:?} shown: {shown}");
        }
    }
    // A host that is not a URL: named without what follows.
    let source = Source::Legacy {
        host: "not a url".into(),
        license_key: "top-secret".into(),
    };
    let err = refresh_one(&shared, &http, &source, Edition::City, QUICK)
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("top-secret"), "{err}");
}
