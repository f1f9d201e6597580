//! The loopback addresses the runner gives out, one pool per use (`127.0.1.N` Gateways,
//! `127.0.2.N` LoadBalancer Services, `127.0.3.N` pods; N from 1 to 254), so nothing the
//! runner starts listens on every interface of a laptop, and two Gateways on port 80 do not
//! collide; and bind failures in words a user can act on.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

/// A pool of loopback addresses: `127.0.<n>.1` to `127.0.<n>.254`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool(pub u8);

/// Gateways' listen addresses.
pub const GATEWAYS: Pool = Pool(1);
/// LoadBalancer Services' addresses.
pub const SERVICES: Pool = Pool(2);
/// Pods' addresses.
pub const PODS: Pool = Pool(3);

impl Pool {
    /// Whether `ip` is one of the pool's.
    pub fn contains(self, ip: IpAddr) -> bool {
        matches!(ip, IpAddr::V4(v4) if v4.octets()[..3] == [127, 0, self.0] && (1..=254).contains(&v4.octets()[3]))
    }

    /// The lowest address of the pool not in `taken`.
    pub fn free(self, taken: &BTreeSet<IpAddr>) -> Option<IpAddr> {
        (1..=254)
            .map(|n| IpAddr::V4(Ipv4Addr::new(127, 0, self.0, n)))
            .find(|ip| !taken.contains(ip))
    }

    /// Addresses for `holders` (each with the address it holds, if any): a holder keeps an
    /// address of the pool that no holder before it (in key order) holds; the others get the
    /// lowest free one. Holders beyond the pool's 254 addresses get none.
    pub fn assign<K: Ord + Clone>(
        self,
        holders: &BTreeMap<K, Option<IpAddr>>,
    ) -> BTreeMap<K, IpAddr> {
        let mut taken: BTreeSet<IpAddr> = BTreeSet::new();
        let mut out = BTreeMap::new();
        let mut waiting = Vec::new();
        for (key, held) in holders {
            match held {
                Some(ip) if self.contains(*ip) && taken.insert(*ip) => {
                    out.insert(key.clone(), *ip);
                }
                _ => waiting.push(key),
            }
        }
        for key in waiting {
            if let Some(ip) = self.free(&taken) {
                taken.insert(ip);
                out.insert(key.clone(), ip);
            }
        }
        out
    }
}

/// A bind failure of `what` (`tcp/127.0.2.1:80`) in words a user can act on.
pub fn describe(what: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "{what}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        ),
        std::io::ErrorKind::AddrInUse => format!("{what}: in use by another program"),
        _ => format!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 1, n))
    }

    #[test]
    fn holders_keep_their_address_and_the_others_get_the_lowest_free() {
        let holders: BTreeMap<&str, Option<IpAddr>> = [
            ("a/first", Some(ip(2))),
            ("a/second", None),
            // Holds what `first` holds: a new one.
            ("b/copy", Some(ip(2))),
            // Not of the pool: a new one.
            ("b/foreign", Some("10.0.0.1".parse().unwrap())),
        ]
        .into_iter()
        .collect();
        let assigned = GATEWAYS.assign(&holders);
        assert_eq!(assigned["a/first"], ip(2));
        assert_eq!(assigned["a/second"], ip(1));
        assert_eq!(assigned["b/copy"], ip(3));
        assert_eq!(assigned["b/foreign"], ip(4));
        assert!(!GATEWAYS.contains(ip(0)) && !GATEWAYS.contains("127.0.0.1".parse().unwrap()));
        assert!(!SERVICES.contains(ip(1)) && PODS.contains("127.0.3.9".parse().unwrap()));
    }
}
