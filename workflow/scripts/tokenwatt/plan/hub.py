"""Is a pretrained ``model.name`` / ``tokenizer.name`` usable before any job runs?

transformers reads a name as a folder when one exists there, else as a Hub id, which it looks up
in the local Hugging Face cache and downloads when missing. The config check asks the same two
questions without a network: a folder, or a Hub id whose files are in the cache
(``huggingface_hub.try_to_load_from_cache`` reads the cache's folders only). A name that is
neither is refused, online too: a download would start inside a job, mid-study (trials run
interleaved), and fail there when this machine cannot reach the Hub, after other trials ran;
downloading first moves every such failure (no network, a gated repository, a typo) before the
first job. Cheap: huggingface_hub is imported only when a Hub id is configured.
"""

from __future__ import annotations

import os
from pathlib import Path

# The file every repository of its kind has, whose presence in the cache marks a download.
MARKERS = {
    "model": ("config.json",),
    "tokenizer": ("tokenizer_config.json", "tokenizer.json", "tokenizer.model", "vocab.json"),
}
PATH_LIKE = ("/", "./", "../", "~")


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) set: no job may download anything."""
    return any(
        os.environ.get(v, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def cached(repo_id: str, revision: str | None, kind: str) -> bool:
    """Whether the Hub repository's files are in the local cache (no network); ValueError for an invalid id."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return any(
            isinstance(try_to_load_from_cache(repo_id, marker, revision=revision), str) for marker in MARKERS[kind]
        )
    except ValueError as err:  # HFValidationError: not a Hub id at all
        raise ValueError(str(err)) from None


def pretrained_problem(kind: str, name: str, revision: str | None, key: str) -> str | None:
    """What is wrong with a pretrained ``name`` (``kind``: model or tokenizer), named by ``key``; None when usable."""
    path = Path(name).expanduser()
    if path.is_dir():
        return None
    if path.exists():
        return f"{key}: {name} is a file; give the folder it was saved to with save_pretrained"
    if name.startswith(PATH_LIKE):
        return f"{key}: the folder {name} does not exist; give an existing folder or a Hub id"
    at = f" at revision {revision}" if revision else ""
    download = f"hf download {name}" + (f" --revision {revision}" if revision else "")
    try:
        if cached(name, revision, kind):
            return None
    except ValueError:
        return (
            f"{key}: no folder {name} here, and {name!r} is not a Hub id either (org/name, of letters, digits, "
            f"'-', '_' and '.'); give the path of an existing folder, or a Hub id"
        )
    reading = f"{key}: no folder {name} here, and no Hub id {name}{at} in the local Hugging Face cache"
    if offline():
        return (
            f"{reading} (HF_HUB_OFFLINE is set, so no job can download it); give ./{name} for a folder, "
            f"or download it first where the Hub can be reached: {download}"
        )
    return (
        f"{reading}: its job would try to download it mid-study, and fail there if this machine cannot reach "
        f"the Hub; give ./{name} for a folder, or download it first: {download}"
    )
