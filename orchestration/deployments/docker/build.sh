#!/usr/bin/env bash
# Build the Docker deployment's images without Docker Hub (`make deploy-deps`).
#
#   1. tmlbench-base:bookworm and tmlbench-agent:latest: runner/sandbox/image/build.sh (the
#      debootstrap base, and the image every docker-sandbox attempt runs in).
#   2. tmlbench-postgres:15: Debian's PostgreSQL 15 on that base (postgres/Dockerfile).
#   3. tmlbench-user-code:<content hash>, and :latest pointing at it: the code location,
#      webserver, daemon and run workers (Dockerfile), on that base.
#
# An image whose content hash (its Dockerfile, its inputs, the base image's id) is already
# tagged is not rebuilt: with nothing changed the script takes a few seconds. The host's CA
# bundle ($TMLBENCH_BUILD_CA, default /etc/ssl/certs/ca-certificates.crt) is passed as a
# BuildKit secret to the steps that download (apt, pip, uv) and never written to a layer.
#
# Environment: TMLBENCH_USER_CODE_IMAGE and TMLBENCH_POSTGRES_IMAGE rename the images; the
# variables of runner/sandbox/image/build.sh apply to step 1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
BASE_IMAGE="${TMLBENCH_BASE_IMAGE:-tmlbench-base:bookworm}"
USER_CODE="${TMLBENCH_USER_CODE_IMAGE:-tmlbench-user-code}"
POSTGRES="${TMLBENCH_POSTGRES_IMAGE:-tmlbench-postgres}"
CA="${TMLBENCH_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}"

say() { printf 'deploy-image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

"$root/runner/sandbox/image/build.sh"
base_id="$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")"

# BuildKit (for the secret): docker buildx where installed, else a CLI that still has it built
# in (Docker < 23, e.g. Debian bookworm's docker.io at /usr/bin/docker).
buildkit_build() {
  if docker buildx version >/dev/null 2>&1; then
    docker buildx build --load "$@"
    return
  fi
  local cli version
  for cli in "$(command -v docker)" /usr/bin/docker; do
    [ -x "$cli" ] || continue
    version="$("$cli" version --format '{{.Client.Version}}' 2>/dev/null)" || continue
    if [ "${version%%.*}" -lt 23 ] 2>/dev/null; then
      DOCKER_BUILDKIT=1 "$cli" build "$@"
      return
    fi
  done
  die "building needs BuildKit: install docker buildx, or use Debian's docker.io CLI (Docker < 23)"
}

secret=()
if [ -s "$CA" ]; then secret=(--secret "id=ca,src=$CA"); fi

# build <repo> <hash> <dockerfile> <context> [build options]: tag <repo>:<hash> (skipped when
# present) and :latest.
build() {
  local repo="$1" hash="$2" dockerfile="$3" context="$4" start=$SECONDS log
  shift 4
  if docker image inspect "$repo:$hash" >/dev/null 2>&1; then
    say "$repo:$hash present (nothing changed)"
  else
    say "building $repo:$hash (first build: a few minutes)"
    log="$(mktemp)"
    buildkit_build --progress plain --build-arg "BASE=$BASE_IMAGE" \
      --label "tmlbench.image-hash=$hash" "${secret[@]}" "$@" \
      -f "$dockerfile" -t "$repo:$hash" "$context" >"$log" 2>&1 ||
      { tail -n 40 "$log" >&2; rm -f "$log"; die "building $repo failed"; }
    rm -f "$log"
    say "$repo:$hash built in $((SECONDS - start)) s"
  fi
  docker tag "$repo:$hash" "$repo:latest"
  local old
  for old in $(docker images "$repo" --format '{{.Tag}}'); do
    case "$old" in latest | 15 | "$hash") ;; *) docker rmi "$repo:$old" >/dev/null 2>&1 || true ;; esac
  done
}

files_hash() { # the content of the named files and folders (no caches), with the base's id
  (cd "$root" && find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
    ! -path 'dbt_project/target/*' ! -path 'dbt_project/logs/*' \
    ! -path 'orchestration/deployments/*' -print0 | sort -z | xargs -0 sha256sum) |
    { cat; echo "$base_id"; } | sha256sum | cut -c1-16
}

pg_hash="$(cd "$here" && { sha256sum postgres/Dockerfile postgres/entrypoint.sh; echo "$base_id"; } | sha256sum | cut -c1-16)"
build "$POSTGRES" "$pg_hash" "$here/postgres/Dockerfile" "$here/postgres"
docker tag "$POSTGRES:$pg_hash" "$POSTGRES:15"

code_hash="$( { files_hash pyproject.toml uv.lock README.md runner warehouse orchestration \
  dbt_project tasks agents suites app; sha256sum "$here/Dockerfile" "$here/Dockerfile.dockerignore" "$here/build.sh"; } |
  sha256sum | cut -c1-16)"
# The docker CLI of the run containers comes out of Debian's engine package.
build "$USER_CODE" "$code_hash" "$here/Dockerfile" "$root" --build-arg DOCKER_DEB=docker.io
say "$USER_CODE:latest = $USER_CODE:$code_hash, $POSTGRES:15 = $POSTGRES:$pg_hash"
