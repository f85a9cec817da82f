#!/usr/bin/env python3
"""A plugin shaped the way plugins built with the published Executa SDKs
are, for the host's compatibility tests (Python standard library only).

What it does that the protocol notes do not: no top-level "name", an
object "runtime", "client_capabilities" in its initialize answer,
invoke_id read from params, a "healthy"-style health word (argv[1]),
file transport for large answers without negotiating it, put_url from
files/upload_begin fetched with urllib while the proxy variables are
set, a non-sensitive setting with a default, and invokes served on a
thread pool so reverse calls can be answered while they wait.
"""
import json
import os
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

HEALTH_WORD = sys.argv[1] if len(sys.argv) > 1 else "healthy"

MANIFEST = {
    "display_name": "SDK-style compat plugin",
    "version": "0.3.0",
    "runtime": {"type": "uv", "min_version": "0.1.0"},
    "host_capabilities": ["llm.sample", "aps.kv", "aps.files"],
    "credentials": [
        {"name": "API_KEY", "display_name": "API key", "required": True, "sensitive": True},
        {"name": "UNITS", "required": False, "sensitive": False, "default": "metric"},
    ],
    "tools": [
        {"name": "whoami", "parameters": []},
        {"name": "fetch", "parameters": [{"name": "url", "type": "string", "required": True}]},
        {"name": "big", "parameters": [{"name": "kb", "type": "integer", "required": False, "default": 700}]},
        {"name": "kv", "parameters": [{"name": "key", "type": "string"}]},
        {"name": "upload", "parameters": [{"name": "path", "type": "string"}, {"name": "text", "type": "string"}]},
        {"name": "sample_schema", "parameters": [{"name": "text", "type": "string"}]},
        {"name": "sample_many", "parameters": [{"name": "n", "type": "integer"}, {"name": "max_tokens", "type": "integer"},
                                                {"name": "text", "type": "string"}]},
    ],
}

_out = threading.Lock()
_pending = {}
_pending_lock = threading.Lock()


def write(msg):
    msg["jsonrpc"] = "2.0"
    with _out:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


class RPCError(Exception):
    def __init__(self, err):
        super().__init__(err.get("message", ""))
        self.err = err


def reverse(method, params, timeout=30):
    """A reverse request to the host, answered on the stdin reader."""
    rid = uuid.uuid4().hex
    ev = threading.Event()
    box = {}
    with _pending_lock:
        _pending[rid] = (ev, box)
    write({"id": rid, "method": method, "params": params})
    if not ev.wait(timeout):
        raise RPCError({"code": -32005, "message": "timeout"})
    reply = box["msg"]
    if reply.get("error"):
        raise RPCError(reply["error"])
    return reply.get("result") or {}


