"""Every op of the front end against numpy, through the JIT (and some through the reference
interpreter as well)."""
import numpy as np
import pytest

import nest as ng

rng = np.random.default_rng(7)
N = ng.make_axis(length=5, name="N")
F = ng.make_axis(length=7, name="F")


def run(result, *pairs, **kw):
    """Compiles result over the placeholders of pairs [(placeholder, array)] and calls it."""
    comp = ng.computation(result, *[p for p, _ in pairs], **kw)
    return comp(*[a for _, a in pairs])


def data(shape, dtype=np.float32, low=-2.0, high=2.0):
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-9, 10, shape).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)


def close(got, want, dtype=np.float32):
    assert got.shape == np.shape(want)
    assert got.dtype == np.dtype(dtype)
    if np.dtype(dtype).kind == "f":
        tol = 2e-5 if np.dtype(dtype) == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


BINARY = [
    (ng.add, np.add), (ng.subtract, np.subtract), (ng.multiply, np.multiply),
    (ng.divide, np.divide), (ng.maximum, np.maximum), (ng.minimum, np.minimum),
    (lambda a, b: a + b, np.add), (lambda a, b: a - b, np.subtract),
    (lambda a, b: a * b, np.multiply), (lambda a, b: a / b, np.divide),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,ref", BINARY)
def test_binary_float(fn, ref, dtype):
    x, y = ng.placeholder([N, F], dtype), ng.placeholder([N, F], dtype)
    a, b = data((5, 7), dtype), data((5, 7), dtype, 0.5, 2.0)
    close(run(fn(x, y), (x, a), (y, b)), ref(a, b), dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_arithmetic(dtype):
    x, y = ng.placeholder([N, F], dtype), ng.placeholder([N, F], dtype)
    a, b = data((5, 7), dtype), data((5, 7), dtype)
    b[0, :3] = 0
    got = run([x + y, x - y, x * y, x / y, ng.maximum(x, y), -x, abs(x)], (x, a), (y, b))
    with np.errstate(all="ignore"):
        quotient = np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b))).astype(dtype)
    for g, w in zip(got, [a + b, a - b, a * b, quotient, np.maximum(a, b), -a, np.abs(a)]):
        close(g, w, dtype)


def test_power():
    x, y = ng.placeholder([N]), ng.placeholder([N])
    a, b = data(5, low=0.5, high=3), data(5)
    got = run([x ** y, x ** 2, 2 ** x], (x, a), (y, b))
    close(got[0], a ** b)
    close(got[1], a ** 2)
    close(got[2], np.float32(2) ** a)


