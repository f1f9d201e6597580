//! What a download must be before anything keeps it: a gzip'd tar holding exactly one
//! `.mmdb`, which opens as a MaxMind database whose metadata names the edition asked for and
//! whose build is not older than the one already held. A corrupt or wrong download is an
//! error naming why, and never replaces a good database. [`pack`] makes the tarball shape
//! MaxMind serves (and the geoproxy serves on).

use std::io::Read as _;

use crate::Edition;

/// The largest database taken (MaxMind's City is about 130 MB).
pub const MAX_DATABASE_BYTES: u64 = 1 << 30;

/// Addresses looked up in every database before it is taken (spread over both families).
const PROBES: [&str; 8] = [
    "0.0.0.0",
    "1.1.1.1",
    "81.2.69.142",
    "128.0.0.1",
    "255.255.255.255",
    "::1",
    "2001:db8::1",
    "ffff::1",
];

/// A checked database.
#[derive(Clone, Debug)]
pub struct Database {
    /// The edition.
    pub edition: Edition,
    /// The `.mmdb` file's bytes.
    pub mmdb: Vec<u8>,
    /// When MaxMind built it (seconds since the epoch, from its metadata).
    pub build_epoch: u64,
}

/// Why a download was refused.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Not gzip, or a broken tar.
    #[error("not a gzip'd tar archive: {0}")]
    Unpack(#[source] std::io::Error),
    /// No `.mmdb` inside.
    #[error("the archive holds no .mmdb file")]
    NoDatabase,
    /// More than one `.mmdb` inside.
    #[error("the archive holds more than one .mmdb file ({0})")]
    SeveralDatabases(String),
    /// The database is larger than [`MAX_DATABASE_BYTES`].
    #[error("the database is larger than {MAX_DATABASE_BYTES} bytes")]
    TooLarge,
    /// It does not open as a MaxMind database.
    #[error("not a MaxMind database: {0}")]
    Corrupt(String),
    /// Its metadata names another edition.
    #[error("the database is a {found}, not a {wanted}")]
    WrongEdition {
        /// The edition asked for.
        wanted: Edition,
        /// Its metadata's `database_type`.
        found: String,
    },
    /// Its build is older than the one held.
    #[error("the database was built at {found}, before the one held ({held})")]
    Older {
        /// Its build epoch.
        found: u64,
        /// The held database's.
        held: u64,
    },
}

/// Checks `mmdb` as a database of `edition`, not older than `held` (a build epoch).
pub fn check(edition: Edition, mmdb: Vec<u8>, held: Option<u64>) -> Result<Database, ArchiveError> {
    let reader = maxminddb::Reader::from_source(mmdb.as_slice())
        .map_err(|e| ArchiveError::Corrupt(e.to_string()))?;
    let metadata = &reader.metadata;
    if metadata.database_type != edition.database_type() {
        return Err(ArchiveError::WrongEdition {
            wanted: edition,
            found: metadata.database_type.clone(),
        });
    }
    // Opening reads the metadata only: look addresses up across the tree, so a database
    // whose search tree or data is broken is refused here, not served to Envoy.
    for address in PROBES {
        let ip: std::net::IpAddr = address.parse().expect("the probes are addresses");
        reader
            .lookup::<serde::de::IgnoredAny>(ip)
            .map_err(|e| ArchiveError::Corrupt(format!("looking up {address}: {e}")))?;
    }
    let build_epoch = metadata.build_epoch;
    if let Some(held) = held.filter(|held| build_epoch < *held) {
        return Err(ArchiveError::Older {
            found: build_epoch,
            held,
        });
    }
    Ok(Database {
        edition,
        mmdb,
        build_epoch,
    })
}

