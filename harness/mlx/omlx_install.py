"""Installs oMLX's DeepSeek-V4 model into mlx_lm the way oMLX's own patch does (the first three steps
of omlx/patches/deepseek_v4/__init__.py's apply_deepseek_v4_patch; the rest patches oMLX's server
loader, tokenizer and cache registry, which a reference run does not use):
  1. PoolingCache and BatchPoolingCache from cache_extras become mlx_lm.models.cache's;
  2. hyper_connection.py is loaded as mlx_lm.models.hyper_connection;
  3. deepseek_v4_model.py is loaded as mlx_lm.models.deepseek_v4, so its relative imports
     (.base, .cache, .hyper_connection, .mla, .pipeline) resolve inside mlx_lm.models.
Import it after harness/mlx/.omlx/site is on sys.path."""
import importlib.util
import os
import sys
import types

# mlx_lm's package __init__ pulls in its converter and generator (huggingface_hub, transformers),
# none of which a model run needs: register the package by its path without running it.
_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".omlx", "site")
if "mlx_lm" not in sys.modules:
    _pkg = types.ModuleType("mlx_lm")
    _pkg.__path__ = [os.path.join(_SITE, "mlx_lm")]
    sys.modules["mlx_lm"] = _pkg

import mlx_lm.models.cache as mlx_cache  # noqa: E402
from omlx.patches.deepseek_v4 import cache_extras  # noqa: E402

_DSV4 = os.path.dirname(cache_extras.__file__)

for name in ("PoolingCache", "BatchPoolingCache"):
    cls = getattr(cache_extras, name)
    cls.__module__ = "mlx_lm.models.cache"
    setattr(mlx_cache, name, cls)


def _load(qualname, filename):
    spec = importlib.util.spec_from_file_location(qualname, os.path.join(_DSV4, filename))
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "mlx_lm.models"
    sys.modules[qualname] = module
    spec.loader.exec_module(module)
    return module


hyper_connection = _load("mlx_lm.models.hyper_connection", "hyper_connection.py")
deepseek_v4 = _load("mlx_lm.models.deepseek_v4", "deepseek_v4_model.py")
