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
second captures and replays: each call advances the env exactly one step. The outputs are copies of
the graph's tensors (a replay rewrites those; rsl_rl keeps the observations it acted on by reference).
LiDAR noise draws from the env's generator, registered with the graph. Where the capture fails, one
warning: the torch part runs eagerly and the simulator captures its own kernels again.
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
        generators: tuple[torch.Generator, ...] = (),
        on_fail: Callable[[], None] | None = None,
    ):
        self.body = body
        self.generation = generation
        """``() -> int``: the memory version the graph depends on (``LayoutPool.generation``)."""
        self.generators = generators
        """CUDA generators the step draws from (the LiDAR noise): registered with the graph, so each
        replay draws new numbers."""
        self.on_fail = on_fail
        """Called once when the capture fails (the simulator takes back its own graphs)."""
        self.actions = torch.zeros(actions_shape, device=device)
        """The graph's input: each call copies its actions here."""
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: tuple | None = None
        self._warp_graph = None
        """Warp's record of the capture: it keeps the modules and buffers the kernels use alive."""
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
            return self._on_side_stream()
        if self.graph is None or self._captured_at != self.generation():
            if not self._capture():
                return self.body(self.actions)
        self.graph.replay()
        return _copies(self.outputs)

    def _on_side_stream(self) -> tuple:
        """The warm-up: the body on a new stream, torch's and Warp's work both on it."""
        import warp as wp  # only on CUDA: the CPU path never gets here

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), wp.ScopedStream(wp.stream_from_torch(stream)):
            out = self.body(self.actions)
        torch.cuda.current_stream().wait_stream(stream)
        return out

    def _capture(self) -> bool:
        """Record the body (it does not run); False, with a warning, when the capture fails."""
        import warp as wp

        graph = torch.cuda.CUDAGraph()
        for g in self.generators:
            graph.register_generator_state(g)
        stream = torch.cuda.Stream()
        wstream = wp.stream_from_torch(stream)
        enabled = gc.isenabled()
        gc.disable()  # a Warp object finalised mid-capture would record its free into the graph
        try:
            stream.wait_stream(torch.cuda.current_stream())
            # Warp's stream is set before the capture opens: entering it waits on an event, which a
            # capturing stream may not do on uncaptured work.
            with (
                wp.ScopedStream(wstream),
                torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"),
            ):
                wp.capture_begin(stream=wstream, external=True, capture_mode=wp.CaptureMode.THREAD_LOCAL)
                try:
                    outputs = self.body(self.actions)
                finally:
                    warp_graph = wp.capture_end(stream=wstream)
        except RuntimeError as err:
            self.failed = str(err).splitlines()[0] if str(err) else type(err).__name__
            warnings.warn(
                f"capturing the whole step failed ({self.failed}); the torch part runs eagerly, the "
                "simulator's kernels in their own graphs",
                stacklevel=3,
            )
            if self.on_fail is not None:
                self.on_fail()
            return False
        finally:
            if enabled:
                gc.enable()
        self.graph, self.outputs, self._warp_graph = graph, outputs, warp_graph
        self._captured_at = self.generation()
        return True


def _copies(outputs: tuple) -> tuple:
    """The step's outputs as tensors of their own: a replay rewrites the graph's, and rsl_rl keeps the
    observations it acted on until the next step has run (``PPO.act`` holds them by reference)."""
    obs, rewards, dones, extras = outputs
    return obs.clone(), rewards.clone(), dones.clone(), {k: v.clone() for k, v in extras.items()}
