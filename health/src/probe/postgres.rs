//! PostgreSQL probe: log in with the credentials of the probe's Secret, run its query, and
//! pass when the first value of the first row is true: a boolean true, or what the Deckhouse
//! module also accepts (`1`, `t`, `true`, `y`, `yes`), so the documented default `select 1`
//! passes and `select not pg_is_in_recovery()` tells a primary from a replica.
//!
//! `tlsMode` as Deckhouse maps it: `Disabled` (plain), `SkipVerification` (encrypted, not
//! verified), `VerifyCA` (the chain only), `VerifyAll` (the chain and the pod IP in the
//! certificate); missing or unknown means `SkipVerification`. tokio-postgres has no
//! verification modes of its own, so they are rustls verifiers ([`super::tls`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use fairlead_health_api::{POSTGRESQL_CREDENTIALS_TYPE, PostgreSqlProbe};
use k8s_openapi::api::core::v1::Secret;
use tokio_postgres::SimpleQueryMessage;
use tokio_postgres::config::SslMode;

use super::tls::{self, ClientIdentity, Verify};
use super::{ProbeFailure, bounded};

/// The TLS mode of a credentials Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS.
    Disabled,
    /// Encrypted, any certificate.
    SkipVerification,
    /// Encrypted, the chain verified against the CA, any name.
    VerifyCa,
    /// Encrypted, the chain and the pod IP verified.
    VerifyAll,
}

impl TlsMode {
    /// Parses `tlsMode`; missing or unknown is `SkipVerification`, as in Deckhouse.
    pub fn parse(text: Option<&str>) -> Self {
        match text.map(str::trim) {
            Some("Disabled") => TlsMode::Disabled,
            Some("VerifyCA") => TlsMode::VerifyCa,
            Some("VerifyAll") => TlsMode::VerifyAll,
            _ => TlsMode::SkipVerification,
        }
    }
}

/// Credentials of a PostgreSQL probe. Never logged: `Debug` hides the secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Login user.
    pub user: String,
    /// Password, if any.
    pub password: Option<String>,
    /// TLS mode.
    pub tls_mode: TlsMode,
    /// Client certificate (PEM).
    pub client_cert: Option<String>,
    /// Client key (PEM).
    pub client_key: Option<String>,
    /// CA to verify the server with (PEM).
    pub ca_cert: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("tls_mode", &self.tls_mode)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Reads credentials from a Secret, which must have the dedicated type.
    pub fn from_secret(secret: &Secret) -> Result<Self, ProbeFailure> {
        let name = format!(
            "{}/{}",
            secret.metadata.namespace.as_deref().unwrap_or_default(),
            secret.metadata.name.as_deref().unwrap_or_default()
        );
        let type_ = secret.type_.as_deref().unwrap_or("Opaque");
        if type_ != POSTGRESQL_CREDENTIALS_TYPE {
            return Err(ProbeFailure::Config(format!(
                "Secret {name} has type {type_}; PostgreSQL probes read only Secrets of type {POSTGRESQL_CREDENTIALS_TYPE}"
            )));
        }
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        for (key, value) in secret.data.iter().flatten() {
            values.insert(key.clone(), String::from_utf8_lossy(&value.0).into_owned());
        }
        for (key, value) in secret.string_data.iter().flatten() {
            values.insert(key.clone(), value.clone());
        }
        let user = values
            .get("user")
            .filter(|u| !u.is_empty())
            .cloned()
            .ok_or_else(|| ProbeFailure::Config(format!("Secret {name} has no user")))?;
        Ok(Self {
            user,
            password: values.get("password").cloned(),
            tls_mode: TlsMode::parse(values.get("tlsMode").map(String::as_str)),
            client_cert: values.get("clientCert").cloned().filter(|v| !v.is_empty()),
            client_key: values.get("clientKey").cloned().filter(|v| !v.is_empty()),
            ca_cert: values.get("caCert").cloned().filter(|v| !v.is_empty()),
        })
    }
}

/// Whether a query result counts as true.
pub fn is_true(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "t" | "true" | "1" | "y" | "yes"
    )
}

