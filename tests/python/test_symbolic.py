"""Symbolic axes: ng.make_axis(name="N") without a length is one of the C library's named dims
(nest_named_dim); one compiled kernel serves every length, taken from the arrays at each call
(nest_call_dims). Element-wise ops, reductions and dot with the symbolic axis first, against
numpy at several lengths (0 included), a contraction over it, state and gradients; what the C
core refuses is a NestError with its message, what the front end cannot do without a length an
AxisError."""
import ctypes

import numpy as np
import pytest

import nest as ng

N = ng.make_axis(name="N")
F = ng.make_axis(length=5, name="F")
K = ng.make_axis(length=3, name="K")
SIZES = (0, 1, 7, 64, 1000)


def rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_a_symbolic_axis():
    assert N.symbolic and N.name == "N" and str(N) == "N"
    assert ng.make_axis(name="N") == N and ng.make_axis(length=5, name="N") != N
    x = ng.placeholder([N, F], name="x")
    assert str(x.axes) == "Axes(N, F=5)"
    assert (x + 1.0).axes == x.axes


def test_elementwise_aligned_by_name_at_several_lengths():
    rng = np.random.default_rng(1)
    x = ng.placeholder([N, F], name="x")
    v = ng.placeholder([F], name="v")
    s = ng.placeholder([N], name="s")
    i = ng.placeholder([N, F], np.int32, name="i")
    y = ng.tanh(x * v - 2.0) + ng.exp(s * 0.5)   # v broadcast along N, s along F
    c = ng.select(x > v, x, -v)
    z = ng.convert(i, np.float32) / (ng.absolute(x) + 1.0)
    f = ng.computation([y, c, z, i * 3 - 1], x, v, s, i, name="ew")
    vv = rand(rng, 5)
    for n in SIZES:
        xs, ss = rand(rng, n, 5), rand(rng, n)
        is_ = rng.integers(-100, 100, (n, 5), dtype=np.int32)
        got = f(xs, vv, ss, is_)
        assert [g.shape for g in got] == [(n, 5)] * 4
        np.testing.assert_allclose(got[0], np.tanh(xs * vv - 2) + np.exp(ss * 0.5)[:, None],
                                   rtol=2e-6, atol=1e-6)
        np.testing.assert_array_equal(got[1], np.where(xs > vv, xs, -vv))
        np.testing.assert_allclose(got[2], is_ / (np.abs(xs) + 1), rtol=1e-6)
        np.testing.assert_array_equal(got[3], is_ * 3 - 1)
        if n:  # the interpreter agrees
            ev = f.evaluate(xs, vv, ss, is_)
            np.testing.assert_allclose(ev[0], got[0], rtol=2e-6, atol=1e-6)


