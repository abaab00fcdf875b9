"""The whole control step as one CUDA graph: physics, sensing, observations, rewards and resets.

On a GPU a step of a few hundred small torch operations is bound by their launches (roughly 5-10 us
each), not by the physics. ``StepGraph`` captures ``NavEnv``'s device work for one step (everything
but the host bookkeeping: step counters, the periodic fault check, the layout pool's top-up) once and
replays it: one launch a step. Warp's kernels are captured in the same graph, launched on the same
stream (Warp is told the capture was opened by torch: ``wp.capture_begin(external=True)``).

A replay repeats the captured kernels on the captured memory, so the step must use the same
memory and constants every time: state written in place, no host counter inside (the fault stamp
reads a device step count), the LiDAR latency buffer shifted in place, the layout pool refilled into
its memory (a pool that must grow re-allocates and bumps ``LayoutPool.generation``: the graph is
captured anew). ``navexp.analysis.replay_audit`` proves this on the CPU (tests/test_step_graph.py);
the capture itself runs under the ``gpu`` marker (tests/test_gpu.py).

The first call steps eagerly on a side stream (lazy initialisations stay out of the capture), the
second captures and replays: each call advances the env exactly one step. The outputs are the
graph's own tensors, overwritten by the next step (rsl_rl copies what it keeps).
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable

import torch

__all__ = ["StepGraph"]


class StepGraph:
    """``body(actions) -> outputs`` captured as one CUDA graph after one eager warm-up call."""

    def __init__(
        self,
        body: Callable[[torch.Tensor], tuple],
        actions_shape: tuple[int, int],
        device,
        generation: Callable[[], int],
    ):
        self.body = body
        self.generation = generation
        """``() -> int``: the memory version the graph depends on (``LayoutPool.generation``)."""
        self.actions = torch.zeros(actions_shape, device=device)
        """The graph's input: each call copies its actions here."""
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: tuple | None = None
        self._captured_at: int | None = None
        self._warm = False
        self.failed: str | None = None
        """Why the capture failed (the body then runs eagerly), or None."""

    def __call__(self, actions: torch.Tensor) -> tuple:
        self.actions.copy_(actions)
        if self.failed is not None:
            return self.body(self.actions)
        if not self._warm:
            self._warm = True
            return self._side_stream(self.body)
        if self.graph is None or self._captured_at != self.generation():
            if not self._capture():
                return self.body(self.actions)
        self.graph.replay()
        return self.outputs

    def _side_stream(self, fn: Callable[[torch.Tensor], tuple]) -> tuple:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = fn(self.actions)
        torch.cuda.current_stream().wait_stream(stream)
        return out

    def _capture(self) -> bool:
        """Record the body (it does not run); False, with a warning, when the capture fails."""
        import warp as wp  # only on CUDA: the CPU path never gets here

        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        enabled = gc.isenabled()
        gc.disable()  # a Warp object finalised mid-capture would record its free into the graph
        try:
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                wstream = wp.stream_from_torch(stream)
                wp.capture_begin(stream=wstream, external=True, capture_mode=wp.CaptureMode.THREAD_LOCAL)
                try:
                    with wp.ScopedStream(wstream):
                        outputs = self.body(self.actions)
                finally:
                    wp.capture_end(stream=wstream)
        except RuntimeError as err:
            self.failed = str(err).splitlines()[0] if str(err) else type(err).__name__
            warnings.warn(f"capturing the whole step failed ({self.failed}); it runs eagerly", stacklevel=3)
            return False
        finally:
            if enabled:
                gc.enable()
        self.graph, self.outputs, self._captured_at = graph, outputs, self.generation()
        return True
