# Shell functions of the Lingvo cross-checks beside lib.sh's (punctuator.sh); sourced after it.

# metric LINE NAME: the value of " NAME: V" in an evaler's summary line.
metric() { echo "$1" | grep -o " $2: [0-9.e+-]*" | cut -d' ' -f3; }
# logdir_of CKPT DIR: a fresh log dir whose train/ holds checkpoint CKPT as the latest.
logdir_of() {
  rm -rf "$2"; mkdir -p "$2/train"; cp "$1".index "$1".data-* "$2/train/"
  printf 'model_checkpoint_path: "%s"\n' "$(basename "$1")" >"$2/train/checkpoint"
}
# cross_evals LINGVO_CKPT LINGVOC_CKPT METRIC...: both evalers on both checkpoints, a
# Markdown table of METRICs through the caller's `say`. The caller defines lingvo_eval and
# lingvoc_eval (CKPT OUT_LOG: run once, print the summary line) and agree (LINE_A LINE_B:
# exit 0 when Lingvo's and lingvoc's summaries agree); a disagreement sets BAD=1.
cross_evals() {
  local lv=$1 lc=$2 pair who ck a b e m row
  shift 2
  say ""
  say "| checkpoint written by | evaluated by |$(printf ' %s |' "$@")"
  say "|---|---|$(printf -- '---|%.0s' "$@")"
  for pair in "Lingvo:$lv" "lingvoc:$lc"; do
    who=${pair%%:*} ck=${pair#*:}
    a=$(lingvo_eval "$ck" "eval_lingvo_of_$who.log") b=$(lingvoc_eval "$ck" "eval_lingvoc_of_$who.log")
    for e in "Lingvo:$a" "lingvoc:$b"; do
      row="| $who | ${e%%:*} |"
      for m in "$@"; do row="$row $(metric "${e#*:}" "$m") |"; done
      say "$row"
    done
    agree "$a" "$b" || { say "DISAGREE: $who's checkpoint: Lingvo's evaler says [$a], lingvoc's [$b]"; BAD=1; }
  done
}
