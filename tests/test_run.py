#!/usr/bin/python3
"""`nestc run` against numpy: inputs written by numpy (np.save, also Fortran-ordered and
big-endian arrays), results read back by numpy (np.load, no pickles) and compared with what
numpy computes from the same inputs; a .nest file and an ONNX model made with onnx.helper.

    NESTC=bin/nestc /usr/bin/python3 tests/test_run.py
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

NESTC = os.environ.get("NESTC", "bin/nestc")

GRAPHS = """
func dense(x: f32[8,16], w: f32[16,4], b: f32[4]) -> f32[8,4] {
  z = add(dot(x, w), broadcast(b, shape=[8,4], axes=[0]))
  return maximum(z, broadcast(constant(f32[], 0), shape=[8,4], axes=[0,1]))
}

func stats(v: f64[5,7]) -> (f64[7], f64[], f64[7,5] col) {
  return sum(exp(v), axes=[0]), max(v, axes=[0,1]), reshape(v, order=[1,0], shape=[7,5])
}

func ints(a: i32[6], b: i64[2,3]) -> (i32[6], i64[3], bool[6]) {
  m = multiply(a, a)
  return subtract(m, a), sum(b, axes=[0]), less(a, m)
}

func mask(c: bool[4], x: f32[4]) -> f32[4] {
  return select(c, x, negative(x))
}
"""

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(tmp, func, inputs, extra=()):
    """Saves the inputs, runs nestc run, loads the results it wrote."""
    args = [NESTC, "run", os.path.join(tmp, "g.nest"), "--func", func,
            "--out", os.path.join(tmp, "out")]
    for name, arr in inputs.items():
        path = os.path.join(tmp, name + ".npy")
        np.save(path, arr)
        args += ["--in", name + "=" + path]
    p = subprocess.run(args + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        return p, None
    results = []
    while os.path.exists(os.path.join(tmp, "out", "%s.%d.npy" % (func, len(results)))):
        results.append(np.load(os.path.join(tmp, "out", "%s.%d.npy" % (func, len(results))),
                               allow_pickle=False))
    return p, results


def run_onnx(tmp, rng):
    from onnx import TensorProto, helper, numpy_helper
    w = rng.standard_normal((5, 3), dtype=np.float32)
    b = rng.standard_normal(3, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"]),
         helper.make_node("Add", ["XW", "B"], ["Z"]),
         helper.make_node("Relu", ["Z"], ["Y"])],
        "dense",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(tmp, "layer.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    x = rng.standard_normal((4, 5), dtype=np.float32)
    np.save(os.path.join(tmp, "X.npy"), x)
    out = os.path.join(tmp, "onnx-out")
    p = subprocess.run([NESTC, "run", path, "--dim", "batch=4", "--in",
                        "X=" + os.path.join(tmp, "X.npy"), "--out", out, "--check"],
                       capture_output=True, text=True)
    check(p.returncode == 0, "onnx: exit %d: %s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        y = np.load(os.path.join(out, "layer.0.npy"), allow_pickle=False)
        want = np.maximum(x.astype(np.float64) @ w + b, 0)
        check(y.shape == (4, 3) and np.allclose(y, want, rtol=1e-5, atol=1e-6), "onnx: values")
        check("check: layer.0 matches" in p.stdout, "onnx: check")
    # without --dim the batch stays symbolic: its size comes from X.npy (here 6 rows)
    x6 = rng.standard_normal((6, 5), dtype=np.float32)
    np.save(os.path.join(tmp, "X6.npy"), x6)
    out6 = os.path.join(tmp, "onnx-out6")
    p = subprocess.run([NESTC, "run", path, "--in", "X=" + os.path.join(tmp, "X6.npy"), "--out",
                        out6, "--check"], capture_output=True, text=True)
    check(p.returncode == 0, "onnx, batch from --in: exit %d: %s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        y = np.load(os.path.join(out6, "layer.0.npy"), allow_pickle=False)
        want = np.maximum(x6.astype(np.float64) @ w + b, 0)
        check(y.shape == (6, 3) and np.allclose(y, want, rtol=1e-5, atol=1e-6),
              "onnx, batch from --in: values")
    # with neither --dim nor an array that gives it, the size is asked for
    p = subprocess.run([NESTC, "run", path, "--random"], capture_output=True, text=True)
    check(p.returncode == 2 and "batch" in p.stderr and "--dim" in p.stderr,
          "onnx without --dim: %d %r" % (p.returncode, p.stderr))


def main():
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "g.nest"), "w") as f:
            f.write(GRAPHS)

        # f32: relu(x . w + b), the inputs in C order, Fortran order and big-endian
        x = rng.standard_normal((8, 16), dtype=np.float32)
        w = np.asfortranarray(rng.standard_normal((16, 4), dtype=np.float32))
        b = rng.standard_normal(4).astype(">f4")
        p, res = run(tmp, "dense", {"x": x, "w": w, "b": b}, ["--check"])
        check(p.returncode == 0, "dense: exit %d: %s" % (p.returncode, p.stderr))
        if res:
            want = np.maximum(x.astype(np.float64) @ w + b.astype(np.float64), 0)
            check(len(res) == 1 and res[0].dtype == np.float32 and res[0].shape == (8, 4),
                  "dense: result type %s %s" % (res[0].dtype, res[0].shape))
            check(np.allclose(res[0], want, rtol=1e-5, atol=1e-5), "dense: values")
            # the summary's min, max and mean are numpy's (to the 7 digits printed)
            m = re.search(r"dense\.0: f32\[8,4\]  min (\S+)  max (\S+)  mean (\S+)", p.stdout)
            check(m is not None, "dense: summary line in %r" % p.stdout)
            if m:
                lo, hi, mean = (float(g) for g in m.groups())
                check(abs(lo - res[0].min()) <= 1e-6 * max(1, abs(lo)), "dense: min")
                check(abs(hi - res[0].max()) <= 1e-6 * max(1, abs(hi)), "dense: max")
                check(abs(mean - res[0].astype(np.float64).mean()) <= 1e-6 * max(1, abs(mean)),
                      "dense: mean")
            check("check: dense.0 matches the reference interpreter" in p.stdout, "dense: check")

        # f64 with a scalar and a column-major result
        v = rng.standard_normal((5, 7))
        p, res = run(tmp, "stats", {"v": v})
        check(p.returncode == 0, "stats: exit %d: %s" % (p.returncode, p.stderr))
        if res:
            check([r.dtype for r in res] == [np.float64] * 3, "stats: dtypes")
            check([r.shape for r in res] == [(7,), (), (7, 5)], "stats: shapes")
            check(np.allclose(res[0], np.exp(v).sum(axis=0), rtol=1e-12), "stats: sum of exp")
            check(res[1] == v.max(), "stats: max")
            check(np.array_equal(res[2], v.T), "stats: the transpose, column-major")
            check(res[2].flags.f_contiguous, "stats: a column-major result is Fortran-ordered")

        # integers wrap as numpy's do; bool results
        a = np.array([3, -2, 0, 46341, -7, 1], dtype=np.int32)
        bb = rng.integers(-2**40, 2**40, (2, 3), dtype=np.int64)
        p, res = run(tmp, "ints", {"a": a, "b": bb})
        check(p.returncode == 0, "ints: exit %d: %s" % (p.returncode, p.stderr))
        if res:
            with np.errstate(over="ignore"):
                m = a * a
            check(res[0].dtype == np.int32 and np.array_equal(res[0], m - a), "ints: a*a - a")
            check(res[1].dtype == np.int64 and np.array_equal(res[1], bb.sum(axis=0)), "ints: sum")
            check(res[2].dtype == np.bool_ and np.array_equal(res[2], a < m), "ints: less")

        c = np.array([True, False, True, False])
        xs = np.array([1.5, 2, -3, 4], dtype=np.float32)
        p, res = run(tmp, "mask", {"c": c, "x": xs})
        check(p.returncode == 0, "mask: exit %d: %s" % (p.returncode, p.stderr))
        if res:
            check(np.array_equal(res[0], np.where(c, xs, -xs)), "mask: select")

        # numpy's default float64 for an f32 parameter: a clear error, nothing written
        p, res = run(tmp, "mask", {"c": c, "x": xs.astype(np.float64)})
        check(p.returncode == 1, "mask with float64: exit %d" % p.returncode)
        check("the file holds f64[4] (convert it with .astype(numpy.float32))" in p.stderr,
              "mask with float64: message %r" % p.stderr)

        # an ONNX model: relu(X . W + B) with W and B initializers and a named batch dimension
        run_onnx(tmp, rng)

    if failures:
        print("test_run.py: %d failure(s)" % len(failures))
        return 1
    print("test_run.py: nestc run agrees with numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
