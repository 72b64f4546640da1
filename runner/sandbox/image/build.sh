#!/usr/bin/env bash
# Build the docker backend's agent runtime image without Docker Hub (`make docker-image`).
#
#   1. tmlbench-base:bookworm: `debootstrap --variant=minbase` of Debian bookworm with
#      python3, python3-venv and libgomp1 (LightGBM's OpenMP), from the Debian mirror this
#      host's apt uses, imported with `docker import`. Built once, kept while it exists.
#   2. tmlbench-agent:<content hash> (of Dockerfile, requirements.txt and this script).
#      Skipped when that tag exists, which makes a rebuild with nothing changed take seconds;
#      loaded from $TMLBENCH_IMAGE_CACHE/<hash>.tar when a fresh engine has a saved copy
#      (default ~/.cache/tmlbench/docker-images; "off" disables it).
#      The pinned wheels are downloaded on the host with the host's pip configuration, and
#      the image is built with --network none, so no index, proxy or CA ends up in it.
#   3. tmlbench-agent:latest points at it (what DockerSandbox runs).
#
# Environment: TMLBENCH_DEBIAN_MIRROR overrides the mirror; TMLBENCH_BASE_IMAGE and
# TMLBENCH_AGENT_IMAGE the image names; PYTHON the host interpreter that downloads wheels;
# TMLBENCH_IMAGE_CACHE where saved images are kept between engines.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BASE_IMAGE="${TMLBENCH_BASE_IMAGE:-tmlbench-base:bookworm}"
AGENT_REPO="${TMLBENCH_AGENT_IMAGE:-tmlbench-agent}"
PYTHON="${PYTHON:-python3}"
SUITE=bookworm
INCLUDE=python3,python3-venv,libgomp1
CACHE="${TMLBENCH_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tmlbench/docker-images}"

say() { printf 'docker-image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

docker info >/dev/null 2>&1 ||
  die "the Docker engine is not reachable; start it with 'make docker-engine' (installs docker.io, starts dockerd)"

# The mirror apt already uses here: deb822 sources (URIs: of a stanza whose Suites has
# bookworm) or one-line sources. Never a host name of our own.
debian_mirror() {
  if [ -n "${TMLBENCH_DEBIAN_MIRROR:-}" ]; then echo "$TMLBENCH_DEBIAN_MIRROR"; return; fi
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      /^[[:space:]]*$/ { if (uri != "" && ok) { print uri; exit } uri = ""; ok = 0; next }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
      END { if (uri != "" && ok) print uri }' "$f" | head -n1
  done | head -n1 | grep . && return
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v suite="$SUITE" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i == suite) { print ($2 ~ /^\[/ ? $3 : $2); exit } }' |
    head -n1 | grep . && return
  return 1
}

hash="$(cat "$here/Dockerfile" "$here/requirements.txt" "$here/build.sh" | sha256sum | cut -c1-16)"
tag="$AGENT_REPO:$hash"
saved="$CACHE/$hash.tar"
if docker image inspect "$tag" >/dev/null 2>&1; then
  say "runtime $tag present (nothing changed)"
elif [ "$CACHE" != off ] && [ -s "$saved" ] && docker load -q -i "$saved" >/dev/null &&
  docker image inspect "$tag" >/dev/null 2>&1; then
  say "runtime $tag loaded from $saved"
else
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "base $BASE_IMAGE present"
  else
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: apt-get install debootstrap (or make docker-engine)"
    mirror="$(debian_mirror)" || die "no Debian $SUITE mirror in /etc/apt/sources.list*; set TMLBENCH_DEBIAN_MIRROR"
    root="$(mktemp -d /var/tmp/tmlbench-base.XXXXXX)"
    trap 'rm -rf "$root"' EXIT
    say "debootstrap $SUITE from $mirror (about a minute)"
    start=$SECONDS
    debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 ||
      { tail -n 30 "$root.log" >&2; rm -f "$root.log"; die "debootstrap failed"; }
    rm -f "$root.log"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*
    tar --numeric-owner -C "$root" -c . | docker import - "$BASE_IMAGE" >/dev/null
    rm -rf "$root"
    trap - EXIT
    say "base $BASE_IMAGE imported in $((SECONDS - start)) s"
  fi
  ctx="$(mktemp -d /var/tmp/tmlbench-agent-ctx.XXXXXX)"
  trap 'rm -rf "$ctx"' EXIT
  cp "$here/Dockerfile" "$here/requirements.txt" "$ctx/"
  start=$SECONDS
  say "downloading the pinned wheels with the host's pip"
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
    -r "$here/requirements.txt" -d "$ctx/wheels" 2> >(grep -v "is ignored: it is neither" >&2)
  say "building $tag (no network inside the build)"
  DOCKER_BUILDKIT=0 docker build --quiet --network none --pull=false \
    --build-arg BASE="$BASE_IMAGE" --label "tmlbench.image-hash=$hash" \
    -t "$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  trap - EXIT
  docker image prune -f --filter label=tmlbench.stage=builder >/dev/null
  say "runtime $tag built in $((SECONDS - start)) s"
  if [ "$CACHE" != off ] && mkdir -p "$CACHE" 2>/dev/null; then
    rm -f "$CACHE"/*.tar
    docker save -o "$saved.part" "$BASE_IMAGE" "$tag" && mv "$saved.part" "$saved" &&
      say "saved to $saved for a fresh engine"
  fi
fi
docker tag "$tag" "$AGENT_REPO:latest"
# Older content-hash tags are stale now (an image still in use by a container stays).
for old in $(docker images "$AGENT_REPO" --format '{{.Tag}}'); do
  case "$old" in latest | "$hash") ;; *) docker rmi "$AGENT_REPO:$old" >/dev/null 2>&1 || true ;; esac
done
say "$AGENT_REPO:latest = $tag"
