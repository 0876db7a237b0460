"""Training loops from Python: variables, persistent tensors and assignments over many calls,
against the same updates computed with numpy."""
import numpy as np

import nest as ng


def test_linear_regression_with_momentum_matches_numpy():
    rng = np.random.default_rng(3)
    B = ng.make_axis(length=32, name="batch")
    F = ng.make_axis(length=8, name="F")
    xs = rng.standard_normal((10, 32, 8)).astype(np.float32)
    true_w = rng.standard_normal(8).astype(np.float32)
    ys = (xs @ true_w + 0.5).astype(np.float32)

    w = ng.variable([F], initial_value=0.0, name="w")
    b = ng.variable([], initial_value=0.0, name="b")
    vw = ng.persistent_tensor([F], initial_value=0.0, name="vw")
    vb = ng.persistent_tensor([], initial_value=0.0, name="vb")
    x = ng.placeholder([B, F], name="x")
    y = ng.placeholder([B], name="y")
    err = ng.dot(x, w) + b - y                    # (batch)
    loss = ng.mean(err * err)
    gw = ng.dot(err, x) * (2.0 / 32)              # d loss / d w, by hand: (F)
    gb = ng.mean(err) * 2.0
    lr, mu = 0.05, 0.5
    step = ng.computation([loss, ng.assign(vw, vw * mu + gw), ng.assign(vb, vb * mu + gb),
                           ng.assign(w, w - (vw * mu + gw) * lr),
                           ng.assign(b, b - (vb * mu + gb) * lr)], x, y, name="step")

    nw, nb, nvw, nvb = np.zeros(8), 0.0, np.zeros(8), 0.0
    losses, want = [], []
    for epoch in range(20):
        for xb, yb in zip(xs, ys):
            losses.append(float(step(xb, yb)[0]))
            e = xb @ nw + nb - yb
            want.append(float(np.mean(e * e)))
            nvw = nvw * mu + 2 / 32 * (e @ xb)
            nvb = nvb * mu + 2 * np.mean(e)
            nw, nb = nw - lr * nvw, nb - lr * nvb
    np.testing.assert_allclose(ng.value_of(w), nw, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ng.value_of(b), nb, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(losses, want, rtol=1e-3, atol=1e-5)
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(ng.value_of(w), true_w, atol=1e-2)
