"""ms-swift's web UI with our tab in it: the only module that knows ms-swift's UI classes (``swift.ui``).

:func:`launch` serves ms-swift's own app with the tab its caller builds added after the GRPO tab, that tab
opened first, and the GRPO tab pre-filled for the plugin; how, and why so, is in ``docs/ui.md``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from ..run_config import PLUGIN, PLUGIN_NAME

logger = logging.getLogger("swift_rlfactory")

SUPPORTED = "ms-swift 4.6"


class WebUIUnsupported(RuntimeError):
    """ms-swift's UI is not laid out the way this adapter knows."""


def grpo_prefill() -> dict[str, Any]:
    """Values for ms-swift's GRPO tab fields (by ``elem_id``) that make it run with our plugin."""
    return {
        "external_plugins": str(PLUGIN),
        "multi_turn_scheduler": PLUGIN_NAME,
        "reward_funcs": [PLUGIN_NAME],
        "more_params": f"--callbacks {PLUGIN_NAME}",
    }


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _swift_ui() -> Any:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    try:
        import gradio  # noqa: F401
    except ImportError:
        raise WebUIUnsupported('gradio is not installed: pip install "swift-rlfactory[ui]"') from None
    try:
        from swift.ui import app as swift_app
    except ImportError as exc:
        raise WebUIUnsupported(f"cannot import ms-swift's web UI (swift.ui.app): {exc}") from None
    missing = [name for name in ("SwiftWebUI", "LLMGRPO", "webui_main") if not hasattr(swift_app, name)]
    if missing:
        raise WebUIUnsupported(
            f"this ms-swift's swift.ui.app has no {', '.join(missing)}: swift-rlfactory web-ui knows the UI of "
            f"{SUPPORTED}. Install that version, or use `swift-rlfactory view RUN_DIR` (no ms-swift UI needed)."
        )
    return swift_app


def _prefill(grpo: Any, values: dict[str, Any]) -> None:
    elements = grpo.elements()
    for elem_id, value in values.items():
        element = elements.get(elem_id)
        if element is None:
            raise WebUIUnsupported(f"ms-swift's GRPO tab has no {elem_id!r} field ({SUPPORTED} has)")
        if isinstance(value, list) and hasattr(element, "choices"):  # a multiselect dropdown
            known = [c[1] if isinstance(c, tuple) else c for c in element.choices]
            element.choices = list(element.choices) + [(v, v) for v in value if v not in known]
        element.value = value


@contextlib.contextmanager
def _patched(cls: type, name: str, replacement: Any) -> Iterator[None]:
    """``cls.name = replacement`` for the block; an inherited attribute is shadowed, then unshadowed."""
    own = name in cls.__dict__
    original = cls.__dict__.get(name)
    setattr(cls, name, replacement)
    try:
        yield
    finally:
        if own:
            setattr(cls, name, original)
        else:
            delattr(cls, name)


def launch(
    build_tab: Callable[[], Any],
    serve: dict[str, Any],
    lang: str = "en",
    probe: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> None:
    """Serve ms-swift's web UI plus the tab ``build_tab`` builds (and returns; it opens first), with
    ``serve`` as ``Blocks.launch`` settings (``server_name``, ``server_port``, ``auth``, ...) and ``probe``
    in place while it starts, until interrupted."""
    import gradio as gr

    host, port, auth = serve["server_name"], serve["server_port"], serve.get("auth")
    swift_app = _swift_ui()
    grpo = swift_app.LLMGRPO
    built: list[bool] = []
    original_build = grpo.build_ui.__func__

    def build_ui(cls, base_tab):
        original_build(cls, base_tab)
        if cls is grpo and base_tab is grpo and not built:  # the GRPO tab itself, not a panel or subclass
            _prefill(cls, grpo_prefill())
            tab = build_tab()
            tabs = gr.context.Context.block  # the gr.Tabs both tabs sit in
            if isinstance(tabs, gr.Tabs) and getattr(tab, "id", None) is not None:
                tabs.selected = tab.id
            built.append(True)

    original_launch = gr.Blocks.launch

    def serve_page(self, *args, **kwargs):
        if not built:
            raise WebUIUnsupported(f"ms-swift built its UI without its GRPO tab ({SUPPORTED} builds one)")
        kwargs.update(serve)
        logger.info("serving on http://%s:%d", host, port)
        return original_launch(self, *args, **kwargs)

    if not is_loopback(host) and auth is None:
        logger.warning(
            "the web UI is bound to %s without --auth: anyone who reaches it can launch commands on this "
            "machine (training runs, tools). Pass --auth USER:PASS, or bind 127.0.0.1.",
            host,
        )
    for var in ("WEBUI_SERVER", "WEBUI_PORT", "WEBUI_SHARE"):  # ms-swift reads these over its arguments
        os.environ.pop(var, None)
    with (
        _patched(grpo, "build_ui", classmethod(build_ui)),
        _patched(gr.Blocks, "launch", serve_page),
        probe(),
    ):
        swift_app.webui_main(["--server_name", host, "--server_port", str(port), "--lang", lang])
