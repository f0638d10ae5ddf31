"""Secrets stay secret: ``${VAR}`` (and ``${file:PATH}``) expansion that remembers what it expanded, and
redaction of every message and log record we write.

Which values count as secrets, the expansion syntaxes read and where redaction applies: docs/secrets.md.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

MIN_SECRET_LEN = 6

# Windsurf's ${file:PATH}; ${VAR}, VS Code's ${env:VAR}, Claude Code's ${VAR:-default}; opencode's {env:VAR};
# a bare $VAR (Gemini CLI).
_VAR = re.compile(
    r"\$\{file:(?P<file>[^}]*)\}"
    r"|\$\{(?P<env>env:)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?<!\$)\{env:(?P<opencode>[A-Za-z_][A-Za-z0-9_]*)\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)
# A query value runs to the next ``&``, ``#``, quote or whitespace, but does not end in a closing bracket or
# punctuation: ``(see http://h/mcp?key=VALUE).`` keeps its ``).``, while a ``)`` inside a value is still hidden.
_QUERY_VALUE = re.compile(
    r"([?&][^=&#\s'\"]+=)"
    r"(?!\$\{\w+\}(?:[&#\s'\")\]}>.,;:!?]|$))"  # a value already shown as its ${VAR} stays so
    r"[^&#\s'\"]*[^&#\s'\")\]}>.,;:!?]"
)
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|AUTH|CREDENTIAL|COOKIE|SESSION", re.IGNORECASE)
# A credential --flag, by how its name ends: --hub_token, --api-key, --db-password, --auth (not --max_tokens
# or --use_hf_token_cache, which take counts and switches).
_CREDENTIAL_FLAG = re.compile(
    r"^--?[\w-]*(?:token|key|secret|passwd|password|credentials?|auth)$", re.IGNORECASE
)
# A key, by its shape: one long word of letters and digits (``sk-...``, ``ghp_...``, hex, base64), no path.
_KEY_SHAPE = re.compile(r"(?=[^/\\\s]*[A-Za-z])(?=[^/\\\s]*\d)[^/\\\s]{16,}")
_HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")

_lock = threading.Lock()
_secrets: dict[str, str] = {}  # value -> what to show instead
_pattern: re.Pattern[str] | None = None
_factory_installed = False


def looks_secret(name: str) -> bool:
    """Whether a variable, header or ``env:`` entry named ``name`` holds a credential (a ``--flag``'s name is
    read by :func:`credential_arg`, which goes by how it ends)."""
    return _CREDENTIAL_NAME.search(name) is not None


def credential_arg(args: Sequence[str], i: int) -> bool:
    """Whether ``args[i]`` of a command line is a credential by its flag: it carries one (``--token=KEY``)
    or is the value of a flag named like one (``--token KEY``, ``--api-key KEY``; not ``--no-auth``, which
    takes none, nor another flag after it)."""
    flag, equals, _ = args[i].partition("=")
    if args[i].startswith("-"):
        return bool(equals) and _CREDENTIAL_FLAG.match(flag) is not None
    before = args[i - 1] if i > 0 else ""
    return not before.startswith("--no-") and _CREDENTIAL_FLAG.match(before) is not None


def looks_like_key(value: str) -> bool:
    """Whether ``value`` is shaped like a key or token: 16 or more characters without whitespace or a path
    separator, letters and digits both (``sk-4f9a...``, a hex digest); a path, a URL or a word is not."""
    return _KEY_SHAPE.fullmatch(value) is not None


def expand(
    text: str, plain: Mapping[str, str] | None = None, base_dir: Path = Path("."), secret: bool = False
) -> str:
    """``text`` with environment variables and files substituted; raises ``ValueError`` naming an unset
    variable or a file that cannot be read.

    Reads ``${VAR}``, ``${env:VAR}``, ``{env:VAR}``, ``${VAR:-default}``, a bare ``$VAR`` and ``${file:PATH}``
    (relative to ``base_dir``), in one pass. Substituted values are recorded as secrets when ``secret`` is
    set, the name looks like a credential or the value like a key; ``plain`` answers names that are not
    secrets (``${workspaceFolder}``). The rules: docs/secrets.md.
    """

    def substitute(match: re.Match[str]) -> str:
        if (written := match["file"]) is not None:
            value = _file_value(written, base_dir)
            remember(value, f"${{file:{written}}}")
            return value
        if name := match["bare"]:
            value = os.environ.get(name)
            if value is None:
                return match.group(0)
        else:
            name = match["name"] or match["opencode"]
            if plain and match["name"] and not match["env"] and name in plain:
                return plain[name]
            value, default = os.environ.get(name), match["default"]
            if default is not None and not value:
                value = default
            elif value is None:
                raise ValueError(
                    f"environment variable {name} is not set (write ${{{name}:-default}} to give a default)"
                )
        if secret or looks_secret(name) or looks_like_key(value):
            remember(value, f"${{{name}}}")
        return value

    return _VAR.sub(substitute, text)


def _file_value(written: str, base_dir: Path) -> str:
    """The stripped content of the file ``${file:written}`` names; ``ValueError`` saying why not."""
    if not written.strip() or "$" in written:
        raise ValueError(
            f"${{file:{written}}} must name a file by its path (absolute, ~/..., or relative to the "
            "config's folder), without variables in it"
        )
    path = Path(written.strip()).expanduser()
    path = path if path.is_absolute() else base_dir / path
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a UTF-8 text file"
        raise ValueError(f"${{file:{written}}}: cannot read {path}: {why}") from None


def remember(value: str, shown_as: str = "***") -> None:
    """Record ``value`` as a secret that :func:`redact` replaces with ``shown_as`` (unless already known),
    stripped, percent-encoded and in base64 too."""
    global _pattern
    # Stripped too: a value read with its newline is sent stripped (a header) or echoed so by a server; and
    # as a server logs it sent: percent-encoded (in a URL path) and base64 (``user:password`` as Basic auth).
    forms = [form for v in (value, value.strip()) for form in (v, quote(v, safe=""), _base64(v))]
    fresh = [v for v in dict.fromkeys(forms) if len(v) >= MIN_SECRET_LEN]
    with _lock:
        fresh = [v for v in fresh if v not in _secrets]  # the first name wins: ``${VAR}`` says more
        if not fresh:
            return
        _secrets.update(dict.fromkeys(fresh, shown_as))
        # Longest first, so a secret that contains another is replaced whole.
        alternatives = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(v) for v in alternatives))
    install_log_redaction()


def _base64(value: str) -> str:
    """``value`` in standard base64, as ``Authorization: Basic`` carries ``user:password``."""
    return base64.b64encode(value.encode()).decode()


def remember_url(url: str, shown_as: str = "***") -> None:
    """Record the credentials a URL carries: the password of ``user:password@host`` (and its Basic auth
    header) and every query value, which a server may echo alone.
    """
    parts = urlsplit(url)
    if parts.password:  # as written (``p%40ss``, how the URL itself shows it) and decoded (``p@ss``)
        remember(parts.password, shown_as)
        remember(unquote(parts.password), shown_as)
        remember(_base64(f"{unquote(parts.username or '')}:{unquote(parts.password)}"), shown_as)
    for _, value in parse_qsl(parts.query):
        remember(value, shown_as)


def remember_env(env: Mapping[str, str]) -> None:
    """Record the values of ``env`` entries whose names look like credentials or that are shaped like keys
    (a Claude Desktop file's literal ``"SERPER": "3f9a..."``)."""
    for name, value in env.items():
        if looks_secret(name) or looks_like_key(value):
            remember(value, f"${{{name}}}")


def redact(text: str) -> str:
    """``text`` with every recorded secret shown as its ``${VAR}`` and URL query values blanked."""
    return _QUERY_VALUE.sub(r"\1***", redact_recorded(text))


def excerpt(text: str, limit: int = 200) -> str:
    """The first ``limit`` characters of ``text``, redacted, for an error message (redacted whole, then cut,
    so no secret is split).
    """
    return redact(text)[:limit]


def redact_recorded(text: str) -> str:
    """``text`` with every recorded secret shown as its ``${VAR}``, and nothing else changed: for data, such
    as a trajectory, whose URLs are what the model wrote or read rather than our configuration."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(lambda m: _secrets.get(m.group(0), "***"), text)


def safe_cut_before(text: str, at: int) -> int:
    """The last place at or before ``at`` where ``text`` can be cut into two pieces redacted apart (no
    recorded secret spans it), for a stream redacted piece by piece (a server's stderr).
    """
    with _lock:
        values = list(_secrets)
    cut = None
    while cut != at:
        cut = at
        for value in values:
            # A start before the cut from which ``text`` runs on as the value (to its end or to the text's).
            for start in range(max(0, at - len(value) + 1), at):
                if text.startswith(value[: len(text) - start], start):
                    at = start
                    break
    return at


def redact_data(value: Any) -> Any:
    """``value`` with :func:`redact_recorded` applied to every string in it, dict keys included, before it is
    serialized (in JSON text an escaped secret would not be found).
    """
    if isinstance(value, str):
        return redact_recorded(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v) for v in value)
    return value


def install_log_redaction() -> None:
    """Redact every log record at creation, whichever logger or handler it goes to; idempotent. Also raises
    the HTTP client loggers to WARNING (at INFO they log every request URL) unless set higher already.
    """
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
    for name in _HTTP_LOGGERS:
        http_logger = logging.getLogger(name)
        if http_logger.level in (logging.NOTSET, logging.DEBUG, logging.INFO):
            http_logger.setLevel(logging.WARNING)
    previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string: leave it to the handler to report
            return record
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            # Handlers format the traceback later from exc_info; a pre-set exc_text is used as is.
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record

    logging.setLogRecordFactory(factory)
