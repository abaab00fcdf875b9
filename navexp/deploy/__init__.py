"""Shipping a policy: ``export`` writes TorchScript, ONNX and a numpy ``.npz`` with metadata from a
checkpoint (torch); ``policy`` and ``numpy_nets`` run it on a robot with numpy alone.

May import: every layer below it (``experiment``, ``analysis``, ``config``, ``learn``, ``task``, ``sim``) from
``export``; the robot-side modules (this package's ``__init__``, ``policy``, ``numpy_nets``) import no
torch and no simulator, only numpy and ``navexp.task.obs.numpy_terms`` (enforced by import-linter).
"""

from navexp.deploy.policy import NumpyPolicy, check_inputs, check_scan

__all__ = ["NumpyPolicy", "check_inputs", "check_scan"]
