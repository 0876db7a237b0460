#!/usr/bin/python3
"""test_train.py - samples/train (a model of samples/ trained by nest, one kernel per step)
against PyTorch: the same initial weights and batches give the same loss at each of the first
100 steps, to 1e-4 relative; and training to the end reaches 95% test accuracy.

    tests/test_train.py TRAIN MODEL.nest

The initial weights come from the state file train writes (the format of docs/api.md, read
here independently); the batches from the image indexes it writes, into the digits shuffled as
train.c documents (reimplemented here). PyTorch runs on one thread, nest on one core.
"""
import re
import subprocess
import sys
import tempfile

import torch

from trainutil import digits, read_state

def main():
    train, model = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        init, losses, order = tmp + "/init.state", tmp + "/losses", tmp + "/order"
        subprocess.run([train, model, "--steps", "100", "--init", init, "--losses", losses,
                        "--order", order, "--one-core", "-q"], check=True)
        w = read_state(init)
        got = [float(x) for x in open(losses)]
        batches = [[int(x) for x in line.split()] for line in open(order)]
    x, y = (torch.tensor(a) for a in digits())
    layers = [torch.nn.Linear(64, 256), torch.nn.Linear(256, 256), torch.nn.Linear(256, 10)]
    with torch.no_grad():
        for k, layer in enumerate(layers, 1):
            layer.weight.copy_(torch.tensor(w["w%d" % k].T))
            layer.bias.copy_(torch.tensor(w["b%d" % k]))
    net = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(), layers[2])
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    worst = 0.0
    for step, idx in enumerate(batches):
        loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        want = loss.item()
        rel = abs(got[step] - want) / abs(want)
        worst = max(worst, rel)
        if rel > 1e-4:
            print("step %d: nest's loss %.9g, PyTorch's %.9g (relative difference %.2g)"
                  % (step + 1, got[step], want, rel))
            failed = True
    print("%d steps: the losses of nest and PyTorch differ by %.2g relative at most"
          % (len(batches), worst))
    if len(batches) != 100:
        print("train ran %d steps, not 100" % len(batches))
        failed = True
    out = subprocess.run([train, model, "--one-core", "-q"], check=True, capture_output=True,
                         text=True).stdout
    print(out.strip())
    acc = float(re.search(r"test accuracy ([0-9.]+)%", out).group(1))
    if acc < 95:
        print("test accuracy %.1f%% is below 95%%" % acc)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
