"""Runs one of real Lingvo's tools with the cross-checks' experiments registered.

  python run.py trainer --model=image.mnist.LeNet5 --run_locally=cpu --logdir=DIR ...
  python run.py keras2ckpt --dataset=fashion_mnist --out=DIR/mnist

The PyPI wheel of Lingvo ships its library but none of its experiment files
(lingvo/tasks/*/params/): the files under params/ here are loaded under Lingvo's own
module names (params/image/mnist.py as lingvo.tasks.image.params.mnist), so the model
names are Lingvo's (image.mnist.LeNet5), and Lingvo's own flags apply
(--model_params_override='task.train.max_steps: 300', ...).
"""
import importlib.util
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = {'trainer': 'lingvo.trainer', 'keras2ckpt': 'lingvo.tools.keras2ckpt'}


def _register_params():
  root = os.path.join(HERE, 'params')
  for task in sorted(os.listdir(root)):
    for f in sorted(os.listdir(os.path.join(root, task))):
      if not f.endswith('.py'):
        continue
      name = 'lingvo.tasks.%s.params.%s' % (task, f[:-3])
      spec = importlib.util.spec_from_file_location(name, os.path.join(root, task, f))
      module = importlib.util.module_from_spec(spec)
      sys.modules[name] = module
      spec.loader.exec_module(module)


def main():
  if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
    sys.exit('usage: run.py {%s} [FLAGS...]' % ','.join(sorted(TOOLS)))
  tool = TOOLS[sys.argv[1]]
  sys.argv = [tool] + sys.argv[2:]
  _register_params()
  runpy.run_module(tool, run_name='__main__', alter_sys=True)


if __name__ == '__main__':
  main()
