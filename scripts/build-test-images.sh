#!/usr/bin/env bash
# Build the small local images the test-suite runs (Docker Hub is not reachable,
# so nothing is pulled: both images are made from local files with `docker import`).
#
#   orbit-test/busybox:1  FROM-scratch image: static busybox + applet symlinks
#   orbit-test/python:3   debootstrap'ed minimal Debian with python3-minimal
#                         (also tagged orbit/python:local)
#
# Idempotent: an image whose tag already exists (and carries this script's recipe
# label) is left alone; an image under the tag with another or no recipe label
# (stale, or made by hand) is rebuilt. The python rootfs tarball is cached in
# ${ORBIT_TEST_CACHE:-$HOME/.cache/orbit-test}, so a rebuild after `docker rmi`
# skips debootstrap.
#
# Environment:
#   ORBIT_TEST_CACHE          cache directory (default ~/.cache/orbit-test)
#   ORBIT_TEST_MIRROR         Debian mirror URL (default: read from apt sources)
#   ORBIT_TEST_SUITE          Debian suite to debootstrap (default bookworm)
#   ORBIT_TEST_BUSYBOX_IMAGE  tag override (default orbit-test/busybox:1)
#   ORBIT_TEST_PYTHON_IMAGE   tag override (default orbit-test/python:3)
#   ORBIT_PYTHON_ALIAS_IMAGE  extra tag of the python image (default orbit/python:local)
#   ORBIT_TEST_PYTHON_PACKAGES  packages debootstrap adds (default python3-minimal,python3;
#                             python3-minimal alone lacks most of the stdlib, e.g. json)
set -euo pipefail

BUSYBOX_IMAGE="${ORBIT_TEST_BUSYBOX_IMAGE:-orbit-test/busybox:1}"
PYTHON_IMAGE="${ORBIT_TEST_PYTHON_IMAGE:-orbit-test/python:3}"
PYTHON_ALIAS="${ORBIT_PYTHON_ALIAS_IMAGE:-orbit/python:local}"
SUITE="${ORBIT_TEST_SUITE:-bookworm}"
PYTHON_PACKAGES="${ORBIT_TEST_PYTHON_PACKAGES:-python3-minimal,python3}"
CACHE_DIR="${ORBIT_TEST_CACHE:-${HOME:-/root}/.cache/orbit-test}"
PYTHON_TARBALL="$CACHE_DIR/python-rootfs.tar"

# Bump a recipe when the way its image is made changes: images (and the cached
# tarball) of another recipe are then rebuilt.
RECIPE_LABEL="org.orbit.test-image.recipe"
BUSYBOX_RECIPE="busybox-2"
PYTHON_RECIPE="python-2:$SUITE:$PYTHON_PACKAGES"

case ":$PATH:" in
    *:/usr/sbin:*) ;;
    *) PATH="$PATH:/usr/sbin:/sbin" ;;
esac
export PATH

die() {
    echo "build-test-images: ERROR: $*" >&2
    exit 1
}

