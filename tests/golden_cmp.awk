# golden_cmp.awk: compares a golden file (first operand) with a new output (second),
# line by line and field by field. Fields that are numbers (a decimal with a fraction or
# an exponent: a score, a metric) may differ by TOL relative to the larger magnitude
# (at least TOL absolute): the last printed digits of a float depend on the CPU's
# summation order (FMA, AVX-512 against AVX2, OpenBLAS's core). Everything else
# (hypotheses, integers, words, the line count) must be identical. Each mismatch
# prints FILE:LINE, what was expected and what came, and by how much for numbers;
# exits 1 on any mismatch.
# Usage: awk -v TOL=1e-5 -f golden_cmp.awk EXPECTED GOT
BEGIN {
  if (TOL == "") TOL = 1e-5
  bad = 0
}
function isnum(s) { return s ~ /^[-+]?[0-9]*\.[0-9]+([eE][-+]?[0-9]+)?[:,;]?$/ || s ~ /^[-+]?[0-9]+[eE][-+]?[0-9]+[:,;]?$/ }
function strip(s) { sub(/[:,;]$/, "", s); return s }
function tail(s) { return s ~ /[:,;]$/ ? substr(s, length(s)) : "" }
function absf(x) { return x < 0 ? -x : x }
FNR == NR { want[FNR] = $0; nwant = FNR; next }
{
  ngot = FNR
  if (FNR > nwant) { report(FNR, "(end of file)", $0, ""); next }
  w = want[FNR]
  if (w == $0) next
  nw = split(w, wf, /[ \t]+/); ng = split($0, gf, /[ \t]+/)
  if (nw != ng) { report(FNR, w, $0, ""); next }
  why = ""
  for (i = 1; i <= nw; i++) {
    if (wf[i] == gf[i]) continue
    if (isnum(wf[i]) && isnum(gf[i]) && tail(wf[i]) == tail(gf[i])) {
      a = strip(wf[i]) + 0; b = strip(gf[i]) + 0
      m = absf(a) > absf(b) ? absf(a) : absf(b)
      lim = TOL * (m > 1 ? m : 1)
      if (absf(a - b) <= lim) continue
      why = sprintf("field %d differs by %g (tolerance %g)", i, absf(a - b), lim)
    } else {
      why = sprintf("field %d: '%s' against '%s'", i, wf[i], gf[i])
    }
    report(FNR, w, $0, why)
    break
  }
}
function report(line, w, g, why) {
  bad++
  if (bad <= 10) {
    printf "%s:%d: expected: %s\n%s:%d: got:      %s\n", FILENAME, line, w, FILENAME, line, g
    if (why != "") printf "%s:%d: %s\n", FILENAME, line, why
  }
}
END {
  if (ngot < nwant) { bad++; printf "%s: %d lines, expected %d (next expected: %s)\n", FILENAME, ngot, nwant, want[ngot + 1] }
  if (bad > 10) printf "... %d mismatching lines in all\n", bad
  exit bad > 0
}
