#!/usr/bin/env bash
# bin/create_asr_features end to end: utterances synthesized with espeak-ng through sox
# (../shared/data-tools/synth_speech.sh's pipeline), made into records from a list, a
# LibriSpeech-layout directory of FLAC and its .tar.gz; the records read back with
# bin/print_tf_records (uttid, lower-cased transcript, 80 x T frames, the same frames
# from WAV and FLAC); sharding; bad files (truncated WAV, empty file, text, missing
# transcript) fail naming the file and overwrite nothing, or are skipped and counted;
# 8 kHz and stereo audio are converted.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
B=$LV_BIN
for c in espeak-ng sox; do command -v $c >/dev/null || skip "$c not installed (scripts/install-deps.sh)"; done
cd "$T"
mkdir -p wavs LS/dev-clean/19/198
say() { # ID VOICE TEXT
  espeak-ng -v "$2" -s 160 --stdout "$3" | sox -q -t wav - -r 16000 -c 1 -b 16 "wavs/$1.wav" gain -2
}
say 19-198-0000 en-us "In the beginning God created the heavens and the earth."
say 19-198-0001 en-gb "The earth was formless and empty."
say 19-198-0002 en-us+f3 "God said, let there be light, and there was light."
: >LS/dev-clean/19/198/19-198.trans.txt
for i in 0000 0001 0002; do
  sox "wavs/19-198-$i.wav" "LS/dev-clean/19/198/19-198-$i.flac"
done
cat >LS/dev-clean/19/198/19-198.trans.txt <<'T'
19-198-0000 IN THE BEGINNING GOD CREATED THE HEAVENS AND THE EARTH
19-198-0001 THE EARTH WAS FORMLESS AND EMPTY
19-198-0002 GOD SAID LET THERE BE LIGHT AND THERE WAS LIGHT
T
tar czf ls.tar.gz LS
awk '{ id = $1; $1 = ""; sub(/^ /, ""); printf "wavs/%s.wav\t%s\n", id, $0 }' LS/dev-clean/19/198/19-198.trans.txt >list.tsv

expect_exit 0 "records from a list" "$B/create_asr_features" --input_list=list.tsv --generate_tfrecords \
  --output_template=rec/list.tfrecords-%5.5d-of-%5.5d
expect_exit 0 "records from a directory of FLAC" "$B/create_asr_features" --input_dir=LS --generate_tfrecords \
  --output_template=rec/dir.tfrecords-%5.5d-of-%5.5d
expect_exit 0 "records from the .tar.gz, 2 output shards" "$B/create_asr_features" --input_tarball=ls.tar.gz \
  --generate_tfrecords --output_template=rec/tar.tfrecords-%5.5d-of-%5.5d --num_output_shards=2
check "two tar shards" test -s rec/tar.tfrecords-00000-of-00002 -a -s rec/tar.tfrecords-00001-of-00002
pr() { "$B/print_tf_records" --input_filepattern="$1" --print_only_n=-1 2>&1; }
pr 'rec/list.tfrecords-*' >list.txt
check "three records" grep -q "== Total entries: 3" list.txt
check "uttid" grep -q "uttid: \['19-198-0001'\]" list.txt
check "lower-cased transcript" grep -q "transcript: \['the earth was formless and empty'\]" list.txt
# T frames of 80 floats: the count is a multiple of 80 and matches the audio's length.
n=$(sox --i -s wavs/19-198-0001.wav)
want=$(( (n - 401) / 160 + 1 ))
python3 - "$T/rec/list.tfrecords-00000-of-00001" "$want" <<'PY' >frames.txt 2>&1
import struct, sys
data = open(sys.argv[1], "rb").read()
# Walk TFRecord framing and pull each Example's 'frames' float count by hand.
pos, counts = 0, {}
def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i
def fields(b):
    i = 0
    while i < len(b):
        k, i = varint(b, i)
        if k & 7 == 2:
            n, i = varint(b, i); yield k >> 3, b[i:i + n]; i += n
        elif k & 7 == 0:
            _, i = varint(b, i)
        elif k & 7 == 5:
            i += 4
        else:
            i += 8
