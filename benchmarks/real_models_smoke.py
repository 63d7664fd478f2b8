"""`cgkit smoke` on models written elsewhere (nanoGPT, gpt-fast; see benchmarks/real_models.py).

    python benchmarks/real_models_smoke.py --out real-models.jsonl [--jobs 4]

Each case runs `python -m cgkit smoke --json ...` as a user would (cases share the GPU, --jobs at a
time: speedups are lower bounds); one JSON line per case: the arguments, the exit status and smoke's
report, with what `cgkit trace` located when the run failed.
"""

import argparse
import concurrent.futures
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
M = HERE / "real_models.py"
NANO = ["--model", f"{M}:nanogpt_model", "--inputs", f"{M}:nanogpt_inputs"]
NANO_TRAIN = ["--model", f"{M}:nanogpt_model", "--inputs", f"{M}:nanogpt_train_inputs", "--loss", f"{M}:nanogpt_loss"]
GPTFAST = ["--model", f"{M}:gptfast_model", "--inputs", f"{M}:gptfast_decode_inputs"]

CASES = {
    **{f"nanogpt-{w}-inference": ["--workflow", w, *NANO] for w in ("manual", "callables", "compile")},
    **{f"nanogpt-{w}-training": ["--workflow", w, "--mode", "training", *NANO_TRAIN]
       for w in ("manual", "callables", "compile")},
    **{f"gptfast-decode-{w}": ["--workflow", w, *GPTFAST] for w in ("manual", "callables", "compile")},
    "gptfast-decode-manual-fuse": ["--workflow", "manual", "--fuse", *GPTFAST],
    "nanogpt-manual-fuse-training-func": ["--workflow", "manual", "--mode", "training", "--fuse", "--gradients", "func",
                                          *NANO_TRAIN],
    "nanogpt-compile-training-autograd": ["--workflow", "compile", "--mode", "training", "--gradients", "autograd",
                                          *NANO_TRAIN],
}


def run(name: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "cgkit", "smoke", "--json", *CASES[name]], capture_output=True,
                          text=True, timeout=600)
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = {"error": (done.stderr or done.stdout)[-2000:]}
    report.pop("traceback", None)
    return {"case": name, "args": [a.replace(str(HERE) + "/", "") for a in CASES[name]],
            "returncode": done.returncode, "report": report}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(run, names):
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")
            r = row["report"]
            print(row["case"], row["returncode"], r.get("verdict"), r.get("speedup"),
                  (r.get("error") or "")[:120], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
