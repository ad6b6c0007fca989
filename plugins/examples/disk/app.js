// Part of Salt's `disk` execution module, as a maid plugin in JavaScript.
//
// As Salt does, it runs `df -P` and parses what it prints; the agent's
// configuration must grant the program (`exec = ["/usr/bin/df"]` and
// `env = ["PATH"]` under [plugins.disk]).

/** `df -P` output as Salt's `disk.usage` returns it, keyed by mount point. */
export function parseDf(text) {
  const ret = {};
  for (const line of text.split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 6) continue;
    const mount = cols.slice(5).join(" ");
    ret[mount] = {
      filesystem: cols[0],
      "1K-blocks": cols[1],
      used: cols[2],
      available: cols[3],
      capacity: cols[4],
    };
  }
  return ret;
}

function df(maid) {
  const out = maid.run(["df", "-P"]);
  if (out.retcode !== 0) {
    throw maid.error(`df -P failed: ${out.stderr.trim()}`, out.retcode);
  }
  return parseDf(out.stdout);
}

export const functions = {
  usage: {
    doc: "Return usage information for volumes mounted on this minion",
    args: [],
    run(maid) {
      const ret = df(maid);
      maid.log.debug(`df -P listed ${Object.keys(ret).length} file systems`);
      return ret;
    },
  },
  percent: {
    doc: "Return the percent of use of each volume, or of one mount point",
    args: ["args"],
    run(maid, mount) {
      const ret = Object.fromEntries(
        Object.entries(df(maid)).map(([m, v]) => [m, v.capacity]),
      );
      if (mount === undefined || mount === null) return ret;
      if (!(mount in ret)) {
        maid.log.error(`no file system is mounted at ${mount}`);
        return {};
      }
      return ret[mount];
    },
  },
};
