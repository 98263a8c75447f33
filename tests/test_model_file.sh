#!/usr/bin/env bash
# Model files (bin/export, bin/trainer --mode=write_inference_graph; io/model_file.h) on
# a machine with neither the experiments tree nor the log directory: LINGVOC_EXPERIMENTS
# names an empty directory, the run is from another directory, and the log directory is
# gone after export. bin/decoder --model_file gives --model/--logdir's text byte for byte
# for the golden Transformer, RNMT and both punctuators (tests/data/decode_golden), the
# library (examples/translate -f) and Python's lingvoc.Model(path) the same; a tiny RNN LM
# scores (--score_text) and samples (--sample) as from its log directory; a tiny LAS
# transcribes (--decode_audio, and examples/transcribe -f: a C program under 40 lines)
# the same; LeNet5 classifies (examples/classify -f) the
# same, and bin/decoder --decode_images the same for the images as PNGs (and errors for
# a PNG of another size and a file that is not one). The file holds no optimizer slots and no input file pattern; with
# task.train.ema_decay it holds the moving averages (scores as the decoder on the
# averages, not as on the raw weights). A flipped byte is a CRC32C error naming the
# section (params, tensor), a cut file is "truncated", a foreign file is "not a lingvoc
# model file", a newer format version is refused, all exit 2 naming the file.
. "$(dirname "$0")/lib.sh"
LV_BUILD=${LV_BUILD:-$LV_ROOT/build}
EX=$LV_BUILD/examples
G=$LV_ROOT/tests/data/decode_golden
. "$G/models.sh"
mkdir -p "$T/empty" "$T/elsewhere"
# bin/decoder and the examples where neither experiments nor logdir exist.
away() { (cd "$T/elsewhere" && LINGVOC_EXPERIMENTS="$T/empty" "$@"); }

# ---- the golden models: --model_file == --model/--logdir, byte for byte ----
for name in $GOLDEN_MODELS; do
  M=$(golden_var MODEL "$name") DS=$(golden_var DATASET "$name") OVN=$(golden_var OV "$name")
  TXT=$G/$(golden_var TEXT "$name") ck=$G/$name/ckpt-00000020
  expect_exit 0 "$name: bin/export" "$LV_BIN/export" --model="$M" --logdir="$T/log" --checkpoint="$ck" --dataset="$DS" \
    --model_params_override="$OVN" --out="$T/$name.lvm"
  "$LV_BIN/decoder" --model="$M" --logdir="$T/log" --decode_text=- --checkpoint="$ck" --model_params_override="$OVN" \
    <"$TXT" >"$T/$name.decoder" 2>"$T/err" || fail "$name: bin/decoder: $(tail -2 "$T/err")"
  away "$LV_BIN/decoder" --model_file="$T/$name.lvm" --decode_text=- <"$TXT" >"$T/$name.file" 2>"$T/err"
  check "$name: --model_file's lines are --model/--logdir's, byte for byte" cmp -s "$T/$name.file" "$T/$name.decoder"
  check "$name: the log names the model file" grep -qF "$T/$name.lvm" "$T/err"
  if [ -x "$EX/translate" ]; then
    away "$EX/translate" -f "$T/$name.lvm" <"$TXT" >"$T/$name.api" 2>"$T/err"
    check "$name: lv_model_load_file + lv_translate: the same lines" cmp -s "$T/$name.api" "$T/$name.decoder"
  fi
done
ckb=$(cat "$G/transformer/ckpt-00000020".* | wc -c)
echo "transformer: model file $(wc -c <"$T/transformer.lvm") bytes, checkpoint $ckb bytes (index + data, with Adam slots)"
check "the model file has no optimizer slots" sh -c '! grep -qa "/Adam" "$0"' "$T/transformer.lvm"
check "the model file has no input file pattern" sh -c '! grep -qa "train.tfrecord" "$0"' "$T/transformer.lvm"
check "the model file holds the vocabulary" grep -qa "wpm.voc" "$T/transformer.lvm"
away "$LV_BIN/decoder" --model_file="$T/transformer.lvm" --decode_text=- --num_threads=1 \
  --model_params_override="task.decoder.target_seq_len: 40" <"$G/mt/text.in" >"$T/nt.out" 2>"$T/err"
check "--model_file with --num_threads and an override: the same lines" cmp -s "$T/nt.out" "$T/transformer.decoder"
expect_exit 2 "--model_file with an unknown params key" "$LV_BIN/decoder" --model_file="$T/transformer.lvm" \
  --decode_text=- --model_params_override="task.decoder.no_such_key: 1" </dev/null
