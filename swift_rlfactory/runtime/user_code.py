"""Load user code named in an environment file: ``package.module`` or ``path/to/file.py``.

Environments name tools and rewards as ``module:function`` or ``file.py:function``. Files are loaded by
path (relative to the environment's folder) under a unique module name, so two environments can each have
a ``tools.py`` without one shadowing the other; modules are imported normally, with the environment's
folder on ``sys.path`` so that sibling modules import too.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

# Module paths that moved inside the package, so an environment file written for an older release loads as is.
MOVED = {"swift_rlfactory.envs.": "swift_rlfactory.bundled."}


def import_target(target: str, base_dir: Path) -> ModuleType:
    """Import ``target`` (a dotted module or a ``.py`` path, ``~`` expanded) and return the module.

    A module that calls ``sys.exit()`` while it is imported (a script's argparse at top level) raises
    ``ImportError`` saying so, instead of ending the program without a word."""
    if target.endswith(".py") or "/" in target:
        path = (base_dir / Path(target).expanduser()).resolve()
        if not path.is_file():
            raise ImportError(f"file not found: {path}")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        module_name = f"rlfactory_user_{path.stem}_{digest}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except SystemExit as exc:
            del sys.modules[module_name]
            raise ImportError(f"{path} called sys.exit({exc.code!r}) while it was imported") from None
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    for old, new in MOVED.items():
        if target.startswith(old):
            target = new + target[len(old) :]
    if str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))
    try:
        return importlib.import_module(target)
    except SystemExit as exc:
        raise ImportError(f"module {target!r} called sys.exit({exc.code!r}) while it was imported") from None
