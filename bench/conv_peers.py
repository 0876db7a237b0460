"""PyTorch (oneDNN) as the peer of the convolution table of `make bench`, driven by bench/conv.c.

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch (PyTorch 1.13, whose
CPU convolutions are oneDNN's).

  conv_peers.py --serve       read commands on stdin, one reply line each on stdout:
      setup W N ARGS...       the inputs of workload W at batch N (ARGS as bench/conv.c sends
                              them) -> "ok"
      time T SECONDS [cpu] [core K]
                              seconds per call on T threads (set_threads: torch's and its
                              BLAS's), timed with time.perf_counter (cpu: time.process_time,
                              the process's CPU time) over a batch of at least SECONDS, on core
                              K alone if given (else on any) -> "<s>"
      check                   run once -> the checksum of the result (see bench/conv.c)
      info                    -> "torch X.Y.Z"
      quit

Inputs hold the values bench/conv.c's fill() writes (a hash of the index in [-1, 1), scaled),
so both sides compute the same result. Everything runs under torch.no_grad(), in eager mode,
the way a model is called for inference.
"""
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_threads import set_threads, time_options


def fill(shape, seed, scale):
    """bench/conv.c's fill(): a hash of the index mapped to [-1, 1), times scale."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(seed * 40503)) % np.uint64(1 << 32)
    a = (((h >> np.uint64(8)) & np.uint64(1023)).astype(np.float32) / np.float32(512)
         - np.float32(1)) * np.float32(scale)
    return torch.from_numpy(a.reshape(shape))


def checksum(y):
    """The sum of y[i] * (1 + i % 7) / 7 over the flat result, in double."""
    v = y.detach().reshape(-1).double().numpy()
    w = (1 + np.arange(v.size) % 7) / 7.0
    return float(np.dot(v, w))


class Workload:
    def __init__(self, w, n, args):
        self.w = w
        a = [int(x) for x in args]
        if w == "conv":  # c h k r stride pad groups
            c, h, k, r, s, p, g = a
            self.x = fill((n, c, h, h), 1, 1)
            self.k = fill((k, c // g, r, r), 2, 1 / np.sqrt(c // g * r * r))
            self.s, self.p, self.g = s, p, g
        elif w == "pool":  # c h window stride
            c, h, win, s = a
            self.x = fill((n, c, h, h), 1, 1)
            self.win, self.s = win, s
        elif w == "block":  # c h
            c, h = a
            self.x = fill((n, c, h, h), 1, 1)
            self.k1 = fill((c, c, 3, 3), 2, 1 / np.sqrt(9 * c))
            self.k2 = fill((c, c, 3, 3), 3, 1 / np.sqrt(9 * c))
            self.g1, self.b1 = fill((c,), 4, 0.5) + 1, fill((c,), 5, 0.5)
            self.g2, self.b2 = fill((c,), 6, 0.5) + 1, fill((c,), 7, 0.5)
            self.mean, self.var = torch.zeros(c), torch.ones(c)
        elif w == "lenet":
            self.x = fill((n, 1, 32, 32), 1, 1)
            self.k1 = fill((6, 1, 5, 5), 2, 0.2)
            self.k2 = fill((16, 6, 5, 5), 3, 0.08)
            self.f1 = fill((400, 120), 4, 0.05)
            self.f2 = fill((120, 84), 5, 0.09)
            self.f3 = fill((84, 10), 6, 0.1)
        elif w == "dot":  # n
            self.a, self.b = fill((a[0], a[0]), 1, 1), fill((a[0], a[0]), 2, 1)
        else:
            raise ValueError(w)
        self.iters = {}

    def run(self):
        w = self.w
        if w == "conv":
            return F.conv2d(self.x, self.k, stride=self.s, padding=self.p, groups=self.g)
        if w == "pool":
            return F.max_pool2d(self.x, self.win, self.s)
        if w == "dot":
            return self.a @ self.b
        if w == "block":
            y = F.conv2d(self.x, self.k1, padding=1)
            y = F.relu(F.batch_norm(y, self.mean, self.var, self.g1, self.b1, False, 0.0, 0.0))
            y = F.conv2d(y, self.k2, padding=1)
            y = F.batch_norm(y, self.mean, self.var, self.g2, self.b2, False, 0.0, 0.0)
            return F.relu(y + self.x)
        y = F.relu(F.conv2d(self.x, self.k1))
        y = F.max_pool2d(y, 2, 2)
        y = F.relu(F.conv2d(y, self.k2))
        y = F.max_pool2d(y, 2, 2).reshape(y.shape[0], 400)
        y = F.relu(y @ self.f1)
        y = F.relu(y @ self.f2)
        return y @ self.f3


def seconds_per_call(wl, threads, target, clock=time.perf_counter):
    set_threads(threads)
    with torch.no_grad():
        if threads not in wl.iters:
            wl.run()
            t0 = time.perf_counter()
            wl.run()
            wl.iters[threads] = max(1, int(target / max(time.perf_counter() - t0, 1e-9)) + 1)
        iters = wl.iters[threads]
        t0 = clock()
        for _ in range(iters):
            wl.run()
        return (clock() - t0) / iters


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
            wl = Workload(cmd[1], int(cmd[2]), cmd[3:])
            reply = "ok"
        elif cmd[0] == "time":
            clock = time.process_time if time_options(cmd[3:]) else time.perf_counter
            reply = "%.9g" % seconds_per_call(wl, int(cmd[1]), float(cmd[2]), clock)
        elif cmd[0] == "check":
            with torch.no_grad():
                reply = "%.17g" % checksum(wl.run())
        elif cmd[0] == "info":
            reply = "torch %s (%s)" % (torch.__version__,
                                       "oneDNN" if torch.backends.mkldnn.is_available()
                                       else "no oneDNN")
        else:
            reply = "error unknown command " + cmd[0]
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--serve":
        serve()
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
