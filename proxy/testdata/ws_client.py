"""A plugin's WebSocket client (python3-websockets) through Airlock.

websockets before 15.0 has no proxy support, so the plugin opens the
CONNECT tunnel itself from HTTPS_PROXY (the handle as the proxy URL's
user name, sent as Basic Proxy-Authorization) and trusts the intercept
CA from SSL_CERT_FILE. Prints one JSON line per reply, and one for the
close.
"""
import asyncio
import base64
import json
import os
import socket
import ssl
import sys
from urllib.parse import unquote, urlparse

import websockets

target = urlparse(sys.argv[1])
scenario = os.environ["AIRLOCK_TEST_WS_SCENARIO"]


def emit(**kw):
    print(json.dumps(kw), flush=True)


def tunnel():
    proxy = urlparse(os.environ["HTTPS_PROXY"])
    sock = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
    auth = base64.b64encode((unquote(proxy.username) + ":").encode()).decode()
    place = f"{target.hostname}:{target.port}"
    sock.sendall(f"CONNECT {place} HTTP/1.1\r\nHost: {place}\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n", 1)[0].decode()
    if " 200 " not in status + " ":
        emit(connect=status)
        sys.exit(0)
    sock.settimeout(None)
    return sock


async def main():
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    async with websockets.connect(target.geturl(), sock=tunnel(), ssl=ctx, server_hostname=target.hostname,
                                  subprotocols=["chat.v1"]) as ws:
        emit(subprotocol=ws.subprotocol)
        if scenario == "echo":
            for m in ["hello", "auth", "split"]:
                await ws.send(m)
                emit(sent=m, got=await ws.recv())
            await ws.send(b"\x00\x01bin")
            emit(sent="bin", got=base64.b64encode(await ws.recv()).decode())
            await ws.close()
            emit(close_code=ws.close_code, close_reason=ws.close_reason)
        elif scenario == "handle":
            # The plugin's own handle (from the proxy URL) in a message.
            await ws.send("hello")
            emit(sent="hello", got=await ws.recv())
            await ws.send("key=" + unquote(urlparse(os.environ["HTTPS_PROXY"]).username))
            try:
                emit(sent="handle", got=await ws.recv())
                await ws.close()
            except websockets.ConnectionClosed:
                pass
            emit(close_code=ws.close_code, close_reason=ws.close_reason)
        elif scenario == "revoke":
            await ws.send("hold")
            emit(ready=True)
            try:
                await ws.recv()
            except websockets.ConnectionClosed:
                pass
            emit(close_code=ws.close_code, close_reason=ws.close_reason)


asyncio.run(main())
