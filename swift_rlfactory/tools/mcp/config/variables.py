"""``${VAR}``, ``${file:PATH}`` and the editors' own variables expanded in a server entry, the secrets among
the values recorded for redaction. See docs/mcp.md, "Variables and secrets"."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from swift_rlfactory import redaction

from .files import read_dotenv

if TYPE_CHECKING:
    from .server import McpServerConfig

# What VS Code asks the user for (a prompt, a command's answer, a setting): nothing to answer it offline.
_EDITOR_VARIABLE = re.compile(r"\$\{(?:input|command|config):[^}]*\}")


class _Expander:
    """Expands one entry's strings, from the environment and the predefined variables of ``base_dir``."""

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir
        self.predefined = {  # VS Code's and Cursor's own variables; paths, not secrets
            "workspaceFolder": str(base_dir),
            "workspaceFolderBasename": base_dir.name,
            "userHome": str(Path.home()),
            "pathSeparator": os.sep,
        }

    def __call__(self, text: str, field: str, secret: bool = False) -> str:
        if asked := _EDITOR_VARIABLE.search(text):
            raise ValueError(
                f"{field}: {asked[0]} is answered in the editor (VS Code asks for it), and nothing can "
                "answer it in a training run: put the value in an environment variable and write "
                "${env:NAME} (or ${NAME}) instead"
            )
        try:
            return redaction.expand(
                text.replace("${/}", os.sep), self.predefined, self.base_dir, secret=secret
            )
        except ValueError as exc:
            raise ValueError(f"{field}: {exc}") from None


def resolved(config: McpServerConfig, base_dir: Path) -> McpServerConfig:
    """See :meth:`~.server.McpServerConfig.resolved`."""
    expand = _Expander(base_dir)
    env = _env(config, expand)
    credential = [redaction.credential_arg(config.args, i) for i in range(len(config.args))]
    update: dict[str, Any] = {
        "args": [expand(a, f"args[{i}]", credential[i]) for i, a in enumerate(config.args)],
        "env": env,
        "headers": _headers(config, expand),
    }
    redaction.remember_env(update["env"])
    for value, is_credential in zip(update["args"], credential, strict=True):
        if is_credential:  # a literal key after --token is as secret as an expanded one
            redaction.remember(value.partition("=")[2] if value.startswith("-") else value, "<secret arg>")
    if config.url is not None:
        update["url"] = expand(config.url, "url", secret=True).strip()  # pasted with a space or newline
        redaction.remember_url(update["url"])
    if config.auth is not None:
        update["auth"] = _auth(config, expand)
    if config.command is not None:
        update["command"] = expand(config.command, "command")
        cwd = Path(expand(config.cwd, "cwd")).expanduser() if config.cwd else base_dir
        update["cwd"] = str(cwd if cwd.is_absolute() else (base_dir / cwd).resolve())
    if config.roots is not None:
        update["roots"] = [
            str(_root_folder(expand(root, f"roots[{i}]"), base_dir, f"roots[{i}]"))
            for i, root in enumerate(config.roots)
        ]
    return config.model_copy(update=update)


def _env(config: McpServerConfig, expand: _Expander) -> dict[str, str]:
    """``env`` expanded over VS Code's ``envFile``, plus the variables ``env_vars`` passes through."""
    env = {k: expand(v, f"env.{k}", secret=redaction.looks_secret(k)) for k, v in config.env.items()}
    if config.env_file:
        path = Path(expand(config.env_file, "envFile"))
        env = {**read_dotenv(path if path.is_absolute() else expand.base_dir / path), **env}
    for name in config.env_vars:  # passed through by name; a value written in ``env`` wins (Goose)
        if name not in env:
            env[name] = expand(f"${{{name}}}", "env_keys/env_vars", secret=redaction.looks_secret(name))
    return env


def _headers(config: McpServerConfig, expand: _Expander) -> dict[str, str]:
    """``headers`` expanded, literal keys recorded as secrets, then Codex's ``env_http_headers`` and
    ``bearer_token_env_var``, which win over a static header of their name in any case."""
    headers = {
        k: _header_value(expand(v, f"headers.{k}", secret=True), f"headers.{k}")
        for k, v in config.headers.items()
    }
    for name, value in headers.items():
        if "$" not in config.headers[name]:  # a literal key; expanded ones are recorded as ${VAR}
            redaction.remember(value, f"<{name} header>")
            for part in value.split():
                if part.lower() not in ("bearer", "basic", "token", "digest"):
                    redaction.remember(part, f"<{name} header>")
    named = {
        header: (f"env_http_headers.{header}", f"${{{var}}}")
        for header, var in config.env_http_headers.items()
    }
    if config.bearer_token_env_var is not None:
        named["Authorization"] = ("bearer_token_env_var", f"Bearer ${{{config.bearer_token_env_var}}}")
    for header, (field, written) in named.items():
        headers = {k: v for k, v in headers.items() if k.lower() != header.lower()}
        headers[header] = _header_value(expand(written, field, secret=True), field)
    return headers


def _auth(config: McpServerConfig, expand: _Expander) -> Any:
    """``auth`` with its client id, secret, private key and token store path expanded; the secret and the
    key are recorded as such whether expanded or literal."""
    auth = config.auth
    assert auth is not None
    update: dict[str, Any] = {}
    if auth.client_id is not None:
        update["client_id"] = expand(auth.client_id, "auth.client_id").strip()
    if auth.client_secret is not None:
        update["client_secret"] = expand(auth.client_secret, "auth.client_secret", secret=True).strip()
        redaction.remember(update["client_secret"], "<auth.client_secret>")
    if auth.private_key is not None:
        update["private_key"] = expand(auth.private_key, "auth.private_key", secret=True).strip()
        redaction.remember(update["private_key"], "<auth.private_key>")
    if auth.token_store is not None:
        path = Path(expand(auth.token_store, "auth.token_store")).expanduser()
        update["token_store"] = str(path if path.is_absolute() else expand.base_dir / path)
    return auth.model_copy(update=update)


def _header_value(value: str, field: str) -> str:
    """An expanded header value as HTTP sends it: without surrounding whitespace, which is no part of a
    field value (RFC 9110, 5.5) - a token read with its newline is the token. A line break or other
    control character inside cannot be sent: ``ValueError`` naming the ``field`` it came from
    (``headers.X``, ``bearer_token_env_var``), never showing the value (httpx's own error at start would
    show it whole)."""
    value = value.strip()
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
        raise ValueError(
            f"{field}: the value holds a line break or another control character, which an HTTP "
            "header cannot carry (a variable or file read with a newline inside it?)"
        )
    return value


def _root_folder(root: str, base_dir: Path, field: str) -> Path:
    """A ``roots`` entry as an absolute folder path: a ``file://`` URI's path, or a path (``~`` expanded)
    taken from ``base_dir``; ``ValueError`` naming ``field`` for a URI of another scheme (``http://``)."""
    parts = urlsplit(root)
    if parts.scheme.lower() == "file":
        return Path(url2pathname(parts.path)).resolve()
    if "://" in root:
        raise ValueError(f"{field}: {root!r} is not a folder path or a file:// URI")
    path = Path(root).expanduser()
    return (path if path.is_absolute() else base_dir / path).resolve()
