#!/usr/bin/env python3
"""A master written from shared/PROTOCOL.md alone, in another language.

It speaks raw RESP over a socket (no Redis library): subscribe to a fresh
reply topic, publish one job on the master topic, collect PINGs and
returns until every expected maid (the registry's ids whose alive key
exists, PROTOCOL §4) has pinged and every targeted minion has returned
(each maid that pinged `match: true`, or the ids a syndic maid listed in
its PING's `minions`, §3.1), and print what came back as JSON.

usage: foreign_master.py PORT MASTER_TOPIC FUN [ARG...]
"""
import json
import socket
import sys
import time


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        return [read(f) for _ in range(int(rest))]
    raise ValueError("bad RESP: %r" % line)


def main():
    port, topic, fun, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    jid = time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "%06d" % (time.time_ns() // 1000 % 1000000)
    temp = "foreign.%s" % jid

    sub = socket.create_connection(("127.0.0.1", port))
    subf = sub.makefile("rb")
    sub.sendall(encode("SUBSCRIBE", temp))
    assert read(subf)[0] == b"subscribe"

    job = {"jid": jid, "tempTopic": temp, "fun": fun, "arg": args, "tgt": "*", "tgt_type": "glob"}
    pub = socket.create_connection(("127.0.0.1", port))
    pubf = pub.makefile("rb")
    pub.sendall(encode("HKEYS", "maid:registry"))
    expected = set()
    for mid in read(pubf):
        pub.sendall(encode("EXISTS", b"maid:alive:" + mid))
        if read(pubf) == 1:
            expected.add(mid.decode())
    pub.sendall(encode("PUBLISH", topic, json.dumps(job)))
    read(pubf)

    pings, listed, returns = {}, {}, {}
    sub.settimeout(30)
    deadline = time.time() + 30
    while time.time() < deadline:
        msg = read(subf)
        reply = json.loads(msg[2])
        assert reply["jid"] == jid
        if reply["type"] == "ping":
            pings[reply["sub_ip"]] = reply["match"]
            if reply.get("minions") is not None:
                listed[reply["sub_ip"]] = sorted(reply["minions"])
        elif reply["type"] == "return":
            returns[reply["id"]] = {k: reply[k] for k in ("return", "retcode", "success", "fun", "fun_args")}
        targeted = {m for m, hit in pings.items() if hit and m not in listed}
        targeted |= {m for ids in listed.values() for m in ids}
        if expected <= set(pings) and targeted <= set(returns):
            break
    out = {"pings": pings, "returns": returns}
    if listed:
        out["minions"] = listed
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
