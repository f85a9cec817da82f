#!/usr/bin/env node
// A plugin shaped the way plugins built with the published Executa Node
// SDK are, for the host's compatibility tests (Node's standard library
// only): no top-level name, runtime {"type": "npm"}, client_capabilities,
// invoke_id from params, health "ok", and the presigned PUT done with the
// http module while the proxy variables are set.
"use strict";

const crypto = require("node:crypto");
const http = require("node:http");
const readline = require("node:readline");

const MANIFEST = {
  display_name: "SDK-style compat plugin (Node)",
  version: "1.2.0",
  runtime: { type: "npm", min_version: "18.0.0" },
  host_capabilities: ["llm.sample", "aps.kv", "aps.files"],
  tools: [
    { name: "whoami", parameters: [] },
    { name: "sample", parameters: [{ name: "text", type: "string" }] },
    { name: "upload", parameters: [{ name: "path", type: "string" }, { name: "text", type: "string" }] },
  ],
};

const pending = new Map();

function write(msg) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
}

function reverse(method, params) {
  const id = crypto.randomUUID();
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    write({ id, method, params });
  });
}

function put(url, body, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "PUT", headers: { ...headers, "Content-Length": body.length } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, etag: res.headers.etag }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function tool(name, args, params) {
  const invokeId = params.invoke_id || "";
  const metadata = { executa_invoke_id: invokeId };
  switch (name) {
    case "whoami":
      return { invoke_id: invokeId, proxy: process.env.HTTP_PROXY || null, no_proxy: process.env.NO_PROXY || null };
    case "sample": {
      const res = await reverse("sampling/createMessage", {
        messages: [{ role: "user", content: { type: "text", text: String(args.text || "") } }],
        maxTokens: 128, metadata,
      });
      return { text: res.content.text, model: res.model };
    }
    case "upload": {
      const body = Buffer.from(String(args.text || ""));
      const info = await reverse("files/upload_begin", { path: args.path, size_bytes: body.length, scope: "user" });
      const r = await put(info.put_url, body, info.headers || {});
      const done = await reverse("files/upload_complete", { path: args.path, etag: r.etag, scope: "user" });
      return { put_status: r.status, complete: done.path };
    }
    default:
      throw { code: -32601, message: "Unknown tool" };
  }
}

async function handle(msg) {
  if (!("method" in msg)) {
    const p = pending.get(msg.id);
    if (p) {
      pending.delete(msg.id);
      if (msg.error) p.reject(msg.error);
      else p.resolve(msg.result || {});
    }
    return;
  }
  const { method, id } = msg;
  const params = msg.params || {};
  switch (method) {
    case "initialize":
      return write({ id, result: { protocolVersion: "2.0", serverInfo: { name: "compat-node", version: MANIFEST.version },
        client_capabilities: { sampling: {} }, capabilities: {} } });
    case "describe":
      return write({ id, result: MANIFEST });
    case "health":
      return write({ id, result: { status: "ok" } });
    case "invoke":
      try {
        const data = await tool(params.tool, params.arguments || {}, params);
        return write({ id, result: { success: true, tool: params.tool, data } });
      } catch (err) {
        return write({ id, error: { code: err.code || -32603, message: String(err.message || err) } });
      }
    default:
      return write({ id, error: { code: -32601, message: "Method not found" } });
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (line.trim()) handle(JSON.parse(line)).catch((e) => process.stderr.write(`handler: ${e}\n`));
});
rl.on("close", () => process.exit(0));
