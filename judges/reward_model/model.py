"""A small local reward model: it scores one response given its prompt (and the pair's
preference criterion, when the config says ``"criterion": true``).

Text features are one of two kinds (``config["features"]``):
- ``hashed``: hashed word unigrams and bigrams (tokenised in one vectorised pass over a whole
  batch), mean-pooled by a trained ``EmbeddingBag``;
- ``minilm``: frozen all-MiniLM-L6-v2 sentence embeddings (``judges.reward_model.minilm``,
  offline weights).
Plus a few numbers about the response (length, images and their pixel statistics, and with
``"media": true`` its videos' and audio clips' durations and signal statistics,
``judges.backends.media_stats``); an MLP maps them to a scalar reward. Arbiter's trainer
(``judges.reward_model``) writes this checkpoint format.

Checkpoint: ``torch.save`` of ``{"format": "arbiter-reward-model", "version": 1,
"config": {...}, "state_dict": {...}, "meta": {...}}``, read back with ``weights_only=True``;
``meta`` (optional) says what a trained model learned from and how well it did.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from judges.backends.media_stats import N_MEDIA_FEATURES, media_features
from judges.core.images import N_IMAGE_FEATURES

# The torch-free pieces (judges.reward_model.checkpoint), importable from here too.
from judges.reward_model.checkpoint import CheckpointError, ScoringInput
from judges.reward_model.checkpoint import checkpoint_local as checkpoint_local
from judges.reward_model.checkpoint import checkpoint_path as checkpoint_path

CHECKPOINT_FORMAT = "arbiter-reward-model"
CHECKPOINT_VERSION = 1
TOKENIZER = "hashed-words-v1"
FEATURES = ("hashed", "minilm")
DEFAULT_CONFIG = {
    "features": "hashed",
    "tokenizer": TOKENIZER,
    "n_buckets": 1 << 16,
    "embed_dim": 64,
    "hidden_dim": 128,
    "max_tokens": 512,
    "bigrams": True,
    # Checkpoints written before the trainer existed score without the criterion.
    "criterion": False,
    # Checkpoints written before video and audio parts have no media columns.
    "media": False,
}
# Length, image count, has text, unreadable image share, then the mean image statistics;
# with config "media", N_MEDIA_FEATURES more after them.
N_NUMERIC = 4 + N_IMAGE_FEATURES


# Tokenising --------------------------------------------------------------------------------

# A byte is part of a word when it is an ASCII letter or digit or any UTF-8 non-ASCII byte,
# so words in other scripts stay whole.
_WORD_BYTE = np.zeros(256, dtype=bool)
_WORD_BYTE[ord("0") : ord("9") + 1] = True
_WORD_BYTE[ord("a") : ord("z") + 1] = True
_WORD_BYTE[0x80:] = True
_MAX_WORD = 32  # bytes of a word that count towards its hash
_POWERS = np.cumprod(np.full(_MAX_WORD, 0x100000001B3, dtype=np.uint64), dtype=np.uint64)
_BIGRAM_SALT = np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads hash bits so ``% n_buckets`` is uniform."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def hash_tokens(
    texts: list[str], *, n_buckets: int, max_tokens: int, bigrams: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bucket ids of each text's words (and word bigrams), as ``(ids, offsets, word_counts)``
    for an ``EmbeddingBag``. Deterministic across processes, unlike Python's ``hash``."""
    n_texts = len(texts)
    joined = "\x00".join(t.replace("\x00", " ").lower() for t in texts)
    data = np.frombuffer(joined.encode("utf-8", "replace"), dtype=np.uint8)
    text_of_byte = np.cumsum(data == 0)
    is_word = _WORD_BYTE[data]
    starts = is_word & ~np.concatenate(([False], is_word[:-1]))
    word_bytes = np.flatnonzero(is_word)
    start_bytes = np.flatnonzero(starts)
    if start_bytes.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, np.zeros(n_texts, dtype=np.int64), np.zeros(n_texts, dtype=np.int64)
    word_of_byte = np.cumsum(starts)[word_bytes] - 1
    position = word_bytes - start_bytes[word_of_byte]
    contributions = (data[word_bytes].astype(np.uint64) + np.uint64(1)) * _POWERS[
        np.minimum(position, _MAX_WORD - 1)
    ]
    word_hash = _mix(np.add.reduceat(contributions, np.flatnonzero(position == 0)))
    text_of_word = text_of_byte[start_bytes]
    # Keep each text's first max_tokens words.
    word_counts = np.bincount(text_of_word, minlength=n_texts)
    first_word = np.concatenate(([0], np.cumsum(word_counts)[:-1]))
    kept = (np.arange(word_hash.size) - first_word[text_of_word]) < max_tokens
    word_hash, text_of_word = word_hash[kept], text_of_word[kept]
    hashes, owners = [word_hash], [text_of_word]
    if bigrams and word_hash.size > 1:
        same_text = text_of_word[:-1] == text_of_word[1:]
        pair_hash = _mix(word_hash[:-1] * _BIGRAM_SALT + word_hash[1:])[same_text]
        hashes.append(pair_hash)
        owners.append(text_of_word[:-1][same_text])
    all_hashes, all_owners = np.concatenate(hashes), np.concatenate(owners)
    order = np.argsort(all_owners, kind="stable")
    ids = (all_hashes[order] % np.uint64(n_buckets)).astype(np.int64)
    per_text = np.bincount(all_owners, minlength=n_texts)
    offsets = np.concatenate(([0], np.cumsum(per_text)[:-1])).astype(np.int64)
    return ids, offsets, np.minimum(word_counts, max_tokens)