def tool(name, args, params):
    ctx = params.get("context") or {}
    creds = ctx.get("credentials") or {}
    invoke_id = params.get("invoke_id") or ""  # the SDKs read it here
    meta = {"executa_invoke_id": invoke_id}
    if name == "whoami":
        return {"invoke_id": invoke_id, "context_invoke_id": ctx.get("invoke_id"), "traceparent": ctx.get("traceparent"),
                "credential_names": sorted(creds), "units": creds.get("UNITS"),
                "key_is_handle": creds.get("API_KEY", "").startswith("alh_"),
                "env": sorted(k for k in os.environ if k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "SSL_CERT_FILE", "NO_PROXY", "no_proxy", "TMPDIR", "COMPAT_MODE", "PATH", "HOME", "EDITOR", "OPENAI_API_KEY")),
                "compat_mode": os.environ.get("COMPAT_MODE")}
    if name == "fetch":
        key = creds.get("API_KEY", "")
        req = urllib.request.Request(args["url"], headers={"Authorization": "Bearer " + key})
        opener = urllib.request.build_opener()
        if args.get("handle_in_proxy"):
            # The CONNECT must carry the handle: add it to the host's HTTPS_PROXY.
            p = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": "http://x:" + key + "@" + p.hostname + ":" + str(p.port)}))
        with opener.open(req, timeout=10) as resp:
            return {"status": resp.status, "body": resp.read().decode()}
    if name == "big":
        return {"blob": "z" * (int(args.get("kb", 700)) * 1024)}
    if name == "kv":
        key = args.get("key", "compat/k")
        first = reverse("storage/set", {"key": key, "value": {"n": 1}, "scope": "user", "metadata": meta})
        cur = reverse("storage/get", {"key": key, "scope": "user", "metadata": meta})
        second = reverse("storage/set", {"key": key, "value": {"n": 2}, "scope": "user", "if_match": cur["etag"], "metadata": meta})
        try:
            reverse("storage/set", {"key": key, "value": {"n": 3}, "scope": "user", "if_match": first["etag"], "metadata": meta})
            stale = "accepted"
        except RPCError as e:
            stale = e.err.get("code")
        return {"value": reverse("storage/get", {"key": key, "scope": "user", "metadata": meta})["value"], "stale_write": stale,
                "etags_differ": second["etag"] != first["etag"]}
    if name == "upload":
        payload = args.get("text", "").encode()
        info = reverse("files/upload_begin", {"path": args["path"], "size_bytes": len(payload),
                                              "content_type": "text/plain", "scope": "user"})
        # urllib honours HTTP_PROXY; the host's NO_PROXY keeps this PUT
        # off the egress proxy.
        put = urllib.request.Request(info["put_url"], data=payload, method="PUT", headers=info.get("headers") or {})
        with urllib.request.urlopen(put, timeout=10) as resp:
            etag = resp.headers.get("ETag")
        done = reverse("files/upload_complete", {"path": args["path"], "etag": etag, "size_bytes": len(payload), "scope": "user"})
        got = reverse("files/download_url", {"path": args["path"], "scope": "user"})
        with urllib.request.urlopen(got.get("url") or got["get_url"], timeout=10) as resp:
            body = resp.read().decode()
        return {"complete": done.get("path"), "read_back": body}
    if name == "sample_schema":
        res = reverse("sampling/createMessage", {
            "messages": [{"role": "user", "content": {"type": "text", "text": args.get("text", "")}}],
            "maxTokens": 256, "systemPrompt": "Reply with JSON.",
            "responseFormat": {"type": "json_schema", "json_schema": {"name": "analysis", "strict": True, "schema": {
                "type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"],
                "additionalProperties": False}}},
            "onUnsupported": "json_object", "metadata": meta})
        return {"text": res["content"]["text"], "responseFormat": res["_meta"]["responseFormat"]}
    if name == "sample_many":
        # n sampling calls at once, as an agent loop fanning out would.
        def one(_):
            try:
                reverse("sampling/createMessage", {
                    "messages": [{"role": "user", "content": {"type": "text", "text": args.get("text", "go")}}],
                    "maxTokens": int(args.get("max_tokens", 100)), "metadata": meta})
                return 0
            except RPCError as e:
                return e.err.get("code")
        with ThreadPoolExecutor(max_workers=int(args.get("n", 2))) as fan:
            codes = list(fan.map(one, range(int(args.get("n", 2)))))
        return {"codes": codes}
    raise RPCError({"code": -32601, "message": "Unknown tool"})


def respond(rid, result):
    msg = {"id": rid, "result": result}
    payload = json.dumps(msg)
    if len(payload) > 512 * 1024:
        # Large answers go through a temporary file, as the SDKs do.
        fd, path = tempfile.mkstemp(prefix="executa-resp-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(dict(msg, jsonrpc="2.0")))
        write({"id": rid, "__file_transport": path})
    else:
        write(msg)


def invoke(rid, params):
    try:
        data = tool(params.get("tool"), params.get("arguments") or {}, params)
        respond(rid, {"success": True, "tool": params.get("tool"), "data": data})
    except RPCError as e:
        write({"id": rid, "error": e.err})
    except Exception as e:  # noqa: BLE001
        write({"id": rid, "error": {"code": -32603, "message": "tool failed: %s" % e}})


def main():
    pool = ThreadPoolExecutor(max_workers=4)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "method" not in msg:
            with _pending_lock:
                waiter = _pending.pop(msg.get("id"), None)
            if waiter:
                waiter[1]["msg"] = msg
                waiter[0].set()
            continue
        method, rid = msg["method"], msg.get("id")
        if method == "initialize":
            write({"id": rid, "result": {"protocolVersion": "2.0",
                                         "serverInfo": {"name": MANIFEST["display_name"], "version": MANIFEST["version"]},
                                         "client_capabilities": {"sampling": {}},
                                         "capabilities": {"storage": {"kv": True, "files": True}}}})
        elif method == "describe":
            write({"id": rid, "result": MANIFEST})
        elif method == "health":
            write({"id": rid, "result": {"status": HEALTH_WORD, "version": MANIFEST["version"]}})
        elif method == "invoke":
            pool.submit(invoke, rid, msg.get("params") or {})
        else:
            write({"id": rid, "error": {"code": -32601, "message": "Method not found"}})
    pool.shutdown(wait=True)


if __name__ == "__main__":
    main()
