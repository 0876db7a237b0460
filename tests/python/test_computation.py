"""Computations: calling with numpy arrays and the checks of the arguments, state across
calls, the generated C, the ahead-of-time .so, and errors that carry the C library's
message."""
import ctypes
import os
import threading

import numpy as np
import pytest

import nest as ng

N = ng.make_axis(length=6, name="N")
F = ng.make_axis(length=4, name="F")


def test_results_single_list_and_none_for_assign():
    x = ng.placeholder([N])
    a = np.arange(6, dtype=np.float32)
    assert isinstance(ng.computation(x * 2, x)(a), np.ndarray)
    got = ng.computation([x * 2, x + 1], x)(a)
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_array_equal(got[1], a + 1)
    count = ng.persistent_tensor([], initial_value=0, name="count")
    got = ng.computation([ng.sum(x), ng.assign(count, count + 1)], x)(a)
    assert got[0] == 15 and got[1] is None


def test_arguments_are_checked():
    x = ng.placeholder([N, F], name="x")
    s = ng.placeholder([], name="s")
    f = ng.computation(x * s, x, s, name="scale")
    good = np.ones((6, 4), np.float32)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        f(good)
    with pytest.raises(TypeError, match="float32.*float64"):
        f(np.ones((6, 4)), 1.0)
    with pytest.raises(ValueError, match=r"expected shape \(6, 4\), got \(4, 6\)"):
        f(np.ones((4, 6), np.float32), 1.0)
    with pytest.raises(ValueError, match="contiguous"):
        f(np.ones((4, 6), np.float32).T, 1.0)
    with pytest.raises(TypeError, match="numpy array"):
        f([[1.0] * 4] * 6, 1.0)
    unaligned = np.frombuffer(bytearray(6 * 4 * 4 + 1), np.uint8)[1:].view(np.float32)
    with pytest.raises(ValueError, match="aligned"):
        f(unaligned.reshape(6, 4), 1.0)
    # a scalar placeholder takes a Python or numpy scalar; read-only arrays are fine
    ro = np.full((6, 4), 2, np.float32)
    ro.flags.writeable = False
    np.testing.assert_array_equal(f(ro, 1.5), np.full((6, 4), 3, np.float32))
    np.testing.assert_array_equal(f(good, np.float32(2)), good * 2)


def test_placeholders_must_be_given_once():
    x, y = ng.placeholder([N], name="x"), ng.placeholder([N], name="y")
    with pytest.raises(ValueError, match="y.*not given"):
        ng.computation(x + y, x)
    with pytest.raises(ValueError, match="twice"):
        ng.computation(x + y, x, y, x)
    with pytest.raises(TypeError):
        ng.computation(x, x * 2)
    with pytest.raises(TypeError):
        ng.computation(3, x)


def test_errors_carry_the_library_message():
    i = ng.placeholder([N], np.int32, name="i")
    with pytest.raises(ng.NestError, match=r"exp\(i: i32\[6\]\)") as e:
        ng.exp(i)
    assert e.value.status == 1 and e.value.status_name
    x = ng.placeholder([N], name="x")
    with pytest.raises(ng.NestError, match="add.*f32.*i32"):
        x + i
    with pytest.raises(ng.NestError, match="not an identifier"):
        ng.computation(x + 1, x, name="not a name")
    with pytest.raises(ng.NestError, match="C keyword"):
        ng.computation(x + 1, x, name="int")


def test_hostile_names_do_not_reach_the_c():
    x = ng.placeholder([N], name="x; system(\"rm -rf /\");")
    y = ng.placeholder([N], name="int")
    z = ng.placeholder([N], name="nest_z")
    r = ((x + y) * z).named("*/ evil")
    f = ng.computation(r, x, y, z)
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(f(a, a, a), (a + a) * a)
    src = f.c_source()
    assert "system" not in src and "evil" not in src


def test_named_values_appear_in_the_generated_c():
    x = ng.placeholder([N], name="x")
    h = ng.tanh(x).named("hidden")
    f = ng.computation(ng.sum(h * h), x, name="energy")
    src = f.c_source()
    assert "int energy(" in src and "hidden" in src
    assert "func energy(x: f32[6])" in f.ir()
    assert "energy_call" in f.c_header()


def test_a_deep_graph_lowers_without_recursion():
    x = ng.placeholder([N], name="x")
    y = x
    for k in range(3000):
        y = y * 1.0001 if k % 2 else y - 0.0001
    a = np.linspace(0, 1, 6).astype(np.float32)
    want = a.copy()  # the same float32 operations in numpy
    for k in range(3000):
        want = want * np.float32(1.0001) if k % 2 else want - np.float32(0.0001)
    np.testing.assert_allclose(ng.computation(y, x)(a), want, rtol=1e-5, atol=1e-6)


def test_zero_sized_axes():
    Z = ng.make_axis(length=0, name="Z")
    x = ng.placeholder([Z, F])
    f = ng.computation([x * 2, ng.sum(x, reduction_axes=[Z])], x)
    got = f(np.empty((0, 4), np.float32))
    assert got[0].shape == (0, 4)
    np.testing.assert_array_equal(got[1], np.zeros(4, np.float32))


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


def test_save_and_load_state(tmp_path):
    w = ng.variable([F], initial_value=np.arange(4, dtype=np.float32), name="w")
    bump = ng.computation(ng.assign(w, w * 3))
    bump()
    path = str(tmp_path / "state.npz")
    bump.save_state(path)
    bump()
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) * 9)
    bump.load_state(path)
    np.testing.assert_array_equal(ng.value_of(w), np.arange(4) * 3)
    other = ng.computation(ng.assign(ng.variable([N], name="w"), 1.0))
    with pytest.raises(ValueError, match="is float32 \\(4,\\)"):
        other.load_state(path)


def test_save_writes_a_shared_object_and_header(tmp_path):
    K = ng.make_axis(length=3, name="K")
    x, w = ng.placeholder([N, K], name="x"), ng.placeholder([K, F], name="w")
    y = ng.relu(ng.dot(x, w))
    f = ng.computation(y, x, w, name="layer")
    so, h = f.save(str(tmp_path / "layer"))
    assert so.endswith("layer.so") and os.path.exists(so) and os.path.exists(h)
    assert "int layer(" in open(h).read()
    lib = ctypes.CDLL(so)
    a = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    out = np.empty((6, 4), np.float32)
    ptr = ctypes.c_void_p
    lib.layer.argtypes = [ptr, ptr, ptr]
    assert lib.layer(a.ctypes.data, b.ctypes.data, out.ctypes.data) == 0
    np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(a, b), out, rtol=1e-6)
    with pytest.raises(ng.NestError, match="nowhere"):
        f.save("/nowhere/at/all/layer.so")


def test_calls_from_threads_do_not_overlap():
    x = ng.placeholder([N])
    f = ng.computation(ng.exp(x) + x, x)
    a = np.linspace(-1, 1, 6).astype(np.float32)
    want = np.exp(a) + a
    errors = []

    def work():
        for _ in range(200):
            if not np.allclose(f(a), want, rtol=1e-6):
                errors.append(1)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
