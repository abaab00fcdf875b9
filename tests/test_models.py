"""ppo.policy.model=rnn|cnn: training, checkpoints, hidden-state resets, export (TorchScript, ONNX) and
deploy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import NO_MEDIA, TINY
from tensordict import TensorDict

from navexp import compose_config
from navexp.train import run

RUN = [*TINY, "ppo.save_interval=1", "eval.num_episodes=3", *NO_MEDIA, "size=none"]
"""2 iterations on 4 worlds; the final evaluation runs 3 worlds, so an RNN's state from training (4
worlds) must be dropped when the evaluation starts."""

KINDS = {"rnn": ["ppo.policy.model=rnn", "ppo.policy.rnn_hidden_dim=32"], "cnn": ["ppo.policy.model=cnn"]}


@pytest.fixture(scope="module", params=sorted(KINDS))
def trained(request, tiny_run) -> tuple[str, Path]:
    """One tiny run per model kind, trained once per session (conftest's ``tiny_run``)."""
    return request.param, tiny_run([*RUN, *KINDS[request.param]])


def record(run_dir: Path, steps: int = 24):
    """The checkpoint's actor stepped on a 4-world env for ``steps`` steps (episodes end every 10 steps):
    the observations [T, 4, 78], the actions [T, 4, A], the ``dones`` after each step [T, 4] and the
    raw sensor values behind each observation."""
    from navexp.config.run_config import load_run_config
    from navexp.learn.checkpoint import load_checkpoint
    from navexp.learn.models import reset_hidden
    from navexp.learn.rl_cfg import build_actor
    from navexp.sim.layout import rotate_xy
    from navexp.task.env import NavEnv

    ckpt = load_checkpoint(run_dir)
    cfg = load_run_config(ckpt, ["env.num_envs=4", "env.lidar.range_noise_std_m=0.01"])
    env = NavEnv(cfg)
    actor = build_actor(ckpt, cfg, env.get_observations(), env.num_actions)
    reset_hidden(actor)
    obs, acts, dones, raw = [], [], [], []
    with torch.inference_mode():
        for _ in range(steps):
            o, s = env.get_observations(), env.state
            goal_body = rotate_xy(s.goal_xy - s.pos_xy, -s.yaw)
            raw.append(
                [
                    (s.scan[i].numpy().copy(), goal_body[i].numpy().copy(), s.vel_body[i].numpy().copy())
                    + (float(s.omega[i]),)
                    for i in range(4)
                ]
            )
            a = actor(o)
            _, _, done, _ = env.step(a)
            reset_hidden(actor, done)
            obs.append(o["policy"].clone())
            acts.append(a.clone())
            dones.append(done.clone())
    return ckpt, torch.stack(obs), torch.stack(acts), torch.stack(dones), raw


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    """The run exported, and 24 recorded steps of its torch actor."""
    from navexp import export

    kind, run_dir = trained
    files = export.main([f"checkpoint={run_dir}", f"out={tmp_path_factory.mktemp(kind + '_export')}"])
    return kind, run_dir, files, record(run_dir)


def test_training_records_the_model_kind(trained):
    """Two iterations train; the checkpoint says which model it holds and has its tensors."""
    from navexp.learn.checkpoint import load_checkpoint

    kind, run_dir = trained
    ckpt = load_checkpoint(run_dir)
    assert ckpt["iter"] == 1 and ckpt["infos"]["model"] == {"kind": kind, "recurrent": kind == "rnn"}
    sd = ckpt["actor_state_dict"]
    if kind == "rnn":  # GRU of 32 over the 78 observation columns, then the 256-256 MLP
        assert sd["rnn.rnn.weight_ih_l0"].shape == (3 * 32, 78) and sd["mlp.0.weight"].shape == (256, 32)
    else:  # conv 1 -> 16 -> 16 channels, 72 -> 36 -> 18 beams; 6 normalised columns + 16 * 18 = 294
        assert sd["conv.1.weight"].shape == (16, 1, 5) and sd["conv.4.weight"].shape == (16, 16, 5)
        assert sd["obs_normalizer._mean"].shape == (1, 6) and sd["mlp.0.weight"].shape == (256, 294)
    assert json.loads((run_dir / "eval.json").read_text())["num_episodes"] == 3


def test_episodes_ended_in_the_recording(exported):
    """The recorded steps cross episode ends (1 s episodes), so the resets below are exercised."""
    dones = exported[3][3]
    assert int(dones.sum()) >= 4


def test_onnx_matches_torch_on_recorded_observations(exported):
    """policy.onnx gives the torch actor's action within 1e-5 on 24 x 4 recorded observations; an RNN's
    graph is fed its own h_out (zeroed for worlds whose episode ended) as the next h_in."""
    import onnxruntime as ort

    kind, _, files, (_, obs, acts, dones, _) = exported
    sess = ort.InferenceSession(str(files["onnx"]))
    names = [i.name for i in sess.get_inputs()]
    if kind == "cnn":
        assert names == ["obs"]
        out = sess.run(["actions"], {"obs": obs.reshape(-1, 78).numpy()})[0]
        assert np.abs(out - acts.reshape(-1, acts.shape[-1]).numpy()).max() < 1e-5
        return
    assert names == ["obs", "h_in"] and [o.name for o in sess.get_outputs()] == ["actions", "h_out"]
    h = np.zeros((1, 4, 32), dtype=np.float32)
    for t in range(len(obs)):
        a, h = sess.run(["actions", "h_out"], {"obs": obs[t].numpy(), "h_in": h})
        assert np.abs(a - acts[t].numpy()).max() < 1e-5, t
        h[:, dones[t].numpy() == 1] = 0.0


def test_torchscript_matches_torch(exported):
    """policy.pt gives the same actions: a batch for the CNN; for the RNN one world at a time (rsl_rl's
    scripted RNN keeps a batch-1 state), calling reset() where that world's episode ended."""
    kind, _, files, (_, obs, acts, dones, _) = exported
    ts = torch.jit.load(str(files["torchscript"]))
    if kind == "cnn":
        assert torch.allclose(ts(obs.reshape(-1, 78)), acts.reshape(-1, acts.shape[-1]), atol=1e-5)
        return
    for w in range(4):
        ts.reset()
        for t in range(len(obs)):
            assert torch.allclose(ts(obs[t, w : w + 1]), acts[t, w : w + 1], atol=1e-5), (w, t)
            if dones[t, w]:
                ts.reset()


def test_numpy_policy_matches_torch_from_raw_sensors(exported):
    """NumpyPolicy rebuilds each observation from raw sensors and gives the torch action within 1e-5;
    an RNN keeps its state between command calls and reset() clears it at each episode end."""
    from navexp.deploy import NumpyPolicy

    kind, _, files, (_, obs, acts, dones, raw) = exported
    for w in range(4):
        policy = NumpyPolicy.load(str(files["numpy"]))
        policy.reset()
        for t in range(len(obs)):
            built = policy.observation(*raw[t][w])
            assert np.abs(built - obs[t, w].numpy()).max() < 1e-5
            a = policy.act(built)
            assert np.abs(a - acts[t, w].clamp(-1, 1).numpy()).max() < 1e-5, (w, t)
            if dones[t, w]:
                policy.reset()
    if kind == "rnn":  # the state carries memory: the same input twice gives two different actions
        policy.reset()
        first, second = policy.command(*raw[0][0]), policy.command(*raw[0][0])
        policy.reset()
        assert policy.command(*raw[0][0]) == first and first != second


def test_meta_describes_the_model(exported):
    """policy_meta.json names the model kind and, for an RNN, the state ONNX takes and returns."""
    kind, _, files, _ = exported
    model = json.loads(files["meta"].read_text())["model"]
    assert model["kind"] == kind
    if kind == "rnn":
        assert model["state_shape"] == [1, "batch", 32] and model["onnx_state_inputs"] == ["h_in"]
    else:
        assert model["cnn_kernel_sizes"] == [5, 5] and model["cnn_strides"] == [2, 2]


def test_resume_or_evaluate_with_another_model_fails(trained, tmp_path):
    """resume= or evaluate with a different ppo.policy.model is refused naming both kinds; nothing is
    written."""
    from navexp import evaluate

    kind, run_dir = trained
    other = "mlp"
    before = sorted(p.name for p in run_dir.iterdir())
    msg = rf"holds a ppo.policy.model='{kind}' policy; this config uses ppo.policy.model='{other}'"
    with pytest.raises(ValueError, match=msg):
        overrides = [*RUN, f"ppo.policy.model={other}", f"resume={run_dir}"]
        run(compose_config(overrides), tmp_path / "x", overrides, quiet=True)
    with pytest.raises(ValueError, match=msg):
        evaluate.main([f"checkpoint={run_dir}", f"ppo.policy.model={other}", f"out={tmp_path / 'e.json'}"])
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_a_recurrent_actor_trains_beside_a_feed_forward_critic(tiny_run, tmp_path):
    """ppo.policy.model=rnn with ppo.policy.critic_model=mlp: the actor holds the GRU (3 x 32 gates over
    78 columns), the critic none (its MLP reads the 78 columns straight); rsl_rl's recurrent PPO path
    trains both. Resuming it with a GRU critic is refused naming ppo.policy.critic_model; nothing is
    written."""
    from navexp.learn.checkpoint import load_checkpoint

    run_dir = tiny_run([*RUN, *KINDS["rnn"], "ppo.policy.critic_model=mlp"])
    ckpt = load_checkpoint(run_dir)
    actor, critic = ckpt["actor_state_dict"], ckpt["critic_state_dict"]
    assert ckpt["iter"] == 1 and ckpt["infos"]["model"] == {"kind": "rnn", "recurrent": True}
    assert actor["rnn.rnn.weight_ih_l0"].shape == (3 * 32, 78) and actor["mlp.0.weight"].shape == (256, 32)
    assert not [k for k in critic if k.startswith("rnn.")] and critic["mlp.0.weight"].shape == (256, 78)
    assert json.loads((run_dir / "eval.json").read_text())["num_episodes"] == 3
    before = sorted(p.name for p in run_dir.iterdir())
    overrides = [*RUN, *KINDS["rnn"], f"resume={run_dir}"]
    with pytest.raises(ValueError, match=r"ppo.policy.critic_model: checkpoint 'mlp', this config None"):
        run(compose_config(overrides), tmp_path / "x", overrides, quiet=True)
    assert sorted(p.name for p in run_dir.iterdir()) == before


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_reset_zeroes_exactly_the_ended_worlds(rnn_type):
    """After one step of 3 worlds, dones [0, 1, 0] zero world 1's state (h and, for an LSTM, c) and leave
    worlds 0 and 2 bit-identical; a reset without dones drops the state for any batch size."""
    from rsl_rl.models import MLPModel, RNNModel

    from navexp.learn.models import reset_hidden

    torch.manual_seed(0)
    obs = TensorDict({"policy": torch.randn(3, 78)}, batch_size=[3])
    groups = {"actor": ["policy"]}
    model = RNNModel(obs, groups, "actor", 3, [16], rnn_type=rnn_type, rnn_hidden_dim=8)
    with torch.no_grad():
        model(obs)
    states = model.get_hidden_state()
    states = states if isinstance(states, tuple) else (states,)
    before = [s.clone() for s in states]
    assert all(bool((b.abs().sum(dim=-1) > 0).all()) for b in before)  # every world holds a state
    reset_hidden(model, torch.tensor([0, 1, 0]))
    for s, b in zip(states, before, strict=True):
        assert torch.equal(s[:, 1], torch.zeros(1, 8))
        assert torch.equal(s[:, 0], b[:, 0]) and torch.equal(s[:, 2], b[:, 2])
    reset_hidden(model)
    assert model.get_hidden_state() is None
    model(TensorDict({"policy": torch.randn(5, 78)}, batch_size=[5]))  # another world count works
    mlp = MLPModel(obs, groups, "actor", 3, [16])
    reset_hidden(mlp, torch.tensor([1, 1, 1]))  # feed-forward: nothing to reset, no error


def test_circular_conv_wraps_around_the_scan():
    """A one-hot scan at beam 0 convolved with kernel [1, 2, 3] (padding 1, stride 1) reads
    out[j] = sum_t w[t] x[(j + t - 1) mod 8]: out[0] = w[1] = 2, out[1] = w[0] = 1, out[7] = w[2] = 3
    (beam 7 sees beam 0 across the seam), zero elsewhere; torch and numpy agree."""
    from navexp.deploy.numpy_nets import circular_conv1d
    from navexp.learn.models.cnn import scan_encoder

    w, b = np.array([[[1.0, 2.0, 3.0]]]), np.zeros(1)
    x = np.zeros((1, 8))
    x[0, 0] = 1.0
    expected = [2.0, 1.0, 0, 0, 0, 0, 0, 3.0]
    assert circular_conv1d(x, w, b, 1)[0].tolist() == expected
    enc, width = scan_encoder(1, 8, [1], [3], [1], "identity")
    assert width == 8
    with torch.no_grad():
        enc[1].weight.copy_(torch.tensor(w))
        enc[1].bias.zero_()
        assert enc(torch.tensor(x).float()[None]).tolist() == [expected]
    assert circular_conv1d(x, w, b, 2)[0].tolist() == [2.0, 0, 0, 0]  # stride 2: beams 0, 2, 4, 6


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("ppo.policy.model=lstm", r"ppo.policy.model='lstm' is invalid; allowed: \['mlp', 'rnn', 'cnn'\]"),
        ("ppo.policy.rnn_type=rnn", r"ppo.policy.rnn_type='rnn' is invalid; allowed: \['gru', 'lstm'\]"),
        (
            "ppo.policy.critic_model=gru",
            r"ppo.policy.critic_model='gru' is invalid; allowed: \['mlp', 'rnn', 'cnn'\] or null "
            r"\(= ppo.policy.model\)",
        ),
        (
            "ppo.policy.cnn_kernel_sizes=[4,5]",
            r"ppo.policy.cnn_kernel_sizes=\[4, 5\] is invalid; allowed: odd integers",
        ),
        (
            "ppo.policy.cnn_strides=[2]",
            r"ppo.policy.cnn_channels=\[16, 16\].*allowed: lists of one equal length",
        ),
        ("obs.terms.lidar.enabled=false", r"ppo.policy.model=cnn convolves the LiDAR scan"),
        (
            "ppo.algorithm.num_mini_batches=8",
            r"ppo.algorithm.num_mini_batches=8 is invalid; allowed: 1 <= value <= env.num_envs = 4 ",
        ),
    ],
)
def test_bad_model_settings_fail_before_anything_is_built(override, message, tmp_path):
    """Each bad ppo.policy.model* setting fails naming the key, the value and what is allowed; no run dir."""
    model = (
        []
        if override.startswith("ppo.policy.model=")
        else ["ppo.policy.model=" + ("cnn" if "cnn" in override else "rnn")]
    )
    if "lidar" in override:
        model = ["ppo.policy.model=cnn"]
    overrides = [*RUN, *model, override]
    with pytest.raises(ValueError, match=message):
        run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    assert not (tmp_path / "run").exists()


