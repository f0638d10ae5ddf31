"""ms-swift's web UI with our tab in it: the only module that knows ms-swift's UI classes (``swift.ui``).

``swift web-ui`` has no plugin hook (``WebUIArguments`` takes four fields), so :func:`launch` runs
ms-swift's own app builder (``SwiftWebUI.run``) with two wrappers in place for the duration of the call:

* ``LLMGRPO.build_ui`` - after ms-swift builds its GRPO tab, its fields are pre-filled for the rlfactory
  plugin (``--external_plugins``, ``--multi_turn_scheduler``, ``--reward_funcs``, ``--callbacks``) and our tab
  is built right after it, inside the same ``gr.Tabs``;
* ``gradio.Blocks.launch`` - the host, port and login we were given replace ms-swift's (which opens a
  browser and has no login), with server-side rendering, the MCP endpoint and sharing off; and gradio's
  check that the page answers on localhost waits as long as a busy machine needs (``ui/probe.py``).

Every ms-swift tab is still built by ms-swift's code. On an ms-swift whose UI is laid out differently (no
``swift.ui.app.SwiftWebUI`` or ``LLMGRPO``, or our tab never got built) :class:`WebUIUnsupported` says so
before anything is served.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger("swift_rlfactory")

SUPPORTED = "ms-swift 4.6"
PLUGIN = Path(__file__).resolve().parents[1] / "plugin.py"


class WebUIUnsupported(RuntimeError):
    """ms-swift's UI is not laid out the way this adapter knows."""


def grpo_prefill() -> dict[str, Any]:
    """Values for ms-swift's GRPO tab fields (by ``elem_id``) that make it run with our plugin."""
    return {
        "external_plugins": str(PLUGIN),
        "multi_turn_scheduler": "rlfactory",
        "reward_funcs": ["rlfactory"],
        "more_params": "--callbacks rlfactory",
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
    build_tab: Callable[[], None],
    host: str = "127.0.0.1",
    port: int = 7860,
    lang: str = "en",
    auth: tuple[str, str] | None = None,
) -> None:
    """Serve ms-swift's web UI plus the tab ``build_tab`` builds, until interrupted."""
    import gradio as gr

    from ..ui.page import serve_options
    from ..ui.probe import patient_probe

    swift_app = _swift_ui()
    grpo = swift_app.LLMGRPO
    built: list[bool] = []
    original_build = grpo.build_ui.__func__

    def build_ui(cls, base_tab):
        original_build(cls, base_tab)
        if cls is grpo and base_tab is grpo and not built:  # the GRPO tab itself, not a panel or subclass
            _prefill(cls, grpo_prefill())
            build_tab()
            built.append(True)

    original_launch = gr.Blocks.launch

    def serve(self, *args, **kwargs):
        if not built:
            raise WebUIUnsupported(f"ms-swift built its UI without its GRPO tab ({SUPPORTED} builds one)")
        kwargs.update(serve_options(host, port, auth))
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
        _patched(gr.Blocks, "launch", serve),
        patient_probe(),  # gradio's own check of the served page gives up after 3 s
    ):
        swift_app.webui_main(["--server_name", host, "--server_port", str(port), "--lang", lang])
