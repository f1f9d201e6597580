//! Decisions for proxies that run on the machine itself (`fairlead up`): each Gateway gets a
//! loopback address of its own (`127.0.1.N`), so two Gateways listening on port 80 do not
//! collide and nothing listens on every interface of a laptop; and whether the ports of a
//! Gateway's listeners can be bound there, said in words a user can act on. Pure but for
//! the trial binds of [`unavailable_ports`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use fairlead_key::ObjectKey;

/// The first loopback address given out (`127.0.1.1`); the last is `127.0.1.254`.
const FIRST: u8 = 1;
const LAST: u8 = 254;

/// Whether `ip` is one of the addresses given out.
pub fn is_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v4) if v4.octets()[..3] == [127, 0, 1] && (FIRST..=LAST).contains(&v4.octets()[3]))
}

/// Loopback addresses for `gateways` (each with the address it holds, if any): a Gateway
/// keeps a local address it holds that no Gateway before it (in key order) holds; the others
/// get the lowest free one. Gateways beyond the 254 addresses get none.
pub fn assign(gateways: &BTreeMap<ObjectKey, Option<IpAddr>>) -> BTreeMap<ObjectKey, IpAddr> {
    let mut taken: BTreeSet<IpAddr> = BTreeSet::new();
    let mut out = BTreeMap::new();
    let mut waiting = Vec::new();
    for (key, held) in gateways {
        match held {
            Some(ip) if is_local(*ip) && taken.insert(*ip) => {
                out.insert(key.clone(), *ip);
            }
            _ => waiting.push(key),
        }
    }
    let mut free = (FIRST..=LAST)
        .map(|n| IpAddr::V4(Ipv4Addr::new(127, 0, 1, n)))
        .filter(|ip| !taken.contains(ip));
    for key in waiting {
        if let Some(ip) = free.next() {
            out.insert(key.clone(), ip);
        }
    }
    out
}

/// A listener's port and whether it is UDP.
pub type Port = (u16, bool);

/// Why each of `ports` cannot be bound on `ip` (none when all can): each is bound for a
/// moment and let go.
pub fn unavailable_ports(ip: IpAddr, ports: &BTreeSet<Port>) -> Vec<String> {
    ports
        .iter()
        .filter_map(|&(port, udp)| {
            let tried = if udp {
                std::net::UdpSocket::bind((ip, port)).map(drop)
            } else {
                std::net::TcpListener::bind((ip, port)).map(drop)
            };
            tried.err().map(|e| describe(ip, port, udp, &e))
        })
        .collect()
}

/// A bind failure in words a user can act on.
fn describe(ip: IpAddr, port: u16, udp: bool, e: &std::io::Error) -> String {
    let what = format!("{}/{ip}:{port}", if udp { "udp" } else { "tcp" });
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
    fn gateways_keep_their_address_and_the_others_get_the_lowest_free() {
        let gateways: BTreeMap<ObjectKey, Option<IpAddr>> = [
            (ObjectKey::new("a", "first"), Some(ip(2))),
            (ObjectKey::new("a", "second"), None),
            // Holds what `first` holds: a new one.
            (ObjectKey::new("b", "copy"), Some(ip(2))),
            // Not one of ours: a new one.
            (
                ObjectKey::new("b", "foreign"),
                Some("10.0.0.1".parse().unwrap()),
            ),
        ]
        .into_iter()
        .collect();
        let assigned = assign(&gateways);
        assert_eq!(assigned[&ObjectKey::new("a", "first")], ip(2));
        assert_eq!(assigned[&ObjectKey::new("a", "second")], ip(1));
        assert_eq!(assigned[&ObjectKey::new("b", "copy")], ip(3));
        assert_eq!(assigned[&ObjectKey::new("b", "foreign")], ip(4));
        assert!(!is_local(ip(0)) && !is_local("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn a_port_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let ports: BTreeSet<Port> = [(port, false), (port, true)].into_iter().collect();
        let problems = unavailable_ports("127.0.0.1".parse().unwrap(), &ports);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains(&format!("tcp/127.0.0.1:{port}: in use")),
            "{problems:?}"
        );
    }
}
