"""Writes the ONNX backend node tests (model.onnx, inputs and expected outputs as .pb) into
DIR/node with python3-onnx's own generators. Debian's numpy 1.24 removed np.float, np.int,
np.bool and np.object, which onnx 1.12's generators still use: they are the builtins again."""
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
for name, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    try:
        getattr(np, name)
    except AttributeError:
        setattr(np, name, builtin)

from onnx.backend.test import cmd_tools  # noqa: E402

sys.argv = ["cmd_tools", "generate-data", "-o", sys.argv[1]]
cmd_tools.main()
