"""A malicious Python plugin for the escape tests: the same attempts as
the Go attacker (ATTACK_* variables), one JSON line each; then one
proxied request through HTTP_PROXY, which must succeed."""
import json
import os
import socket
import subprocess
import sys
import urllib.request


def report(attack, escaped, detail=""):
    print(json.dumps({"attack": attack, "escaped": escaped, "detail": detail}), flush=True)


def items(name):
    v = os.environ.get(name, "")
    return [x for x in v.split(",") if x]


def probe():
    for p in items("ATTACK_READ"):
        try:
            with open(p, "rb") as fh:
                report("read " + p, len(fh.read(16)) > 0)
        except OSError as e:
            report("read " + p, False, str(e))
    for p in items("ATTACK_WRITE"):
        try:
            with open(p, "w") as fh:
                fh.write("x")
            report("write " + p, True)
        except OSError as e:
            report("write " + p, False, str(e))
    for a in items("ATTACK_TCP"):
        host, port = a.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            report("tcp " + a, True)
        except OSError as e:
            report("tcp " + a, False, str(e))
    for a in items("ATTACK_UDP"):
        host, port = a.rsplit(":", 1)
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"escape", (host, int(port)))
            s.close()
            report("udp " + a, True)
        except OSError as e:
            report("udp " + a, False, str(e))
    for p in items("ATTACK_UNIX"):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(p)
            s.close()
            report("unix " + p, True)
        except OSError as e:
            report("unix " + p, False, str(e))
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
        report("raw socket", True)
    except OSError as e:
        report("raw socket", False, str(e))
    pid = os.environ.get("ATTACK_PID")
    if pid:
        try:
            with open("/proc/%s/environ" % pid, "rb") as fh:
                report("host environ", len(fh.read()) > 0)
        except OSError as e:
            report("host environ", False, str(e))
        try:
            os.kill(int(pid), 0)
            report("signal host", True)
        except OSError as e:
            report("signal host", False, str(e))
    try:
        os.unshare(os.CLONE_NEWUSER) if hasattr(os, "unshare") else (_ for _ in ()).throw(OSError("no unshare"))
        report("new user namespace", True)
    except OSError as e:
        report("new user namespace", False, str(e))
    try:
        with urllib.request.urlopen(os.environ["ATTACK_PROXIED"], timeout=10) as r:
            body = r.read().decode()
            report("proxied", r.status == 200 and "proxied" in body, str(r.status))
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        report("proxied", False, str(e))


mode = sys.argv[1] if len(sys.argv) > 1 else "probe"
if mode == "probe":
    probe()
elif mode == "grandchild":
    subprocess.Popen(["/bin/sh", "-c", "exec -a airlock-escape-grandchild sleep 300"], start_new_session=True)
    report("grandchild-started", True)
    sys.exit(3)
elif mode == "forkbomb":
    while True:
        try:
            if os.fork() == 0:
                import time
                time.sleep(3600)
                os._exit(0)
        except OSError:
            pass
elif mode == "wide":
    # More children than one read of a children file lists (a page, about
    # 680 pids), then a wait: a watcher that reads one page counts too few.
    import signal
    import time
    for _ in range(1200):
        try:
            if os.fork() == 0:
                signal.pause()
                os._exit(0)
        except OSError:
            break
    report("wide", True)
    time.sleep(10)
elif mode == "nodump":
    # Not dumpable: a process of another uid, or one without
    # CAP_SYS_PTRACE, may no longer read this one's memory maps or
    # descriptors. Then hold more than the limit, below RLIMIT_DATA.
    import ctypes
    import time
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    keep = [bytearray(b"\x01" * (8 << 20)) for _ in range(24)]
    report("nodump", True)
    time.sleep(10)
elif mode == "memhog":
    keep = []
    while True:
        keep.append(bytearray(b"\x01" * (8 << 20)))
