#!/usr/bin/env bash
# bin/sacrebleu_score end to end: sacrebleu's README corpus (two reference files, and a
# variable number of references) gives sacrebleu's printed lines exactly; stdin, CRLF
# files, a last line without "\n", empty files (refused) and a 10,000-word line; --print_tokens,
# --score_only, --width, --signature; bad input (missing file, line counts that differ,
# invalid UTF-8, a NUL byte, bad flags) exits 2 naming the file and line. When
# /usr/bin/python3 can import sacrebleu (it is not a dependency: PYTHONPATH may point at a
# source checkout), 200 random corpora with punctuation, entities, digits, dashes, UTF-8
# and Unicode white space are scored by both under every option, and must print the same
# line to 10 decimals; otherwise that part says it is skipped.
. "$(dirname "$0")/lib.sh"
SB=$LV_BIN/sacrebleu_score

printf 'The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n' >"$T/ref1"
printf 'The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n' >"$T/ref2"
printf "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n" >"$T/hyp"
printf '\nIt was not unexpected.\nThe man bit him first.\n' >"$T/ref1v"
README='BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)'

expect_exit 0 "README corpus, two references" "$SB" --ref="$T/ref1,$T/ref2" --hyp="$T/hyp"
check "prints sacrebleu's README line" test "$(cat "$T/out")" = "$README"
expect_exit 0 "variable references" "$SB" --ref="$T/ref1v,$T/ref2" --hyp="$T/hyp"
check "prints the README's variable-references line" test "$(cat "$T/out")" = \
  'BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)'
expect_exit 0 "hypotheses on stdin" sh -c "'$SB' --ref='$T/ref1,$T/ref2' < '$T/hyp'"
check "stdin gives the same line" test "$(cat "$T/out")" = "$README"
expect_exit 0 "--signature" "$SB" --ref="$T/ref1,$T/ref2" --hyp="$T/hyp" --signature
check "signature line" test "$(cat "$T/out")" = \
  "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp = ${README#BLEU = }"
expect_exit 0 "--score_only --width=4" "$SB" --ref="$T/ref1,$T/ref2" --hyp="$T/hyp" --score_only --width=4
check "score alone ($(cat "$T/out"))" test "$(cat "$T/out")" = "48.5308"
expect_exit 0 "--width=1" "$SB" --ref="$T/ref1,$T/ref2" --hyp="$T/hyp" --width=1
check "width 1 line" test "$(cat "$T/out")" = \
  'BLEU = 48.5 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)'
expect_exit 0 "--tokenize=none" "$SB" --ref="$T/ref1,$T/ref2" --hyp="$T/hyp" --tokenize=none --score_only --width=7
check "test_bleu.py's tokenize=none score 49.1919566 ($(cat "$T/out"))" test "$(cat "$T/out")" = "49.1919566"

# CRLF and a missing final newline change nothing (lines are rstrip()ed).
sed 's/$/\r/' "$T/hyp" >"$T/hyp.crlf"
printf '%s' "$(cat "$T/ref1")" >"$T/ref1.nonl"
expect_exit 0 "CRLF hypotheses, reference without a final newline" "$SB" --ref="$T/ref1.nonl,$T/ref2" --hyp="$T/hyp.crlf"
check "same line" test "$(cat "$T/out")" = "$README"

expect_exit 0 "--print_tokens" "$SB" --print_tokens --hyp="$T/hyp"
check "13a tokens" test "$(cat "$T/out")" = "$(printf "The dog bit the man .\nIt wasn't surprising .\nThe man had just bitten him .")"

: >"$T/empty"
# An empty test set is refused, as sacrebleu refuses it ("contains no sentence"): its
# "BLEU = 0.00" would read as a score.
expect_exit 2 "empty files" "$SB" --ref="$T/empty" --hyp="$T/empty"
err_has "$T/empty and --ref=$T/empty contain no sentence"
check "no score printed" test ! -s "$T/out"
printf '\n\n\n' >"$T/blank"
expect_exit 0 "empty hypotheses (test_bleu.py: kept, not removed)" "$SB" --ref="$T/ref1,$T/ref2" --hyp="$T/blank"
check "empty lines are hypotheses of length 0" test "$(cat "$T/out")" = \
  'BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 17)'

awk 'BEGIN { for (i = 0; i < 10000; i++) printf "w%d%s", i % 500, (i % 9 ? " " : ", "); print "" }' >"$T/long"
expect_exit 0 "a 10,000-word line against itself" "$SB" --ref="$T/long" --hyp="$T/long"
check "scores 100 ($(cut -c1-40 "$T/out"))" grep -q '^BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000' "$T/out"

