//! The server: HTTPS on loopback with a CA generated at start, a bearer token, the kubeconfig
//! that points at it, and the background garbage collector.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use fairlead_kit::pki::{self, Ca};

use crate::objects::resources::Registry;
use crate::objects::validation::ValidationOptions;
use crate::serve::api::{self, ApiState};
use crate::storage::journal::Journal;
use crate::storage::store::{Store, StoreKey, Write};

/// The namespaces every cluster has.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Server start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// Certificates could not be made.
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    /// The data directory could not be read.
    #[error(transparent)]
    Journal(#[from] crate::storage::journal::JournalError),
    /// The kubeconfig could not be written or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// A ServiceAccount's token could not be written.
    #[error("a service account token: {0}")]
    Token(String),
    /// The ServiceAccount signing key could not be had.
    #[error(transparent)]
    Tokens(#[from] crate::access::tokens::TokenError),
    /// A secret kept in the data directory could not be read or written.
    #[error(transparent)]
    Kept(#[from] crate::storage::kept::KeptError),
    /// The bootstrap RBAC objects could not be written.
    #[error("writing the bootstrap RBAC roles: {0}")]
    Bootstrap(String),
    /// The audit log could not be opened.
    #[error("opening the audit log {path}: {source}")]
    Audit {
        /// Its path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// How to run the server.
#[derive(Clone, Debug)]
pub struct Config {
    /// Listen address (loopback; port 0 picks a free one).
    pub addr: SocketAddr,
    /// Persist objects here; in memory when `None`.
    pub data_dir: Option<PathBuf>,
    /// Accept 127.0.0.0/8 addresses in EndpointSlices.
    pub allow_loopback_endpoints: bool,
    /// How many events watches can resume from.
    pub event_window: usize,
    /// Interval of watch bookmarks.
    pub bookmark_interval: Duration,
    /// Write the audit log (`audit.k8s.io/v1` Events, JSON lines) here.
    pub audit_log: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            allow_loopback_endpoints: false,
            event_window: 10_000,
            bookmark_interval: Duration::from_secs(5),
            audit_log: None,
        }
    }
}

/// A running server. Stops when [`ApiServer::shutdown`] is called or it is dropped.
#[derive(Debug)]
pub struct ApiServer {
    addr: SocketAddr,
    ca_pem: String,
    token: String,
    state: Arc<ApiState>,
    stop: CancellationToken,
}

/// The file of the data directory holding the serving CA (its certificate and key, as JSON).
const SERVING_CA_FILE: &str = "serving-ca.json";

/// The file of the data directory holding the admin's bearer token.
const ADMIN_TOKEN_FILE: &str = "admin-token";

/// The CA the serving certificate is issued by: kept in `dir`, else made.
fn serving_ca(dir: Option<&Path>) -> Result<Ca, ServerError> {
    const NAME: &str = "fairlead-apiserver-ca";
    let kept = crate::storage::kept::kept(dir, SERVING_CA_FILE, || {
        let ca = Ca::generate(NAME).map_err(|e| e.to_string())?;
        serde_json::to_vec(&json!({"cert": ca.cert_pem(), "key": ca.key_pem()}))
            .map_err(|e| e.to_string())
    })?;
    let pems: serde_json::Value = serde_json::from_slice(&kept).map_err(|e| {
        ServerError::Kept(crate::storage::kept::KeptError {
            file: SERVING_CA_FILE.to_owned(),
            reason: e.to_string(),
        })
    })?;
    Ok(Ca::restore(
        NAME,
        pems["cert"].as_str().unwrap_or_default(),
        pems["key"].as_str().unwrap_or_default(),
    )?)
}

impl ApiServer {
    /// Starts the server.
    pub async fn start(config: Config) -> Result<Self, ServerError> {
        let store = match &config.data_dir {
            Some(dir) => Store::open(Journal::open(dir)?, config.event_window)?,
            None => Store::new(config.event_window),
        };
        let store = Arc::new(store);
        let registry = Registry::new();
        for (_, crd) in store
            .all()
            .into_iter()
            .filter(|(k, _)| k.resource == "customresourcedefinitions.apiextensions.k8s.io")
        {
            let name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            registry.set_custom(&name, crate::objects::crd::served_types(&crd));
        }
        for ns in SYSTEM_NAMESPACES {
            let key = StoreKey::new("namespaces", "", ns);
            if store.get(&key).is_none() {
                let uid = uuid::Uuid::new_v4();
                let mut object =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                let rt = registry.lookup("", "v1", "namespaces").expect("built-in");
                crate::objects::meta::prepare_create(&rt, &mut object, &uid);
                crate::objects::defaults::on_create(&rt.kind, &mut object);
                store
                    .write(&key, Write::Create(object))
                    .map_err(|e| ServerError::Kubeconfig(e.to_string()))?;
            }
        }

        // Kept with the data: a restarted server is the one its clients' kubeconfigs trust,
        // and their token is still good.
        let dir = config.data_dir.as_deref();
        let ca = serving_ca(dir)?;
        let serving = ca.issue_server(
            &["localhost", "fairlead-apiserver"],
            &[
                config.addr.ip(),
                "127.0.0.1".parse().expect("literal"),
                "::1".parse().expect("literal"),
            ],
        )?;
        let tls =
            tokio_rustls::TlsAcceptor::from(pki::server_config(&serving, &[b"h2", b"http/1.1"])?);
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| ServerError::Bind {
                addr: config.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: config.addr,
            source,
        })?;
        let token = crate::storage::kept::kept(dir, ADMIN_TOKEN_FILE, || {
            Ok(uuid::Uuid::new_v4().simple().to_string().into_bytes())
        })?;
        let token = String::from_utf8_lossy(&token).trim().to_owned();
        let signer = crate::access::tokens::Signer::open(dir)?;
        crate::access::rbac::bootstrap(&store, &registry).map_err(ServerError::Bootstrap)?;
        let audit =
            match &config.audit_log {
                Some(path) => Some(crate::access::audit::AuditLog::open(path).map_err(
                    |source| ServerError::Audit {
                        path: path.clone(),
                        source,
                    },
                )?),
                None => None,
            };
        let state = Arc::new(ApiState {
            store: store.clone(),
            registry,
            validation: ValidationOptions {
                allow_loopback_endpoints: config.allow_loopback_endpoints,
            },
            token: token.clone(),
            signer,
            gc: Arc::new(tokio::sync::Notify::new()),
            bookmark_interval: config.bookmark_interval,
            audit,
        });
        let stop = CancellationToken::new();
        tokio::spawn(crate::storage::gc::run(
            store,
            state.gc.clone(),
            Duration::from_secs(10),
            stop.clone(),
        ));
        tokio::spawn(accept_loop(listener, tls, state.clone(), stop.clone()));
        tracing::info!(%addr, "embedded API server listening (development and test server, not a production control plane)");
        Ok(Self {
            addr,
            ca_pem: ca.cert_pem().to_owned(),
            token,
            state,
            stop,
        })
    }

    /// The HTTPS URL.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) clients trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The served types.
    pub fn registry(&self) -> &Registry {
        &self.state.registry
    }

    /// The store (for benchmarks and white-box tests).
    pub fn store(&self) -> &Arc<Store> {
        &self.state.store
    }

    /// A kubeconfig for this server: the CA and a bearer token.
    pub fn kubeconfig_yaml(&self) -> String {
        let ca = base64_encode(self.ca_pem.as_bytes());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fairlead\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: fairlead-admin\n  user:\n    token: {}\ncontexts:\n- name: fairlead\n  context:\n    cluster: fairlead\n    user: fairlead-admin\n    namespace: default\ncurrent-context: fairlead\n",
            self.url(),
            self.token
        )
    }

    /// Writes the kubeconfig (mode 0600: it holds the token).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), ServerError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| ServerError::Kubeconfig(e.to_string()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| ServerError::Kubeconfig(format!("{}: {e}", path.display())))?;
        file.write_all(self.kubeconfig_yaml().as_bytes())
            .map_err(|e| ServerError::Kubeconfig(format!("{}: {e}", path.display())))
    }

    /// A `kube::Client` for this server.
    pub async fn client(&self) -> Result<kube::Client, ServerError> {
        kube::Client::try_from(self.config().await?)
            .map_err(|e| ServerError::Kubeconfig(e.to_string()))
    }

    /// A `kube::Client` that impersonates `user` in `groups` (`Impersonate-User`,
    /// `Impersonate-Group`): how a component is given the identity it has in a cluster.
    pub async fn client_as(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<kube::Client, ServerError> {
        let mut config = self.config().await?;
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
        kube::Client::try_from(config).map_err(|e| ServerError::Kubeconfig(e.to_string()))
    }

    /// A `kube::Client` authenticating with `token` (a ServiceAccount's).
    pub async fn client_with_token(&self, token: &str) -> Result<kube::Client, ServerError> {
        kube::Client::try_from(self.config_with_token(token).await?)
            .map_err(|e| ServerError::Kubeconfig(e.to_string()))
    }

    /// A `kube::Client` for the ServiceAccount `namespace/account`, as a pod of it has one:
    /// its token in a file under `dir` that the client reads again every minute, renewed as
    /// the kubelet renews projected tokens (valid an hour, replaced after 40 minutes) until
    /// the server stops.
    pub async fn client_for_service_account(
        &self,
        namespace: &str,
        account: &str,
        dir: &Path,
    ) -> Result<kube::Client, ServerError> {
        const VALID: i64 = 3600;
        const RENEW: Duration = Duration::from_secs(40 * 60);
        let path = dir.join(format!("{namespace}_{account}.token"));
        let write = {
            let state = self.state.clone();
            let (namespace, account, path) =
                (namespace.to_owned(), account.to_owned(), path.clone());
            move || -> Result<(), ServerError> {
                let key = StoreKey::new("serviceaccounts", &namespace, &account);
                let uid = state
                    .store
                    .get(&key)
                    .and_then(|sa| sa["metadata"]["uid"].as_str().map(str::to_owned))
                    .ok_or_else(|| {
                        ServerError::Token(format!(
                            "service account {namespace}/{account} does not exist"
                        ))
                    })?;
                let now = crate::access::tokens::unix_now();
                let token = state.signer.issue(
                    &namespace,
                    &account,
                    &uid,
                    &[crate::access::tokens::ISSUER.to_owned()],
                    now,
                    VALID,
                );
                write_private(&path, token.as_bytes())
                    .map_err(|e| ServerError::Token(format!("{}: {e}", path.display())))
            }
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| ServerError::Token(format!("{}: {e}", dir.display())))?;
        write()?;
        let stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RENEW) => {}
                }
                if let Err(e) = write() {
                    tracing::warn!(error = %e, "renewing a service account token");
                }
            }
        });
        let mut config = self.config().await?;
        config.auth_info.token = None;
        config.auth_info.token_file = Some(path.display().to_string());
        kube::Client::try_from(config).map_err(|e| ServerError::Kubeconfig(e.to_string()))
    }

    /// The client configuration of this server with `token` instead of the admin's.
    pub async fn config_with_token(&self, token: &str) -> Result<kube::Config, ServerError> {
        let mut config = self.config().await?;
        config.auth_info.token = Some(token.to_owned().into());
        Ok(config)
    }

    async fn config(&self) -> Result<kube::Config, ServerError> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml())
            .map_err(|e| ServerError::Kubeconfig(e.to_string()))?;
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| ServerError::Kubeconfig(e.to_string()))
    }

    /// Stops accepting and ends open connections and watches.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

/// Writes `bytes` to `path` readable by its owner only, replacing it whole.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    state: Arc<ApiState>,
    stop: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::warn!(error = %err, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let tls = tls.clone();
        let state = state.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let stream = match tls.accept(stream).await {
                Ok(s) => s,
                Err(err) => {
                    tracing::debug!(%peer, error = %err, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(api::handle(state, request).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                () = stop.cancelled() => {}
                result = connection => if let Err(err) = result {
                    tracing::debug!(%peer, error = %err, "connection ended");
                },
            }
        });
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64_encode(input.as_bytes()), expected);
        }
    }
}
