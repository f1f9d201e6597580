//! How a command reaches a cluster, as kubectl does: `--kubeconfig FILE` and `--context NAME`
//! when given; otherwise `KUBECONFIG` (or `~/.kube/config`) with its current context, and in
//! a pod its ServiceAccount.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The options of every command that talks to a cluster.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClusterArgs {
    /// The kubeconfig to use, as kubectl's `--kubeconfig`; without it `KUBECONFIG`, then
    /// `~/.kube/config`, then the pod's ServiceAccount in a cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use, as kubectl's `--context`; the current one without it.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig named could not be read.
    #[error("reading the kubeconfig {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig does not give a usable configuration (e.g. no such context).
    #[error("the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// Neither a kubeconfig nor a pod's ServiceAccount was found.
    #[error(
        "finding the cluster (KUBECONFIG, ~/.kube/config, or in a pod its ServiceAccount): {0}"
    )]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("connecting to the Kubernetes API: {0}")]
    Client(#[from] kube::Error),
}

impl ClusterArgs {
    /// The client configuration these options name.
    pub async fn config(&self) -> Result<kube::Config, ClusterError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        Ok(match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let file = Kubeconfig::read_from(path).map_err(|source| ClusterError::Read {
                    path: path.clone(),
                    source,
                })?;
                kube::Config::from_custom_kubeconfig(file, &options).await?
            }
            (None, Some(_)) => kube::Config::from_kubeconfig(&options).await?,
            (None, None) => kube::Config::infer().await?,
        })
    }

    /// A client of the cluster these options name.
    pub async fn client(&self) -> Result<kube::Client, ClusterError> {
        Ok(kube::Client::try_from(self.config().await?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CONTEXTS: &str = "apiVersion: v1
kind: Config
clusters:
- {name: one, cluster: {server: 'https://127.0.0.1:1111'}}
- {name: two, cluster: {server: 'https://127.0.0.1:2222'}}
users:
- {name: me, user: {token: t}}
contexts:
- {name: first, context: {cluster: one, user: me}}
- {name: second, context: {cluster: two, user: me}}
current-context: first
";

    fn args(dir: &tempfile::TempDir, context: Option<&str>) -> ClusterArgs {
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, TWO_CONTEXTS).unwrap();
        ClusterArgs {
            kubeconfig: Some(path),
            context: context.map(str::to_owned),
        }
    }

    #[tokio::test]
    async fn the_kubeconfig_and_context_given_are_the_ones_used() {
        let dir = tempfile::tempdir().unwrap();
        let current = args(&dir, None).config().await.unwrap();
        assert_eq!(current.cluster_url.port_u16(), Some(1111));
        let second = args(&dir, Some("second")).config().await.unwrap();
        assert_eq!(second.cluster_url.port_u16(), Some(2222));
    }

    #[tokio::test]
    async fn a_missing_file_or_context_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = args(&dir, Some("third")).config().await.unwrap_err();
        assert!(err.to_string().contains("third"), "{err}");
        let missing = ClusterArgs {
            kubeconfig: Some(dir.path().join("nowhere")),
            context: None,
        };
        let err = missing.config().await.unwrap_err();
        assert!(err.to_string().contains("nowhere"), "{err}");
    }
}
