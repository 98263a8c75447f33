"""Python bindings for liblingvoc (include/lingvoc.h) over ctypes.

    m = lingvoc.Model("model.lvm")         # a model file (bin/export), or:
    m = lingvoc.Model(model="mt.bible_en_es.TransformerSmall", logdir="/tmp/mt/log")
    m.translate(["in the beginning"])      # -> list[str], the best hypothesis each
    m.translate_nbest(lines, k=4)          # -> list[list[(str, float)]]
    m.score(lines)                         # -> list[float], total log-probability (LMs)
    m.score_tokens(lines)                  # -> list[list[float]], per token (with </s>)
    m.sample(n, prefix="", seed=0)         # -> list[str] (LMs)
    m.classify(images)                     # -> numpy [N, classes] (uint8 [N,H,W] or [N,H,W,C])
    m.transcribe(items)                    # -> list[str]: paths, or 16 kHz float arrays

Errors raise lingvoc.Error (its .code is one of the LV_STATUS_* values). A Model may be
used from several threads: each call takes the model's lock (the library's NULL
session); for parallel decoding make one Model per thread.
"""
import ctypes
import ctypes.util
import os
import threading

__all__ = ["Model", "Error", "version", "library_path"]

OK, INVALID, NOT_FOUND, CORRUPT, IO, RESOURCE, INTERNAL, CANCELLED = range(8)


