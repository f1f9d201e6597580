//! A pod's access to the API, as the kubelet projects it: a token of the pod's
//! ServiceAccount (a TokenRequest, valid an hour, renewed after 40 minutes) in
//! `<pod>/serviceaccount/token`, and a kubeconfig beside it that reads that file
//! (`KUBECONFIG` in the containers' environment, which kube clients read before looking for
//! an in-cluster configuration). Pods with `automountServiceAccountToken: false` get none.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fairlead_key::ObjectKey;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::Value;

/// Where the API server is, for the pods' kubeconfigs.
#[derive(Clone, Debug)]
pub struct ApiAccess {
    /// Its URL.
    pub url: String,
    /// The CA (PEM) its certificate chains to.
    pub ca_pem: String,
}

/// How long a token is valid.
const VALID: i64 = 3600;

/// How old a token gets before it is renewed.
const RENEW: Duration = Duration::from_secs(40 * 60);

/// Why a pod's token could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The API refused the TokenRequest (the ServiceAccount does not exist yet, say).
    #[error("a token of ServiceAccount {account}: {source}")]
    Request {
        /// The ServiceAccount.
        account: ObjectKey,
        /// The API's answer.
        source: kube::Error,
    },
    /// The API answered without a token.
    #[error("no token for ServiceAccount {0}")]
    Empty(ObjectKey),
    /// The files could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One pod's ServiceAccount token and kubeconfig.
pub struct Account {
    namespace: String,
    name: String,
    dir: PathBuf,
    access: ApiAccess,
    renewed: Option<Instant>,
}

impl Account {
    /// The account of `pod_spec` (in `namespace`), its files under `root`; `None` when the
    /// pod asks for no token.
    pub fn of(root: &Path, namespace: &str, pod_spec: &Value, access: &ApiAccess) -> Option<Self> {
        if pod_spec["automountServiceAccountToken"] == false {
            return None;
        }
        Some(Self {
            namespace: namespace.to_owned(),
            name: pod_spec["serviceAccountName"]
                .as_str()
                .unwrap_or("default")
                .to_owned(),
            dir: root.join("serviceaccount"),
            access: access.clone(),
            renewed: None,
        })
    }

    /// The ServiceAccount.
    fn account(&self) -> ObjectKey {
        ObjectKey::new(&self.namespace, &self.name)
    }

    /// The kubeconfig the containers are given.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// Writes the token (and the kubeconfig) when there is none or it is due for renewal;
    /// why it could not (the ServiceAccount does not exist yet, say).
    pub async fn refresh(&mut self, client: &kube::Client) -> Result<(), AccountError> {
        if self.renewed.is_some_and(|at| at.elapsed() < RENEW) {
            return Ok(());
        }
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &self.namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(VALID),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answer = accounts
            .create_token_request(&self.name, &PostParams::default(), &request)
            .await
            .map_err(|source| AccountError::Request {
                account: self.account(),
                source,
            })?;
        let token = answer
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| AccountError::Empty(self.account()))?;
        let io = |source| AccountError::Write {
            path: self.dir.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let token_file = self.dir.join("token");
        fairlead_kit::files::write_atomically(&token_file, token.as_bytes(), 0o600).map_err(io)?;
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "fairlead", "cluster": {"server": self.access.url,
                "certificate-authority-data": base64(self.access.ca_pem.as_bytes())}}],
            "users": [{"name": self.name, "user": {"tokenFile": token_file.display().to_string()}}],
            "contexts": [{"name": "pod", "context": {"cluster": "fairlead", "user": self.name,
                "namespace": self.namespace}}],
            "current-context": "pod",
        });
        fairlead_kit::files::write_atomically(
            &self.kubeconfig(),
            kubeconfig.to_string().as_bytes(),
            0o600,
        )
        .map_err(io)?;
        self.renewed = Some(Instant::now());
        Ok(())
    }
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
