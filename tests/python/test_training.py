"""The digits MLP of samples/mlp.nest, written with named axes and trained from Python, against
the C sample (samples/train.c, itself checked against PyTorch by tests/test_train.py): the same
initial weights bit for bit (ng.uniform with the sample's seeds), the same loss (to 1e-5
relative) at each of the 460 steps of the sample's batches, and the same test accuracy, above
95%. It costs about 2 s (two compiles of the C sample's and Python's step).

The train program is $NEST_TRAIN (make python-test sets it), else build/samples/train."""
import os
import subprocess

import numpy as np
import pytest

import nest as ng
from trainutil import digits, read_state

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
TRAIN = os.environ.get("NEST_TRAIN", os.path.join(ROOT, "build", "samples", "train"))

B = ng.make_axis(length=32, name="B")
T = ng.make_axis(length=297, name="B")  # the test batch: another length of B
D = ng.make_axis(length=64, name="D")
H1 = ng.make_axis(length=256, name="H1")
H2 = ng.make_axis(length=256, name="H2")
K = ng.make_axis(length=10, name="K")


def mlp():
    """(step, predict): samples/mlp.nest in the Python front end."""
    w1 = ng.variable([D, H1], initial_value=ng.uniform(-0.125, 0.125, seed=1), name="w1")
    b1 = ng.variable([H1], name="b1")
    w2 = ng.variable([H1, H2], initial_value=ng.uniform(-0.0625, 0.0625, seed=2), name="w2")
    b2 = ng.variable([H2], name="b2")
    w3 = ng.variable([H2, K], initial_value=ng.uniform(-0.0625, 0.0625, seed=3), name="w3")
    b3 = ng.variable([K], name="b3")
    weights = [w1, b1, w2, b2, w3, b3]

    def scores(x):
        h1 = ng.relu(ng.dot(x, w1) + b1)
        h2 = ng.relu(ng.dot(h1, w2) + b2)
        return ng.dot(h2, w3) + b3

    x, y = ng.placeholder([B, D], name="x"), ng.placeholder([B, K], name="y")
    lr = ng.placeholder([], name="lr")
    z = scores(x)
    zs = z - ng.max(z, reduction_axes=[K])
    logp = zs - ng.log(ng.sum(ng.exp(zs), reduction_axes=[K]))
    loss = -ng.sum(y * logp) / 32.0
    updates = []
    for w, g in zip(weights, ng.deriv(loss, weights)):
        v = ng.persistent_tensor(w.axes, name="v_" + w.name)  # SGD with momentum 0.9
        nv = v * 0.9 + g
        updates += [ng.assign(v, nv), ng.assign(w, w - lr * nv)]
    step = ng.computation([loss] + updates, x, y, lr, name="step", openmp=False)
    xt = ng.placeholder([T, D], name="x")
    predict = ng.computation(scores(xt), xt, name="predict", openmp=False)
    return step, predict, weights


def test_digits_mlp_matches_the_c_sample(tmp_path):
    if not os.path.exists(TRAIN):
        pytest.skip("%s is not built (make %s)" % (TRAIN, "build/samples/train"))
    init, losses, order = (str(tmp_path / n) for n in ("init.state", "losses", "order"))
    out = subprocess.run([TRAIN, os.path.join(ROOT, "samples", "mlp.nest"), "--init", init,
                          "--losses", losses, "--order", order, "--one-core", "-q"],
                         check=True, capture_output=True, text=True).stdout
    c_accuracy = float(out.split("test accuracy ")[1].split("%")[0])
    c_losses = [float(v) for v in open(losses)]
    batches = [[int(v) for v in line.split()] for line in open(order)]
    assert len(batches) == 460  # 10 epochs of 46 batches

    step, predict, weights = mlp()
    start = read_state(init)
    for w in weights:  # ng.uniform is the sample's generator: the same bits
        np.testing.assert_array_equal(ng.value_of(w), start[w.name])

    images, labels = digits()
    onehot = np.eye(10, dtype=np.float32)[labels]
    lr = np.float32(0.05)
    got = [float(step(images[idx], onehot[idx], lr)[0]) for idx in batches]
    rel = np.abs(np.array(got) - c_losses) / np.abs(c_losses)
    # the same kernels up to the order of some float operations: 5e-9 measured here
    assert rel.max() < 1e-5, "step %d: %g" % (rel.argmax(), rel.max())
    assert got[-1] < 0.2 * got[0]

    guess = predict(images[1500:]).argmax(axis=1)
    accuracy = 100 * np.mean(guess == labels[1500:])
    assert accuracy >= 95
    assert abs(accuracy - c_accuracy) <= 1.0  # at most 3 of the 297 images differ
    # the training computation's state: weights and velocities, in nest's state file format
    path = str(tmp_path / "trained.state")
    step.save_state(path)
    saved = read_state(path)
    assert sorted(saved) == sorted([w.name for w in weights] +
                                   ["v_" + w.name for w in weights])
    np.testing.assert_array_equal(saved["w3"], ng.value_of(weights[4]))
