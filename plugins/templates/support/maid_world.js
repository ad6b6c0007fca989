// The `plugin` world of `maid:plugin` for a plugin written in JavaScript.
//
// Written by `maid plugin build` into `.maid/`; do not edit. It describes
// the module from the `functions` that `app.js` exports and the manifest
// in package.json, binds a job's arguments to each function's `args` (by
// position, then by name), and turns what a function throws into Salt's
// returns: `maid.error(message, retcode)` into its message and retcode, a
// denied host call into `Denied:`, anything else into the exception and
// its stack, as Salt returns a traceback.

import * as host from "maid:plugin/host@0.1.0";
import { functions } from "../app.js";

// Filled in by `maid plugin build` from package.json.
const MANIFEST = JSON.parse(@MANIFEST@);

/** An error a function throws on purpose: its message is the return. */
class CommandExecutionError extends Error {
  constructor(message, retcode = 1) {
    super(message);
    this.retcode = retcode;
  }
}

/** A capability the call needs was not granted. */
class Denied extends Error {}

const decoder = new TextDecoder();

/** Unwrap a host result: host errors arrive as a thrown `payload`. */
function unwrap(thunk) {
  try {
    return thunk();
  } catch (e) {
    const p = e && e.payload;
    if (p && p.tag === "denied") throw new Denied(p.val);
    if (p && p.tag === "failed") throw new CommandExecutionError(p.val);
    throw e;
  }
}

/** What a function receives as its first argument: the host, checked
 * against the plugin's grants. Tests pass an object of the same shape. */
function maidFor(ctx) {
  const log = (level) => (message) => host.log(level, String(message));
  return {
    context: { jid: ctx.jid, minionId: ctx.minionId, user: ctx.user },
    log: {
      trace: log("trace"),
      debug: log("debug"),
      info: log("info"),
      warn: log("warn"),
      error: log("error"),
    },
    error: (message, retcode = 1) => new CommandExecutionError(message, retcode),
    grains: () => JSON.parse(host.grains()),
    setRetcode: (retcode) => host.setRetcode(retcode),
    dirs: () => host.dirs(),
    /** Run a program (the `exec` capability); output decoded as UTF-8. */
    run(argv, { cwd, env = {}, stdin, mergeStderr = false, timeout, runas } = {}) {
      const out = unwrap(() =>
        host.exec({
          argv,
          cwd,
          env: Object.entries(env),
          stdin: typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin,
          mergeStderr,
          timeoutMs: timeout === undefined ? undefined : BigInt(Math.round(timeout * 1000)),
          runas,
        }),
      );
      return {
        pid: out.pid,
        retcode: out.retcode,
        stdout: decoder.decode(out.stdout),
        stderr: decoder.decode(out.stderr),
        timedOut: out.timedOut,
        truncated: out.truncated,
      };
    },
    /** The bytes of a `salt://` source (the `fetch` capability), or null. */
    fetch(url) {
      const source = unwrap(() => host.fetch(url));
      if (source === undefined || source === null) return null;
      const chunks = [];
      let size = 0;
      for (;;) {
        const chunk = unwrap(() => source.read(1 << 20));
        if (chunk.length === 0) break;
        chunks.push(chunk);
        size += chunk.length;
      }
      const all = new Uint8Array(size);
      let at = 0;
      for (const c of chunks) {
        all.set(c, at);
        at += c.length;
      }
      return all;
    },
  };
}

function fail(kind, message, retcode = 1) {
  return { payload: { kind, message, retcode } };
}

export function describe() {
  return {
    module: MANIFEST.module,
    version: MANIFEST.version,
    functions: Object.entries(functions).map(([name, f]) => ({
      name,
      doc: (f.doc || "").split("\n")[0],
      args: f.args || [],
    })),
    capabilities: MANIFEST.capabilities,
  };
}

export function call(name, argsJson, kwargsJson, ctx) {
  const fun = `${MANIFEST.module}.${name}`;
  const f = Object.hasOwn(functions, name) ? functions[name] : undefined;
  if (!f) throw fail("failed", `'${fun}' is not available.`, 254);
  const names = f.args || [];
  const args = JSON.parse(argsJson);
  // Salt adds `__pub_*` keywords of its own; functions never see them.
  const kwargs = Object.entries(JSON.parse(kwargsJson)).filter(([k]) => !k.startsWith("__"));
  if (args.length > names.length) {
    throw fail("bad-arguments", `${fun}() takes ${names.length} positional arguments but ${args.length} were given`);
  }
  const bound = [...args];
  for (const [key, value] of kwargs) {
    const at = names.indexOf(key);
    if (at < 0) throw fail("bad-arguments", `${fun}() got an unexpected keyword argument '${key}'`);
    if (at < args.length) throw fail("bad-arguments", `${fun}() got multiple values for argument '${key}'`);
    bound[at] = value;
  }
  let ret;
  try {
    ret = f.run(maidFor(ctx), ...bound);
  } catch (e) {
    if (e instanceof Denied) throw fail("denied", e.message);
    if (e instanceof CommandExecutionError) throw fail("failed", `ERROR: ${e.message}`, e.retcode);
    const trace = e instanceof Error ? `${e}\n${e.stack || ""}` : String(e);
    throw fail("failed", `The minion function caused an exception: ${trace.trimEnd()}`);
  }
  return JSON.stringify(ret === undefined ? null : ret);
}
