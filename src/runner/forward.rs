//! Forwarders, as kube-proxy's userspace mode was: a listening address whose connections
//! (TCP) or datagrams (UDP, a session per client address, closed after a minute idle) go to
//! one of the current targets, in turn. The runner puts one on each port of a LoadBalancer
//! Service's address and on each host port of its pods.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a UDP session lives without traffic.
const UDP_IDLE: Duration = Duration::from_secs(60);

/// A running forwarder.
pub struct Forwarder {
    /// Its targets (replaced as pods come and go).
    pub targets: watch::Sender<Vec<SocketAddr>>,
    /// Stops it.
    pub stop: CancellationToken,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Binds `address` (UDP when `udp`) and forwards to `targets`; the bind error, in words a
/// user can act on, when it cannot.
pub async fn start(
    address: SocketAddr,
    udp: bool,
    targets: Vec<SocketAddr>,
) -> Result<Forwarder, String> {
    let (tx, rx) = watch::channel(targets);
    let stop = CancellationToken::new();
    let describe = |e: std::io::Error| {
        let what = format!("{}/{address}", if udp { "udp" } else { "tcp" });
        super::addresses::describe(&what, &e)
    };
    if udp {
        let socket = UdpSocket::bind(address).await.map_err(describe)?;
        tokio::spawn(datagrams(Arc::new(socket), rx, stop.clone()));
    } else {
        let listener = TcpListener::bind(address).await.map_err(describe)?;
        tokio::spawn(connections(listener, rx, stop.clone()));
    }
    Ok(Forwarder { targets: tx, stop })
}

fn pick(targets: &watch::Receiver<Vec<SocketAddr>>, turn: &AtomicUsize) -> Option<SocketAddr> {
    let targets = targets.borrow();
    (!targets.is_empty()).then(|| targets[turn.fetch_add(1, Ordering::Relaxed) % targets.len()])
}

async fn connections(
    listener: TcpListener,
    targets: watch::Receiver<Vec<SocketAddr>>,
    stop: CancellationToken,
) {
    let turn = AtomicUsize::new(0);
    loop {
        let (mut inbound, _) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
        };
        // No target: the connection is closed, as a Service without endpoints refuses.
        let Some(target) = pick(&targets, &turn) else {
            continue;
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            tokio::select! {
                () = stop.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
            }
        });
    }
}

async fn datagrams(
    socket: Arc<UdpSocket>,
    targets: watch::Receiver<Vec<SocketAddr>>,
    stop: CancellationToken,
) {
    let turn = AtomicUsize::new(0);
    let mut sessions: HashMap<SocketAddr, (Arc<UdpSocket>, CancellationToken)> = HashMap::new();
    let mut buffer = vec![0u8; 65_536];
    loop {
        let (n, client) = tokio::select! {
            () = stop.cancelled() => return,
            received = socket.recv_from(&mut buffer) => match received {
                Ok(received) => received,
                Err(_) => continue,
            },
        };
        sessions.retain(|_, (_, ended)| !ended.is_cancelled());
        let upstream = match sessions.get(&client) {
            Some((upstream, _)) => upstream.clone(),
            None => {
                let Some(target) = pick(&targets, &turn) else {
                    continue;
                };
                let bind: SocketAddr = if target.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    ([0u16; 8], 0).into()
                };
                let Ok(upstream) = UdpSocket::bind(bind).await else {
                    continue;
                };
                if upstream.connect(target).await.is_err() {
                    continue;
                }
                let upstream = Arc::new(upstream);
                let ended = stop.child_token();
                tokio::spawn(replies(
                    upstream.clone(),
                    socket.clone(),
                    client,
                    ended.clone(),
                ));
                sessions.insert(client, (upstream.clone(), ended));
                upstream
            }
        };
        let _ = upstream.send(&buffer[..n]).await;
    }
}

/// Sends a session's replies back to its client until it has been idle for [`UDP_IDLE`].
async fn replies(
    upstream: Arc<UdpSocket>,
    socket: Arc<UdpSocket>,
    client: SocketAddr,
    ended: CancellationToken,
) {
    let mut buffer = vec![0u8; 65_536];
    loop {
        tokio::select! {
            () = ended.cancelled() => return,
            received = tokio::time::timeout(UDP_IDLE, upstream.recv(&mut buffer)) => match received {
                Ok(Ok(n)) => { let _ = socket.send_to(&buffer[..n], client).await; }
                _ => { ended.cancel(); return; }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn connections_and_datagrams_reach_a_target() {
        let backend = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = backend.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = backend.accept().await.unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await.unwrap();
            s.write_all(&b).await.unwrap();
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let forwarder = start(port, false, vec![target]).await.unwrap();
        let mut client = tokio::net::TcpStream::connect(port).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        client.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
        // A taken address is said so.
        let taken = start(port, false, vec![]).await.err().unwrap();
        assert!(taken.contains("in use"), "{taken}");
        drop(forwarder);

        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let mut b = [0u8; 16];
            let (n, from) = echo.recv_from(&mut b).await.unwrap();
            echo.send_to(&b[..n], from).await.unwrap();
        });
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let _udp = start(port, true, vec![target]).await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.send_to(b"dns?", port).await.unwrap();
        let mut b = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&b[..n], b"dns?");
    }
}
