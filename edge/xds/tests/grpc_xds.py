"""A real proxyless gRPC data plane for fairlead's xDS tests (PyPI grpcio).

Starts two gRPC servers on the given ports, answering /echo.Echo/Say with b"A" and b"B", then
opens one channel to xds:///echo.example.com:50051 (GRPC_XDS_BOOTSTRAP names the bootstrap)
and serves commands from stdin, one per line:

    call N [HEADER]   make N calls (with metadata x-backend: HEADER when given) and print
                      {"A": a, "B": b, "errors": e, "codes": [...]} as one JSON line

The channel lives for the whole run, so a test sees configuration changes arrive on a stream
that never reconnects.
"""

import json
import sys
from concurrent import futures

import grpc


def server(port, answer):
    def say(request, context):
        return answer

    handler = grpc.method_handlers_generic_handler(
        "echo.Echo", {"Say": grpc.unary_unary_rpc_method_handler(say)}
    )
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    s.add_generic_rpc_handlers((handler,))
    s.add_insecure_port(f"127.0.0.1:{port}")
    s.start()
    return s


def main():
    port_a, port_b = int(sys.argv[1]), int(sys.argv[2])
    servers = [server(port_a, b"A"), server(port_b, b"B")]
    channel = grpc.insecure_channel("xds:///echo.example.com:50051")
    say = channel.unary_unary("/echo.Echo/Say")
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] != "call":
            print(json.dumps({"error": f"unknown command {words[0]}"}), flush=True)
            continue
        count = int(words[1])
        metadata = (("x-backend", words[2]),) if len(words) > 2 else ()
        counts = {"A": 0, "B": 0, "errors": 0, "codes": []}
        for _ in range(count):
            try:
                answer = say(b"hi", metadata=metadata, timeout=10, wait_for_ready=True)
                counts[answer.decode()] += 1
            except grpc.RpcError as e:
                counts["errors"] += 1
                counts["codes"].append(f"{e.code().name}: {e.details()}")
        print(json.dumps(counts), flush=True)
    channel.close()
    for s in servers:
        s.stop(0)


if __name__ == "__main__":
    main()
