"""Peer of bench/asr_frontend_bench.c: torchaudio.compliance.kaldi.fbank (80 mel bins,
25 ms / 10 ms, pre-emphasis 0.97, no dither: Kaldi's log-mel filterbank, the closest
standard peer of Lingvo's MelAsrFrontend) on the same files, read first (not timed), one
thread. Prints one line per run: seconds and the audio seconds they covered.

usage: python3 asr_frontend_torch.py RUNS REPS FILE...
"""
import sys
import time

import torch
import torchaudio

torch.set_num_threads(1)
runs, reps, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
waves = []
secs = 0.0
for f in files:
    w, sr = torchaudio.load(f)
    if sr != 16000:
        w = torchaudio.functional.resample(w, sr, 16000)
    w = w.mean(0, keepdim=True) * 32768.0
    waves.append(w)
    secs += w.shape[1] / 16000.0
check = 0.0
with torch.no_grad():
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            for w in waves:
                f = torchaudio.compliance.kaldi.fbank(w, num_mel_bins=80, sample_frequency=16000.0, dither=0.0,
                                                      energy_floor=0.0)
                check += float(f[0, 0])
        print("torchaudio %.6f %.3f" % (time.perf_counter() - t0, secs * reps), flush=True)
print("checksum %g" % check, file=sys.stderr)
