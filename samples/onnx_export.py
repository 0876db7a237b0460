#!/usr/bin/env python3
"""Exports a small classifier from PyTorch (random weights) to ONNX, with an input batch and
torch's output beside it as .npy files, for samples/onnx_main.c and samples/onnx_run.py.

    python3 samples/onnx_export.py DIR    # DIR/classifier.onnx, DIR/x.npy, DIR/torch.npy
    bin/nestc DIR/classifier.onnx -o DIR/classifier.so
"""
import os
import sys
import warnings

import numpy as np
import torch

warnings.simplefilter("ignore")
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                            torch.nn.LayerNorm(128), torch.nn.Linear(128, 10),
                            torch.nn.Softmax(dim=1)).eval()
out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
x = torch.randn(4, 64)
torch.onnx.export(model, (x,), os.path.join(out, "classifier.onnx"), opset_version=13,
                  input_names=["x"], output_names=["probs"])
np.save(os.path.join(out, "x.npy"), x.numpy())
with torch.no_grad():
    np.save(os.path.join(out, "torch.npy"), model(x).numpy())
