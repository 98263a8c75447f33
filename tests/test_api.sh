#!/usr/bin/env bash
# The library API (include/lingvoc.h, liblingvoc.so) against bin/decoder, for the same
# checkpoints and overrides: examples/translate prints bin/decoder --decode_text's lines
# byte for byte for the golden Transformer, RNMT and both punctuators
# (tests/data/decode_golden); examples/score prints --score_text's log-probability and
# token count per line for a tiny RNN LM (trained 30 steps here), and its per-token
# log-probabilities add up to the total; Python's transcribe gives bin/decoder
# --decode_audio's text for a tiny LAS from paths and from 16 kHz samples;
# examples/classify gives LeNet5's class
# probabilities (rows sum to 1, a batch as each image alone); errors are exit 1 naming
# the file or the call. Installed: scripts/install.sh (make install) into a prefix, a C
# program of at most 40 lines built with `pkg-config --cflags --libs lingvoc` translates
# from another directory, with no experiments tree but the installed one. The Python
# binding (python/, ctypes) gives the same text and scores, installs with pip offline
# into a venv of /usr/bin/python3, and samples as bin/decoder --sample; Model(...,
# scorers=[(lm, 4.0)]) transcribes as task.decoder.fusion at lm_weight 4 does (parts
# skipped, and counted, without numpy or pip).
. "$(dirname "$0")/lib.sh"
LV_BUILD=${LV_BUILD:-$LV_ROOT/build}
EX=$LV_BUILD/examples
G=$LV_ROOT/tests/data/decode_golden
. "$G/models.sh"
[ -x "$EX/translate" ] || skip "$EX/translate is not built (make all builds the examples; not with CUDA=1)"
# An ASan build's library (make asan): programs linking it are built with the sanitizers,
# and Python (not built with them) cannot load it.
SAN=
ldd "$LV_BUILD/liblingvoc.so" | grep -q libasan && SAN="-fsanitize=address,undefined"

# ---- translate: the golden models, API == bin/decoder --decode_text ----
for name in $GOLDEN_MODELS; do
  M=$(golden_var MODEL "$name") OVN=$(golden_var OV "$name") TXT=$G/$(golden_var TEXT "$name")
  ck=$G/$name/ckpt-00000020
  "$LV_BIN/decoder" --model="$M" --logdir="$T/log" --decode_text=- --checkpoint="$ck" --model_params_override="$OVN" \
    <"$TXT" >"$T/$name.decoder" 2>"$T/err" || fail "$name: bin/decoder: $(tail -2 "$T/err")"
  expect_exit 0 "$name: examples/translate" sh -c '"$0" "$1" "$2" "$3" "$4" <"$5"' "$EX/translate" "$M" "$T/log" "$ck" \
    "$OVN" "$TXT"
  check "$name: the API's lines are bin/decoder's, byte for byte" cmp -s "$T/out" "$T/$name.decoder"
  check "$name: nothing on stderr" test ! -s "$T/err"
done
expect_exit 1 "translate: a missing checkpoint" sh -c '"$0" "$1" "$2" "$3" "$4" </dev/null' "$EX/translate" \
  "$MODEL_transformer" "$T/log" "$T/no/ckpt-1" "$OV_transformer"
err_has "$T/no/ckpt-1"
expect_exit 1 "translate: an unknown experiment" sh -c '"$0" "$1" "$2" </dev/null' "$EX/translate" mt.bible_en_es.Nope "$T/log"
err_has "Nope"

# ---- score: a tiny LM, API == bin/decoder --score_text ----
gen_lm_text "$T"
printf 'moses said unto aaron.\n\nthe children of israel speak.\n' >>"$T/dev.txt"
LM=lm.bible.RnnLmTinyTest
LMOV="input.file_pattern: \"text:$T/train.txt\"; train.max_steps: 30"
expect_exit 0 "trainer: 30 steps of $LM" "$LV_BIN/trainer" --model=$LM --logdir="$T/lm" --model_params_override="$LMOV"
"$LV_BIN/decoder" --model=$LM --logdir="$T/lm" --score_text="$T/dev.txt" --model_params_override="$LMOV" \
  >"$T/score.decoder" 2>"$T/err" || fail "bin/decoder --score_text: $(tail -2 "$T/err")"
expect_exit 0 "examples/score -v" "$EX/score" -v $LM "$T/lm" "$T/dev.txt" "" "$LMOV"
cp "$T/out" "$T/score.api"
check "score: log-probability and tokens per line as bin/decoder's" \
  cmp -s <(grep -v '^corpus:' "$T/score.decoder" | cut -f1,2) <(cut -f1,2 "$T/score.api")