/// The one `.mmdb` of the gzip'd tar `tarball`.
pub fn unpack(tarball: &[u8]) -> Result<Vec<u8>, ArchiveError> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    let mut found: Option<(String, Vec<u8>)> = None;
    for entry in archive.entries().map_err(ArchiveError::Unpack)? {
        let mut entry = entry.map_err(ArchiveError::Unpack)?;
        let path = entry
            .path()
            .map_err(ArchiveError::Unpack)?
            .display()
            .to_string();
        if !entry.header().entry_type().is_file() || !path.ends_with(".mmdb") {
            continue;
        }
        if let Some((first, _)) = &found {
            return Err(ArchiveError::SeveralDatabases(format!("{first}, {path}")));
        }
        if entry.size() > MAX_DATABASE_BYTES {
            return Err(ArchiveError::TooLarge);
        }
        let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        entry
            .by_ref()
            .take(MAX_DATABASE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(ArchiveError::Unpack)?;
        found = Some((path, bytes));
    }
    found
        .map(|(_, bytes)| bytes)
        .ok_or(ArchiveError::NoDatabase)
}

/// Unpacks and checks the tarball `tarball` of `edition` against the build `held`.
pub fn validate(
    edition: Edition,
    tarball: &[u8],
    held: Option<u64>,
) -> Result<Database, ArchiveError> {
    check(edition, unpack(tarball)?, held)
}

/// The tarball of `database`, as MaxMind lays it out: `<Edition>_<date>/<Edition>.mmdb`.
pub fn pack(database: &Database) -> std::io::Result<Vec<u8>> {
    let date = date_of(database.build_epoch);
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    let mut header = tar::Header::new_gnu();
    header.set_size(database.mmdb.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(database.build_epoch);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(
        &mut header,
        format!(
            "{}_{date}/{}",
            database.edition.id(),
            database.edition.mmdb()
        ),
        database.mmdb.as_slice(),
    )?;
    builder.into_inner()?.finish()
}

/// The UTC date of `epoch` as `YYYYMMDD` (MaxMind's `date`).
pub fn date_of(epoch: u64) -> String {
    // Howard Hinnant's days-to-civil.
    let days = i64::try_from(epoch / 86_400).unwrap_or(i64::MAX);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_database(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(date_of(0), "19700101");
        assert_eq!(date_of(951_782_400), "20000229");
        assert_eq!(date_of(1_767_225_599), "20251231");
    }

    #[test]
    fn a_packed_database_unpacks_and_checks() {
        let city = check(Edition::City, test_database("GeoIP2-City-Test.mmdb"), None).unwrap();
        let tarball = pack(&city).unwrap();
        let back = validate(Edition::City, &tarball, Some(city.build_epoch)).unwrap();
        assert_eq!(back.mmdb, city.mmdb);
        assert!(
            matches!(
                validate(Edition::City, &tarball, Some(city.build_epoch + 1)),
                Err(ArchiveError::Older { .. })
            ),
            "an older build is refused"
        );
    }

    #[test]
    fn wrong_and_broken_downloads_are_refused_saying_why() {
        let asn = test_database("GeoLite2-ASN-Test.mmdb");
        let err = check(Edition::City, asn, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the database is a GeoLite2-ASN, not a GeoIP2-City"
        );
        assert!(matches!(
            check(Edition::City, b"not a database".to_vec(), None),
            Err(ArchiveError::Corrupt(_))
        ));
        assert!(matches!(
            unpack(b"plain text"),
            Err(ArchiveError::Unpack(_))
        ));
        // The right edition with its search tree overwritten: it opens (the metadata is
        // intact) and is refused as corrupt.
        let mut broken = test_database("GeoIP2-City-Test.mmdb");
        broken[..64].fill(0xff);
        let err = check(Edition::City, broken, None).unwrap_err();
        assert!(matches!(err, ArchiveError::Corrupt(_)), "{err}");
        let corrupt = test_database("libmaxminddb-corrupt-search-tree.mmdb");
        assert!(check(Edition::City, corrupt, None).is_err());
        let empty = {
            let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::default(),
            ));
            let mut header = tar::Header::new_gnu();
            header.set_size(2);
            header.set_mode(0o644);
            builder
                .append_data(&mut header, "README.txt", b"hi".as_slice())
                .unwrap();
            builder.into_inner().unwrap().finish().unwrap()
        };
        assert!(matches!(unpack(&empty), Err(ArchiveError::NoDatabase)));
    }
}
