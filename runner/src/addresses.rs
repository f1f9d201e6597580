//! The loopback addresses the runner gives out, one pool per use (`127.B.1.N` Gateways,
//! `127.B.2.N` Services, `127.B.3.N` pods; N from 1 to 254), so nothing the runner starts
//! listens on every interface of a laptop, and two Gateways on port 80 do not collide; the
//! block `B` is one `fairlead up` holds ([`Block::take`]: 0 unless another holds it), so two
//! of them on one machine do not share addresses (Envoy binds with `SO_REUSEPORT`, so a
//! shared address would split one's traffic with the other's); and bind failures in words a
//! user can act on.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

/// A pool of loopback addresses: `127.<block>.<pool>.1` to `127.<block>.<pool>.254`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The block.
    pub block: u8,
    /// The pool within it.
    pub pool: u8,
}

/// The block of loopback addresses one `fairlead up` gives out, held for its life.
#[derive(Debug)]
pub struct Block {
    /// `B` of `127.B.0.0/16`.
    pub number: u8,
    /// The lock: a listener on the block's own address, which no other `fairlead up` can
    /// bind while this one lives.
    _lock: std::net::TcpListener,
}

/// The port of a block's lock, on `127.B.0.1`.
const LOCK_PORT: u16 = 47_474;

impl Block {
    /// Takes block `number`, or the first free one from 0 when `None`; why not.
    pub fn take(number: Option<u8>) -> Result<Self, String> {
        let candidates: Vec<u8> = match number {
            Some(n) => vec![n],
            None => (0..=255).collect(),
        };
        for n in candidates {
            let address = std::net::SocketAddr::from(([127, n, 0, 1], LOCK_PORT));
            match std::net::TcpListener::bind(address) {
                Ok(lock) => {
                    return Ok(Self {
                        number: n,
                        _lock: lock,
                    });
                }
                Err(e) if number.is_some() => {
                    return Err(format!(
                        "loopback block 127.{n}.0.0/16 is not free ({}); another fairlead up holds it, so pick another with --loopback-block",
                        describe(&format!("tcp/{address}"), &e)
                    ));
                }
                Err(_) => {}
            }
        }
        Err("every loopback block 127.B.0.0/16 is held by another fairlead up".into())
    }

    /// Its Gateways' listen addresses.
    pub fn gateways(&self) -> Pool {
        self.pool(1)
    }

    /// Its Services' addresses.
    pub fn services(&self) -> Pool {
        self.pool(2)
    }

    /// Its pods' addresses.
    pub fn pods(&self) -> Pool {
        self.pool(3)
    }

    fn pool(&self, pool: u8) -> Pool {
        Pool {
            block: self.number,
            pool,
        }
    }
}

impl Pool {
    /// Whether `ip` is one of the pool's.
    pub fn contains(self, ip: IpAddr) -> bool {
        matches!(ip, IpAddr::V4(v4) if v4.octets()[..3] == [127, self.block, self.pool] && (1..=254).contains(&v4.octets()[3]))
    }

    /// The lowest address of the pool not in `taken`.
    pub fn free(self, taken: &BTreeSet<IpAddr>) -> Option<IpAddr> {
        (1..=254)
            .map(|n| IpAddr::V4(Ipv4Addr::new(127, self.block, self.pool, n)))
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
        let gateways = Pool { block: 0, pool: 1 };
        let assigned = gateways.assign(&holders);
        assert_eq!(assigned["a/first"], ip(2));
        assert_eq!(assigned["a/second"], ip(1));
        assert_eq!(assigned["b/copy"], ip(3));
        assert_eq!(assigned["b/foreign"], ip(4));
        assert!(!gateways.contains(ip(0)) && !gateways.contains("127.0.0.1".parse().unwrap()));
        let services = Pool { block: 0, pool: 2 };
        assert!(!services.contains(ip(1)));
        let other = Pool { block: 7, pool: 3 };
        assert!(other.contains("127.7.3.9".parse().unwrap()));
        assert!(!other.contains("127.0.3.9".parse().unwrap()));
        assert_eq!(
            other.free(&BTreeSet::new()),
            Some("127.7.3.1".parse().unwrap())
        );
    }

    #[test]
    fn two_runners_take_two_blocks() {
        let first = Block::take(Some(201)).unwrap();
        assert_eq!(
            first.pods().free(&BTreeSet::new()),
            Some("127.201.3.1".parse().unwrap())
        );
        let taken = Block::take(Some(201)).unwrap_err();
        assert!(taken.contains("--loopback-block"), "{taken}");
        let any = Block::take(None).unwrap();
        assert_ne!(any.number, first.number, "the first free one");
        drop(first);
        assert_eq!(Block::take(Some(201)).unwrap().number, 201, "free again");
    }
}