err_has "no_such_key"
expect_exit 2 "--model_file with --logdir" "$LV_BIN/decoder" --model_file="$T/transformer.lvm" --logdir="$T/log" --decode_text=-
err_has "takes the place of --model, --logdir"
expect_exit 2 "--model_file with --dataset" "$LV_BIN/decoder" --model_file="$T/transformer.lvm" --dataset=Dev --decode_text=-
err_has "--dataset and --job: give none of them"
expect_exit 2 "--model_file without a decode flag" "$LV_BIN/decoder" --model_file="$T/transformer.lvm"
err_has "--model_file decodes --decode_text"

# ---- broken files: each an error naming the file and what is wrong ----
F=$T/transformer.lvm
size=$(wc -c <"$F")
flip() { # flip SRC DST OFFSET: DST is SRC with the byte at OFFSET inverted
  cp "$1" "$2"
  printf "$(printf '\\%03o' $((255 - $(od -An -tu1 -j "$3" -N1 "$1"))))" | dd of="$2" bs=1 seek="$3" conv=notrunc status=none
}
flip "$F" "$T/p.lvm" 100
expect_exit 2 "a flipped byte in the params" "$LV_BIN/decoder" --model_file="$T/p.lvm" --decode_text=- </dev/null
err_has "model file $T/p.lvm: section 0 (params"
err_has "CRC32C mismatch"
flip "$F" "$T/t.lvm" $((size - 100))
expect_exit 2 "a flipped byte in a tensor" "$LV_BIN/decoder" --model_file="$T/t.lvm" --decode_text=- </dev/null
err_has "(tensor '"
err_has "CRC32C mismatch: the file is corrupt"
head -c $((size / 2)) "$F" >"$T/cut.lvm"
expect_exit 2 "a truncated file" "$LV_BIN/decoder" --model_file="$T/cut.lvm" --decode_text=- </dev/null
err_has "model file $T/cut.lvm is truncated"
expect_exit 2 "a checkpoint as a model file" "$LV_BIN/decoder" --model_file="$G/transformer/ckpt-00000020.index" --decode_text=- </dev/null
err_has "ckpt-00000020.index is not a lingvoc model file"
expect_exit 2 "an empty file" "$LV_BIN/decoder" --model_file="$T/empty/none" --decode_text=- </dev/null
err_has "$T/empty/none"
# Format version 3 with a valid header CRC: what a newer lingvoc would write.
PYTHONPATH="$LV_ROOT/tests" python3 - "$F" "$T/v3.lvm" <<'PY'
import struct, sys
from crc32c import masked_crc32c
d = bytearray(open(sys.argv[1], "rb").read())
d[8:12] = struct.pack("<I", 3)
d[32:36] = struct.pack("<I", masked_crc32c(bytes(d[:32])))
open(sys.argv[2], "wb").write(d)
PY
expect_exit 2 "format version 3" "$LV_BIN/decoder" --model_file="$T/v3.lvm" --decode_text=- </dev/null
err_has "model file $T/v3.lvm has format version 3, newer than this lingvoc reads (up to 2)"
if [ -x "$EX/translate" ]; then
  expect_exit 1 "lv_model_load_file: a flipped byte" sh -c '"$0" -f "$1" </dev/null' "$EX/translate" "$T/t.lvm"
  err_has "CRC32C mismatch"
  expect_exit 1 "lv_model_load_file with a logdir" "$EX/translate" -f "$F" x </dev/null
fi

# ---- a tiny LM: --score_text and --sample; the trainer's write_inference_graph ----
gen_lm_text "$T"
LM=lm.bible.RnnLmTinyTest
# With moving averages: the model file must hold them.
LMOV="input.file_pattern: \"text:$T/train.txt\"; train.max_steps: 30; task.train.ema_decay: 0.9"
expect_exit 0 "trainer: 30 steps of $LM with ema_decay 0.9" "$LV_BIN/trainer" --model=$LM --logdir="$T/lm" \
  --model_params_override="$LMOV"
DEC=("$LV_BIN/decoder" --model=$LM --logdir="$T/lm")
"${DEC[@]}" --score_text="$T/dev.txt" --model_params_override="$LMOV" >"$T/score.decoder" 2>"$T/err" ||
  fail "bin/decoder --score_text: $(tail -2 "$T/err")"
"${DEC[@]}" --score_text="$T/dev.txt" --model_params_override="$LMOV; task.train.ema_decay: 0" >"$T/score.raw" 2>"$T/err"
"${DEC[@]}" --sample=4 --seed=3 --prefix="the lord" --model_params_override="$LMOV" >"$T/sample.decoder" 2>"$T/err" ||
  fail "bin/decoder --sample: $(tail -2 "$T/err")"
