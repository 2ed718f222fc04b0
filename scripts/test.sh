#!/usr/bin/env bash
# The test command (what CI runs through .ci/run), in two tiers (docs/testing.md):
#
#   bash scripts/test.sh [PYTEST ARGS]         the whole suite: install the package with its dev
#                                              extra, make sure Docker, the test images, sshd and
#                                              Slurm are there, lint/type-check, run every test
#   bash scripts/test.sh --fast [PYTEST ARGS]  lint/type-check and every test that needs no
#                                              Docker, sshd, Slurm or Chromium and is not slow
#                                              (about a minute); installs and starts nothing
#
# Neither stops at the first failure: pytest runs on (up to MAXFAIL failures, default 100, so a
# broken engine does not take hours) and the summary at the end lists every failed test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

banner() {
    echo
    echo "==> [orbit test] $*"
}

PYTHON="${PYTHON:-python3}"
MAXFAIL="${MAXFAIL:-100}"
# The markers of pyproject.toml; tests/conftest.py sets docker, sshd and slurm from the fixtures.
FAST_TIER="not docker and not sshd and not slurm and not chromium and not slow"

FAST=0
if [ "${1:-}" = "--fast" ]; then
    FAST=1
    shift
fi

install_package() {
    banner "pip install -e '.[dev]'"
    local pip_args=(-m pip install -q --disable-pip-version-check -e '.[dev]')
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
}

# Harbor's ATIF models for tests/test_atif.py (docs/agents.md "Trajectories (ATIF)"): without its
# dependencies (pydantic comes with Orbit's own, for orbit mcp), as its metadata asks for Python
# 3.12 and its trajectory models import fine on 3.11.
install_harbor() {
    banner "pip install --no-deps harbor==0.26.0 (Harbor's ATIF models, for tests/test_atif.py)"
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --ignore-requires-python \
        harbor==0.26.0 || "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps \
        --ignore-requires-python --break-system-packages harbor==0.26.0
}

ensure_services() {
    banner "ensure Docker engine (scripts/ensure-docker.sh)"
    bash scripts/ensure-docker.sh

    banner "build local test images (scripts/build-test-images.sh)"
    bash scripts/build-test-images.sh

    # The real Claude Code and Codex CLIs are installed from the npm registry by their test.
    # Every apt install below goes through scripts/apt_quiet.py: it starts no service and enables
    # none at boot (the tests start their own sshd, munged and slurmd; see docs/testing.md).
    if ! command -v npm >/dev/null 2>&1; then
        banner "apt install nodejs npm (for the agent CLIs' test)"
        "$PYTHON" scripts/apt_quiet.py --no-install-recommends nodejs npm >/dev/null
    fi

    # The node tests start their own sshd on loopback (tests/node_setup.py); ssh.service is
    # neither started nor enabled.
    if [ ! -x /usr/sbin/sshd ]; then
        banner "apt install openssh-server (for the node tests' sshd)"
        "$PYTHON" scripts/apt_quiet.py --no-install-recommends openssh-server >/dev/null
    fi

    # tests/test_slurm.py starts a real cluster from Debian's packages (tests/slurm_setup.py).
    if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ] \
        || ! command -v sbatch >/dev/null 2>&1; then
        banner "apt install slurmctld slurmd slurm-client munge (for the Slurm tests)"
        "$PYTHON" scripts/apt_quiet.py --no-install-recommends \
            slurmctld slurmd slurm-client munge >/dev/null
    fi
}

# Each check runs even when one before it failed; the failed ones are named at the end.
FAILED=()
check() {
    banner "$*"
    "$@" || FAILED+=("$*")
}

lint() {
    check "$PYTHON" -m ruff check .
    check "$PYTHON" -m ruff format --check .
    check "$PYTHON" -m mypy orbit
}

# pytest ARGS...: every failure and error is listed in pytest's summary at its end (-ra in
# pyproject.toml); exit 5 (no test collected) counts as a failure.
PYTEST_RC=0
run_pytest() {
    banner "pytest -q --maxfail=$MAXFAIL --durations=15 $*"
    "$PYTHON" -m pytest -q --maxfail="$MAXFAIL" --durations=15 "$@" || PYTEST_RC=$?
    if [ "$PYTEST_RC" -eq 5 ]; then
        FAILED+=("pytest collected no tests (exit code 5); treating as failure")
    elif [ "$PYTEST_RC" -ne 0 ]; then
        FAILED+=("pytest failed with exit code $PYTEST_RC (its summary above lists each failure)")
    fi
}

if [ "$FAST" -eq 1 ]; then
    # Nothing is installed in this tier: this checkout's orbit comes first, also for the
    # `python -m orbit` processes the tests start.
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    for tool in pytest ruff mypy; do
        if ! "$PYTHON" -m "$tool" --version >/dev/null 2>&1; then
            echo "ERROR: no $tool for $PYTHON: install the dev extra (pip install -e '.[dev]'," \
                "or run bash scripts/test.sh once)" >&2
            exit 1
        fi
    done
    lint
    # No engine answers here: a test that reaches Docker without its marker fails in this tier
    # instead of passing by luck (and nothing can start a dockerd for it).
    DOCKER_HOST="unix:///nonexistent/orbit-fast-tier.sock" run_pytest -m "$FAST_TIER" "$@"
else
    install_package
    install_harbor
    ensure_services
    lint
    run_pytest "$@"
fi
if [ "${#FAILED[@]}" -gt 0 ]; then
    printf 'ERROR: %s\n' "${FAILED[@]}" >&2
    [ "$PYTEST_RC" -ne 0 ] && exit "$PYTEST_RC"
    exit 1
fi
banner "all checks passed"
