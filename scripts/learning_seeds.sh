#!/usr/bin/env bash
# Learning figures over seeds, reproducible: train every recipe with every seed, evaluate each run on
# its final suite (FINAL_SUITE, default families), then on each of SUITES (default: the held-out geometry
# suite, suite=ood, and the default suite: the run's own env and dense random rooms), then aggregate per recipe with
# navexp.compare (mean, 95 % bootstrap interval over seeds, IQM).
#
#   bash scripts/learning_seeds.sh OUT_DIR [training overrides for every run ...]
#
# Environment: SEEDS (default "1 2 3", each once); RECIPES, one recipe per word, each a comma-separated
# list of overrides (commas inside [...] or {...} belong to a value: ppo.policy.hidden_dims=[64,64]; default
# "ppo.policy.model=mlp ppo.policy.model=rnn": the MLP against the GRU); FINAL_SUITE, the suite of each
# run's final evaluation (eval.suite; default families); SUITES, the suites each run is evaluated on
# after it (default "ood default"; e.g. FINAL_SUITE=floorplans SUITES="families ood"); PARALLEL, trainings at
# once (default 1: on a CPU run them one after another, navexp shares the cores anyway; on a GPU
# several fit). Example, the trap recipe (README; BENCHMARKS.md, "The run's policy as the average of its
# last checkpoints"):
#   RECIPES=recipe=traps SEEDS="1 2 3 4 5 6" bash scripts/learning_seeds.sh outputs/traps
# navexp.evaluate of a run directory scores the run's policy (its average with ppo.average_checkpoints).
# Writes OUT_DIR/<recipe>/seed_<s>/ (run directories), OUT_DIR/<recipe>/seed_<s>.log, and the tables
# OUT_DIR/<suite>.md for the final suite and each of SUITES (families.md, ood.md and default.md by default,
# with their plots): each suite's main entry; OUT_DIR/entries.md: every entry of every suite alone
# (navexp.compare entry=NAME).
# A seed whose run directory already holds a finished run (eval.json) of the same overrides is not
# trained again: only its missing evaluations on SUITES run, so a batch that stopped
# part-way completes with the same command. A finished run of other overrides (the same OUT_DIR with
# other training overrides) and a directory with an unfinished run are left alone and reported (resume
# the latter with `python -m navexp.train resume=DIR`, or remove it). Logs are appended to. The tables
# are written in any case; the script exits 1 when any seed or table failed, 2 on bad arguments.
set -uo pipefail
set -f  # the words of SEEDS and RECIPES are never file patterns
bad() { echo "learning_seeds: $*" >&2; exit 2; }
[ $# -ge 1 ] || bad "usage: learning_seeds.sh OUT_DIR [training overrides ...]"
out=$1; shift
seeds=${SEEDS-1 2 3}
recipes=${RECIPES-ppo.policy.model=mlp ppo.policy.model=rnn}
parallel=${PARALLEL:-1}
final=${FINAL_SUITE:-families}
suites=${SUITES-ood default}
py=${PYTHON:-python}
[ -n "${seeds//[[:space:]]/}" ] || bad "SEEDS is empty; give the seeds, e.g. SEEDS=\"1 2 3\""
declare -A given=()
for s in $seeds; do
  [[ $s =~ ^[0-9]+$ ]] || bad "SEEDS holds '$s'; allowed: integers >= 0 separated by spaces"
  n=$((10#$s))  # 01 is seed 1
  [ -z "${given[s$n]:-}" ] || bad "SEEDS holds seed $n twice ('${given[s$n]}' and '$s'); give each seed once"
  given[s$n]=$s
done
seeds=$(for s in $seeds; do echo $((10#$s)); done)
[ -n "${recipes//[[:space:]]/}" ] || bad "RECIPES is empty; give one recipe per word, e.g. RECIPES=recipe=traps"
for recipe in $recipes; do
  name=${recipe//[^A-Za-z0-9_.-]/_}
  [ -z "${given[r$name]:-}" ] || bad "RECIPES '${given[r$name]}' and '$recipe' share the folder $name; give each recipe once"
  given[r$name]=$recipe
done
[[ $parallel =~ ^[1-9][0-9]*$ ]] || bad "PARALLEL=$parallel; allowed: an integer >= 1"
for suite in $suites; do
  [ "$suite" != "$final" ] || bad "SUITES holds '$suite', the final suite (FINAL_SUITE); give it once, in FINAL_SUITE"
done
for suite in $final $suites; do
  [ -f "$(dirname "$0")/../configs/suites/$suite.yaml" ] ||
    bad "suite '$suite' (FINAL_SUITE/SUITES) is not in configs/suites; allowed: $(cd "$(dirname "$0")/../configs/suites" && ls *.yaml | sed 's/\.yaml$//' | tr '\n' ' ')"
done
[ ! -e "$out" ] || [ -d "$out" ] || bad "OUT_DIR $out exists and is not a directory"
mkdir -p "$out" || bad "OUT_DIR $out cannot be made"

overrides() {  # a recipe's overrides, one per line: split at the commas outside [...], {...} and (...)
  local s=$1 depth=0 word="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      "[" | "{" | "(") depth=$((depth + 1)) ;;
      "]" | "}" | ")") depth=$((depth - 1)) ;;
    esac
    if [ "$c" = , ] && [ "$depth" -eq 0 ]; then
      printf '%s\n' "$word"
      word=""
    else
      word+=$c
    fi
  done
  printf '%s\n' "$word"
}

same_run() {  # dir override...: the run's first launch had these overrides (any order); no record: yes
  # The app records the size preset it resolved (size=cpu|gpu) when the command line gives none.
  local record="$1/.hydra/overrides.yaml"
  shift
  [ -f "$record" ] || return 0
  $py -c 'import sys, yaml
given = sys.argv[2:]
sized = any(a.startswith("size=") for a in given)
had = sorted(o for o in yaml.safe_load(open(sys.argv[1])) or [] if sized or not str(o).startswith("size="))
if had != sorted(given):
    print(f"its overrides {had}, this launch gives {sorted(given)}")
    sys.exit(1)' "$record" "$@"
}

one() {  # recipe seed: train (final evaluation on FINAL_SUITE), then evaluate on each of SUITES
  local recipe=$1 seed=$2 name=${1//[^A-Za-z0-9_.-]/_} rc=0 suite differ
  local dir="$out/$name/seed_$seed" log="$out/$name/seed_$seed.log" args
  mapfile -t args < <(overrides "$recipe")
  args=(eval.suite="$final" "${extra[@]}" "${args[@]}" seed="$seed")
  mkdir -p "$out/$name"
  rm -f "$dir.failed"
  echo "[learning_seeds] $(date '+%F %T') $recipe seed $seed" >>"$log"
  if [ -f "$dir/eval.json" ] && ! differ=$(same_run "$dir" "${args[@]}"); then
    echo "[learning_seeds] $dir is a finished run of other overrides ($differ): use another OUT_DIR, or remove it" |
      tee -a "$log" >&2
    rc=1
  elif [ -f "$dir/eval.json" ]; then
    echo "[learning_seeds] $dir is a finished run: not trained again" >>"$log"
  elif [ -e "$dir" ]; then
    echo "[learning_seeds] $dir holds an unfinished run: resume it (python -m navexp.train resume=$dir) or remove it" |
      tee -a "$log" >&2
    rc=1
  else
    $py -m navexp.train "${args[@]}" hydra.run.dir="$dir" >>"$log" 2>&1 || rc=$?
  fi
  for suite in $suites; do
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
tables=""  # the tables navexp.compare could not write (its error above)
$py -m navexp.compare "$out" out="$out/$final.md" || tables="$tables $final.md"
for suite in $suites; do
  $py -m navexp.compare "$out" eval="eval_*suite-$suite*.json" out="$out/$suite.md" || tables="$tables $suite.md"
done
: >"$out/entries.md"
for suite in $final $suites; do
  glob="eval_*suite-$suite*.json"
  [ "$suite" = "$final" ] && glob=eval.json
  # the entry names, in the suite's order, from a finished run's evaluation
  first=$(find "$out" -name "$glob" -print -quit)
  if [ -z "$first" ]; then
    printf '\n## %s: no finished run has %s\n' "$suite" "$glob" >>"$out/entries.md"
    continue
  fi
  for entry in $($py -c 'import json, sys; print(*json.load(open(sys.argv[1]))["entries"])' "$first"); do
    printf '\n## %s: %s\n\n' "$suite" "$entry" >>"$out/entries.md"
    if ! $py -m navexp.compare "$out" eval="$glob" entry="$entry" >>"$out/entries.md"; then
      echo "(navexp.compare failed: see its error above)" >>"$out/entries.md"
      tables="$tables entries.md($suite:$entry)"
    fi
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
[ -z "$failed" ] || echo "[learning_seeds] failed (see each seed's .log):$failed" >&2
[ -z "$tables" ] || echo "[learning_seeds] tables not written or incomplete (navexp.compare's errors above):$tables" >&2
[ -z "$failed$tables" ] || exit 1