while pos < len(data):
    (n,) = struct.unpack("<Q", data[pos:pos + 8]); rec = data[pos + 12:pos + 12 + n]; pos += 16 + n
    for _, feats in fields(rec):
        uid, nfr = None, None
        for _, entry in fields(feats):
            kv = dict(fields(entry))
            key = kv[1].decode()
            feat = dict(fields(kv[2]))
            if key == "uttid": uid = dict(fields(feat[1]))[1].decode()
            if key == "frames": nfr = len(dict(fields(feat[2]))[1]) // 4
        counts[uid] = nfr
print(counts["19-198-0001"], int(sys.argv[2]) * 80)
PY
read -r got want80 <frames.txt
check "frames = T x 80 with T = 1 + (samples - 401) / 160 ($got vs $want80)" test "$got" = "$want80"
cmpf() { pr "$1" | grep -v uttid | sort; }
check "FLAC directory gives the WAV list's frames and transcripts" diff <(cmpf 'rec/list.tfrecords-*') <(cmpf 'rec/dir.tfrecords-*')
check "tar shards hold the directory's records" diff <(pr 'rec/dir.tfrecords-*' | grep -v '^==' | sort) \
  <(pr 'rec/tar.tfrecords-*' | grep -v '^==' | sort)

expect_exit 0 "--dump_transcripts" "$B/create_asr_features" --input_tarball=ls.tar.gz --dump_transcripts \
  --transcripts_filepath=trans.txt
check "dumped transcripts sorted" diff trans.txt LS/dev-clean/19/198/19-198.trans.txt
expect_exit 0 "processor shard 1 of 3 from the dumped transcripts" "$B/create_asr_features" --input_tarball=ls.tar.gz \
  --transcripts_filepath=trans.txt --generate_tfrecords --output_template=rec/sh.tfrecords-%5.5d-of-%5.5d \
  --shard_id=1 --num_shards=3 --num_output_shards=3
check "shard 1 of 3 wrote one record" grep -q "Total entries: 1" <(pr 'rec/sh.tfrecords-00001-of-00003')

# Converted, not refused: 8 kHz and stereo.
mkdir -p other && sox wavs/19-198-0000.wav -r 8000 other/8k.wav
sox wavs/19-198-0000.wav -c 2 other/stereo.wav
printf 'other/8k.wav\tslow rate\nother/stereo.wav\ttwo channels\n' >conv.tsv
expect_exit 0 "8 kHz and stereo" "$B/create_asr_features" --input_list=conv.tsv --generate_tfrecords \
  --output_template=rec/conv-%d-of-%d
check "two converted records" grep -q "Total entries: 2" <(pr 'rec/conv-*')

# Bad files: an error naming the file; nothing overwritten.
head -c 20000 wavs/19-198-0001.wav >other/truncated.wav
: >other/empty.wav
echo "not audio" >other/text.wav
cp rec/list.tfrecords-00000-of-00001 before
for f in truncated empty text; do
  printf 'wavs/19-198-0000.wav\tgood\nother/%s.wav\tbad\n' "$f" >bad.tsv
  expect_exit 2 "$f.wav is an error" "$B/create_asr_features" --input_list=bad.tsv --generate_tfrecords \
    --output_template=rec/list.tfrecords-%5.5d-of-%5.5d
  err_has "other/$f.wav"
done
check "failed runs overwrote nothing" cmp before rec/list.tfrecords-00000-of-00001
check "no temporary files left" test -z "$(ls rec | grep tmp)"
printf 'wavs/19-198-0000.wav\tgood\nother/truncated.wav\tbad\nother/empty.wav\tbad\nother/missing.wav\tbad\n' >bad.tsv
expect_exit 0 "--skip_bad_files" "$B/create_asr_features" --input_list=bad.tsv --generate_tfrecords \
  --output_template=rec/skip-%d-of-%d --skip_bad_files
err_has "3 skipped"
check "one good record" grep -q "Total entries: 1" <(pr 'rec/skip-*')
# A NUL byte in a list line or a transcript cut the path or text short: now an error.
printf 'wavs/19-198-0000.wav\tgood\nwavs/19-198-0001.wav\0junk\tbad\n' >nul.tsv
expect_exit 2 "a NUL byte in a list line" "$B/create_asr_features" --input_list=nul.tsv --generate_tfrecords \
  --output_template=rec/nul-%d-of-%d
err_has "nul.tsv:2: a NUL byte at column 21"
cp LS/dev-clean/19/198/19-198.trans.txt trans.keep
printf '19-198-0000 ONE\0TWO\n' >>LS/dev-clean/19/198/19-198.trans.txt
expect_exit 2 "a NUL byte in a transcript" "$B/create_asr_features" --input_dir=LS --generate_tfrecords \
  --output_template=rec/nul-%d-of-%d