# True if image $1 exists and was made by recipe $2.
image_current() {
    local recipe
    recipe="$(docker image inspect \
        --format "{{ index .Config.Labels \"$RECIPE_LABEL\" }}" "$1" 2>/dev/null)" || return 1
    [ "$recipe" = "$2" ]
}

image_size() {
    docker image inspect --format '{{.Size}}' "$1" 2>/dev/null \
        | awk '{ printf "%.1f MB", $1 / 1000 / 1000 }'
}

# Unmount anything still mounted below $1 (debootstrap mounts /proc, /sys ... in
# the target), deepest first, so that removing the directory is safe.
unmount_below() {
    local dir mnt
    dir="$(readlink -f "$1")"
    [ -n "$dir" ] && [ "$dir" != / ] || return 0
    awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts \
        | sort -r \
        | while read -r mnt; do
            umount -l "$mnt" 2>/dev/null || true
        done
}

remove_tree() {
    [ -n "${1:-}" ] && [ -e "$1" ] || return 0
    unmount_below "$1"
    rm -rf --one-file-system "$1"
}

WORK_DIRS=()
cleanup() {
    local d
    for d in "${WORK_DIRS[@]+"${WORK_DIRS[@]}"}"; do
        remove_tree "$d"
    done
}
trap cleanup EXIT

command -v docker >/dev/null 2>&1 || die "docker client not found (run scripts/ensure-docker.sh first)"
docker info >/dev/null 2>&1 || die "Docker engine not reachable (run scripts/ensure-docker.sh first)"

# ------------------------------------------------------------------ busybox
find_busybox() {
    local candidate
    # Prefer the file shipped by busybox-static: a dynamic busybox would not run
    # in a FROM-scratch image.
    if command -v dpkg >/dev/null 2>&1; then
        candidate="$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -n 1 || true)"
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    fi
    for candidate in /usr/bin/busybox /bin/busybox; do
        if [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

build_busybox() {
    local tag="$1" busybox root applet
    busybox="$(find_busybox)" || die "no busybox binary found (apt-get install busybox-static)"
    if ldd "$busybox" 2>/dev/null | grep -q '=>'; then
        die "$busybox is dynamically linked; install busybox-static"
    fi

    root="$(mktemp -d "${TMPDIR:-/tmp}/orbit-busybox.XXXXXX")"
    WORK_DIRS+=("$root")
    mkdir -p "$root"/{bin,etc,root,tmp,proc,sys,dev,usr}
    chmod 1777 "$root/tmp"
    chmod 0700 "$root/root"
    cp "$busybox" "$root/bin/busybox"
    chmod 0755 "$root/bin/busybox"
    for applet in $("$busybox" --list); do
        [ "$applet" = busybox ] && continue
        ln -sf busybox "$root/bin/$applet"
    done
    # /usr/bin/env, /sbin/..., /usr/sbin/... all resolve to /bin.
    ln -s ../bin "$root/usr/bin"
    ln -s ../bin "$root/usr/sbin"
    ln -s bin "$root/sbin"
    cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
    cat >"$root/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP

    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . \
        | docker import \
            --change 'ENV PATH=/usr/bin:/bin' \
            --change 'CMD ["sh"]' \
            --change "LABEL $RECIPE_LABEL=$BUSYBOX_RECIPE" \
            - "$tag" >/dev/null \
        || die "docker import of $tag failed"
    remove_tree "$root"
}

# ------------------------------------------------------------------- python
# Print the first Debian mirror URL from the machine's apt sources that serves
# $SUITE (deb822 *.sources first, then one-line sources.list files).
find_mirror() {
    python3 - "$SUITE" <<'PY'
import glob
import re
import sys

suite = sys.argv[1]
ok_scheme = re.compile(r"^(https?|ftp|file):")


def deb822(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        key = None
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            if ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        if suite not in fields.get("suites", "").split():
            continue
        for uri in fields.get("uris", "").split():
            if ok_scheme.match(uri):
                yield uri


def one_line(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line.startswith("deb "):
                continue
            line = re.sub(r"\[[^\]]*\]", " ", line[4:])
            parts = line.split()
            if len(parts) >= 2 and parts[1] == suite and ok_scheme.match(parts[0]):
                yield parts[0]


files = sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
for path in files:
    for uri in deb822(path):
        print(uri.rstrip("/"))
        sys.exit(0)
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        for uri in one_line(path):
            print(uri.rstrip("/"))
            sys.exit(0)
    except OSError:
        pass
sys.exit(1)
PY
}

make_python_rootfs_tarball() {
    local mirror root tmp_tar started
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (apt-get install debootstrap)"
    [ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
    if [ -n "${ORBIT_TEST_MIRROR:-}" ]; then
        mirror="$ORBIT_TEST_MIRROR"
    else
        mirror="$(find_mirror)" \
            || die "no '$SUITE' deb mirror found in /etc/apt/sources.list{,.d/*}; set ORBIT_TEST_MIRROR"
    fi

    mkdir -p "$CACHE_DIR"
    # Work inside the cache dir (a real disk, not a nodev tmpfs).
    root="$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")"
    WORK_DIRS+=("$root")
    echo "build-test-images: debootstrap $SUITE ($PYTHON_PACKAGES) into $root ..." >&2
    started=$SECONDS
    local log="$CACHE_DIR/debootstrap.log"
    if ! debootstrap --variant=minbase --include="$PYTHON_PACKAGES" \
        "$SUITE" "$root" "$mirror" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        [ -f "$root/debootstrap/debootstrap.log" ] && tail -n 40 "$root/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (full log: $log)"
    fi
    echo "build-test-images: debootstrap took $((SECONDS - started)) s" >&2
    unmount_below "$root"

    # Keep the image small: no apt lists/caches, docs, man pages or locales.
    rm -rf "$root"/var/lib/apt/lists/* \
        "$root"/var/cache/apt/* \
        "$root"/var/cache/debconf/*-old \
        "$root"/var/log/* \
        "$root"/usr/share/doc/* \
        "$root"/usr/share/man/* \
        "$root"/usr/share/info/* \
        "$root"/usr/share/locale/* \
        "$root"/debootstrap
    mkdir -p "$root/var/lib/apt/lists/partial"
    # Docker provides its own /dev, /proc and /sys.
    find "$root/dev" "$root/proc" "$root/sys" -mindepth 1 -delete 2>/dev/null || true
    chmod 1777 "$root/tmp"

    tmp_tar="$(mktemp "$CACHE_DIR/python-rootfs.tar.XXXXXX")"
    WORK_DIRS+=("$tmp_tar")
    tar --numeric-owner -C "$root" -cf "$tmp_tar" . || die "tar of the python rootfs failed"
    chmod 0644 "$tmp_tar"
    mv -f "$tmp_tar" "$PYTHON_TARBALL"
    echo "$PYTHON_RECIPE" >"$PYTHON_TARBALL.recipe"
    remove_tree "$root"
}

build_python() {
    local tag="$1"
    if [ ! -s "$PYTHON_TARBALL" ] \
        || [ "$(cat "$PYTHON_TARBALL.recipe" 2>/dev/null || true)" != "$PYTHON_RECIPE" ]; then
        make_python_rootfs_tarball
    fi
    docker import \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
        --change 'CMD ["python3"]' \
        --change "LABEL $RECIPE_LABEL=$PYTHON_RECIPE" \
        "$PYTHON_TARBALL" "$tag" >/dev/null \
        || die "docker import of $tag from $PYTHON_TARBALL failed (delete it to rebuild)"
}

verify() {
    local tag="$1"
    shift
    local out
    if ! out="$(docker run --rm --network none "$tag" "$@" 2>&1)"; then
        echo "$out" >&2
        die "image $tag does not work: 'docker run --rm $tag $*' failed"
    fi
}

image_id() {
    docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true
}

# Remove a replaced image if nothing references it any more (best effort:
# `docker rmi ID` refuses while another tag or a container still uses it).
drop_replaced() {
    local old="$1"
    [ -n "$old" ] || return 0
    docker rmi "$old" >/dev/null 2>&1 || true
}

# --------------------------------------------------------------------- main
# Serialise concurrent runs (e.g. several test processes calling this at once).
mkdir -p "$CACHE_DIR"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE_DIR/.build.lock"
    flock 9
fi

if image_current "$BUSYBOX_IMAGE" "$BUSYBOX_RECIPE"; then
    status=present
else
    old="$(image_id "$BUSYBOX_IMAGE")"
    build_busybox "$BUSYBOX_IMAGE"
    drop_replaced "$old"
    status=built
fi
verify "$BUSYBOX_IMAGE" sh -c true
echo "$BUSYBOX_IMAGE: $status ($(image_size "$BUSYBOX_IMAGE"))"

if image_current "$PYTHON_IMAGE" "$PYTHON_RECIPE"; then
    status=present
else
    old="$(image_id "$PYTHON_IMAGE")"
    old_alias="$(image_id "$PYTHON_ALIAS")"
    build_python "$PYTHON_IMAGE"
    status=built
fi
verify "$PYTHON_IMAGE" python3 -c 'import json, sqlite3, ssl, subprocess'
if [ -n "$PYTHON_ALIAS" ] && [ "$PYTHON_ALIAS" != "$PYTHON_IMAGE" ]; then
    if [ "$(docker image inspect --format '{{.Id}}' "$PYTHON_ALIAS" 2>/dev/null || true)" \
        != "$(docker image inspect --format '{{.Id}}' "$PYTHON_IMAGE")" ]; then
        docker tag "$PYTHON_IMAGE" "$PYTHON_ALIAS"
    fi
fi
if [ "$status" = built ]; then
    drop_replaced "$old"
    [ "$old_alias" = "$old" ] || drop_replaced "$old_alias"
fi
echo "$PYTHON_IMAGE: $status ($(image_size "$PYTHON_IMAGE"))${PYTHON_ALIAS:+, also tagged $PYTHON_ALIAS}"
