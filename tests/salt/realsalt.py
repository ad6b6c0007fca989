"""A real Salt 3008.4 fleet on loopback, for the differential tests.

Run with the Salt venv that `./dev` makes (--api also needs CherryPy in it:
`pip install cherrypy==18.10.0`):

    target/salt-venv/bin/python tests/salt/realsalt.py \
        --dir DIR --minions m1,m2 [--api] [--user NAME]

Starts one salt-master, one salt-minion per id and, with --api, a salt-api
(rest_cherrypy, plain HTTP), all on 127.0.0.1 and all under DIR. When every
minion answers test.ping (and the API takes a login), prints one line of
JSON on stdout:

    {"api_url": "http://127.0.0.1:PORT" or null, "master_config": ".../master",
     "publish_port": N, "ret_port": N, "minions": [...], "user": NAME}

then stays until SIGTERM, SIGINT or EOF on stdin, stops every daemon and
exits 0. Meanwhile a line `stop-minion ID` on stdin stops that minion and
is answered `{"stopped": "ID"}` on stdout. A failed or timed-out start prints the logs' tails on stderr and
exits 1. Progress goes to stderr only. Give it a pipe on stdin, and close
the pipe to stop it: /dev/null is at EOF at once, which stops it at once.
"""

import argparse
import ctypes
import json
import os
import pwd
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

STARTUP_DEADLINE = 90  # seconds, for the whole fleet
# Seconds between SIGTERM and SIGKILL. The master and salt-api stop within
# about a second; a minion sleeps 5 s on SIGTERM by design (to flush
# returns: MinionManager.stop_async), so minions are usually SIGKILLed.
STOP_GRACE = 3

# The clients salt-api may serve (netapi_enable_clients).
API_CLIENTS = [
    "local",
    "local_async",
    "local_batch",
    "local_subset",
    "runner",
    "runner_async",
    "wheel",
    "wheel_async",
]

_stop = []  # why we stop ("SIGTERM", "EOF on stdin"), once asked to
USER = pwd.getpwuid(os.geteuid()).pw_name  # the daemons run as this user


def log(msg):
    print(f"realsalt: {msg}", file=sys.stderr, flush=True)


class StartupError(Exception):
    pass


class Stopped(Exception):
    """Asked to stop (signal, EOF) before the fleet was ready."""


def free_ports(count):
    """Distinct TCP ports free on 127.0.0.1 (held open together so that
    none is handed out twice)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_config(path, conf):
    """Salt reads YAML; JSON is YAML."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conf, indent=2) + "\n")


def master_config(root, ports, user, api_port):
    conf = {
        "id": "master",
        "interface": "127.0.0.1",
        "publish_port": ports["publish"],
        "ret_port": ports["ret"],
        "user": USER,
        "root_dir": str(root),
        "pki_dir": str(root / "pki"),
        "cachedir": str(root / "cache"),
        "token_dir": str(root / "cache" / "tokens"),
        "sock_dir": str(root / "sock"),
        "pidfile": str(root / "run" / "master.pid"),
        "log_file": str(root / "logs" / "master"),
        "key_logfile": str(root / "logs" / "key"),
        "log_level": "warning",
        "log_level_logfile": "warning",
        "file_roots": {
            "base": [str(root / "srv" / "salt")],
            "dev": [str(root / "srv" / "dev")],
        },
        "pillar_roots": {"base": [str(root / "srv" / "pillar")]},
        "auto_accept": True,
        "timeout": 5,
        # Speed. Each MWorker loads its modules, and the master's own
        # grains several times, on its first requests (pillar for each
        # new minion): two workers rather than five, and no master grains
        # (targeting and pillar use the minions' grains, not these).
        "worker_threads": 2,
        "skip_grains": True,
        # salt-api (read by salt-api from this same file).
        "external_auth": {"auto": {user: [".*", "@runner", "@wheel", "@jobs"]}},
        "netapi_enable_clients": API_CLIENTS,
        "api_logfile": str(root / "logs" / "api"),
        "api_pidfile": str(root / "run" / "api.pid"),
    }
    if api_port is not None:
        conf["rest_cherrypy"] = {
            "host": "127.0.0.1",
            "port": api_port,
            "disable_ssl": True,
            # GET /stats counts requests (CherryPy's cpstats).
            "collect_stats": True,
        }
    return conf