err_has "a NUL byte at column 16"
check "no records from either" test -z "$(ls rec | grep nul)"
cp trans.keep LS/dev-clean/19/198/19-198.trans.txt
rm LS/dev-clean/19/198/19-198.trans.txt
echo "19-198-0000 ONLY ONE" >LS/dev-clean/19/198/19-198.trans.txt
expect_exit 2 "audio without a transcript" "$B/create_asr_features" --input_dir=LS --generate_tfrecords \
  --output_template=rec/nt-%d-of-%d
err_has "no transcript for utterance 19-198-0001"
expect_exit 2 "bad template" "$B/create_asr_features" --input_dir=LS --generate_tfrecords --output_template=rec/x-%s
err_has "two integer fields"
expect_exit 2 "no input" "$B/create_asr_features" --generate_tfrecords --output_template=o-%d-%d
expect_exit 2 "missing tarball" "$B/create_asr_features" --input_tarball=nope.tar.gz --generate_tfrecords \
  --output_template=o-%d-%d
err_has "nope.tar.gz"
# Outputs that are not plain new names (issue 44): a symlink is written through (the link
# kept), a pipe or device (/dev/stdout) written directly, a device as a shard refused.
printf 'wavs/19-198-0000.wav\tIN THE BEGINNING\n' >one.tsv
echo keep >real.txt && ln -s real.txt link.txt
expect_exit 0 "--transcripts_filepath=a symlink" "$B/create_asr_features" --input_list=one.tsv --dump_transcripts \
  --transcripts_filepath=link.txt
check "the link is kept" test -L link.txt
check "its target holds the transcripts" grep -qx "19-198-0000 IN THE BEGINNING" real.txt
ln -s /dev/stdout so
"$B/create_asr_features" --input_list=one.tsv --dump_transcripts --transcripts_filepath=so 2>"$T/err" | cat >piped.txt
check "--transcripts_filepath=/dev/stdout (through a link) into a pipe prints the transcripts" \
  grep -qx "19-198-0000 IN THE BEGINNING" piped.txt
check "the /dev/stdout link is kept" test -L so
mkfifo fifo.txt
timeout 20 cat fifo.txt >fifo.out &
expect_exit 0 "--transcripts_filepath=a FIFO" "$B/create_asr_features" --input_list=one.tsv --dump_transcripts \
  --transcripts_filepath=fifo.txt
wait
check "the FIFO's reader got the transcripts" grep -qx "19-198-0000 IN THE BEGINNING" fifo.out
check "the FIFO is kept" test -p fifo.txt
ln -s /dev/null rec/null-0-of-1
expect_exit 2 "a shard that is a link to /dev/null" "$B/create_asr_features" --input_list=one.tsv --generate_tfrecords \
  --output_template=rec/null-%d-of-%d
err_has "rec/null-0-of-1 is a FIFO, device or socket"
check "the device link is kept" test -L rec/null-0-of-1
ln -s ../rec/list.tfrecords-00000-of-00001 rec/viallink-0-of-1
expect_exit 0 "a shard that is a symlink to a regular file" "$B/create_asr_features" --input_list=one.tsv \
  --generate_tfrecords --output_template=rec/viallink-%d-of-%d
check "the shard link is kept, its target rewritten" \
  sh -c "test -L rec/viallink-0-of-1 && ! cmp -s before rec/list.tfrecords-00000-of-00001"
cp before rec/list.tfrecords-00000-of-00001
# Outputs over inputs: refused, by inode (a hard link) or by name, before anything is written.
cp one.tsv one.keep
expect_exit 2 "--transcripts_filepath is the input list" "$B/create_asr_features" --input_list=one.tsv \
  --dump_transcripts --transcripts_filepath=./one.tsv
err_has "is the --input_list file"
ln one.tsv one.hard
expect_exit 2 "--transcripts_filepath is a hard link to the input list" "$B/create_asr_features" --input_list=one.tsv \
  --dump_transcripts --transcripts_filepath=one.hard
check "the list is untouched" cmp one.tsv one.keep
cp wavs/19-198-0000.wav wavs/shard-0-of-1.wav && cp wavs/shard-0-of-1.wav shard.keep
printf 'wavs/shard-0-of-1.wav\tword\n' >shardname.tsv
expect_exit 2 "a shard named like a listed recording" "$B/create_asr_features" --input_list=shardname.tsv \
  --generate_tfrecords --output_template=wavs/shard-%d-of-%d.wav
