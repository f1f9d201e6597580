//! Backends a world routes to: plain HTTP servers on loopback answering every request, with
//! their name, with the request's headers, or with its target (after a delay), or with a
//! large response header; and the Service that reaches one ([`service`]).

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The YAML of a Service `namespace/name` (port `port`, named `http`) whose one endpoint is
/// the backend at `127.0.0.1:<target>` (an EndpointSlice of its own, as the endpoint
/// controller would write).
pub fn service(namespace: &str, name: &str, port: u16, target: u16) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{ports: [{{name: http, port: {port}, targetPort: {target}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}, namespace: {namespace}, labels: {{kubernetes.io/service-name: {name}}}}}
addressType: IPv4
ports: [{{name: http, port: {target}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]
---
"
    )
}

/// A backend on `127.0.0.1` answering every request with `name`; its port.
pub async fn named(name: &'static str) -> u16 {
    named_at(name, "127.0.0.1:0").await.0
}

/// A backend at `addr` answering every request with `name` until its task is aborted (then
/// its port refuses connections, and its open ones end); its port and the task.
pub async fn named_at(name: &'static str, addr: &str) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            connections.spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{name}",
                    name.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
            // Finished connections are let go of as they end.
            while connections.try_join_next().is_some() {}
        }
    });
    (port, task)
}

/// A backend on `127.0.0.1` answering every request with its headers as a JSON object (names
/// lower-cased): what a proxy added or removed is seen; its port.
pub async fn echo() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                let headers: serde_json::Map<String, serde_json::Value> = request
                    .lines()
                    .skip(1)
                    .take_while(|l| !l.is_empty())
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().into()))
                    .collect();
                let body = serde_json::Value::Object(headers).to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// A backend on `127.0.0.1` answering every request with its request target (the path and
/// query the proxy sent), after `delay`; its port.
pub async fn paths(delay: std::time::Duration) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let head = whole_request(&mut socket).await;
                let target = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                tokio::time::sleep(delay).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{target}",
                    target.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// Reads a request whole (its head, then the body its `content-length` announces), so the
/// answer never races a body still arriving; its head.
async fn whole_request(socket: &mut tokio::net::TcpStream) -> String {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = socket.read(&mut buf).await {
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&data[..end]).into_owned();
        let length: usize = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            return head;
        }
    }
    String::from_utf8_lossy(&data).into_owned()
}

/// A backend on `127.0.0.1` answering every request with `name` and a response header of
/// `header_bytes` bytes (`x-padding`); its port.
pub async fn heavy(name: &'static str, header_bytes: usize) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let padding = "x".repeat(header_bytes);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let padding = padding.clone();
            tokio::spawn(async move {
                whole_request(&mut socket).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nx-padding: {padding}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{name}",
                    name.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}
