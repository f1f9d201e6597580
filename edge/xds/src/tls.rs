//! The xDS server's transport: TLS (mutual when a client CA is given) from
//! [`fairlead_kit::tls`], whose certificate and CA are read again whenever their source
//! changes, and the identity each proxy proves. A proxy's client certificate carries a URI
//! SAN naming its Gateway (`spiffe://<trust domain>/ns/<namespace>/gateway/<name>`);
//! [`authorize`] lets it ask only for that Gateway's configuration. Expired certificates,
//! and certificates of another CA, fail the handshake.

use fairlead_key::ObjectKey;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;

pub use fairlead_kit::tls::Peer;
use fairlead_kit::tls::ServingTls;

/// The Gateway a SPIFFE ID of the form `spiffe://<domain>/ns/<namespace>/gateway/<name>`
/// names.
pub fn gateway_of(uri: &str) -> Option<ObjectKey> {
    let path = uri.strip_prefix("spiffe://")?.split_once('/')?.1;
    match path.split('/').collect::<Vec<_>>()[..] {
        ["ns", namespace, "gateway", name] if !namespace.is_empty() && !name.is_empty() => {
            Some(ObjectKey::new(namespace, name))
        }
        _ => None,
    }
}

/// Whether `peer` may receive `gateway`'s configuration: always without mutual TLS (the
/// server warns at start that any client may then name any Gateway), else only when its
/// certificate names that Gateway. The refusal says what the certificate names.
pub fn authorize(peer: Option<&Peer>, gateway: &ObjectKey) -> Result<(), String> {
    let Some(peer) = peer.filter(|p| p.mutual) else {
        return Ok(());
    };
    let named: Vec<ObjectKey> = peer
        .identities
        .iter()
        .filter_map(|uri| gateway_of(uri))
        .collect();
    if named.contains(gateway) {
        return Ok(());
    }
    Err(match named.as_slice() {
        [] => format!(
            "the client certificate names no Gateway (URI SANs: {:?}); a proxy may ask only for the Gateway its certificate names, not {gateway}",
            peer.identities
        ),
        named => format!(
            "the client certificate names Gateway {}; it may not ask for {gateway}",
            named
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// A TLS connection and its peer, as tonic serves it.
pub struct Connection {
    stream: TlsStream<TcpStream>,
    peer: Peer,
}

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl tokio::io::AsyncRead for Connection {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Connection {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The connections of `listener` after their TLS handshake (HTTP/2) with the configuration
/// `source` holds at the time, each with its [`Peer`].
pub fn incoming(
    listener: tokio::net::TcpListener,
    source: watch::Receiver<Option<ServingTls>>,
) -> impl futures::Stream<Item = Result<Connection, std::io::Error>> {
    use futures::StreamExt as _;
    fairlead_kit::tls::incoming(listener, source, &[b"h2"], "xds").map(|accepted| {
        accepted.map(|a| Connection {
            stream: a.stream,
            peer: a.peer,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_may_ask_only_for_the_gateway_its_certificate_names() {
        let main = ObjectKey::new("d8-alb", "main");
        assert_eq!(
            gateway_of("spiffe://cluster.local/ns/d8-alb/gateway/main"),
            Some(main.clone())
        );
        assert_eq!(gateway_of("spiffe://cluster.local/ns/d8-alb/sa/main"), None);
        assert_eq!(gateway_of("https://example.com/ns/a/gateway/b"), None);
        let peer = Peer {
            mutual: true,
            identities: vec!["spiffe://cluster.local/ns/d8-alb/gateway/main".into()],
        };
        assert_eq!(authorize(Some(&peer), &main), Ok(()));
        let refused = authorize(Some(&peer), &ObjectKey::new("team", "shop")).unwrap_err();
        assert!(
            refused.contains("names Gateway d8-alb/main") && refused.contains("team/shop"),
            "{refused}"
        );
        let anonymous = Peer {
            mutual: true,
            identities: vec![],
        };
        assert!(
            authorize(Some(&anonymous), &main)
                .unwrap_err()
                .contains("names no Gateway")
        );
        // Without mutual TLS there is no identity to check.
        assert_eq!(authorize(None, &main), Ok(()));
        assert_eq!(authorize(Some(&Peer::default()), &main), Ok(()));
    }
}
