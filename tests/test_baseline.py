"""`cgkit smoke CANDIDATE --baseline ORIGINAL`: the comparison machinery, on the CPU with small scripts.

Graph replays need a GPU, so here the verdict is about what the scripts print; tests/gpu proves
hand-graphed scripts against their originals on the H200.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from cgkit import baseline
from cgkit.cli import main


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_numbers_units_and_templates():
    (line,) = baseline.parse_output("step 20 loss 2.3125 lr 1e-3 | 3.09 ms/step, 310.5 tokens/s, took 2 s")
    assert line.template == "step # loss # lr # | # ms/step, # tokens/s, took # s"
    values = [(n.value, n.unit) for n in line.numbers]
    assert values == [(20, None), (2.3125, None), (0.001, None), (3.09, "ms/step"), (310.5, "tokens/s"), (2, "s")]
    assert line.numbers[4].higher_is_faster and not line.numbers[3].higher_is_faster
    (word,) = baseline.parse_output("epoch3 model_v2 acc=0.91 nan")
    assert [n.text for n in word.numbers] == ["0.91", "nan"]  # digits inside words are text


def test_matching_lines_within_tolerance_and_speed_from_timings():
    a = baseline.parse_output("start\nstep 1 loss 2.000000 time 10.0 ms\nstep 2 loss 1.500000 time 10.0 ms\n")
    b = baseline.parse_output("capturing...\nstart\nstep 1 loss 2.0000001 time 2.0 ms\nstep 2 loss 1.5 time 2.5 ms\n")
    match = baseline.compare_outputs(a, b, rtol=1e-4, atol=1e-5)
    assert match.divergence is None and match.lines == 3 and match.numbers == 4
    assert match.extra_candidate_lines == 1
    assert sorted(match.speed) == [4.0, 5.0]


def test_first_divergence_names_both_lines():
    a = baseline.parse_output("step 1 loss 2.0\nstep 2 loss 1.5\nstep 3 loss 1.2\n")
    b = baseline.parse_output("step 1 loss 2.0\nstep 2 loss 1.7\nstep 3 loss 1.6\n")
    d = baseline.compare_outputs(a, b, rtol=1e-4, atol=1e-5).divergence
    assert d.baseline.number == 2 and d.candidate.text == "step 2 loss 1.7"
    assert "number 2 differs: 1.5 (baseline) vs 1.7 (candidate)" in d.reason


def test_a_missing_line_is_a_divergence():
    a = baseline.parse_output("step 1 loss 2.0\nfinal accuracy 0.9\n")
    b = baseline.parse_output("step 1 loss 2.0\n")
    d = baseline.compare_outputs(a, b, 1e-4, 1e-5).divergence
    assert "missing" in d.reason and d.baseline.text == "final accuracy 0.9"


def test_emitted_values_are_compared_elementwise():
    a = baseline.parse_output('{"cgkit_emit": "logits", "value": [[1.0, 2.0], [3.0, 4.0]]}')
    b = baseline.parse_output('{"cgkit_emit": "logits", "value": [[1.0, 2.0], [3.0, 4.5]]}')
    d = baseline.compare_outputs(a, b, 1e-4, 1e-5).divergence
    assert "emitted `logits`[3] differs: 4.0 (baseline) vs 4.5" in d.reason


def test_emit_prints_a_json_line(capsys):
    import cgkit

    cgkit.emit("loss", 1.25)
    assert json.loads(capsys.readouterr().out) == {"cgkit_emit": "loss", "value": 1.25}


ORIGINAL = """
    import sys
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    for step in range(3):
        print(f"step {step} loss {scale / (step + 1):.6f}")
    print("took 0.5 s")
