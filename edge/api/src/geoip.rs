//! What `spec.geoIP` means to Envoy, without I/O: the MaxMind editions an instance may name,
//! the database path of Envoy's MaxMind provider each fills ([`Slot`]), the header fields of
//! `spec.geoIP.headers` (the provider's `geo_field_keys`, [`Field`]) and the slot each reads,
//! so the CRD, the translator, the controller and the geoproxy agree on one table.

use std::fmt;
use std::str::FromStr;

/// The directory, relative to the proxy container's working directory (which the gateway
/// controller mounts it under and Envoy runs in), where the downloader beside Envoy keeps the
/// databases: `<dir>/<Edition>.mmdb`. Relative, so one listener serves every pod whatever
/// its file layout (`fairlead up`'s pods each have their own).
pub const PROXY_DIR: &str = "geoip";

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Slot {
    /// `city_db_path` (also country and region).
    City,
    /// `asn_db_path`.
    Asn,
    /// `isp_db_path` (also the ASN, when no ASN edition is named).
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

    /// Where Envoy opens it, relative to its working directory ([`PROXY_DIR`]).
    pub fn proxy_path(self) -> String {
        format!("{PROXY_DIR}/{}", self.mmdb())
    }
}

impl serde::Serialize for Edition {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
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

/// A key of `spec.geoIP.headers`: what the header carries (the provider's `geo_field_keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// The country's ISO code.
    Country,
    /// The city's English name.
    City,
    /// The least specific subdivision's ISO code.
    Region,
    /// The autonomous system's number.
    Asn,
    /// Whether the address is anonymous (`true`/`false`).
    Anon,
    /// … a VPN.
    AnonVpn,
    /// … a hosting provider.
    AnonHosting,
    /// … a Tor exit node.
    AnonTor,
    /// … a public proxy.
    AnonProxy,
    /// The ISP's name.
    Isp,
    /// Whether the address is Apple's iCloud Private Relay.
    ApplePrivateRelay,
}

impl Field {
    /// Every field, in the provider's order.
    pub const ALL: [Field; 11] = [
        Field::Country,
        Field::City,
        Field::Region,
        Field::Asn,
        Field::Anon,
        Field::AnonVpn,
        Field::AnonHosting,
        Field::AnonTor,
        Field::AnonProxy,
        Field::Isp,
        Field::ApplePrivateRelay,
    ];

    /// Its key in `spec.geoIP.headers` (and in `geo_field_keys`).
    pub fn key(self) -> &'static str {
        match self {
            Field::Country => "country",
            Field::City => "city",
            Field::Region => "region",
            Field::Asn => "asn",
            Field::Anon => "anon",
            Field::AnonVpn => "anon_vpn",
            Field::AnonHosting => "anon_hosting",
            Field::AnonTor => "anon_tor",
            Field::AnonProxy => "anon_proxy",
            Field::Isp => "isp",
            Field::ApplePrivateRelay => "apple_private_relay",
        }
    }

    /// The provider paths it can be read from, in the provider's order of preference: a
    /// header set without any of them would make Envoy look up a database it does not have.
    pub fn slots(self) -> &'static [Slot] {
        match self {
            Field::Country | Field::City | Field::Region => &[Slot::City],
            Field::Asn => &[Slot::Asn, Slot::Isp],
            Field::Anon
            | Field::AnonVpn
            | Field::AnonHosting
            | Field::AnonTor
            | Field::AnonProxy => &[Slot::Anonymous],
            Field::Isp | Field::ApplePrivateRelay => &[Slot::Isp],
        }
    }

    /// The editions that can serve it.
    pub fn editions(self) -> Vec<Edition> {
        Edition::ALL
            .into_iter()
            .filter(|e| self.slots().contains(&e.slot()))
            .collect()
    }
}

impl serde::Serialize for Field {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.key())
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A header field no [`Field`] is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown GeoIP header field {0:?} (one of {fields})", fields = Field::ALL.map(Field::key).join(", "))]
pub struct UnknownField(pub String);

impl FromStr for Field {
    type Err = UnknownField;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Field::ALL
            .into_iter()
            .find(|f| f.key() == text)
            .ok_or_else(|| UnknownField(text.to_owned()))
    }
}

/// Request headers GeoIP may not name: what frames or routes a request, what Envoy and the
/// backends rely on to know the client and the request (removed from every request before
/// anything reads it, and set from a database, each would break them).
pub const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-real-ip",
    "x-request-id",
    "traceparent",
    "tracestate",
    "authorization",
    "cookie",
];

