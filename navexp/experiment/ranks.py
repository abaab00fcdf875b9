"""A training under torchrun: the ranks agree on one run directory and checkpoint before anything is
built, record what each runs with, and end with one policy and one curriculum state."""

from __future__ import annotations

from pathlib import Path

import torch

from navexp.learn import distributed
from navexp.learn.distributed import DistContext, tensor_digest
from navexp.learn.runner import NavRunner
from navexp.task.curriculum import SuccessCurriculum
from navexp.task.env import NavEnv


def agree_on_run_dir(run_dir: Path, ckpt: dict | None, resume: str | None, ctx: DistContext) -> Path:
    """Rank 0's run directory, taken by every rank; a rank that resolved another checkpoint fails."""
    mine = ckpt and ckpt["_path"]
    chosen_dir, chosen_ckpt = distributed.broadcast((str(run_dir), mine), ctx)
    if mine != chosen_ckpt:
        raise RuntimeError(
            f"rank {ctx.rank} resolved resume={resume} to {mine}, rank 0 to {chosen_ckpt}; "
            f"give resume=<run>/model_<it>.pt"
        )
    return Path(chosen_dir)


def rank_record(ctx: DistContext, env: NavEnv, runner: NavRunner, seed: int) -> dict:
    """What one rank runs with (printed by the rank, gathered into run_info.json by rank 0)."""
    torch_threads = torch.get_num_threads()
    sim_threads = getattr(env.sim, "nthread", None)  # classic MuJoCo's rollout threads
    rec = {
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "device": str(env.device),
        "seed": seed,
        "num_envs": env.num_envs,
        "torch_threads": torch_threads,
        "sim_threads": sim_threads,
        "first_layout_digest": tensor_digest([v for v in vars(env.layout).values()]),
        "start_iteration": runner.current_learning_iteration,
    }
    print(
        f"[navexp] rank {ctx.rank}/{ctx.world_size} (local {ctx.local_rank}, {ctx.backend}): device "
        f"{rec['device']}, seed {seed}, {env.num_envs} worlds of {env.num_envs * ctx.world_size}, "
        f"{torch_threads} torch thread(s), {sim_threads or '-'} MuJoCo rollout thread(s), "
        f"starts at iteration {rec['start_iteration']}",
        flush=True,
    )
    return rec


def policy_digest(runner: NavRunner) -> str:
    """Digest of the actor and critic (weights and normalizer statistics) of this rank."""
    saved = runner.alg.save()
    return tensor_digest([*saved["actor_state_dict"].values(), *saved["critic_state_dict"].values()])


def check_ranks_agree(
    runner: NavRunner, curriculum: SuccessCurriculum | None, record: dict, ctx: DistContext
) -> None:
    """Every rank ends with one policy and one curriculum state (each recorded per rank in ``record``)."""
    if not ctx.enabled:
        return
    digests = distributed.gather(policy_digest(runner), ctx)
    record["policy_digest_per_rank"] = digests  # equal: the ranks trained one policy
    if len(set(digests)) != 1:
        raise RuntimeError(
            f"ranks hold different policies after training ({digests}); gradients were not all-reduced"
        )
    if curriculum is not None:
        states = distributed.gather(curriculum.state_dict(), ctx)
        record["curriculum_per_rank"] = states  # equal: rank 0's decisions are broadcast
        if any(st != states[0] for st in states):
            raise RuntimeError(f"ranks ended at different curriculum states ({states})")