"""


def test_two_scripts_that_print_the_same_match_but_a_cpu_run_replays_no_graph(tmp_path):
    original = script(tmp_path, "original.py", ORIGINAL)
    candidate = script(tmp_path, "candidate.py", ORIGINAL.replace("0.5 s", "0.1 s"))
    result = baseline.prove(candidate, original, ["2.0"], runs=2, timeout=120)
    assert result.match.divergence is None and result.match.lines == 4
    assert result.speedup == 5.0 and result.speed_source == "printed timings"
    assert result.failure == "the candidate replayed no CUDA graph: it ran eagerly"
    assert not result.passed and len(result.runs) == 2
    text = baseline.format_result(result)
    assert "match: 4 lines" in text and "0 replays" in text and "FAILED" in text


def test_a_diverging_candidate_is_shown_at_its_line(tmp_path):
    original = script(tmp_path, "original.py", ORIGINAL)
    candidate = script(tmp_path, "candidate.py", ORIGINAL.replace("scale / (step + 1)", "scale / (step + 1) + (step == 2)"))
    result = baseline.prove(candidate, original, [], runs=1, timeout=120)
    d = result.match.divergence
    assert d.baseline.text == "step 2 loss 0.333333" and d.candidate.text == "step 2 loss 1.333333"
    assert result.failure.startswith("outputs differ: number 2 differs")


def test_a_nondeterministic_baseline_is_named(tmp_path):
    noisy = script(tmp_path, "noisy.py", "import time\nprint('value', time.perf_counter_ns() % 1000003)\n")
    result = baseline.prove(noisy, noisy, [], runs=2, timeout=120)
    assert result.baseline_nondeterministic is not None
    assert "the baseline differs from itself" in baseline.format_result(result)
    ignored = baseline.prove(noisy, noisy, [], runs=2, timeout=120, ignore=[r"^value"])
    assert ignored.match.divergence is None and ignored.baseline_nondeterministic is None


def test_the_baselines_own_spread_widens_the_tolerance():
    runs = [baseline.parse_output(f"loss {v}\n") for v in ("2.000", "2.010", "1.995")]
    spread = baseline.envelope(runs)
    assert spread == {(0, 0): (1.995, 2.01)}
    inside = baseline.compare_outputs(runs[0], baseline.parse_output("loss 2.02\n"), 1e-4, 1e-5, spread)
    assert inside.divergence is None and inside.within_spread == 1
    outside = baseline.compare_outputs(runs[0], baseline.parse_output("loss 2.1\n"), 1e-4, 1e-5, spread)
    assert "baseline's own spread 1.995..2.01" in outside.divergence.reason


def test_speed_is_read_past_the_first_divergence():
    a = baseline.parse_output("step 1 loss 2.0\nstep 2 loss 1.5\ntime 10 ms\n")
    b = baseline.parse_output("step 1 loss 2.0\nstep 2 loss 1.9\ntime 2 ms\n")
    match = baseline.compare_outputs(a, b, 1e-4, 1e-5)
    assert match.divergence.baseline.number == 2 and match.speed == [5.0]


def test_a_script_that_crashes_or_hangs_is_reported(tmp_path):
    original = script(tmp_path, "original.py", ORIGINAL)
    crash = script(tmp_path, "crash.py", "print('step 0 loss 1.0')\nraise SystemExit('boom at step 1')\n")
    result = baseline.prove(crash, original, [], runs=2, timeout=120)
    assert result.failure.startswith("the candidate failed: crash.py exited with status 1: boom at step 1")
    assert len(result.runs) == 1  # stops at the first failed run
    hang = script(tmp_path, "hang.py", "import time\ntime.sleep(60)\n")
    slow = baseline.prove(hang, original, [], runs=1, timeout=2)
    assert "did not finish within the timeout" in slow.failure


def test_cli_usage_and_json(tmp_path):
    original = script(tmp_path, "original.py", ORIGINAL)
    candidate = script(tmp_path, "candidate.py", ORIGINAL)
    runner = CliRunner()
    out = runner.invoke(main, ["smoke", str(candidate), "--baseline", str(original), "--runs", "1", "--json", "--", "3"])
    data = json.loads(out.output)
    assert out.exit_code == 1 and data["lines_matched"] == 4 and data["graph_replays"] == 0
    assert data["speed_source"].startswith("printed timings")
    assert runner.invoke(main, ["smoke", str(candidate), "--baseline", str(original), "--workflow", "manual"]).exit_code == 2
    assert runner.invoke(main, ["smoke", str(candidate), "--baseline", str(tmp_path / "none.py")]).exit_code == 2
    stray = runner.invoke(main, ["smoke", str(candidate), "extra"])
    assert stray.exit_code == 2 and "go with --baseline" in stray.output


@pytest.mark.parametrize("bad", ["[", "(?P<x"])
def test_a_bad_ignore_pattern_is_a_usage_error(tmp_path, bad):
    original = script(tmp_path, "original.py", ORIGINAL)
    with pytest.raises(baseline.CgkitError, match="--ignore: not a regular expression"):
        baseline.prove(original, original, [], ignore=[bad])
