#!/usr/bin/env bash
# tools/flamegraph.sh PERF_DATA OUT.svg [TITLE]: a flame graph of a `perf record -g`
# (or --call-graph dwarf) profile, with inferno (cargo install inferno: a Rust port of
# Brendan Gregg's FlameGraph; its inferno-collapse-perf and inferno-flamegraph are used
# as they are). Frames that perf could only show as a bare address (the static functions
# of Debian's stripped libgrpc) are dropped, so their callers and callees merge instead
# of splitting into one tower per address; the total is unchanged. The folded stacks
# stay in $TMPDIR (default /tmp) as OUT's name with .folded, for text queries.
#
#   tools/flamegraph.sh /tmp/gwb-perf/perf-gateway.data docs/bench/get-gateway-before.svg \
#       "gateway, GET /v1/products/{id}, before"
set -euo pipefail

data=${1:?usage: tools/flamegraph.sh PERF_DATA OUT.svg [TITLE]}
out=${2:?usage: tools/flamegraph.sh PERF_DATA OUT.svg [TITLE]}
title=${3:-$(basename "$data" .data)}
PATH=$PATH:${CARGO_HOME:-$HOME/.cargo}/bin
for t in perf inferno-collapse-perf inferno-flamegraph; do
  command -v "$t" >/dev/null || { echo "flamegraph.sh: $t not found (cargo install inferno; linux-perf)" >&2; exit 1; }
done
folded=${TMPDIR:-/tmp}/$(basename "$out" .svg).folded
perf script -i "$data" 2>/dev/null | inferno-collapse-perf |
  sed -E 's/;0x[0-9a-f]+//g; s/;\[unknown\]//g' >"$folded"
inferno-flamegraph --title "$title" --countname ns --width 1600 --minwidth 0.1 <"$folded" >"$out"
echo "$out ($(wc -l <"$folded") stacks; folded: $folded)"
