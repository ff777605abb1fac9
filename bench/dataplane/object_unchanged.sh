#!/usr/bin/env bash
# Whether the production BPF objects' code is what REF's was (issue 15's
# stage profile: its early returns, bpf/lib/stage_stop.h, must compile to
# nothing outside the bench-only object). Compiles bpf/ of REF and of the
# working tree as build.rs does, both objects (may_goto and
# -DPARAPET_ITER_LOOPS), strips the debug sections and the BTF (whose line
# info moves with every added line) and compares the rest byte for byte:
# code, relocations, maps, .rodata, symbols. Exit 0 when all are equal.
#   bench/dataplane/object_unchanged.sh [REF]      (default: main)
set -euo pipefail
cd "$(dirname "$0")/../.."
REF=${1:-main}
CLANG=${CLANG:-clang}
OBJCOPY=${OBJCOPY:-llvm-objcopy}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ref"
git archive "$REF" crates/parapet-dataplane/bpf | tar -x -C "$tmp/ref"
multiarch=/usr/include/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
status=0
for variant in "" "-DPARAPET_ITER_LOOPS"; do
  for side in ref tree; do
    dir=crates/parapet-dataplane/bpf
    [ "$side" = ref ] && dir="$tmp/ref/crates/parapet-dataplane/bpf"
    # shellcheck disable=SC2086 # an empty variant adds no argument
    "$CLANG" -O2 -g -target bpf -mcpu=v3 -Wall -Werror $variant -I "$dir" \
      -I "$multiarch" -c "$dir/parapet.bpf.c" -o "$tmp/$side.o"
    "$OBJCOPY" --strip-debug --remove-section=.BTF --remove-section=.BTF.ext \
      "$tmp/$side.o" "$tmp/$side.code.o"
  done
  name="parapet${variant:+ $variant}"
  if cmp -s "$tmp/ref.code.o" "$tmp/tree.code.o"; then
    echo "$name: code identical to $REF ($(stat -c %s "$tmp/tree.code.o") bytes without debug info and BTF)"
  else
    echo "$name: DIFFERS from $REF"
    status=1
  fi
done
exit $status
