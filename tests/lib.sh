# Helpers for the shell tests: ok/fail counting, a temp dir removed on exit, and the
# Fashion-MNIST checkpoint built once per run by keras2ckpt.
set -u
LV_BIN=${LV_BIN:-$PWD/bin}
LV_ROOT=${LV_ROOT:-$PWD}
T=$(mktemp -d /tmp/lingvoc-test.XXXXXX)
[ -n "${KEEP_T:-}" ] || trap 'rm -rf "$T"' EXIT
NPASS=0
NFAIL=0
NSKIP=0
ok() { echo "ok: $*"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $*"; NFAIL=$((NFAIL + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
# ckpt_dump PREFIX: every tensor of a checkpoint but lingvoc's own (_lingvoc/*), printed in
# full, to compare two runs' checkpoints with cmp.
ckpt_dump() {
  "$LV_BIN/ckpt_inspect" --file_name="$1" | cut -d' ' -f1 | grep -v '^_lingvoc/' | while read -r name; do
    "$LV_BIN/ckpt_inspect" --file_name="$1" --tensor_name="$name" --printoptions=threshold=100000000
  done
}
# ckpt_listed TRAIN_DIR STEP: the state file of TRAIN_DIR lists ckpt-STEP as the latest.
# A kill -9 test waits on this, not on ckpt-STEP.index: the index is written before the
# state file, so a kill between the two resumes from the previous checkpoint.
ckpt_listed() {
  grep -qx "model_checkpoint_path: \"ckpt-$(printf %08d "$2")\"" "$1/checkpoint" 2>/dev/null
}
# wait_ckpt_listed TRAIN_DIR STEP: polls ckpt_listed for up to 2 minutes.
wait_ckpt_listed() {
  for _ in $(seq 6000); do ckpt_listed "$1" "$2" && return 0; sleep 0.02; done
  return 1
}
# skip WHY: the test cannot run here (a missing tool): one line, exit 77, which
# scripts/run-tests.sh counts as skipped, never as passed.
skip() { echo "$(basename "$0"): skipped: $*"; exit 77; }
# need_lingvo: skips without the peers' venv (scripts/peers.sh) or a Lingvo it can import;
# sets PY and exports PEERS_VENV for the scripts under scripts/lingvo_peer/.
need_lingvo() {
  export PEERS_VENV=${PEERS_VENV:-$HOME/.cache/lingvoc/peers}
  PY=$PEERS_VENV/bin/python
  [ -x "$PY" ] || skip "no peers venv at $PY (scripts/peers.sh builds it)"
  TF_CPP_MIN_LOG_LEVEL=3 "$PY" -c 'import lingvo.core.ops' 2>/dev/null || skip "$PY cannot import Lingvo (scripts/peers.sh)"
}
# skip_part WHY: one part cannot run here; the rest runs, and finish returns 77 (skipped)
# unless something failed.
skip_part() { echo "skip: $*"; NSKIP=$((NSKIP + 1)); }
# asan_build: the executables under test are the sanitizer build (make asan): its memory
# figures carry ASan's shadow and quarantine, and -O1's float order is not -O2's.
asan_build() { ldd "$LV_BIN/trainer" 2>/dev/null | grep -q libasan; }
finish() {
  echo "$(basename "$0"): $NPASS passed, $NFAIL failed"
  [ "$NFAIL" -eq 0 ] || return 1
  if [ "$NSKIP" -gt 0 ]; then echo "$(basename "$0"): skipped: $NSKIP part(s) could not run (see skip: above)"; return 77; fi
}
# expect_exit CODE WHAT CMD...: runs CMD (stderr to $T/err), checks the exit code.
expect_exit() {
  local want=$1 what=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then ok "$what (exit $got)"; else fail "$what: exit $got, want $want; stderr: $(tail -3 "$T/err")"; fi
}
err_has() { if grep -qF -- "$1" "$T/err"; then ok "message has '$1'"; else fail "message lacks '$1': $(head -5 "$T/err")"; fi; }
# huge_float_wav PATH: 1 s of a 16 kHz mono float WAV whose samples reach 1e16 (finite,
# but their log-mel features overflow to +inf).
huge_float_wav() {
  python3 - "$1" <<'PY'
import math, struct, sys
data = b"".join(struct.pack("<f", 1e16 * math.sin(i * 0.05)) for i in range(16000))
fmt = struct.pack("<HHIIHH", 3, 1, 16000, 64000, 4, 32)
body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
open(sys.argv[1], "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
PY
}

# Fashion-MNIST as a checkpoint, cached across tests and runs in a directory of this
# user's own (mode 700; a directory another user made, or a symlink, is not trusted: the
# checkpoint is then built in $T). A cached checkpoint is used only when ckpt_inspect
# lists its four tensors with their shapes; it is built under a lock into a temporary
# name and renamed into place, so concurrent runs never read half of one.
DATA_DIR=${LV_TEST_DATA_DIR:-${TMPDIR:-/tmp}/lingvoc-test-data-$(id -u)}
FM=$DATA_DIR/fashion_mnist
fm_valid() { # prefix
  [ "$("$LV_BIN/ckpt_inspect" --file_name="$1" 2>/dev/null | tr '\n' ' ')" = \
    "x_test (DT_UINT8) [10000,28,28] x_train (DT_UINT8) [60000,28,28] y_test (DT_UINT8) [10000] y_train (DT_UINT8) [60000] " ]
}
ensure_fashion_mnist() {
  if ! { mkdir -p -m 700 "$DATA_DIR" 2>/dev/null && [ -d "$DATA_DIR" ] && [ ! -L "$DATA_DIR" ] && [ -O "$DATA_DIR" ]; }; then
    echo "$(basename "$0"): $DATA_DIR is not a directory of this user's own; Fashion-MNIST goes to $T" >&2
    FM=$T/fashion_mnist
    "$LV_BIN/keras2ckpt" --dataset=fashion_mnist --out="$FM" >/dev/null
    return
  fi
  (
    flock 9 || exit 1
    fm_valid "$FM" && exit 0
    rm -f "$FM".index "$FM".data-*
    tmp=$(mktemp -d "$DATA_DIR/build.XXXXXX") || exit 1
    "$LV_BIN/keras2ckpt" --dataset=fashion_mnist --out="$tmp/fm" >/dev/null &&
      mv "$tmp/fm.data-00000-of-00001" "$FM.data-00000-of-00001" && mv "$tmp/fm.index" "$FM.index"
    rc=$?
    rm -rf "$tmp"
    exit $rc
  ) 9>"$DATA_DIR/lock"
}

# gen_mt_pairs SEED LINES DIR: a toy parallel corpus DIR/train.en, DIR/train.es of LINES
# pairs (3-6 words of 1-2 syllables; the target reverses each word's syllables and the
# word order through a fixed syllable map), deterministic for SEED.
gen_mt_pairs() {
  awk -v seed="$1" -v lines="$2" -v out="$3" 'BEGIN {
    ns = split("ka to ri en an do mi su ne lo pa ve ra", s, " ")
    split("ño la sé re el los ma ga di bre tar qué çi", t, " ")
    x = seed
    for (l = 0; l < lines; l++) {
      x = (x * 16807) % 2147483647; nw = 3 + x % 4; src = ""; tgt = ""
      for (w = 0; w < nw; w++) {
        x = (x * 16807) % 2147483647; k = 1 + x % 2; ws = ""; wt = ""
        for (j = 0; j < k; j++) { x = (x * 16807) % 2147483647; i = 1 + x % ns; ws = ws s[i]; wt = t[i] wt }
        src = src (w ? " " : "") ws; tgt = wt (w ? " " : "") tgt
      }
      print src "." > (out "/train.en"); print tgt "." > (out "/train.es")
    }
  }'
}
# mt_toy_model: mt.bible_en_es.TinyTest (M) trained 300 steps (dropout and label smoothing
# off) into $T/run on gen_mt_pairs 7 20 "$T" with a 128-piece vocabulary $T/wpm.voc and
# records $T/train.tfrecord (DATA: the override that reads them); skips the test when
# sentencepiece (which build_wpm_vocab.sh needs) is not installed.
mt_toy_model() {
  local c
  for c in spm_train spm_export_vocab; do
    if ! command -v "$c" >/dev/null 2>&1; then
      skip "$c not installed (apt-get install sentencepiece)"
    fi
  done
  gen_mt_pairs 7 20 "$T"
  expect_exit 0 "build_wpm_vocab.sh (128 pieces)" \
    sh "$LV_ROOT/scripts/build_wpm_vocab.sh" --input="$T/train.en,$T/train.es" --vocab_size=128 --out="$T/wpm.voc"
  expect_exit 0 "wpm_encode_file" "$LV_BIN/wpm_encode_file" --source_filepaths="$T/train.en" \
    --target_filepaths="$T/train.es" --wpm_filepath="$T/wpm.voc" --output_filepath="$T/train.tfrecord" --num_shards=1
  M=mt.bible_en_es.TinyTest
  DATA="input.file_pattern: $T/train.tfrecord@1"
  OV="$DATA; train.max_steps: 300; task.encoder.input_dropout_prob: 0; task.decoder.input_dropout_prob: 0"
  OV="$OV; task.decoder.label_smoothing.uncertainty: 0"
  expect_exit 0 "trainer: 300 steps of $M on 20 pairs" "$LV_BIN/trainer" --model=$M --logdir="$T/run" \
    --model_params_override="$OV"
}
# gen_punct_text SEED LINES: LINES sentences (to stdout) whose punctuation and capitals
# follow rules (questions, a comma after an interjection, "Run ...!", capitalized names).
gen_punct_text() {
  awk -v seed="$1" -v lines="$2" 'function cap(t) { return toupper(substr(t, 1, 1)) substr(t, 2) }
  BEGIN {
    nq = split("where who why how", q, " "); ni = split("yes no well now", it, " ")
    nn = split("john mary paris rome", nm, " ")
    nw = split("the dog cat walked to house big small went saw a old new we they", w, " ")
    x = seed
    for (l = 0; l < lines; l++) {
      x = (x * 16807) % 2147483647; kind = x % 4
      x = (x * 16807) % 2147483647; n = 3 + x % 5; s = ""
      for (i = 0; i < n; i++) {
        x = (x * 16807) % 2147483647; r = x % (nw + nn)
        s = s (i ? " " : "") (r < nw ? w[r + 1] : cap(nm[r - nw + 1]))
      }
      x = (x * 16807) % 2147483647
      if (kind == 0) s = cap(q[1 + x % nq]) " " s "?"
      else if (kind == 1) s = cap(it[1 + x % ni]) ", " s "."
      else if (kind == 2) s = "Run " s "!"
      else s = cap(s) "."
      print s
    }
  }'
}
# gen_lm_text DIR: 200 lines of a 15-word vocabulary, every tenth into DIR/dev.txt, the
# others into DIR/train.txt (a tiny LM's data).
gen_lm_text() {
  awk -v out="$1" 'BEGIN { n = split("the lord said unto moses and aaron speak to the children of israel saying", w, " "); x = 7
    for (l = 0; l < 200; l++) { x = (x * 16807) % 2147483647; nw = 3 + x % 8; s = ""; st = 1 + x % n
      for (i = 0; i < nw; i++) s = s (i ? " " : "") w[1 + (st + i - 1) % n]
      print s "." > (out "/" (l % 10 == 9 ? "dev.txt" : "train.txt")) } }'
}
# tiny_las DIR: two espeak-ng utterances (DIR/wavs, DIR/asr.tsv, DIR/asr.list), their
# tfrecords (DIR/rec/utt@1) and asr.bible_tts.TinyTest trained 20 steps on them into
# DIR/asr; ASROV holds the overrides. Returns 1 without espeak-ng or sox.
tiny_las() {
  command -v espeak-ng >/dev/null && command -v sox >/dev/null || return 1
  mkdir -p "$1/wavs" "$1/rec"
  for u in "yes go" "no stop"; do
    local f=$1/wavs/${u// /_}.wav
    espeak-ng -v en-us -s 150 --stdout "$u" | sox -q -t wav - -r 16000 -c 1 -b 16 "$f" gain -2
    printf '%s\t%s\n' "$f" "$u" >>"$1/asr.tsv"
  done
  cut -f1 "$1/asr.tsv" >"$1/asr.list"
  expect_exit 0 "create_asr_features" "$LV_BIN/create_asr_features" --input_list="$1/asr.tsv" --generate_tfrecords \
    --output_template="$1/rec/utt-%5.5d-of-%5.5d"
  ASROV="input.file_pattern: \"$1/rec/utt@1\"; train.max_steps: 20"
  expect_exit 0 "trainer: 20 steps of asr.bible_tts.TinyTest" "$LV_BIN/trainer" --model=asr.bible_tts.TinyTest \
    --logdir="$1/asr" --model_params_override="$ASROV"
}
