# Per-call cost in a running agent: `maid run '*' FUN` round trips (master
# Part of BENCHMARKS.md, "Plugins in other languages": run from a
# directory holding `maid` (target/release/maid) and dirs/NAME/MODULE.wasm
# for each case below (the commands are in BENCHMARKS.md).
# publish -> PING -> return) against one `maid agent` over a private
# redis-server, per plugin. Each `maid run` is its own process; the agent
# keeps its plugins loaded, so the difference between rows is the call.
import os, socket, statistics, subprocess, time
MAID = os.path.abspath("./maid")
here = os.path.abspath(".")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
url = f"redis://127.0.0.1:{port}/"
while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout.strip() != b"PONG":
    time.sleep(0.1)
cfg = os.path.join(here, "agent.toml")
open(cfg, "w").write(f'''master_topics = ["master"]
cache_dir = "{here}/cache/agent"
[redis]
url = "{url}"
[plugins.file]
dirs = [{{ path = "{here}" }}]
[plugins.disk]
exec = ["/usr/bin/df"]
''')
CASES = [
    ("Rust test.ping", "dirs/test", ["test.ping"]),
    ("Rust hello.greet (scaffold)", "dirs/hello_rs", ["hello.greet", "world"]),
    ("Python hello.greet (scaffold)", "dirs/hello_py", ["hello.greet", "world"]),
    ("Python file.get_hash", "dirs/file", ["file.get_hash", os.path.join(here, "measure.py")]),
    ("JS hello.greet (scaffold)", "dirs/hello_js", ["hello.greet", "world"]),
    ("JS disk.usage", "dirs/disk", ["disk.usage"]),
]
env = dict(os.environ, MAID_REDIS=url)
print("| plugin | round trip p50 (of 30) | p90 | first call after start |")
print("|---|---:|---:|---:|")
for i, (name, d, fun) in enumerate(CASES):
    aid = f"bench-{i}"
    agent = subprocess.Popen([MAID, "agent", "--id", aid, "-c", cfg, "--plugin-dir", d], env=env, stderr=subprocess.DEVNULL)
    while subprocess.run(["redis-cli", "-p", str(port), "exists", f"maid:alive:{aid}"], capture_output=True).stdout.strip() != b"1":
        time.sleep(0.05)
    times = []
    for _ in range(31):
        t = time.perf_counter()
        out = subprocess.run([MAID, "run", "-L", aid, *fun, "--out", "json"], env=env, capture_output=True)
        times.append(time.perf_counter() - t)
        assert out.returncode == 0, out
    agent.terminate(); agent.wait()
    subprocess.run(["redis-cli", "-p", str(port), "del", "maid:registry"], capture_output=True)
    first, rest = times[0], sorted(times[1:])
    print(f"| {name} | {statistics.median(rest)*1000:.1f} ms | {rest[int(len(rest)*0.9)]*1000:.1f} ms | {first*1000:.1f} ms |")
redis.terminate(); redis.wait()
