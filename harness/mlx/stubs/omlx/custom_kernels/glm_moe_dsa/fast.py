# Stub for oMLX omlx/custom_kernels/glm_moe_dsa/fast.py (wrapper over a native Metal extension); on CPU no extension exists, so every symbol probe is False.
"""Our own stand-in, not a copy. The model and its helpers only reach the
kernels after has_symbol()/is_native_available() return True, which never
happens here; any direct kernel call raises."""

_EXT_MASK_FOLD = False
_EXT_MMA_SCORE = False
_EXT_NAX_SCORE = False


def is_native_available() -> bool:
    return False


def has_symbol(name: str) -> bool:
    return False


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def _unavailable(*args, **kwargs):
        raise RuntimeError(
            f"oMLX stub: glm_moe_dsa.fast.{name} is a Metal-only path and must not run here"
        )

    return _unavailable