/// Whether `name` is an HTTP header name (an RFC 9110 token), as Envoy takes one.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// What is wrong with `headers` (`spec.geoIP.headers`) of an instance whose client address
/// comes from `real_ip_header` (`originalIPDetection.realIPHeader`): each problem with the
/// field it is about (`spec.geoIP.headers.<field>`). A name that is not an HTTP header name
/// (the client-address header's too), a name reserved ([`RESERVED_HEADERS`], `x-envoy-*`,
/// a pseudo-header), the client-address header itself, or a header two fields name.
pub fn header_problems(
    headers: &std::collections::BTreeMap<String, String>,
    real_ip_header: Option<&str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: std::collections::BTreeMap<String, &str> = Default::default();
    let real_ip = real_ip_header.map(|h| h.trim().to_ascii_lowercase());
    if let Some(header) = real_ip_header.filter(|h| !is_header_name(h.trim())) {
        problems.push(format!(
            "spec.originalIPDetection.realIPHeader: {header:?} is not an HTTP header name"
        ));
    }
    for (field, header) in headers {
        let name = header.trim().to_ascii_lowercase();
        let path = format!("spec.geoIP.headers.{field}");
        if !is_header_name(&name) {
            problems.push(format!("{path}: {header:?} is not an HTTP header name"));
        } else if RESERVED_HEADERS.contains(&name.as_str())
            || name.starts_with("x-envoy-")
            || name.starts_with(':')
        {
            problems.push(format!(
                "{path}: {header:?} is a header requests and proxies rely on; name another"
            ));
        } else if real_ip.as_deref() == Some(name.as_str()) {
            problems.push(format!(
                "{path}: {header:?} is spec.originalIPDetection.realIPHeader, the client's address; name another"
            ));
        } else if let Some(other) = seen.insert(name, field) {
            problems.push(format!(
                "{path}: {header:?} is also spec.geoIP.headers.{other}; one header per field"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for edition in Edition::ALL {
            assert_eq!(edition.id().parse::<Edition>().unwrap(), edition);
        }
        assert!("GeoIP2-Country".parse::<Edition>().is_err());
        for field in Field::ALL {
            assert_eq!(field.key().parse::<Field>().unwrap(), field);
        }
        let unknown = "continent".parse::<Field>().unwrap_err().to_string();
        assert!(
            unknown.starts_with("unknown GeoIP header field \"continent\" (one of ")
                && unknown.contains("country"),
            "{unknown}"
        );
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

    #[test]
    fn headers_that_would_break_requests_are_named() {
        let headers = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(
            header_problems(
                &headers(&[("country", "x-geo-country"), ("city", "X-Geo-City")]),
                Some("X-Real-IP")
            )
            .is_empty()
        );
        let problems = header_problems(
            &headers(&[
                ("asn", "X-Forwarded-For"),
                ("city", "X-Client"),
                ("country", "x-geo"),
                ("region", "X-GEO"),
                ("isp", "x-envoy-original-path"),
            ]),
            Some("x-client"),
        );
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(problems[0].starts_with("spec.geoIP.headers.asn: \"X-Forwarded-For\""));
        assert!(problems[1].contains("realIPHeader"));
        assert!(problems[2].starts_with("spec.geoIP.headers.isp"));
        assert!(
            problems[3].starts_with("spec.geoIP.headers.region") && problems[3].contains("country")
        );
        // Found by fuzzing (fuzz/regressions/translate): a client-address header that is no
        // header name became a listener Envoy refuses.
        let problems = header_problems(&headers(&[("city", "x geo")]), Some("X Real\nIP"));
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].starts_with("spec.originalIPDetection.realIPHeader"));
        assert!(
            problems[1].starts_with("spec.geoIP.headers.city")
                && problems[1].contains("not an HTTP header name")
        );
    }

    #[test]
    fn every_field_is_served_by_some_edition() {
        for field in Field::ALL {
            assert!(!field.editions().is_empty(), "{field}");
        }
        assert_eq!(
            Field::Asn.editions(),
            [Edition::Isp, Edition::Asn, Edition::LiteAsn],
            "the ASN comes from an ASN edition or the ISP one"
        );
        assert_eq!(
            Field::Country.editions(),
            [Edition::City, Edition::LiteCity]
        );
    }
}