expect_exit 0 "bin/export of the LM" "$LV_BIN/export" --model=$LM --logdir="$T/lm" --model_params_override="$LMOV" \
  --out="$T/lm.lvm"
check "export takes the moving averages" grep -qE 'variables \([1-9][0-9]* from moving averages, 0 quantized\)' "$T/out"
expect_exit 0 "trainer --mode=write_inference_graph" "$LV_BIN/trainer" --model=$LM --logdir="$T/lm" \
  --mode=write_inference_graph --model_params_override="$LMOV"
check "it writes <logdir>/inference_graphs/model.lvm, the same bytes as bin/export" \
  cmp -s "$T/lm/inference_graphs/model.lvm" "$T/lm.lvm"
lmck=$(cat "$T/lm/train/$(sed -n 's/^model_checkpoint_path: "\(.*\)"/\1/p' "$T/lm/train/checkpoint")".* | wc -c)
echo "LM: model file $(wc -c <"$T/lm.lvm") bytes, checkpoint $lmck bytes (weights, averages, Adam slots)"
rm -rf "$T/lm" "$T/train.txt"
away "$LV_BIN/decoder" --model_file="$T/lm.lvm" --score_text="$T/dev.txt" >"$T/score.file" 2>"$T/err"
check "--score_text from the model file: the decoder's (on the averages), byte for byte" cmp -s "$T/score.file" "$T/score.decoder"
check "... and not the raw weights' scores" sh -c '! cmp -s "$0" "$1"' "$T/score.file" "$T/score.raw"
away "$LV_BIN/decoder" --model_file="$T/lm.lvm" --sample=4 --seed=3 --prefix="the lord" >"$T/sample.file" 2>"$T/err"
check "--sample from the model file: the same samples" cmp -s "$T/sample.file" "$T/sample.decoder"
if [ -x "$EX/score" ]; then
  away "$EX/score" -f "$T/lm.lvm" "$T/dev.txt" >"$T/score.api" 2>"$T/err"
  check "lv_score_text from the model file: --score_text's log-probability and tokens" \
    cmp -s <(grep -v '^corpus:' "$T/score.decoder" | cut -f1,2) "$T/score.api"
fi

# ---- LeNet5: lv_classify from the model file ----
if [ -x "$EX/classify" ] && ensure_fashion_mnist && fm_valid "$FM"; then
  CL=image.mnist.LeNet5
  CLOV="input.ckpt: \"$FM\"; input.num_samples: 1000; train.max_steps: 3"
  expect_exit 0 "trainer: 3 steps of LeNet5" "$LV_BIN/trainer" --model=$CL --logdir="$T/cl" --model_params_override="$CLOV"
  head -c $((28 * 28 * 5)) /dev/urandom >"$T/img5"
  expect_exit 0 "examples/classify from the log directory" "$EX/classify" $CL "$T/cl" 28 28 1 "$T/img5" "" "$CLOV"
  mv "$T/out" "$T/classify.logdir"
  # The same images as PNGs (gray, 28x28), and one 27 pixels wide, for --decode_images.
  python3 - "$T/img5" "$T" <<'PY'
import struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
def png(path, px, w, h):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    rows = b"".join(b"\0" + px[r * w:(r + 1) * w] for r in range(h))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
for i in range(5):
    png("%s/img%d.png" % (sys.argv[2], i), raw[i * 784:(i + 1) * 784], 28, 28)
png(sys.argv[2] + "/narrow.png", raw[:27 * 28], 27, 28)
PY
  for i in 0 1 2 3 4; do echo "$T/img$i.png"; done >"$T/png.list"
  expect_exit 0 "bin/decoder --decode_images (--model/--logdir)" "$LV_BIN/decoder" --model=$CL --logdir="$T/cl" \
    --decode_images="$T/png.list" --decode_batch_size=2 --model_params_override="$CLOV"
  mv "$T/out" "$T/images.logdir"
  check "--decode_images: path, then examples/classify's class and probability" \
    cmp -s <(cut -f2,3 "$T/images.logdir") <(cut -f2,3 "$T/classify.logdir")
  check "--decode_images: the paths in order" cmp -s <(cut -f1 "$T/images.logdir") "$T/png.list"
  echo "$T/narrow.png" >"$T/narrow.list"
  expect_exit 2 "--decode_images: an image of another size" "$LV_BIN/decoder" --model=$CL --logdir="$T/cl" \
    --decode_images="$T/narrow.list" --model_params_override="$CLOV"
  err_has "image $T/narrow.png is 27x28; the model takes 28x28 (input.data_shape)"
  echo "$T/img5" >"$T/raw.list"
  expect_exit 2 "--decode_images: not a PNG" "$LV_BIN/decoder" --model=$CL --logdir="$T/cl" \
    --decode_images="$T/raw.list" --model_params_override="$CLOV"
  err_has "image $T/img5: not a PNG"
  expect_exit 0 "bin/export of LeNet5" "$LV_BIN/export" --model=$CL --logdir="$T/cl" --model_params_override="$CLOV" \
    --out="$T/cl.lvm"
  rm -rf "$T/cl"
  away "$EX/classify" -f "$T/cl.lvm" 28 28 1 "$T/img5" >"$T/classify.file" 2>"$T/err"
  check "lv_classify from the model file: the same probabilities" cmp -s "$T/classify.file" "$T/classify.logdir"
  away "$LV_BIN/decoder" --model_file="$T/cl.lvm" --decode_images=- <"$T/png.list" >"$T/images.file" 2>"$T/err"
  check "--decode_images from the model file: the same lines" cmp -s "$T/images.file" "$T/images.logdir"
