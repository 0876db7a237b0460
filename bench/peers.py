"""The numpy and numexpr contenders of `make bench`, driven by bench/bench.c.

Run with Debian's interpreter (/usr/bin/python3), which has python3-numpy and python3-numexpr.

  peers.py --serve            read commands on stdin, one reply line each on stdout:
      setup W N               allocate and fill the inputs of workload W at N elements -> "ok"
      time C SECONDS          seconds per call of contender C, timed inside Python with
                              time.perf_counter over a batch of at least SECONDS -> "<s>"
      check C                 run C once -> its checksum (see bench.c) "<float>"
      info                    -> "numpy X.Y.Z numexpr X.Y.Z; OpenBLAS core CORE" (the kernel of
                              the OpenBLAS numpy loaded: openblas_get_corename())
      quit
  peers.py --mem W N C        in this fresh process: the peak bytes C allocates beyond its
                              inputs and outputs in one call (tracemalloc), printed as an integer

Inputs are allocated as in bench.c: page-aligned anonymous mappings, MADV_HUGEPAGE from 4 MiB,
filled (touched) before timing, with the same values (fill() below).
Contenders:
  numpy      the expression as people write it: results and temporaries allocated per call
  numpy_out  the same with out= into preallocated arrays (fewest temporaries numpy allows)
  ne1, ne2   numexpr with 1 and 2 threads, writing into a preallocated output
"""
import mmap
import sys
import time
import tracemalloc

import numpy as np
import numexpr as ne

HUGE = 4 << 20
F32 = np.float32


def alloc(count):
    """A float32 array of count elements in its own page-aligned mapping."""
    nbytes = max(4 * count, 1)
    mm = mmap.mmap(-1, nbytes)
    if nbytes >= HUGE:
        mm.madvise(mmap.MADV_HUGEPAGE)
    return np.frombuffer(mm, dtype=F32, count=count)


def fill(a, seed):
    """The values bench.c's fill() writes: a hash of the index mapped to [-1, 1)."""
    i = np.arange(a.size, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(seed * 40503)) % np.uint64(1 << 32)
    a[:] = ((h >> np.uint64(8)) & np.uint64(1023)).astype(F32) / F32(512) - F32(1)