UNARY = [
    (ng.negative, np.negative, -3, 3), (ng.absolute, np.abs, -3, 3), (ng.exp, np.exp, -3, 3),
    (ng.log, np.log, 0.1, 3), (ng.sqrt, np.sqrt, 0, 3), (ng.tanh, np.tanh, -3, 3),
    (ng.square, np.square, -3, 3), (ng.reciprocal, np.reciprocal, 0.5, 3),
    (ng.relu, lambda a: np.maximum(a, 0), -3, 3),
    (ng.sigmoid, lambda a: 1 / (1 + np.exp(-a)), -6, 6),
    (lambda t: -t, np.negative, -3, 3), (abs, np.abs, -3, 3),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,ref,lo,hi", UNARY)
def test_unary(fn, ref, lo, hi, dtype):
    x = ng.placeholder([N, F], dtype)
    a = data((5, 7), dtype, lo, hi)
    close(run(fn(x), (x, a)), ref(a).astype(dtype), dtype)


COMPARISONS = [
    (ng.less, np.less), (ng.greater, np.greater), (ng.equal, np.equal),
    (ng.not_equal, np.not_equal), (ng.less_equal, np.less_equal),
    (ng.greater_equal, np.greater_equal),
    (lambda a, b: a < b, np.less), (lambda a, b: a > b, np.greater),
    (lambda a, b: a <= b, np.less_equal), (lambda a, b: a >= b, np.greater_equal),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("fn,ref", COMPARISONS)
def test_comparisons(fn, ref, dtype):
    x, y = ng.placeholder([N, F], dtype), ng.placeholder([N, F], dtype)
    a = data((5, 7), dtype)
    b = a.copy()
    b[::2] = data((3, 7), dtype)  # some equal, some not
    if dtype == np.float32:
        a[0, 0] = np.nan  # every comparison with NaN is false, except !=
    close(run(fn(x, y), (x, a), (y, b)), ref(a, b), np.bool_)


def test_select_and_convert():
    x, y = ng.placeholder([N, F]), ng.placeholder([F])
    c = ng.placeholder([N, F], np.bool_)
    a, b, m = data((5, 7)), data(7), data((5, 7), np.bool_)
    got = run([ng.select(c, x, y), ng.select(x > 0, x, 0.0), ng.convert(x, np.int32),
               x.astype(np.float64), ng.convert(c, np.float32)], (x, a), (y, b), (c, m))
    close(got[0], np.where(m, a, b))
    close(got[1], np.where(a > 0, a, 0))
    close(got[2], np.trunc(a).astype(np.int32), np.int32)
    close(got[3], a.astype(np.float64), np.float64)
    close(got[4], m.astype(np.float32))


def test_scalars_take_the_tensor_type():
    x = ng.placeholder([N], np.float64)
    i = ng.placeholder([N], np.int64)
    a, k = data(5, np.float64), data(5, np.int64)
    got = run([x * 0.5 + 1, 3 - x, i * 2 + 1, 7 - i], (x, a), (i, k))
    close(got[0], a * 0.5 + 1, np.float64)
    close(got[1], 3 - a, np.float64)
    close(got[2], k * 2 + 1, np.int64)
    close(got[3], 7 - k, np.int64)


def test_dot_matrix_vector_and_scalar():
    K = ng.make_axis(length=9, name="K")
    x, w, v = ng.placeholder([N, K]), ng.placeholder([K, F]), ng.placeholder([K])
    a, b, c = data((5, 9)), data((9, 7)), data(9)
    got = run([ng.dot(x, w), ng.dot(w, x), ng.dot(x, v), ng.dot(v, v), ng.dot(x, 2.0)],
              (x, a), (w, b), (v, c))
    close(got[0], a @ b)
    close(got[1], (a @ b).T)  # the result has w's free axes, then x's: (F, N)
    close(got[2], a @ c)
    close(got[3], np.float32(c @ c))
    close(got[4], a * 2)


def test_dot_contracts_every_shared_axis_in_any_order():
    C = ng.make_axis(length=3, name="C")
    H = ng.make_axis(length=4, name="H")
    K = ng.make_axis(length=6, name="K")
    x = ng.placeholder([N, H, C])
    w = ng.placeholder([C, K, H])
    a, b = data((5, 4, 3)), data((3, 6, 4))
    r = ng.dot(x, w)
    assert r.axes == ng.make_axes([N, K])
    close(run(r, (x, a), (w, b)), np.einsum("nhc,ckh->nk", a, b), np.float32)


def test_dot_without_shared_axes_is_the_outer_product():
    x, y = ng.placeholder([N]), ng.placeholder([F])
    a, b = data(5), data(7)
    close(run(ng.dot(x, y), (x, a), (y, b)), np.outer(a, b))


@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("max", np.max), ("min", np.min),
                                      ("mean", np.mean)])
def test_reductions(name, ref):
    fn = getattr(ng, name)
    H = ng.make_axis(length=4, name="H")
    x = ng.placeholder([N, H, F])
    a = data((5, 4, 7))
    got = run([fn(x), fn(x, reduction_axes=[H]), fn(x, reduction_axes=[N, F]),
               fn(x, reduction_axes="F"), fn(x, out_axes=[F, N])], (x, a))
    close(got[0], ref(a))
    close(got[1], ref(a, axis=1))
    close(got[2], ref(a, axis=(0, 2)))
    close(got[3], ref(a, axis=2))
    close(got[4], ref(a, axis=1).T)


def test_integer_sum_and_max():
    x = ng.placeholder([N, F], np.int32)
    a = data((5, 7), np.int32)
    got = run([ng.sum(x, reduction_axes=[F]), ng.max(x)], (x, a))
    close(got[0], a.sum(axis=1).astype(np.int32), np.int32)
    close(got[1], a.max(), np.int32)


def test_softmax_and_cross_entropy():
    x, t = ng.placeholder([N, F]), ng.placeholder([N, F])
    a = data((5, 7), low=-5, high=5)
    lab = np.eye(7, dtype=np.float32)[[0, 3, 6, 2, 1]]
    y = ng.softmax(x, normalization_axes=[F])
    got = run([y, ng.cross_entropy_multi(y, t, reduction_axes=[F])], (x, a), (t, lab))
    e = np.exp(a - a.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    close(got[0], want)
    close(got[1], -(lab * np.log(want)).sum(axis=1))


def test_the_reference_interpreter_agrees():
    x, y = ng.placeholder([N, F]), ng.placeholder([F])
    a, b = data((5, 7)), data(7)
    comp = ng.computation([ng.sum(ng.tanh(x) * y, reduction_axes=[F]), ng.exp(x)], x, y)
    want = [np.sum(np.tanh(a) * b, axis=1), np.exp(a)]
    for g, w in zip(comp.evaluate(a, b), want):
        close(g, w)
    for g, w in zip(comp(a, b), want):
        close(g, w)
