"""Real Lingvo's quantization-aware training on fixed weights and inputs, the reference of
tests/check_quant.c's *_lingvo cases, each with PassiveAsymQDomain: a ProjectionLayer
(3 -> 2, TANH; two training calls in one step) and its gradient (also under
SymmetricScheduledClipQDomain), a SimpleFullSoftmax's logits (2 shards), a ConvLayer with time paddings, an AdditiveAttention, a MultiHeadedAttention, an
LSTMCellSimple and a LayerNormalizedLSTMCellSimple (3 -> 4, forget_gate_bias 1,
cell_value_cap None, two steps, the second padded for row 1): the training outputs, then
PostTrainingStepUpdate's q/<act>_min|max variables, then the eval graph's outputs with
those ranges. Run with the Lingvo peer venv:
  ~/.cache/lingvoc/peers/bin/python scripts/lingvo_peer/qat_vectors.py
"""
import numpy as np
import lingvo.compat as tf
from lingvo.core import attention
from lingvo.core import cluster_factory
from lingvo.core import layers
from lingvo.core import py_utils
from lingvo.core import quant_utils
from lingvo.core import rnn_cell

tf.disable_eager_execution()
W = np.array([[0.4, -0.7], [0.25, 0.9], [-0.55, 0.3]], np.float32)
X1 = np.array([0.3, -0.2, 0.5, 0.1, 0.9, -0.4, -0.7, 0.2, 0.05, 0.6, 0.6, -0.1], np.float32).reshape(4, 3)
X2 = np.array([2.0, -1.5, 1.0, -2.0, 1.0, 0.5], np.float32).reshape(2, 3)
WM = (0.5 * np.sin(0.37 * np.arange(7 * 16))).astype(np.float32).reshape(7, 16)
B = (0.2 * np.cos(0.5 * np.arange(16))).astype(np.float32)
M0 = (0.3 * np.sin(1.3 * np.arange(8))).astype(np.float32).reshape(2, 4)
C0 = (0.7 * np.cos(0.9 * np.arange(8))).astype(np.float32).reshape(2, 4)
XS = np.array([0.5, -0.3, 0.8, -0.6, 0.2, 0.1], np.float32).reshape(2, 3)
PADS = [np.zeros([2, 1], np.float32), np.array([[0.0], [1.0]], np.float32)]


def qvars(s):
  return {v.name: float(s.run(v)) for v in tf.global_variables() if '/q/' in v.name}


def run(build, set_weights, do_eval, ranges=None):
  g = tf.Graph()
  with g.as_default(), cluster_factory.ForTestingWorker(mode='sync', job='trainer_client', do_eval=do_eval):
    py_utils.GetOrCreateGlobalStepVar()
    layer, outs = build()
    upd = tf.no_op() if do_eval else layer.PostTrainingStepUpdate()
    with tf.Session(graph=g) as s:
      s.run(tf.global_variables_initializer())
      set_weights(s, layer)
      for k, v in (ranges or {}).items():
        s.run(tf.assign([x for x in tf.global_variables() if x.name == k][0], v))
      vals = s.run(outs)
      s.run(upd)
      return vals, qvars(s)


def projection():
  with tf.variable_scope('task'):
    p = layers.ProjectionLayer.Params().Set(name='proj', input_dim=3, output_dim=2, activation='TANH',
                                            batch_norm=False)
    p.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
    l = p.Instantiate()
  return l, [l.FProp(l.theta, tf.constant(X1)), l.FProp(l.theta, tf.constant(X2))]


SRC = (0.8 * np.sin(0.7 * np.arange(3 * 2 * 4) + 0.3)).astype(np.float32).reshape(3, 2, 4)
SRC_PAD = np.array([[0, 0], [0, 0], [0, 1]], np.float32)
QUERY = (0.6 * np.cos(1.1 * np.arange(2 * 4))).astype(np.float32).reshape(2, 4)
PROJ = {n: (0.5 * np.sin(k + 0.9 * np.arange(16))).astype(np.float32).reshape(4, 4)
        for k, n in enumerate(['query_proj', 'source_proj'])}
PROJ_B = {n + '_b': (0.1 * np.cos(k + np.arange(4))).astype(np.float32) for k, n in enumerate(['query_proj', 'source_proj'])}
PER_DIM = np.array([0.1, -0.2], np.float32)


