// The `@NAME@` module: a maid plugin written in JavaScript.
//
// Every entry of `functions` is a Salt function `@NAME@.<name>`: `args`
// names its arguments in positional order (a job may also pass them by
// name), `doc` documents it, and `run(maid, ...args)` computes what is
// sent back as JSON. `maid` is the host: `maid.log.info()`, `maid.grains()`,
// `maid.run([...])`, `maid.fetch("salt://...")`, `maid.error(msg, retcode)`.
// See docs/plugin-guide.md in the maid repository.

export const functions = {
  greet: {
    doc: "Greet someone: @NAME@.greet world shout=true",
    args: ["name", "shout"],
    run(maid, name, shout = false) {
      if (!name) throw maid.error("name must not be empty");
      maid.log.info(`greeting ${name}`);
      const greeting = `hello, ${name}`;
      return shout ? greeting.toUpperCase() : greeting;
    },
  },
};
