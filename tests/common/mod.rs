//! What several test binaries share: a MaxMind mirror serving the databases a test
//! publishes, and City databases written for a test.

use std::time::Duration;

/// A City database as MaxMind's GeoIP2-City is laid out (what Envoy's provider reads),
/// written here: 81.2.69.0/24 in `city`, `country`, `region`, built at `epoch`.
pub fn city_database(epoch: u64, city: &str, country: &str, region: &str) -> Vec<u8> {
    let mut writer = mmdb_writer::Writer::builder("GeoIP2-City")
        .build_epoch(std::time::UNIX_EPOCH + Duration::from_secs(epoch))
        .build();
    let record = serde_json::json!({
        "city": {"names": {"en": city}},
        "country": {"iso_code": country},
        "subdivisions": [{"iso_code": region}],
    });
    writer
        .insert("81.2.69.0/24".parse::<ipnet::IpNet>().unwrap(), &record)
        .unwrap();
    writer.to_bytes().unwrap()
}

/// A mirror of MaxMind's tarballs (`/<Edition>.tar.gz`) on 127.0.0.2 (not 127.0.0.1, which
/// a pod of `fairlead up` reads as its own address), whose databases a test replaces.
pub struct Mirror {
    /// Its URL (`<url>/<Edition>.tar.gz`).
    pub url: String,
    tarballs: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Vec<u8>>>>,
}

impl Mirror {
    /// A mirror serving nothing yet.
    pub async fn start() -> Self {
        let tarballs = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
            String,
            Vec<u8>,
        >::new()));
        let served = tarballs.clone();
        let router = axum::Router::new().route(
            "/{file}",
            axum::routing::get(
                move |axum::extract::Path(file): axum::extract::Path<String>| {
                    let served = served.clone();
                    async move {
                        match served.lock().unwrap().get(&file) {
                            Some(bytes) => Ok(bytes.clone()),
                            None => Err(axum::http::StatusCode::NOT_FOUND),
                        }
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { url, tarballs }
    }

    /// Serves `mmdb` (checked as `edition`) from now on.
    pub fn publish(&self, edition: &str, mmdb: Vec<u8>) {
        let edition: fairlead_edge_geoip::Edition = edition.parse().unwrap();
        let database = fairlead_edge_geoip::archive::check(edition, mmdb, None).unwrap();
        let tarball = fairlead_edge_geoip::archive::pack(&database).unwrap();
        self.tarballs
            .lock()
            .unwrap()
            .insert(edition.tarball(), tarball);
    }
}
