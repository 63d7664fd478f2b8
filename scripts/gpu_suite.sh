#!/usr/bin/env bash
# The GPU half of cgkit's checks, run on a CUDA machine from the repository root:
#   scripts/gpu_suite.sh [STAGE...]      stages: tests recipes bench calls experiments check docs te multi
#                                        trace tracecost located baseline facts ddp precision structures
#                                        (default: recipes bench)
#   tests: every gpu-marked test but TE's, 8 at a time; te: after scripts/device_te_setup.sh;
#   multi: the DDP recipes on all GPUs of a machine with 2 or more (nvidia-h200-x2).
# Results (JSON reports, logs) go to $OUT (the device tool's output folder) or ./out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 CGKIT_GPU_OUT=$OUT
# Keep NVLink multicast off (shared machines): NCCL, PyTorch symmetric memory, NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python - <<'PY' | tee "$OUT/machine.json"
import json, platform, torch
print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "python": platform.python_version(), "gpus": torch.cuda.device_count()}))
PY
status=0
for stage in "${@:-recipes bench}"; do
  for s in $stage; do
    echo "== stage $s"
    case $s in
      recipes) python -m pytest -q -m gpu tests/gpu -n "${CGKIT_JOBS:-4}" -p no:cacheprovider 2>&1 | tee "$OUT/pytest-recipes.log" || status=1 ;;
      bench)   python benchmarks/bench_recipes.py ${CGKIT_BENCH_ARGS:-} --out "$OUT/recipes-bench${CGKIT_BENCH_PART:-}.json" 2>&1 | tee "$OUT/bench${CGKIT_BENCH_PART:-}.log" || status=1 ;;
      calls)   for w in mlp16x512_b8 gpt6x512_b1s64; do python benchmarks/compile_call_cost.py --workload $w || status=1; done > "$OUT/compile-call-cost.jsonl" ;;
      experiments)  # the profiler's after-effect, in 3 processes; compile's kernels on the demo
               for _ in 1 2 3; do python benchmarks/profiler_effect.py || status=1; done > "$OUT/profiler-effect.jsonl"
               python benchmarks/compile_kernels.py > "$OUT/compile-kernels.jsonl" || status=1 ;;
      tests)   python -m pytest -q -m gpu tests/gpu tests/check tests/test_docs_gpu.py -n "${CGKIT_JOBS:-8}" -p no:cacheprovider 2>&1 | tee "$OUT/pytest-gpu.log" || status=1 ;;
      multi)   python -m pytest -q -m gpu tests/gpu/test_ddp_multi_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/pytest-multi.log" || status=1 ;;
      check)   python -m pytest -q -m gpu tests/check -n "${CGKIT_JOBS:-8}" -p no:cacheprovider 2>&1 | tee "$OUT/pytest-check.log" || status=1 ;;
      located) python -m pytest -q -m gpu tests/gpu/test_recipes_gpu.py -k "frozen or failed_capture or factory or compare" \
                 -n 4 -p no:cacheprovider 2>&1 | tee "$OUT/pytest-located.log" || status=1 ;;
      baseline) python -m pytest -q -m gpu tests/gpu/test_baseline_gpu.py -n 3 -p no:cacheprovider 2>&1 | tee "$OUT/pytest-baseline.log" || status=1 ;;
      facts)   { python benchmarks/optimizer_facts.py; python benchmarks/source_facts.py --json; } > "$OUT/facts.jsonl" || status=1 ;;
      docs)    python -m pytest -q -m gpu tests/test_docs_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/pytest-docs.log" || status=1 ;;
      trace)   python -m pytest -q -m gpu tests/gpu/test_trace_gpu.py -n "${CGKIT_JOBS:-8}" -p no:cacheprovider 2>&1 | tee "$OUT/pytest-trace.log" || status=1 ;;
      tracecost) for d in cuda cpu; do python benchmarks/trace_cost.py --device $d --out "$OUT/trace-cost.jsonl" || status=1; done ;;
      ddp)     python benchmarks/ddp_scaling.py --out "$OUT/ddp-scaling.jsonl" || status=1 ;;
      precision)  # what compiled-region hazards do under reduce-overhead; manual-capture facts behind CG408/CG412/CG603
               python benchmarks/compile_hazards.py --device cuda --json "$OUT/compile-hazards.jsonl" > "$OUT/compile-hazards.txt" 2>&1 || status=1
               python benchmarks/capture_facts.py > "$OUT/capture-facts.jsonl" || status=1 ;;
      structures)  # issue 13: real models' inputs and outputs through every capturing workflow
               python -m pytest -q -m gpu tests/gpu/test_structures_gpu.py -n "${CGKIT_JOBS:-6}" -p no:cacheprovider 2>&1 \
                 | tee "$OUT/pytest-structures.log" || status=1 ;;
      te)      PYTHONPATH=/tmp/site:$PYTHONPATH python -m pytest -q -m gpu tests/gpu/test_te_mcore_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/pytest-te.log" || status=1 ;;
      *) echo "unknown stage $s"; status=2 ;;
    esac
  done
done
# The device tool returns at most 8 files: fold the per-case reports into one JSON-lines file.
if [ -d "$OUT/recipes" ]; then
  for f in "$OUT"/recipes/*.json; do cat "$f"; echo; done > "$OUT/recipe-reports.jsonl" && rm -r "$OUT/recipes"
fi
# Per-worker rule summaries (pytest-xdist) are merged into one file each.
for summary in check_rules_gpu trace_rules_gpu; do
  if ls "$OUT"/$summary.gw*.json >/dev/null 2>&1; then
    python - "$OUT" "$summary" <<'PY'
import json, pathlib, sys
out, name = pathlib.Path(sys.argv[1]), sys.argv[2]
parts = sorted(out.glob(f"{name}.gw*.json"))
merged = json.loads(parts[0].read_text())
for part in parts[1:]:
    for code, result in json.loads(part.read_text())["rules"].items():
        if "skipped" not in result or code not in merged["rules"]:
            merged["rules"][code] = result
(out / f"{name}.json").write_text(json.dumps(merged, indent=1))
for part in parts:
    part.unlink()
PY
  fi
done
exit $status
