// A plugin's WebSocket client (Node, the ws package) through Airlock.
// The plugin opens the CONNECT tunnel from HTTPS_PROXY (the handle as
// the proxy URL's user name, sent as Basic Proxy-Authorization) and
// hands the socket to ws; NODE_EXTRA_CA_CERTS trusts the intercept CA.
// Prints one JSON line per reply, and one for the close.
'use strict';
const http = require('http');
const tls = require('tls');
const WebSocket = require(process.env.AIRLOCK_TEST_WS_MODULE);

const target = new URL(process.argv[2]);
const scenario = process.env.AIRLOCK_TEST_WS_SCENARIO;
const proxy = new URL(process.env.HTTPS_PROXY);
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const place = `${target.hostname}:${target.port}`;
const req = http.request({
  host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: place,
  headers: { Host: place, 'Proxy-Authorization': 'Basic ' + Buffer.from(decodeURIComponent(proxy.username) + ':').toString('base64') },
});
req.on('connect', (res, socket) => {
  if (res.statusCode !== 200) {
    emit({ connect: String(res.statusCode) });
    socket.destroy();
    return;
  }
  const ws = new WebSocket(target.href, ['chat.v1'], {
    createConnection: () => tls.connect({ socket, servername: target.hostname }),
  });
  const queue = scenario === 'echo' ? ['hello', 'auth', 'split'] : ['hold'];
  let sent = null;
  const next = () => {
    if (queue.length === 0) {
      ws.close(1000);
      return;
    }
    sent = queue.shift();
    ws.send(sent);
    if (sent === 'hold') emit({ ready: true });
  };
  ws.on('open', () => { emit({ subprotocol: ws.protocol }); next(); });
  ws.on('message', (data) => { emit({ sent, got: data.toString() }); next(); });
  ws.on('close', (code, reason) => emit({ close_code: code, close_reason: reason.toString() }));
  ws.on('error', (err) => emit({ error: err.message }));
});
req.on('error', (err) => emit({ error: err.message }));
req.end();
