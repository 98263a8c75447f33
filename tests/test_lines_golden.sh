#!/usr/bin/env bash
# bin/decoder's --score_text, --sample and --decode_audio (clients of the library:
# lv_score_text, lv_sample_text_from, lv_transcribe_files) on the committed tiny LM and
# LAS of tests/data/lines_golden write the lines and exit status the decoder's own loop
# wrote before they moved onto the library (expected/, made by its make.sh; floats to 1e-5
# as tests/test_decode_golden.sh), the LM fused into the LAS at weight 4 and 0 included;
# and stderr still says what it said: the start-up line, each unreadable file with its
# list and line, the real-time factor, the failed count, score_text's skipped lines.
. "$(dirname "$0")/lib.sh"
G=$LV_ROOT/tests/data/lines_golden
bash "$G/decode.sh" "$LV_BIN" "$T/o" || fail "decode.sh failed"
for f in "$G"/expected/*.out; do
  n=$(basename "$f" .out)
  check "$n: the lines as before (floats to 1e-5)" awk -v TOL=1e-5 -f "$LV_ROOT/tests/golden_cmp.awk" "$f" "$T/o/$n.out"
  check "$n: exit status $(cat "$G/expected/$n.rc")" cmp -s "$G/expected/$n.rc" "$T/o/$n.rc"
done
has() { if grep -qF -- "$2" "$T/o/$1.err"; then ok "$1: stderr has '$2'"; else fail "$1: stderr lacks '$2': $(head -5 "$T/o/$1.err")"; fi; }
has score_text "score_text: scoring with G/lm/ckpt-00000020 (step 20)"
has score_text "score_text: line 5: invalid UTF-8 at byte 9: not scored (empty output line)"
has score_text "score_text: line 6: a NUL byte at byte 5: not scored (empty output line)"
has sample "sample: sampling with G/lm/ckpt-00000020 (step 20)"
has sample_long_prefix "--sample: sample 1"
has sample_long_prefix "more than input.target_max_length 4: shorten it"
has audio_file "decode_audio: transcribing with G/las/ckpt-00000020 (step 20)"
has audio_file "decode_audio: 1 files, 1.09 s of audio in"
has audio_list "--decode_audio=LOG/audio.list line 5: cannot open LOG/missing.wav: No such file or directory: not transcribed (empty output line)"
has audio_list "--decode_audio=LOG/audio.list line 7: a tab byte at column"   # the column: where the temporary folder's path ends
has audio_list "decode_audio: 7 files, 3.85 s of audio in"
has audio_list "--decode_audio: 2 of 7 files could not be read"
has audio_stdin "--decode_audio=- line 5: cannot open LOG/missing.wav"
has audio_fusion "shallow fusion: lm.bible.RnnLmTinyTest (G/lm/ckpt-00000020, step 20) with lm_weight 4"
has audio_missing_list "--decode_audio=LOG/nope.list: cannot open it"
has score_wrong_kind "--score_text"
has audio_wrong_kind "--decode_audio"
finish
