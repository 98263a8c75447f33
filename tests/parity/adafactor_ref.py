"""Reference values for check_optim's Adafactor test: a float32 numpy transcription of
Lingvo's XLAShardingAdafactorOptimizer._resource_apply_dense and its decay rates
(lingvo/core/optimizer.py: _AdafactorDecayRateAdam, _AdafactorDecayRatePow,
_factored_dims, _parameter_scale). Prints the C initializers check_optim.c embeds:
    /usr/bin/python3 tests/parity/adafactor_ref.py
Each case runs 3 steps (global steps 0, 1, 2) with g[i] = sin(0.7 * i + step + 1) and
w[i] = 0.1 * (i - n / 3) initially, lr 0.5."""
import numpy as np

f32 = np.float32


def decay_rate(step, beta2, pow_, offset):
    x = f32(step)
    if pow_:
        return f32(1.0) - np.power(x - f32(offset) + f32(1.0), f32(-pow_))
    t = x + f32(1.0)
    b2 = f32(beta2)
    return b2 * (f32(1.0) - np.power(b2, t - f32(1.0))) / (f32(1.0) - np.power(b2, t))


def factored_dims(shape, factored, min_dim):
    if not factored or len(shape) < 2:
        return None
    s = sorted([(d, i) for i, d in enumerate(shape)], key=lambda d: -d[0])
    if s[1][0] < min_dim:
        return None
    return s[0][1], s[1][1]


def rms(x):
    return np.sqrt(np.mean(np.square(x, dtype=np.float64))).astype(f32)


def run(shape, beta1=0.0, beta2=0.999, param_scale=True, clip=None, factored=True, pow_=None, offset=0,
        min_dim=1, lr=0.5, eps1=1e-30, eps2=1e-3, steps=3):
    n = int(np.prod(shape))
    w = (f32(0.1) * (np.arange(n, dtype=f32) - f32(n // 3))).reshape(shape)
    fd = factored_dims(list(shape), factored, min_dim)
    if fd:
        d0, d1 = fd
        vr = np.zeros(np.delete(shape, d0), f32)
        vc = np.zeros(np.delete(shape, d1), f32)
    else:
        v = np.zeros(shape, f32)
    m = np.zeros(shape, f32)
    for step in range(steps):
        g = np.sin(f32(0.7) * np.arange(n, dtype=f32) + f32(step + 1)).astype(f32).reshape(shape)
        gsq = np.square(g) + f32(eps1)
        d = decay_rate(step, beta2, pow_, offset)
        scale = (np.maximum(rms(w), f32(eps2)) * f32(lr)) if param_scale else f32(lr)
        mix = f32(1.0) - d
        if fd:
            vr = vr * d + np.mean(gsq, axis=d0, dtype=np.float64).astype(f32) * mix
            vc = vc * d + np.mean(gsq, axis=d1, dtype=np.float64).astype(f32) * mix
            ltm = np.mean(vr, axis=-1, keepdims=True, dtype=np.float64).astype(f32)
            rf = f32(1.0) / np.sqrt(vr / ltm)
            cf = f32(1.0) / np.sqrt(vc)
            x = g * np.expand_dims(rf, d0) * np.expand_dims(cf, d1)
        else:
            v = v * d + gsq * mix
            x = g * (f32(1.0) / np.sqrt(v))
        if clip is not None:
            x = x / np.maximum(f32(1.0), rms(x) / f32(clip))
        sub = x * scale
        if beta1:
            m = m * f32(beta1) + sub * f32(1.0 - beta1)
            sub = m
        w = w - sub
    slots = ([m] if beta1 else []) + ([vr, vc] if fd else [v])
    return w, slots


def c_floats(a):
    return "{" + ", ".join("%.9gf" % x for x in np.asarray(a, f32).ravel()) + "}"


CASES = [
    ("[4, 3] defaults", dict(shape=(4, 3))),
    ("[3, 5] beta1 0.9, clip 0.5, pow 0.8, offset -2", dict(shape=(3, 5), beta1=0.9, clip=0.5, pow_=0.8, offset=-2)),
    ("[5] no parameter scale", dict(shape=(5,), param_scale=False)),
    ("[4, 3] factored False, clip 0.5", dict(shape=(4, 3), factored=False, clip=0.5)),
    ("[4, 3] min_dim_size_to_factor 4", dict(shape=(4, 3), min_dim=4)),
]

if __name__ == "__main__":
    for name, kw in CASES:
        w, slots = run(**kw)
        print("/* %s */" % name)
        print("w: " + c_floats(w))
        for i, s in enumerate(slots):
            print("slot %d %s: %s" % (i, list(s.shape), c_floats(s)))
