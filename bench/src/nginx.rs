//! nginx as the benchmarks' peer (Debian's `nginx-light`, and its ModSecurity module for the
//! WAF figure): one worker on core 1, a server on loopback proxying to a backend, with what
//! the figure adds — as ingress-nginx renders the annotation measured.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::envoy::{EnvoyBenchError, failed};

/// What a figure adds to the configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct Extra<'a> {
    /// Lines at the top (`load_module`).
    pub main: &'a str,
    /// Lines in `http`.
    pub http: &'a str,
    /// Lines in the proxying `location /`.
    pub location: &'a str,
}

/// nginx's configuration in `dir`: a server on `port` proxying to `backend`, with `extra`.
pub fn config(dir: &Path, port: u16, backend: u16, extra: Extra<'_>) -> String {
    let dir = dir.display();
    let Extra {
        main,
        http,
        location,
    } = extra;
    format!(
        "{main}
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
{http}
  upstream backend {{ server 127.0.0.1:{backend}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
{location}
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_pass http://backend;
    }}
  }}
}}
"
    )
}

/// The nginx binary, or how to get it.
pub fn binary() -> Result<PathBuf, EnvoyBenchError> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| {
            EnvoyBenchError::Failed(
                "no nginx, the peer (Debian: apt-get install nginx-light)".into(),
            )
        })
}

/// Starts nginx with `config` on core 1 and waits until it answers at `url`.
pub async fn start(
    nginx: &Path,
    config: &Path,
    url: &str,
) -> Result<tokio::process::Child, EnvoyBenchError> {
    let child = tokio::process::Command::new("taskset")
        .args(["-c", "1"])
        .arg(nginx)
        .arg("-c")
        .arg(config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("nginx under taskset")(e.to_string()))?;
    let http = reqwest::Client::new();
    for _ in 0..100 {
        if http.get(url).send().await.is_ok() {
            return Ok(child);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(EnvoyBenchError::Failed(format!(
        "nginx never answered {url}"
    )))
}

/// Stops nginx started by [`start`]: SIGTERM to the master, which takes its worker with it
/// (a SIGKILL would leave the worker serving the port, answering for the next nginx).
pub async fn stop(mut child: tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}
