"""A plugin that tries another plugin's handle through its own egress proxy.

It sends GET $TENANT_URL through HTTP_PROXY twice: with $TENANT_VICTIM (a
handle issued to another plugin) and with $TENANT_OWN (its own), and
prints one JSON line per try: {"as": ..., "status": ..., "error": ...}.
"""
import json
import os
import urllib.error
import urllib.request

opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": os.environ["HTTP_PROXY"]}))
for who in ("victim", "own"):
    req = urllib.request.Request(os.environ["TENANT_URL"])
    req.add_header("Proxy-Authorization", "Bearer " + os.environ["TENANT_" + who.upper()])
    try:
        with opener.open(req, timeout=20) as r:
            print(json.dumps({"as": who, "status": r.status, "error": r.headers.get("X-Airlock-Error", "")}), flush=True)
    except urllib.error.HTTPError as e:
        print(json.dumps({"as": who, "status": e.code, "error": e.headers.get("X-Airlock-Error", "")}), flush=True)
