#!/usr/bin/env python3
"""Call a layer compiled ahead of time by nestc through the C ABI alone, with ctypes.

    bin/nestc samples/dense.nest -o dense.so && python3 samples/dense.py ./dense.so

dense(x: f32[64,256], w: f32[256,128], b: f32[128]) -> f32[64,128] is exported as
int dense(const float *x, const float *w, const float *b, float *result0) and as
int dense_call(void *const *args, void *const *results); both are called here and checked
against relu(x . w + b) computed in plain Python.
"""
import ctypes
import sys

B, I, O = 64, 256, 128


def main():
    lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "./dense.so")
    Floats = lambda n: ctypes.c_float * n
    x = Floats(B * I)(*[((i * 7) % 13 - 6) / 8 for i in range(B * I)])
    w = Floats(I * O)(*[((i * 5) % 11 - 5) / 16 for i in range(I * O)])
    b = Floats(O)(*[(j % 3 - 1) for j in range(O)])

    # the typed entry point
    out = Floats(B * O)()
    lib.dense.argtypes = [ctypes.POINTER(ctypes.c_float)] * 4
    lib.dense.restype = ctypes.c_int
    if lib.dense(x, w, b, out) != 0:
        sys.exit("dense failed")

    # the same through arrays of pointers
    out2 = Floats(B * O)()
    args = (ctypes.c_void_p * 3)(*[ctypes.cast(a, ctypes.c_void_p) for a in (x, w, b)])
    results = (ctypes.c_void_p * 1)(ctypes.cast(out2, ctypes.c_void_p))
    lib.dense_call.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.dense_call.restype = ctypes.c_int
    if lib.dense_call(args, results) != 0:
        sys.exit("dense_call failed")

    worst = 0.0
    for r in range(B):
        for c in range(O):
            z = b[c] + sum(x[r * I + k] * w[k * O + c] for k in range(I))
            want = max(z, 0.0)
            worst = max(worst, abs(want - out[r * O + c]), abs(want - out2[r * O + c]))
    print("dense via ctypes: sum of outputs %.4f, max error %.2g" % (sum(out), worst))
    sys.exit(0 if worst < 1e-3 else 1)


if __name__ == "__main__":
    main()