check "score: per-token log-probabilities add up to the total (1e-3)" awk -F'\t' '
  { n = split($3, t, " "); s = 0; for (i = 1; i <= n; i++) s += t[i]
    if (n != $2 || (s - $1 > 1e-3 || $1 - s > 1e-3)) { print "line " NR ": " s " vs " $1 " (" n " tokens)"; bad = 1 } }
  END { exit bad }' "$T/score.api"
expect_exit 1 "score: a translation model" "$EX/score" "$MODEL_transformer" "$T/log" "$T/dev.txt" \
  "$G/transformer/ckpt-00000020" "$OV_transformer"
err_has "lv_score_text: model $MODEL_transformer (task mt.model.TransformerModel) does not take it; it takes lv_translate"
expect_exit 1 "translate: a language model" sh -c '"$0" "$1" "$2" "" "$3" </dev/null; printf "x\n" | "$0" "$1" "$2" "" "$3"' \
  "$EX/translate" $LM "$T/lm" "$LMOV"
err_has "lv_translate: model $LM (task lm.model.LanguageModel) does not take it; it takes lv_score_text, lv_sample_text"

# ---- classify: LeNet5 a few steps on Fashion-MNIST ----
ensure_fashion_mnist
if fm_valid "$FM"; then
  CL=image.mnist.LeNet5
  CLOV="input.ckpt: \"$FM\"; input.num_samples: 1000; train.max_steps: 3"
  expect_exit 0 "trainer: 3 steps of LeNet5" "$LV_BIN/trainer" --model=$CL --logdir="$T/cl" --model_params_override="$CLOV"
  head -c $((28 * 28 * 5)) /dev/urandom >"$T/img5"
  expect_exit 0 "examples/classify: 5 images" "$EX/classify" $CL "$T/cl" 28 28 1 "$T/img5" "" "$CLOV"
  check "classify: 5 lines of index, class, probability" awk -F'\t' 'NF != 3 || $2 < 0 || $2 > 9 || $3 <= 0.1 || $3 > 1 { bad = 1 }
    END { exit bad || NR != 5 }' "$T/out"
  expect_exit 1 "classify: the wrong image shape" "$EX/classify" $CL "$T/cl" 14 14 4 "$T/img5" "" "$CLOV"
  err_has "input.data_shape"
else
  skip_part "Fashion-MNIST could not be built: classify not checked"
fi

# ---- transcribe: a tiny LAS trained 20 steps on two espeak-ng utterances ----
ASRM=asr.bible_tts.TinyTest
if tiny_las "$T"; then
  "$LV_BIN/decoder" --model=$ASRM --logdir="$T/asr" --decode_audio=@"$T/asr.list" --model_params_override="$ASROV" \
    >"$T/asr.decoder" 2>"$T/err" || fail "bin/decoder --decode_audio: $(tail -2 "$T/err")"
else
  skip_part "espeak-ng or sox missing: lv_transcribe not checked"
fi

# ---- installed: make install's script, pkg-config, a <= 40-line program elsewhere ----
P=$T/prefix
expect_exit 0 "scripts/install.sh into a prefix" bash "$LV_ROOT/scripts/install.sh" "$LV_BUILD" "$LV_BIN" "$P"
for f in include/lingvoc.h lib/pkgconfig/lingvoc.pc lib/liblingvoc.a lib/liblingvoc.so bin/decoder experiments/mt/bible_en_es.cfg; do
  check "installed $f" test -e "$P/$f"
done
check "lib/liblingvoc.so.0 is the soname" test "$(readelf -d "$P/lib/liblingvoc.so" | sed -n 's/.*soname: \[\(.*\)\]/\1/p')" = liblingvoc.so.0
check "examples/translate.c has at most 40 lines" test "$(wc -l <"$LV_ROOT/examples/translate.c")" -le 40
if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs lingvoc)
  expect_exit 0 "cc \$(pkg-config --cflags --libs lingvoc)" cc -std=c11 -Wall -Werror $SAN "$LV_ROOT/examples/translate.c" \
    $flags -Wl,-rpath,"$P/lib" -o "$T/tr_installed"
  cp "$G/mt/text.in" "$T/text.in"
  (cd / && env -u LINGVOC_EXPERIMENTS "$T/tr_installed" "$MODEL_transformer" "$T/log" "$G/transformer/ckpt-00000020" \
    "$OV_transformer" <"$T/text.in" >"$T/inst.out" 2>"$T/err")
  check "the installed library translates from / as bin/decoder" cmp -s "$T/inst.out" "$T/transformer.decoder"
  check "nm: only lv_* API symbols exported" sh -c "nm -D --defined-only '$P/lib/liblingvoc.so' | awk '\$3 !~ /^(lv_|LINGVOC_)/ { bad = 1 } END { exit bad }'"
