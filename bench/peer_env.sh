# Sourced by the bench scripts before they run a peer (PyTorch, or any program on Debian's
# OpenBLAS). Debian's OpenBLAS picks its kernels from the CPU's model name; on virtual CPUs
# it does not recognize ("Intel(R) Xeon(R) Processor") it falls back to its generic
# Prescott kernels, 4-5x slower than the AVX-512 or AVX2 ones the CPU has (measured on
# such a machine: the PyTorch LSTM twin of bench_lm.sh trained 547 tokens/s on Prescott).
# lingvoc re-selects them itself (src/kernels/cpu/cpu_gemm.c, fix_core); this gives the
# peer the same choice through OPENBLAS_CORETYPE, so a ratio compares the programs and not
# OpenBLAS's CPU detection. A user's own OPENBLAS_CORETYPE is left alone.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  _lv_core=$(/usr/bin/python3 -c 'import ctypes
l = ctypes.CDLL("libopenblas.so.0")
l.openblas_get_corename.restype = ctypes.c_char_p
print(l.openblas_get_corename().decode())' 2>/dev/null || true)
  case ${_lv_core,,} in
    prescott | core2 | nehalem | sandybridge)
      _lv_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
      _lv_has() { local f; for f in "$@"; do [[ $_lv_flags == *" $f "* ]] || return 1; done; }
      if _lv_has avx512f avx512bw avx512vl avx512dq; then export OPENBLAS_CORETYPE=SkylakeX
      elif _lv_has avx2 fma; then export OPENBLAS_CORETYPE=Haswell; fi
      unset -f _lv_has
      unset _lv_flags ;;
  esac
  [ -n "${OPENBLAS_CORETYPE:-}" ] && echo "peer_env.sh: OpenBLAS detected ${_lv_core}; peers run with OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, as lingvoc selects" >&2
  unset _lv_core
fi
