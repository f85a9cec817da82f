"""A plugin's gRPC client, configured only by its environment.

grpcio takes the proxy from grpc_proxy, https_proxy or http_proxy (in
that order; the handle as the proxy URL's user name becomes a Basic
Proxy-Authorization) and trusts the roots in
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH. Messages are raw bytes (no serializer),
as the test upstream speaks. Prints one JSON line per call, as the Go
client does.
"""
import json
import os
import sys

import grpc

target = sys.argv[1]
scenario = os.environ["AIRLOCK_TEST_GRPC_SCENARIO"]
auth = os.environ.get("AIRLOCK_TEST_GRPC_AUTH")
metadata = [("authorization", auth)] if auth else None

channel = grpc.secure_channel(target, grpc.ssl_channel_credentials())


def emit(**kw):
    print(json.dumps(kw), flush=True)


def result(name, fn):
    replies, trailer, code, message = [], {}, 0, ""
    try:
        call = fn(replies)
        trailer = dict(call.trailing_metadata() or ())
    except grpc.RpcError as e:
        code, message = e.code().value[0], e.details() or ""
        trailer = dict(e.trailing_metadata() or ())
    emit(call=name, code=code, message=message, replies=[r.decode() for r in replies], trailer=trailer)


def unary(msg):
    def fn(replies):
        reply, call = channel.unary_unary("/t.T/Unary").with_call(msg.encode(), metadata=metadata, timeout=30)
        replies.append(reply)
        return call
    return fn


def server_stream(msg, name=""):
    def fn(replies):
        call = channel.unary_stream("/t.T/ServerStream")(msg.encode(), metadata=metadata, timeout=30)
        for r in call:
            replies.append(r)
            if name == "slow":
                emit(call="slow-started")
        return call
    return fn


def client_stream(msgs):
    def fn(replies):
        reply, call = channel.stream_unary("/t.T/ClientStream").with_call(
            iter([m.encode() for m in msgs]), metadata=metadata, timeout=30)
        replies.append(reply)
        return call
    return fn


def bidi(msgs):
    def fn(replies):
        call = channel.stream_stream("/t.T/Bidi")(iter([m.encode() for m in msgs]), metadata=metadata, timeout=30)
        replies.extend(call)
        return call
    return fn


if scenario == "all":
    result("unary", unary("hi"))
    result("server", server_stream("go"))
    result("client", client_stream(["a", "b", "c"]))
    result("bidi", bidi(["x", "docs", "echo"]))
    result("echo", unary("echo"))
    result("fail", unary("fail"))
elif scenario == "unary":
    result("unary", unary("hi"))
elif scenario == "handle":
    # The plugin's own handle (from the proxy URL) in a message.
    from urllib.parse import unquote, urlparse
    m = "key=" + unquote(urlparse(os.environ["HTTPS_PROXY"]).username)
    result("unary-handle", unary(m))
    result("bidi-handle", bidi(["x", m]))
    result("after", unary("hi"))
elif scenario == "slow":
    result("slow", server_stream("slow", "slow"))
    result("after", unary("hi"))
else:
    sys.exit("unknown scenario")
