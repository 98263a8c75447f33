#!/usr/bin/env bash
# Installs what lingvoc needs to build, test and benchmark on Debian 12. Idempotent:
# packages already present are not reinstalled, and apt-get update runs only when needed.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  libconfig-dev libopenblas-dev protobuf-c-compiler libprotobuf-c-dev check
  libsnappy-dev zlib1g-dev libpng-dev
  libopenmpi-dev openmpi-bin
  python3 python3-protobuf protobuf-compiler python3-numpy
  python3-torch
  dataset-fashion-mnist
  sentencepiece libsword-utils sword-text-web sword-text-sparv
  perl strace
  libfftw3-dev libsndfile1-dev libsoxr-dev libarchive-dev
  espeak-ng sox pocketsphinx-testdata
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
if [ "${LINGVOC_BENCH:-0}" = 1 ]; then PKGS+=(bc); fi
# Only for `make fuzz` (libFuzzer needs clang); install with LINGVOC_FUZZ=1.
if [ "${LINGVOC_FUZZ:-0}" = 1 ]; then PKGS+=(clang); fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