def minion_config(root, minion_id, ports):
    return {
        "id": minion_id,
        "master": "127.0.0.1",
        "master_port": ports["ret"],
        "publish_port": ports["publish"],
        "user": USER,
        "root_dir": str(root),
        "pki_dir": str(root / "pki"),
        "cachedir": str(root / "cache"),
        "sock_dir": str(root / "sock"),
        "pidfile": str(root / "run" / "minion.pid"),
        "log_file": str(root / "logs" / "minion"),
        "log_level": "warning",
        "log_level_logfile": "warning",
        # Speed: no slow grains, computed once rather than twice at start
        # (grains_cache), no waiting between tries.
        "enable_gpu_grains": False,
        "enable_fqdns_grains": False,
        "grains_cache": True,
        "acceptance_wait_time": 1,
        "acceptance_wait_time_max": 1,
        "random_reauth_delay": 0,
        "random_startup_delay": 0,
        # ZeroMQ retries a refused connection (the master not bound yet)
        # after recon_default ms: 1000 by default.
        "recon_default": 100,
        "recon_max": 1000,
        "recon_randomize": False,
        "auth_timeout": 5,
        "master_alive_interval": 0,
        "master_tries": -1,
    }


def _deathsig():
    """In the child, before exec: get SIGTERM if this script dies, even by
    SIGKILL (Linux's PR_SET_PDEATHSIG), so no daemon outlives it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except Exception:  # pylint: disable=broad-except
        pass


class Fleet:
    """The daemons started so far, each the leader of its process group."""

    def __init__(self):
        self.procs = []  # (name, Popen, [log files])

    def spawn(self, name, script, config_dir, logs, extra=()):
        """Start a Salt daemon in the foreground, in its own process group."""
        exe = Path(sys.executable).parent / script
        cmd = [str(exe)] if exe.exists() else [
            sys.executable,
            "-c",
            f"import salt.scripts; salt.scripts.{script.replace('-', '_')}()",
        ]
        cmd += ["-c", str(config_dir), "-l", "warning"] + list(extra)
        out = config_dir / "logs" / f"{script}.out"
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "ab") as fh:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_deathsig if sys.platform.startswith("linux") else None,
                close_fds=True,
            )
        self.procs.append((name, proc, [out] + list(logs)))
        log(f"started {name} (pid {proc.pid})")
        return proc

    def stop_one(self, name):
        """Stop the daemon `name` (its whole process group) and reap it;
        False when no such daemon runs."""
        for i, (n, proc, _) in enumerate(self.procs):
            if n == name:
                _killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(STOP_GRACE)
                except subprocess.TimeoutExpired:
                    pass
                _killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                del self.procs[i]
                log(f"stopped {name}")
                return True
        return False

    def check_alive(self):
        for name, proc, _ in self.procs:
            if proc.poll() is not None:
                raise StartupError(f"{name} exited with status {proc.returncode}")

    def dump_logs(self, lines=40):
        for name, _, files in self.procs:
            for f in files:
                try:
                    text = Path(f).read_text(errors="replace").splitlines()
                except OSError:
                    continue
                if not text:
                    continue
                print(f"----- {name}: {f} (last {lines} lines) -----", file=sys.stderr)
                print("\n".join(text[-lines:]), file=sys.stderr)
        sys.stderr.flush()

    def stop(self):
        """SIGTERM every daemon's process group, SIGKILL what is left after
        STOP_GRACE seconds, and reap."""
        for _, proc, _ in self.procs:
            _killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for _, proc, _ in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        # Kill whatever is left of each group: a late leader, or workers
        # and job processes that a leader did not take down with it.
        for _, proc, _ in self.procs:
            _killpg(proc.pid, signal.SIGKILL)
        for _, proc, _ in self.procs:
            proc.wait()
        self.procs = []


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_input = bytearray()  # what stdin gave that is not a whole line yet
_commands = []  # whole lines read from stdin, not yet carried out


def wait_stop(timeout):
    """Sleep up to `timeout` seconds; True once a stop was asked for: a
    signal, or EOF (or an error) on stdin. Whole lines read meanwhile go to
    `_commands`."""
    if _stop:
        return True
    try:
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], timeout)
        if ready:
            data = os.read(sys.stdin.fileno(), 65536)
            if not data:
                _stop.append("EOF on stdin")
            _input.extend(data)
            while b"\n" in _input:
                line, _, rest = bytes(_input).partition(b"\n")
                _input[:] = rest
                _commands.append(line.decode(errors="replace").strip())
    except (OSError, ValueError):
        # No usable stdin: only signals stop us.
        time.sleep(timeout)
    return bool(_stop)


def tcp_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def ping_all(master_conf_path, minions, deadline):
    """Ping through the master until every minion has answered once. Each
    round pings the minions still silent and waits at most 2 s: a minion
    not yet subscribed misses the publication, and the next round asks
    again. (These pings stay in the master's job cache, as user root.)"""
    import salt.client  # pylint: disable=import-outside-toplevel
    import salt.config  # pylint: disable=import-outside-toplevel

    opts = salt.config.client_config(str(master_conf_path))
    client = salt.client.LocalClient(mopts=opts)
    waiting = set(minions)
    try:
        while waiting:
            round_end = min(deadline, time.monotonic() + 2)
            try:
                for ret in client.cmd_iter_no_block(
                    sorted(waiting), "test.ping", tgt_type="list", timeout=2
                ):
                    for mid, body in (ret or {}).items():
                        if isinstance(body, dict) and body.get("ret") is True:
                            waiting.discard(mid)
                    if not waiting or time.monotonic() > round_end or _stop:
                        break
            except Exception as exc:  # pylint: disable=broad-except
                log(f"test.ping not through yet: {exc}")
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise StartupError(
                    "timed out waiting for test.ping from " + ", ".join(sorted(waiting))
                )
            if wait_stop(0.2):
                raise Stopped()
    finally:
        client.destroy()


def api_login(url, user):
    body = json.dumps({"username": user, "password": "x", "eauth": "auto"}).encode()
    req = urllib.request.Request(
        url + "/login",
        data=body,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            data = json.loads(resp.read())
            return resp.status == 200 and bool(data["return"][0].get("token"))
    except (OSError, ValueError, KeyError, IndexError, urllib.error.URLError):
        return False


def start(args, fleet):
    base = Path(args.dir).resolve()
    minions = [m for m in args.minions.split(",") if m]
    if not minions or len(set(minions)) != len(minions):
        raise StartupError(f"--minions needs distinct, non-empty ids: {args.minions!r}")
    t0 = time.monotonic()
    deadline = t0 + STARTUP_DEADLINE

    p = free_ports(3)
    ports = {"publish": p[0], "ret": p[1], "api": p[2] if args.api else None}

    mroot = base / "master"
    write_config(mroot / "master", master_config(mroot, ports, args.user, ports["api"]))
    for sub in ("pki", "cache", "sock", "logs", "run", "srv/salt", "srv/pillar"):
        (mroot / sub).mkdir(parents=True, exist_ok=True)
    fleet.spawn("salt-master", "salt-master", mroot, [mroot / "logs" / "master"])

    for mid in minions:
        root = base / f"minion-{mid}"
        write_config(root / "minion", minion_config(root, mid, ports))
        for sub in ("pki", "cache", "sock", "logs", "run"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        # Unix sockets' paths are at most 107 bytes.
        if len(str(root / "sock")) > 60:
            log(f"warning: {root / 'sock'} is long; Salt's sockets may not fit")
        # No keepalive supervisor: one process, and a crash shows as an exit.
        fleet.spawn(
            f"salt-minion {mid}",
            "salt-minion",
            root,
            [root / "logs" / "minion"],
            extra=["--disable-keepalive"],
        )

    if args.api:
        fleet.spawn("salt-api", "salt-api", mroot, [mroot / "logs" / "api"])

    # The master's request port, then a ping that every minion answers.
    while not tcp_open(ports["ret"]):
        fleet.check_alive()
        if time.monotonic() > deadline:
            raise StartupError("timed out waiting for the master's ret_port")
        if wait_stop(0.1):
            raise Stopped()
    log(f"master listening after {time.monotonic() - t0:.1f}s")
    ping_all(mroot / "master", minions, deadline)
    fleet.check_alive()
    log(f"all minions answer test.ping after {time.monotonic() - t0:.1f}s")

    api_url = None
    if args.api:
        api_url = f"http://127.0.0.1:{ports['api']}"
        while not api_login(api_url, args.user):
            fleet.check_alive()
            if time.monotonic() > deadline:
                raise StartupError("timed out waiting for salt-api's /login")
            if wait_stop(0.2):
                raise Stopped()
        log(f"salt-api takes logins after {time.monotonic() - t0:.1f}s")

    return {
        "api_url": api_url,
        "master_config": str(mroot / "master"),
        "publish_port": ports["publish"],
        "ret_port": ports["ret"],
        "minions": minions,
        "user": args.user,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="an empty writable directory")
    ap.add_argument("--minions", required=True, help="comma-separated minion ids")
    ap.add_argument("--api", action="store_true", help="also run salt-api")
    ap.add_argument("--user", default="alice", help="the API's eauth user")
    args = ap.parse_args()

    if args.api:
        try:
            # pylint: disable-next=import-outside-toplevel,unused-import
            import cherrypy  # noqa: F401
        except ImportError:
            log(
                "CherryPy is missing, and salt-api's rest_cherrypy needs it: "
                f"{Path(sys.executable).parent / 'pip'} install cherrypy==18.10.0"
            )
            return 1

    def on_signal(signum, _frame):
        _stop.append(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    fleet = Fleet()
    try:
        try:
            info = start(args, fleet)
        except Stopped:
            log(f"stopping before ready ({_stop[0]})")
            return 0
        except Exception as exc:  # pylint: disable=broad-except
            if isinstance(exc, StartupError):
                log(f"startup failed: {exc}")
            else:
                log(f"startup failed:\n{traceback.format_exc()}")
            fleet.dump_logs()
            return 1
        print(json.dumps(info), flush=True)
        warned = set()
        while not wait_stop(1.0):
            # `stop-minion ID` stops that minion, as an operator stopping
            # its service would, and answers `{"stopped": ID}` (or
            # `{"error": …}`) on a line of its own.
            while _commands:
                words = _commands.pop(0).split()
                if len(words) == 2 and words[0] == "stop-minion":
                    if fleet.stop_one(f"salt-minion {words[1]}"):
                        print(json.dumps({"stopped": words[1]}), flush=True)
                    else:
                        print(json.dumps({"error": f"no minion {words[1]}"}), flush=True)
                elif words:
                    print(json.dumps({"error": f"unknown command {words!r}"}), flush=True)
            for name, proc, _ in fleet.procs:
                if proc.poll() is not None and name not in warned:
                    warned.add(name)
                    log(f"warning: {name} exited with status {proc.returncode}")
        log(f"stopping ({_stop[0]})")
        return 0
    finally:
        fleet.stop()
        log("all daemons stopped")


if __name__ == "__main__":
    sys.exit(main())
