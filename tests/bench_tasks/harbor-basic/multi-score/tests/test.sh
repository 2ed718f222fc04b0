#!/bin/bash
python3 - <<'PY'
import json
try:
    got = open("/work/squares.txt").read().split()
except OSError:
    got = []
want = ["1", "4", "9", "16", "25"]
right = sum(1 for a, b in zip(got, want) if a == b)
json.dump({"accuracy": right / len(want), "complete": 1.0 if len(got) == 5 else 0.0, "lines": len(got)},
          open("/logs/verifier/reward.json", "w"))
PY
