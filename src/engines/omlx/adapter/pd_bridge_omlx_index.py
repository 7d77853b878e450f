"""pd-bridge's adapter for oMLX: a running oMLX finds cache blocks written into its paged SSD cache
directory by another process (pd-bridge's omlx decoder kind) after the model was loaded.

Why it is needed: oMLX's PagedSSDCacheManager reads its directory once, when the model loads
(_scan_existing_files), and afterwards answers has_block / get_block_metadata from its in-memory
index only; a file that appears later is never found until the model is unloaded and loaded again.
Where the user's oMLX has the artifact import route (POST /api/cache/artifact/import, a newer
admin route), that route is the supported way and this adapter is not needed. For the releases
without it, oMLX offers no public way, so this adapter adds one fallback on an index miss:

  the file <cache_dir>/<h>/<hash>.safetensors exists, oMLX's own _read_file_metadata reads it,
  its block_hash is exactly the hash asked for (the identity check the reference system's patch
  lacked: a file renamed or copied under another name is refused), oMLX's own
  _is_compatible_block accepts it (model, layer count, block size, layer types, signature),
  then it is added to the index as the startup scan would have added it.

It reuses oMLX's own private helpers (_get_file_path, _read_file_metadata, _is_compatible_block,
_index) rather than copying them, so the rules stay oMLX's; a version that renames them makes
install() fail loudly instead of indexing blindly.

Use (docs/omlx.md): put this file on oMLX's Python path and either call install() before oMLX
loads a model, or add a file `pd_bridge_omlx_index.pth` to oMLX's site-packages containing

    import pd_bridge_omlx_index; pd_bridge_omlx_index.install_on_import()
"""
from __future__ import annotations

import importlib.abc
import logging
import sys

logger = logging.getLogger("pd_bridge.omlx_index")

MODULE = "omlx.cache.paged_ssd_cache"
_MARK = "_pd_bridge_index_fallback"
_NEEDED = ("_get_file_path", "_read_file_metadata", "_is_compatible_block", "has_block", "get_block_metadata")


def index_from_disk(manager, block_hash) -> bool:
    """Index the block file named by block_hash if it is one oMLX itself would have indexed; never raises."""
    try:
        if not isinstance(block_hash, (bytes, bytearray)) or len(block_hash) != 32:
            return False
        key = bytes(block_hash)
        if getattr(manager, "_cache_dir", None) is None:
            return False
        path = manager._get_file_path(key)
        if not path.is_file():
            return False
        metadata = manager._read_file_metadata(path)
        if metadata is None:
            return False
        if metadata.block_hash != key:
            logger.warning("pd-bridge index: %s says block_hash %s; not indexed under %s",
                           path.name, metadata.block_hash.hex(), key.hex())
            return False
        if not manager._is_compatible_block(metadata):
            logger.info("pd-bridge index: %s is not compatible with the loaded model; not indexed", path.name)
            return False
        manager._index.add(metadata)
        logger.info("pd-bridge index: indexed %s written after the model loaded", key.hex())
        return True
    except Exception as e:  # a lookup must never fail because of the fallback
        logger.warning("pd-bridge index: could not index %s: %s", getattr(block_hash, "hex", lambda: "?")(), e)
        return False


def install(manager_cls=None) -> None:
    """Wrap has_block and get_block_metadata of PagedSSDCacheManager with the on-miss fallback (once)."""
    if manager_cls is None:
        manager_cls = importlib.import_module(MODULE).PagedSSDCacheManager
    if getattr(manager_cls, _MARK, False):
        return
    missing = [n for n in _NEEDED if not callable(getattr(manager_cls, n, None))]
    if missing:
        raise RuntimeError(f"pd-bridge index: this oMLX's PagedSSDCacheManager has no {', '.join(missing)}; "
                           "the adapter does not know this version (use its artifact import route, or reload the model)")
    has_block = manager_cls.has_block
    get_block_metadata = manager_cls.get_block_metadata

    def has_block_or_disk(self, block_hash):
        return has_block(self, block_hash) or index_from_disk(self, block_hash)

    def metadata_or_disk(self, block_hash):
        found = get_block_metadata(self, block_hash)
        if found is None and index_from_disk(self, block_hash):
            found = get_block_metadata(self, block_hash)
        return found

    has_block_or_disk.__doc__ = has_block.__doc__
    metadata_or_disk.__doc__ = get_block_metadata.__doc__
    manager_cls.has_block = has_block_or_disk
    manager_cls.get_block_metadata = metadata_or_disk
    setattr(manager_cls, _MARK, True)
    logger.info("pd-bridge index: installed on %s.%s", manager_cls.__module__, manager_cls.__name__)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Installs the fallback right after oMLX's cache module is imported, whoever imports it."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        install(module.PagedSSDCacheManager)


def install_on_import() -> None:
    """install() now if oMLX's cache module is loaded, else as soon as it is (for a .pth line)."""
    if MODULE in sys.modules:
        install(sys.modules[MODULE].PagedSSDCacheManager)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
