#!/usr/bin/env bash
# Brings Transformer Engine 2.20.2 and Megatron-Core 0.19.2 up on the GPU machine, which has no
# internet, from wheels carried in with the checkout (see ../shared/wheels/README.md).
#
#   scripts/device_te_setup.sh prepare   here (CPU machine): .whl/ from ../shared/wheels, .te/c0..c4
#                                        from split-te-core.sh, and a check of what each run carries
#   scripts/device_te_setup.sh 0..3      device runs 1-4: keep .te/cN's part in $HOME/te-parts
#   scripts/device_te_setup.sh 4         device run 5: the last part, reassemble, check sha256,
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
  if [ ! -f .te/c0/whl.sha256 ] || [ ! -f .te/c4/part4 ]; then
    say "downloading and splitting the TE core wheel (about 276 MB)"
    bash "$shared/split-te-core.sh" "$TE_VERSION"
  fi
  local tree
  tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  say "working tree (what every run carries): $tree bytes"
  local run n carried
  for n in 0 1 2 3 4; do
    carried=$(bytes ".te/c$n")
    [ "$n" = 4 ] && carried=$((carried + $(bytes .whl)))
    run=$((tree + carried))
    say "run $((n + 1)): carry .te/c$n$([ "$n" = 4 ] && echo ' .whl') -> $run bytes (limit $LIMIT)"
    [ "$run" -le "$LIMIT" ] || die "run $((n + 1)) would carry $run bytes, over the 64 MiB limit"
  done
  say "prepared"
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
  local n
  for n in 0 1 2 3 4; do
    [ -f "$PARTS/part$n" ] || die "part$n is missing from $PARTS: run 'scripts/device_te_setup.sh $n' (carry .te/c$n) first; the machine must stay warm between the runs"
  done
  [ -f "$PARTS/whl.sha256" ] || die "whl.sha256 is missing from $PARTS (it travels with .te/c0)"
  ls .whl/*.whl >/dev/null 2>&1 || die ".whl/ has no wheels: carry .whl with this run (run 'prepare' on the CPU machine first)"
  local wheel="$PARTS/$CORE_WHEEL"
  cat "$PARTS"/part0 "$PARTS"/part1 "$PARTS"/part2 "$PARTS"/part3 "$PARTS"/part4 > "$wheel"
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

case "${1:-}" in
  prepare) prepare ;;
  0|1|2|3) keep_part "$1" ;;
  4) if [ -d .te/c4 ] || [ ! -d "$SITE/megatron" ]; then keep_part 4; fi; install_all ;;
  *) die "usage: $0 prepare|0|1|2|3|4" ;;
esac
