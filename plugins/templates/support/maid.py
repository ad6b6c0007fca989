"""What a maid plugin written in Python can do outside its sandbox.

`maid plugin build` writes this file into the project's `.maid/` directory
(with `maid_world.py`, which connects `app.py` to the maid host); do not
edit it there. Everything here goes through the `maid:plugin/host` WIT
interface and is checked against the plugin's grants, exactly as for a
plugin written in Rust with maid-sdk.

Outside the component (in `python3 -m unittest`) the host is not there:
tests replace what they need, e.g. `maid.grains = lambda: {...}`.

Logging goes through the standard `logging` module
(`log = logging.getLogger(__name__)`); in the agent every record becomes a
line of its log tagged with the plugin and the job id.
"""

from dataclasses import dataclass


class CommandExecutionError(Exception):
    """The function failed: the message is the return, `retcode` the job's
    (Salt's exception of the same name)."""

    def __init__(self, message, retcode=1):
        super().__init__(message)
        self.retcode = retcode


class Denied(Exception):
    """A capability this call needs is not granted (`Denied: ...`, 77)."""


@dataclass
class Completed:
    """What a program started with `run` did."""

    pid: int
    retcode: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


def _host():
    # Imported on first use, so `app.py` imports outside the component too.
    from wit_world.imports import host

    return host


def _unwrap(thunk):
    from componentize_py_types import Err

    host = _host()
    try:
        return thunk()
    except Err as e:
        if isinstance(e.value, host.HostError_Denied):
            raise Denied(e.value.value) from None
        raise CommandExecutionError(e.value.value) from None


def grains():
    """The minion's grains, as a dict."""
    import json

    return json.loads(_host().grains())


def set_retcode(retcode):
    """Set the job's retcode while still returning a value."""
    _host().set_retcode(retcode)


def dirs():
    """The directories granted to this plugin: `[(path, writable), ...]`."""
    return [(d.path, d.writable) for d in _host().dirs()]


def run(argv, cwd=None, env=None, stdin=None, merge_stderr=False, timeout=None, runas=None):
    """Run a program (the `exec` capability) and wait for it.

    `argv` is a list; `env` a dict set on top of the scrubbed environment;
    `stdin` bytes or str; `timeout` seconds. Output is decoded as UTF-8.
    """
    host = _host()
    if isinstance(stdin, str):
        stdin = stdin.encode()
    request = host.ExecRequest(
        argv=list(argv),
        cwd=cwd,
        env=list((env or {}).items()),
        stdin=stdin,
        merge_stderr=merge_stderr,
        timeout_ms=None if timeout is None else int(timeout * 1000),
        runas=runas,
    )
    out = _unwrap(lambda: host.exec(request))
    return Completed(
        pid=out.pid,
        retcode=out.retcode,
        stdout=out.stdout.decode(errors="replace"),
        stderr=out.stderr.decode(errors="replace"),
        timed_out=out.timed_out,
        truncated=out.truncated,
    )


def fetch(url):
    """The bytes of a `salt://` source (the `fetch` capability), or None
    when it does not exist."""
    host = _host()
    source = _unwrap(lambda: host.fetch(url))
    if source is None:
        return None
    chunks = []
    with source:
        while True:
            chunk = _unwrap(lambda: source.read(1 << 20))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
