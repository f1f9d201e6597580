"""One HTTP/3 GET over QUIC with aioquic (a real HTTP/3 client): prints the status, then the
body. Usage: get.py HOST PORT AUTHORITY PATH. The server's certificate is not checked (the
test's CA is throwaway); the TLS server name is AUTHORITY, so SNI picks the filter chain."""

import asyncio
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.done = asyncio.get_running_loop().create_future()
        self.status = None
        self.body = b""

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                for key, value in e.headers:
                    if key == b":status":
                        self.status = int(value)
            elif isinstance(e, DataReceived):
                self.body += e.data
            if getattr(e, "stream_ended", False) and not self.done.done():
                self.done.set_result(True)


async def main(host, port, authority, path):
    configuration = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        verify_mode=ssl.CERT_NONE,
        server_name=authority,
    )
    async with connect(host, port, configuration=configuration, create_protocol=Client) as client:
        stream = client._quic.get_next_available_stream_id()
        client.h3.send_headers(
            stream,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
            ],
            end_stream=True,
        )
        client.transmit()
        await asyncio.wait_for(client.done, 10)
        print(client.status)
        print(client.body.decode())


asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
