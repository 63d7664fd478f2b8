import pytest

pytest.importorskip("torch", reason="cgkit trace runs the step: it needs torch")
