# Start-up cost of plugins by language (compile, load from the cache) and
# the cost of one `maid call --local` process, through the maid CLI.
# Part of BENCHMARKS.md, "Plugins in other languages": run from a
# directory holding `maid` (target/release/maid) and dirs/NAME/MODULE.wasm
# for each case below (the commands are in BENCHMARKS.md).
import os, shutil, statistics, subprocess, time
MAID = "./maid"
CASES = [  # name, dir, wasm, fun, args
    ("Rust test.ping", "dirs/test", "test.wasm", "test.ping", []),
    ("Rust hello.greet (scaffold)", "dirs/hello_rs", "hello.wasm", "hello.greet", ["world"]),
    ("Python hello.greet (scaffold)", "dirs/hello_py", "hello.wasm", "hello.greet", ["world"]),
    ("Python file.get_hash", "dirs/file", "file.wasm", "file.get_hash", [os.path.abspath("measure.py")]),
    ("JS hello.greet (scaffold)", "dirs/hello_js", "hello.wasm", "hello.greet", ["world"]),
    ("JS disk.usage", "dirs/disk", "disk.wasm", "disk.usage", []),
]
def run(args, env):
    t = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t
def ms(x): return f"{x*1000:.1f} ms"
rows = []
for name, d, wasm, fun, args in CASES:
    cache = os.path.abspath(f"cache/{os.path.basename(d)}")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, MAID_CACHE_DIR=cache)
    path = os.path.join(d, wasm)
    cold = [run([MAID, "plugin", "inspect", path, "--no-cache"], env) for _ in range(2)]
    run([MAID, "plugin", "inspect", path], env)  # fill the cache
    artifact = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(cache) for f in fs)
    warm = [run([MAID, "plugin", "inspect", path], env) for _ in range(10)]
    call = [run([MAID, "call", "--local", "--plugin-dir", d, fun, *args], env) for _ in range(20)]
    rows.append((name, os.path.getsize(path), artifact, statistics.median(cold), statistics.median(warm), statistics.median(call), max(call)))
print("| plugin | .wasm | compiled (cache) | load, cold: compile + describe (p50 of 2) | load, warm cache (p50 of 10) | `maid call --local`, whole process (p50 of 20) | max |")
print("|---|---:|---:|---:|---:|---:|---:|")
for n, size, art, c, w, p, mx in rows:
    print(f"| {n} | {size/1e6:.2f} MB | {art/1e6:.1f} MB | {ms(c)} | {ms(w)} | {ms(p)} | {ms(mx)} |")
