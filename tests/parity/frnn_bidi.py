"""PyTorch reference for check_parity_rnn.c: Lingvo's BidirectionalFRNN (scope "bi",
FRNN children "fwd" and "bak" with cells "cell"): the forward FRNN and the reversed one
over the same padded batch, outputs concatenated on the last dim. The reversed FRNN
flips time; a sequence's padded tail comes first and keeps the zero state, so its pass
starts at the sequence's own last step (lstm_frnn.py has the cell)."""
import sys

import torch

import lvdump
from lstm_frnn import cell_params, check_grads, frnn


def main():
    d = lvdump.load(sys.argv[1])
    fwd = cell_params(d, "bi/fwd/cell")
    bak = cell_params(d, "bi/bak/cell")
    x = d.t("in:act")
    pad = d.t("in:paddings", grad=False)
    of, _, _ = frnn(fwd, x, pad, False)
    ob, _, _ = frnn(bak, x, pad, True)
    act = torch.cat([of, ob], -1)
    d.check("out:act", act)
    d.backward({"act": act})
    check_grads(d, [fwd, bak], x)
    d.finish()


if __name__ == "__main__":
    main()
