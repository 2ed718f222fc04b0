#!/usr/bin/env python3
"""Run the Orbit CLI from a checkout: `python orbit.py …` (only the dependencies are needed)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from orbit.__main__ import entry

if __name__ == "__main__":
    entry()
