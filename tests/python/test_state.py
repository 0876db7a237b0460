"""State and training from Python: variables and persistent tensors through the C library's
modules and state objects (shared by computations), initializers, derivatives (nest_grad)
against closed forms and central differences, state files read independently, and a .so
with its state functions."""
import ctypes
import threading
import time

import numpy as np
import pytest

import nest as ng
from trainutil import read_state

N = ng.make_axis(length=6, name="N")
F = ng.make_axis(length=4, name="F")


def test_state_reads_see_the_entry_values_and_assignments_land_at_return():
    w = ng.variable([F], initial_value=np.arange(4, dtype=np.float32), name="w")
    v = ng.persistent_tensor([F], initial_value=1.0, name="v")
    x = ng.placeholder([F])
    step = ng.computation([w * v, ng.assign(w, w + x), ng.assign(v, v * 2)], x)
    read = ng.computation(w + 0, name="read")
    one = np.ones(4, np.float32)
    got = step(one)
    np.testing.assert_array_equal(got[0], np.arange(4))
    got = step(one)
    np.testing.assert_array_equal(got[0], (np.arange(4) + 1) * 2)
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) + 2)
    np.testing.assert_array_equal(read(), np.arange(4) + 2)  # another computation sees it
    np.testing.assert_array_equal(step.state["v"], np.full(4, 4))
    ng.set_value(w, 0)
    np.testing.assert_array_equal(read(), np.zeros(4))


def test_a_swap_in_one_call():
    a = ng.variable([F], initial_value=np.arange(4, dtype=np.float32), name="a")
    b = ng.variable([F], initial_value=-np.arange(4, dtype=np.float32), name="b")
    swap = ng.computation([ng.assign(a, b), ng.assign(b, a)])
    swap()
    np.testing.assert_array_equal(ng.value_of(a), -np.arange(4))
    np.testing.assert_array_equal(ng.value_of(b), np.arange(4))


def test_state_assignment_broadcasts_and_is_checked():
    w = ng.variable([N, F], name="w")
    b = ng.variable([F], name="b")
    with pytest.raises(ng.AxisError):
        ng.assign(b, w)
    with pytest.raises(TypeError):
        ng.assign(b, ng.placeholder([F], np.float64))
    with pytest.raises(TypeError):
        ng.assign(ng.placeholder([F]), 1.0)
    with pytest.raises(ValueError, match="assigned twice"):
        ng.computation([ng.assign(b, 1.0), ng.assign(b, 2.0)])
    ng.computation(ng.assign(w, b + 1))()
    np.testing.assert_array_equal(ng.value_of(w), np.ones((6, 4)))


def test_the_module_declares_what_the_computation_uses():
    w = ng.variable([F], initial_value=2.0, name="w")
    k = ng.persistent_tensor([], np.int32, initial_value=0, name="steps")
    unnamed = ng.variable([F], initial_value=ng.uniform(0, 1, seed=3))
    x = ng.placeholder([F], name="x")
    f = ng.computation([ng.dot(x, w + unnamed), ng.assign(k, k + 1)], x, name="f")
    text = f.ir()
    assert "var w: f32[4] = 2\n" in text and "persistent steps: i32[] = zeros\n" in text
    assert "var state1: f32[4] = uniform(0, 1, seed=3)\n" in text
    assert sorted(f.state) == ["state1", "steps", "w"]
    assert f.state_tensors["w"] is w
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(f(a)[0], a @ (2 + ng.value_of(unnamed)), rtol=1e-6)
    assert ng.value_of(k) == 1
    # a name the C library refuses, or one taken, falls back to stateN
    odd = ng.variable([F], name="double")
    twice = ng.variable([F], name="w")
    g = ng.computation(ng.assign(odd, w + twice), name="g")
    assert sorted(g.state) == ["state0", "state2", "w"]
    hostile = ng.variable([F], name='w"); system("x'), ng.variable([F], name="nest_w")
    h = ng.computation(ng.assign(hostile[0], hostile[1] * 2.0), name="h")
    assert sorted(h.state) == ["state0", "state1"]
    assert "system" not in h.c_source() and "nest_w" not in h.c_source()


