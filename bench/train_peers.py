"""The PyTorch contender of the training table of `make bench` (bench/train.c drives it).

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch.

  train_peers.py --serve     read commands on stdin, one reply line each on stdout:
      setup IN H1 H2 OUT BATCH THREADS
                             an MLP IN-H1-H2-OUT (ReLU, cross-entropy, SGD with momentum 0.9),
                             a random batch, torch.set_num_threads(THREADS) -> "ok"
      time SECONDS           seconds per training step (forward, backward, update) over a
                             batch of steps of at least SECONDS, timed with perf_counter -> "<s>"
      info                   -> "torch X.Y.Z"
      quit

A step is what people write in eager PyTorch: loss = cross_entropy(net(x), y);
opt.zero_grad(); loss.backward(); opt.step().
"""
import sys
import time

import torch

net = opt = x = y = None


def setup(n_in, h1, h2, n_out, batch, threads):
    global net, opt, x, y
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(n_in, h1), torch.nn.ReLU(), torch.nn.Linear(h1, h2),
                              torch.nn.ReLU(), torch.nn.Linear(h2, n_out))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, n_in)
    y = torch.randint(0, n_out, (batch,))
    for _ in range(3):
        step()


def step():
    loss = torch.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def time_steps(seconds):
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        t = time.perf_counter() - t0
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
        elif w[0] == "time":
            reply = "%.9g" % time_steps(float(w[1]))
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
