// Unit tests of the `disk` example: `node --test` in this directory.

import assert from "node:assert/strict";
import { test } from "node:test";

import { functions, parseDf } from "./app.js";

const DF = `Filesystem     1024-blocks    Used Available Capacity Mounted on
/dev/vda1         10218772 4318828   5359272      45% /
tmpfs               498148       0    498148       0% /dev/shm
`;

const maid = {
  run: () => ({ retcode: 0, stdout: DF, stderr: "" }),
  log: { debug() {}, error() {} },
  error: (message) => new Error(message),
};

test("df -P is parsed as Salt parses it", () => {
  assert.deepEqual(parseDf(DF)["/"], {
    filesystem: "/dev/vda1",
    "1K-blocks": "10218772",
    used: "4318828",
    available: "5359272",
    capacity: "45%",
  });
});

test("percent of all mounts and of one", () => {
  assert.deepEqual(functions.percent.run(maid), { "/": "45%", "/dev/shm": "0%" });
  assert.equal(functions.percent.run(maid, "/"), "45%");
  assert.deepEqual(functions.percent.run(maid, "/nope"), {});
});