else
  skip_part "examples/classify or Fashion-MNIST missing: LeNet5 from a model file not checked"
fi

# ---- a tiny LAS: --decode_audio ----
ASRM=asr.bible_tts.TinyTest
if tiny_las "$T"; then
  "$LV_BIN/decoder" --model=$ASRM --logdir="$T/asr" --decode_audio=@"$T/asr.list" --model_params_override="$ASROV" \
    >"$T/asr.decoder" 2>"$T/err" || fail "bin/decoder --decode_audio: $(tail -2 "$T/err")"
  expect_exit 0 "bin/export of the LAS" "$LV_BIN/export" --model=$ASRM --logdir="$T/asr" --model_params_override="$ASROV" \
    --out="$T/asr.lvm"
  rm -rf "$T/asr" "$T/rec"
  away "$LV_BIN/decoder" --model_file="$T/asr.lvm" --decode_audio=@"$T/asr.list" >"$T/asr.file" 2>"$T/err"
  check "--decode_audio from the model file: the same transcripts" cmp -s "$T/asr.file" "$T/asr.decoder"
  if [ -x "$EX/transcribe" ]; then
    away "$EX/transcribe" -f "$T/asr.lvm" $(cat "$T/asr.list") >"$T/asr.api" 2>"$T/err"
    check "examples/transcribe -f (lv_transcribe_files): the same transcripts" cmp -s "$T/asr.api" "$T/asr.decoder"
    check "examples/transcribe.c has at most 40 lines" test "$(wc -l <"$LV_ROOT/examples/transcribe.c")" -le 40
  fi
else
  skip_part "espeak-ng or sox missing: --decode_audio from a model file not checked"
fi

# ---- Python: lingvoc.Model(path) ----
if [ -e "$LV_BUILD/liblingvoc.so.0" ] && ! ldd "$LV_BUILD/liblingvoc.so" | grep -q libasan; then
  away env PYTHONPATH="$LV_ROOT/python" LINGVOC_LIBRARY="$LV_BUILD/liblingvoc.so.0" /usr/bin/python3 - "$T" "$G" <<'PY' >"$T/py.out" 2>"$T/err"
import sys, lingvoc
T, G = sys.argv[1], sys.argv[2]
m = lingvoc.Model(T + "/transformer.lvm")
lines = open(G + "/mt/text.in", "rb").read().split(b"\n")[:-1]
want = open(T + "/transformer.decoder", "rb").read().decode("utf-8", "replace").split("\n")[:-1]
assert m.translate(lines) == want, (m.translate(lines), want)
import os
if os.path.exists(T + "/asr.lvm"):
    asr = lingvoc.Model(T + "/asr.lvm")
    want = [l.split("\t", 1)[1] for l in open(T + "/asr.decoder").read().split("\n")[:-1]]
    assert asr.transcribe(open(T + "/asr.list").read().split()) == want, "transcribe"
lm = lingvoc.Model(T + "/lm.lvm")
assert lm.sample(4, prefix="the lord", seed=3) == open(T + "/sample.file").read().split("\n")[:-1], "sample"
try:
    lingvoc.Model(T + "/t.lvm")
    raise SystemExit("a corrupt file loaded")
except lingvoc.Error as e:
    assert e.code == lingvoc.CORRUPT and "CRC32C" in str(e), e
print("python ok")
PY
  check "lingvoc.Model(path): translate, transcribe, sample, a corrupt file's error" grep -q "python ok" "$T/py.out"
  [ -s "$T/err" ] && cat "$T/err"
else
  skip_part "no shared library (or an ASan one): lingvoc.Model(path) not checked"
fi
finish