/// Logs in to `addr` and runs the probe's query.
pub async fn probe(
    addr: SocketAddr,
    spec: &PostgreSqlProbe,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<(), ProbeFailure> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(addr.ip().to_string())
        .port(addr.port())
        .user(&credentials.user)
        .dbname(spec.db_name.as_deref().unwrap_or(&credentials.user))
        .connect_timeout(timeout)
        .application_name("fairlead-health");
    if let Some(password) = &credentials.password {
        config.password(password);
    }
    let query = if spec.query.trim().is_empty() {
        "select 1"
    } else {
        spec.query.as_str()
    };
    bounded(timeout, async move {
        let client = match credentials.tls_mode {
            TlsMode::Disabled => {
                config.ssl_mode(SslMode::Disable);
                let (client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(login_error)?;
                tokio::spawn(connection);
                client
            }
            mode => {
                config.ssl_mode(SslMode::Require);
                let verify = match mode {
                    TlsMode::VerifyAll => Verify::Full,
                    TlsMode::VerifyCa => Verify::ChainOnly,
                    _ => Verify::Nothing,
                };
                let identity = match (&credentials.client_cert, &credentials.client_key) {
                    (Some(cert), Some(key)) => Some(ClientIdentity {
                        cert_pem: cert,
                        key_pem: key,
                    }),
                    _ => None,
                };
                let tls_config = tls::client_config(
                    verify,
                    credentials.ca_cert.as_deref(),
                    identity,
                    &[b"postgresql"],
                )?;
                let connector =
                    tokio_postgres_rustls::MakeRustlsConnect::new((*tls_config).clone());
                let (client, connection) = config.connect(connector).await.map_err(login_error)?;
                tokio::spawn(connection);
                client
            }
        };
        let messages = client
            .simple_query(query)
            .await
            .map_err(|e| ProbeFailure::Postgres(db_message(&e)))?;
        let first = messages.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
            _ => None,
        });
        match first {
            Some(Some(value)) if is_true(&value) => Ok(()),
            Some(Some(value)) => Err(ProbeFailure::NotTrue(format!("{value:?}"))),
            Some(None) => Err(ProbeFailure::NotTrue("NULL".into())),
            None => Err(ProbeFailure::NotTrue("no rows".into())),
        }
    })
    .await
}

fn db_message(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut text = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(cause) = source {
                text = format!("{text}: {cause}");
                source = cause.source();
            }
            text
        }
    }
}

fn login_error(error: tokio_postgres::Error) -> ProbeFailure {
    let message = db_message(&error);
    if message.contains("certificate") || message.contains("tls") || message.contains("TLS") {
        ProbeFailure::Tls(message)
    } else if error.as_db_error().is_some() {
        ProbeFailure::Postgres(message)
    } else {
        ProbeFailure::Connect(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn truthy_values_follow_deckhouse() {
        for v in ["t", "true", "TRUE", "1", "y", "yes"] {
            assert!(is_true(v), "{v}");
        }
        for v in ["f", "false", "0", "no", "", "2"] {
            assert!(!is_true(v), "{v}");
        }
    }

    #[test]
    fn tls_modes_default_to_skip_verification() {
        assert_eq!(TlsMode::parse(None), TlsMode::SkipVerification);
        assert_eq!(TlsMode::parse(Some("Bogus")), TlsMode::SkipVerification);
        assert_eq!(TlsMode::parse(Some("VerifyCA")), TlsMode::VerifyCa);
    }

    fn secret(type_: &str) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("pg".into()),
                namespace: Some("db".into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some(BTreeMap::from([
                ("user".to_owned(), ByteString(b"probe".to_vec())),
                ("password".to_owned(), ByteString(b"hunter2".to_vec())),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn secrets_need_the_dedicated_type_and_never_show_the_password() {
        let err = Credentials::from_secret(&secret("Opaque")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Secret db/pg has type Opaque; PostgreSQL probes read only Secrets of type network.deckhouse.io/postgresql-credentials"
        );
        let creds = Credentials::from_secret(&secret(POSTGRESQL_CREDENTIALS_TYPE)).unwrap();
        assert_eq!(creds.user, "probe");
        assert!(!format!("{creds:?}").contains("hunter2"));
    }
}
