//! Forwarders, as kube-proxy's userspace mode was: a listening address whose connections
//! (TCP) or datagrams (UDP, a session per client address, closed after a minute idle) go to
//! one of the current targets, in turn. The runner puts one on each port of a LoadBalancer
//! Service's address and on each host port of its pods.
//!
//! Forwarders run on an executor of their own ([`data_path`]), as kube-proxy's rules live
//! apart from a cluster's control plane: on `up`'s shared runtime, a reconcile or a list
//! holding both worker threads for tens of milliseconds stalled every forwarded request
//! (a loadtest's p99 through a Service measured `up`'s control plane, not the ALB).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
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

/// The forwarders' executor: one worker thread of its own, which the OS schedules beside the
/// control plane's threads rather than behind its tasks.
static DATA_PATH: LazyLock<Result<tokio::runtime::Runtime, String>> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("fairlead-forward")
        .enable_all()
        .build()
        .map_err(|e| format!("the forwarders' executor: {e}"))
});

fn data_path() -> Result<&'static tokio::runtime::Handle, String> {
    DATA_PATH
        .as_ref()
        .map(tokio::runtime::Runtime::handle)
        .map_err(Clone::clone)
}

/// Binds `address` (UDP when `udp`) and forwards to `targets` on [`data_path`]; the bind
/// error, in words a user can act on, when it cannot.
pub fn start(
    address: SocketAddr,
    udp: bool,
    targets: Vec<SocketAddr>,
) -> Result<Forwarder, String> {
    let (tx, rx) = watch::channel(targets);
    let stop = CancellationToken::new();
    let what = || format!("{}/{address}", if udp { "udp" } else { "tcp" });
    let describe = |e: std::io::Error| super::addresses::describe(&what(), &e);
    let runtime = data_path()?;
    // Bound here, so a taken port is said to the caller; registered with the data path's
    // reactor inside it.
    if udp {
        let socket = std::net::UdpSocket::bind(address).map_err(describe)?;
        socket.set_nonblocking(true).map_err(describe)?;
        let _entered = runtime.enter();
        let socket = UdpSocket::from_std(socket).map_err(describe)?;
        runtime.spawn(datagrams(Arc::new(socket), rx, stop.clone()));
    } else {
        let listener = std::net::TcpListener::bind(address).map_err(describe)?;
        listener.set_nonblocking(true).map_err(describe)?;
        let _entered = runtime.enter();
        let listener = TcpListener::from_std(listener).map_err(describe)?;
        runtime.spawn(connections(listener, rx, stop.clone()));
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
        let forwarder = start(port, false, vec![target]).unwrap();
        let mut client = tokio::net::TcpStream::connect(port).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        client.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
        // A taken address is said so.
        let taken = start(port, false, vec![]).err().unwrap();
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
        let _udp = start(port, true, vec![target]).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.send_to(b"dns?", port).await.unwrap();
        let mut b = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&b[..n], b"dns?");
    }

    /// A forwarder keeps forwarding while the runtime that started it is busy: a client and a
    /// backend on plain threads, and the test's own (single) thread blocked meanwhile.
    #[tokio::test]
    async fn forwarding_does_not_wait_for_the_caller_s_runtime() {
        use std::io::{Read as _, Write as _};
        let backend = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = backend.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = backend.accept().unwrap();
            let mut b = [0u8; 4];
            while s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {}
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let _forwarder = start(port, false, vec![target]).unwrap();
        let client = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(port).unwrap();
            let started = std::time::Instant::now();
            s.write_all(b"ping").unwrap();
            let mut echoed = [0u8; 4];
            s.read_exact(&mut echoed).unwrap();
            (echoed, started.elapsed())
        });
        // The control plane's thread, hogged for a second, then free again.
        std::thread::sleep(Duration::from_secs(1));
        let (echoed, took) = tokio::task::spawn_blocking(move || client.join().unwrap())
            .await
            .unwrap();
        assert_eq!(&echoed, b"ping");
        assert!(
            took < Duration::from_millis(500),
            "a round trip took {took:?}"
        );
    }
}
