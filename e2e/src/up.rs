//! `fairlead up` for a test: on free ports and a loopback block of its own (tests run side by
//! side), its kubeconfig in a directory of its own, its logs (JSON) read as they come, ended
//! with the test — a SIGTERM from [`Up::stop`], or when the test process goes (it is started
//! with `FAIRLEAD_PARENT_PID`), or a kill when the handle is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlead_kit::testing::free_port;

/// The next loopback block a `fairlead up` of this test process takes.
static BLOCKS: AtomicU8 = AtomicU8::new(1);

/// A child's pipe, read to its end by a thread of its own (a pipe nobody reads fills, and
/// then blocks the child's logging).
type Drained = (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>);

fn drain(mut pipe: impl std::io::Read + Send + 'static) -> Drained {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let filled = buffer.clone();
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            filled
                .lock()
                .expect("the log buffer")
                .extend_from_slice(&chunk[..n]);
        }
    });
    (buffer, reader)
}

/// How a test's `fairlead up` is started: options (each given once; a test's own replaces
/// the harness's default), flags, and environment.
#[derive(Debug, Default)]
pub struct Builder {
    options: BTreeMap<String, String>,
    flags: Vec<String>,
    env: Vec<(String, String)>,
    keep_data: bool,
}

impl Builder {
    /// `--name value`, replacing the harness's default for it.
    pub fn option(mut self, name: &str, value: impl AsRef<str>) -> Self {
        self.options
            .insert(name.to_owned(), value.as_ref().to_owned());
        self
    }

    /// `--name value` with a path.
    pub fn path(self, name: &str, value: &Path) -> Self {
        self.option(name, value.to_str().expect("a UTF-8 path"))
    }

    /// A flag without a value (`--rbac`, `--no-local-proxies`).
    pub fn flag(mut self, name: &str) -> Self {
        self.flags.push(name.to_owned());
        self
    }

    /// Arguments as they are, after the options and flags.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.flags.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Environment variables.
    pub fn envs(mut self, env: &[(&str, &str)]) -> Self {
        self.env
            .extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self
    }

    /// Keeps the API server's objects in the world's directory (`--data-dir`).
    pub fn keep_data(mut self) -> Self {
        self.keep_data = true;
        self
    }

    /// Applies the manifests of `dir` after start (`-f`).
    pub fn manifests(self, dir: &Path) -> Self {
        self.path("--filename", dir)
    }

