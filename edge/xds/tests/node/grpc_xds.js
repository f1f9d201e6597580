// A real proxyless gRPC data plane for fairlead's xDS tests (npm @grpc/grpc-js-xds), the
// twin of ../grpc_xds.py: two gRPC servers on the given ports answering /echo.Echo/Say with
// "A" and "B", one channel to xds:///echo.example.com:50051 (GRPC_XDS_BOOTSTRAP names the
// bootstrap), and commands from stdin, one per line:
//
//     call N [HEADER]   make N calls (with metadata x-backend: HEADER when given) and print
//                       {"A": a, "B": b, "errors": e, "codes": [...]} as one JSON line
//
// The channel lives for the whole run, so a test sees configuration changes arrive on a
// stream that never reconnects.
"use strict";

const grpc = require("@grpc/grpc-js");
require("@grpc/grpc-js-xds").register();
const readline = require("node:readline");

const identity = (x) => x;
const say = {
  path: "/echo.Echo/Say",
  requestStream: false,
  responseStream: false,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
};

function serve(port, answer) {
  return new Promise((resolve, reject) => {
    const server = new grpc.Server();
    server.addService({ Say: say }, { Say: (_call, done) => done(null, Buffer.from(answer)) });
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(server),
    );
  });
}

function call(client, header) {
  return new Promise((resolve) => {
    const metadata = new grpc.Metadata();
    if (header) metadata.set("x-backend", header);
    client.makeUnaryRequest(
      say.path,
      identity,
      identity,
      Buffer.from("hi"),
      metadata,
      { deadline: Date.now() + 10000, waitForReady: true },
      (err, answer) => resolve(err ? { err } : { answer: answer.toString() }),
    );
  });
}

async function main() {
  const [portA, portB] = process.argv.slice(2).map(Number);
  const servers = [await serve(portA, "A"), await serve(portB, "B")];
  const client = new grpc.Client("xds:///echo.example.com:50051", grpc.credentials.createInsecure());
  process.stdout.write("ready\n");
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const words = line.split(/\s+/).filter(Boolean);
    if (words.length === 0) continue;
    if (words[0] !== "call") {
      process.stdout.write(JSON.stringify({ error: `unknown command ${words[0]}` }) + "\n");
      continue;
    }
    const counts = { A: 0, B: 0, errors: 0, codes: [] };
    for (let i = 0; i < Number(words[1]); i++) {
      const result = await call(client, words[2]);
      if (result.err) {
        counts.errors += 1;
        counts.codes.push(`${result.err.code}: ${result.err.details}`);
      } else {
        counts[result.answer] += 1;
      }
    }
    process.stdout.write(JSON.stringify(counts) + "\n");
  }
  client.close();
  servers.forEach((s) => s.forceShutdown());
}

main().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
