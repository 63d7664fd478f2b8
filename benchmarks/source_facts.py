"""Facts cgkit states about torch's own source, checked against the torch that is installed.

Each fact names a module and a pattern the references rely on (the line that makes a library call
sync, the line that writes a learning rate in place, ...). Run it with each torch you document
(2.13 here, 2.11 on the GPU machine); `tests/test_source_facts.py` runs it on every CI run.

    python benchmarks/source_facts.py [--json]
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys

# id: (module, function or class.method, regular expression that must match one line of its source)
FACTS = {
    "scheduler-fills-tensor-lr": ("torch.optim.lr_scheduler", "_update_param_group_val", r"\.fill_\("),
    "capturable-eager-warning-preset": ("torch.optim.optimizer", "Optimizer.__init__",
                                        r"self\._warned_capturable_if_run_uncaptured = True"),
    "optimizer-capture-health-check": ("torch.optim.optimizer", None, r"graph capture of step\(\) for an instance of"),
    "nn-transformer-causal-mask": ("torch.nn.modules.transformer", "_detect_is_causal_mask",
                                   r"bool\(\(mask == causal_comparison\)\.all\(\)\)"),
    "nn-transformer-nested-fast-path": ("torch.nn.modules.transformer", "TransformerEncoder.forward",
                                        r"not torch\._nested_tensor_from_mask_left_aligned\("),
    "clip-grad-error-if-nonfinite": ("torch.nn.utils.clip_grad", "_get_total_norm",
                                     r"if error_if_nonfinite and torch\.logical_or"),
    "grad-scaler-step": ("torch.amp.grad_scaler", "GradScaler._maybe_opt_step", r"\.item\(\)"),
    "pack-padded-sequence-lengths": ("torch.nn.utils.rnn", "pack_padded_sequence",
                                     r'torch\.as_tensor\(lengths, dtype=torch\.int64, device="cpu"\)'),
    "pad-packed-sequence-cpu": ("torch.nn.utils.rnn", "pad_packed_sequence", r"unsorted_indices\.cpu\(\)"),
    "distribution-validate-args": ("torch.distributions.distribution", "Distribution.__init__",
                                   r"if not torch\._is_all_true\(valid\)"),
    "dynamo-turns-validation-off": ("torch._dynamo.eval_frame", "TorchPatcher.patch",
                                    r"Distribution\.set_default_validate_args\(False\)"),
}


def check(fact_id: str) -> dict:
    module_name, qualname, pattern = FACTS[fact_id]
    module = importlib.import_module(module_name)
    target = module
    for part in (qualname or "").split(".") if qualname else ():
        target = getattr(target, part, None)
        if target is None:
            return {"id": fact_id, "found": False, "where": f"{module_name}: no {qualname}"}
    target = inspect.unwrap(target)  # functools.cache and other wrappers
    try:
        lines, start = inspect.getsourcelines(target)
        path = inspect.getsourcefile(target)
    except (OSError, TypeError) as exc:
        return {"id": fact_id, "found": False, "where": f"{module_name}.{qualname}: {exc}"}
    regex = re.compile(pattern)
    for offset, line in enumerate(lines):
        if regex.search(line):
            return {"id": fact_id, "found": True, "where": f"{path}:{start + offset}", "line": line.strip()}
    return {"id": fact_id, "found": False, "where": f"{path}: no line matches {pattern!r}"}


def main(argv: list[str]) -> int:
    import torch

    results = [check(fact) for fact in FACTS]
    if "--json" in argv:
        print(json.dumps({"torch": torch.__version__, "facts": results}))
    else:
        for r in results:
            print(f"{'ok  ' if r['found'] else 'GONE'} {r['id']:<34} {r['where']}  {r.get('line', '')}")
        print(f"torch {torch.__version__}: {sum(r['found'] for r in results)}/{len(results)} facts hold")
    return 0 if all(r["found"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
