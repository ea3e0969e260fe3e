#!/usr/bin/env bash
# What the RedisAI module's sandbox costs: AI.MODELSTORE of SmartSim-Scaling's ResNet-50 (100 MB) and
# AI.SCRIPTSTORE of its preprocessing script against a real redis-server with build/plugins/redisai.so, beside
# the sandbox checker alone on the same payloads (its share of each store). Prints a table of medians over N
# rounds (default 5); seconds, monotonic clock. Usage: bench/modelstore_latency.sh [N]   Env: FANOUT_BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FANOUT_BUILD_DIR:-build}
rounds=${1:-5}
work=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$build/fanout-build-model" --out "$work" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --dir "$work" --loadmodule "$PWD/$build/plugins/redisai.so" >"$work/redis.log" 2>&1 &
for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
python3 - "$port" "$work" "$rounds" "$PWD/$build/plugins/fanout-redisai-check" <<'PY'
import socket, statistics, subprocess, sys, time
port, work, rounds, checker = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
def command(s, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    reply = b""
    while not reply.endswith(b"\r\n"):
        reply += s.recv(65536)
    return reply
model = open(f"{work}/resnet50.cpu.pt", "rb").read()
script = open(f"{work}/data_processing_script.txt", "rb").read()
s = socket.create_connection(("127.0.0.1", port))
rows = {"AI.MODELSTORE resnet50 (server)": [], "checker alone, model": [], "AI.SCRIPTSTORE (server)": [], "checker alone, script": []}
for i in range(rounds):
    t = time.monotonic(); r = command(s, "AI.MODELSTORE", f"m{i}", "TORCH", "CPU", "BLOB", model)
    rows["AI.MODELSTORE resnet50 (server)"].append(time.monotonic() - t); assert r == b"+OK\r\n", r
    t = time.monotonic(); r = command(s, "AI.SCRIPTSTORE", f"s{i}", "CPU", "ENTRY_POINTS", "1", "pre_process_3ch", "SOURCE", script)
    rows["AI.SCRIPTSTORE (server)"].append(time.monotonic() - t); assert r == b"+OK\r\n", r
    for kind, payload, name in (("M", model, "checker alone, model"), ("S", script, "checker alone, script")):
        t = time.monotonic()
        subprocess.run([checker, kind, "CPU", str(4 << 30)], input=b"%d\n" % len(payload) + payload, check=True, stdout=subprocess.DEVNULL)
        rows[name].append(time.monotonic() - t)
print(f"{'what':34} {'median s':>9} {'min s':>7} {'max s':>7}  ({rounds} rounds, {len(model)} model bytes)")
for name, v in rows.items():
    print(f"{name:34} {statistics.median(v):9.3f} {min(v):7.3f} {max(v):7.3f}")
PY