def test_initializers_are_nests_generator():
    # the values of test_state.c (a Python implementation of the documented generator)
    a = ng.variable([ng.make_axis(6)], initial_value=ng.uniform(-0.5, 0.5, seed=1))
    want = np.array([0.06656157225370407, 0.2457817643880844, 0.4710027575492859,
                     -0.05564078316092491, -0.05573529750108719, 0.2628943920135498],
                    np.float32)
    np.testing.assert_array_equal(ng.value_of(a), want)
    d = ng.variable([ng.make_axis(4)], initial_value=ng.normal(0, 1, seed=3))
    want = np.array([-0.1507893055677414, 1.235966682434082, -0.45784690976142883,
                     0.41243278980255127], np.float32)
    np.testing.assert_array_equal(ng.value_of(d), want)
    with pytest.raises(ng.NestError, match="uniform initializers take f32 or f64, not i32"):
        ng.variable([F], np.int32, initial_value=ng.uniform(0, 1))
    with pytest.raises(ValueError, match="seed"):
        ng.uniform(0, 1, seed=-1)
    with pytest.raises(ng.AxisError, match="shape"):
        ng.variable([F], initial_value=np.zeros(3))


def test_state_files_save_load_and_errors(tmp_path):
    w = ng.variable([F], initial_value=np.arange(4, dtype=np.float32), name="w")
    steps = ng.persistent_tensor([], np.int64, name="steps")
    bump = ng.computation([ng.assign(w, w * 3), ng.assign(steps, steps + 1)], name="bump")
    bump()
    path = str(tmp_path / "bump.state")
    bump.save_state(path)
    saved = read_state(path)  # nest's format, read without nest
    np.testing.assert_array_equal(saved["w"], np.arange(4) * 3)
    assert saved["steps"] == 1 and saved["steps"].dtype == np.int64
    bump()
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) * 9)
    bump.load_state(path)
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) * 3)
    assert ng.value_of(steps) == 1
    other = ng.computation([ng.assign(ng.variable([N], name="w"), 1.0),
                            ng.assign(ng.persistent_tensor([], np.int64, name="steps"), 0)])
    with pytest.raises(ng.NestError, match="tensor 'w' has dimension 0 of 4 in the file, 6"):
        other.load_state(path)
    # a file of exactly the computation's tensors: one more or one less is named
    read_w = ng.computation(w * 1.0, name="read_w")
    with pytest.raises(ng.NestError, match="the file's tensor 2, 'steps', is not in the state"):
        read_w.load_state(path)
    more = ng.persistent_tensor([], np.int64, initial_value=5, name="more")
    bump2 = ng.computation([ng.assign(w, w * 3), ng.assign(steps, steps + 1),
                            ng.assign(more, more + 1)], name="bump2")
    with pytest.raises(ng.NestError, match="tensor 'more' of the state is not in the file"):
        bump2.load_state(path)
    assert ng.value_of(more) == 5
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) * 3)  # unchanged
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-3])
    with pytest.raises(ng.NestError, match="truncated"):
        bump.load_state(path)
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) * 3)  # unchanged
    with pytest.raises(ng.NestError):
        bump.save_state(str(tmp_path / "no" / "such" / "dir"))
    with pytest.raises(ValueError, match="has no state"):
        ng.computation(ng.constant(1.0)).save_state(path)


def test_deriv_against_closed_forms():
    B = ng.make_axis(length=5, name="B")
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal(4).astype(np.float32)
    w = ng.variable([F], initial_value=w0, name="w")
    b = ng.variable([], initial_value=0.5, name="b")
    x = ng.placeholder([B, F], name="x")
    y = ng.placeholder([B], name="y")
    err = ng.dot(x, w) + b - y
    loss = ng.sum(err * err)
    gw, gb, gx = ng.deriv(loss, [w, b, x])
    assert gw.axes == w.axes and gx.axes == x.axes
    f = ng.computation([loss, gw, gb, gx], x, y)
    xs = rng.standard_normal((5, 4)).astype(np.float32)
    ys = rng.standard_normal(5).astype(np.float32)
    got = f(xs, ys)
    e = xs @ w0 + 0.5 - ys
    np.testing.assert_allclose(got[0], e @ e, rtol=1e-5)
    np.testing.assert_allclose(got[1], 2 * xs.T @ e, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], 2 * e.sum(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[3], 2 * np.outer(e, w0), rtol=1e-4, atol=1e-5)


