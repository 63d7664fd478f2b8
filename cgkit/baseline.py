"""Prove a user's own graphed script against the script it came from (``cgkit smoke CANDIDATE --baseline ORIGINAL``).

Both scripts run as they are, alternated, several times, each in its own process with the same
interpreter, arguments, environment and seeds (:mod:`cgkit._probe`). What they print is the
evidence:

* Lines are matched by their text with the numbers taken out; the numbers of matched lines are
  compared with a relative and an absolute tolerance. Numbers with a time or rate unit (``ms``,
  ``s``, ``it/s``, ``tokens/s``, ``ms/step``...) are speed, not results: they are compared as speed.
  Lines printed with :func:`cgkit.emit` are matched by name. The first divergence is shown with
  both lines.
* In the candidate's process every CUDA-graph replay is counted; a candidate that never replays a
  graph is not a pass, whatever it prints.
* Speed is the baseline over the candidate: from the timing numbers the scripts print when they
  print some, else from the time each script ran; medians over the runs, with the spread.

Torch-free: the scripts (and the probe) run in child processes.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cgkit.errors import CgkitError

# A number: optional sign, digits with an optional fraction, optional exponent.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])|(?<![\w.])[-+]?(?:nan|inf)\b",
                     re.IGNORECASE)
# Units after a number that make it a time (lower is faster) or a rate (higher is faster).
_TIME_UNITS = ("ms/step", "ms/it", "ms/iter", "s/step", "s/it", "s/iter", "us/step", "ms", "us", "µs", "ns",
               "sec", "secs", "seconds", "second", "s")
_RATE_UNITS = ("it/s", "its/s", "iter/s", "steps/s", "step/s", "tokens/s", "tok/s", "samples/s", "sample/s",
               "img/s", "images/s", "seq/s", "batches/s")
_UNIT = re.compile(r"\s*(" + "|".join(re.escape(u) for u in sorted(_TIME_UNITS + _RATE_UNITS, key=len, reverse=True))
                   + r")(?![\w/])")
_PLACEHOLDER = "#"

DEFAULT_RTOL, DEFAULT_ATOL, DEFAULT_RUNS = 1e-4, 1e-5, 3


@dataclass
class Number:
    value: float
    text: str
    unit: str | None = None  # a time or rate unit: the number is speed, not a result

    @property
    def is_speed(self) -> bool:
        return self.unit is not None

    @property
    def higher_is_faster(self) -> bool:
        return self.unit in _RATE_UNITS


@dataclass
class Line:
    number: int  # 1-based line of the script's output
    text: str
    template: str  # the text with its result numbers replaced by '#'
    numbers: list[Number]
    emitted: str | None = None  # the cgkit.emit name, for emitted lines
    emitted_value: object = None


def parse_output(text: str, ignore: list[re.Pattern] | None = None) -> list[Line]:
    """The lines of a script's output that carry something to compare (blank and ignored lines dropped)."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or any(p.search(line) for p in ignore or ()):
            continue
        emitted = _emitted(line)
        if emitted is not None:
            lines.append(Line(number, line, f"emit {emitted[0]}", [], emitted[0], emitted[1]))
            continue
        numbers, template = [], []
        position = 0
        for match in _NUMBER.finditer(line):
            unit = _UNIT.match(line, match.end())
            numbers.append(Number(float(match.group()), match.group(), unit.group(1) if unit else None))
            template.append(line[position:match.start()])
            template.append(_PLACEHOLDER)
            position = match.end()
        template.append(line[position:])
        lines.append(Line(number, line, "".join(template).strip(), numbers))
    return lines


def _emitted(line: str):
    if not line.startswith('{"cgkit_emit"'):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return (data.get("cgkit_emit"), data.get("value")) if isinstance(data, dict) else None


@dataclass
class Divergence:
    reason: str
    baseline: Line | None
    candidate: Line | None

    def as_dict(self) -> dict:
        return {"reason": self.reason,
                "baseline": {"line": self.baseline.number, "text": self.baseline.text} if self.baseline else None,
                "candidate": {"line": self.candidate.number, "text": self.candidate.text} if self.candidate else None}


