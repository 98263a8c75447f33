#!/usr/bin/env bash
# Makes (or reuses) the one virtual environment of lingvoc's peers: real Lingvo and
# TensorFlow, PyTorch 2.x, TensorBoard, sacrebleu, jiwer and CTranslate2, at pinned versions,
# from PyPI. Nothing in lingvoc depends on it: the cross-checks (scripts/lingvo_peer/),
# some benchmarks and the tests that compare against these tools use it, and skip (counted)
# when it is missing. Prints the venv's python on its last line.
#
#   scripts/peers.sh                 # ~/.cache/lingvoc/peers, or $PEERS_VENV
#   PEERS_VENV=/opt/peers scripts/peers.sh
#   PEERS_TORCH=0 scripts/peers.sh   # without PyTorch 2 (~2.5 GB of CUDA wheels): what CI installs
#
# Why these versions (Debian 12, glibc 2.36, Python 3.11):
# - lingvo 0.14.1 and 0.14.2 (the newest, for TensorFlow 2.21) ship custom ops
#   (lingvo/core/ops/x_ops.so) linked against GLIBC_2.38: on Debian 12 every Lingvo import
#   fails with "version `GLIBC_2.38' not found (required by .../x_ops.so)". lingvo 0.14.0's
#   ops need only GLIBC_2.14, but its Python imports tensorflow.python.training.tracking,
#   which TensorFlow 2.14 removed: its working partner is TensorFlow 2.13 (tensorflow-cpu
#   2.13.1, numpy <= 1.24.3), with tensorflow-text 2.13.0rc0 (the only 2.13 build for
#   Python 3.11 on PyPI).
# - lingvo's wheel declares `tensorflow` (the GPU-capable package, which would pull
#   TensorFlow 2.21 over 2.13) and jupyter, apache-beam and tensorflow-datasets, which its
#   trainer does not import: it is installed without its declared dependencies, and the
#   ones its imports need are listed here.
# - The wheel has no experiment files (lingvo/tasks/*/params/ is not packaged):
#   scripts/lingvo_peer/ registers the experiments the cross-checks run.
# - torch 2.0.1: TensorFlow 2.13 and tensorflow-probability 0.21 require
#   typing-extensions < 4.6, which every torch from 2.1 on refuses (>= 4.8).
set -euo pipefail
VENV=${PEERS_VENV:-$HOME/.cache/lingvoc/peers}
PY=${PEERS_PYTHON:-/usr/bin/python3}
LOG=${PEERS_LOG:-$VENV.log}

PINS=(
  tensorflow-cpu==2.13.1 numpy==1.24.3 tensorflow-probability==0.21.0 tensorflow-hub==0.14.0
  tensorboard==2.13.0 "protobuf<4.24"
  sympy attrs etils absl-py "matplotlib<3.9" "scipy<1.14" "scikit-learn<1.6" pillow sentencepiece
  sacrebleu==2.4.3 jiwer==3.0.5 ctranslate2==4.5.0
)
TORCH=${PEERS_TORCH:-1}
if [ "$TORCH" = 1 ]; then PINS+=(torch==2.0.1); fi
NODEPS=(lingvo==0.14.0 tensorflow-text==2.13.0rc0 model-pruning-google-research graph-compression-google-research)
STAMP="$VENV/.lingvoc-peers-$(printf '%s\n' "${PINS[@]}" "${NODEPS[@]}" | md5sum | cut -c1-12)"

if [ -e "$STAMP" ]; then
  echo "peers: $VENV is ready" >&2
  echo "$VENV/bin/python"
  exit 0
fi
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null && [ "$PY" = /usr/bin/python3 ] && [ "$(id -u)" = 0 ]; then
  echo "peers: installing Debian's python3-venv" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "peers: $PY cannot make a venv; install python3-venv (apt-get install python3-venv) or set PEERS_PYTHON" >&2
  exit 2
fi
mkdir -p "$(dirname "$VENV")"
echo "peers: installing TensorFlow 2.13, Lingvo 0.14.0, PyTorch 2.0, TensorBoard, sacrebleu, jiwer, CTranslate2 into $VENV (a few GB; log: $LOG)" >&2
{ { [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"; } &&
  "$VENV/bin/pip" install --disable-pip-version-check "${PINS[@]}" &&
  "$VENV/bin/pip" install --disable-pip-version-check --no-deps "${NODEPS[@]}"
} >"$LOG" 2>&1 || { tail -20 "$LOG" >&2; echo "peers: install failed (full log: $LOG)" >&2; exit 1; }
# The pairing is checked, not assumed: Lingvo's ops load and an experiment resolves.
if ! PEERS_TORCH=$TORCH "$VENV/bin/python" - >>"$LOG" 2>&1 <<'EOF'
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
if os.environ["PEERS_TORCH"] == "1":
  import torch  # before TensorFlow: the other order aborts ("random_device could not be read")
import tensorflow as tf, sacrebleu, jiwer, ctranslate2
from lingvo.core import ops
from lingvo.core import py_utils
from tensorboard.backend.event_processing import event_accumulator
print("tensorflow", tf.__version__, "torch", torch.__version__ if "torch" in dir() else "(not installed)",
      "ctranslate2", ctranslate2.__version__)
EOF
then
  tail -20 "$LOG" >&2; echo "peers: the installed peers do not import (full log: $LOG)" >&2; exit 1
fi
rm -f "$VENV"/.lingvoc-peers-*
touch "$STAMP"
echo "peers: ready: $(tail -1 "$LOG")" >&2
echo "$VENV/bin/python"
