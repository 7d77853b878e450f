"""What leaves the torch prefill server names no file by its absolute path unless the caller holds
the key: each root (and the temporary, home and working directories) is replaced by its name, at
path boundaries, as src/http/redact.ts does for the TypeScript servers. Standard library only."""
import os
import re
import tempfile


def path_redactor(roots):
    """Each root (and the temporary, home and working directories) by its name, at path boundaries (src/http/redact.ts)."""
    named = [(os.path.realpath(d), n) for d, n in roots if d] + [(d, n) for d, n in roots if d]
    named += [(tempfile.gettempdir(), 'tmp'), (os.path.expanduser('~'), 'home'), (os.getcwd(), 'cwd')]
    named = sorted({(d.rstrip('/'), n) for d, n in named if len(d.rstrip('/')) > 1}, key=lambda x: -len(x[0]))
    patterns = [(re.compile(r'(?<![\w./-])' + re.escape(d) + r'(?=$|[/\s\'"`),:;\]}])'), f'<{n}>') for d, n in named]

    def redact(text: str) -> str:
        for pattern, name in patterns:
            text = pattern.sub(name, text)
        return text
    return redact
