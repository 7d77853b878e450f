"""One engine per capture root (src/engines/prefill/root-lock.ts, recover.ts): `<root>/.prefill-engine.lock`
holds the pid; a dead pid's lock is stale and taken over. On start every `running` manifest left by
an earlier engine is sealed `failed`, so a crash never leaves a capture that could be trusted."""
import json
import os
import sys
from typing import List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pd_torch_hook import manifest as mf  # noqa: E402

LOCK = '.prefill-engine.lock'


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            return b'serve_prefill' in f.read()  # a reused pid of another program is stale
    except OSError:
        return True


def take_lock(root: str) -> str:
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, LOCK)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                with open(path) as f:
                    pid = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                raise SystemExit(f'capture root {root} is held by a live prefill engine (pid {pid})')
            os.unlink(path)
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return path
    raise SystemExit(f'cannot take {path}')


def release_lock(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def recover(root: str, previous_pid: str = 'unknown') -> List[str]:
    """Seal every running capture under root as failed; returns their ids."""
    sealed = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if name.startswith('.') or not os.path.isdir(d):
            continue
        try:
            m = mf.read(d)
        except (OSError, json.JSONDecodeError):
            print(json.dumps({'event': 'recover-skip', 'dir': d}), file=sys.stderr)
            continue
        if m.get('state') == 'running':
            mf.finish(d, m, 'failed', error=f'engine restarted: the previous engine (pid {previous_pid}) stopped while this capture was running')
            sealed.append(name)
    return sealed