def _central_differences(fn, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        g[i] = (fn(xp) - fn(xm)) / (2 * h)
    return g


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "softmax_xent", "named_axes", "slices"])
def test_deriv_by_central_differences(name):
    C, K = ng.make_axis(length=3, name="C"), ng.make_axis(length=4, name="K")
    x = ng.placeholder([C, K], np.float64, name="x")
    t = ng.constant(np.eye(3, 4)[::-1].copy(), [C, K], np.float64)
    if name == "tanh":
        loss = ng.sum(ng.tanh(x) * t)
    elif name == "sigmoid":
        loss = ng.sum(ng.sigmoid(x * 2.0) ** 2.0)
    elif name == "softmax_xent":
        loss = ng.cross_entropy_multi(ng.softmax(x, normalization_axes=[K]), t)
    elif name == "named_axes":  # a transposed operand, a broadcast along C, a product over K
        v = ng.constant(np.arange(4.0), [K], np.float64)
        loss = ng.sum(ng.dot(ng.axes_with_order(x, [K, C]) - v, v) ** 2.0)
    else:
        loss = ng.sum((x[:, 1:] - x[:, :-1]) ** 2.0)
    f = ng.computation([loss, ng.deriv(loss, x)], x)
    xs = np.random.default_rng(5).standard_normal((3, 4))
    got = f(xs)
    want = _central_differences(lambda a: float(f(a)[0]), xs)
    np.testing.assert_allclose(got[1], want, rtol=1e-5, atol=1e-7)


def test_deriv_errors():
    w = ng.variable([F], name="w")
    v = ng.persistent_tensor([F], name="v")
    x = ng.placeholder([F], np.int32, name="x")
    with pytest.raises(ng.AxisError, match="scalar"):
        ng.deriv(w * 2, w)
    with pytest.raises(TypeError, match="persistent"):
        ng.deriv(ng.sum(v), v)
    with pytest.raises(TypeError, match="not a variable or a placeholder"):
        ng.deriv(ng.sum(w), w * 2)
    with pytest.raises(ng.NestError):  # the C library: an integer loss
        ng.deriv(ng.sum(x), ng.placeholder([F], name="y"))
    with pytest.raises(ng.NestError):  # the C library: an integer wrt
        ng.deriv(ng.sum(w), x)


def test_sgd_with_momentum_by_deriv_matches_numpy():
    rng = np.random.default_rng(3)
    B = ng.make_axis(length=32, name="batch")
    xs = rng.standard_normal((10, 32, 4)).astype(np.float32)
    true_w = rng.standard_normal(4).astype(np.float32)
    ys = (xs @ true_w + 0.5).astype(np.float32)
    w = ng.variable([F], name="w")
    b = ng.variable([], name="b")
    vw = ng.persistent_tensor([F], name="vw")
    vb = ng.persistent_tensor([], name="vb")
    x, y = ng.placeholder([B, F], name="x"), ng.placeholder([B], name="y")
    err = ng.dot(x, w) + b - y
    loss = ng.mean(err * err)
    lr, mu = 0.05, 0.5
    nvw, nvb = vw * mu + ng.deriv(loss, w), vb * mu + ng.deriv(loss, b)
    step = ng.computation([loss, ng.assign(vw, nvw), ng.assign(vb, nvb),
                           ng.assign(w, w - nvw * lr), ng.assign(b, b - nvb * lr)], x, y,
                          name="step")
    predict = ng.computation(ng.dot(x, w) + b, x, name="predict")
    nw, nb, mvw, mvb = np.zeros(4), 0.0, np.zeros(4), 0.0
    for epoch in range(20):
        for xb, yb in zip(xs, ys):
            got = float(step(xb, yb)[0])
            e = xb @ nw + nb - yb
            assert got == pytest.approx(float(np.mean(e * e)), rel=1e-3, abs=1e-5)
            mvw, mvb = mvw * mu + 2 / 32 * (e @ xb), mvb * mu + 2 * np.mean(e)
            nw, nb = nw - lr * mvw, nb - lr * mvb
    np.testing.assert_allclose(ng.value_of(w), nw, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ng.value_of(w), true_w, atol=1e-2)
    np.testing.assert_allclose(predict(xs[0]), ys[0], atol=5e-2)  # shares the weights


