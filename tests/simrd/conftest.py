import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
path = os.path.join(ROOT, "tools", "simrd")
if path not in sys.path:
    sys.path.insert(0, path)
