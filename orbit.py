#!/usr/bin/env python3
"""Run the Orbit CLI from a checkout: `python orbit.py …` (only the dependencies are needed)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from orbit.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