def test_a_shared_object_with_state(tmp_path):
    w = ng.variable([F], initial_value=ng.uniform(-1, 1, seed=9), name="w")
    x = ng.placeholder([F], name="x")
    f = ng.computation([ng.dot(x, w), ng.assign(w, w + x)], x, name="acc")
    a = np.arange(4, dtype=np.float32)
    w0 = ng.value_of(w)
    f(a)  # trained once in Python
    path = str(tmp_path / "acc.state")
    f.save_state(path)
    so, h = f.save(str(tmp_path / "acc"))
    header = open(h).read()
    assert "acc_state *acc_state_new(void);" in header
    lib = ctypes.CDLL(so)
    vp = ctypes.c_void_p
    lib.acc_state_new.restype = vp
    lib.acc_state_load.argtypes = [vp, ctypes.c_char_p]
    lib.acc_state_tensor.restype = vp
    lib.acc_state_tensor.argtypes = [vp, ctypes.c_char_p]
    lib.acc_state_free.argtypes = [vp]
    lib.acc.argtypes = [vp, vp, vp]
    st = lib.acc_state_new()
    # NAME_state_new starts with the declared initializer: Python's first value
    fresh = np.ctypeslib.as_array(ctypes.cast(lib.acc_state_tensor(st, b"w"),
                                              ctypes.POINTER(ctypes.c_float)), (4,))
    np.testing.assert_array_equal(fresh, w0)
    assert lib.acc_state_load(st, path.encode()) == 0
    out = np.zeros((), np.float32)
    want = f(a)[0]
    assert lib.acc(st, a.ctypes.data, out.ctypes.data) == 0
    assert out == want
    np.testing.assert_array_equal(fresh, ng.value_of(w))
    lib.acc_state_free(st)


def test_the_reference_interpreter_reads_and_assigns_state_as_a_call():
    w = ng.variable([F], initial_value=np.arange(4, dtype=np.float64), dtype=np.float64)
    x = ng.placeholder([F], np.float64)
    f = ng.computation([w * x, ng.assign(w, w + x)], x)
    a = np.full(4, 0.5)
    got = f.evaluate(a)[0]
    np.testing.assert_array_equal(got, np.arange(4) * 0.5)
    np.testing.assert_array_equal(f(a)[0], (np.arange(4) + 0.5) * 0.5)
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) + 1.0)


