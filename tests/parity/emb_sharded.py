"""EmbeddingLayer (tests/check_parity_embedding.c): tf.nn.embedding_lookup's "mod"
partitioning over var_0..var_{n-1} (id -> shard id % n, row id // n), times sqrt(dim)."""
import math
import sys

import torch

import lvdump

d = lvdump.load(sys.argv[1])
ids = d.t("in:ids")
shards = []
while d.has("emb/var_%d/var" % len(shards)):
    shards.append(d.t("emb/var_%d/var" % len(shards)))
n = len(shards)
dim = shards[0].shape[1]
flat = ids.reshape(-1)
rows = [shards[int(i) % n][int(i) // n] for i in flat]
act = torch.stack(rows).reshape(tuple(ids.shape) + (dim,)) * math.sqrt(dim)
d.check("out:act", act)
d.backward({"act": act})
for k in range(n):
    d.check("grad:emb/var_%d/var" % k, shards[k].grad)
d.finish()
