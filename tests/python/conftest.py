"""pytest setup for the Python front end: the package is imported from python/ in this tree."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
