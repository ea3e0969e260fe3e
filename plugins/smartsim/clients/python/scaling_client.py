#!/usr/bin/python3
"""fanout-tensor-client-python: SmartSim-Scaling's Python clients on the fanout_tensor_client package.

Usage: fanout-tensor-client-python MODE RANK TENSOR_BYTES ITERATIONS WARMUP TENSORS_PER_DATASET [PRODUCERS THREADS [DIR]]
  throughput   put_tensor + unpack_tensor per iteration (as fanout-tensor-client-c)
  producer     put_dataset + append_to_list per iteration, after "G" on standard input
  consumer     aggregation_scaling_python's consumer: poll the iteration's list until PRODUCERS datasets are in it,
               fetch them over THREADS connections, delete the list
  fs_consumer  aggregation_scaling_python_fs's consumer: the same through files in DIR/iteration_<k>
Output lines as fanout-tensor-client-c ("S metric iteration t0_ns value unit", "W k"), and "C k" when the consumer
has finished iteration k.
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# The package beside this script: <build>/python, or <prefix>/lib/python3.X/dist-packages once installed.
_here = os.path.dirname(os.path.realpath(__file__))
_minor = f"python3.{sys.version_info.minor}"
for _p in (os.path.join(_here, "python"), os.path.join(_here, "..", "lib", _minor, "dist-packages")):
    if os.path.isdir(os.path.join(_p, "fanout_tensor_client")):
        sys.path.insert(0, _p)
        break

import numpy as np  # noqa: E402
from fanout_tensor_client import Client, monotonic_ns  # noqa: E402

out = sys.stdout


def sample(metric, i, t0, value, unit):
    out.write(f"S {metric} {i} {t0} {value!r} {unit}\n")


def seconds(a, b):
    return (b - a) / 1e9


def throughput(client, rank, elements, iterations, warmup, chunk=1024):
    """Clock readings are kept and written a chunk at a time, not formatted between the timed calls (the gap the
    server idles in would grow, and the language would pay for its string formatting in its put times)."""
    data = np.float32(rank) + np.arange(elements, dtype=np.float32) * np.float32(0.5)
    back = np.empty_like(data)
    key = f"throughput_rank_{rank}"
    clocks = []
    first = -warmup
    for i in range(-warmup, iterations):
        t0 = monotonic_ns()
        client.put_tensor(key, data)
        t1 = monotonic_ns()
        client.unpack_tensor(key, back)
        t2 = monotonic_ns()
        clocks.append((t0, t1, t2))
        if i == -warmup and not np.array_equal(data, back):
            raise RuntimeError("unpacked tensor differs from the one put")
        if len(clocks) == chunk or i == iterations - 1:
            for k, (t0, t1, t2) in enumerate(clocks, first):
                sample("put_tensor", k, t0, seconds(t0, t1), "s")
                sample("unpack_tensor", k, t1, seconds(t1, t2), "s")
                sample("loop_time", k, t0, seconds(t0, t2), "s")
                sample("loop_bandwidth", k, t0, 2.0 * data.nbytes / seconds(t0, t2), "bytes/s")  # put + read back
            first = i + 1
            clocks.clear()


def producer(client, rank, elements, iterations, warmup, tensors):
    data = np.full(elements, rank, dtype=np.float32)
    dataset = {f"tensor_{t}": data for t in range(tensors)}
    name = f"aggregation_rank_{rank}"
    for k in range(warmup + iterations):
        out.write(f"W {k}\n")
        out.flush()
        if not sys.stdin.readline().startswith("G"):
            raise RuntimeError("the rank stopped the producer")
        t0 = monotonic_ns()
        client.put_dataset(name, dataset)
        t1 = monotonic_ns()
        client.append_to_list(f"iteration_{k}", name)
        sample("put_dataset", k - warmup, t0, seconds(t0, t1), "s")
        sample("append_to_list", k - warmup, t1, seconds(t1, monotonic_ns()), "s")


def consumer_iterations(iterations, warmup, wait, fetch, done):
    """The consumer's loop, as the C++ consumer's: poll_list, get_list, get_list_bandwidth per iteration."""
    for k in range(warmup + iterations):
        i = k - warmup
        t0 = monotonic_ns()
        items = wait(k)
        t1 = monotonic_ns()
        total = fetch(items)
        t2 = monotonic_ns()
        done(k, items)
        sample("poll_list", i, t0, seconds(t0, t1), "s")
        sample("get_list", i, t1, seconds(t1, t2), "s")
        sample("get_list_bandwidth", i, t1, total / seconds(t1, t2), "bytes/s")
        out.write(f"C {k}\n")
        out.flush()


def consumer(client, iterations, warmup, producers, threads):
    client.connect_fetchers(threads)  # before anything is timed, as the C++ consumer opens its pool

    def wait(k):
        if not client.poll_list_length(f"iteration_{k}", producers, 1, 600000):
            raise RuntimeError(f"iteration_{k} never reached {producers} datasets")
        return f"iteration_{k}"

    consumer_iterations(iterations, warmup, wait, lambda lst: client.get_datasets_from_list(lst, threads),
                        lambda k, lst: client.delete_list(lst))


def fs_consumer(iterations, warmup, producers, threads, root):
    def finished(k):  # files whose rename has happened
        d = os.path.join(root, f"iteration_{k}")
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return []
        return [os.path.join(d, n) for n in names if n.startswith("aggregation_rank_") and ".tmp" not in n]

    def wait(k):
        deadline = time.monotonic() + 600  # as the database consumer's poll_list_length
        while len(files := finished(k)) < producers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"iteration_{k}: {len(files)} of {producers} producers' files after 600 s")
            time.sleep(0.001)
        return files

    def read(path):
        with open(path, "rb") as f:
            return len(f.read())

    with ThreadPoolExecutor(max_workers=threads) as pool:
        def done(k, files):
            for f in files:
                os.unlink(f)
            try:
                os.rmdir(os.path.join(root, f"iteration_{k}"))
            except OSError:
                pass  # a producer's temporary file may still be there; the C++ consumer leaves it too
        consumer_iterations(iterations, warmup, wait, lambda files: sum(pool.map(read, files)), done)


def main(argv):
    if len(argv) < 7:
        sys.stderr.write(__doc__)
        return 2
    mode, rank, tensor_bytes, iterations, warmup, tensors = argv[1], *map(int, argv[2:7])
    producers = int(argv[7]) if len(argv) > 7 else 1
    threads = max(1, int(argv[8])) if len(argv) > 8 else 1
    elements = max(1, tensor_bytes // 4)
    if mode == "fs_consumer":
        fs_consumer(iterations, warmup, producers, threads, argv[9])
        return 0
    t0 = monotonic_ns()
    client = Client()
    sample("client()", 0, t0, seconds(t0, monotonic_ns()), "s")
    if mode == "throughput":
        throughput(client, rank, elements, iterations, warmup)
    elif mode == "producer":
        producer(client, rank, elements, iterations, warmup, max(1, tensors))
    elif mode == "consumer":
        consumer(client, iterations, warmup, producers, threads)
    else:
        sys.stderr.write(f"fanout-tensor-client-python: unknown mode '{mode}'\n")
        return 2
    out.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # one line naming the failure, as the C and Fortran clients
        sys.stderr.write(f"fanout-tensor-client-python: {e}\n")
        sys.exit(1)
