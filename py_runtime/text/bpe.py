"""The BPE model: merge-rank byte pair encoding of one pre-token, cached per pre-token.

A pre-token starts as one symbol per character (per byte, in the byte-level alphabet) and the adjacent
pair with the lowest merge rank is merged until no adjacent pair has a merge; among equal ranks the
leftmost goes first. That is the order `tokenizers` uses (a heap of (rank, position)), so the ids agree
even for merge lists where merging every occurrence of a pair at once would differ.

The heap over a linked list of symbols makes a word of n symbols cost O(n log n): a long pre-token
(a CJK paragraph has no spaces, so it is one \\p{L}+ run) would be quadratic with the textbook loop that
rescans every pair after each merge. Results are cached per pre-token, since text repeats words.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Mapping

__all__ = ["BPE", "BPEError"]

_CACHE_LIMIT = 65536       # pre-tokens kept; the cache is dropped whole when full (words repeat locally)


class BPEError(ValueError):
    pass


class BPE:
    """vocab: token -> id; merges: (left, right) pairs in rank order; ignore_merges: a pre-token that is
    itself in the vocabulary is emitted as that one id without merging (Llama 3 sets it)."""

    def __init__(self, vocab: Mapping[str, int], merges: Iterable[tuple[str, str]], *, ignore_merges: bool = False):
        self.vocab = dict(vocab)
        self.ignore_merges = ignore_merges
        self._shift = max(max(self.vocab.values(), default=0).bit_length(), 1)
        # (left id << shift | right id) -> rank << shift | merged id: one int key and value per merge,
        # a third of the memory of tuples for Llama 3's 280,147 merges.
        self._merges: dict[int, int] = {}
        vocab_get, shift = self.vocab.get, self._shift
        for rank, (left, right) in enumerate(merges):
            ids = (vocab_get(left), vocab_get(right), vocab_get(left + right))
            if None in ids:
                missing = [t for t, i in zip((left, right, left + right), ids) if i is None]
                message = f"merge {rank} ({left!r} {right!r}): {missing[0]!r} is not in the vocabulary"
                raise BPEError(message)
            self._merges[ids[0] << shift | ids[1]] = rank << shift | ids[2]
        self._cache: dict[str, tuple[int, ...]] = {}

    @property
    def merge_count(self) -> int:
        return len(self._merges)

    def encode_word(self, word: str) -> tuple[int, ...]:
        """The ids of one pre-token (already in the byte-level alphabet)."""
        cached = self._cache.get(word)
        if cached is None:
            cached = self._encode_uncached(word)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[word] = cached
        return cached

    def _encode_uncached(self, word: str) -> tuple[int, ...]:
        vocab = self.vocab
        if self.ignore_merges and word in vocab:
            return (vocab[word],)
        # A character outside the vocabulary (impossible in the byte-level alphabet) is dropped, as
        # `tokenizers` does for a BPE without an unknown token.
        ids = [vocab[c] for c in word if c in vocab]
        n = len(ids)
        if n < 2:
            return tuple(ids)
        merges, shift = self._merges, self._shift
        mask = (1 << shift) - 1
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        heap = []
        for i in range(n - 1):
            merged = merges.get(ids[i] << shift | ids[i + 1])
            if merged is not None:
                heap.append((merged >> shift, i, merged & mask))
        heapq.heapify(heap)
        push, pop = heapq.heappush, heapq.heappop
        while heap:
            _, i, target = pop(heap)
            j = nxt[i]
            if ids[i] < 0 or j < 0:
                continue
            merged = merges.get(ids[i] << shift | ids[j])
            if merged is None or merged & mask != target:
                continue                                   # stale: a neighbour merged first
            ids[i], ids[j] = target, -1
            k = nxt[j]
            nxt[i] = k
            if k >= 0:
                prev[k] = i
                merged = merges.get(target << shift | ids[k])
                if merged is not None:
                    push(heap, (merged >> shift, i, merged & mask))
            p = prev[i]
            if p >= 0:
                merged = merges.get(ids[p] << shift | target)
                if merged is not None:
                    push(heap, (merged >> shift, p, merged & mask))
        return tuple(t for t in ids if t >= 0)
