"""The ops of models by axis name against numpy: logic, product, argmax and argmin, reverse,
one_hot, gather, topk, pad."""
import numpy as np
import pytest

import nest as ng

rng = np.random.default_rng(11)
N = ng.make_axis(length=5, name="N")
F = ng.make_axis(length=7, name="F")


def run(result, *pairs):
    comp = ng.computation(result, *[p for p, _ in pairs])
    return comp(*[a for _, a in pairs])


def test_logic():
    p, q = ng.placeholder([N, F], np.bool_), ng.placeholder([F], np.bool_)
    a, b = rng.random((5, 7)) < 0.5, rng.random(7) < 0.5
    got = run([p & q, p | q, ~p, ng.logical_and(p, True), ng.logical_or(False, q)],
              (p, a), (q, b))
    for g, w in zip(got, [a & b, a | b, ~a, a, np.broadcast_to(b, (7,))]):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(ng.NestError):  # logic takes bool: the C library's message
        ng.logical_not(ng.placeholder([F]))


def test_prod_argmax_argmin():
    x = ng.placeholder([N, F])
    a = rng.uniform(0.5, 1.5, (5, 7)).astype(np.float32)
    a[1, 2] = a[1, 5] = a[1].max() + 1  # ties: the lowest index
    a[3, 4] = np.nan                   # NaN wins, as in numpy
    got = run([ng.prod(x, reduction_axes=[F]), ng.prod(x), ng.argmax(x, F), ng.argmin(x, "N"),
               ng.argmax(x, N)], (x, a))
    np.testing.assert_allclose(got[0], np.prod(a, axis=1), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.prod(a), rtol=1e-4)
    assert got[2].dtype == np.int64
    np.testing.assert_array_equal(got[2], np.argmax(a, axis=1))
    np.testing.assert_array_equal(got[3], np.argmin(a, axis=0))
    np.testing.assert_array_equal(got[4], np.argmax(a, axis=0))
    assert ng.argmax(x, F).axes == ng.make_axes([N])


def test_reverse():
    H = ng.make_axis(length=3, name="H")
    x = ng.placeholder([N, H, F])
    a = rng.standard_normal((5, 3, 7)).astype(np.float32)
    got = run([ng.reverse(x, [F]), ng.reverse(x, ["N", H]), ng.reverse(x, [])], (x, a))
    np.testing.assert_array_equal(got[0], a[:, :, ::-1])
    np.testing.assert_array_equal(got[1], a[::-1, ::-1])
    np.testing.assert_array_equal(got[2], a)


def test_one_hot():
    K = ng.make_axis(length=4, name="K")
    i = ng.placeholder([N], np.int32)
    labels = np.array([0, 3, 1, 7, -1], np.int32)  # 7 and -1 are outside: zeros
    r = ng.one_hot(i, K)
    assert r.axes == ng.make_axes([K, N]) and r.dtype == np.int32
    got = run([r, ng.one_hot(i, K, dtype=np.float32)], (i, labels))
    want = (np.arange(4)[:, None] == labels[None, :])
    np.testing.assert_array_equal(got[0], want.astype(np.int32))
    assert got[1].dtype == np.float32
    np.testing.assert_array_equal(got[1], want.astype(np.float32))
    with pytest.raises(ng.AxisError, match="already an axis"):
        ng.one_hot(i, N)
    with pytest.raises(TypeError, match="must be an Axis"):
        ng.one_hot(i, "K")


def test_gather_is_numpy_take():
    V, E = ng.make_axis(length=6, name="V"), ng.make_axis(length=3, name="E")
    B, T = ng.make_axis(length=2, name="B"), ng.make_axis(length=4, name="T")
    table, ids = ng.placeholder([V, E]), ng.placeholder([B, T], np.int64)
    a = rng.standard_normal((6, 3)).astype(np.float32)
    k = np.array([[0, 5, 2, -1], [3, 3, 1, -6]], np.int64)
    r = ng.gather(table, ids, V)   # an embedding lookup: (B, T, E)
    assert r.axes == ng.make_axes([B, T, E])
    got = run([r, ng.gather(table, ids, E)], (table, a), (ids, k % 3))
    np.testing.assert_array_equal(got[0], np.take(a, k % 3, axis=0))
    np.testing.assert_array_equal(got[1], np.take(a, k % 3, axis=1))
    np.testing.assert_array_equal(run(r, (table, a), (ids, k)), np.take(a, k, axis=0))
    with pytest.raises(ng.AxisError, match="share"):
        ng.gather(table, ng.placeholder([E], np.int32), V)


def test_topk():
    x = ng.placeholder([N, F])
    a = rng.standard_normal((5, 7)).astype(np.float32)
    a[2, 1] = a[2, 4]  # a tie: the lower index first
    v, i = ng.topk(x, 3, F)
    lv, li = ng.topk(x, 2, "N", largest=False)
    assert v.axes == ng.make_axes([N, ng.make_axis(length=3, name="F")])
    got = run([v, i, lv, li], (x, a))
    order = np.argsort(-a, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(got[1], order)
    np.testing.assert_array_equal(got[0], np.take_along_axis(a, order, axis=1))
    low = np.argsort(a, axis=0, kind="stable")[:2]
    np.testing.assert_array_equal(got[3], low)
    np.testing.assert_array_equal(got[2], np.take_along_axis(a, low, axis=0))
    with pytest.raises(ValueError, match="k must be"):
        ng.topk(x, 8, F)


def test_pad():
    x = ng.placeholder([N, F])
    i = ng.placeholder([N], np.int32)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    k = np.arange(5, dtype=np.int32)
    got = run([ng.pad(x, {F: (1, 2)}), ng.pad(x, {"N": (2, -1), F: (0, 1)}, value=-3.5),
               ng.pad(i, {N: (0, 0)}, interior={N: 1}, value=9)], (x, a), (i, k))
    np.testing.assert_array_equal(got[0], np.pad(a, ((0, 0), (1, 2))))
    np.testing.assert_array_equal(got[1], np.pad(a, ((2, 0), (0, 1)),
                                                 constant_values=-3.5)[:-1])
    np.testing.assert_array_equal(got[2], [0, 9, 1, 9, 2, 9, 3, 9, 4])
    assert ng.pad(x, {F: (1, 2)}).axes == ng.make_axes([N, ng.make_axis(length=10, name="F")])
    with pytest.raises(TypeError, match="cannot pad"):
        ng.pad(i, {N: (1, 1)}, value=0.5)
    with pytest.raises(ng.AxisError, match="length"):
        ng.pad(x, {F: (-4, -4)})


def test_softmax_is_nests_and_differentiable():
    x = ng.placeholder([N, F], np.float64)
    a = rng.standard_normal((5, 7))
    y = ng.softmax(x, normalization_axes=[F])
    loss = ng.sum(y * ng.constant(np.arange(35.0).reshape(5, 7), [N, F], np.float64))
    got = run([y, ng.deriv(loss, x)], (x, a))
    e = np.exp(a - a.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    c = np.arange(35.0).reshape(5, 7)
    np.testing.assert_allclose(got[0], p, rtol=1e-12)
    np.testing.assert_allclose(got[1], p * (c - (p * c).sum(axis=1, keepdims=True)),
                               rtol=1e-10, atol=1e-12)