class Error(Exception):
    """An error from liblingvoc; str() is its message, .code its kind."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def _find_library():
    env = os.environ.get("LINGVOC_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("liblingvoc.so.0", "liblingvoc.so"):
        cand = os.path.join(here, name)
        if os.path.exists(cand):
            return cand
    return ctypes.util.find_library("lingvoc") or "liblingvoc.so.0"


class _DecodeOptions(ctypes.Structure):
    _fields_ = [("num_hyps", ctypes.c_int), ("beam_size", ctypes.c_double),
                ("length_normalization", ctypes.c_double), ("coverage_penalty", ctypes.c_double),
                ("target_seq_len", ctypes.c_int), ("fusion_lm_weight", ctypes.c_double),
                ("temperature", ctypes.c_double), ("top_k", ctypes.c_int), ("seed", ctypes.c_int64),
                ("batch_size", ctypes.c_int), ("keep_going", ctypes.c_int),
                ("scorers", ctypes.c_void_p), ("n_scorers", ctypes.c_int)]


class _ScorerSpec(ctypes.Structure):
    _fields_ = [("model", ctypes.c_void_p), ("weight", ctypes.c_double)]


# Decode options set otherwise than by a keyword of their own name.
_NOT_KEYWORDS = ("keep_going", "scorers", "n_scorers")


_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class _LoadOptions(ctypes.Structure):
    _fields_ = [("model", ctypes.c_char_p), ("logdir", ctypes.c_char_p), ("checkpoint", ctypes.c_char_p),
                ("experiments_dir", ctypes.c_char_p), ("dataset", ctypes.c_char_p),
                ("params_override", ctypes.c_char_p), ("params_file_override", ctypes.c_char_p),
                ("num_threads", ctypes.c_int), ("decode", _DecodeOptions), ("log", _LOG_FN),
                ("log_user", ctypes.c_void_p), ("log_level", ctypes.c_int), ("gpu", ctypes.c_int)]


class _NBest(ctypes.Structure):
    _fields_ = [("n_items", ctypes.c_int), ("n", ctypes.POINTER(ctypes.c_int)),
                ("text", ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p))),
                ("score", ctypes.POINTER(ctypes.POINTER(ctypes.c_float))),
                ("error", ctypes.POINTER(ctypes.c_char_p)), ("seconds", ctypes.POINTER(ctypes.c_double))]


class _Scores(ctypes.Structure):
    _fields_ = [("n_items", ctypes.c_int), ("logprob", ctypes.POINTER(ctypes.c_double)),
                ("n_tokens", ctypes.POINTER(ctypes.c_int)),
                ("token_logprob", ctypes.POINTER(ctypes.POINTER(ctypes.c_float)))]


class _Texts(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("text", ctypes.POINTER(ctypes.c_char_p))]


class _ClassProbs(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("num_classes", ctypes.c_int), ("probs", ctypes.POINTER(ctypes.c_float))]


_lib = None
library_path = None


def _load():
    global _lib, library_path
    if _lib is not None:
        return _lib
    library_path = _find_library()
    lib = ctypes.CDLL(library_path)
    P = ctypes.c_void_p
    sig = {
        "lv_version": (ctypes.c_char_p, []),
        "lv_status_msg": (ctypes.c_char_p, [P]),
        "lv_status_error": (ctypes.c_int, [P]),
        "lv_status_free": (None, [P]),
        "lv_decode_options_init": (None, [ctypes.POINTER(_DecodeOptions)]),
        "lv_load_options_init": (None, [ctypes.POINTER(_LoadOptions)]),
        "lv_model_load": (P, [ctypes.POINTER(_LoadOptions), ctypes.POINTER(P)]),
        "lv_model_load_file": (P, [ctypes.c_char_p, ctypes.POINTER(_LoadOptions), ctypes.POINTER(P)]),
        "lv_model_free": (None, [P]),
        "lv_model_task": (ctypes.c_char_p, [P]),
        "lv_session_new": (P, [P, ctypes.POINTER(_DecodeOptions), ctypes.POINTER(P)]),
        "lv_session_free": (None, [P]),
        "lv_translate": (P, [P, P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
                             ctypes.POINTER(ctypes.POINTER(_NBest))]),
        "lv_transcribe_files": (P, [P, P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(ctypes.POINTER(_NBest))]),
        "lv_transcribe": (P, [P, P, ctypes.POINTER(ctypes.c_float), ctypes.c_int64, ctypes.c_int,
                              ctypes.POINTER(ctypes.POINTER(_NBest))]),
        "lv_nbest_free": (None, [ctypes.POINTER(_NBest)]),
        "lv_score_text": (P, [P, P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                              ctypes.POINTER(ctypes.POINTER(_Scores))]),
        "lv_scores_free": (None, [ctypes.POINTER(_Scores)]),
        "lv_sample_text": (P, [P, P, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(_Texts))]),
        "lv_texts_free": (None, [ctypes.POINTER(_Texts)]),
        "lv_classify": (P, [P, P, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                            ctypes.POINTER(ctypes.POINTER(_ClassProbs))]),
        "lv_classify_files": (P, [P, P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                                  ctypes.POINTER(ctypes.POINTER(_ClassProbs))]),
        "lv_class_probs_free": (None, [ctypes.POINTER(_ClassProbs)]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib = lib
    return lib


def version():
    """The shared library's version string."""
    return _load().lv_version().decode()


def _check(status):
    if status:
        lib = _load()
        msg = lib.lv_status_msg(status).decode("utf-8", "replace")
        code = lib.lv_status_error(status)
        lib.lv_status_free(status)
        raise Error(msg, code)


def _enc(s):
    return s.encode("utf-8") if isinstance(s, str) else s


def _strings(items):
    items = [_enc(x) for x in items]
    return (ctypes.c_char_p * max(len(items), 1))(*items), len(items)


