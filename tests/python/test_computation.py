"""Computations: calling with numpy arrays and the checks of the arguments, the generated C,
the ahead-of-time .so, calls from threads, and errors that carry the C library's message
(state and training: test_state.py)."""
import ctypes
import os
import platform
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


def test_calls_from_threads():
    x = ng.placeholder([N])
    f = ng.computation(ng.exp(x) + x, x)
    count = ng.persistent_tensor([], np.int64, name="count")
    bump = ng.computation(ng.assign(count, count + 1))
    a = np.linspace(-1, 1, 6).astype(np.float32)
    want = np.exp(a) + a
    errors = []

    def work():
        for _ in range(200):
            if not np.allclose(f(a), want, rtol=1e-6):
                errors.append(1)
            bump()
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert ng.value_of(count) == 800  # calls with state take turns: no assignment is lost


@pytest.mark.skipif(platform.machine() not in ("x86_64", "i686", "aarch64"),
                    reason="denormals are flushed on x86 and AArch64 only")
def test_denormals_flushed_when_asked_and_in_steps_by_default():
    tiny = np.full(6, 1.5e-38, dtype=np.float32)  # normal; half of it is not
    x = ng.placeholder([N])
    half = np.float32(1.5e-38) / np.float32(2)
    assert 0 < half < np.finfo(np.float32).tiny
    np.testing.assert_array_equal(ng.computation(x * 0.5, x)(tiny), half)
    np.testing.assert_array_equal(ng.computation(x * 0.5, x, flush_denormals=False)(tiny), half)
    np.testing.assert_array_equal(ng.computation(x * 0.5, x, flush_denormals=True)(tiny), 0)
    # a computation that assigns state flushes by default, and keeps when told
    s = ng.persistent_tensor([N], initial_value=0, name="s")
    got = ng.computation([x * 0.5, ng.assign(s, x * 0.5)], x)(tiny)
    np.testing.assert_array_equal(got[0], 0)
    kept = ng.computation([x * 0.5, ng.assign(s, x * 0.5)], x, flush_denormals=False)(tiny)
    np.testing.assert_array_equal(kept[0], half)
    # the caller's arithmetic is its own again
    assert np.float32(1.5e-38) * np.float32(0.5) == half
