//! The downloader beside Envoy against a geoproxy's server: the init container puts every
//! edition in place, or fails after bounded retries naming what it could not get; the
//! sidecar replaces a database by a rename in place when the geoproxy has a newer one.

use std::os::unix::fs::MetadataExt as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlead_edge_geoip::Edition;
use fairlead_edge_geoip::archive::{self, Database};
use fairlead_edge_geoip::downloader;
use fairlead_edge_geoip::geoproxy::{GeoproxyMetrics, Shared};
use fairlead_edge_geoip::http::Http;
use fairlead_edge_geoip::source::{Retry, Source};
use fairlead_edge_geoip::store::Store;

fn database(edition: Edition, file: &str) -> Database {
    let bytes = std::fs::read(format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    archive::check(edition, bytes, None).unwrap()
}

/// `database` rebuilt one second later: the same records, a newer `build_epoch` (the last
/// byte of the metadata's value, which keeps its encoding's length).
fn rebuilt(database: &Database) -> Database {
    let mut mmdb = database.mmdb.clone();
    let key = b"build_epoch";
    let at = mmdb
        .windows(key.len())
        .rposition(|w| w == key)
        .expect("metadata names build_epoch");
    // The value follows the key: a control byte (type uint64 extended, size) then its bytes.
    let size = usize::from(mmdb[at + key.len()] & 0x1f);
    let last = at + key.len() + 2 + size - 1;
    assert!(mmdb[last] < 0xff);
    mmdb[last] += 1;
    let newer = archive::check(database.edition, mmdb, None).unwrap();
    assert_eq!(newer.build_epoch, database.build_epoch + 1);
    newer
}

async fn geoproxy(databases: &[&Database]) -> (Shared, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let metrics = fairlead_kit::metrics::Metrics::new("test").unwrap();
    let shared = Shared {
        store: Arc::new(Mutex::new(Store::open(dir.path()).unwrap())),
        metrics: GeoproxyMetrics::new(&metrics, &Edition::ALL).unwrap(),
    };
    for database in databases {
        shared
            .store
            .lock()
            .unwrap()
            .keep(database, None, 1_700_000_000, 1)
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = fairlead_edge_geoip::serve::router(shared.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (shared, format!("http://{addr}/download"), dir)
}

const QUICK: Retry = Retry {
    attempts: 3,
    first: Duration::from_millis(10),
    max: Duration::from_millis(20),
};

#[tokio::test]
async fn init_puts_every_edition_in_place_or_names_what_is_missing() {
    let city = database(Edition::City, "GeoIP2-City-Test.mmdb");
    let asn = database(Edition::LiteAsn, "GeoLite2-ASN-Test.mmdb");
    let (_geoproxy, url, _held) = geoproxy(&[&city, &asn]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Mutex::new(Store::open(dir.path()).unwrap());
    let http = Http::new(None).unwrap();
    let source = Source::Mirror { url };
    downloader::init(
        &store,
        &http,
        &source,
        &[Edition::City, Edition::LiteAsn],
        QUICK,
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("GeoIP2-City.mmdb")).unwrap(),
        city.mmdb
    );
    assert_eq!(
        std::fs::read(dir.path().join("GeoLite2-ASN.mmdb")).unwrap(),
        asn.mmdb
    );
    // An edition the geoproxy does not hold: named, with the answer.
    let err = downloader::init(
        &store,
        &http,
        &source,
        &[Edition::City, Edition::Isp],
        QUICK,
    )
    .await
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("GeoIP2-ISP") && message.contains("404"),
        "{message}"
    );
    assert!(!message.contains("GeoIP2-City ("), "{message}");
    // Nobody listening: retried, then named.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = Source::Mirror {
        url: format!("http://127.0.0.1:{port}/download"),
    };
    let empty = Mutex::new(Store::open(tempfile::tempdir().unwrap().path()).unwrap());
    let started = Instant::now();
    let err = downloader::init(&empty, &http, &gone, &[Edition::City], QUICK)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("GeoIP2-City"), "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(30),
        "retried with backoff"
    );
}

#[tokio::test]
async fn the_sidecar_replaces_a_newer_database_by_a_rename() {
    let city = database(Edition::City, "GeoIP2-City-Test.mmdb");
    let (geoproxy, url, _held) = geoproxy(&[&city]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Mutex::new(Store::open(dir.path()).unwrap()));
    let http = Http::new(None).unwrap();
    let source = Source::Mirror { url };
    downloader::init(&store, &http, &source, &[Edition::City], QUICK)
        .await
        .unwrap();
    let path = dir.path().join("GeoIP2-City.mmdb");
    let before = std::fs::metadata(&path).unwrap().ino();
    let stop = tokio_util::sync::CancellationToken::new();
    let sidecar = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            downloader::sidecar(
                &store,
                &http,
                &source,
                &[Edition::City],
                Duration::from_millis(50),
                QUICK,
                stop,
            )
            .await;
        })
    };
    let newer = rebuilt(&city);
    geoproxy
        .store
        .lock()
        .unwrap()
        .keep(&newer, None, 1_700_000_100, 2)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read(&path).unwrap() != newer.mmdb {
        assert!(
            Instant::now() < deadline,
            "the newer database never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(
        std::fs::metadata(&path).unwrap().ino(),
        before,
        "replaced by a rename"
    );
    stop.cancel();
    sidecar.await.unwrap();
}
