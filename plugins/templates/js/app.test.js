// Unit tests for app.js, run on the build machine: `node --test`.
// They call the functions with a stand-in for the host; `maid plugin test`
// runs them inside the built component, with the host and its grants.

import assert from "node:assert/strict";
import { test } from "node:test";

import { functions } from "./app.js";

const maid = {
  log: { info() {}, warn() {}, error() {}, debug() {}, trace() {} },
  error: (message) => new Error(message),
};

test("greet greets", () => {
  assert.equal(functions.greet.run(maid, "world"), "hello, world");
  assert.equal(functions.greet.run(maid, "world", true), "HELLO, WORLD");
});

test("an empty name fails", () => {
  assert.throws(() => functions.greet.run(maid, ""), /must not be empty/);
});
