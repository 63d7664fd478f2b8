#!/usr/bin/env bash
# Brings Transformer Engine 2.20.2 and Megatron-Core 0.19.2 up on the GPU machine, which has no
# internet, from wheels carried in with the checkout (see ../shared/wheels/README.md).
#
#   scripts/device_te_setup.sh prepare   here (CPU machine): .whl/ from ../shared/wheels, the TE core
#                                        wheel in parts .te/c0..cN small enough to travel beside the
#                                        working tree, and a check of what each run carries
#   scripts/device_te_setup.sh 0..N-1    device runs 1..N: keep .te/cK's part in $HOME/te-parts
#   scripts/device_te_setup.sh N         the last run: the last part, reassemble, check sha256,
#                                        install everything into /tmp/site
# Afterwards `export PYTHONPATH=/tmp/site:$PYTHONPATH` makes `import transformer_engine.pytorch`
# and `import megatron.core` work. Every step can be repeated; any failure stops with a message.
set -euo pipefail
cd "$(dirname "$0")/.."

TE_VERSION=2.20.2
CORE_WHEEL=transformer_engine_cu13-$TE_VERSION-py3-none-manylinux_2_28_x86_64.whl
PARTS=${TE_PARTS_DIR:-$HOME/te-parts}
SITE=${TE_SITE:-/tmp/site}
PYTHON=${PYTHON:-python}
LIMIT=$((64 * 1024 * 1024))  # the device tool carries at most 64 MiB per run, working tree included

die() { echo "device_te_setup: ERROR: $*" >&2; exit 1; }
say() { echo "device_te_setup: $*"; }

bytes() { du -cb "$@" 2>/dev/null | tail -1 | cut -f1; }

imports_ok() {
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - <<'PY'
import importlib.metadata as md
import transformer_engine.pytorch  # noqa: F401
import megatron.core  # noqa: F401
print("transformer_engine", md.version("transformer_engine"), "| megatron-core", md.version("megatron_core"))
PY
}