def test_reductions_over_and_along_the_symbolic_axis():
    rng = np.random.default_rng(2)
    x = ng.placeholder([N, F], np.float64, name="x")
    f = ng.computation([ng.sum(x, reduction_axes=[F]), ng.sum(x, reduction_axes=[N]),
                        ng.max(x, reduction_axes=[F]), ng.min(x, reduction_axes=[N]),
                        ng.prod(x * 0.5 + 1.0, reduction_axes=[F]), ng.sum(x * x),
                        ng.mean(x, reduction_axes=[F]), ng.argmax(x, F),
                        ng.softmax(x, normalization_axes=[F])], x, name="red")
    for n in SIZES:
        xs = rand(rng, n, 5, dtype=np.float64)
        got = f(xs)
        np.testing.assert_allclose(got[0], xs.sum(1), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[1], xs.sum(0), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(got[3], xs.min(0) if n else np.full(5, np.inf))
        np.testing.assert_allclose(got[4], (xs * 0.5 + 1).prod(1), rtol=1e-12)
        np.testing.assert_allclose(got[5], (xs * xs).sum(), rtol=1e-12)
        np.testing.assert_allclose(got[6], xs.mean(1), rtol=1e-12)
        if n:
            np.testing.assert_array_equal(got[2], xs.max(1))
            np.testing.assert_array_equal(got[7], xs.argmax(1))
            e = np.exp(xs - xs.max(1, keepdims=True))
            np.testing.assert_allclose(got[8], e / e.sum(1, keepdims=True), rtol=1e-12)
        assert got[7].dtype == np.int64 and got[7].shape == (n,)


def test_dot_with_the_symbolic_axis_first():
    rng = np.random.default_rng(3)
    x = ng.placeholder([N, F], name="x")
    w = ng.placeholder([K, F], name="w")   # (out, in): dot contracts F by name
    b = ng.placeholder([K], name="b")
    v = ng.placeholder([F], name="v")
    dense = ng.computation([ng.relu(ng.dot(x, w) + b), ng.dot(x, v)], x, w, b, v, name="dense")
    ws, bs, vs = rand(rng, 3, 5), rand(rng, 3), rand(rng, 5)
    for n in SIZES:
        xs = rand(rng, n, 5)
        h, p = dense(xs, ws, bs, vs)
        assert h.shape == (n, 3) and p.shape == (n,)
        np.testing.assert_allclose(h, np.maximum(xs @ ws.T + bs, 0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(p, xs @ vs, rtol=1e-5, atol=1e-5)
    # a second layer: the product of a symbolic result
    H = ng.make_axis(length=8, name="H")
    w2 = ng.placeholder([F, H], name="w2")
    w3 = ng.placeholder([H, K], name="w3")
    mlp = ng.computation(ng.dot(ng.tanh(ng.dot(x, w2)), w3), x, w2, w3, name="mlp")
    w2s, w3s = rand(rng, 5, 8), rand(rng, 8, 3)
    for n in (3, 200):
        xs = rand(rng, n, 5)
        np.testing.assert_allclose(mlp(xs, w2s, w3s), np.tanh(xs @ w2s) @ w3s, rtol=1e-4,
                                   atol=1e-5)


def test_two_symbolic_axes_and_their_lengths_from_the_arguments():
    M = ng.make_axis(name="M")
    x = ng.placeholder([N, F], name="x")
    z = ng.placeholder([M], name="z")
    y = ng.placeholder([N], name="y")
    f = ng.computation([ng.sum(x, reduction_axes=[F]) - y, z * 2.0], x, z, y, name="two")
    rng = np.random.default_rng(4)
    for n, m in ((2, 9), (0, 3), (5, 0)):
        xs, zs, ys = rand(rng, n, 5), rand(rng, m), rand(rng, n)
        a, c = f(xs, zs, ys)
        np.testing.assert_allclose(a, xs.sum(1) - ys, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(c, zs * 2)
    # one axis, two lengths: named, before any C runs
    with pytest.raises(ValueError, match=r"symbolic axis N has length 4 in argument 1 .* and 3 "
                                         r"in argument 3"):
        f(rand(rng, 4, 5), rand(rng, 2), rand(rng, 3))
    with pytest.raises(ValueError, match=r"expected shape \(N, 5\), got \(4, 6\)"):
        f(rand(rng, 4, 6), rand(rng, 2), rand(rng, 4))
    with pytest.raises(ValueError, match="expected shape"):
        f(rand(rng, 4), rand(rng, 2), rand(rng, 4))


def test_the_shared_object_takes_the_lengths_first(tmp_path):
    x = ng.placeholder([N, F], name="x")
    f = ng.computation(ng.sum(x * x, reduction_axes=[F]), x, name="sq")
    so, h = f.save(str(tmp_path / "sq"))
    assert "int sq(int64_t N, const float *x, float *result0);" in open(h).read()
    lib = ctypes.CDLL(so)
    lib.sq.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    xs = np.arange(15, dtype=np.float32).reshape(3, 5)
    out = np.zeros(3, np.float32)
    assert lib.sq(3, xs.ctypes.data, out.ctypes.data) == 0
    np.testing.assert_array_equal(out, (xs * xs).sum(1))


def test_contraction_state_and_gradients_over_the_symbolic_axis():
    """The C core compiles a sum over N (x transposed read by a product), state tensors of
    plain lengths updated from [N, ...] arguments, and gradients over N."""
    rng = np.random.default_rng(4)
    x = ng.placeholder([N, F], name="x")
    y = ng.placeholder([N, K], name="y")
    xty = ng.computation(ng.dot(x, y), x, y, name="xty")   # contracts N: [F, K]
    w = ng.variable([F], name="w_sym")
    step = ng.computation(ng.assign(w, w + ng.sum(x, reduction_axes=[N])), x, name="acc")
    g = ng.computation(ng.deriv(ng.sum(x * x), x), x, name="grad")
    total = np.zeros(5, np.float32)
    for n in SIZES:
        a, b = rand(rng, n, 5), rand(rng, n, 3)
        np.testing.assert_allclose(xty(a, b), a.T @ b, rtol=1e-4, atol=1e-4)
        step(a)
        total += a.sum(axis=0)
        np.testing.assert_allclose(step.state["w_sym"], total, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(g(a), 2 * a, rtol=1e-6)
    step.evaluate(np.ones((2, 5), np.float32))   # the interpreter, with state and a length
    np.testing.assert_allclose(step.state["w_sym"], total + 2, rtol=1e-4, atol=1e-4)


def test_what_is_refused():
    x = ng.placeholder([N, F], name="x")
    # the C core: the symbolic axis stored away from the front
    with pytest.raises(ng.NestError, match="a symbolic dim other than the first axis"):
        ng.computation(x.T, x)
    # the front end, which would need the length
    with pytest.raises(ng.AxisError, match="mean: axis N .* is symbolic"):
        ng.mean(x, reduction_axes=[N])
    with pytest.raises(ng.AxisError, match="only the whole axis"):
        x[1:]
    with pytest.raises(ng.AxisError, match="a constant has fixed lengths"):
        ng.constant(1.0, [N])
    with pytest.raises(ng.AxisError, match="state tensors have fixed lengths"):
        ng.variable([N, F], name="v")
    with pytest.raises(ng.AxisError, match="axis N is symbolic"):
        ng.flatten_axes(x, [N, F], "NF")
    with pytest.raises(ng.AxisError, match="axis N has a symbolic length in x.* and length 5"):
        x + ng.placeholder([ng.make_axis(length=5, name="N")])
    with pytest.raises(ValueError, match="no placeholder has it"):
        ng.computation(ng.broadcast(ng.constant(2.0), [N, F]))