# The model ---------------------------------------------------------------------------------


class RewardModel(nn.Module):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.config = dict(config)
        self.meta: dict = {}
        self.features = self.config.get("features", "hashed")
        self.uses_criterion = bool(self.config.get("criterion", False))
        self.uses_media = bool(self.config.get("media", False))
        self.n_numeric = N_NUMERIC + (N_MEDIA_FEATURES if self.uses_media else 0)
        self.embedding: nn.EmbeddingBag | None = None
        if self.features == "minilm":
            from judges.reward_model.minilm import EMBEDDING_DIM

            text_dim = EMBEDDING_DIM
        else:
            text_dim = config["embed_dim"]
            self.embedding = nn.EmbeddingBag(config["n_buckets"], text_dim, mode="mean")
        # prompt, response, prompt * response (and criterion, criterion * response)
        parts = 5 if self.uses_criterion else 3
        self.mlp = nn.Sequential(
            nn.Linear(parts * text_dim + self.n_numeric, config["hidden_dim"]),
            nn.GELU(),
            nn.Linear(config["hidden_dim"], 1),
        )

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, *features: torch.Tensor) -> torch.Tensor:
        """Rewards for the tensors ``featurize`` returns: per text (prompt, response, then
        the criterion when used) bucket ids and offsets (hashed) or one embedding (minilm),
        then the numeric features."""
        *texts, numeric = features
        if self.embedding is not None:
            vectors = [self.embedding(texts[i], texts[i + 1]) for i in range(0, len(texts), 2)]
        else:
            vectors = list(texts)
        prompt, response = vectors[0], vectors[1]
        parts = [prompt, response, prompt * response]
        if self.uses_criterion:
            parts += [vectors[2], vectors[2] * response]
        return self.mlp(torch.cat([*parts, numeric], dim=1)).squeeze(1)

    def _texts(self, inputs: list[ScoringInput]) -> list[list[str]]:
        texts = [[i.prompt_text for i in inputs], [i.response_text for i in inputs]]
        if self.uses_criterion:
            texts.append([i.criterion for i in inputs])
        return texts

    def prepare(self, inputs: list[ScoringInput], progress=None) -> None:
        """Computes the frozen embeddings of every text in ``inputs`` once, in batches, so
        that later ``featurize`` calls look them up (minilm; nothing to do for hashed).
        ``progress(done, total)`` is called after each batch."""
        if self.features == "minilm":
            from judges.reward_model.minilm import encoder

            texts = [text for column in self._texts(inputs) for text in column]
            encoder(self.device).prepare(texts, progress=progress)

    def featurize(self, inputs: list[ScoringInput]) -> tuple[torch.Tensor, ...]:
        """The ``forward`` arguments for ``inputs``, on the model's device."""
        hashing = {k: self.config[k] for k in ("n_buckets", "max_tokens", "bigrams")}
        arrays: list[np.ndarray] = []
        if self.features == "minilm":
            from judges.reward_model.minilm import encoder

            embed = encoder(self.device)
            arrays = [embed.encode(column) for column in self._texts(inputs)]
            _, _, words = hash_tokens(
                [i.response_text for i in inputs], **{**hashing, "bigrams": False}
            )
        else:
            counts = []
            for column in self._texts(inputs):
                ids, offsets, column_counts = hash_tokens(column, **hashing)
                arrays += [ids, offsets]
                counts.append(column_counts)
            words = counts[1]  # the responses'
        numeric = np.zeros((len(inputs), self.n_numeric), dtype=np.float32)
        numeric[:, 0] = np.log1p(words) / 5.0
        for row, item in enumerate(inputs):
            numeric[row, 1] = np.log1p(len(item.images))
            numeric[row, 2] = float(bool(item.response_text.strip()))
            readable = [stats.as_features() for stats in item.images if stats is not None]
            if item.images:
                numeric[row, 3] = 1.0 - len(readable) / len(item.images)
            if readable:
                numeric[row, 4:N_NUMERIC] = np.mean(readable, axis=0)
            if self.uses_media:
                numeric[row, N_NUMERIC:] = media_features(item.videos, item.audios)
        device = self.device
        return tuple(torch.from_numpy(array).to(device) for array in (*arrays, numeric))

    def score(self, inputs: list[ScoringInput]) -> list[float]:
        """One reward per input, in order."""
        if not inputs:
            return []
        with torch.inference_mode():
            return self(*self.featurize(inputs)).float().cpu().tolist()


