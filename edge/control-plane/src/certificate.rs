//! The xDS server's serving certificate from where it is kept: a `kubernetes.io/tls` Secret
//! the gateway controller issues (`tls.crt`, `tls.key`, and `ca.crt`, the CA the proxies'
//! client certificates chain to), watched so a renewed certificate is served from the next
//! handshake on; or files, read again every [`FILE_POLL`].

use std::path::PathBuf;
use std::time::Duration;

use fairlead_edge_xds::serve::XdsTls;
use fairlead_key::ObjectKey;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often certificate files are read again.
pub const FILE_POLL: Duration = Duration::from_secs(10);

/// The TLS material of a Secret, when it holds a certificate and key.
pub fn from_secret(secret: &Secret) -> Option<XdsTls> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .filter(|t| !t.trim().is_empty())
    };
    Some(XdsTls {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        client_ca_pem: text("ca.crt"),
    })
}

fn same(a: &XdsTls, b: &XdsTls) -> bool {
    a.cert_pem == b.cert_pem && a.key_pem == b.key_pem && a.client_ca_pem == b.client_ca_pem
}

/// The serving certificate of the Secret `key`, kept current until `stop` (`None` until the
/// Secret exists).
pub fn watch_secret(
    client: kube::Client,
    key: ObjectKey,
    stop: CancellationToken,
) -> watch::Receiver<Option<XdsTls>> {
    use futures::StreamExt as _;
    let (tx, rx) = watch::channel(None);
    let api: Api<Secret> = Api::namespaced(client, key.namespace());
    let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name()));
    tokio::spawn(async move {
        let mut events = std::pin::pin!(kube::runtime::WatchStreamExt::default_backoff(
            kube::runtime::WatchStreamExt::applied_objects(watcher(api, config))
        ));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                event = events.next() => match event {
                    Some(Ok(secret)) => {
                        let tls = from_secret(&secret);
                        if tls.is_none() {
                            tracing::warn!(secret = %key, "the xDS serving certificate Secret holds no tls.crt and tls.key");
                        }
                        tx.send_if_modified(|current: &mut Option<XdsTls>| {
                            let Some(tls) = tls else { return false };
                            if current.as_ref().is_some_and(|c| same(c, &tls)) {
                                return false;
                            }
                            *current = Some(tls);
                            true
                        });
                    }
                    Some(Err(e)) => tracing::warn!(secret = %key, error = %e, "watching the xDS serving certificate; retrying"),
                    None => return,
                },
            }
        }
    });
    rx
}

/// The serving certificate of files (`cert`, `key`, and the client CA), read now and again
/// every [`FILE_POLL`] until `stop`; an error when they cannot be read now.
pub fn watch_files(
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    stop: CancellationToken,
) -> std::io::Result<watch::Receiver<Option<XdsTls>>> {
    let read = move || -> std::io::Result<XdsTls> {
        Ok(XdsTls {
            cert_pem: std::fs::read_to_string(&cert)?,
            key_pem: std::fs::read_to_string(&key)?,
            client_ca_pem: client_ca
                .as_ref()
                .map(std::fs::read_to_string)
                .transpose()?,
        })
    };
    let (tx, rx) = watch::channel(Some(read()?));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(FILE_POLL) => {}
            }
            match read() {
                Ok(tls) => {
                    tx.send_if_modified(|current: &mut Option<XdsTls>| {
                        if current.as_ref().is_some_and(|c| same(c, &tls)) {
                            return false;
                        }
                        *current = Some(tls);
                        true
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the xDS serving certificate files; keeping the last ones")
                }
            }
        }
    });
    Ok(rx)
}
