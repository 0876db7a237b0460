"""The PyTorch contender of the training table of `make bench` (bench/train.c drives it).

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch.

  train_peers.py --serve     read commands on stdin, one reply line each on stdout:
      setup IN H1 H2 OUT BATCH THREADS
                             an MLP IN-H1-H2-OUT (ReLU, cross-entropy, SGD with momentum 0.9),
                             a random batch, set_threads(THREADS): torch's and its BLAS's -> "ok"
      lenet BATCH THREADS    LeNet-5 on [BATCH, 1, 28, 28] (conv 5x5 1->6 padded, ReLU, max
                             pool 2, conv 5x5 6->16, ReLU, max pool 2, dense 400-120-84-10 with
                             ReLU), the same loss and optimizer -> "ok"
      time SECONDS [cpu] [core K]
                             seconds per training step (forward, backward, update) over a
                             batch of steps of at least SECONDS, timed with perf_counter (cpu:
                             time.process_time, the process's CPU time), on core K alone if
                             given (else on any) -> "<s>"
      info                   -> "torch X.Y.Z"
      quit

A step is what people write in eager PyTorch: loss = cross_entropy(net(x), y);
opt.zero_grad(); loss.backward(); opt.step(). Denormal floats are flushed to zero
(torch.set_flush_denormal), as nest's step kernels flush them by default: the same arithmetic
on both sides (momentum's velocities decay into denormals, which the CPU handles slowly).
"""
import sys
import time

import torch

from torch_threads import pin, set_threads, time_options

torch.set_flush_denormal(True)

net = opt = x = y = None


def start(model, n_in, n_out, batch, threads):
    """The net, its optimizer and a random batch of images with n_in pixels."""
    global net, opt, x, y
    net = model
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, n_in)
    y = torch.randint(0, n_out, (batch,))
    for _ in range(3):
        step()


def setup(n_in, h1, h2, n_out, batch, threads):
    pin(None)  # a one-thread round may have left it on one core: its threads start from here
    set_threads(threads)
    torch.manual_seed(0)
    start(torch.nn.Sequential(torch.nn.Linear(n_in, h1), torch.nn.ReLU(), torch.nn.Linear(h1, h2),
                              torch.nn.ReLU(), torch.nn.Linear(h2, n_out)),
          n_in, n_out, batch, threads)


def lenet(batch, threads):
    pin(None)
    set_threads(threads)
    torch.manual_seed(0)
    nn = torch.nn
    start(nn.Sequential(nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                        nn.Linear(84, 10)),
          784, 10, batch, threads)


def step():
    loss = torch.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def time_steps(seconds, clock=time.perf_counter):
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            step()
        t = clock() - t0
        if t >= seconds:
            return t / n
        n *= 2


def serve():
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "setup":
            setup(*[int(v) for v in w[1:7]])
            reply = "ok"
        elif w[0] == "lenet":
            lenet(*[int(v) for v in w[1:3]])
            reply = "ok"
        elif w[0] == "time":
            clock = time.process_time if time_options(w[2:]) else time.perf_counter
            reply = "%.9g" % time_steps(float(w[1]), clock)
        elif w[0] == "info":
            reply = "torch " + torch.__version__
        elif w[0] == "quit":
            break
        else:
            reply = "error: unknown command " + w[0]
        print(reply, flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(__doc__)
