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
finish
