"""Salt's own answers, for the differential tests (tests/salt.rs).

Run with the Salt 3008.4 venv that `./dev` makes:

    target/salt-venv/bin/python tests/salt/oracle.py targeting < cases.json

Reads a JSON document on stdin and writes one JSON document on stdout. Each
subcommand asks real Salt code, never a re-implementation of it.
"""

import json
import logging
import os
import sys

import salt.config
import salt.loader

logging.disable(logging.CRITICAL)


def targeting(doc):
    """Does each minion run each job? As `Minion._target_load` decides.

    Input: {"minions": {id: grains}, "cases": [{"tgt", "tgt_type",
    "delimiter" (null: the default)}]}.
    Output: for each case, the sorted ids whose matcher returned a true
    value; a matcher that raised counts as not targeted, as the minion
    drops the publication when `_target_load` raises.
    """
    opts = salt.config.minion_config(None)
    opts["file_client"] = "local"
    matchers = salt.loader.matchers(opts)
    out = []
    for case in doc["cases"]:
        tgt, tgt_type = case["tgt"], case.get("tgt_type", "glob")
        hit = []
        for minion_id, grains in doc["minions"].items():
            mopts = dict(opts, id=minion_id, grains=grains)
            func = matchers.get(f"{tgt_type}_match.match")
            if func is None:
                continue
            try:
                if tgt_type in ("grain", "grain_pcre", "pillar"):
                    # `load.get("delimiter", DEFAULT_TARGET_DELIM)`.
                    delimiter = case.get("delimiter")
                    if delimiter is None:
                        delimiter = ":"
                    ok = func(tgt, delimiter=delimiter, opts=mopts, minion_id=minion_id)
                else:
                    ok = func(tgt, opts=mopts, minion_id=minion_id)
            except Exception:  # pylint: disable=broad-except
                ok = False
            if ok:
                hit.append(minion_id)
        out.append(sorted(hit))
    return out


def _wire(value):
    """A value as a minion receives it (msgpack), in JSON: what JSON cannot
    hold (infinities, NaN) is marked `{"__nonjson__": repr}`."""
    import math

    import salt.payload

    def walk(v):
        if isinstance(v, float) and not math.isfinite(v):
            return {"__nonjson__": repr(v)}
        if isinstance(v, dict):
            return {
                (k if isinstance(k, str) else json.dumps(walk(k))): walk(x)
                for k, x in v.items()
            }
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(salt.payload.loads(salt.payload.dumps(value)))


def arguments(doc):
    """Salt's reading of command-line words, for each list of words.

    Input: {"cases": [[word, ...], ...]}. Output, for each: `published`,
    the job's `arg` split into positionals and the `__kwarg__` dict, as
    `salt` publishes them (`parse_input`); and `minion`, the args and
    kwargs a function then receives (`load_args_and_kwargs`), as
    `salt-call` passes them.
    """
    import salt.minion
    import salt.utils.args

    def fun(*args, **kwargs):  # pylint: disable=unused-argument
        pass

    out = []
    for words in doc["cases"]:
        arg = salt.utils.args.parse_input(list(words))
        kwarg = {}
        if arg and isinstance(arg[-1], dict) and arg[-1].get("__kwarg__") is True:
            kwarg = {k: v for k, v in arg[-1].items() if k != "__kwarg__"}
            positional = arg[:-1]
        else:
            positional = arg
        margs, mkwargs = salt.minion.load_args_and_kwargs(
            fun, salt.utils.args.parse_input(list(words))
        )
        out.append(
            {
                "published": {"arg": _wire(positional), "kwarg": _wire(kwarg)},
                "minion": {"args": _wire(margs), "kwargs": _wire(mkwargs)},
            }
        )
    return out


