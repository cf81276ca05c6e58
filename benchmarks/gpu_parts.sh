# benchmarks/gpu.sh's parts, each within the run's time budget (sourced; its variables:
# out, the output folder; budget, the seconds of the whole run; start, $SECONDS at its start).
#
# part NAME LIMIT MIN CMD...: CMD under LIMIT seconds, cut to the budget's time left, or
# skipped when less than MIN seconds are left; its output in OUT/NAME.txt, and a line of
# OUT/parts.tsv: name, limit, seconds taken, exit status (124 or 137: cut at the limit) or
# `skipped`. A part's failure does not stop the run: the summary names it.
part() {
  local name=$1 limit=$2 min=$3 left rc=0 t0
  shift 3
  left=$((budget - (SECONDS - start)))
  if ((left < min)); then
    echo "== $name skipped: ${left} s left of the ${budget} s budget, it needs ${min}"
    printf '%s\t%s\t0\tskipped\n' "$name" "$limit" >> "$out/parts.tsv"
    return 0
  fi
  if ((limit > left)); then limit=$left; fi
  echo "== $name (at most ${limit} s): $*"
  t0=$SECONDS
  timeout -k 10 "$limit" "$@" > "$out/$name.txt" 2>&1 || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$limit" "$((SECONDS - t0))" "$rc" >> "$out/parts.tsv"
}