else
  skip_part "pkg-config is missing: the installed library not checked"
fi

# ---- Python: pip install into a venv of /usr/bin/python3, same text as bin/decoder ----
PY=/usr/bin/python3
if [ -n "$SAN" ]; then
  skip_part "an ASan build: the Python binding not checked (python3 cannot load an ASan library)"
elif ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -m pip --version >/dev/null 2>&1; then
  skip_part "$PY has no venv or pip: the Python binding not checked"
else
  expect_exit 0 "python venv (--system-site-packages)" "$PY" -m venv --system-site-packages "$T/venv"
  cp -r "$LV_ROOT/python" "$T/python" # pip builds in the source folder: not in the checkout
  rm -rf "$T/python/build" "$T/python"/*.egg-info # a user's earlier pip install there is not this one
  expect_exit 0 "pip install ./python (offline)" "$T/venv/bin/pip" install --no-index --no-build-isolation "$T/python"
  export LINGVOC_LIBRARY=$P/lib/liblingvoc.so.0
  "$LV_BIN/decoder" --model=$LM --logdir="$T/lm" --sample=3 --seed=5 --prefix="the lord" --model_params_override="$LMOV" \
    >"$T/sample.decoder" 2>"$T/err" || fail "bin/decoder --sample: $(tail -2 "$T/err")"
  cd "$T" && cat >"$T/t.py" <<EOF
import sys, lingvoc
G, T = "$G", "$T"
out = {}
m = lingvoc.Model(model="$MODEL_transformer", logdir=T + "/log", checkpoint=G + "/transformer/ckpt-00000020",
                  params_override="""$OV_transformer""")
lines = open(G + "/mt/text.in", "rb").read().split(b"\n")[:-1]  # bytes: a line is not UTF-8
want = open(T + "/transformer.decoder", "rb").read().decode("utf-8", "replace").split("\n")[:-1]
assert m.translate(lines) == want, (m.translate(lines), want)
nb = m.translate_nbest(lines, k=4)
assert all(len(h) <= 4 and all(h[i][1] >= h[i + 1][1] for i in range(len(h) - 1)) for h in nb), "nbest"
try:
    m.score(["x"])
    sys.exit("score on a translation model did not raise")
except lingvoc.Error as e:
    assert "lv_score_text" in str(e) and e.code == lingvoc.INVALID, str(e)
try:
    lingvoc.Model(model="$MODEL_transformer", logdir=T + "/log", checkpoint=T + "/none/ckpt-1",
                  params_override="""$OV_transformer""")
    sys.exit("a missing checkpoint did not raise")
except lingvoc.Error as e:
    assert T + "/none/ckpt-1" in str(e) and e.code == lingvoc.NOT_FOUND, str(e)
try:  # this library has no CUDA (make CUDA=1 builds no shared library)
    lingvoc.Model(model="$LM", logdir=T + "/lm", params_override='''$LMOV''', gpu=True)
    sys.exit("gpu=True without CUDA did not raise")
except lingvoc.Error as e:
    assert "gpu = 1: this library was built without CUDA" in str(e) and e.code == lingvoc.INVALID, str(e)
lm = lingvoc.Model(model="$LM", logdir=T + "/lm", params_override='''$LMOV''')
dev = open(T + "/dev.txt").read().split("\n")[:-1]
want = [l.split("\t") for l in open(T + "/score.decoder").read().split("\n")[:-1] if not l.startswith("corpus:")]
got = lm.score(dev)
assert len(got) == len(want) and all(("%.6f" % g) == w[0] for g, w in zip(got, want) if w[0]), (got, want)
toks = lm.score_tokens(dev)
assert all(abs(sum(t) - g) < 1e-3 for t, g in zip(toks, got)), "tokens"
assert lm.sample(3, prefix="the lord", seed=5) == open(T + "/sample.decoder").read().split("\n")[:-1], "sample"
assert lm.sample(3, prefix="the lord", seed=5) == lm.sample(3, prefix="the lord", seed=5), "sample repeats"
print("python: ok", lingvoc.version())
EOF
  expect_exit 0 "python: translate, n-best, score, sample as bin/decoder; errors raise lingvoc.Error" \
    "$T/venv/bin/python" "$T/t.py"
  if "$T/venv/bin/python" -c 'import numpy' 2>/dev/null && [ -s "$T/asr.decoder" ]; then
    cat >"$T/a.py" <<EOF
import wave, numpy as np, lingvoc
m = lingvoc.Model(model="$ASRM", logdir="$T/asr", params_override='''$ASROV''')
paths = open("$T/asr.list").read().split()
want = [l.split("\t", 1)[1] for l in open("$T/asr.decoder").read().split("\n")[:-1]]
assert m.transcribe(paths) == want, (m.transcribe(paths), want)
w = wave.open(paths[0])
x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
got = m.transcribe([x, paths[1]])
assert got == want, (got, want)
assert m.transcribe([np.zeros(16000, np.float32)]) == [""], "silence"
try:
    m.transcribe(["$T/none.wav"])
    raise SystemExit("a missing file did not raise")
except lingvoc.Error as e:
    assert "$T/none.wav" in str(e), str(e)
try:
    m.score(["x"])
    raise SystemExit("score on ASR did not raise")
except lingvoc.Error as e:
    assert "it takes lv_transcribe" in str(e), str(e)
print("python transcribe: ok")
EOF
    expect_exit 0 "python: transcribe paths and 16 kHz samples as bin/decoder --decode_audio" "$T/venv/bin/python" "$T/a.py"
  else
    skip_part "numpy (or the ASR run) missing: Model.transcribe not checked"
  fi
  # Scorers: the committed tiny LAS with the tiny LM at weight 4 in its scorer list gives
  # bin/decoder's lines with task.decoder.fusion at lm_weight 4 (tests/data/lines_golden).
  LG=$LV_ROOT/tests/data/lines_golden
  cat >"$T/s.py" <<EOF
import lingvoc
LG = "$LG"
lm = lingvoc.Model(model="lm.bible.RnnLmTinyTest", logdir="$T/lg", checkpoint=LG + "/lm/ckpt-00000020",
                   params_override='input.file_pattern: "text:' + LG + '/lm/train.txt"')
las = dict(model="asr.bible_tts.TinyTest", logdir="$T/lg", checkpoint=LG + "/las/ckpt-00000020")
wavs = [LG + "/las/yes_go.wav", LG + "/las/no_stop.wav"]
def golden(name):
    return [l.split("\\t", 1)[1] for l in open(LG + "/expected/" + name + ".out").read().split("\\n")[:2]]
assert lingvoc.Model(**las).transcribe(wavs) == golden("audio_list")
assert lingvoc.Model(**las, scorers=[(lm, 4.0)]).transcribe(wavs) == golden("audio_fusion")
assert golden("audio_list") != golden("audio_fusion")
try:
    lingvoc.Model(**las, scorers=[(lm, -1.0)])
    raise SystemExit("a negative weight did not raise")
except lingvoc.Error as e:
    assert "scorers[0].weight" in str(e), str(e)
print("python scorers: ok")
EOF
  expect_exit 0 "python: scorers=[(lm, 4.0)] as task.decoder.fusion at lm_weight 4" "$T/venv/bin/python" "$T/s.py"
  if "$T/venv/bin/python" -c 'import numpy' 2>/dev/null && [ -e "$T/cl" ]; then
    cat >"$T/c.py" <<EOF
import numpy as np, lingvoc
m = lingvoc.Model(model="image.mnist.LeNet5", logdir="$T/cl", params_override='''$CLOV''')
imgs = np.random.RandomState(0).randint(0, 256, size=(6, 28, 28), dtype=np.uint8)
p = m.classify(imgs)
assert p.shape == (6, 10) and np.allclose(p.sum(1), 1, atol=1e-5), p
one = np.concatenate([m.classify(imgs[i:i + 1]) for i in range(6)])
assert np.allclose(p, one, atol=1e-6), (p, one)
# PNG paths: the same probabilities as the arrays they hold (8-bit gray PNGs, zlib only).
import struct, zlib
def png(path, img):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    raw = b"".join(b"\\0" + img[y].tobytes() for y in range(img.shape[0]))
    open(path, "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
paths = []
for i in range(6):
    paths.append("$T/img%d.png" % i)
    png(paths[-1], imgs[i])
pf = m.classify(paths)
assert np.allclose(p, pf, atol=1e-6), (p, pf)
try:
    m.classify(["$T/img0.png", "$T/nothing.png"])
    raise SystemExit("a missing PNG did not raise")
except lingvoc.Error as e:
    assert "$T/nothing.png" in str(e), str(e)
try:
    m.translate(["x"])
    raise SystemExit("translate on a classifier did not raise")
except lingvoc.Error as e:
    assert "it takes lv_classify" in str(e), str(e)
print("python classify: ok")
EOF
    expect_exit 0 "python: classify [N, 28, 28] -> [N, 10], batch == one by one == PNG paths; a missing PNG raises naming it" "$T/venv/bin/python" "$T/c.py"
  else
    skip_part "numpy (or the LeNet5 run) missing: Model.classify not checked"
  fi
fi
finish