def _meta(history: int) -> dict:
    """The metadata NumpyPolicy.load checks: the default's 78 columns per frame, the frame history and a
    3-wide action block."""
    terms = [["lidar", 72], ["goal_polar", 3], ["vel_body", 2], ["omega", 1]]
    return {"obs": {"terms": terms, "history_length": history}, "action": {"scale": [1.0, 1.0, 1.0]}}


def _fill_normalizer(model: torch.nn.Module, rows: torch.Tensor) -> None:
    """Non-trivial normaliser statistics (mean and std away from 0 and 1) so parity checks see them."""
    model.train()
    model.update_normalization(TensorDict({"policy": rows * 3.0 + 1.0}, batch_size=[len(rows)]))
    model.eval()


def _save_npz(
    path: Path, model: torch.nn.Module, kind: str, history: int = 1, arrays: dict | None = None
) -> None:
    """The .npz ``navexp.export`` writes, from an untrained model (its normaliser and weights)."""
    from navexp.deploy.export import numpy_arrays

    norm = model.obs_normalizer
    np.savez(
        path,
        activation="elu",
        eps=float(norm.eps),
        meta=json.dumps(_meta(history)),
        obs_mean=norm._mean[0].double().numpy(),
        obs_std=norm._std[0].double().numpy(),
        **numpy_arrays(model, kind),
    )


