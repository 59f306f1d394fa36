"""A byte-level BPE tokenizer read from a Hugging Face tokenizer.json, in plain Python so it runs
unchanged in Pyodide (standard library only: json, unicodedata, re).

Encoding follows the `tokenizers` pipeline, step for step, so ids agree with it:
  1. added tokens (special or not) are cut out of the raw text first, longest match at the leftmost
     position; their ids are taken as they are;
  2. each remaining segment is normalized (NFC/NFD/NFKC/NFKD, or a Sequence of them);
  3. pre-tokenized: a Split by one of the known patterns (pretokenize.py) or Digits, then ByteLevel
     (optionally a prefix space, optionally GPT-2's own split, then every byte as one alphabet character);
  4. each pre-token is BPE-merged (bpe.py);
  5. with add_special_tokens, the post-processor's template wraps the ids (Llama 3's BOS 128000).
Decoding maps ids back to tokens (added tokens included, special ones skipped on request) and the
ByteLevel decoder turns them back into bytes, then UTF-8 with U+FFFD for incomplete sequences.

Anything in tokenizer.json outside this (another model type, normalizer, pre-tokenizer, decoder or
post-processor kind) is refused at load with an error naming the field and the kind: a tokenizer that
loads is one that encodes as `tokenizers` does.
"""

from __future__ import annotations

import codecs
import json
import unicodedata
from dataclasses import dataclass

from .added import AddedToken, AddedTokenMatcher
from .bpe import BPE
from .bytelevel import to_byte_chars, token_bytes
from .pretokenize import GPT2, DigitSplit, SplitPattern, split_pattern

__all__ = ["Tokenizer", "AddedToken", "TokenizerError", "DecodeStream"]

_NORMAL_FORMS = ("NFC", "NFD", "NFKC", "NFKD")


class TokenizerError(ValueError):
    pass


def _refuse(field: str, kind, supported) -> TokenizerError:
    message = f"tokenizer.json {field} {kind!r} is not supported (supported: {', '.join(supported)})"
    return TokenizerError(message)


@dataclass(frozen=True, kw_only=True)
class _ByteLevel:
    add_prefix_space: bool
    use_regex: bool


def _normal_forms(spec) -> tuple[str, ...]:
    if spec is None:
        return ()
    kind = spec.get("type")
    if kind in _NORMAL_FORMS:
        return (kind,)
    if kind == "Sequence":
        return tuple(form for part in spec["normalizers"] for form in _normal_forms(part))
    raise _refuse("normalizer", kind, (*_NORMAL_FORMS, "Sequence"))


def _pre_tokenizers(spec) -> tuple:
    if spec is None:
        return ()
    kind = spec.get("type")
    if kind == "Sequence":
        return tuple(step for part in spec["pretokenizers"] for step in _pre_tokenizers(part))
    if kind == "ByteLevel":
        return (_ByteLevel(add_prefix_space=spec.get("add_prefix_space", True), use_regex=spec.get("use_regex", True)),)
    if kind == "Digits":
        return (DigitSplit(individual=spec.get("individual_digits", False)),)
    if kind == "Split":
        pattern, behavior, invert = spec.get("pattern", {}), spec.get("behavior"), spec.get("invert", False)
        if "Regex" not in pattern or behavior != "Isolated" or invert:
            message = (f"tokenizer.json pre_tokenizer Split with pattern {pattern!r}, behavior {behavior!r}, "
                       f"invert {invert!r} is not supported (supported: a Regex, Isolated, not inverted)")
            raise TokenizerError(message)
        return (split_pattern(pattern["Regex"]),)
    raise _refuse("pre_tokenizer", kind, ("Sequence", "Split", "Digits", "ByteLevel"))


def _template(spec) -> tuple | None:
    """The single-sequence template as a tuple of ids and the marker None (where the text goes)."""
    if spec is None:
        return None
    kind = spec.get("type")
    if kind == "Sequence":
        found = [t for t in (_template(part) for part in spec["processors"]) if t is not None]
        if len(found) > 1:
            raise TokenizerError("tokenizer.json post_processor has more than one TemplateProcessing")
        return found[0] if found else None
    if kind == "ByteLevel":
        return None                      # offsets only: ids are unchanged
    if kind == "TemplateProcessing":
        items = []
        for item in spec["single"]:
            if "Sequence" in item:
                items.append(None)
            else:
                name = item["SpecialToken"]["id"]
                items.extend(spec["special_tokens"][name]["ids"])
        return tuple(items)
    raise _refuse("post_processor", kind, ("Sequence", "ByteLevel", "TemplateProcessing"))


def _check_decoder(spec) -> None:
    kind = None if spec is None else spec.get("type")
    if kind == "Sequence":
        for part in spec["decoders"]:
            _check_decoder(part)
    elif kind != "ByteLevel":
        raise _refuse("decoder", kind, ("ByteLevel", "Sequence of ByteLevel"))


def _merge_pair(merge, rank: int) -> tuple[str, str]:
    """A merge in either tokenizer.json form: "left right" (older files) or ["left", "right"]."""
    pair = merge.split(" ") if isinstance(merge, str) else merge
    if len(pair) != 2:
        raise TokenizerError(f"tokenizer.json merge {rank} {merge!r} is not a pair")
    return pair[0], pair[1]


