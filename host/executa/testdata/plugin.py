#!/usr/bin/env python3
"""An Executa plugin as plain stdin line loop, for the host's tests.

argv[1] picks a behaviour: good, v1, silent-init, noise, exit-after-one,
crash, ignore-eof, bad-capability, scope-only (aps.scope.* alone).
"""
import json
import os
import signal
import sys
import time
import urllib.request

behavior = sys.argv[1] if len(sys.argv) > 1 else "good"
if behavior == "die-at-start":
    sys.stderr.write("loading config\nconfig invalid: password=hunter2\n")
    sys.stderr.flush()
    sys.exit(4)
caps = ["llm.sample", "aps.kv"] if behavior != "no-caps" else []
if behavior == "files":
    caps = ["aps.kv", "aps.files"]
if behavior == "bad-capability":
    caps = ["storage.user"]
if behavior == "scope-only":
    caps = ["aps.scope.app"]
MANIFEST = {
    "name": "py-tool", "version": "0.2.0", "host_capabilities": caps,
    "tools": [
        {"name": "fetch", "timeout": 20, "parameters": [{"name": "url", "type": "string"}]},
        {"name": "context", "parameters": []},
        {"name": "reverse", "parameters": [{"name": "method", "type": "string"}]},
        {"name": "slow", "timeout": 1, "parameters": []},
        {"name": "progress", "parameters": []},
        {"name": "progress_sdk", "parameters": []},
        {"name": "rpcs", "parameters": [{"name": "calls", "type": "array"}]},
        {"name": "filetransport", "parameters": [{"name": "where", "type": "string"}]},
        {"name": "handle", "parameters": []},
        {"name": "dupkeys", "parameters": [{"name": "where", "type": "string"}]},
        {"name": "hang", "timeout": 120, "parameters": []},
        {"name": "oversized", "timeout": 120, "parameters": []},
    ],
    "credentials": [{"name": "API_KEY", "sensitive": True}],
}


