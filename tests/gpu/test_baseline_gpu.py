"""`cgkit smoke CANDIDATE --baseline ORIGINAL` on hand-graphed scripts (gpu marker: skipped without CUDA).

tests/gpu/baseline holds a user's training loop (CNN, BatchNorm, AdamW, cosine schedule, clipping) and
inference loop, each graphed by hand, and a graphed training loop whose learning rate is a Python
float (frozen by the graph): the first two pass, the third fails at its first diverging line. Outputs
go to $CGKIT_GPU_OUT/baseline-*.txt when that variable is set.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
SCRIPTS = Path(__file__).resolve().parent / "baseline"
# capturable=True AdamW rounds differently from the default (foreach) AdamW: compare with a tolerance.
TRAIN_TOLERANCE = ["--rtol", "2e-3", "--atol", "1e-4"]


def smoke(candidate, original, *options):
    done = subprocess.run([sys.executable, "-m", "cgkit", "smoke", str(SCRIPTS / candidate), "--baseline",
                           str(SCRIPTS / original), *options, "--json"], capture_output=True, text=True, timeout=1200,
                          cwd=SCRIPTS)
    report = json.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr}
    out = os.environ.get("CGKIT_GPU_OUT")
    if out:
        with open(Path(out) / "baseline-reports.jsonl", "a") as fh:
            fh.write(json.dumps({"candidate": candidate, "options": options, "returncode": done.returncode,
                                 "report": report}) + "\n")
    return done.returncode, report


def test_hand_graphed_training_passes_against_its_original():
    code, report = smoke("train_graphed.py", "train.py", *TRAIN_TOLERANCE)
    assert code == 0, report
    assert report["graph_replays"] >= 100 and report["graph_captures"] == 1
    assert report["speedup"] > 1 and report["divergence"] is None


def test_hand_graphed_inference_passes_against_its_original():
    code, report = smoke("infer_graphed.py", "infer.py")
    assert code == 0, report
    assert report["graph_replays"] >= 50 and report["speedup"] > 1


def test_a_frozen_learning_rate_fails_at_the_first_diverging_line():
    code, report = smoke("train_graphed_frozen_lr.py", "train.py", *TRAIN_TOLERANCE)
    assert code == 1, report
    divergence = report["divergence"]
    assert divergence["baseline"]["text"].startswith("step ") and "loss" in divergence["baseline"]["text"]
    assert divergence["baseline"]["text"] != divergence["candidate"]["text"]
