//! A real Prometheus server (the Debian `prometheus` package) for tests: scrapes the given
//! targets every second and answers PromQL over its HTTP API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Where the binaries are looked for when not on `PATH`.
const DEBIAN_BIN: &str = "/usr/bin";

/// Errors from the Prometheus fixture.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    /// The binary is not installed; `.ci/run` installs it (`apt-get install prometheus`).
    #[error("{0} not found: install the Debian package `prometheus` (.ci/run does)")]
    NotInstalled(String),
    /// Starting or talking to the server failed.
    #[error("prometheus: {0}")]
    Io(#[from] std::io::Error),
    /// The HTTP API failed.
    #[error("prometheus API: {0}")]
    Http(#[from] reqwest::Error),
    /// The server did not become ready, or a query never produced a result.
    #[error("prometheus: {0}")]
    Timeout(String),
    /// The server rejected a query (a PromQL syntax error, say).
    #[error("prometheus rejected {query:?}: {error}")]
    Query {
        /// The expression.
        query: String,
        /// Prometheus's message.
        error: String,
    },
}

/// Finds a Prometheus tool (`prometheus`, `promtool`) on `PATH` or in `/usr/bin`.
pub fn tool(name: &str) -> Result<PathBuf, PrometheusError> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(std::iter::once(PathBuf::from(DEBIAN_BIN)))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| PrometheusError::NotInstalled(name.to_owned()))
}

/// A running Prometheus; killed when dropped.
pub struct Prometheus {
    child: Child,
    base: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// One scrape job: targets scraped at `path`, their series labelled with `labels`.
#[derive(Clone, Debug)]
pub struct Job {
    /// The job's name (its `job` label).
    pub name: String,
    /// The metrics path (`/metrics`, Envoy's `/stats/prometheus`).
    pub path: String,
    /// `host:port` of each target.
    pub targets: Vec<SocketAddr>,
    /// Labels added to every series of the job.
    pub labels: Vec<(String, String)>,
}

impl Prometheus {
    /// Starts Prometheus on a free loopback port, scraping `targets` (`/metrics`) every
    /// second, and waits until it reports ready.
    pub async fn start(targets: &[SocketAddr]) -> Result<Self, PrometheusError> {
        Self::start_jobs(&[Job {
            name: "fairlead".into(),
            path: "/metrics".into(),
            targets: targets.to_vec(),
            labels: Vec::new(),
        }])
        .await
    }

    /// Starts Prometheus scraping each of `jobs` every second, and waits until it reports
    /// ready.
    pub async fn start_jobs(jobs: &[Job]) -> Result<Self, PrometheusError> {
        Self::start_jobs_on(super::free_port(), jobs).await
    }

    /// [`Self::start_jobs`] on loopback port `port` (for a component told where Prometheus
    /// will be before it starts).
    pub async fn start_jobs_on(port: u16, jobs: &[Job]) -> Result<Self, PrometheusError> {
        let binary = tool("prometheus")?;
        let dir = tempfile::tempdir()?;
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
        );
        for job in jobs {
            let targets: Vec<String> = job.targets.iter().map(|t| format!("'{t}'")).collect();
            let labels: Vec<String> = job
                .labels
                .iter()
                .map(|(k, v)| format!("{k}: '{v}'"))
                .collect();
            config.push_str(&format!(
                "  - job_name: {}\n    metrics_path: {}\n    static_configs:\n      - targets: [{}]\n        labels: {{{}}}\n",
                job.name,
                job.path,
                targets.join(", "),
                labels.join(", ")
            ));
        }
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.path().join("prometheus.log"))?;
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // For k6's metrics (`fairlead loadtest --prometheus-rw`).
            .arg("--web.enable-remote-write-receiver")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let prometheus = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _dir: dir,
        };
        prometheus.wait_ready().await?;
        Ok(prometheus)
    }

    async fn wait_ready(&self) -> Result<(), PrometheusError> {
        for _ in 0..300 {
            if let Ok(r) = self.http.get(format!("{}/-/ready", self.base)).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(PrometheusError::Timeout(format!(
            "not ready after 30 s; log: {}",
            self.log()
        )))
    }

    /// Its remote-write receiver's URL.
    pub fn remote_write_url(&self) -> String {
        format!("{}/api/v1/write", self.base)
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Runs an instant query; returns the `data.result` array (an error names the query).
    pub async fn query(&self, expr: &str) -> Result<Vec<Value>, PrometheusError> {
        let body: Value = self
            .http
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", expr)])
            .send()
            .await?
            .json()
            .await?;
        if body["status"] != "success" {
            return Err(PrometheusError::Query {
                query: expr.to_owned(),
                error: body["error"].as_str().unwrap_or("unknown error").to_owned(),
            });
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Repeats `expr` until it returns a non-empty result, or `timeout` passes.
    pub async fn query_until_nonempty(
        &self,
        expr: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, PrometheusError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let result = self.query(expr).await?;
            if !result.is_empty() {
                return Ok(result);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(PrometheusError::Timeout(format!(
                    "{expr:?} returned nothing within {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The names of every metric Prometheus has scraped.
    pub async fn metric_names(&self) -> Result<Vec<String>, PrometheusError> {
        let body: Value = self
            .http
            .get(format!("{}/api/v1/label/__name__/values", self.base))
            .send()
            .await?
            .json()
            .await?;
        Ok(body["data"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
