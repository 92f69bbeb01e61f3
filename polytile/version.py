"""The package version (one place: setup.cfg reads it, caches and result files record it), and the
fingerprint of the code itself for caches whose entries a change of polytile's code invalidates."""
import hashlib
import importlib.util
import os

__version__ = "0.1.0"

_fingerprint = None


def code_fingerprint() -> str:
    """sha256 over the path and contents of every Python file of polytile (its ``frontends`` and
    ``codegen`` packages included, wherever they are installed from), computed once per process: a
    cached result that the code could have computed differently is not reused after an edit or an
    upgrade, even when ``__version__`` stays the same.  About 5 ms; the packages are found without
    importing them (so a specialization cache hit still imports no islpy).

    >>> len(code_fingerprint())
    64
    """
    global _fingerprint
    if _fingerprint is None:
        h = hashlib.sha256(__version__.encode())
        for package in ("polytile", "polytile.frontends", "polytile.codegen"):
            spec = importlib.util.find_spec(package)
            for top in (spec.submodule_search_locations or []) if spec else []:
                for dirpath, dirnames, filenames in os.walk(top):
                    dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                    for name in sorted(f for f in filenames if f.endswith(".py")):
                        path = os.path.join(dirpath, name)
                        try:
                            with open(path, "rb") as f:
                                data = f.read()
                        except OSError:
                            continue
                        h.update(os.path.relpath(path, top).encode() + b"\0")
                        h.update(hashlib.sha256(data).digest())
        _fingerprint = h.hexdigest()
    return _fingerprint
