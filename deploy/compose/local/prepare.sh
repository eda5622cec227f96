#!/usr/bin/env bash
# deploy/compose/local/prepare.sh: what compose.local.yaml needs on a machine that has a Docker
# engine but reaches no image registry (only Debian's mirrors and Maven Central):
#   1. local/debian:bookworm, a minimal Debian 12 made with mmdebstrap and `docker import` (once;
#      about 25 s): the base of the project's image and of every stand-in
#   2. the Kafka 4.4.0 jars, fetched with Maven as deploy/local/kafka.sh fetches them (once;
#      SHOPMICRO_KAFKA_LIB_CACHE shares deploy/local's cache), hard-linked into kafka/jars/ for the
#      Kafka stand-in's build (git ignores that folder)
# Then:  docker compose -f deploy/compose/docker-compose.yml -f deploy/compose/compose.local.yaml up --build -d
# Needs: docker (a running daemon), mmdebstrap (apt-get install mmdebstrap), java and mvn.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../../.." && pwd -P)
BASE_IMAGE=${SHOPMICRO_BASE_IMAGE:-local/debian:bookworm}

say() { printf 'prepare: %s\n' "$*"; }
die() { printf 'prepare: error: %s\n' "$*" >&2; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker daemon answers (start dockerd first)"
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  say "$BASE_IMAGE exists"
else
  command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (apt-get install mmdebstrap)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "making $BASE_IMAGE with mmdebstrap (minbase, bookworm; about 25 s)"
  # The host's apt sources become the image's; stdin closed, or mmdebstrap reads sources from it.
  sources=/etc/apt/sources.list.d/debian.sources
  [[ -r $sources ]] || sources=http://deb.debian.org/debian
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$tmp/rootfs.tar" \
    "$sources" </dev/null
  docker import "$tmp/rootfs.tar" "$BASE_IMAGE" >/dev/null
  say "$BASE_IMAGE made ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
fi

jars=$("$ROOT/deploy/local/kafka.sh" fetch)
rm -rf "$HERE/kafka/jars"
cp -al "$jars" "$HERE/kafka/jars" 2>/dev/null || cp -a "$jars" "$HERE/kafka/jars"
say "kafka/jars: $(find "$HERE/kafka/jars" -name '*.jar' | wc -l) jars from $jars"
