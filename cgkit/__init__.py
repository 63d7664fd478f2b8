"""cgkit: CUDA Graphs for PyTorch workloads.

The command line lives in :mod:`cgkit.cli`; everything it does is importable:
:mod:`cgkit.recipes` renders capture scripts, :mod:`cgkit.smoke` runs them on a GPU and reads
their reports. Nothing imported here pulls in torch.
"""

__version__ = "0.1.0"
