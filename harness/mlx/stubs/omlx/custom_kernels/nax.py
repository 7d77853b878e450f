# Stub for oMLX omlx/custom_kernels/nax.py (detects Apple M5 "NAX" GPU tensor units); a CPU run has none, so this is always False.


def is_nax_available() -> bool:
    return False
