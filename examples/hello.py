"""A first experiment: logs, metrics and an output file, the way Orbit records them."""

import json
import math
import os
import time

metrics_path = os.environ.get("ORBIT_METRICS", "metrics.jsonl")
output_dir = os.environ.get("ORBIT_OUTPUT", "output")
os.makedirs(output_dir, exist_ok=True)

print(f"hello from orbit run {os.environ.get('ORBIT_RUN_ID', '?')}", flush=True)
loss = 1.0
for step in range(1, 21):
    loss = 0.9 * loss + 0.02 * math.sin(step)
    with open(metrics_path, "a") as fh:
        fh.write(json.dumps({"step": step, "loss": round(loss, 4)}) + "\n")
    if step % 5 == 0:
        print(f"step {step}: loss {loss:.4f}", flush=True)
    time.sleep(0.05)

with open(os.path.join(output_dir, "result.json"), "w") as fh:
    json.dump({"final_loss": round(loss, 4)}, fh)
print("done; result in $ORBIT_OUTPUT/result.json", flush=True)