def send(obj):
    obj["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if behavior == "noise":
    print("Loading model weights... done", flush=True)
if behavior == "ignore-eof":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if behavior == "spawn-child":
    # A child in the plugin's process group: the host must kill it with
    # the plugin.
    import subprocess
    child = subprocess.Popen(["/bin/sleep", "300"])

answered = 0
for line in sys.stdin:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    method, rid = req.get("method"), req.get("id")
    if method is None:
        continue
    if method == "initialize":
        if behavior == "v1":
            send({"id": rid, "error": {"code": -32601, "message": "Method not found"}})
        elif behavior != "silent-init":
            send({"id": rid, "result": {"protocolVersion": "2.0", "serverInfo": {"name": "py-tool", "version": "0.2.0"},
                                        "capabilities": {"sampling": {}, "fileTransport": {}}}})
        continue
    if method == "describe":
        if behavior == "noise":
            sys.stdout.write("not json at all\n")
            sys.stdout.write("{" + "x" * (3 << 20) + "\n")
            sys.stdout.flush()
        send({"id": rid, "result": MANIFEST})
        continue
    if method == "health":
        send({"id": rid, "error": {"code": -32601, "message": "Method not found"}})
        continue
    if method != "invoke":
        send({"id": rid, "error": {"code": -32601, "message": "Method not found"}})
        continue
    params = req["params"]
    ctx = params.get("context", {})
    tool = params["tool"]
    if behavior == "crash":
        os._exit(3)
    if tool == "fetch":
        handle = ctx["credentials"]["API_KEY"]
        r = urllib.request.Request(params["arguments"]["url"], headers={"Authorization": "Bearer " + handle})
        body = urllib.request.urlopen(r, timeout=10).read().decode()
        send({"id": rid, "result": {"success": True, "data": {"body": body}}})
    elif tool == "context":
        send({"id": rid, "result": {"success": True, "data": {
            "credentials": sorted(ctx.get("credentials", {}).keys()),
            "invoke_id": ctx.get("invoke_id"),
            "sampling_token": ctx.get("sampling_token", ""),
            "storage_token": ctx.get("storage_token", "")}}})
    elif tool == "reverse":
        args = params["arguments"]
        codes, last = [], {}
        for i in range(args.get("repeat", 1)):
            rp = dict(args.get("params", {"messages": [], "maxTokens": 10}))
            rp.setdefault("invoke_id", args.get("invoke_id", ctx.get("invoke_id")))
            if args.get("swap_tokens"):
                rp["sampling_token"] = ctx.get("storage_token", "")
            send({"id": "r%d" % i, "method": args["method"], "params": rp})
            last = json.loads(sys.stdin.readline())
            err = last.get("error") or {}
            codes.append(err.get("code"))
        err = last.get("error") or {}
        send({"id": rid, "result": {"success": True, "data": {"code": err.get("code"), "codes": codes, "message": err.get("message"),
                                                              "errorCode": (err.get("data") or {}).get("errorCode"),
                                                              "result": last.get("result")}}})
    elif tool == "rpcs":
        out = []
        for i, call in enumerate(params["arguments"]["calls"]):
            rp = dict(call.get("params", {}))
            rp.setdefault("invoke_id", ctx.get("invoke_id"))
            if call.get("swap_tokens"):
                rp["storage_token"] = ctx.get("sampling_token", "")
            send({"id": "c%d" % i, "method": call["method"], "params": rp})
            reply = json.loads(sys.stdin.readline())
            err = reply.get("error") or {}
            out.append({"result": reply.get("result"), "code": err.get("code"), "message": err.get("message"),
                        "errorCode": (err.get("data") or {}).get("errorCode")})
        send({"id": rid, "result": {"success": True, "data": {"calls": out}}})
    elif tool == "oversized":
        # One frame past the 2 MiB limit, id first as SDKs write it.
        sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"success": true, "data": {"big": "%s"}}}\n'
                         % (json.dumps(rid), "y" * ((2 << 20) + 60)))
        sys.stdout.flush()
    elif tool == "filetransport":
        import tempfile
        where = params["arguments"].get("where", "tmp")
        d = tempfile.gettempdir() if where == "tmp" else where
        path = os.path.join(d, "ft-%s.json" % os.getpid() if where == "tmp" else "ft.json")
        try:
            with open(path, "w") as fh:
                fh.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"success": True, "data": {"big": "y" * 1000}}}))
        except OSError:
            pass  # sandboxed: the host's directories are not the plugin's to write
        send({"id": rid, "__file_transport": path})
    elif tool == "dupkeys":
        # Raw frames: json.dumps cannot repeat a key.
        where = params["arguments"].get("where", "result")
        if where == "result":
            sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"success":true,"data":{"a":1,"a":2,"A":3}}}\n' % json.dumps(rid))
            sys.stdout.flush()
        else:
            sys.stdout.write('{"jsonrpc":"2.0","id":"d0","method":"storage/set","params":{"invoke_id":%s,'
                             '"key":"k","value":{"a":1,"A":2}}}\n' % json.dumps(ctx.get("invoke_id")))
            sys.stdout.flush()
            reply = json.loads(sys.stdin.readline())
            err = reply.get("error") or {}
            send({"id": rid, "result": {"success": True, "data": {"code": err.get("code"),
                                                                  "errorCode": (err.get("data") or {}).get("errorCode")}}})
    elif tool == "handle":
        send({"id": rid, "result": {"success": True, "data": {"handle": ctx["credentials"].get("API_KEY", "")}}})
    elif tool == "progress":
        for i in range(120):
            send({"method": "executa/progress", "params": {"type": "progress", "n": i}})
        send({"method": "executa/progress", "params": {"type": "tool_update", "blob": "x" * 9000}})
        send({"id": rid, "result": {"success": True, "data": {}}})
    elif tool == "progress_sdk":
        # The SDKs' wire shape ({type, data, context: {invoke_id}}): one
        # event for an invoke not in flight, one for this invoke with text
        # a terminal would act on and a handle in it, one naming no invoke
        # with a type the host does not know.
        send({"method": "executa/progress", "params": {"type": "progress", "data": {"note": "another invoke's"},
                                                       "context": {"invoke_id": "not-in-flight"}}})
        send({"method": "executa/progress", "params": {"type": "tool_update",
                                                       "data": {"note": "step 1 of 2\x1b[2K\r\u202e alh_A1b2C3d4E5f6G7h8"},
                                                       "context": {"invoke_id": ctx.get("invoke_id")}}})
        send({"method": "executa/progress", "params": {"type": "succeeded", "data": {"step": 2, "total": 2}}})
        send({"id": rid, "result": {"success": True, "data": {}}})
    elif tool == "slow":
        time.sleep(30)
    elif tool == "hang":
        time.sleep(60)
        send({"id": rid, "result": {"success": True, "data": {}}})
    answered += 1
    if behavior == "exit-after-one":
        sys.exit(0)

if behavior == "ignore-eof":
    while True:
        time.sleep(1)
