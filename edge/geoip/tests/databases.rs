//! The databases the tests use, read three ways: by the `maxminddb` crate (what the
//! geoproxy checks downloads with), by Debian's `mmdblookup` (libmaxminddb, the library
//! Envoy's MaxMind provider is built on), and at the paths Envoy's provider reads (country
//! `iso_code`, city `names.en`, the first subdivision's `iso_code`, the autonomous system's
//! number, `isp`, the anonymity flags). MaxMind's own test databases, and databases written
//! here with `mmdb-writer` for every edition, which the download check takes as their
//! edition — and refuses as any other, or when older than the one held.

use std::net::IpAddr;
use std::process::Command;

use fairlead_edge_geoip::Edition;
use fairlead_edge_geoip::archive::{self, ArchiveError};

fn data(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// What `mmdblookup` prints at `path` for `ip` in `file`: the value without its type
/// annotation (`"GB" <utf8_string>` is `GB`), `None` when the address or path is not there.
fn mmdblookup(file: &std::path::Path, ip: &str, path: &[&str]) -> Option<String> {
    let out = Command::new("mmdblookup")
        .arg("--file")
        .arg(file)
        .args(["--ip", ip])
        .args(path)
        .output()
        .expect("mmdblookup (Debian mmdb-bin; scripts/setup installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let value = text.split('<').next()?.trim().trim_matches('"').to_owned();
    (out.status.success() && !value.is_empty()).then_some(value)
}

/// The same path read with the `maxminddb` crate.
fn crate_lookup(file: &std::path::Path, ip: &str, path: &[&str]) -> Option<String> {
    let reader = maxminddb::Reader::open_readfile(file).unwrap();
    let address: IpAddr = ip.parse().unwrap();
    let record: serde_json::Value = reader.lookup(address).unwrap()?;
    let mut value = &record;
    for step in path {
        value = match step.parse::<usize>() {
            Ok(i) => value.get(i)?,
            Err(_) => value.get(*step)?,
        };
    }
    Some(match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// The paths Envoy's provider reads from each kind of database.
const CITY: &[&[&str]] = &[
    &["country", "iso_code"],
    &["city", "names", "en"],
    &["subdivisions", "0", "iso_code"],
];
const ASN: &[&[&str]] = &[&["autonomous_system_number"]];
const ISP: &[&[&str]] = &[&["isp"], &["autonomous_system_number"]];
const ANONYMOUS: &[&[&str]] = &[
    &["is_anonymous"],
    &["is_anonymous_vpn"],
    &["is_hosting_provider"],
    &["is_tor_exit_node"],
    &["is_public_proxy"],
];

/// Compares both readers at `paths` for `ips` in `file`; how many values both found.
fn cross_check(file: &std::path::Path, ips: &[&str], paths: &[&[&str]]) -> usize {
    let mut found = 0;
    for ip in ips {
        for path in paths {
            let (theirs, ours) = (mmdblookup(file, ip, path), crate_lookup(file, ip, path));
            assert_eq!(
                theirs,
                ours,
                "{} {ip} {path:?}: libmaxminddb and the maxminddb crate disagree",
                file.display()
            );
            found += usize::from(theirs.is_some());
        }
    }
    found
}

#[test]
fn maxminds_test_databases_read_the_same_with_libmaxminddb() {
    let ips = [
        "81.2.69.142",
        "81.2.69.160",
        "2.125.160.216",
        "1.128.0.1",
        "149.101.100.0",
        "1.2.0.0",
        "10.0.0.1",
        "2001:218::1",
    ];
    for (file, paths, at_least) in [
        ("GeoIP2-City-Test.mmdb", CITY, 6),
        ("GeoLite2-City-Test.mmdb", CITY, 6),
        ("GeoLite2-ASN-Test.mmdb", ASN, 2),
        ("GeoIP2-ISP-Test.mmdb", ISP, 4),
        ("GeoIP2-Anonymous-IP-Test.mmdb", ANONYMOUS, 6),
    ] {
        let found = cross_check(&data(file), &ips, paths);
        assert!(found >= at_least, "{file}: only {found} values found");
    }
    // The values the end-to-end tests expect of Envoy.
    let city = data("GeoIP2-City-Test.mmdb");
    assert_eq!(
        mmdblookup(&city, "81.2.69.142", &["city", "names", "en"]).as_deref(),
        Some("London")
    );
    assert_eq!(
        mmdblookup(
            &data("GeoLite2-ASN-Test.mmdb"),
            "1.128.0.1",
            &["autonomous_system_number"]
        )
        .as_deref(),
        Some("1221")
    );
}

/// A database of `edition`'s type, built at `epoch`, holding `record` for 81.2.69.0/24
/// (and 2001:db8::/32).
fn written(database_type: &str, epoch: u64, record: serde_json::Value) -> Vec<u8> {
    let mut writer = mmdb_writer::Writer::builder(database_type)
        .build_epoch(std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch))
        .build();
    for network in ["81.2.69.0/24", "2001:db8::/32"] {
        writer
            .insert(network.parse::<ipnet::IpNet>().unwrap(), &record)
            .unwrap();
    }
    writer.to_bytes().unwrap()
}

#[test]
fn written_databases_of_every_edition_are_taken_as_theirs_only() {
    let dir = tempfile::tempdir().unwrap();
    for edition in Edition::ALL {
        let (record, paths): (serde_json::Value, &[&[&str]]) = match edition {
            Edition::City | Edition::LiteCity => (
                serde_json::json!({"country": {"iso_code": "FR"},
                    "city": {"names": {"en": "Paris"}}, "subdivisions": [{"iso_code": "IDF"}]}),
                CITY,
            ),
            Edition::Asn | Edition::LiteAsn => {
                (serde_json::json!({"autonomous_system_number": 64_512}), ASN)
            }
            Edition::Isp => (
                serde_json::json!({"isp": "Example ISP", "autonomous_system_number": 64_513}),
                ISP,
            ),
            Edition::AnonymousIp => (
                serde_json::json!({"is_anonymous": true, "is_anonymous_vpn": true,
                    "is_hosting_provider": false, "is_tor_exit_node": false,
                    "is_public_proxy": false}),
                ANONYMOUS,
            ),
        };
        let bytes = written(edition.database_type(), 1_770_000_000, record);
        let file = dir.path().join(edition.mmdb());
        std::fs::write(&file, &bytes).unwrap();
        let found = cross_check(&file, &["81.2.69.142", "2001:db8::7", "10.0.0.1"], paths);
        assert_eq!(
            found,
            2 * paths.len(),
            "{edition}: both networks, every path"
        );
        // Taken as its edition (and packed, unpacked, taken again), refused as another, and
        // refused when older than the one held.
        let database = archive::check(edition, bytes.clone(), None).unwrap();
        assert_eq!(database.build_epoch, 1_770_000_000);
        let tarball = archive::pack(&database).unwrap();
        assert_eq!(
            archive::validate(edition, &tarball, Some(1_760_000_000))
                .unwrap()
                .mmdb,
            bytes
        );
        let other = Edition::ALL.into_iter().find(|e| *e != edition).unwrap();
        assert!(
            matches!(
                archive::check(other, bytes.clone(), None),
                Err(ArchiveError::WrongEdition { .. })
            ),
            "{edition} taken as {other}"
        );
        assert!(
            archive::check(edition, bytes, Some(1_780_000_000)).is_err(),
            "{edition}: an older build replaced a newer one"
        );
    }
}
