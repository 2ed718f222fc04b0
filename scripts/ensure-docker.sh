#!/usr/bin/env bash
# Make sure a Docker engine is installed and running (idempotent, quiet on success).
#
# - installs Debian's docker.io (plus busybox-static, debootstrap, git, systemd, and chromium
#   for the browser tests; passwd, util-linux, iproute2 for the hardening tests) when missing;
#   all but docker.io through apt_quiet.py, which starts and enables no service they bring
# - starts dockerd detached when `docker info` fails (no systemd is assumed),
#   logging to /var/log/orbit-dockerd.log, and waits up to 60 s for it.
set -euo pipefail

LOG_FILE="${ORBIT_DOCKERD_LOG:-/var/log/orbit-dockerd.log}"
WAIT_SECONDS="${ORBIT_DOCKERD_WAIT:-60}"

die() {
    echo "ensure-docker: ERROR: $*" >&2
    exit 1
}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    fi
fi

# dockerd lives in /usr/sbin, which may be missing from a non-root PATH.
case ":$PATH:" in
    *:/usr/sbin:*) ;;
    *) PATH="$PATH:/usr/sbin:/sbin" ;;
esac
export PATH

have_busybox() {
    [ -x /usr/bin/busybox ] || [ -x /bin/busybox ]
}

# ---------------------------------------------------------------- install
missing=()
if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
    missing+=(docker.io)
fi
# busybox-static specifically (the dynamic busybox would not run in a scratch image).
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
    missing+=(busybox-static)
fi
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)  # verifies the supervisor units in tests
[ -x /usr/bin/chromium ] || missing+=(chromium)  # the browser tests (tests/test_web_e2e.py)
# The hardening tests: another real user (useradd, setpriv) and the web server's listen socket (ss).
command -v useradd >/dev/null 2>&1 || missing+=(passwd)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v ss >/dev/null 2>&1 || missing+=(iproute2)

if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and apt-get is not available to install them"
    echo "ensure-docker: installing ${missing[*]} ..."
    apt_log="$(mktemp)"
    # docker.io is installed as Debian has it (its engine starts, and at boot: what this script
    # is for); every other package through apt_quiet.py, which starts and enables none of the
    # services they bring (chromium's recommends bring avahi-daemon). Both wait for the dpkg
    # lock rather than failing when another apt run holds it.
    engine=() others=()
    for pkg in "${missing[@]}"; do
        if [ "$pkg" = docker.io ]; then engine+=("$pkg"); else others+=("$pkg"); fi
    done
    apt_quiet="$(dirname "${BASH_SOURCE[0]}")/apt_quiet.py"
    if ! { $SUDO apt-get -o DPkg::Lock::Timeout=300 update -q \
        && { [ "${#engine[@]}" -eq 0 ] || $SUDO env DEBIAN_FRONTEND=noninteractive \
            NEEDRESTART_MODE=l apt-get -o DPkg::Lock::Timeout=300 install -y -q "${engine[@]}"; } \
        && { [ "${#others[@]}" -eq 0 ] || $SUDO env NEEDRESTART_MODE=l \
            python3 "$apt_quiet" "${others[@]}"; }; } \
        >"$apt_log" 2>&1; then
        cat "$apt_log" >&2
        rm -f "$apt_log"
        die "apt-get install ${missing[*]} failed (output above)"
    fi
    rm -f "$apt_log"
    command -v docker >/dev/null 2>&1 || die "docker client still missing after installing docker.io"
    command -v dockerd >/dev/null 2>&1 || die "dockerd still missing after installing docker.io"
    have_busybox || die "busybox binary still missing after installing busybox-static"
fi

# ---------------------------------------------------------------- start
docker_ok() {
    $SUDO docker info >/dev/null 2>&1
}

if docker_ok; then
    exit 0
fi

if pidof dockerd >/dev/null 2>&1; then
    echo "ensure-docker: dockerd is running but not answering yet; waiting ..." >&2
else
    echo "ensure-docker: starting dockerd (log: $LOG_FILE) ..." >&2
    # A stale pid file from a dead dockerd makes a new one refuse to start.
    for pidfile in /var/run/docker.pid /run/docker.pid; do
        if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null; then
            $SUDO rm -f "$pidfile"
        fi
    done
    # The same holds for dockerd's managed containerd.
    cpid=/var/run/docker/containerd/containerd.pid
    if [ -f "$cpid" ] && ! kill -0 "$(cat "$cpid" 2>/dev/null)" 2>/dev/null; then
        $SUDO rm -f "$cpid"
    fi
    # Without systemd nobody may have mounted the (v1) cgroup hierarchies.
    if ! awk '$2 ~ "^/sys/fs/cgroup" { found = 1 } END { exit !found }' /proc/mounts \
        && command -v cgroupfs-mount >/dev/null 2>&1; then
        $SUDO cgroupfs-mount || echo "ensure-docker: warning: cgroupfs-mount failed" >&2
    fi
    $SUDO mkdir -p "$(dirname "$LOG_FILE")"
    $SUDO touch "$LOG_FILE"
    # Detach completely: new session, no stdin, output to the log.
    $SUDO setsid nohup dockerd >>"$LOG_FILE" 2>&1 </dev/null &
    disown || true
fi

deadline=$((SECONDS + WAIT_SECONDS))
until docker_ok; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "ensure-docker: ERROR: Docker engine did not come up within ${WAIT_SECONDS}s." >&2
        echo "ensure-docker: last lines of $LOG_FILE:" >&2
        tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
        echo "ensure-docker: 'docker info' says:" >&2
        $SUDO docker info 2>&1 | tail -n 5 >&2 || true
        exit 1
    fi
    sleep 1
done
echo "ensure-docker: dockerd is up." >&2
