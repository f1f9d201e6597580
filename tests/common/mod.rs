//! What several test binaries share: the MaxMind mirror of `fairlead loadtest` (serving
//! the databases a test publishes), and City databases written for a test.

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

pub use fairlead_loadtest::geo::Mirror;