# Checkpoints -------------------------------------------------------------------------------


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; a clear error when CUDA is asked for but absent."""
    try:
        device = torch.device(name or "cpu")
    except RuntimeError:
        raise CheckpointError(f"device {name!r} is not one of cpu, cuda, cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CheckpointError(f"device {name!r} requested, but this machine has no CUDA device")
    if device.type not in ("cpu", "cuda"):
        raise CheckpointError(f"device {name!r} is not one of cpu, cuda, cuda:N")
    return device


def validate_config(config) -> dict:
    """The config with defaults filled in; a clear error naming the first bad key."""
    if not isinstance(config, dict):
        raise CheckpointError("config must be a dict")
    merged = {**DEFAULT_CONFIG, **config}
    if merged["features"] not in FEATURES:
        raise CheckpointError(
            f"config.features {merged['features']!r} is not one of {', '.join(FEATURES)}"
        )
    if merged["tokenizer"] != TOKENIZER:
        raise CheckpointError(
            f"config.tokenizer {merged['tokenizer']!r} is not supported (only {TOKENIZER!r})"
        )
    for key in ("n_buckets", "embed_dim", "hidden_dim", "max_tokens"):
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(f"config.{key} must be a positive integer, not {value!r}")
    for key in ("bigrams", "criterion", "media"):
        if not isinstance(merged[key], bool):
            raise CheckpointError(f"config.{key} must be true or false, not {merged[key]!r}")
    return merged


def save_checkpoint(
    model: RewardModel, path: str | Path, *, config: dict, meta: dict | None = None
) -> Path:
    """Writes ``model`` in Arbiter's checkpoint format (``meta``: JSON-like provenance and
    metrics); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state_dict = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "config": validate_config(config),
        "state_dict": state_dict,
        "meta": meta or {},
    }
    torch.save(payload, path)
    return path


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> RewardModel:
    """The model saved at ``path``, in eval mode on ``device``; ``CheckpointError`` saying what
    is wrong otherwise."""
    path = Path(path)
    target = device if isinstance(device, torch.device) else resolve_device(device)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for files that are not checkpoints
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(
            f"{path}: not an Arbiter reward-model checkpoint "
            f"(format {found!r}, expected {CHECKPOINT_FORMAT!r})"
        )
    if payload.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint version {payload.get('version')!r} is not supported "
            f"(this Arbiter reads version {CHECKPOINT_VERSION})"
        )
    try:
        config = validate_config(payload.get("config"))
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    state_dict = payload.get("state_dict")
    if not isinstance(state_dict, dict):
        raise CheckpointError(f"{path}: state_dict is missing")
    model = RewardModel(config)
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        first_line = str(exc).strip().splitlines()[0]
        raise CheckpointError(f"{path}: weights do not match the config ({first_line})") from None
    meta = payload.get("meta")
    model.meta = meta if isinstance(meta, dict) else {}
    return model.to(target).eval()


def init_checkpoint(path: str | Path, *, seed: int = 0, **config) -> Path:
    """Writes a randomly initialised model (for tests, benchmarks and as a trainer's start)."""
    config = validate_config(config)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = RewardModel(config)
    finally:
        torch.random.set_rng_state(generator_state)
    return save_checkpoint(model, path, config=config)