def mha(pads=SRC_PAD):
  """MultiHeadedAttention (4 -> 4, 2 heads, dot-product inner with per-dim scale) with
  PassiveAsymQDomain on it and on its inner attention (lingvoc's inner inherits it)."""
  p = attention.MultiHeadedAttention.Params().Set(name='mha', source_dim=4, query_dim=4, hidden_dim=4,
                                                  context_dim=4, num_attention_heads=2)
  p.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
  p.inner_atten_params.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
  l = p.Instantiate()
  src = tf.constant(SRC)
  packed = l.PackSource(l.theta, src, src, tf.constant(pads))
  ctx, probs, _ = l.ComputeContextVectorWithSource(l.theta, packed, tf.constant(QUERY))
  return l, [ctx, probs]


CONV_X = (0.9 * np.sin(0.45 * np.arange(2 * 4 * 3 * 2) + 0.2)).astype(np.float32).reshape(2, 4, 3, 2)
CONV_PAD = np.array([[0, 0, 0, 0], [0, 0, 0, 1]], np.float32)
CONV_W = (0.4 * np.cos(0.8 * np.arange(3 * 3 * 2 * 2))).astype(np.float32).reshape(3, 3, 2, 2)


def conv(pads=True):
  """ConvLayer (3x3, 2 -> 2 channels, stride 1, no batch norm, TANH) with
  PassiveAsymQDomain, time paddings (one padded frame) or none."""
  p = layers.ConvLayer.Params().Set(name='conv', filter_shape=[3, 3, 2, 2], filter_stride=[1, 1],
                                    batch_norm=False, activation='TANH')
  p.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
  l = p.Instantiate()
  y, _ = l.FProp(l.theta, tf.constant(CONV_X), tf.constant(CONV_PAD) if pads else None)
  return l, [y]


SM_W = (0.6 * np.sin(0.5 * np.arange(3 * 6) + 0.1)).astype(np.float32).reshape(3, 6)
SM_B = (0.1 * np.cos(np.arange(6))).astype(np.float32)


def softmax():
  """SimpleFullSoftmax (3 -> 6 classes, 2 shards) logits of X1 and X2."""
  p = layers.SimpleFullSoftmax.Params().Set(name='softmax', input_dim=3, num_classes=6, num_shards=2)
  p.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
  l = p.Instantiate()
  return l, [l.Logits(l.theta, tf.constant(X1)), l.Logits(l.theta, tf.constant(X2))]


def set_softmax(s, l):
  for i in range(2):
    s.run(tf.assign(l.vars['weight_%d' % i], SM_W[:, 3 * i:3 * i + 3]))
    s.run(tf.assign(l.vars['bias_%d' % i], SM_B[3 * i:3 * i + 3]))


def additive(pads=SRC_PAD):
  """AdditiveAttention (4 -> hidden 3) with PassiveAsymQDomain: its probabilities."""
  p = attention.AdditiveAttention.Params().Set(name='att', source_dim=4, query_dim=4, hidden_dim=3)
  p.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
  l = p.Instantiate()
  src = tf.constant(SRC)
  packed = l.PackSource(l.theta, src, src, tf.constant(pads))
  ctx, probs, _ = l.ComputeContextVectorWithSource(l.theta, packed, tf.constant(QUERY))
  return l, [ctx, probs]


def set_additive(s, l):
  s.run(tf.assign(l.vars.source_var, (0.5 * np.sin(0.6 * np.arange(12))).astype(np.float32).reshape(4, 3)))
  s.run(tf.assign(l.vars.query_var, (0.5 * np.cos(0.7 * np.arange(12))).astype(np.float32).reshape(4, 3)))
  s.run(tf.assign(l.vars.hidden_var, np.array([0.9, -1.2, 0.6], np.float32)))


def set_mha(s, l):
  for n, v in list(PROJ.items()) + list(PROJ_B.items()):
    s.run(tf.assign(l.vars[n], v))
  s.run(tf.assign(l.atten.vars.per_dim_scale, PER_DIM))


LN_SCALE = (1.0 + 0.1 * np.sin(np.arange(16))).astype(np.float32)


