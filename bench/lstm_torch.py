"""The benchmark's PyTorch side: Lingvo's LayerNormalizedLSTMCellSimple (per-gate layer
norm of [x, m].wm, times ln_scale, plus b; cell_value_cap 10; output tanh) written in
PyTorch 1.13 float32, unrolled over T steps with the input projection of all steps done
in one matmul (as lingvoc does), forward + backward of sum(outputs).
Prints "torch_lstm ms_per_iter <ms> forward <ms> backward <ms> gflops <GFLOP/s>".
Usage: lstm_torch.py [threads] [iters] [T] [B] [units]."""
import sys
import time

import torch


def main():
    a = [int(v) for v in sys.argv[1:]]
    threads, iters, T, B, H = (a + [2, 5, 50, 64, 512][len(a):])[:5]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    D = H
    wm = (torch.rand(D + H, 4 * H) * 0.08 - 0.04).requires_grad_()
    b = torch.zeros(4 * H, requires_grad=True)
    ln_scale = torch.ones(4 * H, requires_grad=True)
    x0 = torch.rand(T, B, D) * 2 - 1
    eps, cap = 1e-8, 10.0

    def run(x):
        xw = (x.reshape(T * B, D) @ wm[:D]).reshape(T, B, 4 * H)
        wmm = wm[D:]
        m = torch.zeros(B, H)
        c = torch.zeros(B, H)
        outs = []
        for t in range(T):
            g = (xw[t] + m @ wmm).reshape(B, 4, H)
            mean = g.mean(-1, keepdim=True)
            var = ((g - mean) ** 2).mean(-1, keepdim=True)
            g = ((g - mean) * torch.rsqrt(var + eps)).reshape(B, 4 * H) * ln_scale + b
            i_i, i_g, f_g, o_g = g.split(H, 1)
            c = torch.clamp(torch.sigmoid(f_g) * c + torch.sigmoid(i_g) * torch.tanh(i_i), -cap, cap)
            m = torch.sigmoid(o_g) * torch.tanh(c)
            outs.append(m)
        return torch.stack(outs)

    tf = tb = 0.0
    for it in range(-2, iters):
        t0 = time.perf_counter()
        for p in (wm, b, ln_scale):
            p.grad = None
        x = x0.clone().requires_grad_()
        loss = run(x).sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if it >= 0:
            tf += t1 - t0
            tb += t2 - t1
    flops = 3.0 * 2.0 * T * B * (D + H) * 4.0 * H
    ms = (tf + tb) / iters * 1e3
    print("torch_lstm ms_per_iter %.2f forward %.2f backward %.2f gflops %.1f loss %.4f"
          % (ms, tf / iters * 1e3, tb / iters * 1e3, flops / (ms * 1e-3) / 1e9, float(loss)))


if __name__ == "__main__":
    main()
