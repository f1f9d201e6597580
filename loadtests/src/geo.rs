//! GeoIP for a scenario: a mirror of MaxMind's tarballs (`<url>/<Edition>.tar.gz`) serving
//! MaxMind's own test databases (GeoIP2-City-Test, GeoLite2-ASN-Test, from
//! `edge/geoip/tests/data/`), which an instance annotated `loadtest.fairlead.io/mirror`
//! downloads from; `geo.js` asks with addresses those databases hold. The tests publish
//! databases of their own on the same mirror.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fairlead_edge_geoip::Edition;

/// MaxMind's test databases, by edition.
pub const TEST_DATABASES: [(&str, &[u8]); 2] = [
    (
        "GeoIP2-City",
        include_bytes!("../../edge/geoip/tests/data/GeoIP2-City-Test.mmdb"),
    ),
    (
        "GeoLite2-ASN",
        include_bytes!("../../edge/geoip/tests/data/GeoLite2-ASN-Test.mmdb"),
    ),
];

/// What the mirror cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// Not an edition fairlead knows.
    #[error("edition {0:?}: {1}")]
    Edition(String, String),
    /// Not a database of that edition.
    #[error("edition {0}: {1}")]
    Database(String, fairlead_edge_geoip::archive::ArchiveError),
    /// The tarball could not be written.
    #[error("edition {0}: packing: {1}")]
    Pack(String, std::io::Error),
}

type Tarballs = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// A mirror on 127.0.0.2 (not 127.0.0.1, which a pod of `fairlead up` reads as its own
/// address), serving until dropped.
pub struct Mirror {
    /// Its URL (`<url>/<Edition>.tar.gz`).
    pub url: String,
    tarballs: Tarballs,
    _stop: tokio_util::sync::DropGuard,
}

impl Mirror {
    /// A mirror serving nothing yet.
    pub async fn start() -> std::io::Result<Self> {
        let tarballs = Tarballs::default();
        let served = tarballs.clone();
        let router = axum::Router::new().route(
            "/{file}",
            axum::routing::get(
                move |axum::extract::Path(file): axum::extract::Path<String>| {
                    let served = served.clone();
                    async move {
                        let tarballs = served
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        tarballs
                            .get(&file)
                            .cloned()
                            .ok_or(axum::http::StatusCode::NOT_FOUND)
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        Ok(Self {
            url,
            tarballs,
            _stop: crate::echo::serve_axum(listener, router, "the GeoIP mirror"),
        })
    }

    /// Serves `mmdb` (checked to be a database of `edition`) from now on.
    pub fn publish(&self, edition: &str, mmdb: Vec<u8>) -> Result<(), MirrorError> {
        let edition = edition
            .parse::<Edition>()
            .map_err(|e| MirrorError::Edition(edition.to_owned(), e.to_string()))?;
        let id = edition.id().to_owned();
        let database = fairlead_edge_geoip::archive::check(edition, mmdb, None)
            .map_err(|e| MirrorError::Database(id.clone(), e))?;
        let tarball =
            fairlead_edge_geoip::archive::pack(&database).map_err(|e| MirrorError::Pack(id, e))?;
        self.tarballs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(edition.tarball(), tarball);
        Ok(())
    }

    /// A mirror of [`TEST_DATABASES`].
    pub async fn of_test_databases() -> anyhow::Result<Self> {
        let mirror = Self::start().await?;
        for (edition, mmdb) in TEST_DATABASES {
            mirror.publish(edition, mmdb.to_vec())?;
        }
        Ok(mirror)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_mirror_serves_the_test_databases_as_tarballs_and_refuses_what_is_not_one() {
        let mirror = Mirror::of_test_databases().await.unwrap();
        let tarball = reqwest::get(format!("{}/GeoIP2-City.tar.gz", mirror.url))
            .await
            .unwrap();
        assert_eq!(tarball.status(), 200);
        let bytes = tarball.bytes().await.unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip");
        let missing = reqwest::get(format!("{}/GeoIP2-ISP.tar.gz", mirror.url))
            .await
            .unwrap();
        assert_eq!(missing.status(), 404);
        let (_, asn) = TEST_DATABASES[1];
        let e = mirror.publish("GeoIP2-City", asn.to_vec()).unwrap_err();
        assert!(e.to_string().contains("GeoIP2-City"), "{e}");
        assert!(mirror.publish("Nope", Vec::new()).is_err());
    }
}