def cell(cls=rnn_cell.LSTMCellSimple):
  p = cls.Params().Set(name='cell', num_input_nodes=3, num_output_nodes=4,
                                           forget_gate_bias=1.0, cell_value_cap=None)
  p.qdomain.default = quant_utils.PassiveAsymQDomain.Params()
  l = p.Instantiate()
  state = py_utils.NestedMap(m=tf.constant(M0), c=tf.constant(C0))
  for t in range(2):
    state, _ = l.FProp(l.theta, state, py_utils.NestedMap(act=[tf.constant(XS)], padding=tf.constant(PADS[t])))
  return l, [state.m, state.c]


def projection_grads(domain, step):
  """sum(y1^2) + sum(y2) of the training graph at global step `step` and its gradient wrt
  w (the straight-through one, through PassiveAsymQDomain's min/max reductions)."""
  g = tf.Graph()
  with g.as_default(), cluster_factory.ForTestingWorker(mode='sync', job='trainer_client', do_eval=False):
    gs = py_utils.GetOrCreateGlobalStepVar()
    with tf.variable_scope('task'):
      p = layers.ProjectionLayer.Params().Set(name='proj', input_dim=3, output_dim=2, activation='TANH',
                                              batch_norm=False)
      p.qdomain.default = domain
      l = p.Instantiate()
    y1 = l.FProp(l.theta, tf.constant(X1))
    y2 = l.FProp(l.theta, tf.constant(X2))
    loss = tf.reduce_sum(y1 * y1) + tf.reduce_sum(y2)
    dw = tf.gradients(loss, l.vars.w)[0]
    with tf.Session(graph=g) as s:
      s.run(tf.global_variables_initializer())
      s.run(tf.assign(l.vars.w, W))
      s.run(tf.assign(gs, step))
      return s.run([y1, y2, dw])


def show(name, vals):
  print(name, ', '.join(repr(float(v)) + 'f' for v in np.ravel(vals)))


def report(name, build, set_weights, out_names):
  """Training outputs, the ranges after the step, the eval outputs with them."""
  outs, ranges = run(build, set_weights, False)
  for n, v in zip(out_names, outs):
    show('%s train %s' % (name, n), v)
  for k in sorted(ranges):
    print(k, repr(ranges[k]))
  outs, _ = run(build, set_weights, True, ranges)
  for n, v in zip(out_names, outs):
    show('%s eval %s' % (name, n), v)


def main():
  y1, y2, dw = projection_grads(quant_utils.PassiveAsymQDomain.Params(), 0)
  show('passive grad dw', dw)
  sched = quant_utils.SymmetricScheduledClipQDomain.Params()
  sched.cc_schedule.Set(clip_start_step=5, clip_end_step=10, quant_start_step=15, start_cap=6.0, end_cap=1.0)
  for step in (7, 16):
    y1, y2, dw = projection_grads(sched, step)
    show('scheduled step %d y1' % step, y1)
    show('scheduled step %d y2' % step, y2)
    show('scheduled step %d dw' % step, dw)
  report('projection', projection, lambda s, l: s.run(tf.assign(l.vars.w, W)), ['y1', 'y2'])
  report('softmax', softmax, set_softmax, ['logits1', 'logits2'])
  report('conv', conv, lambda s, l: s.run(tf.assign(l.vars.w, CONV_W)), ['y'])
  report('additive', additive, set_additive, ['ctx', 'probs'])
  report('additive_nopad', lambda: additive(np.zeros([3, 2], np.float32)), set_additive, ['ctx', 'probs'])
  report('mha', mha, set_mha, ['ctx', 'probs'])
  report('mha_nopad', lambda: mha(np.zeros([3, 2], np.float32)), set_mha, ['ctx', 'probs'])
  set_cell = lambda s, l: (s.run(tf.assign(l.vars.wm, WM)), s.run(tf.assign(l.vars.b, B)))
  report('cell', cell, set_cell, ['m', 'c'])
  report('ln_cell', lambda: cell(rnn_cell.LayerNormalizedLSTMCellSimple),
         lambda s, l: (set_cell(s, l), s.run(tf.assign(l.vars.ln_scale, LN_SCALE))), ['m', 'c'])


if __name__ == '__main__':
  main()
