//! A SIGTERM during an in-flight request lets the request finish within the drain deadline.
//! (Its own test binary: the signal goes to this whole process.)

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use fairlead_kit::shutdown::Drained;
use fairlead_kit::{AdminServer, Metrics, Readiness, Shutdown};

const REQUEST_TIME: Duration = Duration::from_millis(800);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_requests() {
    let shutdown = Shutdown::new(Duration::from_secs(10));
    shutdown.listen_for_signals().unwrap();
    let slow = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(REQUEST_TIME).await;
            "finished"
        }),
    );
    let admin = AdminServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        Metrics::new("fairlead-test").unwrap(),
        Readiness::new(),
        Some(slow),
    )
    .await
    .unwrap();
    let addr = admin.local_addr();
    admin.spawn(&shutdown);

    let started = Instant::now();
    let request = tokio::spawn(async move {
        let response = reqwest::get(format!("http://{addr}/slow")).await?;
        Ok::<_, reqwest::Error>((response.status().as_u16(), response.text().await?))
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    tokio::time::timeout(Duration::from_secs(2), shutdown.triggered())
        .await
        .expect("SIGTERM triggers shutdown");
    assert_eq!(shutdown.drained().await, Drained::Clean);
    assert!(
        started.elapsed() >= REQUEST_TIME,
        "the drain waited for the request"
    );
    let (status, body) = request.await.unwrap().unwrap();
    assert_eq!((status, body.as_str()), (200, "finished"));

    let refused = reqwest::get(format!("http://{addr}/healthz")).await;
    assert!(refused.is_err(), "no new connections after the drain");
}