def shapes(w, n):
    """The input shapes, output shape of workload w at n elements (see bench.c)."""
    if w == "l2":
        return [(n,), (n,)], ()
    if w == "chain":
        return [(n,)] * 4, (n,)
    if w == "badd":
        return [(n // 1024, 1024), (1024,)], (n // 1024, 1024)
    if w == "msum":
        a, l, d = (1, 16, 64) if n < 4096 else (n // 4096, 64, 64)
        return [(a, l, d)], (a, d)
    if w == "softmax":
        return [(n // 1024, 1024)], (n // 1024, 1024)
    raise ValueError(w)


class Workload:
    def __init__(self, w, n):
        self.w = w
        self.iters = {}
        ins, out = shapes(w, n)
        self.ins = []
        for k, s in enumerate(ins):
            a = alloc(int(np.prod(s))).reshape(s)
            fill(a.reshape(-1), k + 1)
            self.ins.append(a)
        self.out = alloc(int(np.prod(out))).reshape(out) if out else None
        if self.out is not None:
            self.out[...] = 0
        # preallocated temporaries of the out= variants
        self.tmp = None
        self.rowtmp = None
        if w == "l2":
            self.tmp = alloc(n)
            self.tmp[:] = 0
        if w == "softmax":
            self.rowtmp = alloc(ins[0][0]).reshape(ins[0][0], 1)
            self.rowtmp2 = alloc(ins[0][0]).reshape(ins[0][0], 1)
            self.rowtmp[:] = 0
            self.rowtmp2[:] = 0

    # Each contender returns its result (a scalar or an array).
    def run(self, c):
        """One call of contender c (after prepare(c)); returns its result."""
        w, x, o = self.w, self.ins, self.out
        if c in ("ne1", "ne2"):
            return getattr(self, "ne_" + w)(x, o)
        return getattr(self, c + "_" + w)(x, o)

    def numpy_l2(self, x, o):
        t = x[0] - x[1]
        return np.dot(t, t)

    def numpy_out_l2(self, x, o):
        np.subtract(x[0], x[1], out=self.tmp)
        return np.dot(self.tmp, self.tmp)

    def ne_l2(self, x, o):
        return ne.evaluate("sum((x - y) * (x - y))", local_dict={"x": x[0], "y": x[1]})

    def numpy_chain(self, x, o):
        a, b, c, d = x
        return (a + b) * c - d

    def numpy_out_chain(self, x, o):
        a, b, c, d = x
        np.add(a, b, out=o)
        np.multiply(o, c, out=o)
        np.subtract(o, d, out=o)
        return o

    def ne_chain(self, x, o):
        a, b, c, d = x
        return ne.evaluate("(a + b) * c - d", local_dict={"a": a, "b": b, "c": c, "d": d},
                           out=o)

    def numpy_badd(self, x, o):
        return x[0] + x[1]

    def numpy_out_badd(self, x, o):
        return np.add(x[0], x[1], out=o)

    def ne_badd(self, x, o):
        return ne.evaluate("m + v", local_dict={"m": x[0], "v": x[1]}, out=o)

    def numpy_msum(self, x, o):
        return x[0].sum(axis=1)

    def numpy_out_msum(self, x, o):
        return np.sum(x[0], axis=1, out=o)

    def ne_msum(self, x, o):
        return ne.evaluate("sum(x, axis=1)", local_dict={"x": x[0]}, out=o)

    def numpy_softmax(self, x, o):
        e = np.exp(x[0] - x[0].max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def numpy_out_softmax(self, x, o):
        m, s = self.rowtmp, self.rowtmp2
        np.max(x[0], axis=1, keepdims=True, out=m)
        np.subtract(x[0], m, out=o)
        np.exp(o, out=o)
        np.sum(o, axis=1, keepdims=True, out=s)
        return np.divide(o, s, out=o)

    def ne_softmax(self, x, o):
        # numexpr has no row reductions that broadcast back: max and sum are numpy's
        m = x[0].max(axis=1, keepdims=True)
        ne.evaluate("exp(x - m)", local_dict={"x": x[0], "m": m}, out=o)
        s = o.sum(axis=1, keepdims=True)
        return ne.evaluate("o / s", local_dict={"o": o, "s": s}, out=o)


def prepare(c):
    """numexpr's thread count for c (outside the timed loop: setting it restarts threads)."""
    if c in ("ne1", "ne2"):
        ne.set_num_threads(1 if c == "ne1" else 2)


def checksum(r):
    """bench.c's checksum(): sum of |r[i]| * (1 + i % 7) in double."""
    a = np.abs(np.asarray(r, dtype=np.float64)).ravel()
    return float(a @ (1 + np.arange(a.size) % 7))


def seconds_per_call(wl, c, target):
    """Seconds per call over one batch of at least `target` seconds; the batch size is found
    (after a warm-up call) the first time c is timed on this workload."""
    prepare(c)
    if c not in wl.iters:
        wl.run(c)
        t0 = time.perf_counter()
        wl.run(c)
        wl.iters[c] = max(1, int(target / max(time.perf_counter() - t0, 1e-9)))
    iters = wl.iters[c]
    t0 = time.perf_counter()
    for _ in range(iters):
        wl.run(c)
    return (time.perf_counter() - t0) / iters


def openblas_core():
    """openblas_get_corename() of the OpenBLAS this process loaded (through numpy), or '?'."""
    import ctypes
    with open("/proc/self/maps") as maps:
        libs = sorted({l.split()[-1] for l in maps if "libopenblas" in l and "/" in l})
    for lib in libs:
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        f.restype = ctypes.c_char_p
        return f().decode()
    return "? (numpy does not use OpenBLAS)"


def serve():
    wl = None
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "setup":
            wl = None
            wl = Workload(cmd[1], int(cmd[2]))
            reply = "ok"
        elif cmd[0] == "time":
            reply = "%.9g" % seconds_per_call(wl, cmd[1], float(cmd[2]))
        elif cmd[0] == "check":
            prepare(cmd[1])
            reply = "%.17g" % checksum(wl.run(cmd[1]))
        elif cmd[0] == "info":
            reply = "numpy %s numexpr %s; OpenBLAS core %s" % (np.__version__, ne.__version__,
                                                             openblas_core())
        else:
            reply = "error unknown command " + cmd[0]
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


def mem(w, n, c):
    wl = Workload(w, n)
    prepare(c)
    wl.run(c)  # warm-up: numexpr compiles its expression on the first call
    tracemalloc.start()
    r = wl.run(c)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # a result numpy allocated is the output, not extra memory
    if isinstance(r, np.ndarray) and r.ndim > 0 and (wl.out is None or
                                                     not np.shares_memory(r, wl.out)):
        peak -= r.nbytes
    print(max(peak, 0))


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--serve":
        serve()
    elif len(sys.argv) == 5 and sys.argv[1] == "--mem":
        mem(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
