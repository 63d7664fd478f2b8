"""On a GPU: each rule's Example really fails capture (or replays wrong), and its Use instead
captures and replays right. Each program runs in its own subprocess (a failed capture can leave
the CUDA context unusable).

Run on a CUDA machine::

    CGKIT_GPU_OUT=out python -m pytest -m gpu tests/check -q

With ``CGKIT_GPU_OUT`` set, a per-rule summary is written to ``$CGKIT_GPU_OUT/check_rules_gpu.json``
(status, error text and seconds for each program; rules that cannot be shown on one GPU are listed
with the reason).

Outcome of one program: ``failed`` (it raised, i.e. capture or replay failed), ``wrong`` (it ran,
but the rule's ``gpu_check`` found the replayed result differs from eager), ``ok``, or
``harness-error`` (a NameError-like mistake in the program itself: always a test failure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from cgkit.check import RULES

pytestmark = pytest.mark.gpu

_RUNNER = textwrap.dedent(
    r'''
    import json, sys, traceback
    spec = json.load(open(sys.argv[1]))
    out = {"status": None, "error": None}
    try:
        import torch
        ns = {"__name__": "__main__"}
        try:
            exec(compile(spec["source"], spec["name"], "exec"), ns)
            check = spec["check"]
            if check.strip() == "ok = True":
                # Default check: the program must also replay. Replay every captured graph once.
                for value in list(ns.values()):
                    if isinstance(value, torch.cuda.CUDAGraph):
                        value.replay()
                torch.cuda.synchronize()
            ns["torch"] = torch
            exec(check, ns)
            torch.cuda.synchronize()
            out["status"] = "ok" if ns.get("ok") else "wrong"
        except (NameError, SyntaxError, ImportError, AttributeError, TypeError) as exc:
            # The rule's own failure (``fails_with``) or a mistake in the program itself.
            out["status"] = "failed" if type(exc).__name__ == spec.get("fails_with") else "harness-error"
            out["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        except BaseException as exc:
            out["status"] = "failed"
            out["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-600:]
    finally:
        print("CGKIT_RESULT " + json.dumps(out), flush=True)
    '''
)

_RESULTS: dict[str, dict] = {}


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if not _gpu_available():
    pytest.skip("needs torch with a CUDA device", allow_module_level=True)


def _run(name: str, source: str, check: str, tmp_path, timeout: float = 420.0, fails_with: str | None = None) -> dict:
    spec = tmp_path / f"{name}.json"
    spec.write_text(json.dumps({"name": f"{name}.py", "source": source, "check": check, "fails_with": fails_with}),
                    encoding="utf-8")
    runner = tmp_path / "runner.py"
    runner.write_text(_RUNNER, encoding="utf-8")
    start = time.perf_counter()
    try:
        # A fresh inductor cache for each program: a compiled function's first call in a new process then
        # compiles, as on a machine that never ran the script (with a warm cache, CG507's example captures).
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"{name}-inductor-cache")}
        proc = subprocess.run(
            [sys.executable, str(runner), str(spec)], capture_output=True, text=True, timeout=timeout, check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"no result after {timeout:.0f} s", "seconds": timeout}
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith("CGKIT_RESULT "):
            result = json.loads(line[len("CGKIT_RESULT ") :])
    if result is None:  # the process died (abort in the driver, segfault): capture did not survive
        result = {"status": "failed", "error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


RUNNABLE = [code for code, rule in RULES.items() if rule.gpu_skip is None]
SKIPPED = {code: rule.gpu_skip for code, rule in RULES.items() if rule.gpu_skip is not None}


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    out_dir = os.environ.get("CGKIT_GPU_OUT")
    if not out_dir:
        return
    import torch

    os.makedirs(out_dir, exist_ok=True)
    summary = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "rules": {
            code: _RESULTS.get(code, {"skipped": SKIPPED.get(code, "not run")}) for code in RULES
        },
    }
    # Under pytest-xdist each worker writes its own part; scripts/gpu_suite.sh merges them.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    name = f"check_rules_gpu.{worker}.json" if worker else "check_rules_gpu.json"
    with open(os.path.join(out_dir, name), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2)


@pytest.mark.parametrize("code", RUNNABLE)
def test_example_fails_and_fix_works(code, tmp_path):
    rule = RULES[code]
    example = _run(f"{code}_example", rule.example, rule.gpu_check, tmp_path, fails_with=rule.fails_with)
    fixed = _run(f"{code}_use_instead", rule.use_instead, rule.gpu_check, tmp_path)
    verdict = example["status"] in ("failed", "wrong") and fixed["status"] == "ok"
    _RESULTS[code] = {"name": rule.name, "example": example, "use_instead": fixed, "confirmed": verdict}
    assert example["status"] in ("failed", "wrong"), f"{code} example did not fail or replay wrong: {example}"
    assert fixed["status"] == "ok", f"{code} use-instead did not capture and replay right: {fixed}"


@pytest.mark.parametrize("code", sorted(SKIPPED))
def test_rules_without_gpu_demo_say_why(code):
    assert len(SKIPPED[code]) > 20
    pytest.skip(f"{code}: {SKIPPED[code]}")