@dataclass
class Match:
    """Two outputs, line by line: equal within tolerance or not, and the speed numbers they share."""

    lines: int = 0  # baseline lines matched
    numbers: int = 0  # result numbers compared
    within_spread: int = 0  # numbers outside the tolerance but within the baseline's own run-to-run spread
    divergence: Divergence | None = None  # the first one; the comparison goes on for the speed numbers
    speed: list[float] = field(default_factory=list)  # baseline time / candidate time, per timing number
    extra_candidate_lines: int = 0  # lines only the candidate printed (progress, capture messages)


# (baseline line index, number index) -> (lowest, highest) value over the baseline's runs
Envelope = dict[tuple[int, int], tuple[float, float]]


def close(a: float, b: float, rtol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def align(baseline: list[Line], candidate: list[Line]) -> tuple[list[tuple[int, int]], int | None]:
    """Pairs (baseline index, candidate index) of lines with the same template, in order, and the index of
    the first baseline line the candidate lacks (None when it has them all)."""
    pairs, position = [], 0
    for i, line in enumerate(baseline):
        found = next((j for j in range(position, len(candidate)) if candidate[j].template == line.template), None)
        if found is None:
            return pairs, i
        pairs.append((i, found))
        position = found + 1
    return pairs, None


def envelope(runs: list[list[Line]]) -> Envelope:
    """How far the baseline's numbers move between its own runs (the first run is the reference)."""
    spread: dict[tuple[int, int], list[float]] = {}
    for other in runs[1:]:
        for i, j in align(runs[0], other)[0]:
            for k, (x, y) in enumerate(zip(runs[0][i].numbers, other[j].numbers, strict=False)):
                if not x.is_speed:
                    spread.setdefault((i, k), [x.value]).append(y.value)
    return {key: (min(values), max(values)) for key, values in spread.items() if max(values) > min(values)}


def compare_outputs(baseline: list[Line], candidate: list[Line], rtol: float, atol: float,
                    spread: Envelope | None = None) -> Match:
    """Each baseline line must appear in the candidate's output, in order, with close numbers (or numbers
    within the baseline's own spread between runs, when ``spread`` gives it)."""
    match = Match()
    pairs, missing = align(baseline, candidate)
    previous = -1
    for i, j in pairs:
        match.extra_candidate_lines += j - previous - 1
        previous = j
        match.lines += 1
        problem = _compare_line(i, baseline[i], candidate[j], rtol, atol, match, spread or {})
        if problem and match.divergence is None:
            match.divergence = Divergence(problem, baseline[i], candidate[j])
    if missing is not None and match.divergence is None:
        after = pairs[-1][1] + 1 if pairs else 0
        match.divergence = Divergence("a line of the baseline is missing from the candidate's output",
                                      baseline[missing], candidate[after] if after < len(candidate) else None)
    if missing is None:
        match.extra_candidate_lines += len(candidate) - previous - 1
    return match


def _compare_line(i: int, a: Line, b: Line, rtol: float, atol: float, match: Match, spread: Envelope) -> str | None:
    if a.emitted is not None:
        return _compare_values(a.emitted_value, b.emitted_value, rtol, atol, match, f"emitted `{a.emitted}`")
    for index, (x, y) in enumerate(zip(a.numbers, b.numbers, strict=True)):
        if x.is_speed:
            if x.value > 0 and y.value > 0:
                match.speed.append(y.value / x.value if x.higher_is_faster else x.value / y.value)
            continue
        match.numbers += 1
        if close(y.value, x.value, rtol, atol):
            continue
        lo, hi = spread.get((i, index), (x.value, x.value))
        if lo - (hi - lo) <= y.value <= hi + (hi - lo) and hi > lo:
            match.within_spread += 1
            continue
        return (f"number {index + 1} differs: {x.text} (baseline) vs {y.text} (candidate), rtol {rtol:g}, "
                f"atol {atol:g}" + (f", baseline's own spread {lo:g}..{hi:g}" if hi > lo else ""))
    return None


def _compare_values(a, b, rtol, atol, match: Match, what: str) -> str | None:
    flat_a, flat_b = _flatten(a), _flatten(b)
    if len(flat_a) != len(flat_b):
        return f"{what} has {len(flat_b)} values in the candidate, {len(flat_a)} in the baseline"
    for index, (x, y) in enumerate(zip(flat_a, flat_b, strict=True)):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            match.numbers += 1
            if not close(float(y), float(x), rtol, atol):
                return f"{what}[{index}] differs: {x!r} (baseline) vs {y!r} (candidate), rtol {rtol:g}, atol {atol:g}"
        elif x != y:
            return f"{what}[{index}] differs: {x!r} (baseline) vs {y!r} (candidate)"
    return None


def _flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _flatten(item)]
    if isinstance(value, dict):
        return [v for key in sorted(value) for v in _flatten(value[key])]
    return [value]


