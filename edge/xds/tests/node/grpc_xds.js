// A real proxyless gRPC data plane for fairlead's xDS tests (npm @grpc/grpc-js-xds), the
// twin of ../grpc_xds.py: two gRPC servers on the given ports answering /echo.Echo/Say and
// the paths of PATHS with "A" and "B", one channel to xds:///echo.example.com:50051
// (GRPC_XDS_BOOTSTRAP names the bootstrap), and commands from stdin, one per line:
//
//     call N [HEADER]   make N calls of /echo.Echo/Say (with metadata x-backend: HEADER when
//                       given) and print {"A": a, "B": b, "errors": e, "codes": [...]} as one
//                       JSON line
//     path METHOD N     make N calls of METHOD (one of PATHS) and print the same; these do
//                       not wait for a ready channel, so a route that fails RPCs answers
//                       UNAVAILABLE at once
//
// The channel lives for the whole run, so a test sees configuration changes arrive on a
// stream that never reconnects.
"use strict";

const grpc = require("@grpc/grpc-js");
require("@grpc/grpc-js-xds").register();
const readline = require("node:readline");

const identity = (x) => x;
// grpc-js serves only methods it is told of: the Rust test calls these.
const PATHS = [
  "/echo.Echo/Say",
  "/one",
  "/two",
  "/none",
  "/moved",
  "/match/exact",
  "/match/other",
  "/match/prefix/long/x",
  "/query",
];
const method = (path) => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});

function serve(port, answer) {
  return new Promise((resolve, reject) => {
    const server = new grpc.Server();
    const definition = {};
    const handlers = {};
    PATHS.forEach((path, i) => {
      definition[`m${i}`] = method(path);
      handlers[`m${i}`] = (_call, done) => done(null, Buffer.from(answer));
    });
    server.addService(definition, handlers);
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(server),
    );
  });
}

function call(client, path, header, waitForReady) {
  return new Promise((resolve) => {
    const metadata = new grpc.Metadata();
    if (header) metadata.set("x-backend", header);
    client.makeUnaryRequest(
      path,
      identity,
      identity,
      Buffer.from("hi"),
      metadata,
      { deadline: Date.now() + 10000, waitForReady },
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
    let path, count, header, waitForReady;
    if (words[0] === "call") {
      [path, count, header, waitForReady] = ["/echo.Echo/Say", Number(words[1]), words[2], true];
    } else if (words[0] === "path") {
      [path, count, header, waitForReady] = [words[1], Number(words[2]), undefined, false];
    } else {
      process.stdout.write(JSON.stringify({ error: `unknown command ${words[0]}` }) + "\n");
      continue;
    }
    const counts = { A: 0, B: 0, errors: 0, codes: [] };
    for (let i = 0; i < count; i++) {
      const result = await call(client, path, header, waitForReady);
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