    /// An environment variable.
    pub fn env(mut self, name: &str, value: impl AsRef<str>) -> Self {
        self.env.push((name.to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Starts it.
    pub fn start(self) -> Up {
        let dir = tempfile::tempdir().expect("a directory for the world");
        let kubeconfig = dir.path().join("kubeconfig");
        // The next block no `fairlead up` holds (one of an earlier run may still be draining).
        let block = loop {
            let n = BLOCKS.fetch_add(1, Ordering::SeqCst);
            if std::net::TcpListener::bind(format!("127.{n}.0.1:47474")).is_ok() {
                break n;
            }
        };
        let mut options: BTreeMap<String, String> = [
            ("--api-addr", "127.0.0.1:0".to_owned()),
            ("--loopback-block", block.to_string()),
            ("--graph-addr", "127.0.0.1:0".to_owned()),
            ("--ingress2gateway-addr", "127.0.0.1:0".to_owned()),
            ("--xds-addr", format!("127.0.0.1:{}", free_port())),
            ("--admin-addr", format!("127.0.0.1:{}", free_port())),
            ("--kubeconfig", kubeconfig.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if self.keep_data {
            options.insert(
                "--data-dir".to_owned(),
                dir.path().join("data").display().to_string(),
            );
        }
        options.extend(self.options);
        let port = |name: &str| -> u16 {
            options[name]
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .expect("an address with a port")
        };
        let (admin, xds_port) = (port("--admin-addr"), port("--xds-addr"));
        let kubeconfig = PathBuf::from(&options["--kubeconfig"]);
        let mut command = Command::new(crate::binary::path());
        command.args(["--log-format", "json", "up"]);
        for (name, value) in &options {
            command.args([name, value]);
        }
        let mut child = command
            .args(&self.flags)
            .envs(self.env)
            // It ends with the test (a SIGTERM when the test process ends, passed or not).
            .env("FAIRLEAD_PARENT_PID", std::process::id().to_string())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fairlead up starts");
        let output = [
            drain(child.stdout.take().expect("stdout")),
            drain(child.stderr.take().expect("stderr")),
        ];
        Up {
            child: Some(child),
            admin: format!("http://127.0.0.1:{admin}"),
            xds_port,
            kubeconfig,
            block,
            output: Some(output),
            dir,
        }
    }
}

/// A running `fairlead up`.
pub struct Up {
    child: Option<Child>,
    /// Its admin server, `http://127.0.0.1:port`.
    pub admin: String,
    /// Its xDS server's port (on 127.0.0.1).
    pub xds_port: u16,
    /// Its kubeconfig.
    pub kubeconfig: PathBuf,
    /// Its loopback block: `127.<block>.2.N` are its Services, `.1.N` its Gateways.
    pub block: u8,
    output: Option<[Drained; 2]>,
    dir: tempfile::TempDir,
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Up {
    /// A builder with the harness's defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts one with the harness's defaults.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// Starts one with the harness's defaults, `args` and `env`.
    pub fn with(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::builder().args(args).envs(env).start()
    }

    /// The world's own directory (beside its kubeconfig; gone with it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Waits until `/readyz` answers 200 (the API server is up, the components ready, the
    /// manifests applied).
    pub async fn wait_ready(&self) {
        self.wait_for("/readyz", |status| status == 200, Duration::from_secs(30))
            .await;
    }

    /// [`Up::wait_ready`] for a test without a runtime of its own.
    pub fn wait_ready_blocking(&self) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(self.wait_ready());
    }

    /// Waits until `/healthz` answers at all.
    pub async fn wait_healthy(&self) {
        self.wait_for("/healthz", |_| true, Duration::from_secs(10))
            .await;
    }

    async fn wait_for(&self, path: &str, good: impl Fn(u16) -> bool, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::get(format!("{}{path}", self.admin)).await
                && good(r.status().as_u16())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "fairlead up did not answer {path} within {limit:?}; its last lines:\n{}",
            self.last_lines(40)
        );
    }

    /// Waits until its kubeconfig is written (the API server is up).
    pub fn wait_kubeconfig(&self) {
        crate::wait::blocking_until(Duration::from_secs(20), "a kubeconfig written", || {
            self.kubeconfig.exists().then_some(())
        });
    }

    /// A client with the admin's kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("the kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a client configuration");
        kube::Client::try_from(config).expect("a client")
    }

    /// Runs `kubectl args` against it.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        crate::kubectl::run(&self.kubeconfig, args)
    }

    /// Applies `yaml` with kubectl's server-side apply.
    pub fn apply(&self, yaml: &str) {
        crate::kubectl::apply(&self.kubeconfig, yaml, &[]);
    }

    /// Applies `yaml` taking over the fields others manage (e.g. `fairlead up`'s RBAC).
    pub fn take_over(&self, yaml: &str) {
        crate::kubectl::apply(&self.kubeconfig, yaml, &["--force-conflicts"]);
    }

    /// What it wrote to stderr so far.
    pub fn log(&self) -> String {
        let [_, (stderr, _)] = self.output.as_ref().expect("running");
        String::from_utf8_lossy(&stderr.lock().expect("the log")).into_owned()
    }

    /// Its last `n` lines on stderr.
    pub fn last_lines(&self, n: usize) -> String {
        let log = self.log();
        let last: Vec<&str> = log.lines().rev().take(n).collect();
        last.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// The field `name` of the first log line carrying `message` (waiting at most a minute
    /// for it).
    pub fn logged(&self, message: &str, name: &str) -> String {
        crate::wait::blocking_until(
            Duration::from_secs(60),
            &format!("fairlead up logs {message:?}"),
            || {
                self.log()
                    .lines()
                    .filter(|l| l.contains(message))
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .find_map(|line| {
                        line["fields"][name]
                            .as_str()
                            .or(line[name].as_str())
                            .map(str::to_owned)
                    })
            },
        )
    }

    /// Where its relationship graph is served (`http://host:port`), from its log.
    pub fn graph_base(&self) -> String {
        self.logged("relationship graph", "url")
            .trim_end_matches("/graph/")
            .to_owned()
    }

    /// Where its ingress-nginx converter is served (`http://host:port`), from its log.
    pub fn ingress2gateway_base(&self) -> String {
        format!(
            "http://{}",
            self.logged("serving ingress2gateway", "address")
        )
    }

    /// Waits (at most `limit`) for it to exit by itself; what it did, or `None`.
    pub fn exited(mut self, limit: Duration) -> Option<Output> {
        let deadline = Instant::now() + limit;
        loop {
            let child = self.child.as_mut().expect("running");
            if let Some(status) = child.try_wait().expect("its status") {
                return Some(self.output(status));
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills it at once (SIGKILL), as a crash would.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("killed");
        child.wait().expect("reaped");
    }

    /// Sends SIGTERM and waits (at most 10 s) for the exit: its status and everything it
    /// wrote. It must drain by then.
    pub fn stop(mut self) -> Output {
        let pid = self.pid();
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            let child = self.child.as_mut().expect("running");
            if let Some(status) = child.try_wait().expect("its status") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "fairlead up ignored SIGTERM for 10 s; its last lines:\n{}",
                    self.last_lines(60)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.output(status)
    }

    /// Stops it from a task that may block (a multi-threaded test runtime).
    pub async fn stopped(self) -> Output {
        tokio::task::spawn_blocking(move || self.stop())
            .await
            .expect("stopping does not panic")
    }

    fn output(&mut self, status: ExitStatus) -> Output {
        self.child = None;
        let [stdout, stderr] = self
            .output
            .take()
            .expect("read once")
            .map(|(buffer, reader)| {
                let _ = reader.join();
                std::mem::take(&mut *buffer.lock().expect("the log"))
            });
        Output {
            status,
            stdout,
            stderr,
        }
    }
}

/// The events of the audit log at `path` so far: its complete lines (the API server may be
/// writing the next one).
pub fn audit_events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("the audit log")
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| serde_json::from_str(l).expect("an audit event"))
        .collect()
}