# ---- bad input ----
expect_exit 2 "no --ref" "$SB" --hyp="$T/hyp"
err_has "--ref"
expect_exit 2 "missing reference file" "$SB" --ref="$T/nope" --hyp="$T/hyp"
err_has "$T/nope"
expect_exit 2 "missing hypothesis file" "$SB" --ref="$T/ref1" --hyp="$T/nope2"
err_has "$T/nope2"
head -n 2 "$T/ref2" >"$T/ref2.short"
expect_exit 2 "a reference with fewer lines" "$SB" --ref="$T/ref1,$T/ref2.short" --hyp="$T/hyp"
err_has "$T/ref2.short has 2 lines but $T/hyp has 3"
expect_exit 2 "a hypothesis with fewer lines" "$SB" --ref="$T/ref1" --hyp="$T/ref2.short"
err_has "$T/ref2.short has 2 lines but $T/ref1 has 3"
printf 'ok\nbad \xff byte\n' >"$T/badutf"
printf 'a\nb\n' >"$T/two"
expect_exit 2 "invalid UTF-8" "$SB" --ref="$T/two" --hyp="$T/badutf"
err_has "$T/badutf:2: invalid UTF-8 at byte 5"
printf 'a\n\xed\xa0\x80 surrogate\n' >"$T/surr"
expect_exit 2 "an encoded surrogate" "$SB" --ref="$T/surr" --hyp="$T/two"
err_has "$T/surr:2: invalid UTF-8"
printf 'a\nb\0c\n' >"$T/nul"
expect_exit 2 "a NUL byte" "$SB" --ref="$T/two" --hyp="$T/nul"
err_has "$T/nul:2: a NUL byte"
expect_exit 2 "--tokenize=intl" "$SB" --ref="$T/ref1" --hyp="$T/hyp" --tokenize=intl
err_has "'intl' unknown"
expect_exit 2 "--smooth_method=add_k" "$SB" --ref="$T/ref1" --hyp="$T/hyp" --smooth_method=add_k
err_has "add-k"
expect_exit 2 "--max_ngram_order=0" "$SB" --ref="$T/ref1" --hyp="$T/hyp" --max_ngram_order=0
err_has "--max_ngram_order=0"
expect_exit 2 "--smooth_value=-1" "$SB" --ref="$T/ref1" --hyp="$T/hyp" --smooth_method=floor --smooth_value=-1
err_has "smooth_value -1"
expect_exit 2 "an empty name in --ref" "$SB" --ref="$T/ref1,,$T/ref2" --hyp="$T/hyp"
err_has "an empty file name"

# ---- against sacrebleu itself, when /usr/bin/python3 has it ----
if /usr/bin/python3 -c 'import sacrebleu' 2>/dev/null; then
  if /usr/bin/python3 - "$SB" "$T" >"$T/peer" 2>&1 <<'PY'
import os, random, subprocess, sys
from sacrebleu.metrics import BLEU
sb, tmp = sys.argv[1], sys.argv[2]
rng = random.Random(1234)
atoms = ["the", "dog", "man", "bit", "a", "é", "ţară", "中文", "x1", "3", "14", "1,000", "3.14", "-", "--", ".", ",",
         "...", "'", '"', "&amp;", "&quot;", "&lt;", "&gt;", "&", "&amp;lt;", "<skipped>", "(", ")", "[", "]", "{",
         "}", "/", "\\", "?", "!", ":", ";", "@", "#", "$", "%", "^", "_", "`", "~", "|", "+", "*", "=", "<", ">",
         "9-", "-9", "a.b", "1.a", "a,1", "e.g.", "U.S.", "\u00a0", "\u3000", "\t", "\u2028", "\r", " ", "😀"]
def sent():
    return "".join(rng.choice(atoms if rng.random() < 0.6 else atoms[:12]) + (" " if rng.random() < 0.7 else "")
                   for _ in range(rng.randint(0, 25)))
bad = 0
for r in range(200):
    nl, nrefs = rng.randint(1, 30), rng.choice([1, 1, 2, 3])
    hyps = [sent() for _ in range(nl)]
    refs = [[h if rng.random() < 0.3 else sent() for h in hyps] for _ in range(nrefs)]
    paths = []
    for i, lines in enumerate([hyps] + refs):
        paths.append(os.path.join(tmp, f"peer{i}"))
        with open(paths[-1], "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(l + "\n" for l in lines))
    kw = dict(tokenize=rng.choice(["13a", "13a", "none"]), smooth_method=rng.choice(["exp", "floor", "add-k", "none"]),
              max_ngram_order=rng.randint(1, 6), effective_order=rng.random() < 0.3)
    args = [sb, "--ref=" + ",".join(paths[1:]), "--hyp=" + paths[0], "--tokenize=" + kw["tokenize"],
            "--smooth_method=" + kw["smooth_method"], "--max_ngram_order=%d" % kw["max_ngram_order"],
            "--effective_order=" + ("true" if kw["effective_order"] else "false"), "--width=10"]
    if kw["smooth_method"] in ("floor", "add-k") and rng.random() < 0.5:
        kw["smooth_value"] = rng.choice([0, 0.01, 0.5, 2, 3.7])
        args.append("--smooth_value=%r" % kw["smooth_value"])
    got = subprocess.run(args, capture_output=True).stdout.decode().strip()
    want = BLEU(**kw).corpus_score([h.rstrip() for h in hyps], [[x.rstrip() for x in rr] for rr in refs]).format(width=10)
    if got != want:
        bad += 1
        print("MISMATCH", kw, "\n got ", got, "\n want", want)
print("200 corpora, %d mismatches" % bad)
sys.exit(1 if bad else 0)
PY
  then ok "same lines as sacrebleu on random corpora: $(tail -1 "$T/peer")"
  else fail "differs from sacrebleu: $(head -c 2000 "$T/peer")"
  fi
else
  echo "skip - /usr/bin/python3 cannot import sacrebleu: no random comparison (published vectors only)"
fi
finish
