"""Named axes: alignment and broadcasting by name, orders, slices by axis, concatenation, and
the errors of axes that do not fit."""
import numpy as np
import pytest

import nest as ng

rng = np.random.default_rng(11)
C, H, W, N = (ng.make_axis(length=n, name=s) for n, s in ((2, "C"), (3, "H"), (4, "W"), (5, "N")))


def data(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def run(result, *pairs):
    return ng.computation(result, *[p for p, _ in pairs])(*[a for _, a in pairs])


def test_make_axis_and_axes():
    assert C.name == "C" and C.length == 2
    assert ng.make_axes([C, H]).names == ("C", "H")
    assert ng.make_axes([C, H]).lengths == (2, 3)
    assert ng.make_axis(length=2, name="C") == C
    assert ng.make_axis(length=3, name="C") != C
    a, b = ng.make_axis(length=4), ng.make_axis(length=4)
    assert a.name != b.name  # unnamed axes are distinct
    assert ng.make_axes([C, H, W]) - ng.make_axes([H]) == ng.make_axes([C, W])
    assert ng.make_axes([C, H]) + ng.make_axes([W, C]) == ng.make_axes([C, H, W])
    assert ng.make_axes([C, H, W]) & ng.make_axes([W, C]) == ng.make_axes([C, W])
    with pytest.raises(ng.AxisError, match="appears twice"):
        ng.make_axes([C, H, C])
    with pytest.raises(ng.AxisError):
        ng.make_axis(length=-1, name="X")
    with pytest.raises(ng.AxisError, match="a name alone for a symbolic axis"):
        ng.make_axis()
    assert ng.make_axis(name="X").symbolic and not C.symbolic  # no length: symbolic


def test_the_seed_example_chwn_minus_wh_is_rank_4():
    a, b = ng.placeholder([C, H, W, N]), ng.placeholder([W, H])
    d = a - b
    assert d.axes == ng.make_axes([C, H, W, N])
    x, y = data(2, 3, 4, 5), data(4, 3)
    np.testing.assert_allclose(run(d, (a, x), (b, y)), x - y.T[None, :, :, None], rtol=1e-6)


def test_same_axes_in_another_order_align():
    a, b = ng.placeholder([N, W, H]), ng.placeholder([H, N, W])
    x, y = data(5, 4, 3), data(3, 5, 4)
    got = run([a + b, b * a], (a, x), (b, y))
    np.testing.assert_allclose(got[0], x + y.transpose(1, 2, 0), rtol=1e-6)
    np.testing.assert_allclose(got[1], (y.transpose(1, 2, 0) * x).transpose(2, 0, 1), rtol=1e-6)
    assert (b * a).axes == ng.make_axes([H, N, W])


def test_disjoint_axes_broadcast_both_ways():
    a, b = ng.placeholder([H]), ng.placeholder([W, C])
    x, y = data(3), data(4, 2)
    r = a * b
    assert r.axes == ng.make_axes([H, W, C])
    np.testing.assert_allclose(run(r, (a, x), (b, y)), x[:, None, None] * y[None], rtol=1e-6)


def test_scalar_tensor_broadcasts():
    a, s = ng.placeholder([C, H]), ng.placeholder([])
    x = data(2, 3)
    got = run(a - s, (a, x), (s, np.float32(1.5)))
    np.testing.assert_allclose(got, x - 1.5, rtol=1e-6)


def test_a_name_with_two_lengths_is_an_error_naming_both():
    H4 = ng.make_axis(length=4, name="H")
    a, b = ng.placeholder([C, H], name="a"), ng.placeholder([H4], name="b")
    with pytest.raises(ng.AxisError) as e:
        a + b
    msg = str(e.value)
    assert "H" in msg and "3" in msg and "4" in msg and "a:" in msg and "b:" in msg
    with pytest.raises(ng.AxisError):
        ng.dot(a, b)
    with pytest.raises(ng.AxisError):
        ng.make_axes([C, H]) + ng.make_axes([H4])


def test_axes_with_order_and_transpose():
    a = ng.placeholder([C, H, W])
    x = data(2, 3, 4)
    got = run([ng.axes_with_order(a, [W, C, H]), ng.axes_with_order(a, ["H", "W", "C"]),
               ng.transpose(a), a.T], (a, x))
    np.testing.assert_array_equal(got[0], x.transpose(2, 0, 1))
    np.testing.assert_array_equal(got[1], x.transpose(1, 2, 0))
    np.testing.assert_array_equal(got[2], x.transpose(2, 1, 0))
    np.testing.assert_array_equal(got[3], x.transpose(2, 1, 0))
    with pytest.raises(ng.AxisError):
        ng.axes_with_order(a, [W, C])
    with pytest.raises(ng.AxisError):
        ng.axes_with_order(a, [W, C, N])


def test_broadcast_and_cast_axes():
    a = ng.placeholder([H])
    x = data(3)
    got = run([ng.broadcast(a, [C, H, W]), ng.cast_axes(a, [ng.make_axis(length=3, name="K")])],
              (a, x))
    np.testing.assert_array_equal(got[0], np.broadcast_to(x[None, :, None], (2, 3, 4)))
    np.testing.assert_array_equal(got[1], x)
    with pytest.raises(ng.AxisError):
        ng.broadcast(a, [C, W])
    with pytest.raises(ng.AxisError):
        ng.cast_axes(a, [C])


def test_slices_by_position_and_by_axis():
    a = ng.placeholder([C, H, W])
    x = data(2, 3, 4)
    got = run([a[1], a[:, 1:], a[..., ::2], a[{W: slice(1, 3)}], a[{"H": 0, "W": -1}],
               a[0, 2, 3], a[:, :, 1:] - a[:, :, :-1]], (a, x))
    np.testing.assert_array_equal(got[0], x[1])
    np.testing.assert_array_equal(got[1], x[:, 1:])
    np.testing.assert_array_equal(got[2], x[..., ::2])
    np.testing.assert_array_equal(got[3], x[:, :, 1:3])
    np.testing.assert_array_equal(got[4], x[:, 0, -1])
    np.testing.assert_array_equal(got[5], x[0, 2, 3])
    np.testing.assert_allclose(got[6], np.diff(x, axis=2), rtol=1e-6)
    assert a[:, 1:].axes.lengths == (2, 2, 4) and a[:, 1:].axes.names == ("C", "H", "W")
    assert a[1].axes == ng.make_axes([H, W])
    with pytest.raises(IndexError):
        a[2]
    with pytest.raises(IndexError):
        a[0, 0, 0, 0]
    with pytest.raises(ValueError):
        a[::-1]
    with pytest.raises(ng.AxisError):
        a[{N: 0}]


def test_empty_slice():
    a = ng.placeholder([W])
    got = run(ng.sum(a[3:1]), (a, data(4)))
    assert got == 0


def test_concat_along_axis():
    H2 = ng.make_axis(length=2, name="H")
    a, b = ng.placeholder([C, H]), ng.placeholder([H2, C])
    x, y = data(2, 3), data(2, 2)
    r = ng.concat_along_axis([a, b], H)
    assert r.axes.names == ("C", "H") and r.axes.lengths == (2, 5)
    np.testing.assert_array_equal(run(r, (a, x), (b, y)), np.concatenate([x, y.T], axis=1))
    with pytest.raises(ng.AxisError):
        ng.concat_along_axis([a, ng.placeholder([H, W])], H)


def test_reductions_name_their_axes():
    a = ng.placeholder([C, H, W])
    assert ng.sum(a, reduction_axes=[H]).axes == ng.make_axes([C, W])
    assert ng.sum(a, out_axes=[W, C]).axes == ng.make_axes([W, C])
    with pytest.raises(ng.AxisError, match="not an axis"):
        ng.sum(a, reduction_axes=[N])
    with pytest.raises(ng.AxisError, match="not a length"):
        ng.sum(a, reduction_axes=[ng.make_axis(length=9, name="H")])


def test_flatten_and_unflatten_axes():
    a = ng.placeholder([N, C, H, W])
    x = data(5, 2, 3, 4)
    f = ng.flatten_axes(a, [C, H, W], "F")
    assert f.axes.names == ("N", "F") and f.axes.lengths == (5, 24)
    g = ng.flatten_axes(a, ["W", "C"], ng.make_axis(length=8, name="WC"))
    assert g.axes.names == ("N", "WC", "H")
    back = ng.unflatten_axes(f, "F", [C, H, W])
    got = run([f, g, back], (a, x))
    np.testing.assert_array_equal(got[0], x.reshape(5, 24))
    np.testing.assert_array_equal(got[1], x.transpose(0, 3, 1, 2).reshape(5, 8, 3))
    np.testing.assert_array_equal(got[2], x)
    with pytest.raises(ng.AxisError, match="length 24"):
        ng.flatten_axes(a, [C, H, W], ng.make_axis(length=7, name="F"))
    with pytest.raises(ng.AxisError):
        ng.unflatten_axes(f, "F", [C, H])


def test_dot_with_batch_axes():
    M, K, P = (ng.make_axis(length=n, name=s) for n, s in ((3, "M"), (4, "K"), (2, "P")))
    a, b = ng.placeholder([N, M, K]), ng.placeholder([K, P, N])
    x, y = data(5, 3, 4), data(4, 2, 5)
    r = ng.dot(a, b, batch_axes=[N])
    assert r.axes.names == ("N", "M", "P")
    np.testing.assert_allclose(run(r, (a, x), (b, y)), np.einsum("nmk,kpn->nmp", x, y),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ng.AxisError):
        ng.dot(a, ng.placeholder([K]), batch_axes=[N])


def test_dot_with_batch_axes_tiled_or_differentiated():
    # two batch axes, two shared ones, axes in scattered orders; without a derivative in the
    # computation it is nest's batch_dot, with one the summed products (which have gradients)
    M, K, P, Q = (ng.make_axis(length=n, name=s) for n, s in ((3, "M"), (4, "K"), (2, "P"),
                                                               (6, "Q")))
    T = ng.make_axis(length=2, name="T")
    a, b = ng.placeholder([K, N, M, T, Q], np.float64), ng.placeholder([T, Q, P, N, K],
                                                                       np.float64)
    x, y = data(4, 5, 3, 2, 6).astype(np.float64), data(2, 6, 2, 5, 4).astype(np.float64)
    r = ng.dot(a, b, batch_axes=[T, "N"])
    assert r.axes.names == ("T", "N", "M", "P")
    want = np.einsum("knmtq,tqpnk->tnmp", x, y)
    tiled = ng.computation(r, a, b)
    assert "batch_dot" in tiled.ir()
    np.testing.assert_allclose(tiled(x, y), want, rtol=1e-12)
    loss = ng.sum(r * r)
    grads = ng.computation([r, ng.deriv(loss, a)], a, b)
    assert "batch_dot" not in grads.ir()
    got = grads(x, y)
    np.testing.assert_allclose(got[0], want, rtol=1e-12)
    np.testing.assert_allclose(got[1], 2 * np.einsum("tnmp,tqpnk->knmtq", want, y),
                               rtol=1e-12)