prepare() {
  local shared=../shared/wheels
  [ -d "$shared" ] || die "$shared not found (run from the repository root, with /work/shared beside it)"
  mkdir -p .whl
  cp -f "$shared"/*.whl .whl/
  say ".whl: $(ls .whl | wc -l) wheels, $(bytes .whl) bytes"
  if [ ! -f .te/c0/whl.sha256 ] || [ ! -f .te/count ]; then
    say "downloading and splitting the TE core wheel (about 276 MB)"
    bash "$shared/split-te-core.sh" "$TE_VERSION"
    echo 5 > .te/count
  fi
  local tree
  tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  say "working tree (what every run carries): $tree bytes"
  # Parts small enough to travel with the working tree and, on the last run, the other wheels.
  local room=$(( (LIMIT - tree - $(bytes .whl)) / 1048576 - 1 ))
  [ "$room" -ge 8 ] || die "the working tree ($tree bytes) leaves no room for the wheel's parts"
  local largest
  largest=$(du -b .te/c*/part* | sort -n | tail -1 | cut -f1)
  if [ "$largest" -gt $((room * 1048576)) ]; then
    say "re-splitting the core wheel into parts of $room MiB"
    local sha
    sha=$(cat .te/c0/whl.sha256)
    cat $(ls .te/c*/part* | sort -V) > .te/whole.whl
    rm -rf .te/c*
    ( cd .te && split -b "${room}m" -d -a 1 whole.whl part && for f in part*; do i=${f#part}; mkdir -p "c$i"; mv "$f" "c$i/"; done )
    rm -f .te/whole.whl
    echo "$sha" > .te/c0/whl.sha256
    ls -d .te/c* | wc -l | tr -d ' ' > .te/count
  fi
  local count last run n carried
  count=$(cat .te/count)
  last=$((count - 1))
  for n in $(seq 0 "$last"); do
    carried=$(bytes ".te/c$n")
    [ "$n" = "$last" ] && carried=$((carried + $(bytes .whl)))
    run=$((tree + carried))
    say "run $((n + 1)): carry .te/c$n$([ "$n" = "$last" ] && echo ' .whl') -> $run bytes (limit $LIMIT)"
    [ "$run" -le "$LIMIT" ] || die "run $((n + 1)) would carry $run bytes, over the 64 MiB limit"
  done
  say "prepared: $count runs, 'scripts/device_te_setup.sh 0' ... '$last' (the last one installs)"
}

keep_part() {
  local n=$1
  [ -d ".te/c$n" ] || die ".te/c$n is missing: carry it with this run (carry: [\".te/c$n\"])"
  mkdir -p "$PARTS"
  cp -f ".te/c$n"/* "$PARTS/"
  [ -f "$PARTS/part$n" ] || die "part$n did not arrive in $PARTS"
  say "kept part$n ($(bytes "$PARTS/part$n") bytes) in $PARTS; have: $(cd "$PARTS" && ls | tr '\n' ' ')"
}

install_all() {
  if [ -d "$SITE/transformer_engine" ] && [ -d "$SITE/megatron" ] && imports_ok; then
    say "already installed in $SITE"
    return
  fi
  local n count
  count=$(cat "$PARTS/count" 2>/dev/null || echo 5)
  for n in $(seq 0 $((count - 1))); do
    [ -f "$PARTS/part$n" ] || die "part$n is missing from $PARTS: run 'scripts/device_te_setup.sh $n' (carry .te/c$n) first; the machine must stay warm between the runs"
  done
  [ -f "$PARTS/whl.sha256" ] || die "whl.sha256 is missing from $PARTS (it travels with .te/c0)"
  ls .whl/*.whl >/dev/null 2>&1 || die ".whl/ has no wheels: carry .whl with this run (run 'prepare' on the CPU machine first)"
  local wheel="$PARTS/$CORE_WHEEL"
  for n in $(seq 0 $((count - 1))); do cat "$PARTS/part$n"; done > "$wheel"
  local want got
  want=$(tr -d ' \n' < "$PARTS/whl.sha256")
  got=$(sha256sum "$wheel" | cut -c1-64)
  [ "$want" = "$got" ] || die "sha256 of the reassembled $CORE_WHEEL is $got, expected $want"
  say "reassembled $CORE_WHEEL, sha256 ok"
  mkdir -p "$SITE"
  # --upgrade: the TE wheels share the transformer_engine/ folder; without it pip --target skips
  # folders that already exist from an earlier, partial attempt.
  if ! "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" .whl/*.whl "$wheel"; then
    # A wheel is a zip of the files --target would place: unpacking them is the same install.
    say "pip install failed; unpacking the wheels into $SITE instead"
    local w
    for w in .whl/*.whl "$wheel"; do
      "$PYTHON" -m zipfile -e "$w" "$SITE" || die "could not unpack $w into $SITE"
    done
  fi
  imports_ok || die "installed into $SITE, but the imports above failed"
  say "installed into $SITE; use: export PYTHONPATH=$SITE:\$PYTHONPATH"
}

# The number of parts travels with the first one (.te/c0/count); the run with the last part installs.
COUNT=$(cat .te/c0/count 2>/dev/null || cat "$PARTS/count" 2>/dev/null || echo 5)
case "${1:-}" in
  prepare) prepare; cp -f .te/count .te/c0/count ;;
  *[!0-9]*|"") die "usage: $0 prepare|0..$((COUNT - 1))" ;;
  *)
    [ "$1" -lt "$COUNT" ] || die "there are $COUNT parts: 0..$((COUNT - 1))"
    if [ "$1" = 0 ] && [ -f .te/c0/count ]; then mkdir -p "$PARTS"; cp -f .te/c0/count "$PARTS/count"; fi
    if [ "$1" -lt $((COUNT - 1)) ]; then keep_part "$1"
    else
      if [ -d ".te/c$1" ] || [ ! -d "$SITE/megatron" ]; then keep_part "$1"; fi
      install_all
    fi ;;
esac
