#!/usr/bin/env bash
# Learning figures over seeds, reproducible: train every recipe with every seed, evaluate each run on
# its final suite (eval.suite, default families), on the held-out geometry suite (suite=ood) and on the
# default suite (the run's own env and dense random rooms), then aggregate per recipe with
# navexp.compare (mean, 95 % bootstrap interval over seeds, IQM).
#
#   bash scripts/learning_seeds.sh OUT_DIR [training overrides for every run ...]
#
# Environment: SEEDS (default "1 2 3"); RECIPES, one recipe per word, each a comma-separated list of
# overrides (default "ppo.model=mlp ppo.model=rnn": the MLP against the GRU); PARALLEL, trainings at
# once (default 1: on a CPU run them one after another, navexp shares the cores anyway; on a GPU
# several fit). Example, the trap recipe (README; BENCHMARKS.md, "The run's policy as the average of its
# last checkpoints"):
#   RECIPES=recipe=traps SEEDS="1 2 3 4 5 6" bash scripts/learning_seeds.sh outputs/traps
# navexp.evaluate of a run directory scores the run's policy (its average with ppo.average_checkpoints).
# Writes OUT_DIR/<recipe>/seed_<s>/ (run directories), OUT_DIR/<recipe>/seed_<s>.log, and the tables
# OUT_DIR/families.md, OUT_DIR/ood.md and OUT_DIR/default.md (with their plots): each suite's main entry;
# OUT_DIR/entries.md: every entry of the three suites alone (navexp.compare entry=NAME).
# A seed whose run directory already holds a finished run (eval.json) is not trained again: only its
# missing suite=ood / suite=default evaluations run, so a batch that stopped part-way completes with
# the same command. A directory with an unfinished run is left alone and reported (resume it with
# `python -m navexp.train resume=DIR`, or remove it). Logs are appended to. The tables are written
# in any case; the script exits 1 when any seed failed, 2 on bad arguments.
set -uo pipefail
set -f  # the words of SEEDS and RECIPES are never file patterns
bad() { echo "learning_seeds: $*" >&2; exit 2; }
[ $# -ge 1 ] || bad "usage: learning_seeds.sh OUT_DIR [training overrides ...]"
out=$1; shift
seeds=${SEEDS-1 2 3}
recipes=${RECIPES-ppo.model=mlp ppo.model=rnn}
parallel=${PARALLEL:-1}
py=${PYTHON:-python}
[ -n "${seeds//[[:space:]]/}" ] || bad "SEEDS is empty; give the seeds, e.g. SEEDS=\"1 2 3\""
for s in $seeds; do
  [[ $s =~ ^[0-9]+$ ]] || bad "SEEDS holds '$s'; allowed: integers >= 0 separated by spaces"
done
[ -n "${recipes//[[:space:]]/}" ] || bad "RECIPES is empty; give one recipe per word, e.g. RECIPES=recipe=traps"
[[ $parallel =~ ^[1-9][0-9]*$ ]] || bad "PARALLEL=$parallel; allowed: an integer >= 1"
mkdir -p "$out"

one() {  # recipe seed: train (final evaluation on eval.suite), then evaluate on suite=ood and suite=default
  local recipe=$1 seed=$2 name=${1//[^A-Za-z0-9_.-]/_} rc=0 suite
  local dir="$out/$name/seed_$seed" log="$out/$name/seed_$seed.log"
  mkdir -p "$out/$name"
  rm -f "$dir.failed"
  echo "[learning_seeds] $(date '+%F %T') $recipe seed $seed" >>"$log"
  if [ -f "$dir/eval.json" ]; then
    echo "[learning_seeds] $dir is a finished run: not trained again" >>"$log"
  elif [ -e "$dir" ]; then
    echo "[learning_seeds] $dir holds an unfinished run: resume it (python -m navexp.train resume=$dir) or remove it" |
      tee -a "$log" >&2
    rc=1
  else
    # shellcheck disable=SC2086
    $py -m navexp.train eval.suite=families "${extra[@]}" ${recipe//,/ } seed="$seed" hydra.run.dir="$dir" \
      >>"$log" 2>&1 || rc=$?
  fi
  for suite in ood default; do
    [ "$rc" -eq 0 ] || break
    compgen -G "$dir/eval_*suite-$suite*.json" >/dev/null && continue  # evaluated before
    $py -m navexp.evaluate checkpoint="$dir" suite="$suite" >>"$log" 2>&1 || rc=$?
  done
  [ "$rc" -eq 0 ] || touch "$dir.failed"
  echo "[learning_seeds] $recipe seed $seed: exit $rc ($(grep -c '^\[navexp\] it ' "$log") iteration lines in $log, every launch)"
}

extra=("$@")
running=0
for recipe in $recipes; do
  for seed in $seeds; do
    one "$recipe" "$seed" &
    running=$((running + 1))
    if [ "$running" -ge "$parallel" ]; then wait -n; running=$((running - 1)); fi
  done
done
wait
$py -m navexp.compare "$out" out="$out/families.md"
$py -m navexp.compare "$out" eval='eval_*suite-ood*.json' out="$out/ood.md"
$py -m navexp.compare "$out" eval='eval_*suite-default*.json' out="$out/default.md"
: >"$out/entries.md"
for suite in families ood default; do
  glob="eval_*suite-$suite*.json"
  [ "$suite" = families ] && glob=eval.json
  # the entry names, in the suite's order, from a finished run's evaluation
  first=$(find "$out" -name "$glob" -print -quit)
  if [ -z "$first" ]; then
    printf '\n## %s: no finished run has %s\n' "$suite" "$glob" >>"$out/entries.md"
    continue
  fi
  for entry in $($py -c 'import json, sys; print(*json.load(open(sys.argv[1]))["entries"])' "$first"); do
    printf '\n## %s: %s\n\n' "$suite" "$entry" >>"$out/entries.md"
    $py -m navexp.compare "$out" eval="$glob" entry="$entry" >>"$out/entries.md" ||
      echo "(navexp.compare failed: see its error above)" >>"$out/entries.md"
  done
done
echo "[learning_seeds] wrote $out/entries.md"
failed=""
for recipe in $recipes; do  # this launch's seeds only
  for seed in $seeds; do
    dir="$out/${recipe//[^A-Za-z0-9_.-]/_}/seed_$seed"
    [ -e "$dir.failed" ] && failed="$failed $dir"
  done
done
if [ -n "$failed" ]; then
  echo "[learning_seeds] failed (see each seed's .log):$failed" >&2
  exit 1
fi
