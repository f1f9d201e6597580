"""A real proxyless gRPC data plane for fairlead's xDS tests (PyPI grpcio).

Starts two gRPC servers on the given ports, answering every method with b"A" and b"B", then
opens one channel to xds:///echo.example.com:50051 (GRPC_XDS_BOOTSTRAP names the bootstrap)
and serves commands from stdin, one per line:

    call N [HEADER]   make N calls of /echo.Echo/Say (with metadata x-backend: HEADER when
                      given) and print {"A": a, "B": b, "errors": e, "codes": [...]} as one
                      JSON line
    path METHOD N     make N calls of METHOD (a full path, such as /one) and print the same;
                      these do not wait for a ready channel, so a route that fails RPCs
                      answers UNAVAILABLE at once

The channel lives for the whole run, so a test sees configuration changes arrive on a stream
that never reconnects.
"""

import json
import sys
from concurrent import futures

import grpc


class Answer(grpc.GenericRpcHandler):
    """Answers every method with one fixed message."""

    def __init__(self, answer):
        self.answer = answer

    def service(self, handler_call_details):
        return grpc.unary_unary_rpc_method_handler(lambda request, context: self.answer)


def server(port, answer):
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    s.add_generic_rpc_handlers((Answer(answer),))
    s.add_insecure_port(f"127.0.0.1:{port}")
    s.start()
    return s


def calls(channel, method, count, metadata, wait):
    invoke = channel.unary_unary(method)
    counts = {"A": 0, "B": 0, "errors": 0, "codes": []}
    for _ in range(count):
        try:
            answer = invoke(b"hi", metadata=metadata, timeout=10, wait_for_ready=wait)
            counts[answer.decode()] += 1
        except grpc.RpcError as e:
            counts["errors"] += 1
            counts["codes"].append(f"{e.code().name}: {e.details()}")
    return counts


def main():
    port_a, port_b = int(sys.argv[1]), int(sys.argv[2])
    servers = [server(port_a, b"A"), server(port_b, b"B")]
    channel = grpc.insecure_channel("xds:///echo.example.com:50051")
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "call":
            metadata = (("x-backend", words[2]),) if len(words) > 2 else ()
            counts = calls(channel, "/echo.Echo/Say", int(words[1]), metadata, True)
        elif words[0] == "path":
            counts = calls(channel, words[1], int(words[2]), (), False)
        else:
            counts = {"error": f"unknown command {words[0]}"}
        print(json.dumps(counts), flush=True)
    channel.close()
    for s in servers:
        s.stop(0)


if __name__ == "__main__":
    main()
