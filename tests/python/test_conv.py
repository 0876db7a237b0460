"""Convolution and pooling by axis roles, against PyTorch (python3-torch)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as tf

import nest as ng

rng = np.random.default_rng(23)
N, C, H, W = (ng.make_axis(length=n, name=s) for n, s in ((2, "N"), (3, "C"), (9, "H"), (8, "W")))
K, R, S = (ng.make_axis(length=n, name=s) for n, s in ((4, "K"), (3, "R"), (2, "S")))


def data(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def run(result, *pairs):
    return ng.computation(result, *[p for p, _ in pairs])(*[a for _, a in pairs])


def close(got, want):
    np.testing.assert_allclose(got, want.numpy() if hasattr(want, "numpy") else want,
                               rtol=1e-4, atol=1e-5)


def test_convolution_nchw_against_torch():
    x, w = ng.placeholder([N, C, H, W]), ng.placeholder([K, C, R, S])
    a, f = data(2, 3, 9, 8), data(4, 3, 3, 2)
    y = ng.convolution(x, w, spatial=[H, W], out_channel=K, strides={H: 2}, padding=[(1, 0), 1],
                       dilation=[1, 2])
    assert y.axes.names == ("N", "K", "H", "W")
    want = tf.conv2d(tf.pad(torch.from_numpy(a), (1, 1, 1, 0)), torch.from_numpy(f), stride=(2, 1),
                     dilation=(1, 2))
    assert y.shape == tuple(want.shape)
    close(run(y, (x, a), (w, f)), want)


def test_convolution_with_axes_in_another_order_and_two_batch_axes():
    T = ng.make_axis(length=2, name="T")
    x = ng.placeholder([H, C, T, W, N])          # two batch axes, channel in the middle
    w = ng.placeholder([S, C, K, R])
    a, f = data(9, 3, 2, 8, 2), data(2, 3, 4, 3)
    y = ng.convolution(x, w, spatial=["H", "W"], filter_spatial=[R, S])
    assert y.axes.names == ("H", "K", "T", "W", "N")
    xt = torch.from_numpy(np.ascontiguousarray(a.transpose(2, 4, 1, 0, 3).reshape(4, 3, 9, 8)))
    ft = torch.from_numpy(np.ascontiguousarray(f.transpose(2, 1, 3, 0)))
    want = tf.conv2d(xt, ft).numpy().reshape(2, 2, 4, 7, 7).transpose(3, 2, 0, 4, 1)
    close(run(y, (x, a), (w, f)), want)


def test_grouped_and_one_dimensional_convolution():
    L = ng.make_axis(length=11, name="L")
    C4, K6 = ng.make_axis(length=4, name="C"), ng.make_axis(length=6, name="K")
    Cg = ng.make_axis(length=2, name="C")        # C / groups
    x, w = ng.placeholder([N, C4, L]), ng.placeholder([K6, Cg, R])
    a, f = data(2, 4, 11), data(6, 2, 3)
    y = ng.convolution(x, w, spatial=[L], channel=C4, out_channel=K6, groups=2, strides=2)
    close(run(y, (x, a), (w, f)), tf.conv1d(torch.from_numpy(a), torch.from_numpy(f), stride=2,
                                            groups=2))


def test_pools_against_torch():
    x = ng.placeholder([N, C, H, W])
    a = data(2, 3, 9, 8)
    mp = ng.max_pool(x, window={H: 3, W: 2}, strides={H: 2, W: 2}, padding={H: 1})
    ap = ng.avg_pool(x, window=[2, 2], spatial=[H, W], strides=2)
    api = ng.avg_pool(x, window={H: 3, W: 3}, padding=1, include_pad=True)
    got = run([mp, ap, api], (x, a))
    t = torch.from_numpy(a)
    close(got[0], tf.max_pool2d(t, (3, 2), stride=2, padding=(1, 0)))
    close(got[1], tf.avg_pool2d(t, 2, stride=2))
    close(got[2], tf.avg_pool2d(t, 3, stride=1, padding=1, count_include_pad=True))
    # channels last, by name
    y = ng.max_pool(ng.axes_with_order(x, [N, H, W, C]), window={"H": 2, "W": 2}, strides=2)
    assert y.axes.names == ("N", "H", "W", "C")
    close(run(y, (x, a)), tf.max_pool2d(t, 2, stride=2).permute(0, 2, 3, 1))


def test_errors_name_the_roles():
    x, w = ng.placeholder([N, C, H, W]), ng.placeholder([K, C, R, S])
    with pytest.raises(ng.AxisError, match="out_channel or filter_spatial"):
        ng.convolution(x, w, spatial=[H, W])
    with pytest.raises(ng.AxisError, match="not an axis"):
        ng.convolution(x, w, spatial=[H, R], out_channel=K)
    with pytest.raises(ng.NestError, match="convolution"):  # the window does not fit
        ng.convolution(x, ng.placeholder([K, C, ng.make_axis(length=12, name="R"), S]),
                       spatial=[H, W], out_channel=K)
    with pytest.raises(ValueError, match="3 values for 2 spatial axes"):
        ng.max_pool(x, window=[2, 2], spatial=[H, W], strides=[1, 1, 1])


def test_gradient_through_convolution_against_torch():
    x, w = ng.placeholder([N, C, H, W]), ng.placeholder([K, C, R, S])
    a, f = data(2, 3, 9, 8), data(4, 3, 3, 2)
    y = ng.convolution(x, w, spatial=[H, W], out_channel=K, strides={H: 2}, padding=[(1, 0), 1])
    loss = ng.sum(y * y)
    ta = torch.from_numpy(a).requires_grad_()
    tw = torch.from_numpy(f).requires_grad_()
    (tf.conv2d(tf.pad(ta, (1, 1, 1, 0)), tw, stride=(2, 1)) ** 2).sum().backward()
    close(run(ng.deriv(loss, w), (x, a), (w, f)), tw.grad)
    close(run(ng.deriv(loss, x), (x, a), (w, f)), ta.grad)