class Model:
    """A trained model: Model(path) for a model file (bin/export; with the options below
    but model, logdir, checkpoint, experiments_dir and dataset), or
    Model(model="mt.bible_en_es.TransformerSmall", logdir=DIR,
    checkpoint=None, params_override=None, experiments_dir=None, dataset=None,
    num_threads=0, num_hyps=0, length_normalization=-1, beam_size=-1,
    target_seq_len=0, fusion_lm_weight=-1, temperature=0, top_k=-1, seed=-1,
    batch_size=0, scorers=(), log=None, gpu=False). Options left at their defaults keep the
    experiment's values. scorers: (language Model, weight) pairs added to beam search
    (shallow fusion), kept open while this model is. log: a callable(level, message) for
    the library's log lines (none by default). gpu: the model on the first GPU (a CUDA
    build of the library)."""

    def __init__(self, path=None, *, model=None, logdir=None, checkpoint=None, params_override=None,
                 params_file_override=None, experiments_dir=None, dataset=None, num_threads=0, log=None,
                 log_level=2, scorers=(), gpu=False, **decode):
        lib = _load()
        self._m = None
        self._sessions = {}
        self._lock = threading.Lock()
        o = _LoadOptions()
        lib.lv_load_options_init(ctypes.byref(o))
        self._keep = [_enc(x) for x in (model, logdir, checkpoint, experiments_dir, dataset, params_override,
                                         params_file_override)]
        (o.model, o.logdir, o.checkpoint, o.experiments_dir, o.dataset, o.params_override,
         o.params_file_override) = self._keep
        o.num_threads = num_threads
        o.gpu = 1 if gpu else 0
        for k, v in decode.items():
            if k not in dict(_DecodeOptions._fields_) or k in _NOT_KEYWORDS:
                raise TypeError("Model(): unknown option %r (decode options: %s)"
                                % (k, ", ".join(n for n, _ in _DecodeOptions._fields_ if n not in _NOT_KEYWORDS)))
            setattr(o.decode, k, v)
        self._scorer_models = [lm for lm, _ in scorers]  # the LMs outlive this model's sessions
        if scorers:
            for lm, w in scorers:
                if not isinstance(lm, Model) or not lm._m:
                    raise TypeError("Model(): scorers: expected (Model, weight) pairs of open models")
            self._scorers = (_ScorerSpec * len(scorers))(*[_ScorerSpec(lm._m.value, float(w)) for lm, w in scorers])
            o.decode.scorers = ctypes.cast(self._scorers, ctypes.c_void_p)
            o.decode.n_scorers = len(scorers)
        if log is not None:
            self._log = _LOG_FN(lambda user, level, msg: log(level, msg.decode("utf-8", "replace")))
            o.log = self._log
            o.log_level = log_level
        m = ctypes.c_void_p()
        if path is not None:
            self._keep.append(_enc(os.fspath(path)))
            _check(lib.lv_model_load_file(self._keep[-1], ctypes.byref(o), ctypes.byref(m)))
        else:
            _check(lib.lv_model_load(ctypes.byref(o), ctypes.byref(m)))
        self._m = m

    def close(self):
        for sess in getattr(self, "_sessions", {}).values():
            _load().lv_session_free(sess)
        self._sessions = {}
        if getattr(self, "_m", None):  # None too when __init__ raised before loading
            _load().lv_model_free(self._m)
            self._m = None

    def _session(self, **opts):
        """A session with these decode options (made once, kept until close), used under
        the model's Python lock."""
        key = tuple(sorted(opts.items()))
        if key not in self._sessions:
            lib = _load()
            o = _DecodeOptions()
            lib.lv_decode_options_init(ctypes.byref(o))
            for k, v in opts.items():
                setattr(o, k, v)
            sess = ctypes.c_void_p()
            _check(lib.lv_session_new(self._m, ctypes.byref(o), ctypes.byref(sess)))
            self._sessions[key] = sess
        return self._sessions[key]

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def task(self):
        """The model's task class, e.g. 'mt.model.TransformerModel'."""
        return _load().lv_model_task(self._m).decode()

    def _nbest(self, r, k):
        out = []
        for i in range(r.contents.n_items):
            n = min(r.contents.n[i], k)
            out.append([(r.contents.text[i][h].decode("utf-8", "replace"), r.contents.score[i][h])
                        for h in range(n)])
        _load().lv_nbest_free(r)
        return out

    def translate_nbest(self, lines, k=1):
        """Up to k (text, score) pairs per source line, best first."""
        arr, n = _strings(lines)
        r = ctypes.POINTER(_NBest)()
        _check(_load().lv_translate(self._m, None, arr, n, k, ctypes.byref(r)))
        return self._nbest(r, k)

    def translate(self, lines):
        """The best translation (or punctuation) of each line ('' for nothing decoded)."""
        return [h[0][0] if h else "" for h in self.translate_nbest(lines, 1)]

    def transcribe_nbest(self, items, k=1):
        """Up to k (text, score) pairs per item: a path, or 16 kHz mono float samples in [-1, 1]."""
        lib, out = _load(), []
        paths = [x for x in items if isinstance(x, (str, bytes, os.PathLike))]
        by_path = {}
        if paths:
            arr, n = _strings([os.fspath(p) for p in paths])
            r = ctypes.POINTER(_NBest)()
            _check(lib.lv_transcribe_files(self._m, None, arr, n, k, ctypes.byref(r)))
            by_path = dict(zip(range(len(paths)), self._nbest(r, k)))
        pi = 0
        for x in items:
            if isinstance(x, (str, bytes, os.PathLike)):
                out.append(by_path[pi])
                pi += 1
                continue
            import numpy as np
            a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
            r = ctypes.POINTER(_NBest)()
            _check(lib.lv_transcribe(self._m, None, a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size, k,
                                     ctypes.byref(r)))
            out.extend(self._nbest(r, k))
        return out

    def transcribe(self, items):
        """The best transcript of each item (paths or 16 kHz float arrays)."""
        return [h[0][0] if h else "" for h in self.transcribe_nbest(items, 1)]

    def _scores(self, lines):
        arr, n = _strings(lines)
        r = ctypes.POINTER(_Scores)()
        _check(_load().lv_score_text(self._m, None, arr, n, ctypes.byref(r)))
        c = r.contents
        res = [(c.logprob[i], [c.token_logprob[i][t] for t in range(c.n_tokens[i])]) for i in range(c.n_items)]
        _load().lv_scores_free(r)
        return res

    def score(self, lines):
        """The total log-probability of each line (natural log, </s> included)."""
        return [lp for lp, _ in self._scores(lines)]

    def score_tokens(self, lines):
        """Each line's per-token log-probabilities (</s> included)."""
        return [t for _, t in self._scores(lines)]

    def sample(self, n, prefix="", seed=None, temperature=None, top_k=None):
        """n continuations of prefix. seed, temperature, top_k: None keeps the model's
        (the experiment's task.decoder.sample_*); sample i of a seed is always the same."""
        opts = {k: v for k, v in (("seed", seed), ("temperature", temperature), ("top_k", top_k)) if v is not None}
        r = ctypes.POINTER(_Texts)()
        with self._lock:
            sess = self._session(**opts) if opts else None
            _check(_load().lv_sample_text(self._m, sess, _enc(prefix or ""), n, ctypes.byref(r)))
        out = [r.contents.text[i].decode("utf-8", "replace") for i in range(r.contents.n)]
        _load().lv_texts_free(r)
        return out

    def classify(self, images):
        """Class probabilities [N, classes] of uint8 images [N, H, W] or [N, H, W, C], or of
        a list of PNG paths (each of the experiment's image size, as bin/decoder
        --decode_images reads them)."""
        import numpy as np
        lib = _load()
        r = ctypes.POINTER(_ClassProbs)()
        if isinstance(images, (list, tuple)) and all(isinstance(x, (str, bytes, os.PathLike)) for x in images):
            arr, n = _strings([os.fspath(p) for p in images])
            _check(lib.lv_classify_files(self._m, None, arr, n, ctypes.byref(r)))
        else:
            a = np.ascontiguousarray(images, dtype=np.uint8)
            if a.ndim == 3:
                a = a[..., None]
            if a.ndim != 4:
                raise Error("classify: expected uint8 images [N, H, W] or [N, H, W, C] or a list of PNG paths, "
                            "got shape %s" % (a.shape,), INVALID)
            _check(lib.lv_classify(self._m, None, a.ctypes.data, a.shape[0], a.shape[1], a.shape[2], a.shape[3],
                                   ctypes.byref(r)))
        c = r.contents
        out = np.ctypeslib.as_array(c.probs, shape=(c.n, c.num_classes)).copy() if c.n else \
            np.zeros((0, 0), np.float32)
        lib.lv_class_probs_free(r)
        return out