def _so_tensor(lib, prefix, st, name, dtype, shape):
    """A numpy view of the tensor `name` of a .so's state object st."""
    fn = getattr(lib, prefix + "_state_tensor")
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    p = fn(st, name.encode())
    assert p, name
    n = int(np.prod(shape, dtype=np.int64))
    buf = (ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(p)
    return np.frombuffer(buf, dtype).reshape(shape)


def test_array_initial_values_reach_a_shared_objects_state_new(tmp_path):
    # NAME_state_new of a .so starts from each declared initial value: arrays too, of every
    # type, whatever the computation did to the tensors since
    rng = np.random.default_rng(11)
    K = ng.make_axis(length=3, name="K")
    w0 = rng.standard_normal((6, 4)).astype(np.float32)
    d0 = rng.standard_normal(3)
    i0 = rng.integers(-2 ** 31, 2 ** 31, 4, dtype=np.int64).astype(np.int32)
    l0 = np.array([-2 ** 62, 5, 2 ** 63 - 1], np.int64)
    b0 = np.array([True, False, True, True])
    w = ng.variable([N, F], initial_value=w0, name="w")
    d = ng.variable([K], np.float64, initial_value=d0, name="d")
    i = ng.persistent_tensor([F], np.int32, initial_value=i0, name="i")
    big = ng.persistent_tensor([K], np.int64, initial_value=l0, name="big")
    flag = ng.persistent_tensor([F], np.bool_, initial_value=b0, name="flag")
    u = ng.variable([F], initial_value=ng.uniform(-1, 1, seed=5), name="u")
    x = ng.placeholder([F], name="x")
    f = ng.computation([ng.dot(w + u, x), ng.assign(w, w * 2.0), ng.assign(d, d + 1.0),
                        ng.assign(i, i + 1), ng.assign(big, big - 1),
                        ng.assign(flag, ~flag)], x, name="init")
    f(np.ones(4, np.float32))  # the tensors move on; the initializers stay
    assert ng.value_of(i)[0] == np.int32(i0[0] + 1)
    so, _ = f.save(str(tmp_path / "init"))
    lib = ctypes.CDLL(so)
    lib.init_state_new.restype = ctypes.c_void_p
    lib.init_state_free.argtypes = [ctypes.c_void_p]
    st = lib.init_state_new()
    assert st
    try:
        for name, dtype, want in (("w", np.float32, w0), ("d", np.float64, d0),
                                  ("i", np.int32, i0), ("big", np.int64, l0),
                                  ("flag", np.bool_, b0)):
            got = _so_tensor(lib, "init", st, name, dtype, want.shape)
            np.testing.assert_array_equal(got, want, err_msg=name)
        got = _so_tensor(lib, "init", st, "u", np.float32, (4,))
        np.testing.assert_array_equal(got, ng.value_of(u))
    finally:
        lib.init_state_free(st)
    # the module's text says the values too
    assert "var d: f64[3] = [" in f.ir()


def _run_threads(fns):
    errors = []

    def guard(fn):
        try:
            fn()
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)
    ts = [threading.Thread(target=guard, args=(fn,)) for fn in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def test_threads_share_a_variable_without_losing_a_step():
    # 8 threads: pairs share a step's variables through two computations compiled apart, each
    # thread also has a variable of its own; every update lands, and every read is of a whole
    # number of steps
    B = ng.make_axis(length=4096, name="B")
    x = ng.placeholder([B], name="x")
    shared = []
    for p in range(4):
        w = ng.variable([B], initial_value=np.zeros(4096, np.float32), name="w")
        n = ng.persistent_tensor([], np.int64, name="n")
        updates = [ng.assign(w, w + x), ng.assign(n, n + 1)]
        shared.append((w, n, ng.computation(updates, x, name="a%d" % p),
                       ng.computation(updates, x, name="b%d" % p),
                       ng.computation([ng.sum(w), n], name="peek%d" % p)))
    own = [ng.variable([B], name="own") for _ in range(8)]
    own_steps = [ng.computation(ng.assign(v, v + x), x, name="own%d" % i)
                 for i, v in enumerate(own)]
    ones = np.ones(4096, np.float32)

    def work(i):
        w, n, a, b, peek = shared[i // 2]
        step = a if i % 2 else b
        for _ in range(100):
            step(ones)
            own_steps[i](ones)
            total, count = peek()
            assert total == 4096 * count, (total, count)  # a snapshot between steps
    _run_threads([lambda i=i: work(i) for i in range(8)])
    for w, n, *_ in shared:
        assert ng.value_of(n) == 200
        np.testing.assert_array_equal(ng.value_of(w), np.full(4096, 200))
    for v in own:
        np.testing.assert_array_equal(ng.value_of(v), np.full(4096, 100))


def test_calls_on_distinct_variables_do_not_wait_for_each_other():
    # the lock of a variable is held (as a call on it holds it): a computation on another
    # variable runs, one on it waits, one on both waits, until it is released
    a = ng.variable([F], name="a")
    b = ng.variable([F], name="b")
    on_a = ng.computation(ng.assign(a, a + 1.0), name="on_a")
    on_b = ng.computation(ng.assign(b, b + 1.0), name="on_b")
    on_both = ng.computation([ng.assign(a, a + b), ng.assign(b, b + 1.0)], name="on_both")
    with a.value.lock:
        tb = threading.Thread(target=on_b)
        tb.start()
        tb.join(timeout=30)
        assert not tb.is_alive()
        waiting = [threading.Thread(target=on_a), threading.Thread(target=on_both)]
        for t in waiting:
            t.start()
        time.sleep(0.2)
        assert all(t.is_alive() for t in waiting)
        np.testing.assert_array_equal(a.value.array, 0)
    for t in waiting:
        t.join(timeout=30)
        assert not t.is_alive()
    assert ng.value_of(b)[0] == 2
    assert ng.value_of(a)[0] == 2  # on_a and on_both, in either order