# -- running -----------------------------------------------------------------------------------------


@dataclass
class Run:
    script: str
    returncode: int
    stdout: str
    stderr: str
    wall_seconds: float
    probe: dict  # graph_captures, graph_replays, optimizer_steps, seconds (the script's own run time)
    timed_out: bool = False

    @property
    def failed(self) -> str | None:
        if self.timed_out:
            return f"{Path(self.script).name} did not finish within the timeout"
        if self.returncode != 0:
            last = (self.stderr.strip().splitlines() or ["(no error output)"])[-1]
            return f"{Path(self.script).name} exited with status {self.returncode}: {last}"
        return None


def run_script(script: Path, args: list[str], timeout: float, python: str = sys.executable) -> Run:
    with tempfile.TemporaryDirectory(prefix="cgkit-baseline-") as tmp:
        probe_out = Path(tmp) / "probe.json"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0", "CGKIT_SEED": "0",
               "CGKIT_PROBE_OUT": str(probe_out)}
        started = time.perf_counter()
        child = subprocess.Popen([python, "-m", "cgkit._probe", str(script), *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        timed_out = False
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            timed_out = True
        wall = time.perf_counter() - started
        probe = json.loads(probe_out.read_text()) if probe_out.is_file() else {}
    return Run(str(script), child.returncode, stdout, stderr, wall, probe, timed_out)


@dataclass
class BaselineResult:
    candidate: str
    baseline: str
    runs: list[tuple[Run, Run]]
    rtol: float
    atol: float
    match: Match | None = None
    baseline_nondeterministic: Divergence | None = None
    speedup: float | None = None
    speedup_spread: tuple[float, float] | None = None
    speed_source: str = ""  # "printed timings" or "run time"
    failure: str | None = None  # why it did not pass; None when it passed

    @property
    def passed(self) -> bool:
        return self.failure is None

    @property
    def replays(self) -> int:
        return max((c.probe.get("graph_replays", 0) for _, c in self.runs), default=0)

    @property
    def captures(self) -> int:
        return max((c.probe.get("graph_captures", 0) for _, c in self.runs), default=0)

    @property
    def steps(self) -> int:
        """Training steps of the baseline (its optimizer steps); 0 when it has no optimizer."""
        return max((b.probe.get("optimizer_steps", 0) for b, _ in self.runs), default=0)

    def as_dict(self) -> dict:
        data = {
            "candidate": self.candidate, "baseline": self.baseline, "passed": self.passed, "failure": self.failure,
            "runs": len(self.runs), "rtol": self.rtol, "atol": self.atol,
            "lines_matched": self.match.lines if self.match else 0,
            "numbers_compared": self.match.numbers if self.match else 0,
            "numbers_within_baseline_spread": self.match.within_spread if self.match else 0,
            "divergence": self.match.divergence.as_dict() if self.match and self.match.divergence else None,
            "baseline_nondeterministic": self.baseline_nondeterministic.as_dict()
            if self.baseline_nondeterministic else None,
            "graph_captures": self.captures, "graph_replays": self.replays, "baseline_steps": self.steps,
            "replays_per_step": round(self.replays / self.steps, 3) if self.steps else None,
            "speedup": self.speedup, "speedup_spread": list(self.speedup_spread) if self.speedup_spread else None,
            "speed_source": self.speed_source,
            "run_seconds": {"baseline": [round(b.probe.get("seconds", b.wall_seconds), 4) for b, _ in self.runs],
                            "candidate": [round(c.probe.get("seconds", c.wall_seconds), 4) for _, c in self.runs]},
        }
        return data


def prove(candidate: Path, baseline: Path, args: list[str], runs: int = DEFAULT_RUNS, rtol: float = DEFAULT_RTOL,
          atol: float = DEFAULT_ATOL, timeout: float = 900, ignore: list[str] | None = None,
          python: str = sys.executable) -> BaselineResult:
    """Run both scripts ``runs`` times, alternated, and judge the candidate against the baseline."""
    for path, role in ((candidate, "candidate"), (baseline, "--baseline")):
        if not Path(path).is_file():
            raise CgkitError(f"{role}: no such script: {path}")
    if runs < 1:
        raise CgkitError("--runs must be at least 1")
    try:
        patterns = [re.compile(p) for p in ignore or ()]
    except re.error as exc:
        raise CgkitError(f"--ignore: not a regular expression: {exc}") from None
    result = BaselineResult(str(candidate), str(baseline), [], rtol, atol)
    for _ in range(runs):
        b = run_script(Path(baseline), args, timeout, python)
        if b.failed:
            result.runs.append((b, b))
            result.failure = f"the baseline failed: {b.failed}"
            return result
        c = run_script(Path(candidate), args, timeout, python)
        result.runs.append((b, c))
        if c.failed:
            result.failure = f"the candidate failed: {c.failed}"
            return result
    _judge(result, patterns)
    return result


def _judge(result: BaselineResult, patterns) -> None:
    parsed = [(parse_output(b.stdout, patterns), parse_output(c.stdout, patterns)) for b, c in result.runs]
    baselines = [b for b, _ in parsed]
    if len(parsed) > 1:
        again = compare_outputs(baselines[0], baselines[1], result.rtol, result.atol)
        result.baseline_nondeterministic = again.divergence
    # A candidate is held to the tolerance, or to how far the baseline moves between its own runs.
    spread = envelope(baselines)
    matches = [compare_outputs(baselines[0], c, result.rtol, result.atol, spread) for _, c in parsed]
    result.match = next((m for m in matches if m.divergence), matches[0])
    speeds = [statistics.median(m.speed) for m in matches if m.speed]
    if speeds:
        result.speed_source = "printed timings"
    else:
        speeds = [b.probe.get("seconds", b.wall_seconds) / max(c.probe.get("seconds", c.wall_seconds), 1e-9)
                  for b, c in result.runs]
        result.speed_source = "run time (the scripts print no timing)"
    result.speedup = round(statistics.median(speeds), 3)
    result.speedup_spread = (round(min(speeds), 3), round(max(speeds), 3))
    if result.match.divergence:
        result.failure = f"outputs differ: {result.match.divergence.reason}"
    elif result.replays == 0:
        result.failure = "the candidate replayed no CUDA graph: it ran eagerly"
    elif result.speedup <= 1:
        result.failure = f"the candidate is not faster: {result.speedup}x the baseline's speed"


def format_result(result: BaselineResult) -> str:
    rows = [f"cgkit smoke: {Path(result.candidate).name} against {Path(result.baseline).name} "
            f"({len(result.runs)} run(s) each, alternated)"]

    def row(label, value):
        rows.append(f"  {label:<16}{value}")

    m = result.match
    if m is not None:
        if m.divergence:
            d = m.divergence
            row("outputs", f"DIFFER: {d.reason}")
            if d.baseline:
                row("", f"baseline  line {d.baseline.number}: {d.baseline.text}")
            row("", f"candidate line {d.candidate.number}: {d.candidate.text}" if d.candidate else "candidate: (no line)")
        else:
            spread = (f", {m.within_spread} of them only within the baseline's own run-to-run spread"
                      if m.within_spread else "")
            row("outputs", f"match: {m.lines} lines, {m.numbers} numbers within rtol {result.rtol:g}, "
                           f"atol {result.atol:g}{spread}" + (f" ({m.extra_candidate_lines} extra candidate lines)"
                                                              if m.extra_candidate_lines else ""))
        if result.baseline_nondeterministic:
            d = result.baseline_nondeterministic
            row("note", f"the baseline differs from itself between runs ({d.reason}); the candidate is held to that "
                        "spread where it is wider than the tolerance")
    per_step = f", {result.replays / result.steps:.2f} per optimizer step" if result.steps else ""
    row("graphs", f"{result.captures} captured, {result.replays} replays in the candidate{per_step}")
    if result.speedup is not None:
        lo, hi = result.speedup_spread
        row("speed", f"{result.speedup}x the baseline's (median of {len(result.runs)}, spread {lo}x-{hi}x; "
                     f"from {result.speed_source})")
    if result.failure:
        row("why", result.failure)
        for b, c in result.runs[-1:]:
            for run in (b, c):
                if run.failed:
                    rows.append("  output:\n" + "\n".join("    " + x for x in (run.stdout + run.stderr).splitlines()[-12:]))
    rows.append("PASSED" if result.passed else "FAILED")
    return "\n".join(rows)


def as_json(result: BaselineResult) -> str:
    return json.dumps(result.as_dict())

