//! The suite's WebSocket check (`HTTPRouteBackendProtocolWebSocket`): a WebSocket opened to
//! `/ws` through a Gateway sends a text and a binary message back as they went.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use super::{World, consistently};

/// Opens a WebSocket to `ws://<address>/ws` with `origin` and has the echo send a text and a
/// binary message back; what went wrong, when something did.
pub async fn echo(address: &str, origin: &str) -> Result<(), String> {
    let mut request = format!("ws://{address}/ws")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    request
        .headers_mut()
        .insert("origin", origin.parse().map_err(|e| format!("{e}"))?);
    let (mut socket, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::connect_async(request),
    )
    .await
    .map_err(|_| "no WebSocket within 10 s".to_owned())?
    .map_err(|e| format!("dialing: {e}"))?;
    for message in [
        Message::text("Websocket Support!"),
        Message::binary(vec![1, 2, 3, 4, 5, 6, 7]),
    ] {
        socket
            .send(message.clone())
            .await
            .map_err(|e| format!("sending: {e}"))?;
        let reply = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .map_err(|_| "no reply within 10 s".to_owned())?;
        match reply {
            Some(Ok(reply)) if reply == message => {}
            other => return Err(format!("sent {message:?}, got {other:?}")),
        }
    }
    let _ = socket.close(None).await;
    Ok(())
}

impl World {
    /// Waits until WebSockets through the Gateway `gateway`'s listener on `port` echo their
    /// messages [`super::IN_A_ROW`] times in a row.
    pub async fn expect_websocket(&self, gateway: &str, port: u16) {
        let address = self.gateway(gateway, port);
        let held = consistently(async || {
            echo(&address, "ws://gateway/HTTPRouteBackendProtocolWebSocket")
                .await
                .map_err(|e| format!("ws://{address}/ws: {e}"))
        })
        .await;
        if let Err(seen) = held {
            panic!("{seen}");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::echo::{Pod, serve};

    /// The echo's `/ws` sends each message back, as the client checks.
    #[tokio::test]
    async fn the_echo_sends_websocket_messages_back() {
        let port = serve(Pod {
            namespace: "ns".into(),
            name: "pod".into(),
        })
        .await;
        super::echo(&format!("127.0.0.1:{port}"), "ws://gateway/test")
            .await
            .expect("an echoing WebSocket");
    }
}
