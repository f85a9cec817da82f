// A plugin's gRPC client (Node, @grpc/grpc-js), configured only by its
// environment: grpc-js takes the proxy from grpc_proxy, https_proxy or
// http_proxy (lower case; the handle as the proxy URL's user name becomes
// Basic proxy authorization), and the intercept CA is handed to its
// credentials. Messages are raw bytes. Prints one JSON line per call, as
// the Go and Python clients do.
'use strict';
const fs = require('fs');
const grpc = require(process.env.AIRLOCK_TEST_GRPC_MODULE);

const target = process.argv[2];
const scenario = process.env.AIRLOCK_TEST_GRPC_SCENARIO;
const auth = process.env.AIRLOCK_TEST_GRPC_AUTH;
const client = new grpc.Client(target, grpc.credentials.createSsl(fs.readFileSync(process.env.SSL_CERT_FILE)));
const raw = (b) => b;
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

function metadata() {
  const md = new grpc.Metadata();
  if (auth) md.add('authorization', auth);
  return md;
}

function options() {
  return { deadline: Date.now() + 30000 };
}

// call runs one call and resolves once its status is known.
function call(name, kind, path, msgs) {
  return new Promise((resolve) => {
    const replies = [];
    let c;
    const done = (status) => {
      const trailer = {};
      const m = status.metadata ? status.metadata.getMap() : {};
      for (const k of Object.keys(m)) trailer[k] = String(m[k]);
      emit({ call: name, code: status.code, message: status.code === 0 ? '' : status.details, replies, trailer });
      resolve();
    };
    const onReply = (b) => {
      replies.push(b.toString());
      if (name === 'slow') emit({ call: 'slow-started' });
    };
    const cb = (err, b) => { if (!err) replies.push(b.toString()); };
    switch (kind) {
      case 'unary':
        c = client.makeUnaryRequest(path, raw, raw, Buffer.from(msgs[0]), metadata(), options(), cb);
        break;
      case 'server':
        c = client.makeServerStreamRequest(path, raw, raw, Buffer.from(msgs[0]), metadata(), options());
        c.on('data', onReply);
        break;
      case 'client':
        c = client.makeClientStreamRequest(path, raw, raw, metadata(), options(), cb);
        for (const m of msgs) c.write(Buffer.from(m));
        c.end();
        break;
      case 'bidi': {
        c = client.makeBidiStreamRequest(path, raw, raw, metadata(), options());
        let i = 0;
        c.on('data', (b) => {
          replies.push(b.toString());
          if (++i < msgs.length) c.write(Buffer.from(msgs[i])); else c.end();
        });
        c.write(Buffer.from(msgs[0]));
        break;
      }
    }
    c.on('error', () => {}); // the status carries it
    c.on('status', done);
  });
}

async function main() {
  if (scenario === 'all') {
    await call('unary', 'unary', '/t.T/Unary', ['hi']);
    await call('server', 'server', '/t.T/ServerStream', ['go']);
    await call('client', 'client', '/t.T/ClientStream', ['a', 'b', 'c']);
    await call('bidi', 'bidi', '/t.T/Bidi', ['x', 'docs', 'echo']);
    await call('echo', 'unary', '/t.T/Unary', ['echo']);
    await call('fail', 'unary', '/t.T/Unary', ['fail']);
  } else if (scenario === 'unary') {
    await call('unary', 'unary', '/t.T/Unary', ['hi']);
  } else if (scenario === 'slow') {
    await call('slow', 'server', '/t.T/ServerStream', ['slow']);
    await call('after', 'unary', '/t.T/Unary', ['hi']);
  } else {
    process.exitCode = 1;
  }
  client.close();
  process.exit(0); // grpc-js keeps timers of finished calls alive until their deadlines
}
main();
