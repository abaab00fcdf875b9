"""The simulator contract: both backends satisfy navexp.sim.base.Simulator, and a backend written in one
module (outside navexp) is selected by its class path; a departure from the contract is refused by name."""

from __future__ import annotations

import textwrap

import pytest
import torch
from conftest import build_env

from navexp.sim.base import Simulator, make_sim, protocol_mismatches, resolve_backend
from navexp.sim.mujoco_backend import MujocoSim
from navexp.sim.warp_backend import WarpSim


@pytest.mark.parametrize("cls", [WarpSim, MujocoSim])
def test_builtin_backends_match_every_method_signature(cls):
    assert protocol_mismatches(cls) == []


def test_the_check_catches_a_missing_method_and_a_changed_signature():
    class Wrong:
        DEVICE_TYPES = ("cpu",)

        def write_layouts(self, mask, layout, extra):  # one parameter too many
            pass

        def step(self):
            pass

        def sense(self, changed):  # the default None is gone
            pass

        def synchronize(self):
            pass

    problems = protocol_mismatches(Wrong)
    assert len(problems) == 4, problems
    assert any(p.startswith("write_layouts(self, mask, layout, extra) differs") for p in problems)
    assert any(p.startswith("sense(self, changed) differs") for p in problems)
    assert "missing method overflow_reason" in problems
    assert "missing method move_obstacles" in problems


def test_built_backends_expose_the_contract_tensors(backend):
    """2 worlds, 72 beams: every tensor has the documented shape on the CPU; the LiDAR reads ranges
    inside the 8 m room (every beam hits a wall within max range 6 m or reads exactly 6 m)."""
    env = build_env(backend, "env.num_envs=2")
    sim = env.sim
    assert isinstance(sim, Simulator)
    shapes = {
        t: tuple(getattr(sim, t).shape)
        for t in ("qpos", "qvel", "ctrl", "contact", "moving_contact", "overflow", "ranges")
    }
    assert shapes == {
        "qpos": (2, 3),
        "qvel": (2, 3),
        "ctrl": (2, 3),
        "contact": (2,),
        "moving_contact": (2,),
        "overflow": (2,),
        "ranges": (2, 72),
    }
    assert all(getattr(sim, t).device == torch.device("cpu") for t in shapes)
    assert float(sim.ranges.min()) > 0.0 and float(sim.ranges.max()) <= 6.0


def test_backend_choice_errors_name_the_value_and_the_options():
    with pytest.raises(
        ValueError, match=r"'mujoco' runs on cpu, not on device 'cuda:0'; backends for cuda: warp"
    ):
        resolve_backend("mujoco", "cuda:0")
    with pytest.raises(
        ValueError, match=r"'bullet' is unknown; allowed: auto \| warp \| mujoco \| <module>:<Class>"
    ):
        resolve_backend("bullet", "cpu")
    assert resolve_backend("auto", "cpu") == "mujoco"
    assert resolve_backend("auto", "cuda:1") == "warp"


PLUGIN = '''
"""A backend in one module: navexp's classic backend with its step counted (a stand-in for yours)."""
from navexp.sim.mujoco_backend import MujocoSim


class CountingSim(MujocoSim):
    DEVICE_TYPES = ("cpu",)

    def step(self) -> None:
        self.steps = getattr(self, "steps", 0) + 1
        super().step()


class Incomplete:
    DEVICE_TYPES = ("cpu",)

    def __init__(self, spec):
        pass
'''


def test_a_backend_in_one_module_is_selected_by_class_path(tmp_path, monkeypatch):
    """env.sim.backend=<module>:<Class> builds a user backend; the env steps it (3 steps counted)."""
    (tmp_path / "my_backend.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    env = build_env("env.sim.backend=my_backend:CountingSim", "env.num_envs=2")
    for _ in range(3):
        env.step(torch.zeros(2, 3))
    assert type(env.sim).__name__ == "CountingSim" and env.sim.steps == 3
    with pytest.raises(TypeError, match=r"'my_backend:Incomplete' does not implement .*missing method step"):
        make_sim("my_backend:Incomplete", env.sim.sim_spec)
    with pytest.raises(ValueError, match=r"env.sim.backend='my_backend:Nope'.*cannot be imported"):
        build_env("env.sim.backend=my_backend:Nope", "env.num_envs=2")
