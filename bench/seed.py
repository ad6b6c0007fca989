#!/usr/bin/env python3
"""seed: the original maid design, in Python -- the baseline of `maid bench`.

One redis-py pub/sub listener on the master topic. For every job it
publishes a PING on the job's `tempTopic` at once, then forks a
`multiprocessing.Process` that runs the function and publishes the return
(PROTOCOL.md 3.1 and 3.2), as the first maid did. Nothing else: no
sandbox, no targeting (every job matches), no registry, no job cache, no
signatures. Only the functions the benchmark sends exist: `test.ping`,
`test.echo` and `cmd.run`.

`maid bench` runs the copy compiled into the binary (this file), so the
baseline it measures is always the one in the repository:

    python3 bench/seed.py --redis redis://127.0.0.1:6379/ --topic master --id seed

It needs redis-py (`pip install redis`); `maid bench` installs it when
`import redis` fails.
"""

import argparse
import datetime
import json
import multiprocessing
import subprocess
import sys

import redis


def run_function(fun, arg):
    """Return (return value, retcode) of `fun` called with `arg`."""
    if fun == "test.ping":
        return True, 0
    if fun == "test.echo":
        return (arg[0] if arg else ""), 0
    if fun == "cmd.run":
        cmd = str(arg[0]) if arg else ""
        done = subprocess.run(
            cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        return done.stdout.rstrip("\n"), done.returncode
    return "'%s' is not available." % fun, 254


def run_job(url, me, job):
    """In the forked child: run the function, publish the return, exit."""
    arg = job.get("arg") or []
    ret, retcode = run_function(job.get("fun", ""), arg)
    reply = {
        "type": "return",
        "sub_ip": me,
        "jid": job["jid"],
        "id": me,
        "fun": job.get("fun", ""),
        "fun_args": arg,
        "return": ret,
        "retcode": retcode,
        "success": retcode == 0,
        "out": job.get("out") or "nested",
        "_stamp": datetime.datetime.now().isoformat(),
        "ret_": {me: ret},
    }
    conn = redis.Redis.from_url(url)
    conn.publish(job["tempTopic"], json.dumps(reply))
    conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/")
    parser.add_argument("--topic", default="master")
    parser.add_argument("--id", default="seed")
    args = parser.parse_args()

    # The original design forked; say so explicitly (Python 3.14 changes
    # the default start method on Linux).
    ctx = multiprocessing.get_context("fork")
    conn = redis.Redis.from_url(args.redis)
    pubsub = conn.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(args.topic)
    print("seed %s subscribed to %s" % (args.id, args.topic), file=sys.stderr, flush=True)
    for message in pubsub.listen():
        try:
            job = json.loads(message["data"])
            topic, jid = job["tempTopic"], job["jid"]
        except (ValueError, KeyError, TypeError):
            continue
        ping = {"type": "ping", "sub_ip": args.id, "jid": jid, "match": True}
        conn.publish(topic, json.dumps(ping))
        ctx.Process(target=run_job, args=(args.redis, args.id, job), daemon=True).start()
        ctx.active_children()  # reaps the jobs that finished


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
