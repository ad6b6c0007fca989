"""The `plugin` world of `maid:plugin` for a plugin written in Python.

Written by `maid plugin build` into `.maid/`; do not edit. It describes the
module from the public functions of `app.py` and the manifest in
`pyproject.toml`, binds a job's arguments the way Python binds them, and
turns exceptions into Salt's returns: `TypeError` from binding into
`Passed invalid arguments`, `maid.Denied` into `Denied:`,
`maid.CommandExecutionError` into its message and retcode, and anything
else into the traceback, as Salt returns it.
"""

import inspect
import json
import logging
import traceback

import app
import maid
import wit_world
from componentize_py_types import Err
from wit_world.imports import host, types

# Filled in by `maid plugin build` from pyproject.toml.
MANIFEST = json.loads(@MANIFEST@)

_LEVELS = [
    (logging.ERROR, host.Level.ERROR),
    (logging.WARNING, host.Level.WARN),
    (logging.INFO, host.Level.INFO),
    (logging.DEBUG, host.Level.DEBUG),
]


class _HostLog(logging.Handler):
    """Sends every log record to the agent's log."""

    def emit(self, record):
        level = next((wit for py, wit in _LEVELS if record.levelno >= py), host.Level.TRACE)
        host.log(level, self.format(record))


logging.getLogger().addHandler(_HostLog())
logging.getLogger().setLevel(logging.DEBUG)


def _functions():
    return {
        name: fn
        for name, fn in inspect.getmembers(app, inspect.isfunction)
        if fn.__module__ == app.__name__ and not name.startswith("_")
    }


def _arg_names(fn):
    names = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            names.append("*args")
        elif p.kind == p.VAR_KEYWORD:
            names.append("**kwargs")
        else:
            names.append(p.name)
    return names


def _fail(kind, message, retcode=1):
    return Err(types.Error(kind=kind, message=message, retcode=retcode))


class WitWorld(wit_world.WitWorld):
    def describe(self):
        return types.Manifest(
            module=MANIFEST["module"],
            version=MANIFEST["version"],
            functions=[
                types.FunctionInfo(
                    name=name,
                    doc=(inspect.getdoc(fn) or "").split("\n")[0],
                    args=_arg_names(fn),
                )
                for name, fn in _functions().items()
            ],
            capabilities=[types.Capability[c.upper().replace("-", "_")] for c in MANIFEST["capabilities"]],
        )

    def call(self, function, args, kwargs, ctx):
        fn = _functions().get(function)
        if fn is None:
            raise _fail(types.ErrorKind.FAILED, f"'{MANIFEST['module']}.{function}' is not available.", 254)
        args = json.loads(args)
        # Salt adds `__pub_*` keywords of its own; functions never see them.
        kwargs = {k: v for k, v in json.loads(kwargs).items() if not k.startswith("__")}
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            raise _fail(types.ErrorKind.BAD_ARGUMENTS, f"{MANIFEST['module']}.{function}(): {e}") from None
        try:
            ret = fn(*bound.args, **bound.kwargs)
        except maid.Denied as e:
            raise _fail(types.ErrorKind.DENIED, str(e)) from None
        except maid.CommandExecutionError as e:
            raise _fail(types.ErrorKind.FAILED, f"ERROR: {e}", e.retcode) from None
        except Exception:
            raise _fail(
                types.ErrorKind.FAILED,
                "The minion function caused an exception: " + traceback.format_exc(),
            ) from None
        try:
            return json.dumps(ret)
        except (TypeError, ValueError) as e:
            raise _fail(types.ErrorKind.FAILED, f"return is not JSON: {e}") from None
