#!/usr/bin/env bash
# Set up Orbit on this machine and run a first experiment end to end, then show its record.
# Works offline: the Python image is built locally (debootstrap + docker import), never pulled.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"

echo "==> installing Orbit (pip install -e .)"
"$PYTHON" -m pip install -q --disable-pip-version-check -e . 2>/dev/null \
    || "$PYTHON" -m pip install -q --disable-pip-version-check -e . --break-system-packages
echo "==> making sure the Docker engine runs"
bash scripts/ensure-docker.sh
echo "==> building the local images (orbit/python:local) if missing"
bash scripts/build-test-images.sh

orbit() { "$PYTHON" -m orbit "$@"; }
echo "==> orbit doctor"
orbit doctor || true
echo "==> orbit run -w … python3 examples/hello.py"
out=$(orbit run --image orbit/python:local --cpus 1 --mem 1 -n hello -t example=quickstart \
    --json -- python3 examples/hello.py)
id=$("$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$out")
orbit logs "$id" -f
orbit wait "$id"
echo "==> orbit show $id"
orbit show "$id"
dir=$("$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["dir"])' <<<"$(orbit show "$id" --json)")
echo "==> the record: $dir"
ls -l "$dir" "$dir/output"
echo "==> orbit ps -a"
orbit ps -a
