"""What cgkit knows about CUDA-graph errors: one record per error, the single source of truth.

``cgkit explain`` matches these records against a user's error text, and
``references/troubleshooting.md`` is generated from them (``python -m cgkit.explain --write``), so
the command and the document cannot disagree.

Every pattern below matches a string seen in a library's source or in real output; ``seen`` says
where. ``examples`` are real messages (abridged only where they carry run-specific values) that
the tests feed to :func:`cgkit.explain.diagnose` to prove each record is found.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    id: str
    group: str  # a key of GROUPS: the section of troubleshooting.md it is listed under
    heading: str  # the error text (or its stable part) this section covers: made to be grepped
    title: str  # one line: what went wrong
    patterns: tuple[str, ...]  # case-insensitive regular expressions
    cause: str
    fix: str
    seen: str  # where the message comes from, and for which versions
    examples: tuple[str, ...]
    see: tuple[str, ...] = ()  # deeper reading: relative links from references/
    changed: str = ""  # what changed across versions, when something did
    # A fallback only shows when no other record of the same group matched (e.g. the generic
    # "skipping cudagraphs due to" line when a specific reason was recognised already).
    fallback: bool = False
    # Higher first when several records match one text; a secondary error ranks below its cause.
    rank: int = 50


GROUPS: dict[str, str] = {
    "cuda": "CUDA stream-capture errors (codes 900-908) and replay faults",
    "torch": "PyTorch capture errors: copies, RNG, optimizers, CUDAGraph objects",
    "callables": "make_graphed_callables (PyTorch and Transformer Engine)",
    "compile": "torch.compile and CUDAGraph Trees (reduce-overhead)",
    "distributed": "DDP and NCCL",
    "te": "Transformer Engine deprecations",
    "megatron": "Megatron-Core and Megatron-LM",
}

# Shown when an error is not recognised, and at the top of troubleshooting.md.
CHECKLIST: tuple[str, ...] = (
    "Run `cgkit trace --model FILE.py:build --inputs FILE.py:batch` (it runs the step and sees inside "
    "libraries) or `cgkit check FILE.py` (it reads the script): each lists host syncs, host-device copies, "
    "data-dependent shapes and other capture hazards, with the rule that explains it.",
    "Warm up the exact code that is captured (3 iterations; 11 with DDP) on the same side stream "
    "and device that the capture uses, so libraries finish their lazy set-up before capture.",
    "Capture under `torch.cuda.device(dev)` on a side stream; keep other threads from touching CUDA "
    'during capture, or use `capture_error_mode="thread_local"`.',
    "Fill static input tensors with `copy_()` outside the graph, never rebind them; clone outputs "
    "that must outlive the next replay.",
    "Run `cgkit smoke FILE.py` to prove the graph is captured, matches eager, and is faster.",
    "Search the references: `grep -rn \"<words of the error>\" references/`, then the official "
    "docs (PyTorch notes/cuda 'CUDA Graphs', Transformer Engine, Megatron-Core).",
)

_COMPAT = "patterns-compatibility.md"
_DYN = "patterns-dynamic.md"
_PT = "api-pytorch.md"
_TE = "api-te-megatron.md"

ENTRIES: tuple[Entry, ...] = (
    # ------------------------------------------------------------------ CUDA capture codes
    Entry(
        id="cuda-900-capture-unsupported",
        group="cuda",
        heading="operation not permitted when stream is capturing (cudaErrorStreamCaptureUnsupported, 900)",
        title="A call that CUDA forbids during stream capture ran inside the captured region.",
        patterns=(
            r"operation not permitted when stream is capturing",
            r"(?:cuda|hip)ErrorStreamCaptureUnsupported",
            r"CUDA (?:failure|error)[ :]*900\b",
        ),
        cause=(
            "While a stream is being captured CUDA refuses anything that would wait for the GPU or "
            "change device memory outside the graph: a host-device synchronization (`.item()`, "
            "`.cpu()`, `print(tensor)`, `torch.cuda.synchronize()`, `stream.query()`), a raw "
            "`cudaMalloc`/`cudaFree`, or a library doing its first-call set-up (cuBLAS/cuDNN "
            "workspaces, Triton autotuning, the first call of a `torch.compile` function)."
        ),
        fix=(
            "Run `cgkit check` on the script to find the sync in the captured region and replace it "
            "with device-side code (`torch.where`, tensors instead of Python numbers). Warm the "
            "exact captured path up on the capture's side stream and device before capturing, so "
            "lazy initialization happens outside the graph."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureUnsupported; surfaced by PyTorch as `CUDA error: ...`.",
        examples=(
            "RuntimeError: CUDA error: operation not permitted when stream is capturing",
            "CUDA failure 900: operation not permitted when stream is capturing",
        ),
        see=(f"{_COMPAT}#principle-2-sync-free", f"{_PT}#warm-up-before-capture"),
        rank=70,
    ),
    Entry(
        id="cuda-901-capture-invalidated",
        group="cuda",
        heading="operation failed due to a previous error during capture (cudaErrorStreamCaptureInvalidated, 901)",
        title="The capture was already broken by an earlier illegal call; this is where it surfaced.",
        patterns=(
            r"operation failed due to a previous error during capture",
            r"(?:cuda|hip)ErrorStreamCaptureInvalidated",
            r"CUDA (?:failure|error)[ :]*901\b",
        ),
        cause=(
            "A secondary error: an earlier call invalidated the capture and every later CUDA call "
            "(often `capture_end`, or a collective such as `all_reduce`) reports this. On torch "
            "2.11 a `.item()` inside `torch.cuda.graph` is reported this way. With the default "
            '`capture_error_mode="global"`, the offending call may come from another thread '
            "(a data-loader, a telemetry or NCCL watchdog thread)."
        ),
        fix=(
            "Look for the first error above this one in the log and fix that. If nothing precedes "
            "it, run `cgkit check` on the captured code, and try "
            '`torch.cuda.graph(g, capture_error_mode="thread_local")` to see whether another thread '
            "is the cause. With DDP, follow the DDP recipe (side-stream construction, 11 warm-up "
            "iterations, `TORCH_NCCL_ASYNC_ERROR_HANDLING=0`)."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureInvalidated; measured on torch 2.11 / H200 for `.item()` in capture.",
        examples=(
            "RuntimeError: CUDA error: operation failed due to a previous error during capture",
            "torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture\n"
            "CUDA kernel errors might be asynchronously reported at some other API call",
        ),
        see=(f"{_PT}#capture_error_mode-global-thread_local-relaxed", f"{_PT}#distributeddataparallel-and-nccl-under-capture"),
        rank=20,
    ),
    Entry(
        id="cuda-902-capture-merge",
        group="cuda",
        heading="operation would result in a merge of separate capture sequences (cudaErrorStreamCaptureMerge, 902)",
        title="Two independent captures were joined by a stream or event dependency.",
        patterns=(r"operation would result in a merge of separate capture sequences", r"ErrorStreamCaptureMerge"),
        cause=(
            "Work captured into one graph waited on an event or stream that belongs to a different "
            "capture in progress (two threads capturing at once, or an event recorded in one "
            "capture and waited on in another)."
        ),
        fix=(
            "Capture one graph at a time per process, and do not share events or side streams "
            "between captures. Join side streams back to the capturing stream inside the same capture."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureMerge.",
        examples=("CUDA error: operation would result in a merge of separate capture sequences",),
        see=(f"{_PT}#side-streams-inside-a-capture",),
        rank=60,
    ),
    Entry(
        id="cuda-903-capture-unmatched",
        group="cuda",
        heading="capture was not ended in the same stream as it began (cudaErrorStreamCaptureUnmatched, 903)",
        title="capture_end ran on a different stream than capture_begin.",
        patterns=(r"capture was not ended in the same stream as it began", r"ErrorStreamCaptureUnmatched"),
        cause=(
            "The current stream changed between the start and the end of the capture, typically "
            "with the low-level `CUDAGraph.capture_begin()`/`capture_end()` pair, or a "
            "`torch.cuda.set_stream()` inside the captured region that was never undone."
        ),
        fix=(
            "Use the `with torch.cuda.graph(g, stream=s):` context manager, which begins and ends on "
            "the same stream; switch streams inside it only with `with torch.cuda.stream(side):` "
            "blocks, which restore the current stream."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureUnmatched.",
        examples=("RuntimeError: CUDA error: capture was not ended in the same stream as it began",),
        see=(f"{_PT}#torchcudagraph-context-manager",),
        rank=60,
    ),
    Entry(
        id="cuda-904-capture-unjoined",
        group="cuda",
        heading="capturing stream has unjoined work (cudaErrorStreamCaptureUnjoined, 904)",
        title="A side stream forked inside the capture was not joined back before it ended.",
        patterns=(r"capturing stream has unjoined work", r"ErrorStreamCaptureUnjoined"),
        cause=(
            "Inside the capture a side stream waited on the capturing stream (so it joined the "
            "capture) and then ran work, but the capturing stream never waited for that work, so "
            "the graph has a loose end."
        ),
        fix=(
            "Before the capture ends, make the capturing stream wait for every side stream it "
            "forked: `torch.cuda.current_stream().wait_stream(side)`."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureUnjoined.",
        examples=("RuntimeError: CUDA error: capturing stream has unjoined work",),
        see=(f"{_PT}#side-streams-inside-a-capture",),
        rank=60,
    ),
    Entry(
        id="cuda-905-capture-isolation",
        group="cuda",
        heading="dependency created on uncaptured work in another stream (cudaErrorStreamCaptureIsolation, 905)",
        title="The capture waited on work that was launched before the capture started.",
        patterns=(r"dependency created on uncaptured work in another stream", r"ErrorStreamCaptureIsolation"),
        cause=(
            "Inside the capture the capturing stream waited on an event or stream whose work was "
            "recorded outside the capture; a graph cannot depend on work that is not part of it."
        ),
        fix=(
            "Do the waiting before the capture begins (e.g. `side.wait_stream(torch.cuda.current_stream())` "
            "then start capturing on `side`), and record inside the capture only events that the "
            "capture itself produces."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureIsolation.",
        examples=("CUDA error: dependency created on uncaptured work in another stream",),
        see=(f"{_PT}#side-streams-inside-a-capture",),
        rank=60,
    ),
    Entry(
        id="cuda-906-capture-implicit",
        group="cuda",
        heading="operation would make the legacy stream depend on a capturing blocking stream (cudaErrorStreamCaptureImplicit, 906)",
        title="Something used the legacy default stream while another stream was capturing.",
        patterns=(r"operation would make the legacy stream depend on a capturing blocking stream", r"ErrorStreamCaptureImplicit"),
        cause=(
            "Work was issued on the legacy default (NULL) stream during capture. Seen with "
            "conversions to NumPy, with third-party extensions that launch on the NULL stream, and "
            "with `make_graphed_callables` when a sample input carries autograd history created "
            "outside the graph, so backward runs through nodes recorded on another stream."
        ),
        fix=(
            "Keep every launch on the capturing stream (extensions must use "
            "`torch.cuda.current_stream()`). Pass detached leaf tensors as `sample_args` "
            "(`x.detach().requires_grad_(needed)`), and move NumPy conversions out of the region."
        ),
        seen="CUDA runtime error string for cudaErrorStreamCaptureImplicit.",
        examples=("RuntimeError: CUDA error: operation would make the legacy stream depend on a capturing blocking stream",),
        see=(f"{_PT}#torchcudamake_graphed_callables",),
        rank=60,
    ),
    Entry(
        id="cuda-907-captured-event",
        group="cuda",
        heading="operation not permitted on an event last recorded in a capturing stream (cudaErrorCapturedEvent, 907)",
        title="An event recorded during capture was queried or synchronized.",
        patterns=(r"operation not permitted on an event last recorded in a capturing stream", r"ErrorCapturedEvent"),
        cause=(
            "`event.query()`, `event.synchronize()` or `elapsed_time()` was called on an event "
            "recorded inside the capture, for example CUDA-event timing left inside the captured step."
        ),
        fix="Time and query events outside the captured region (record them around `g.replay()`).",
        seen="CUDA runtime error string for cudaErrorCapturedEvent.",
        examples=("CUDA error: operation not permitted on an event last recorded in a capturing stream",),
        see=(f"{_COMPAT}#principle-2-sync-free",),
        rank=60,
    ),
    Entry(
        id="cuda-908-wrong-thread",
        group="cuda",
        heading="attempt to terminate a thread-local capture sequence from another thread (cudaErrorStreamCaptureWrongThread, 908)",
        title="A thread-local capture was ended from a different thread.",
        patterns=(r"attempt to terminate a thread-local capture sequence from another thread", r"ErrorStreamCaptureWrongThread"),
        cause='With `capture_error_mode="thread_local"`, the thread that ends the capture must be the one that began it.',
        fix="Begin and end each capture on the same thread (keep the whole `with torch.cuda.graph(...)` block in one thread).",
        seen="CUDA runtime error string for cudaErrorStreamCaptureWrongThread.",
        examples=("CUDA error: attempt to terminate a thread-local capture sequence from another thread",),
        see=(f"{_PT}#capture_error_mode-global-thread_local-relaxed",),
        rank=60,
    ),
    Entry(
        id="illegal-memory-access-on-replay",
        group="cuda",
        heading="an illegal memory access was encountered (on replay)",
        title="If this appears when a graph replays: the graph touched memory that was freed or moved.",
        patterns=(r"an illegal memory access was encountered", r"cudaErrorIllegalAddress"),
        cause=(
            "This error is not specific to graphs. When it appears at replay, the graph read or "
            "wrote addresses baked in at capture that no longer hold what it expects: a static "
            "input was rebound to a new tensor and the old one freed, a graph's pool was shared "
            "with a graph that ran at the same time, or a communication buffer was released. "
            "Megatron with Transformer Engine graphs and `expandable_segments:True` needs "
            "`NCCL_GRAPH_REGISTER=0` to avoid it."
        ),
        fix=(
            "First check it reproduces without graphs (run eagerly with `CUDA_LAUNCH_BLOCKING=1`). "
            "If not: keep static inputs alive and refill them with `copy_()`, never rebind them; "
            "replay graphs that share a pool one after another, on the capture stream; keep "
            "outputs you need across replays as clones."
        ),
        seen="CUDA runtime error string for cudaErrorIllegalAddress (700); the NCCL_GRAPH_REGISTER case is asserted in Megatron-Core 0.19.2.",
        examples=("RuntimeError: CUDA error: an illegal memory access was encountered",),
        see=(f"{_COMPAT}#principle-3-static", f"{_PT}#torchcudagraph_pool_handle-and-sharing-a-memory-pool"),
        rank=10,
    ),
    # ------------------------------------------------------------------ PyTorch capture errors
    Entry(
        id="pinned-copy-during-capture",
        group="torch",
        heading="Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned",
        title="A host-device copy from pageable CPU memory ran inside the capture.",
        patterns=(r"Cannot copy between CPU and CUDA tensors during CUDA graph capture",),
        cause=(
            "The region moves data between host and device through ordinary (pageable) CPU "
            "memory: `.cpu()`, `.tolist()`, `.numpy()`, `torch.tensor([...], device=\"cuda\")`, "
            "`x.to(\"cuda\")` of a CPU tensor, or indexing a CUDA tensor with a Python list or a "
            "CPU index tensor. PyTorch refuses these during capture because the copy would not be "
            "replayed safely."
        ),
        fix=(
            "Create constants and index tensors on the device once, before capture. Feed inputs "
            "through static device tensors filled with `copy_()` outside the graph. If a "
            "host-to-device copy must be part of the graph, copy from a pinned buffer "
            "(`pin_memory=True`) that you keep alive and refill before every replay."
        ),
        seen="PyTorch C++ copy kernel (TORCH_CHECK); measured on torch 2.11 / H200 for `.cpu()`, `.tolist()`, `torch.tensor(..., device='cuda')` and CPU-index indexing.",
        examples=(
            "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU "
            "tensor is pinned. Please use tensor.pin_memory() or allocate the tensor with pin_memory=True.",
        ),
        see=(f"{_COMPAT}#principle-1-gpu-only", f"{_COMPAT}#pinned-memory-and-host-copies"),
        rank=80,
    ),
    Entry(
        id="rng-current-seed-in-capture",
        group="torch",
        heading="Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture",
        title="The CUDA RNG state was read while capturing, on a torch release before 2.10.",
        patterns=(r"Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture",),
        cause=(
            "Before torch 2.10 the CUDA generator refused to report its seed during capture. Whatever "
            "read it in the region raised this: `torch.cuda.get_rng_state()`, activation checkpointing "
            "that saves the RNG state (`preserve_rng_state=True`, the default), a library saving the "
            "state for dropout, or Dynamo compiling a new frame inside the capture (it saves the RNG "
            "state). torch 2.10 removed the check, so on 2.10 and later this message means an older torch."
        ),
        fix=(
            "Upgrade to torch 2.10 or later, where reading the state during capture is allowed. On the "
            "older release: read or save RNG state outside the capture, pass `preserve_rng_state=False` "
            "to checkpointing inside it, use `graphsafe_get_state()`/`graphsafe_set_state()` on the "
            "generator, and call compiled functions once before capturing."
        ),
        seen=(
            "PyTorch C++ `CUDAGeneratorImpl::current_seed` (`assertNotCapturing`) before 2.10; "
            "pytorch/pytorch#83148, #131782, #162504. Guarded by `benchmarks/source_facts.py` "
            "(`rng-current-seed-check-gone`, read in the CUDA build's `libtorch_cuda.so`)."
        ),
        examples=(
            "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need "
            "this call to be captured, please file an issue. Current cudaStreamCaptureStatus: "
            "cudaStreamCaptureStatusActive",
        ),
        see=(f"{_PT}#rng-under-capture-register_generator_state-and-graphsafe_get_state",),
        changed=(
            "torch 2.10 removed this check (pytorch/pytorch#162505): reading the state and setting the "
            "same seed again are allowed during capture; only a different seed is refused (see "
            "`rng-seed-in-capture`). On torch 2.11 (H200) checkpointing with the default "
            "`preserve_rng_state=True` captured and replayed (the CG410 measurement), and so did "
            "`torch.cuda.get_rng_state()` followed by `set_rng_state()` of that state, replays still drawing "
            "new numbers (benchmarks/RESULTS.md)."
        ),
        rank=80,
    ),
    Entry(
        id="rng-seed-in-capture",
        group="torch",
        heading="CUDAGeneratorImpl::set_current_seed can be called during stream capture only if new seed is the same as the original seed",
        title="The CUDA generator was given a different seed inside the capture.",
        patterns=(r"set_current_seed can be called during stream capture only if new seed is the same",),
        cause=(
            "`torch.manual_seed()` / `torch.cuda.manual_seed()`, or `torch.cuda.set_rng_state()` with a "
            "state from another seed, ran inside the captured region. Re-setting the seed the generator "
            "already has is allowed (it is what checkpointing does when it restores the state)."
        ),
        fix=(
            "Seed before capturing. A captured graph advances the generator's offset on every "
            "replay, so replays draw fresh numbers without re-seeding."
        ),
        seen="PyTorch C++ `CUDAGeneratorImpl::set_current_seed` (TORCH_CHECK), torch 2.10 and later "
        "(pytorch/pytorch#162505). Measured on one H200, torch 2.11: `torch.cuda.manual_seed(2)` in a capture "
        "after seeding with 1 raised this message; the same seed again captured.",
        examples=(
            "RuntimeError: CUDAGeneratorImpl::set_current_seed can be called during stream capture only if "
            "new seed is the same as the original seed.",
        ),
        see=(f"{_PT}#rng-under-capture-register_generator_state-and-graphsafe_get_state",),
        changed="Before torch 2.10 any seeding during capture failed with `Cannot call CUDAGeneratorImpl::set_current_seed`.",
        rank=80,
    ),
    Entry(
        id="rng-set-state-in-capture",
        group="torch",
        heading="Please ensure to utilize the CUDAGeneratorImpl::set_state_index method during capturing",
        title="The CUDA RNG state was restored with set_rng_state while capturing, on a torch release before 2.10.",
        patterns=(r"utilize the CUDAGeneratorImpl::set_state_index method during capturing",),
        cause=(
            "Before torch 2.10, `torch.cuda.set_rng_state()` (or code that restores RNG state, such as "
            "checkpointing's backward) refused to run during capture. torch 2.10 removed the check."
        ),
        fix=(
            "Upgrade to torch 2.10 or later. On the older release, restore RNG state outside the capture, or "
            "inside it use `generator.graphsafe_set_state(state)` with a state from `graphsafe_get_state()`."
        ),
        seen="PyTorch C++ `CUDAGeneratorImpl::set_state` (`assertNotCapturing`) before 2.10.",
        examples=("RuntimeError: Please ensure to utilize the CUDAGeneratorImpl::set_state_index method during capturing",),
        see=(f"{_PT}#rng-under-capture-register_generator_state-and-graphsafe_get_state",),
        changed=(
            "torch 2.10 removed this check (pytorch/pytorch#162505): `set_rng_state` during capture now "
            "sets the offset, and fails only if the state carries a different seed (`rng-seed-in-capture`)."
        ),
        rank=80,
    ),
    Entry(
        id="rng-clone-state-in-capture",
        group="torch",
        heading="Cannot call CUDAGeneratorImpl::clone_impl during CUDA graph capture",
        title="A CUDA generator's state was cloned inside the capture.",
        patterns=(r"Cannot call CUDAGeneratorImpl::clone_impl",),
        cause=(
            "`generator.clone_state()` (or anything that clones a CUDA generator) ran inside the captured "
            "region. Unlike `graphsafe_get_state()` and `graphsafe_set_state()`, cloning is refused during capture."
        ),
        fix=(
            "Clone the state before capturing and switch to it inside the capture with "
            "`graphsafe_set_state(state)`; inside the capture, read the current state with `graphsafe_get_state()`."
        ),
        seen="PyTorch C++ `CUDAGeneratorImpl::clone_impl` (`assertNotCapturing`); reported in pytorch/pytorch#170535. "
        "Measured on one H200, torch 2.11 (benchmarks/h200-2026-11-30-skill): the example below is that run's message.",
        examples=(
            "RuntimeError: Cannot call CUDAGeneratorImpl::clone_impl during CUDA graph capture. If you need this "
            "call to be captured, please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive",
        ),
        see=(f"{_PT}#rng-under-capture-register_generator_state-and-graphsafe_get_state",),
        rank=80,
    ),
    Entry(
        id="rng-generator-not-registered",
        group="torch",
        heading="Attempt to increase offset for a CUDA generator not in capture mode",
        title="A custom torch.Generator was used in capture without registering it with the graph.",
        patterns=(r"Attempt to increase offset for a CUDA generator not in capture mode",),
        cause=(
            "Random ops inside the capture used an explicit `torch.Generator(device=\"cuda\")`. "
            "Only the default generator is registered with a graph automatically."
        ),
        fix=(
            "Register the generator before capturing: `g.register_generator_state(gen)` on the "
            "`torch.cuda.CUDAGraph` (Transformer Engine and Megatron do this for their RNG "
            "trackers). Each replay then advances that generator too."
        ),
        seen="PyTorch C++ CUDAGeneratorState::increase (TORCH_CHECK); measured on torch 2.11 / H200.",
        examples=("RuntimeError: Attempt to increase offset for a CUDA generator not in capture mode.",),
        see=(f"{_PT}#rng-under-capture-register_generator_state-and-graphsafe_get_state",),
        rank=80,
    ),
    Entry(
        id="optimizer-not-capturable",
        group="torch",
        heading="Attempting CUDA graph capture of step() for an instance of ... but param_groups' capturable is False",
        title="optimizer.step() was captured, but the optimizer keeps its step count on the CPU.",
        patterns=(r"graph capture of step\(\) for an instance of \w+ but param_groups' capturable is False",),
        cause=(
            "Optimizers with a `capturable` flag (Adam, AdamW, Adamax, NAdam, RAdam, RMSprop, "
            "Rprop, Adadelta, ASGD) default to `capturable=False`, which keeps step counters on "
            "the host; a graph would bake one step count in."
        ),
        fix=(
            "Build the optimizer with `capturable=True` (e.g. `torch.optim.AdamW(params, lr=lr, "
            "capturable=True)`), run a few eager steps before capture so its state exists, and "
            "keep the learning rate in a device tensor if you schedule it. Or leave `step()` "
            "outside the graph (`cgkit scaffold --workflow callables`)."
        ),
        seen="torch/optim/optimizer.py, the capture health check run by step() (2.13); measured on torch 2.11 / H200.",
        examples=(
            "RuntimeError: Attempting CUDA graph capture of step() for an instance of AdamW but param_groups' "
            "capturable is False.",
        ),
        see=(f"{_PT}#optimizers-capturabletrue",),
        rank=80,
    ),
    Entry(
        id="optimizer-capturable-uncaptured",
        group="torch",
        heading="This instance was constructed with capturable=True ... but step() is running without CUDA graph capture",
        title="A capturable optimizer stepped eagerly (a warning that torch 2.11 and 2.13 never print).",
        patterns=(r"constructed with capturable=True or some of all the param_groups came with capturable=True",),
        cause=(
            "A `capturable=True` optimizer ran `step()` outside a graph (eager warm-up steps, or a "
            "`step()` that is never captured); capturable mode is slower when never captured. The "
            "optimizer's constructor sets the warn-once flag already, so in torch 2.11 and 2.13 this "
            "text is not printed; it comes from other builds or patched optimizers."
        ),
        fix=(
            "Expected during warm-up when `step()` is captured afterwards; ignore it. If `step()` "
            "is never captured (e.g. the callables workflow), build the optimizer without `capturable=True`."
        ),
        seen="torch/optim/optimizer.py (2.11, 2.13); not printed there: `Optimizer.__init__` sets "
        "`_warned_capturable_if_run_uncaptured = True` (measured on an H200 with 2.11: no warning over 3 eager steps).",
        examples=(
            "UserWarning: This instance was constructed with capturable=True or some of all the param_groups came "
            "with capturable=True, but step() is running without CUDA graph capture.",
        ),
        see=(f"{_PT}#optimizers-capturabletrue",),
        rank=40,
    ),
    Entry(
        id="optimizer-capturable-device",
        group="torch",
        heading="If capturable=True, params and state_steps must be on supported devices",
        title="A capturable optimizer found parameters or step counters off the GPU.",
        patterns=(
            r"If capturable=True, params[\w ,]*state_steps must be",
        ),
        cause=(
            "With `capturable=True` every parameter and every `state[\"step\"]` must live on the "
            "GPU. Typical triggers: the optimizer was created before `model.cuda()`, or its state "
            "was loaded from a checkpoint onto the CPU."
        ),
        fix=(
            "Move the model to the GPU before creating the optimizer, and load optimizer state "
            "after that (with `map_location` set to the device)."
        ),
        seen=(
            "torch/optim/{adam,adamw,...}.py in torch 2.13 ('must be on supported devices'); the list comes from "
            "`torch.optim.optimizer._get_capturable_supported_devices` (cuda, xpu, hpu, the private-use backend's "
            "name, and xla except on the foreach path); older releases said 'must be CUDA tensors'."
        ),
        examples=(
            "AssertionError: If capturable=True, params and state_steps must be on supported devices: "
            "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla'].",
            "If capturable=True, params and state_steps must be CUDA tensors.",
        ),
        see=(f"{_PT}#optimizers-capturabletrue",),
        changed="torch 2.13 words it 'must be on supported devices: [...]'; older releases 'must be CUDA tensors'.",
        rank=80,
    ),
    Entry(
        id="cuda-graph-empty",
        group="torch",
        heading="The CUDA Graph is empty. This usually means that the graph was attempted to be captured on wrong device or stream.",
        title="The capture recorded no GPU work.",
        patterns=(r"The CUDA Graph is empty",),
        cause=(
            "Nothing was launched on the capturing stream: the tensors live on another GPU than "
            "the current device (multi-GPU without `torch.cuda.device`), the work went to a "
            "different stream, an exception aborted the region before the first kernel, or the "
            "region only did CPU work. Replays then do nothing and outputs keep stale values."
        ),
        fix=(
            "Capture inside `with torch.cuda.device(model_device):`, launch on the current stream, "
            "and confirm with `cgkit smoke` that the replayed output changes with the input and "
            "matches eager."
        ),
        seen="PyTorch C++ CUDAGraph::capture_end (TORCH_WARN, a UserWarning).",
        examples=(
            "UserWarning: The CUDA Graph is empty. This usually means that the graph was attempted to be "
            "captured on wrong device or stream.",
        ),
        see=(f"{_PT}#torchcudagraph-context-manager",),
        rank=60,
    ),
    Entry(
        id="cuda-graph-already-captured",
        group="torch",
        heading="This CUDAGraph instance already owns a captured graph",
        title="A CUDAGraph object was used for a second capture.",
        patterns=(r"This CUDAGraph instance already owns a captured graph",),
        cause="`capture_begin` (or `with torch.cuda.graph(g)`) ran on a `CUDAGraph` that already holds a graph.",
        fix="Create one `torch.cuda.CUDAGraph()` per capture (one per bucket size), or call `g.reset()` before capturing into it again.",
        seen="PyTorch C++ CUDAGraph::capture_begin (TORCH_CHECK).",
        examples=(
            "RuntimeError: This CUDAGraph instance already owns a captured graph. To capture a new graph, "
            "create a new instance.",
        ),
        see=(f"{_PT}#torchcudacudagraph-methods",),
        rank=80,
    ),
    # ------------------------------------------------------------------ make_graphed_callables
    Entry(
        id="graphed-callables-autocast-cache",
        group="callables",
        heading="make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`.",
        title="make_graphed_callables ran under an autocast context with its weight cache on.",
        patterns=(r"make_graphed_callables does not support the autocast\s+caching",),
        cause=(
            "Autocast caches the low-precision copies of weights for the duration of its context; "
            "a graph would capture a cache that is gone on replay. Both PyTorch and Transformer "
            "Engine refuse it."
        ),
        fix='Enter autocast with the cache off: `with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):` (for capture and for every replay).',
        seen="torch/cuda/graphs.py (2.11, 2.13) and transformer_engine/pytorch/graph.py (2.20.2).",
        examples=(
            "RuntimeError: make_graphed_callables does not support the autocast caching. Please set "
            "`cache_enabled=False`.",
        ),
        see=(f"{_PT}#make_graphed_callables-limitations",),
        rank=80,
    ),
    Entry(
        id="graphed-callables-hooks",
        group="callables",
        heading="Modules must not have hooks registered at the time they are passed",
        title="A module given to make_graphed_callables has forward or backward hooks.",
        patterns=(r"Modules must not have hooks registered at the time they are passed",),
        cause=(
            "Hooks run Python on every call, which a graph cannot replay, so both APIs reject "
            "modules that carry `_forward_hooks`, `_forward_pre_hooks` or `_backward_hooks` "
            "(Transformer Engine also `_backward_pre_hooks`). FSDP and some profiling or "
            "summary tools add such hooks."
        ),
        fix=(
            "Remove the hooks before graphing and register them afterwards (allowed, but they "
            "then run outside the graph). With Transformer Engine, pass capture-time hooks "
            "through `capture_time_hooks`; they run outside the capture and are not replayed."
        ),
        seen="torch/cuda/graphs.py (AssertionError) and transformer_engine/pytorch/graph.py 2.20.2 (RuntimeError).",
        examples=(
            "AssertionError: Modules must not have hooks registered at the time they are passed. However, "
            "registering hooks on modules after passing them through make_graphed_callables is allowed.",
        ),
        see=(f"{_PT}#make_graphed_callables-limitations", f"{_TE}#transformer_enginepytorchmake_graphed_callables-te-220"),
        rank=80,
    ),
    Entry(
        id="graphed-callables-buffer-requires-grad",
        group="callables",
        heading="only parameters may be trainable. All buffers must have requires_grad=False",
        title="A buffer of a graphed module requires grad.",
        patterns=(r"only parameters may be trainable\.\s*All buffers must have",),
        cause="make_graphed_callables only tracks gradients of parameters and inputs; a buffer with `requires_grad=True` would be silently wrong.",
        fix="Register trainable tensors as `nn.Parameter`, and set `requires_grad_(False)` on buffers.",
        seen="torch/cuda/graphs.py and transformer_engine/pytorch/graph.py 2.20.2.",
        examples=(
            "AssertionError: In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, only "
            "parameters may be trainable. All buffers must have ``requires_grad=False``.",
        ),
        see=(f"{_PT}#make_graphed_callables-limitations",),
        rank=80,
    ),
    Entry(
        id="graphed-callables-sample-args-tensors",
        group="callables",
        heading="In the beta API, sample_args for each callable must contain only Tensors",
        title="sample_args contains something other than tensors.",
        patterns=(r"sample_args\s+for each callable must contain only Tensors",),
        cause=(
            "Graphed callables take tensors only, positionally: no Python numbers, `None`, flags "
            "or nested non-tensor objects. PyTorch's version has no keyword arguments at all."
        ),
        fix=(
            "Fix non-tensor settings when the module is built (or wrap the callable so they are "
            "constants), and pass every runtime value as a tensor. With Transformer Engine, "
            "tensors can also be passed by keyword through `sample_kwargs`."
        ),
        seen="torch/cuda/graphs.py (AssertionError) and transformer_engine/pytorch/graph.py 2.20.2 (TypeError).",
        examples=(
            "AssertionError: In the beta API, sample_args for each callable must contain only Tensors. Other "
            "types are not allowed.",
        ),
        see=(f"{_PT}#torchcudamake_graphed_callables",),
        rank=80,
    ),
    Entry(
        id="graphed-callables-grad-empty-inputs",
        group="callables",
        heading="`inputs` argument to `grad()` cannot be empty (older: grad requires non-empty inputs)",
        title="make_graphed_callables found outputs that need a gradient but no input or parameter to take it.",
        patterns=(r"`?inputs`? argument to `?grad\(\)`? cannot be empty", r"grad requires non-empty inputs"),
        cause=(
            "The backward capture differentiates the outputs only with respect to the sample inputs that "
            "require grad and, for an `nn.Module`, its parameters. A callable whose outputs require grad "
            "through something else, typically a plain function that uses parameters it closes over, "
            "leaves that list empty. A callable whose outputs need no gradient at all no longer gets a "
            "backward graph (pytorch/pytorch#124582, fixed by #128483), so it does not raise this."
        ),
        fix=(
            "Pass the `nn.Module` that owns the parameters (its parameters are then differentiated), or "
            "give the sample input `requires_grad=True` if its gradient is needed; graph a callable that "
            "needs no gradient under `torch.no_grad()` or with `torch.cuda.graph`."
        ),
        seen=(
            "torch/autograd/__init__.py `grad` ('`inputs` argument to `grad()` cannot be empty.', torch 2.13); "
            "older releases raised ValueError 'grad requires non-empty inputs.' from the autograd engine. "
            "torch/cuda/graphs.py `make_graphed_callables` skips the backward capture when no output "
            "requires grad (2.11, 2.13)."
        ),
        examples=(
            "RuntimeError: `inputs` argument to `grad()` cannot be empty.",
            "ValueError: grad requires non-empty inputs.",
        ),
        see=(f"{_PT}#torchcudamake_graphed_callables",),
        changed=(
            "The Python check in `torch.autograd.grad` now words it '`inputs` argument to `grad()` cannot "
            "be empty.' (RuntimeError); older releases said 'grad requires non-empty inputs.' (ValueError)."
        ),
        rank=70,
    ),
    Entry(
        id="te-graphed-kwarg-missing",
        group="callables",
        heading="Graphed callable was initialized with kwarg ... but it was not provided in graph replay",
        title="A Transformer Engine graphed callable was called without a keyword it was captured with.",
        patterns=(r"Graphed callable was initialized with kwarg",),
        cause="Every key in `sample_kwargs` is part of the graph's static input surface and must be passed again on every call.",
        fix="Call the graphed module with exactly the keyword arguments given in `sample_kwargs` (same keys, tensors of the same shape).",
        seen="transformer_engine/pytorch/graph.py 2.20.2 (TypeError).",
        examples=(
            "TypeError: Graphed callable was initialized with kwarg attention_mask ,but it was not provided in graph replay",
        ),
        see=(f"{_TE}#sample_kwargs-and-keyword-inputs",),
        rank=80,
    ),
    Entry(
        id="te-graphed-mixed-training-mode",
        group="callables",
        heading="make_graphed_callables only supports when modules are all in training or all in inference mode",
        title="Transformer Engine was given a mix of train() and eval() modules.",
        patterns=(r"make_graphed_callables only supports when modules are all in training or all in",),
        cause="All modules graphed in one call must share one `training` flag.",
        fix="Call `.train()` (or `.eval()`) on all of them before `make_graphed_callables`, or graph the two groups in separate calls.",
        seen="transformer_engine/pytorch/graph.py 2.20.2 (RuntimeError).",
        examples=(
            "RuntimeError: make_graphed_callables only supports when modules are all in training or all in "
            "inference mode.",
        ),
        see=(f"{_TE}#transformer_enginepytorchmake_graphed_callables-te-220",),
        rank=80,
    ),
    # ------------------------------------------------------------------ torch.compile / trees
    Entry(
        id="compile-skip-mutated-inputs",
        group="compile",
        heading="skipping cudagraphs due to mutated inputs",
        title="The compiled function changes one of its inputs in place.",
        patterns=(r"skipping cudagraphs due to mutated inputs", r"skipping cudagraphs due to input storage mutation"),
        cause=(
            "CUDAGraph Trees allow in-place updates of parameters, buffers and tensors they own, "
            "but not of other inputs (`x.add_(1)`, `out.copy_(...)` on an argument); "
            "`input storage mutation` is the same for `set_()` on an input (reported on torch 2.13)."
        ),
        fix=(
            "Return a new tensor instead of writing into the argument, or make the state a "
            "registered buffer. The `Found from :` stack trace in the message points to the mutation."
        ),
        seen="torch/_inductor/cudagraph_utils.py and output_code.py (2.11, 2.13); measured on torch 2.11 / H200.",
        examples=("skipping cudagraphs due to mutated inputs (1 instances). Found from : \n File \"train.py\", line 12",),
        see=(f"{_PT}#torchcompile-modereduce-overhead-and-cudagraph-trees", f"{_COMPAT}#principle-3-static"),
        changed="`input storage mutation` is new after torch 2.11.",
        rank=70,
    ),
    Entry(
        id="compile-skip-cpu-device",
        group="compile",
        heading="skipping cudagraphs due to cpu device",
        title="A CPU tensor or CPU op is part of the compiled graph.",
        patterns=(r"skipping cudagraphs due to cpu device",),
        cause=(
            "An input or an operation of the compiled graph is on the CPU (a host scalar tensor, a "
            "mask built on the CPU). With graph partitioning on (the default in torch 2.11 and "
            "2.13) CPU ops are split out instead and this whole-graph skip only appears when "
            "`torch._inductor.config.graph_partition` is False."
        ),
        fix="Move the tensor to the GPU once, outside the step; the message names the argument and its stack trace.",
        seen="torch/_inductor/cudagraph_utils.py (2.11, 2.13).",
        examples=("skipping cudagraphs due to cpu device (arg7_1). Found from : ...",),
        see=(f"{_PT}#graph-partitioning-graph_partition", f"{_COMPAT}#principle-1-gpu-only"),
        rank=70,
    ),
    Entry(
        id="compile-skip-multiple-devices",
        group="compile",
        heading="skipping cudagraphs due to multiple devices",
        title="The compiled graph spans more than one GPU.",
        patterns=(r"skipping cudagraphs due to multiple devices",),
        cause="Tensors of one compiled graph live on different devices (e.g. pipeline stages in one function).",
        fix="Compile each device's part as its own function, so each graph sees one device.",
        seen="torch/_inductor/cudagraph_utils.py (2.11, 2.13).",
        examples=("skipping cudagraphs due to multiple devices: cuda:0, cuda:1",),
        see=(f"{_PT}#torchcompile-modereduce-overhead-and-cudagraph-trees",),
        rank=70,
    ),
    Entry(
        id="compile-skip-incompatible-op",
        group="compile",
        heading="skipping cudagraphs due to incompatible op",
        title="The compiled graph contains an op that cannot be captured.",
        patterns=(r"(?:skipping|disabling) cudagraphs due to incompatible op", r"\['incompatible ops'\]"),
        cause=(
            "The graph contains `.item()` (`aten._local_scalar_dense`), an op tagged "
            "`cudagraph_unsafe`, boolean-mask `index_put`, or ops with data-dependent output "
            "sizes. On torch 2.11 and 2.13 with graph partitioning on (the default) these "
            "segments run eagerly between graphs and the whole-graph skip appears only with "
            "`graph_partition=False` or with `backend=\"cudagraphs\"`."
        ),
        fix=(
            "Remove the host read: keep the value as a tensor (`torch.where`, masked arithmetic) "
            "instead of `.item()`; sample with an on-device method instead of ops that sync. "
            "`cgkit check` lists these ops."
        ),
        seen="torch/_inductor/utils.py, compile_fx.py, _dynamo/backends/cudagraphs.py (2.13).",
        examples=(
            "skipping cudagraphs due to disabling cudagraphs due to incompatible op aten._local_scalar_dense.default",
            "skipping cudagraphs due to ['incompatible ops']",
        ),
        see=(f"{_COMPAT}#principle-2-sync-free", f"{_PT}#graph-partitioning-graph_partition"),
        rank=70,
    ),
    Entry(
        id="compile-skip-dynamic-shapes",
        group="compile",
        heading="skipping cudagraphs due to graph with symbolic shapes inputs and config.triton.cudagraph_skip_dynamic_graphs=True",
        title="Dynamic-shape graphs were excluded from CUDA graphs by configuration.",
        patterns=(r"graph with symbolic shapes inputs and config\.triton\.cudagraph_skip_dynamic_graphs=True",),
        cause="`torch._inductor.config.triton.cudagraph_skip_dynamic_graphs=True` and the function was compiled with dynamic shapes.",
        fix=(
            "Either accept eager for this function, or pad inputs to a few fixed sizes and leave "
            "the option off: CUDAGraph Trees then record one graph per size."
        ),
        seen="torch/_inductor/compile_fx.py (2.13; shown only when graph partitioning is off).",
        examples=("skipping cudagraphs due to graph with symbolic shapes inputs and config.triton.cudagraph_skip_dynamic_graphs=True.",),
        see=(f"{_DYN}#dynamic-shapes-buckets-and-padding",),
        rank=70,
    ),
    Entry(
        id="compile-skip-control-flow",
        group="compile",
        heading="skipping cudagraphs due to control flow operator: torch.cond / torch.while_loop",
        title="torch.cond or torch.while_loop turned CUDA graphs off for the compiled graph.",
        patterns=(r"control flow operator: torch\.(?:cond|while_loop)",),
        cause=(
            "Inductor does not capture `torch.cond`; on torch 2.13 this disables CUDA graphs for "
            "the graph even with partitioning on (`torch.while_loop` only with partitioning off)."
        ),
        fix=(
            "Compute both branches and select with `torch.where` when they are cheap, or move the "
            "branch outside the compiled function (one compiled function per branch)."
        ),
        seen="torch/_inductor/lowering.py (2.13).",
        examples=("skipping cudagraphs due to control flow operator: torch.cond.",),
        see=(f"{_DYN}#data-dependent-control-flow",),
        rank=70,
    ),
    Entry(
        id="compile-skip-non-tensor-inputs",
        group="compile",
        heading="skipping cudagraphs due to non-Tensor inputs",
        title="The compiled graph takes inputs that are not tensors.",
        patterns=(r"skipping cudagraphs due to \[?'?non-Tensor inputs",),
        cause="A graph input is a Python number or another non-tensor that Inductor could not specialize away.",
        fix="Pass such values as device tensors (a 0-d tensor updated with `fill_`/`copy_`) or make them constants.",
        seen="torch/_inductor/output_code.py (2.13).",
        examples=("skipping cudagraphs due to ['non-Tensor inputs']",),
        see=(f"{_DYN}#python-scalars-as-device-tensors",),
        rank=70,
    ),
    Entry(
        id="compile-skip-uncached-allocator",
        group="compile",
        heading="skipping cudagraphs due to cudagraph capture requires the caching allocator; current allocator is uncached",
        title="The CUDA caching allocator is disabled.",
        patterns=(r"cudagraph capture requires the caching allocator",),
        cause="`PYTORCH_NO_CUDA_MEMORY_CACHING` is set, or `torch.cuda.caching_allocator_enable(False)` was called; graph pools need the caching allocator.",
        fix="Unset `PYTORCH_NO_CUDA_MEMORY_CACHING` (it is a debugging switch) for runs that use CUDA graphs.",
        seen="torch/_inductor/cudagraph_utils.py (new after torch 2.11).",
        examples=("skipping cudagraphs due to cudagraph capture requires the caching allocator; current allocator is uncached",),
        see=(f"{_PT}#torchcompile-modereduce-overhead-and-cudagraph-trees",),
        changed="New after torch 2.11.",
        rank=70,
    ),
    Entry(
        id="compile-skip-other",
        group="compile",
        heading="skipping cudagraphs due to ... (other reasons)",
        title="CUDAGraph Trees skipped a compiled graph for a reason cgkit has no dedicated entry for.",
        patterns=(r"skipping cudagraphs due to",),
        cause=(
            "Inductor logs one line per compiled graph it does not capture. Less common reasons "
            "in torch 2.13 include boolean-index `index_put_` fallbacks, sparse outputs, "
            "`cpp-wrapper does not support graph partition yet`, and the bisector; torch 2.11 "
            "also reports `complex memory overlap`."
        ),
        fix=(
            "Read the reason after `due to`; set `TORCH_LOGS=cudagraphs` for every skip, or "
            "`torch._inductor.config.triton.cudagraph_or_error=True` to turn skips into errors "
            "with a stack trace."
        ),
        seen="torch/_inductor/cudagraph_utils.py `format_default_skip_message` (2.11, 2.13).",
        examples=("skipping cudagraphs due to sparsity not handled. Please file issue for sparse inference weights.",),
        see=(f"{_PT}#inductor-cudagraph-options",),
        fallback=True,
        rank=5,
    ),
    Entry(
        id="compile-rerecord-limit",
        group="compile",
        heading="skipping cudagraph due to function ... exceeding max re-recording limit / static input data pointer changed",
        title="CUDAGraph Trees kept re-recording because input addresses changed, then gave up.",
        patterns=(
            r"exceeding max re-recording limit",
            r"static input data pointer changed",
            r"cudagraph managed tensor data pointer changed",
            r"expected dead indices before graph are live",
        ),
        cause=(
            "A graph is only valid for the addresses it captured. When a parameter or buffer is "
            "rebound to a new tensor (`self.buf = new` instead of `self.buf.copy_(new)`), or a "
            "tensor the trees own is still alive when it should be dead, the trees re-record; after "
            "`triton.cudagraph_unexpected_rerecord_limit` (128) re-records the function runs "
            "eagerly for good."
        ),
        fix=(
            "Update parameters and buffers in place (`copy_`, `fill_`, `zero_`), never rebind them. "
            "The message names the input (`input name: ... data pointer changed from X to Y`)."
        ),
        seen="torch/_inductor/cudagraph_trees.py and cudagraph_utils.py (2.11, 2.13).",
        examples=(
            "skipping cudagraph due to function 0 exceeding max re-recording limit (=128) on cudagraph node 3 "
            "due to static input data pointer changed.",
        ),
        see=(f"{_COMPAT}#principle-3-static",),
        rank=75,
    ),
    Entry(
        id="compile-dynamic-shape-many-graphs",
        group="compile",
        heading="CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size",
        title="CUDAGraph Trees recorded a graph for many different input sizes.",
        patterns=(r"CUDAGraph supports dynamic shapes by recording a new graph for each",),
        cause=(
            "Each new input shape records a new graph (more memory, more capture time). Typical "
            "cause: padding each batch to its own longest sequence."
        ),
        fix=(
            "Pad inputs to a few fixed sizes (buckets), or set "
            "`torch._inductor.config.triton.cudagraph_skip_dynamic_graphs=True` to keep dynamic "
            "functions eager. `triton.cudagraph_dynamic_shape_warn_limit` (default 8; None "
            "silences it) sets when the warning appears."
        ),
        seen="torch/_inductor/cudagraph_utils.py `maybe_warning_due_to_dynamic_shape` (2.11, 2.13).",
        examples=(
            "CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size. Recording "
            "too many CUDAGraphs may lead to extra overhead. We have observed 9 distinct sizes.",
        ),
        see=(f"{_DYN}#dynamic-shapes-buckets-and-padding",),
        rank=70,
    ),
    Entry(
        id="compile-output-overwritten",
        group="compile",
        heading="Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run",
        title="A kept output of a reduce-overhead function was overwritten by a later call.",
        patterns=(r"accessing (?:gradient )?tensor output of CUDAGraphs that has been overwritten",),
        cause=(
            "Outputs of CUDAGraph Trees live in the graph's memory pool; the next replay of the "
            "same graph writes into the same memory, and so can a call of another reduce-overhead "
            "function (measured with torch 2.11 on an H200, benchmarks/compile_hazards.py). Holding an "
            "output across calls (a list of step outputs, a logits history) and reading it later hits "
            "this; `cgkit check` reports the line that keeps it (CG407). The gradient form appears with "
            "gradient accumulation when `.grad` was allocated during capture."
        ),
        fix=(
            "`.clone()` outputs you keep beyond the next call (outside the compiled function). "
            "`torch.compiler.cudagraph_mark_step_begin()` marks where a new iteration starts, "
            "which makes the overwrite expected, but it does not preserve the old values. For "
            "gradients: allocate `.grad` in an eager warm-up step before capture, or set `.grad` "
            "to None before each backward."
        ),
        seen="torch/_inductor/cudagraph_trees.py `format_dealloc_msg` (2.13).",
        examples=(
            "RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent "
            "run. Stack trace: File \"gen.py\", line 40. To prevent overwriting, clone the tensor outside of "
            "torch.compile() or call torch.compiler.cudagraph_mark_step_begin() before each model invocation.",
        ),
        see=(f"{_PT}#torchcompilercudagraph_mark_step_begin",),
        rank=80,
    ),
    Entry(
        id="compile-module-not-importable",
        group="compile",
        heading="InternalTorchDynamoError: ModuleNotFoundError: No module named",
        title="torch.compile could not import, by name, the module of code it inlines.",
        patterns=(r"InternalTorchDynamoError: ModuleNotFoundError: No module named",),
        cause=(
            "To read the globals of a function it inlines, Dynamo imports that function's module by "
            "its `__name__`. A module loaded from a file path (`importlib.util.spec_from_file_location` "
            "and `exec_module`) without an entry in `sys.modules` cannot be imported again. Compiling the "
            "model itself can work while a compiled function that calls into the model fails: seen with "
            "nanoGPT's model file under a compiled `torch.func.grad_and_value` (benchmarks/h200-2026-12-01-func)."
        ),
        fix=(
            "Register the module before running it: `sys.modules[spec.name] = module`, then "
            "`spec.loader.exec_module(module)`; or put its folder on `sys.path` and import it normally. "
            "cgkit's recipes load `--model FILE.py:fn` that way."
        ),
        seen="torch/_dynamo/symbolic_convert.py `import_source` calling `importlib.import_module` "
             "(real output, 2.11 on an H200 and 2.13 on a CPU).",
        examples=("torch._dynamo.exc.InternalTorchDynamoError: ModuleNotFoundError: No module named 'nanogpt_model'",),
        see=(f"{_PT}#compile-training-gradients-from-torchfunc-the-optimizer-step-compiled-too",),
        rank=60,
    ),
    Entry(
        id="func-grad-mutates-captured-tensor",
        group="compile",
        heading="During a grad (vjp, jvp, grad, etc) transform, the function provided attempted to call in-place operation",
        title="The model writes in place to a tensor that torch.func.grad did not receive as an input.",
        patterns=(r"transform, the function provided attempted to call in-place operation",),
        cause=(
            "Inside `torch.func.grad` (the compile recipe's training step, `manual --fuse --gradients func`), a "
            "function may write in place only to tensors passed to it. A forward that updates a tensor it holds "
            "(BatchNorm's running statistics when buffers are not passed in, a cache or counter kept as a plain "
            "attribute) mutates a captured tensor, which the transform refuses."
        ),
        fix=(
            "Register such state as a buffer (`self.register_buffer(...)`): cgkit's recipes pass every buffer to "
            "the transformed function, where in-place updates are allowed. Or render the recipe with "
            "`--gradients autograd`, which runs the compiled forward and `loss.backward()`."
        ),
        seen="Real output of torch 2.13 on a CPU, BatchNorm2d with its buffers captured "
             "(benchmarks/h200-2026-12-01-func/NOTES.md).",
        examples=(
            "RuntimeError: During a grad (vjp, jvp, grad, etc) transform, the function provided attempted to call "
            "in-place operation (aten::add_.Tensor) that would mutate a captured Tensor. This is not supported; "
            "please rewrite the function being transformed to explicitly accept the mutated Tensor(s) as inputs.",
        ),
        see=(f"{_PT}#compile-training-gradients-from-torchfunc-the-optimizer-step-compiled-too",),
        rank=60,
    ),
    Entry(
        id="backward-op-not-differentiable",
        group="compile",
        heading="derivative for aten::..._backward is not implemented",
        title="A backward kernel was differentiated again, and it has no derivative.",
        patterns=(r"derivative for aten::\w+_backward is not implemented",),
        cause=(
            "Something asked for the gradient of a gradient: `create_graph=True`, or a compiled function "
            "that computes gradients (`torch.func.grad`, `torch.autograd.grad`) while grad mode is on, so "
            "AOTAutograd prepares to differentiate its outputs too. Fused kernels' backward ops, such as "
            "the cuDNN attention backward, have no derivative."
        ),
        fix=(
            "When nothing differentiates the gradients, compile the gradient function under "
            "`torch.no_grad()`: `torch.func.grad` still differentiates inside it, and Inductor compiles an "
            "inference graph. For a real double backward, pick an attention backend that supports it."
        ),
        seen="Real output of torch 2.11 on an H200 (a GPT with scaled_dot_product_attention, "
             "benchmarks/h200-2026-12-01-func/NOTES.md).",
        examples=(
            "BackendCompilerFailed: backend='inductor' raised:\nRuntimeError: derivative for "
            "aten::_scaled_dot_product_cudnn_attention_backward is not implemented",
        ),
        see=(f"{_PT}#compile-training-gradients-from-torchfunc-the-optimizer-step-compiled-too",),
        rank=60,
    ),
    Entry(
        id="compile-pending-backward",
        group="compile",
        heading="Unable to hit fast path of CUDAGraphs because outputs from a previous step still require backward",
        title="A compiled forward that needs grad ran again before its backward.",
        patterns=(
            r"Unable to hit fast path of CUDAGraphs because outputs from a previous step",
            r"Unable to (?:hit fast path|end warm up phase) of CUDAGraphs because of pending, uninvoked backwards",
        ),
        cause=(
            "Outputs of the previous call still require grad and their backward never ran: "
            "typically inference without `torch.no_grad()`, or a forward whose loss is dropped."
        ),
        fix=(
            "Run inference under `torch.no_grad()` or `torch.inference_mode()`; in training call "
            "backward for each forward, or detach outputs you do not train on. Call "
            "`torch.compiler.cudagraph_mark_step_begin()` at the start of each iteration."
        ),
        seen="torch/_inductor/cudagraph_trees.py (2.13 wording); the 'pending, uninvoked backwards' wording is from older releases (pytorch/pytorch#101129).",
        examples=(
            "UserWarning: Unable to hit fast path of CUDAGraphs because outputs from a previous step still "
            "require backward. Ensure backward() is invoked or detach outputs.",
            "Unable to hit fast path of CUDAGraphs because of pending, uninvoked backwards. Consider running "
            "with torch.no_grad()",
        ),
        see=(f"{_PT}#torchcompilercudagraph_mark_step_begin",),
        changed="Older releases said 'because of pending, uninvoked backwards'.",
        rank=70,
    ),
    # ------------------------------------------------------------------ distributed
    Entry(
        id="nccl-async-error-handling-name",
        group="distributed",
        heading="Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead",
        title="The legacy NCCL_ASYNC_ERROR_HANDLING name was used.",
        patterns=(r"NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING",),
        cause=(
            "ProcessGroupNCCL reads `TORCH_NCCL_ASYNC_ERROR_HANDLING` first and falls back to the "
            "old name with a one-time warning. The PyTorch CUDA-graph notes still show the old name "
            "in their DDP recipe."
        ),
        fix="Set `TORCH_NCCL_ASYNC_ERROR_HANDLING=0` before `init_process_group` when capturing DDP's backward, and drop the old variable.",
        seen="torch include/torch/csrc/distributed/c10d/Utils.hpp and ProcessGroupNCCL.hpp (2.11, 2.13).",
        examples=("Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead",),
        see=(f"{_PT}#distributeddataparallel-and-nccl-under-capture",),
        rank=60,
    ),
    # ------------------------------------------------------------------ Transformer Engine
    Entry(
        id="te-deprecated-fp8-kwargs",
        group="te",
        heading="make_graphed_callables has deprecated `fp8_enabled` kwarg in favor of `enabled` (TE 2.9+)",
        title="Transformer Engine's make_graphed_callables was called with the pre-2.9 fp8_* argument names.",
        patterns=(r"make_graphed_callables has deprecated `fp8_\w+` kwarg",),
        cause=(
            "TE 2.9 renamed the arguments: `fp8_enabled` -> `enabled`, `fp8_recipe` -> `recipe`, "
            "`fp8_group` -> `amax_reduction_group`, `fp8_weight_caching` -> "
            "`cache_quantized_params`, `fp8_calibrating` -> `calibrating`. The old names still "
            "work with a DeprecationWarning; passing an old and its new name together raises "
            "ValueError ('... but both kwargs are set')."
        ),
        fix=(
            "Use the new names. Megatron-Core 0.19.2 itself still passes the old names, so the "
            "warning is expected there and harmless."
        ),
        seen="transformer_engine/pytorch/graph.py 2.20.2.",
        examples=(
            "DeprecationWarning: make_graphed_callables has deprecated `fp8_enabled` kwarg in favor of `enabled`. "
            "`fp8_enabled` will be removed in a future release.",
            "ValueError: make_graphed_callables has deprecated `fp8_recipe` kwarg in favor of `recipe`, but both "
            "kwargs are set.",
        ),
        see=(f"{_TE}#renamed-arguments-fp8_enabled-to-enabled-te-29",),
        changed="Renamed in TE 2.9; the old names are still accepted in 2.20.2.",
        rank=70,
    ),
    Entry(
        id="te-fp8-autocast-deprecated",
        group="te",
        heading="fp8_autocast is deprecated and will be removed in a future release / fp8_model_init is deprecated",
        title="Transformer Engine's fp8_autocast or fp8_model_init was used.",
        patterns=(r"fp8_autocast is deprecated and will be removed", r"fp8_model_init is deprecated and will be removed"),
        cause="`te.pytorch.fp8_autocast` became `te.pytorch.autocast`, and `fp8_model_init` became `quantized_model_init`.",
        fix=(
            "Use `transformer_engine.pytorch.autocast(enabled=True, recipe=recipe, "
            "amax_reduction_group=group)` and `transformer_engine.pytorch.quantized_model_init(enabled=True, recipe=recipe)`."
        ),
        seen="transformer_engine/pytorch/quantization.py 2.20.2.",
        examples=(
            "DeprecationWarning: fp8_autocast is deprecated and will be removed in a future release. Use "
            "autocast(enabled=..., calibrating=..., recipe=..., group=..., _graph=...) instead.",
        ),
        see=(f"{_TE}#transformer_enginepytorchautocast-replaces-fp8_autocast",),
        changed="Deprecated in TE 2.9 along with the make_graphed_callables renames.",
        rank=70,
    ),
    # ------------------------------------------------------------------ Megatron
    Entry(
        id="mcore-rng-tracker",
        group="megatron",
        heading="RNG tracker does not support cudagraphs!",
        title="Megatron's local CUDA graphs need a graph-safe RNG tracker.",
        patterns=(r"RNG tracker does not support cudagraphs",),
        cause=(
            "`CudaGraphManager` (`cuda_graph_impl=\"local\"`) asserts that the RNG tracker is "
            "Transformer Engine's, or Megatron's own created with `use_cudagraphable_rng=True`."
        ),
        fix=(
            "With Megatron-LM pass `--te-rng-tracker` (validate_args already turns it on when the "
            "impl or transformer impl is transformer_engine). In your own setup call "
            "`model_parallel_cuda_manual_seed(seed, te_rng_tracker=True)` or "
            "`model_parallel_cuda_manual_seed(seed, use_cudagraphable_rng=True)`."
        ),
        seen="megatron/core/transformer/cuda_graphs.py 0.19.2.",
        examples=("AssertionError: RNG tracker does not support cudagraphs!",),
        see=(f"{_TE}#megatron-rng-tracker-and---te-rng-tracker",),
        rank=80,
    ),
    Entry(
        id="mcore-full-iteration-nan-check",
        group="megatron",
        heading="--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration",
        title="Full-iteration graphs need the host-side NaN check off.",
        patterns=(r"--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration",),
        cause="The NaN check reads the loss on the host every iteration, a sync that cannot be inside a captured iteration.",
        fix="Add `--no-check-for-nan-in-loss-and-grad` when using `--cuda-graph-impl full_iteration`.",
        seen="megatron/training/arguments.py 0.19.2 (validate_args).",
        examples=(
            "AssertionError: --no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training.",
        ),
        see=(f"{_TE}#megatron-fullcudagraphwrapper-cuda_graph_implfull_iteration",),
        rank=80,
    ),
    Entry(
        id="mcore-full-iteration-modules",
        group="megatron",
        heading="--cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration",
        title="Full-iteration capture takes no per-module scope.",
        patterns=(r"--cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration",),
        cause="`full_iteration` captures the whole forward-backward; `--cuda-graph-modules` only applies to per-layer capture.",
        fix="Drop `--cuda-graph-modules` (and the deprecated `--cuda-graph-scope`) with `--cuda-graph-impl full_iteration`.",
        seen="megatron/training/arguments.py 0.19.2.",
        examples=("AssertionError: --cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration.",),
        see=(f"{_TE}#megatron---cuda-graph-modules-replaces---cuda-graph-scope",),
        rank=80,
    ),
    Entry(
        id="mcore-nccl-graph-register",
        group="megatron",
        heading="Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        title="Transformer Engine graphs with expandable segments need NCCL_GRAPH_REGISTER=0.",
        patterns=(r"NCCL_GRAPH_REGISTER=0 to avoid illegal memory access",),
        cause=(
            "Megatron asserts this for `--cuda-graph-impl transformer_engine` when "
            "`PYTORCH_CUDA_ALLOC_CONF` contains `expandable_segments:True`: NCCL's graph buffer "
            "registration and expandable segments together lead to illegal memory accesses."
        ),
        fix="Export `NCCL_GRAPH_REGISTER=0`, or drop `expandable_segments:True` from `PYTORCH_CUDA_ALLOC_CONF`.",
        seen="megatron/training/arguments.py and megatron/core/transformer/cuda_graphs.py 0.19.2.",
        examples=(
            "AssertionError: Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph "
            "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        ),
        see=(f"{_TE}#megatron-tecudagraphhelper-cuda_graph_impltransformer_engine",),
        rank=85,
    ),
    Entry(
        id="mcore-deprecated-enable-cuda-graph",
        group="megatron",
        heading="--enable-cuda-graph is deprecated, use --cuda-graph-impl=local instead",
        title="The pre-0.15 Megatron switches --enable-cuda-graph / --external-cuda-graph were used.",
        patterns=(
            r"-?-?enable[-_]cuda[-_]graph is deprecated",
            r"-?-?external[-_]cuda[-_]graph is deprecated",
            r"Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl",
            r"Do not use enable_cuda_graph or external_cuda_graph with cuda_graph_impl",
        ),
        cause=(
            "Megatron-Core chooses the capture implementation with `--cuda-graph-impl` "
            "(`none`, `local`, `transformer_engine`, `full_iteration`). The old flags are migrated "
            "with a warning, and may not be combined with `--cuda-graph-impl`."
        ),
        fix=(
            "Replace `--enable-cuda-graph` with `--cuda-graph-impl local` and "
            "`--external-cuda-graph` with `--cuda-graph-impl transformer_engine` "
            "(`TransformerConfig(cuda_graph_impl=...)` in code)."
        ),
        seen="megatron/training/arguments.py and megatron/core/transformer/transformer_config.py 0.19.2.",
        examples=(
            "--enable-cuda-graph is deprecated, use --cuda-graph-impl=local instead.",
            "UserWarning: enable_cuda_graph is deprecated, use cuda_graph_impl=local instead.",
        ),
        see=(f"{_TE}#megatron-deprecated---enable-cuda-graph-and---external-cuda-graph",),
        changed="`--cuda-graph-impl` arrived in Megatron-Core 0.15; `full_iteration` in 0.18.",
        rank=70,
    ),
    Entry(
        id="mcore-deprecated-cuda-graph-scope",
        group="megatron",
        heading="--cuda-graph-scope is deprecated, use --cuda-graph-modules instead",
        title="Megatron's --cuda-graph-scope / cuda_graph_scope was used.",
        patterns=(
            r"-?-?cuda[-_]graph[-_]scope is deprecated",
            r"full scope is deprecated\. Use empty cuda_graph_modules",
            r"--cuda-graph-scope and --cuda-graph-modules cannot be used together",
            r"cuda_graph_scope and cuda_graph_modules cannot be set together",
        ),
        cause=(
            "Megatron-Core 0.18 replaced the scope with `--cuda-graph-modules` (values `attn mlp "
            "moe moe_router moe_preprocess mamba`; empty means the whole layer). "
            "`full_iteration` became `--cuda-graph-impl full_iteration`, and "
            "`full_iteration_inference` became `--inference-cuda-graph-scope block`. In 0.19.2 "
            "the default config itself emits the 'full scope is deprecated' warning."
        ),
        fix="Use `--cuda-graph-modules attn mlp ...` (or nothing for whole layers); never both flags.",
        seen="megatron/training/arguments.py and megatron/core/transformer/transformer_config.py 0.19.2.",
        examples=(
            "--cuda-graph-scope is deprecated, use --cuda-graph-modules instead.",
            "UserWarning: full scope is deprecated. Use empty cuda_graph_modules to capture the whole layer.",
        ),
        see=(f"{_TE}#megatron---cuda-graph-modules-replaces---cuda-graph-scope",),
        changed="Renamed in Megatron-Core 0.18.",
        rank=70,
    ),
    Entry(
        id="mcore-warmup-flag-name",
        group="megatron",
        heading="cuda_graph_num_warmup_steps / --cuda-graph-num-warmup-steps does not exist: use --cuda-graph-warmup-steps",
        title="A misspelled Megatron warm-up option was used.",
        patterns=(r"cuda[-_]graph[-_]num[-_]warmup[-_]steps",),
        cause=(
            "The option has always been `--cuda-graph-warmup-steps` / `cuda_graph_warmup_steps` "
            "(default 3). The `num_` spelling circulates in third-party notes; Megatron-LM rejects "
            "it as an unrecognized argument and `TransformerConfig` raises TypeError."
        ),
        fix="Use `--cuda-graph-warmup-steps N` (CLI) or `TransformerConfig(cuda_graph_warmup_steps=N)`.",
        seen="megatron/core/transformer/transformer_config.py and the Megatron-LM parser, 0.12 to 0.19.2.",
        examples=(
            "TypeError: TransformerConfig.__init__() got an unexpected keyword argument 'cuda_graph_num_warmup_steps'",
            "error: unrecognized arguments: --cuda-graph-num-warmup-steps 3",
        ),
        see=(f"{_TE}#megatron---cuda-graph-warmup-steps",),
        rank=90,
    ),
    Entry(
        id="mcore-stale-capture-stream",
        group="megatron",
        heading="torch.autograd.graph.set_override_stale_capture_stream is not available in this PyTorch version",
        title="Megatron's full-iteration capture runs on a torch without the stale-capture-stream override.",
        patterns=(r"set_override_stale_capture_stream is not\s+available in this PyTorch version",),
        cause=(
            "`FullCudaGraphWrapper` turns on `torch.autograd.graph.set_override_stale_capture_stream` "
            "when torch has it (2.13, not 2.11). Without it, capture can fail when autograd nodes "
            "still reference a stream that is not capturing."
        ),
        fix="Use torch 2.13 or later for `--cuda-graph-impl full_iteration`, or expect capture to fail if DDP/autograd nodes were created on another stream.",
        seen="megatron/core/full_cuda_graph.py 0.19.2 (logger.warning).",
        examples=(
            "torch.autograd.graph.set_override_stale_capture_stream is not available in this PyTorch version; "
            "CUDA graph capture may fail if autograd nodes hold stale references to non-capturing streams.",
        ),
        see=(f"{_TE}#megatron-fullcudagraphwrapper-cuda_graph_implfull_iteration",),
        rank=70,
    ),
)


# ------------------------------------------------------------------ library calls


@dataclass(frozen=True)
class LibraryCall:
    """A library function that breaks capture as commonly called, and the argument that avoids it.

    ``cgkit trace`` attaches the record to a finding whose library frames (or the torch API the
    user called) match ``where``; troubleshooting.md lists the same records.
    """

    id: str
    where: tuple[str, ...]  # "path/suffix.py:function" of a library frame, or "api:torch.name" of a called API
    title: str
    cause: str
    fix: str
    seen: str  # the source lines, and the versions they were read in
    rule: str | None = None  # the rule code a finding takes when this call is its cause (else the operator's)


LIBRARY_CALLS: tuple[LibraryCall, ...] = (
    LibraryCall(
        id="one-hot-num-classes",
        where=("api:torch.nn.functional.one_hot",),
        title="F.one_hot without num_classes reads the largest index on the host.",
        cause="Without `num_classes`, `one_hot` computes `max() + 1` of the indices and reads it on the host to size "
        "its output: a host read, and an output size that depends on the data.",
        fix="Pass `num_classes=N` (the vocabulary or class count): the output size is then fixed and nothing is read.",
        seen="aten one_hot (aten/src/ATen/native/Onehot.cpp), torch 2.11 and 2.13; a trace of `F.one_hot(idx)` "
        "shows `aten._local_scalar_dense`, of `F.one_hot(idx, num_classes=N)` nothing.",
    ),
    LibraryCall(
        id="nn-transformer-causal-mask",
        where=("torch/nn/modules/transformer.py:_detect_is_causal_mask",),
        title="nn.TransformerEncoder / TransformerDecoder compare a given mask with a causal mask on the host.",
        cause=(
            "Given `mask` (or `tgt_mask`) and no causal hint, the module builds a causal mask and tests "
            "`bool((mask == causal).all())` on every call to decide whether the mask is causal: a host "
            "read of a GPU value."
        ),
        fix=(
            "Say what the mask is: `encoder(x, mask=mask, is_causal=True)` for a causal mask "
            "(`tgt_is_causal=True` for a decoder), `is_causal=False` for any other mask. With the hint "
            "given the module reads nothing."
        ),
        seen="torch/nn/modules/transformer.py `_detect_is_causal_mask` (torch 2.11 and 2.13), called from "
        "TransformerEncoder.forward and TransformerDecoder.forward.",
    ),
    LibraryCall(
        id="nn-transformer-nested-fast-path",
        where=("torch/nn/modules/transformer.py:TransformerEncoder.forward",),
        title="nn.TransformerEncoder in eval mode turns a padding mask into a nested tensor.",
        cause=(
            "With `enable_nested_tensor=True` (the default), in eval mode and with a "
            "`src_key_padding_mask`, the encoder checks the mask and packs the batch into a nested tensor: "
            "host reads and a data-dependent size."
        ),
        fix="Build the encoder with `nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)`.",
        seen="torch/nn/modules/transformer.py TransformerEncoder.forward (`_nested_tensor_from_mask_left_aligned`, "
        "`_nested_tensor_from_mask`), torch 2.11 and 2.13.",
    ),
    LibraryCall(
        id="clip-grad-error-if-nonfinite",
        where=("torch/nn/utils/clip_grad.py:_get_total_norm", "torch/nn/utils/clip_grad.py:clip_grad_norm_"),
        title="clip_grad_norm_(..., error_if_nonfinite=True) tests the norm on the host.",
        cause="With `error_if_nonfinite=True` the total norm is tested for NaN/inf with a Python `if`: a host read.",
        fix="Leave `error_if_nonfinite` at its default `False` inside captured code; test the returned norm after replay.",
        seen="torch/nn/utils/clip_grad.py `_get_total_norm` (torch 2.11 and 2.13).",
        rule="CG108",
    ),
    LibraryCall(
        id="grad-scaler-step",
        where=("torch/amp/grad_scaler.py:GradScaler._maybe_opt_step", "torch/amp/grad_scaler.py:_maybe_opt_step"),
        title="GradScaler.step() reads found-inf on the host before stepping a non-fused optimizer.",
        cause=(
            "`GradScaler._maybe_opt_step` sums `found_inf.item()` over devices to decide whether to step. "
            "An optimizer built with `fused=True` (Adam, AdamW, SGD, Adagrad) handles the scale itself and "
            "is stepped without it; `unscale_()` and `update()` stay on the device."
        ),
        fix=(
            "Capture forward and backward only and call `scaler.step(optimizer)` / `scaler.update()` after the "
            "replay (the `callables` workflow), or train in bf16, which needs no loss scaling. A fused AdamW "
            "took the whole fp16 step under capture in one measured case (benchmarks/RESULTS.md)."
        ),
        seen=(
            "torch/amp/grad_scaler.py `_maybe_opt_step` and `GradScaler.step` (torch 2.11 and 2.13). Measured "
            "on one H200, torch 2.11: a GradScaler fp16 step with a capturable, non-fused AdamW failed capture; "
            "with `fused=True` it captured and matched eager (one case, no inf step)."
        ),
        rule="CG109",
    ),
    LibraryCall(
        id="batchnorm-momentum-none",
        where=("torch/nn/modules/batchnorm.py:_BatchNorm.forward",),
        title="BatchNorm with momentum=None reads its step count on the host in training.",
        cause=(
            "`momentum=None` asks for a cumulative moving average: every training call computes "
            "`1.0 / float(self.num_batches_tracked)`, a host read of a GPU counter, and the factor it "
            "yields is a Python number that a graph would freeze at its capture-time value."
        ),
        fix=(
            "Give `momentum` a number (the default is 0.1): the running statistics then update with a "
            "constant factor and nothing is read. A cumulative average can be kept by hand outside the graph."
        ),
        seen="torch/nn/modules/batchnorm.py `_BatchNorm.forward` (torch 2.13; guarded for every torch the source "
        "facts run on); found by `cgkit trace` on `nn.BatchNorm1d(8, momentum=None)` in training (CPU). "
        "Measured on one H200, torch 2.11: that module in training failed capture (`operation failed due to a "
        "previous error during capture`); with the default `momentum=0.1` it captured.",
    ),
    LibraryCall(
        id="pack-padded-sequence-lengths",
        where=("torch/nn/utils/rnn.py:pack_padded_sequence", "torch/nn/utils/rnn.py:pad_packed_sequence"),
        title="pack_padded_sequence and pad_packed_sequence read the lengths on the host.",
        cause="`pack_padded_sequence` turns `lengths` into a CPU tensor (`torch.as_tensor(lengths, device=\"cpu\")`), "
        "and `pad_packed_sequence` copies the sort order to the host (`unsorted_indices.cpu()`): the packed batch "
        "sizes depend on the data.",
        fix="Keep padded batches and mask the padding (or run the RNN on the full padded length); packing cannot be captured.",
        seen="torch/nn/utils/rnn.py `pack_padded_sequence` and `pad_packed_sequence` (torch 2.11 and 2.13).",
    ),
    LibraryCall(
        id="distribution-validate-args",
        where=("torch/distributions/distribution.py:Distribution.__init__",
               "torch/distributions/distribution.py:Distribution._validate_sample"),
        title="torch.distributions validate their arguments on the host.",
        cause="With argument validation on (the default unless Python runs with -O), a distribution checks "
        "`constraint.check(value).all()` with a Python `if` when built and when scoring samples.",
        fix="Pass `validate_args=False` to the distribution, or call "
        "`torch.distributions.Distribution.set_default_validate_args(False)` once before capture. (Once Dynamo "
        "has run in a process, any `torch.compile`, it has turned validation off for every distribution.)",
        seen="torch/distributions/distribution.py `Distribution.__init__` and `_validate_sample` (torch 2.11 and 2.13); "
        "Dynamo's `TorchPatcher.patch` calls `set_default_validate_args(False)` (torch/_dynamo/eval_frame.py, 2.13).",
    ),
)
