#!/bin/bash
python3 - <<'PY'
import json, os
out = open("/app/out.txt").read().strip() if os.path.exists("/app/out.txt") else None
isolated = not os.path.exists("/app/scratch.txt") and not os.path.exists("/app/base.txt")
logs = os.path.exists("/logs/artifacts/notes.txt")
json.dump({"reward": 1.0 if out == "42" and isolated and logs else 0.0,
           "artifact": 1.0 if out == "42" else 0.0,
           "isolated": 1.0 if isolated else 0.0,
           "logs": 1.0 if logs else 0.0},
          open("/logs/verifier/reward.json", "w"))
PY
