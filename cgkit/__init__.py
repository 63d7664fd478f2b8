"""cgkit: CUDA Graphs for PyTorch workloads.

The command line lives in :mod:`cgkit.cli`; everything it does is importable:
:mod:`cgkit.recipes` renders capture scripts, :mod:`cgkit.smoke` runs them on a GPU and reads
their reports. Nothing imported here pulls in torch.

:func:`emit` is for user scripts proven with ``cgkit smoke CANDIDATE --baseline ORIGINAL``: it prints
a value (a number, a list, a tensor) that the comparison reads even when the script does not print it.
"""

__version__ = "0.1.0"


def emit(name: str, value) -> None:
    """Print ``value`` under ``name`` as one JSON line for ``cgkit smoke --baseline`` to compare.

    Tensors are copied to the host (so call it after a graph's replay, never inside a capture).
    """
    import json

    if hasattr(value, "detach") and hasattr(value, "tolist"):
        value = value.detach().cpu().tolist()
    print(json.dumps({"cgkit_emit": name, "value": value}), flush=True)
