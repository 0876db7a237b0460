#!/usr/bin/python3
"""test_train.py - samples/train (a model of samples/ trained by nest, one kernel per step:
mlp.nest or cnn.nest) against PyTorch: the same initial weights and batches give the same loss
at each of the first 100 steps, to 1e-4 relative; and training to the end reaches 95% test
accuracy.

    tests/test_train.py TRAIN MODEL.nest

The initial weights come from the state file train writes (the format of docs/api.md, read
here independently, tests/trainutil.py); the batches from the image indexes it writes, into the
digits shuffled as train.c documents (reimplemented there). PyTorch runs on one thread, nest on
one core.
"""
import re
import subprocess
import sys
import tempfile

import torch

from trainutil import digits, read_state


def mlp(w):
    """samples/mlp.nest: 64-256-256-10 with ReLU; nest's w [in, out] is PyTorch's weight^T."""
    layers = [torch.nn.Linear(64, 256), torch.nn.Linear(256, 256), torch.nn.Linear(256, 10)]
    with torch.no_grad():
        for k, layer in enumerate(layers, 1):
            layer.weight.copy_(torch.tensor(w["w%d" % k].T))
            layer.bias.copy_(torch.tensor(w["b%d" % k]))
    return torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(), layers[2])


def cnn(w):
    """samples/cnn.nest: conv 3x3 1->8, ReLU, max pool 2; conv 3x3 8->16, ReLU, max pool 2;
    dense 64->10. Filters are [K, C, 3, 3] in both; the images [N, 1, 8, 8]."""
    convs = [torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.Conv2d(8, 16, 3, padding=1)]
    dense = torch.nn.Linear(64, 10)
    with torch.no_grad():
        for k, conv in enumerate(convs, 1):
            conv.weight.copy_(torch.tensor(w["k%d" % k]))
            conv.bias.copy_(torch.tensor(w["c%d" % k]))
        dense.weight.copy_(torch.tensor(w["w3"].T))
        dense.bias.copy_(torch.tensor(w["b3"]))
    return torch.nn.Sequential(torch.nn.Unflatten(1, (1, 8, 8)), convs[0], torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), convs[1], torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Flatten(), dense)


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
    net = cnn(w) if "k1" in w else mlp(w)
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
