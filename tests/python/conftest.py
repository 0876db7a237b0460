"""pytest setup for the Python front end: the package is imported from python/ in this tree,
the helpers of the training tests from tests/."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
