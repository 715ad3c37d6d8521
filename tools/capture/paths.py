"""Puts tools/importers (the trace reader and writer, the cost model) on the import path."""

import os
import sys

IMPORTERS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "importers"))
if IMPORTERS not in sys.path:
    sys.path.insert(0, IMPORTERS)
