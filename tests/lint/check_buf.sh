#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check_buf.sh REPO_ROOT TOOLS_DIR: the .proto contract (buf.yaml, docs/contract.md). buf (BUF
# below, built once into TOOLS_DIR by tests/tools/gotool.sh) lints proto/ with buf.yaml's rules,
# then checks it for breaking changes against proto/ at the commit proto/RELEASE_BASE names, with
# buf.yaml's module layout and rules applied to both sides. Needs the git history back to that
# commit (a full clone; a shallow one fails and says so). Exit 0 only when both checks pass.
set -eu
BUF=github.com/bufbuild/buf/cmd/buf@v1.75.0
if [ $# -ne 2 ]; then
    echo "usage: check_buf.sh REPO_ROOT TOOLS_DIR" >&2
    exit 2
fi
root=$(cd "$1" && pwd)
tools=$2
say() { printf 'lint_buf: %s\n' "$*"; }
fail() { printf 'lint_buf: FAILED: %s\n' "$*" >&2; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%02d s' $(($1 / 1000)) $(($1 % 1000 / 10)); }

buf=$("$root/tests/tools/gotool.sh" --path "$tools" "$BUF") || fail "no buf ($BUF; see above)"
say "buf $("$buf" --version) ($buf)"
cd "$root"

base=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' proto/RELEASE_BASE)
case $base in
    *[!0-9a-f]* | '') fail "proto/RELEASE_BASE: '$base' is not a full 40-hex commit id" ;;
esac
[ ${#base} -eq 40 ] || fail "proto/RELEASE_BASE: '$base' is not a full 40-hex commit id"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || fail "$root is not a git checkout: buf breaking needs its history"
git cat-file -e "$base^{commit}" 2>/dev/null ||
    fail "proto/RELEASE_BASE names $base, which this clone does not have (a shallow clone? git fetch --unshallow)"
git merge-base --is-ancestor "$base" HEAD ||
    fail "proto/RELEASE_BASE names $base, which is not an ancestor of HEAD"
gitdir=$(git rev-parse --path-format=absolute --git-common-dir)

files=$("$buf" ls-files)
say "files: $(echo "$files" | wc -l) (buf.yaml's modules):" $files

t0=$(now_ms)
if ! "$buf" lint; then
    fail "buf lint: the lines above break buf.yaml's lint rules (STANDARD, less its commented exceptions)"
fi
say "buf lint: STANDARD, less buf.yaml's ignore_only exceptions: ok ($(secs $(($(now_ms) - t0))))"

t0=$(now_ms)
subject="$(git show -s --format='%h %ad' --date=short "$base") \"$(git show -s --format=%s "$base" | cut -c1-60)\""
changed=$(git diff --name-only "$base" -- 'proto/*.proto')
added=$(git ls-files --others --exclude-standard -- 'proto/*.proto')
say "buf breaking: against proto/RELEASE_BASE, $subject"
say "  .proto files changed since then (in git or in this checkout):" ${changed:-none}
say "  .proto files that git does not know yet:" ${added:-none}
# --against-config: the base is read with today's buf.yaml (its two modules and their rules),
# whether or not it had a buf.yaml itself.
if ! "$buf" breaking --against "$gitdir#format=git,ref=$base" --against-config buf.yaml; then
    fail "buf breaking: the lines above break the contract of proto/RELEASE_BASE (events: WIRE_JSON" \
         "and PACKAGE_MESSAGE_NO_DELETE; the rest: FILE). An incompatible change is a new package" \
         "(...v2); see docs/contract.md"
fi
say "buf breaking: events WIRE_JSON + PACKAGE_MESSAGE_NO_DELETE, services and the rest FILE: ok ($(secs $(($(now_ms) - t0))))"