class Tokenizer:
    """Encode text to ids and decode ids to text, as `tokenizers` does for the same tokenizer.json."""

    def __init__(self, spec: dict):
        model = spec.get("model", {})
        if model.get("type") != "BPE":
            raise _refuse("model type", model.get("type"), ("BPE",))
        for field in ("continuing_subword_prefix", "end_of_word_suffix"):
            if model.get(field):
                raise _refuse(f"model {field}", model[field], ("none",))
        if model.get("byte_fallback") or model.get("dropout"):
            raise TokenizerError("tokenizer.json model byte_fallback and dropout are not supported")
        self.normal_forms = _normal_forms(spec.get("normalizer"))
        self.pre_tokenizers = _pre_tokenizers(spec.get("pre_tokenizer"))
        if not any(isinstance(step, _ByteLevel) for step in self.pre_tokenizers):
            raise TokenizerError("tokenizer.json pre_tokenizer has no ByteLevel step: only byte-level BPE is supported")
        self.template = _template(spec.get("post_processor"))
        _check_decoder(spec.get("decoder"))
        merges = [_merge_pair(m, rank) for rank, m in enumerate(model.get("merges", []))]
        self.bpe = BPE(model["vocab"], merges, ignore_merges=bool(model.get("ignore_merges")))
        self.added_tokens = tuple(self._added_token(t) for t in spec.get("added_tokens", []))
        self._id_to_token = {i: t for t, i in self.bpe.vocab.items()}
        self._id_to_token.update({t.id: t.content for t in self.added_tokens})
        self._added_by_content = {t.content: t for t in self.added_tokens}
        self._special_ids = frozenset(t.id for t in self.added_tokens if t.special)
        self._raw_matcher = AddedTokenMatcher([t for t in self.added_tokens if not t.normalized])
        self._normalized_matcher = AddedTokenMatcher([t for t in self.added_tokens if t.normalized])

    @classmethod
    def from_json(cls, text: str | bytes) -> "Tokenizer":
        return cls(json.loads(text))

    @classmethod
    def from_file(cls, path) -> "Tokenizer":
        with open(path, "rb") as file:
            return cls.from_json(file.read())

    @staticmethod
    def _added_token(spec: dict) -> AddedToken:
        if spec.get("single_word"):
            raise TokenizerError(f"added token {spec['content']!r}: single_word matching is not supported")
        return AddedToken(id=spec["id"], content=spec["content"], special=spec.get("special", False),
                          normalized=spec.get("normalized", True), lstrip=spec.get("lstrip", False),
                          rstrip=spec.get("rstrip", False))

    # -- the public surface ------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Ids in use: the model's vocabulary and the added tokens."""
        return len(self._id_to_token)

    def token_to_id(self, token: str) -> int | None:
        added = self._added_by_content.get(token)
        return added.id if added is not None else self.bpe.vocab.get(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._id_to_token.get(token_id)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_ids

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """The ids of `text`; with add_special_tokens, wrapped by the post-processor's template."""
        ids: list[int] = []
        for piece, added in self._raw_matcher.split(text):
            if added is not None:
                ids.append(added)
                continue
            for form in self.normal_forms:
                piece = unicodedata.normalize(form, piece)
            for inner, inner_added in self._normalized_matcher.split(piece):
                if inner_added is not None:
                    ids.append(inner_added)
                else:
                    for word in self.pre_tokenize(inner):
                        ids.extend(self.bpe.encode_word(word))
        if add_special_tokens and self.template is not None:
            wrapped = []
            for item in self.template:
                if item is None:
                    wrapped.extend(ids)
                else:
                    wrapped.append(item)
            return wrapped
        return ids

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        """The text of `ids`: bytes joined first, so a character split across tokens comes back whole;
        an incomplete UTF-8 sequence reads U+FFFD. An id outside the vocabulary is an error."""
        data = b"".join(self.id_bytes(i, skip_special_tokens=skip_special_tokens) for i in ids)
        return data.decode("utf-8", "replace")

    def id_bytes(self, token_id: int, *, skip_special_tokens: bool = False) -> bytes:
        """The bytes one id stands for (none for a special token skipped)."""
        token = self._id_to_token.get(token_id)
        if token is None:
            raise TokenizerError(f"decode: id {token_id} is not in the vocabulary ({self.vocab_size} ids)")
        if skip_special_tokens and token_id in self._special_ids:
            return b""
        return token_bytes(token)

    def pre_tokenize(self, text: str) -> list[str]:
        """`text` (one normalized segment between added tokens) cut into pre-tokens in the byte-level
        alphabet, ready for BPE."""
        pieces = [text] if text else []
        for step in self.pre_tokenizers:
            if isinstance(step, (SplitPattern, DigitSplit)):
                pieces = [part for piece in pieces for part in step.split(piece)]
                continue
            if step.add_prefix_space:
                pieces = [p if p.startswith(" ") else " " + p for p in pieces]
            if step.use_regex:
                pieces = [part for piece in pieces for part in GPT2.split(piece)]
            pieces = [to_byte_chars(p) for p in pieces]
        return pieces


class DecodeStream:
    """Text as ids arrive, for streaming generated tokens into the page: `step(id)` returns the characters
    that id completes ("" while a character split across tokens waits for its other bytes), `finish()`
    flushes what is left (U+FFFD for an incomplete character). The steps joined equal decode(ids)."""

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = False):
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def step(self, token_id: int) -> str:
        return self._utf8.decode(self._tokenizer.id_bytes(token_id, skip_special_tokens=self._skip))

    def finish(self) -> str:
        return self._utf8.decode(b"", final=True)