def modules(doc):
    """Salt's execution modules, called as `salt-call --local` calls them.

    Input: {"calls": [[fun, word, ...], ...], "grains": {...}, "id": minion id,
    "pillar_roots": {env: [dir, ...]} (the pillar is compiled from them
    first, as salt-call does at start), "path_prefix": dir, "systemd":
    bool, "nodegroups": {...},
    "file_roots": {env: [dir, ...]} (else `file_root`: base's one)}: each
    call's words are read as
    salt-call reads its command line (`parse_input`, then
    `load_args_and_kwargs` against the function). `grains`, when given, are
    the minion's grains instead of the ones Salt detects; `path_prefix` goes
    first on `PATH`. `systemd`: Salt takes the host for one systemd booted
    (`salt.utils.systemd.booted` says True), so `service` is Salt's
    `systemd_service` and runs the `systemctl` it finds on `PATH` (a test's
    fake, through `path_prefix`), and `systemd.scope` is False, as a
    minion's config may set it, so that changes are not wrapped in
    `systemd-run --scope`. Output, for each call: {"return": value} or
    {"error": exception class name, "message": str(exception)}; and the
    retcode the call left in `__context__`, when it set one.
    """
    import tempfile

    import salt.minion
    import salt.utils.args

    tmp = tempfile.mkdtemp()
    if doc.get("path_prefix"):
        # Programs found there first (the rpm tests' dnf and rpm).
        os.environ["PATH"] = f"{doc['path_prefix']}:{os.environ['PATH']}"
    opts = salt.config.minion_config(None)
    opts.update(
        file_client="local",
        id=doc.get("id") or "local",
        cachedir=f"{tmp}/cache",
        pki_dir=f"{tmp}/pki",
        sock_dir=f"{tmp}/sock",
        extension_modules=f"{tmp}/extmods",
        grains_cache=False,
        file_roots=doc.get("file_roots") or {"base": [doc.get("file_root") or tmp]},
        # grains.setval writes `grains` beside the config file: here.
        conf_file=f"{tmp}/minion",
        local=True,
    )
    if doc.get("systemd"):
        import salt.utils.systemd

        salt.utils.systemd.booted = lambda context=None: True
        opts["systemd.scope"] = False
    if doc.get("nodegroups") is not None:
        # What a top file's `nodegroup` matcher and `N@` words read.
        opts["nodegroups"] = doc["nodegroups"]
    if doc.get("grains") is not None:
        opts["grains"] = doc["grains"]
    else:
        opts["grains"] = salt.loader.grains(opts)
    if doc.get("pillar_roots"):
        import salt.pillar

        opts["pillar_roots"] = doc["pillar_roots"]
        opts["pillar"] = salt.pillar.get_pillar(
            opts, opts["grains"], opts["id"]
        ).compile_pillar()
    funcs = salt.loader.minion_mods(opts, utils=salt.loader.utils(opts))
    out = []
    for fun, *words in doc["calls"]:
        func = funcs[fun]
        funcs.pack["__context__"].pop("retcode", None)
        # salt-call passes its job data along as `__pub_*` keywords to a
        # function that takes `**kwargs`; test.try hands them on, which
        # decides what it returns. (Other functions ignore or echo them.)
        data = None
        if fun == "test.try":
            data = {"fun": fun, "pid": os.getpid(), "jid": "0", "tgt": "salt-call"}
        try:
            args, kwargs = salt.minion.load_args_and_kwargs(
                func, salt.utils.args.parse_input(list(words)), data
            )
            value = func(*args, **kwargs)
            if isinstance(value, BaseException):
                # What salt-call prints for it (its outputters' `repr`).
                value = repr(value)
            ret = {"return": _wire(value)}
        except Exception as exc:  # pylint: disable=broad-except
            ret = {"error": type(exc).__name__, "message": str(exc)}
        retcode = funcs.pack["__context__"].get("retcode")
        if retcode is not None:
            ret["retcode"] = retcode
        out.append(ret)
    if doc.get("grains_file"):
        import salt.utils.yaml

        path = f"{tmp}/grains"
        kept = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                kept = salt.utils.yaml.safe_load(f)
        out.append({"grains_file": _wire(kept)})
    return out


def output(doc):
    """What `salt-call --out OUT` prints for each return, byte for byte.

    Input: {"cases": [{"out", "indent" (or null), "data", "color"
    (optional), "retcode" (optional), "opts" (optional)}]}, `data` being
    the `{id: return}` the CLI hands the outputter, `retcode` the
    `_retcode` it passes along, `opts` more of Salt's opts (the highstate
    outputter's `state_output`, `state_verbose`, ...).
    Output, for each: {"stdout", "stderr"} as `salt.output.display_output`
    writes them, in colour when `color` is true.
    """
    import io
    import logging as pylogging

    import salt.output

    base = salt.config.minion_config(None)
    base["color"] = False
    errors = io.StringIO()
    handler = pylogging.StreamHandler(errors)
    handler.setFormatter(pylogging.Formatter("[%(levelname)-8s] %(message)s"))
    pylogging.disable(pylogging.NOTSET)
    salt_log = pylogging.getLogger("salt.output")
    salt_log.addHandler(handler)
    salt_log.setLevel(pylogging.ERROR)
    out = []
    for case in doc["cases"]:
        opts = dict(base)
        opts["color"] = bool(case.get("color"))
        if case.get("indent") is not None:
            opts["output_indent"] = case["indent"]
        opts.update(case.get("opts") or {})
        errors.seek(0)
        errors.truncate()
        text = salt.output.try_printout(
            case["data"], case["out"], opts, _retcode=case.get("retcode", 0)
        )
        stdout = text + "\n" if text else ""
        out.append({"stdout": stdout, "stderr": errors.getvalue()})
    pylogging.disable(pylogging.CRITICAL)
    return out


