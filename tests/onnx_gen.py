"""Writes the ONNX backend node tests (model.onnx, inputs and expected outputs as .pb) into
DIR/node with python3-onnx's own generators, and beside each case's model a file `operator`
naming the operator the case tests (its expanded form, CASE_expanded, tests the same one).
Debian's numpy 1.24 removed np.float, np.int, np.bool and np.object, which onnx 1.12's
generators still use: they are the builtins again."""
import os
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
import onnx.backend.test.case.node as node_cases  # noqa: E402

tested = {}
expect = node_cases.expect


def recording_expect(node, inputs, outputs, name, **kwargs):
    tested[name] = tested[name + "_expanded"] = node.op_type
    return expect(node, inputs, outputs, name, **kwargs)


node_cases.expect = recording_expect
out = sys.argv[1]
sys.argv = ["cmd_tools", "generate-data", "-o", out]
cmd_tools.main()
for name, op in tested.items():
    case = os.path.join(out, "node", name)
    if os.path.isdir(case):
        with open(os.path.join(case, "operator"), "w") as f:
            f.write(op + "\n")
