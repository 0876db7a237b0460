#!/usr/bin/env python3
"""Calls the classifier that nestc compiled from ONNX with ctypes and numpy, and prints how far
it is from torch's output.

    python3 samples/onnx_run.py DIR      # DIR/classifier.so, DIR/x.npy, DIR/torch.npy
"""
import ctypes
import os
import sys

import numpy as np

d = sys.argv[1] if len(sys.argv) > 1 else "."
lib = ctypes.CDLL(os.path.abspath(os.path.join(d, "classifier.so")))
x = np.ascontiguousarray(np.load(os.path.join(d, "x.npy")), dtype=np.float32)
want = np.load(os.path.join(d, "torch.npy"))
probs = np.zeros((4, 10), dtype=np.float32)
ptr = ctypes.POINTER(ctypes.c_float)
lib.classifier.argtypes = [ptr, ptr]
if lib.classifier(x.ctypes.data_as(ptr), probs.ctypes.data_as(ptr)) != 0:
    sys.exit("classifier failed")
err = float(np.max(np.abs(probs - want) / np.maximum(np.abs(want), 1e-6)))
print("python: classifier(x) row 0 =", np.array2string(probs[0], precision=4))
print(f"python: largest relative difference from torch: {err:.2g}")
sys.exit(0 if err < 1e-4 else 1)
