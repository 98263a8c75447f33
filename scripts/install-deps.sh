#!/usr/bin/env bash
# Installs what lingvoc needs to build, test and benchmark on Debian 12. Idempotent:
# packages already present are not reinstalled, and apt-get runs only when one is missing.
# Prints a line per step (what is missing and what for, apt-get update, apt-get install);
# apt-get's own output goes to $LINGVOC_DEPS_LOG (default build/install-deps.log), whose
# last 30 lines and path are printed when apt-get fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lv_name=install-deps
. "$root/scripts/lib/progress.sh"
LOG=${LINGVOC_DEPS_LOG:-$root/build/install-deps.log}

# What each group is for (printed when one of its packages is missing) | its packages.
pkg_groups=(
  "compiler and make|build-essential pkg-config"
  "the core library (configs, BLAS, protobuf, Check tests, compression, PNG)|libconfig-dev libopenblas-dev protobuf-c-compiler libprotobuf-c-dev check libsnappy-dev zlib1g-dev libpng-dev"
  "replicas under mpirun|libopenmpi-dev openmpi-bin"
  "Python tools and the PyTorch peer of the parity tests|python3 python3-protobuf protobuf-compiler python3-numpy python3-torch"
  "data (Fashion-MNIST, SentencePiece, the Bible texts)|dataset-fashion-mnist sentencepiece libsword-utils sword-text-web sword-text-sparv"
  "test tools|perl strace"
  "speech (FFT, audio decoding, resampling, tarballs)|libfftw3-dev libsndfile1-dev libsoxr-dev libarchive-dev"
  "speech test data (synthesis, LibriVox recordings)|espeak-ng sox pocketsphinx-testdata"
)
# Speech (src/audio/, bin/create_asr_features): FFTW's float FFT for the log-mel frontend,
# libsndfile to decode WAV/FLAC/OGG, libsoxr to resample to 16 kHz, libarchive to read
# LibriSpeech's .tar.gz. espeak-ng and sox synthesize speech for tests/test_asr_features.sh
# and scripts/prepare_asr_bible.sh (../shared/data-tools/synth_speech.sh's scheme);
# pocketsphinx-testdata's LibriVox recordings are the real speech of
# scripts/prepare_asr_real.sh and tests/test_asr_real.sh.
# Every tool the tests call is here, so that on a machine with these packages only the
# tests that need a GPU skip (exit 77, counted by scripts/run-tests.sh): spm_* from
# sentencepiece, mod2imp and the WEB text from the sword packages (tests/test_spm_parity.sh,
# the punctuator and MT data scripts), perl (scripts/build_wpm_vocab.sh), strace (the
# kill-between-renames case of tests/test_ckpt_hardening.sh), protoc and python3-protobuf
# (tests/read_events.py), mpirun (tests/test_replicas.sh). The optional sacrebleu
# cross-check of tests/test_sacrebleu.sh needs a Python sacrebleu, which Debian 12 does
# not package.
# Open MPI: the trainer's sync replicas (mpirun -np N bin/trainer ...; linked by default,
# a trainer started without mpirun runs as one process).
# python3-torch is the peer of the layer parity tests (tests/parity/) and the benchmarks.
# Only for the benchmarks; install with LINGVOC_BENCH=1.
if [ "${LINGVOC_BENCH:-0}" = 1 ]; then pkg_groups+=("the benchmarks|bc"); fi
# Only for scripts/prepare_asr_synth.sh (experiments/asr/synth_en.cfg) and its suite test;
# install with LINGVOC_ASR_SYNTH=1. Every package is in Debian 12 main: flite (voices awb,
# kal16, rms, slt built in), festival with its main-section English voices (kal, kdl,
# slt-hts), and fortunes-min and fortunes for general English text.
if [ "${LINGVOC_ASR_SYNTH:-0}" = 1 ]; then
  pkg_groups+=("the synthetic English speech corpus|flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts fortunes-min fortunes")
fi
# Only for `make fuzz` (libFuzzer needs clang); install with LINGVOC_FUZZ=1.
if [ "${LINGVOC_FUZZ:-0}" = 1 ]; then pkg_groups+=("make fuzz|clang"); fi

missing=() npkgs=0 why=()
for g in "${pkg_groups[@]}"; do
  group_missing=()
  for p in ${g#*|}; do
    npkgs=$((npkgs + 1))
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || group_missing+=("$p")
  done
  if [ ${#group_missing[@]} -gt 0 ]; then
    missing+=("${group_missing[@]}")
    why+=("  for ${g%%|*}: ${group_missing[*]}")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all $npkgs packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
mkdir -p "$(dirname "$LOG")"
: >"$LOG"
echo "install-deps: installing ${#missing[@]} of $npkgs packages (apt-get's output: $LOG)"
printf '%s\n' "${why[@]}"
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s)
echo "install-deps: apt-get update"
lv_logged "$LOG" "apt-get update" $SUDO apt-get update
echo "install-deps: apt-get install (a few minutes on a fresh machine; tail -f $LOG to follow)"
lv_logged "$LOG" "apt-get install" $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: done in $(($(date +%s) - t0)) s"
