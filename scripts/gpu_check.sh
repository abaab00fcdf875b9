#!/usr/bin/env bash
# The GPU check: the figures first, within 8 minutes of one command on a GPU machine.
#   usage: bash scripts/gpu_check.sh RESULTS_DIR          (from anywhere; runs in the project root)
#          DRY_RUN=1 bash scripts/gpu_check.sh RESULTS_DIR (the same steps on the CPU at tiny sizes)
# On an offline host with the packed wheels (../shared/offline_gpu/install.sh FOLDER /tmp/site):
#   PYTHONPATH=/tmp/site:$PWD bash scripts/gpu_check.sh RESULTS_DIR
# Steps, each under its own `timeout` so a slow one never costs the next one's figures (limits add up
# to 480 s): the environment; the cold MuJoCo Warp compile (`bench warmup`, its progress line, the
# modules it compiled); the throughput bench at 1024/4096/16384 worlds with a PPO iteration at 4096 x 32
# (bench_gpu.json); the `gpu` tests; a 90-second training of the GPU preset and its held-out evaluation
# (eval.json). RESULTS_DIR gets each step's log, the JSON files and summary.txt (step, exit status,
# seconds); the training's run directory stays outside it. Exit status 0 once every step has had its
# turn; read summary.txt for each step's own.
set -uo pipefail
res=${1:?usage: gpu_check.sh RESULTS_DIR}
mkdir -p "$res" && res=$(cd "$res" && pwd)
cd "$(dirname "$0")/.." || exit 2
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 WANDB_MODE=offline
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/navexp_gpu_train.XXXXXX")

if [ "${DRY_RUN:-0}" = 1 ]; then   # the CPU, tiny sizes: checks the script, not the GPU
  device=cpu scale=tiny stretch=4  # a shared 2-core CPU gets 4x the limits: the flow is checked, not the time
  warmup=(device=cpu num_envs=2 robots=holonomic)
  bench=(device=cpu backends=warp num_envs=4,8 steps=3 ppo=8x4 baseline=false)
  train=(size=cpu env.device=cpu env.num_envs=8 ppo.num_steps_per_env=8 ppo.max_iterations=2
         ppo.max_minutes=1.5 eval.num_episodes=8 eval.plot_episodes=0 eval.video_episodes=0)
else
  device=cuda:0 scale=gpu stretch=1
  warmup=(device=cuda:0 num_envs=64)
  bench=(device=cuda:0 backends=warp num_envs=1024,4096,16384 steps=100 ppo=4096x32 baseline=false)
  train=(size=gpu env.device=cuda:0 ppo.max_minutes=1.5 eval.num_episodes=500)
fi

: > "$res/summary.txt"
step() {  # step NAME LIMIT_S COMMAND...: run it time-boxed, log it, record its exit status and seconds
  local name=$1 limit=$(($2 * stretch)); shift 2
  echo "== $name (limit ${limit}s)"
  SECONDS=0
  timeout "$limit" "$@" 2>&1 | grep -v '^Module ' | tee "$res/$name.log" | tail -20
  local rc=${PIPESTATUS[0]}
  echo "== $name rc=$rc in ${SECONDS}s"
  echo "$name rc=$rc ${SECONDS}s (limit ${limit}s)" >> "$res/summary.txt"
}

step env_info 20 "$py" -c "import torch, warp, mujoco, mujoco_warp, rsl_rl, importlib.metadata as md
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA'
print('torch', torch.__version__, '|', gpu, '| warp', warp.__version__, '| mujoco', mujoco.__version__,
      '| mujoco_warp', md.version('mujoco-warp'), '| rsl_rl', md.version('rsl-rl-lib'), '| scale $scale')"
# The cold compile first, on its own: the bench after it then measures steps, not compilation.
step warmup 120 "$py" -m navexp.bench warmup "${warmup[@]}" out="$res/warmup.json"
step bench 140 "$py" -m navexp.bench "${bench[@]}" out="$res/bench_gpu.json"
step gpu_tests 60 "$py" -m pytest -q -x -m gpu -p no:cacheprovider tests/test_gpu.py
step train 140 "$py" -m navexp.train "${train[@]}" hydra.run.dir="$run_dir"
cp "$run_dir/eval.json" "$res/eval.json" 2>/dev/null || echo "train: no eval.json (see train.log)"
echo "== summary ($device)"; cat "$res/summary.txt"
exit 0
