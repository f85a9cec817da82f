// A Node plugin's https:// call through the egress proxy. Node 20's
// https module and fetch ignore HTTPS_PROXY, so the plugin opens the
// CONNECT tunnel itself with the http module (no package needed), taking
// the proxy and its credential (the plugin pass) from HTTPS_PROXY; the
// https module then runs TLS inside it, trusting the intercept CA through
// NODE_EXTRA_CA_CERTS. The API key is the handle (a placeholder intent).
const http = require("http");
const https = require("https");
const tls = require("tls");

const target = new URL(process.argv[2]);
const proxy = new URL(process.env.HTTPS_PROXY);
const cred = decodeURIComponent(proxy.username) + ":" + decodeURIComponent(proxy.password);
const port = target.port || "443";
const connect = http.request({
  host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target.hostname + ":" + port,
  headers: { "Proxy-Authorization": "Basic " + Buffer.from(cred).toString("base64") },
});
connect.on("connect", (res, socket) => {
  if (res.statusCode !== 200) {
    console.log("CONNECT " + res.statusCode + " " + res.headers["x-airlock-error"]);
    process.exit(1);
  }
  const req = https.request({
    host: target.hostname, port, path: target.pathname, method: "GET",
    headers: { Authorization: "Bearer " + process.env.API_KEY },
    createConnection: () => tls.connect({ socket, servername: target.hostname }),
  }, (r) => {
    let body = "";
    r.on("data", (d) => (body += d));
    r.on("end", () => { console.log(r.statusCode); console.log(body); });
  });
  req.on("error", (e) => { console.log("request: " + e.code); process.exit(1); });
  req.end();
});
connect.on("error", (e) => { console.log("proxy: " + e.code); process.exit(1); });
connect.end();