def test_lstm_of_two_layers_exports_and_deploys(tmp_path):
    """An untrained 2-layer LSTM actor: ONNX (h_in, c_in -> h_out, c_out) and NumpyPolicy follow torch
    within 1e-5 over 12 steps of 3 worlds, with world 1's state reset after step 5."""
    import onnxruntime as ort
    from rsl_rl.models import RNNModel

    from navexp.deploy import NumpyPolicy
    from navexp.deploy.export import export_onnx
    from navexp.learn.models import reset_hidden

    torch.manual_seed(1)
    seq = torch.rand(12, 3, 78)
    dist = {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
    obs0 = TensorDict({"policy": seq[0]}, batch_size=[3])
    actor = RNNModel(obs0, {"actor": ["policy"]}, "actor", 3, [32, 32], "elu", True, dist, "lstm", 16, 2)
    _fill_normalizer(actor, seq.reshape(-1, 78))
    export_onnx(actor, 78, tmp_path / "p.onnx")
    sess = ort.InferenceSession(str(tmp_path / "p.onnx"))
    _save_npz(tmp_path / "p.npz", actor, "rnn")
    policies = [NumpyPolicy.load(str(tmp_path / "p.npz")) for _ in range(3)]
    h = c = np.zeros((2, 3, 16), dtype=np.float32)
    with torch.inference_mode():
        for t in range(12):
            expected = actor(TensorDict({"policy": seq[t]}, batch_size=[3]))
            a, h, c = sess.run(None, {"obs": seq[t].numpy(), "h_in": h, "c_in": c})
            assert np.abs(a - expected.numpy()).max() < 1e-5, t
            for w, p in enumerate(policies):
                assert np.abs(p.act(seq[t, w].numpy()) - expected[w].clamp(-1, 1).numpy()).max() < 1e-5
            if t == 5:
                reset_hidden(actor, torch.tensor([0, 1, 0]))
                h[:, 1], c[:, 1] = 0.0, 0.0
                policies[1].reset()


def test_cnn_reads_each_history_frame_as_a_channel(tmp_path):
    """obs.history_length=2: the conv has 2 input channels (the scans of both frames); the exported
    module, ONNX and NumpyPolicy give the model's action within 1e-5, normaliser included."""
    import onnxruntime as ort

    from navexp.deploy import NumpyPolicy
    from navexp.deploy.export import export_onnx
    from navexp.learn.models.cnn import ScanCNNModel

    torch.manual_seed(2)
    x = torch.rand(5, 156)
    dist = {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
    obs = TensorDict({"policy": x}, batch_size=[5])
    model = ScanCNNModel(obs, {"actor": ["policy"]}, "actor", 3, [32], "elu", True, dist, history_length=2)
    assert model.conv[1].weight.shape == (16, 2, 5) and model.obs_dim == 12  # 2 frames x 6 other columns
    _fill_normalizer(model, x)
    with torch.inference_mode():
        expected = model(obs)
        assert torch.allclose(model.as_jit()(x), expected, atol=1e-6)
    export_onnx(model, 156, tmp_path / "p.onnx")
    out = ort.InferenceSession(str(tmp_path / "p.onnx")).run(["actions"], {"obs": x.numpy()})[0]
    assert np.abs(out - expected.numpy()).max() < 1e-5
    _save_npz(tmp_path / "p.npz", model, "cnn", history=2)
    policy = NumpyPolicy.load(str(tmp_path / "p.npz"))
    for i in range(5):
        assert np.abs(policy.act(x[i].numpy()) - expected[i].clamp(-1, 1).numpy()).max() < 1e-5


def test_a_checkpoint_from_before_ppo_model_is_an_mlp(trained):
    """A checkpoint without ``infos.model`` and without the ppo.policy.model/rnn/cnn keys in its stored config
    (written before they existed) loads as ppo.policy.model=mlp, and check_model accepts it as one."""
    import copy

    from navexp.config.run_config import load_run_config
    from navexp.learn.checkpoint import check_model, checkpoint_model, load_checkpoint

    old = copy.deepcopy(load_checkpoint(trained[1]))
    del old["infos"]["model"]
    ppo = old["infos"]["config"]["ppo"]  # flat, as stored before the ppo sections (and the model keys)
    for section in ("algorithm", "policy"):
        ppo.update(ppo.pop(section))
    for key in [k for k in ppo if k == "model" or k.startswith(("rnn_", "cnn_"))]:
        del ppo[key]
    cfg = load_run_config(old, [])
    assert (
        cfg.ppo.policy.model == "mlp"
        and cfg.ppo.policy.rnn_type == "gru"
        and list(cfg.ppo.policy.cnn_strides) == [2, 2]
    )
    assert checkpoint_model(old) == "mlp"
    check_model(old, "mlp")


class StateSpy:
    """A recurrent policy that records the actor's state at every call and every reset it gets."""

    is_recurrent = True

    def __init__(self, actor) -> None:
        self.actor, self.events = actor, []

    def reset(self, dones=None) -> None:
        self.actor.reset(dones)
        self.events.append(("reset", None if dones is None else dones.clone()))

    def __call__(self, obs):
        h = self.actor.get_hidden_state()
        self.events.append(("call", None if h is None else h.clone()))
        return self.actor(obs)


def test_evaluation_starts_every_episode_from_the_zero_state(tiny_run):
    """4 episodes on 2 worlds = 2 rounds: each round starts from no state (rsl_rl then uses zeros), and
    after a step that ends world w, the next call sees world w's state all zeros and the other
    world's state non-zero."""
    from navexp.analysis.rollout import EvalRun, run_episodes
    from navexp.config.run_config import load_run_config
    from navexp.learn.checkpoint import load_checkpoint

    ckpt = load_checkpoint(tiny_run([*RUN, *KINDS["rnn"]]))
    ev = EvalRun.build(ckpt, load_run_config(ckpt, ["eval.num_envs=2", "eval.num_episodes=4"]))
    ev.actor.reset(None)
    ev.actor(ev.env.get_observations())  # a state left over from before the evaluation
    spy = StateSpy(ev.actor)

    def world_0_ends_early(env) -> None:  # world 0 times out 4 steps into each round, world 1 runs on
        env.episode_length_buf[0] = env.max_episode_length - 4

    table = run_episodes(spy, ev.env, 4, on_round=world_0_ends_early)
    assert len(table.reason) == 4
    round_starts = [i for i, (kind, d) in enumerate(spy.events) if kind == "reset" and d is None]
    assert len(round_starts) == 2
    assert all(spy.events[i + 1] == ("call", None) for i in round_starts)
    checked = 0
    for (kind, dones), (next_kind, h) in zip(spy.events, spy.events[1:], strict=False):
        if kind == "reset" and dones is not None and next_kind == "call" and bool(dones.any()):
            assert torch.equal(h[:, dones == 1], torch.zeros_like(h[:, dones == 1]))
            assert bool((h[:, dones == 0].abs().sum(dim=-1) > 0).all())  # running worlds keep theirs
            checked += 1
    assert checked >= 1  # 1 s episodes: worlds end inside each round


def test_every_model_kind_has_a_numpy_twin_and_names_are_unique():
    """The registry: mlp, rnn, cnn in that order (the default first), each with a numpy loader on the
    robot side; registering a name twice raises naming it; an unknown ppo.policy.model lists the kinds."""
    from navexp.deploy.numpy_nets import NUMPY_MODELS
    from navexp.learn.models import MODELS, ModelKind, get_model, register_model

    assert list(MODELS) == ["mlp", "rnn", "cnn"] and set(NUMPY_MODELS) == set(MODELS)
    assert [MODELS[k].recurrent for k in ("mlp", "rnn", "cnn")] == [False, True, False]

    class Again(ModelKind):
        name = "rnn"

    with pytest.raises(ValueError, match="model 'rnn' is already registered"):
        register_model(Again)
    with pytest.raises(
        ValueError, match=r"ppo.policy.model='gpt' is invalid; allowed: \['mlp', 'rnn', 'cnn'\]"
    ):
        get_model("gpt")


def test_a_state_dependent_std_deploys_its_mean(tmp_path):
    """ppo.policy.state_dependent_std=true: rsl_rl's heteroscedastic Gaussian, whose last layer outputs
    the mean rows then the std rows. The std head is given weights of its own, so an export that kept all
    6 rows or the wrong 3 would differ; TorchScript, ONNX and NumpyPolicy give the mean within 1e-5."""
    import onnxruntime as ort
    from rsl_rl.utils import resolve_class

    from navexp.deploy import NumpyPolicy
    from navexp.deploy.export import export_onnx
    from navexp.learn.rl_cfg import build_train_cfg

    train_cfg = build_train_cfg(
        compose_config(["ppo.policy.state_dependent_std=true", "ppo.policy.std_type=log"])
    )
    assert train_cfg["actor"]["distribution_cfg"]["class_name"] == "HeteroscedasticGaussianDistribution"
    torch.manual_seed(3)
    x = torch.rand(5, 78)
    obs = TensorDict({"policy": x}, batch_size=[5])
    actor_class, actor_cfg = resolve_class(train_cfg["actor"])
    actor = actor_class(obs, {"actor": ["policy"]}, "actor", 3, **actor_cfg)
    last = [m for m in actor.mlp if isinstance(m, torch.nn.Linear)][-1]
    assert last.out_features == 6
    with torch.no_grad():
        last.weight[3:].normal_()  # the std head: zero at init, learned afterwards
    _fill_normalizer(actor, x)
    with torch.inference_mode():
        expected = actor(obs)
        assert expected.shape == (5, 3)
        assert torch.allclose(torch.jit.script(actor.as_jit())(x), expected, atol=1e-6)
        actor.train()
        actor(obs, stochastic_output=True)
        std = actor.distribution.std
        actor.eval()
    assert std.shape == (5, 3) and not torch.allclose(std[0], std[1])  # it depends on the observation
    export_onnx(actor, 78, tmp_path / "p.onnx")
    out = ort.InferenceSession(str(tmp_path / "p.onnx")).run(["actions"], {"obs": x.numpy()})[0]
    assert np.abs(out - expected.numpy()).max() < 1e-5
    _save_npz(tmp_path / "p.npz", actor, "mlp")
    policy = NumpyPolicy.load(str(tmp_path / "p.npz"))
    for i in range(5):
        assert np.abs(policy.act(x[i].numpy()) - expected[i].clamp(-1, 1).numpy()).max() < 1e-5


@pytest.mark.parametrize("kind", ["mlp", "gru"])
def test_policy_onnx_alone_in_an_empty_folder_runs_and_matches_torch(kind, tmp_path):
    """export_onnx writes one file with its weights inside (before: policy.onnx plus policy.onnx.data,
    and the file copied alone failed to load in onnxruntime). Copied alone into an empty folder, it runs
    and gives the torch actor's action within 1e-5 on 5 observations; nothing but policy.onnx is written."""
    import shutil

    import onnxruntime as ort
    from rsl_rl.models import MLPModel, RNNModel

    from navexp.deploy.export import export_onnx

    torch.manual_seed(4)
    x = torch.rand(5, 78)
    obs = TensorDict({"policy": x}, batch_size=[5])
    dist = {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
    if kind == "mlp":
        actor = MLPModel(obs, {"actor": ["policy"]}, "actor", 3, [32, 32], "elu", True, dist)
    else:
        actor = RNNModel(obs, {"actor": ["policy"]}, "actor", 3, [32, 32], "elu", True, dist, "gru", 16, 1)
    _fill_normalizer(actor, x)
    (tmp_path / "export").mkdir()
    export_onnx(actor, 78, tmp_path / "export" / "policy.onnx")
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["policy.onnx"]
    alone = tmp_path / "robot"
    alone.mkdir()
    shutil.copy(tmp_path / "export" / "policy.onnx", alone / "policy.onnx")
    sess = ort.InferenceSession(str(alone / "policy.onnx"))
    feeds = {"obs": x.numpy()}
    if kind == "gru":
        feeds["h_in"] = np.zeros((1, 5, 16), dtype=np.float32)
    with torch.inference_mode():
        expected = actor(obs)
    assert np.abs(sess.run(None, feeds)[0] - expected.numpy()).max() < 1e-5
