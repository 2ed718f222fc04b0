#!/usr/bin/env bash
# The whole test command (what CI runs through .ci/run):
#   install the package with its dev extra, make sure Docker and the test images
#   are there, lint/type-check, then run pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

banner() {
    echo
    echo "==> [orbit test] $*"
}

PYTHON="${PYTHON:-python3}"

# ------------------------------------------------------------------ install
banner "pip install -e '.[dev]'"
pip_args=(-m pip install -q --disable-pip-version-check -e '.[dev]')
pip_log="$(mktemp)"
trap 'rm -f "$pip_log"' EXIT
if ! "$PYTHON" -m pip install --help >/dev/null 2>&1; then
    echo "ERROR: '$PYTHON -m pip' is not available" >&2
    exit 1
fi
if ! "$PYTHON" "${pip_args[@]}" >"$pip_log" 2>&1; then
    if grep -q 'externally-managed-environment' "$pip_log"; then
        echo "(externally managed Python: retrying with --break-system-packages)"
        "$PYTHON" "${pip_args[@]}" --break-system-packages
    else
        cat "$pip_log" >&2
        echo "ERROR: pip install failed" >&2
        exit 1
    fi
else
    cat "$pip_log"
fi

# ------------------------------------------------------------------- docker
banner "ensure Docker engine (scripts/ensure-docker.sh)"
bash scripts/ensure-docker.sh

banner "build local test images (scripts/build-test-images.sh)"
bash scripts/build-test-images.sh

# ------------------------------------------------------------ node and npm
# The real Claude Code and Codex CLIs are installed from the npm registry by their test.
# Every apt install below goes through scripts/apt_quiet.py: it starts no service and enables
# none at boot (the tests start their own sshd, munged and slurmd; see docs/testing.md).
if ! command -v npm >/dev/null 2>&1; then
    banner "apt install nodejs npm (for the agent CLIs' test)"
    "$PYTHON" scripts/apt_quiet.py --no-install-recommends nodejs npm >/dev/null
fi

# ------------------------------------------------------------------- sshd
# The node tests start their own sshd on loopback (tests/node_setup.py); ssh.service is neither
# started nor enabled.
if [ ! -x /usr/sbin/sshd ]; then
    banner "apt install openssh-server (for the node tests' sshd)"
    "$PYTHON" scripts/apt_quiet.py --no-install-recommends openssh-server >/dev/null
fi

# -------------------------------------------------------------------- slurm
# tests/test_slurm.py starts a real cluster from Debian's packages (tests/slurm_setup.py).
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ] \
    || ! command -v sbatch >/dev/null 2>&1; then
    banner "apt install slurmctld slurmd slurm-client munge (for the Slurm tests)"
    "$PYTHON" scripts/apt_quiet.py --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null
fi

# --------------------------------------------------------------------- lint
banner "ruff check ."
"$PYTHON" -m ruff check .

banner "ruff format --check ."
"$PYTHON" -m ruff format --check .

banner "mypy orbit"
"$PYTHON" -m mypy orbit

# ------------------------------------------------------------------- pytest
banner "pytest -q -x --durations=15 $*"
rc=0
"$PYTHON" -m pytest -q -x --durations=15 "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "ERROR: pytest collected no tests (exit code 5); treating as failure." >&2
    exit 5
elif [ "$rc" -ne 0 ]; then
    echo "ERROR: pytest failed with exit code $rc." >&2
    exit "$rc"
fi
banner "all checks passed"
