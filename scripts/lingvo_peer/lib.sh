# Sourced by the scripts that run real Lingvo beside lingvoc (lenet5.sh, mt.sh) after they
# set ROOT and WORK and cd to WORK: the peers' Python in PY, the OpenBLAS kernels lingvoc
# selects, and the report and timing helpers.
PY=$("$ROOT/scripts/peers.sh" | tail -1)
. "$ROOT/bench/peer_env.sh"   # the peers get the OpenBLAS kernels lingvoc selects
export TF_CPP_MIN_LOG_LEVEL=2
R=$WORK/report.md
BAD=0
say() { echo "$*" | tee -a "$R"; }
versions() { # "Lingvo X (TensorFlow Y)"
  echo "Lingvo $("$PY" -c 'import importlib.metadata as m; print(m.version("lingvo"))') (TensorFlow $("$PY" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))'))"
}
rate() { # LOG FIRST LAST: steps per second between two logged steps (hh:mm:ss.frac stamps)
  awk -v a="$2" -v b="$3" '
    match($0, /step: *[0-9]+,/) {
      s = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", s); s += 0
      split($2, t, ":"); sec = t[1] * 3600 + t[2] * 60 + t[3]
      if (s == a) ta = sec; if (s == b) tb = sec
    }
    END { if (ta == "" || tb == "") exit 1; printf "%.2f", (b - a) / (tb - ta) }' "$1"
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
spread() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
file_metric() { # FILE KEY: the last "KEY: value" of a score file or log (mt.sh, mt_decode_race.sh)
  grep -o "$2: [0-9.e+-]*" "$1" | tail -1 | cut -d' ' -f2
}
# MT decoders' hypotheses as "src<TAB>n<TAB>score<TAB>hyp" lines, sorted (mt.sh, mt_decode_race.sh).
hyps_lingvo() { # LOG: from Lingvo's decoder log, each pair once
  sed -n 's/.*model\.py:[0-9]*\] //p' "$1" | awk '
    /^source: / { src = substr($0, 9); n = 0; next }
    /^  -?[0-9]/ { s = $1; sub(/:$/, "", s); h = $0; sub(/^  [^:]*: /, "", h)
      printf "%s\t%d\t%.4f\t%s\n", src, n++, s, h }' | sort -u
}
hyps_lingvoc() { # DECODER_OUT
  awk '/^src: / { src = substr($0, 6); next }
    /^hyp [0-9]+: score / { n = $2 + 0; s = $4; sub(/:$/, "", s); h = $0; sub(/^hyp [0-9]+: score [^:]*: /, "", h)
      printf "%s\t%d\t%.4f\t%s\n", src, n, s, h }' "$1" | sort
}
