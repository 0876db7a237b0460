"""The numpy and PyTorch contenders of bench/ops.c (the op set of real models: softmax and
batch_dot), with a fixed number of threads.

Run with Debian's interpreter (/usr/bin/python3: python3-numpy, python3-torch).

  ops_peers.py THREADS    reads commands on stdin, one reply line each on stdout:
      setup W             allocate and fill the inputs of workload W (ops.c's names) -> "ok"
      time C SECONDS      seconds per call of contender C (numpy or torch), the best of five
                          batches of at least SECONDS each -> "<s>"
      check C             run C once -> a checksum of its result (ops.c's weights)
      info                -> versions and thread counts
      quit

THREADS is set before numpy and torch load: OPENBLAS_NUM_THREADS and OMP_NUM_THREADS for
numpy's OpenBLAS, torch.set_num_threads for PyTorch (oneDNN, its own BLAS).
"""
import os
import sys

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(THREADS)
F32 = np.float32

# workload -> (input shapes, what it computes); the shapes are ops.c's
WORKLOADS = {
    "softmax_64k": ([(64, 1024)], "softmax"),
    "softmax_1m": ([(1024, 1024)], "softmax"),
    "softmax_16m": ([(16384, 1024)], "softmax"),
    "attn_scores": ([(96, 128, 64), (96, 64, 128)], "matmul"),
    "attn_context": ([(96, 128, 128), (96, 128, 64)], "matmul"),
    "bmm_512": ([(8, 512, 512), (8, 512, 512)], "matmul"),
    "linear_batch": ([(32, 128, 768), (768, 768)], "matmul"),
}


def fill(a, seed):
    """benchutil.c's fill(): a hash of the index mapped to [-1, 1)."""
    i = np.arange(a.size, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(seed * 40503)) % np.uint64(1 << 32)
    a[:] = ((h >> np.uint64(8)) & np.uint64(1023)).astype(F32) / F32(512) - F32(1)


def weight(n):
    """ops.c's checksum weights: 1 + (i mod 7) / 8."""
    return 1 + (np.arange(n) % 7) / 8.0


class Workload:
    def __init__(self, name):
        shapes, self.kind = WORKLOADS[name]
        self.x = []
        for k, s in enumerate(shapes):
            a = np.empty(int(np.prod(s)), dtype=F32)
            fill(a, k + 1)
            self.x.append(a.reshape(s))
        self.t = [torch.from_numpy(a) for a in self.x]

    def run(self, c):
        if self.kind == "softmax":
            if c == "numpy":
                x = self.x[0]
                e = np.exp(x - x.max(axis=1, keepdims=True))
                return e / e.sum(axis=1, keepdims=True)
            return torch.softmax(self.t[0], dim=1)
        if c == "numpy":
            return np.matmul(self.x[0], self.x[1])
        return torch.matmul(self.t[0], self.t[1])


def seconds(w, c, at_least):
    w.run(c)
    best = float("inf")
    for _ in range(5):
        n, t0 = 0, time.perf_counter()
        while True:
            w.run(c)
            n += 1
            t = time.perf_counter() - t0
            if t >= at_least:
                break
        best = min(best, t / n)
    return best


def main():
    w = None
    with torch.no_grad():
        for line in sys.stdin:
            cmd = line.split()
            if not cmd:
                continue
            if cmd[0] == "quit":
                break
            if cmd[0] == "setup":
                w = Workload(cmd[1])
                reply = "ok"
            elif cmd[0] == "time":
                reply = "%.9g" % seconds(w, cmd[1], float(cmd[2]))
            elif cmd[0] == "check":
                r = np.asarray(w.run(cmd[1]), dtype=np.float64).reshape(-1)
                reply = "%.17g" % float(np.dot(r, weight(r.size)))
            elif cmd[0] == "info":
                reply = "numpy %s, PyTorch %s, %d thread(s)" % (
                    np.__version__, torch.__version__, torch.get_num_threads())
            else:
                reply = "?"
            sys.stdout.write(reply + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
