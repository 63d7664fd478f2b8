"""Facts cgkit states about torch's own source, checked against the torch that is installed.

Each fact names a module and a pattern the references rely on (the line that makes a library call
sync, the line that writes a learning rate in place, ...). Run it with each torch you document
(2.13 here, 2.11 on the GPU machine); `tests/test_source_facts.py` runs it on every CI run.

A fact is one of three kinds:

* ``(module, "function or Class.method" or None, pattern)``: a line of that Python source matches.
* ``("file:<path under torch/>", None, pattern)``: a line of a file shipped in the wheel (a C++ header
  under ``include/``) matches.
* ``("lib:<library under torch/lib/>", None, "text")``: the compiled library holds (or, with
  ``ABSENT``, no longer holds) that exact text. Messages of C++ checks live only there. A CPU build
  has no ``libtorch_cuda.so``; such a fact is reported as not checkable (``"found": None``) and left
  out of ``--json``'s ``facts`` (listed under ``skipped``), not counted as holding.

An id in ``ABSENT`` holds when its text is *not* found: a check that a torch release removed.

    python benchmarks/source_facts.py [--json]
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import mmap
import re
import sys
from pathlib import Path

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
    # BatchNorm with momentum=None keeps a cumulative average: a host read of the step count.
    "batchnorm-momentum-none": ("torch.nn.modules.batchnorm", "_BatchNorm.forward",
                                r"1\.0 / float\(self\.num_batches_tracked\)"),
    # GradScaler (CG109): only _maybe_opt_step reads on the host; update() stays on the device, and an
    # optimizer that handles scaling itself (fused=True) is stepped without _maybe_opt_step.
    "grad-scaler-update-on-device": ("torch.amp.grad_scaler", "GradScaler.update", r"torch\._amp_update_scale_\("),
    "grad-scaler-fused-path": ("torch.amp.grad_scaler", "GradScaler.step",
                               r'if getattr\(optimizer, "_step_supports_amp_scaling", False\)'),
    "adam-fused-handles-scaling": ("torch.optim.adam", "Adam.__init__", r"self\._step_supports_amp_scaling = True"),
    # The device list in "If capturable=True, params and state_steps must be on supported devices: [...]".
    "capturable-supported-devices": ("torch.optim.optimizer", "_get_capturable_supported_devices",
                                     r'capturable_supported_devices = \["cuda", "xpu", "hpu"\]'),
    # make_graphed_callables: no backward capture (so no "grad requires non-empty inputs") when no
    # output requires grad; hooks refused; callables passed together share a pool, captured in run order.
    "graphed-callables-skip-empty-grad": ("torch.cuda.graphs", "make_graphed_callables", r"if len\(outputs_grad\) > 0:"),
    "autograd-grad-empty-inputs": ("torch.autograd", "grad", r"`inputs` argument to `grad\(\)` cannot be empty"),
    "graphed-callables-no-hooks": ("torch.cuda.graphs", "make_graphed_callables", r"Modules must not have hooks registered"),
    "graphed-callables-pool-order": ("torch.cuda.graphs", "make_graphed_callables",
                                     r"the safest approach is to capture all passes in the same order"),
    # FSDP2 registers a forward pre-hook on the module it wraps (so make_graphed_callables refuses it).
    "fsdp2-forward-pre-hook": ("torch.distributed.fsdp._fully_shard._fsdp_state", "FSDPState.init",
                               r"register_forward_pre_hook\("),
    # CUDAGraph Trees: one tree manager (and one memory pool) per device; non-static inputs copied in.
    "cudagraph-trees-one-pool-per-device": ("torch._inductor.cudagraph_trees", "TreeManagerContainer",
                                            r"There is a single tree manager container per device"),
    "cudagraph-trees-pool-handle": ("torch._inductor.cudagraph_trees", "CUDAGraphTreeManager.__init__",
                                    r"self\.cuda_graphs_thread_pool = torch\.cuda\.graph_pool_handle\(\)"),
    "cudagraph-trees-copy-inputs": ("torch._inductor.cudagraph_trees", "CUDAGraphNode._copy_inputs_and_remove_from_src",
                                    r"torch\._foreach_copy_\("),
    "cudagraph-trees-rerecord-limit": ("torch._inductor.config", None, r"cudagraph_unexpected_rerecord_limit = 128"),
    "mark-static-address": ("torch._dynamo.decorators", "mark_static_address",
                            r"cudagraphs will re-record"),
    "inductor-unsafe-unbacked-ops": ("torch._inductor.config", None, r"^cudagraph_unsafe_unbacked_ops"),
    # CUDAGraph(keep_graph=True): edit the raw cudaGraph_t, then instantiate() again (no re-capture).
    "cuda-graph-keep-graph": ("torch.cuda.graphs", "CUDAGraph", r"``keep_graph=True`` and access it via ``raw_cuda_graph``"),
    # Pinned host memory allocated while capturing goes to a pool private to the graph.
    "pinned-host-private-pool": ("file:include/ATen/core/CachingHostAllocator.h", None, r"^struct HostPrivatePool"),
    "pinned-host-pool-routing": ("file:include/ATen/core/CachingHostAllocator.h", None,
                                 r"= get_allocation_pool_for_current_stream\(\);"),
    # The CUDA generator during capture (C++, in the CUDA build only): since torch 2.10 (pytorch/pytorch#162505)
    # reading the state and re-setting the same seed are allowed; a new seed and clone_state() are refused.
    "rng-current-seed-check-gone": ("lib:libtorch_cuda.so", None, "Cannot call CUDAGeneratorImpl::current_seed"),
    "rng-set-state-index-check-gone": ("lib:libtorch_cuda.so", None, "utilize the CUDAGeneratorImpl::set_state_index"),
    "rng-new-seed-refused": ("lib:libtorch_cuda.so", None,
                             "set_current_seed can be called during stream capture only if new seed is the same"),
    "rng-clone-state-refused": ("lib:libtorch_cuda.so", None, "Cannot call CUDAGeneratorImpl::clone_impl"),
}

# Facts that hold when their text is gone.
ABSENT = frozenset({"rng-current-seed-check-gone", "rng-set-state-index-check-gone"})


def _torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    return Path(spec.origin).parent


def _check_lib(fact_id: str, name: str, text: str) -> dict:
    path = _torch_dir() / "lib" / name
    if not path.is_file():
        return {"id": fact_id, "found": None, "where": f"{path}: not in this build"}
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        present = data.find(text.encode()) != -1
    holds = not present if fact_id in ABSENT else present
    state = "absent" if not present else "present"
    return {"id": fact_id, "found": holds, "where": str(path), "line": f"{text!r} {state}"}


def _check_file(fact_id: str, rel: str, pattern: str) -> dict:
    path = _torch_dir() / rel
    if not path.is_file():
        return {"id": fact_id, "found": False, "where": f"{path}: no such file"}
    regex = re.compile(pattern)
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if regex.search(line):
            return {"id": fact_id, "found": True, "where": f"{path}:{number}", "line": line.strip()}
    return {"id": fact_id, "found": False, "where": f"{path}: no line matches {pattern!r}"}


def check(fact_id: str) -> dict:
    module_name, qualname, pattern = FACTS[fact_id]
    if module_name.startswith("lib:"):
        return _check_lib(fact_id, module_name[4:], pattern)
    if module_name.startswith("file:"):
        return _check_file(fact_id, module_name[5:], pattern)
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
            return {"id": fact_id, "found": True, "where": f"{path}:{(start or 1) + offset}", "line": line.strip()}
    return {"id": fact_id, "found": False, "where": f"{path}: no line matches {pattern!r}"}


def main(argv: list[str]) -> int:
    import torch

    results = [check(fact) for fact in FACTS]
    checked = [r for r in results if r["found"] is not None]
    skipped = [r for r in results if r["found"] is None]
    if "--json" in argv:
        print(json.dumps({"torch": torch.__version__, "facts": checked, "skipped": skipped}))
    else:
        for r in results:
            mark = "n/a " if r["found"] is None else "ok  " if r["found"] else "GONE"
            print(f"{mark} {r['id']:<36} {r['where']}  {r.get('line', '')}")
        print(f"torch {torch.__version__}: {sum(bool(r['found']) for r in checked)}/{len(checked)} facts hold"
              + (f" ({len(skipped)} not checkable in this build)" if skipped else ""))
    return 0 if all(r["found"] for r in checked) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