err_has "is the input file wavs/shard-0-of-1.wav"
check "the recording is untouched" cmp wavs/shard-0-of-1.wav shard.keep
cp trans.txt trans1.txt
expect_exit 2 "a shard over the transcripts file it reads" "$B/create_asr_features" --input_tarball=ls.tar.gz \
  --transcripts_filepath=trans1.txt --generate_tfrecords --output_template='trans%.0d%d.txt'
err_has "trans1.txt is the --transcripts_filepath file"
check "the transcripts are untouched" cmp trans.txt trans1.txt
# Huge but finite float samples make +inf log-mels: the file is refused, named.
huge_float_wav other/huge.wav
printf 'wavs/19-198-0000.wav\tgood\nother/huge.wav\tloud\n' >huge.tsv
expect_exit 2 "a float WAV of 1e16 samples" "$B/create_asr_features" --input_list=huge.tsv --generate_tfrecords \
  --output_template=rec/huge-%d-of-%d
err_has "other/huge.wav: log-mel frame 0"
expect_exit 0 "... skipped with --skip_bad_files" "$B/create_asr_features" --input_list=huge.tsv --generate_tfrecords \
  --output_template=rec/huge-%d-of-%d --skip_bad_files
check "one record, finite" grep -q "Total entries: 1" <(pr 'rec/huge-*')
# Flags: a negative shard count, both passes at once.
expect_exit 2 "--num_output_shards=-5" "$B/create_asr_features" --input_list=one.tsv --generate_tfrecords \
  --output_template=rec/neg-%d-of-%d --num_output_shards=-5
err_has "expected 1..100000"
expect_exit 0 "--dump_transcripts with --generate_tfrecords runs both" "$B/create_asr_features" --input_tarball=ls.tar.gz \
  --dump_transcripts --transcripts_filepath=both.txt --generate_tfrecords --output_template=rec/both-%d-of-%d
check "both: the transcripts" grep -q "^19-198-0000 " both.txt
check "both: the records" test -s rec/both-0-of-1
# A file name with a tab or a newline would come back as another utterance id.
mkdir -p TAB/a && cp LS/dev-clean/19/198/19-198-0000.flac "TAB/a/x	y.flac" && echo "x	y TEXT" >TAB/a/a.trans.txt
expect_exit 2 "an audio file named with a tab" "$B/create_asr_features" --input_dir=TAB --generate_tfrecords \
  --output_template=rec/tab-%d-of-%d
err_has "holds a space, tab, newline or control byte"
# More shards than the open-file limit: an error before any work (the soft limit is raised
# to the hard one when that is enough).
expect_exit 2 "200 shards under a hard limit of 64 open files" bash -c "ulimit -n 64; exec '$B/create_asr_features' \
  --input_list=one.tsv --generate_tfrecords --output_template=rec/many-%d-of-%d --num_output_shards=200"
err_has "the open-file limit allows 64"
check "no shard written" test -z "$(ls rec | grep many)"
expect_exit 0 "200 shards under a soft limit of 64" bash -c "ulimit -S -n 64; exec '$B/create_asr_features' \
  --input_list=one.tsv --generate_tfrecords --output_template=rec/many-%d-of-%d --num_output_shards=200"
check "200 shards" test "$(ls rec | grep -c many)" -eq 200
# SIGTERM: the run's temporary files removed, a message, exit 143 (twice: none accumulate).
sox wavs/19-198-0000.wav long.wav repeat 9
for i in $(seq 300); do printf 'long.wav\tlong\n'; done >long.tsv
for k in 1 2; do
  "$B/create_asr_features" --input_list=long.tsv --generate_tfrecords --output_template=rec/term-%d-of-%d \
    2>term.err &
  pid=$!
  for _ in $(seq 500); do ls rec | grep -q 'term.*tmp' && break; sleep 0.02; done
  kill -TERM $pid
  wait $pid
  rc=$?
  check "SIGTERM $k: exit 143 (got $rc)" test $rc -eq 143
  check "SIGTERM $k: a message" grep -q "terminated (SIGTERM): its temporary files" term.err
  check "SIGTERM $k: no temporary file left" test -z "$(ls rec | grep term)"
done
finish
