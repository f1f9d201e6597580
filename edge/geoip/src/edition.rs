//! The MaxMind editions an ALB instance may name, what each is to Envoy's MaxMind provider
//! (the database path it fills), and the `database_type` its metadata must carry.

use std::fmt;
use std::str::FromStr;

/// One edition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Edition {
    /// GeoIP2-Anonymous-IP.
    AnonymousIp,
    /// GeoIP2-City.
    City,
    /// GeoIP2-ISP.
    Isp,
    /// GeoIP2-ASN.
    Asn,
    /// GeoLite2-ASN.
    LiteAsn,
    /// GeoLite2-City.
    LiteCity,
}

/// The database path of Envoy's MaxMind provider an edition fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// `city_db_path` (also country and region).
    City,
    /// `asn_db_path`.
    Asn,
    /// `isp_db_path`.
    Isp,
    /// `anon_db_path`.
    Anonymous,
}

impl Edition {
    /// Every edition, in the CRD's order.
    pub const ALL: [Edition; 6] = [
        Edition::AnonymousIp,
        Edition::City,
        Edition::Isp,
        Edition::Asn,
        Edition::LiteAsn,
        Edition::LiteCity,
    ];

    /// Its edition ID, as MaxMind's URLs and the CRD name it.
    pub fn id(self) -> &'static str {
        match self {
            Edition::AnonymousIp => "GeoIP2-Anonymous-IP",
            Edition::City => "GeoIP2-City",
            Edition::Isp => "GeoIP2-ISP",
            Edition::Asn => "GeoIP2-ASN",
            Edition::LiteAsn => "GeoLite2-ASN",
            Edition::LiteCity => "GeoLite2-City",
        }
    }

    /// The `database_type` of its metadata (its ID: MaxMind's databases and their test
    /// databases carry it).
    pub fn database_type(self) -> &'static str {
        self.id()
    }

    /// The provider path it fills.
    pub fn slot(self) -> Slot {
        match self {
            Edition::City | Edition::LiteCity => Slot::City,
            Edition::Asn | Edition::LiteAsn => Slot::Asn,
            Edition::Isp => Slot::Isp,
            Edition::AnonymousIp => Slot::Anonymous,
        }
    }

    /// Whether it is a commercial (GeoIP2) edition, which wins its slot over a GeoLite2 one.
    pub fn commercial(self) -> bool {
        !matches!(self, Edition::LiteAsn | Edition::LiteCity)
    }

    /// The file names it is stored and served as.
    pub fn tarball(self) -> String {
        format!("{}.tar.gz", self.id())
    }

    /// The database file name (what Envoy opens).
    pub fn mmdb(self) -> String {
        format!("{}.mmdb", self.id())
    }
}

impl fmt::Display for Edition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// An edition ID MaxMind does not publish (or the ALB does not take).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown GeoIP edition {0:?} (one of GeoIP2-Anonymous-IP, GeoIP2-City, GeoIP2-ISP, GeoIP2-ASN, GeoLite2-ASN, GeoLite2-City)"
)]
pub struct UnknownEdition(pub String);

impl FromStr for Edition {
    type Err = UnknownEdition;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Edition::ALL
            .into_iter()
            .find(|e| e.id() == text)
            .ok_or_else(|| UnknownEdition(text.to_owned()))
    }
}

/// The edition of each provider path for `editions`: when two fill one path (GeoIP2-City and
/// GeoLite2-City), the commercial one wins.
pub fn by_slot(editions: &[Edition]) -> Vec<(Slot, Edition)> {
    let mut chosen: Vec<(Slot, Edition)> = Vec::new();
    for &edition in editions {
        match chosen.iter_mut().find(|(slot, _)| *slot == edition.slot()) {
            Some((_, held)) if !held.commercial() && edition.commercial() => *held = edition,
            Some(_) => {}
            None => chosen.push((edition.slot(), edition)),
        }
    }
    chosen.sort();
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_match_the_crd() {
        for edition in Edition::ALL {
            assert_eq!(edition.id().parse::<Edition>().unwrap(), edition);
        }
        assert_eq!(
            Edition::ALL.map(Edition::id),
            fairlead_edge_api::crd::GEOIP_EDITIONS
        );
        assert!("GeoIP2-Country".parse::<Edition>().is_err());
    }

    #[test]
    fn the_commercial_edition_wins_its_slot() {
        let slots = by_slot(&[Edition::LiteCity, Edition::City, Edition::LiteAsn]);
        assert_eq!(
            slots,
            [(Slot::City, Edition::City), (Slot::Asn, Edition::LiteAsn)]
        );
        let slots = by_slot(&[Edition::City, Edition::LiteCity]);
        assert_eq!(slots, [(Slot::City, Edition::City)]);
    }
}