def nodegroups(doc):
    """How the master expands nodegroups before it publishes.

    Input: {"groups": {name: definition}, "names": [...], "compound":
    [...]}. Output: {"names": nodegroup_comp's words for each name (""
    as []), "compound": each compound target with its N@ words resolved as
    LocalClient._prep_pub resolves them}.
    """
    import salt.utils.minions

    groups = doc["groups"]

    def comp(name):
        return list(salt.utils.minions.nodegroup_comp(name, groups) or [])

    resolved = []
    for tgt in doc["compound"]:
        words = []
        for word in tgt.split():
            if word.startswith("N@") and len(word) > 2:
                words.extend(salt.utils.minions.nodegroup_comp(word[2:], groups))
            else:
                words.append(word)
        resolved.append(" ".join(words))
    return {"names": [comp(n) for n in doc["names"]], "compound": resolved}


def merging(doc):
    """How Salt merges pillar (`salt.utils.dictupdate.merge`, as
    `Pillar.render_pillar` calls it).

    Input: {"cases": [{"a", "b", "strategy", "renderer", "merge_lists"}]}.
    Output, for each: {"merged": value} or {"error": exception class name}.
    """
    import salt.utils.dictupdate

    out = []
    for case in doc["cases"]:
        try:
            merged = salt.utils.dictupdate.merge(
                case["a"],
                case["b"],
                strategy=case["strategy"],
                renderer=case["renderer"],
                merge_lists=case["merge_lists"],
            )
            out.append({"merged": _wire(merged)})
        except Exception as exc:  # pylint: disable=broad-except
            out.append({"error": type(exc).__name__})
    return out


def pillar(doc):
    """Pillar as a master compiles it for a minion, and as `salt-call
    --local pillar.items` does (`salt.pillar.get_pillar(...)
    .compile_pillar()`, the call `pillar.items` makes).

    Input: {"cases": [{"pillar_roots": {env: [dir]}, "id", "grains",
    "opts": {...} (pillar_source_merging_strategy, pillar_merge_lists,
    nodegroups, ...), "saltenv", "pillarenv", "pillar_override"}]}.
    Output, for each: {"pillar": value} or {"error": exception class name,
    "message": str(exception)}.
    """
    import tempfile

    import salt.pillar

    out = []
    for case in doc["cases"]:
        tmp = tempfile.mkdtemp()
        opts = salt.config.minion_config(None)
        opts.update(
            file_client="local",
            id=case["id"],
            cachedir=f"{tmp}/cache",
            pki_dir=f"{tmp}/pki",
            sock_dir=f"{tmp}/sock",
            extension_modules=f"{tmp}/extmods",
            grains_cache=False,
            file_roots={"base": [tmp]},
            pillar_roots=case["pillar_roots"],
            conf_file=f"{tmp}/minion",
            local=True,
            grains=case["grains"],
        )
        opts.update(case.get("opts") or {})
        try:
            compiled = salt.pillar.get_pillar(
                opts,
                case["grains"],
                case["id"],
                saltenv=case.get("saltenv"),
                pillar_override=case.get("pillar_override"),
                pillarenv=case.get("pillarenv"),
            ).compile_pillar()
            out.append({"pillar": _wire(compiled)})
        except Exception as exc:  # pylint: disable=broad-except
            out.append({"error": type(exc).__name__, "message": str(exc)})
    return out


COMMANDS = {
    "pillar": pillar,
    "merging": merging,
    "targeting": targeting,
    "arguments": arguments,
    "output": output,
    "nodegroups": nodegroups,
    "modules": modules,
}

if __name__ == "__main__":
    result = COMMANDS[sys.argv[1]](json.load(sys.stdin))
    json.dump(result, sys.stdout)
