"""The pre-tokenizer split patterns of GPT-2, Llama 3 (the GPT-4 pattern) and Qwen2/3, as hand-written
scanners over Unicode categories.

tokenizer.json states these splits as regular expressions with \\p{L} (letters) and \\p{N} (numbers),
which Python's `re` lacks, and the `regex` module is not in Pyodide. Each pattern is an alternation tried
left to right at every position, so a scanner that tries the same alternatives in the same order, with
the backtracking each one implies worked out by hand, splits identically; the comments on `_match_at`
give each alternative and what its backtracking reduces to. A pattern not listed in KNOWN_PATTERNS is
refused by name: a guessed split would mis-tokenize silently.

Character classes, as `tokenizers` (Oniguruma) reads them: \\p{L} is general category L*, \\p{N} is N*,
\\s is the Unicode White_Space property (not str.isspace, which also takes U+001C..U+001F). Categories
come from the running Python's unicodedata, so code points assigned after its Unicode version read as
"other" (the host's CPython 3.11 has Unicode 14.0, Pyodide 314's Python 3.14 has 16.0).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = ["SplitPattern", "DigitSplit", "KNOWN_PATTERNS", "UnsupportedPattern", "split_pattern", "WHITESPACE"]

# The White_Space property (PropList.txt); stable since Unicode 6.3 moved U+180E out of it.
WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
                       + "\u2028\u2029\u202f\u205f\u3000")
_LETTER, _NUMBER, _SPACE, _NEWLINE, _OTHER = "L", "N", "S", "R", "O"   # R: \r or \n (also \s)


class UnsupportedPattern(ValueError):
    pass


_KINDS: dict[str, str] = {}     # character -> its class, filled as characters are met


def _kind(char: str) -> str:
    kind = _KINDS.get(char)
    if kind is None:
        if char == "\r" or char == "\n":
            kind = _NEWLINE
        elif char in WHITESPACE:
            kind = _SPACE
        else:
            major = unicodedata.category(char)[0]
            kind = _LETTER if major == "L" else _NUMBER if major == "N" else _OTHER
        _KINDS[char] = kind
    return kind


@dataclass(frozen=True, kw_only=True)
class SplitPattern:
    """One of the known patterns, described by the few ways the three differ."""
    name: str
    regex: str                      # exactly as tokenizer.json spells it
    contractions_ignore_case: bool  # (?i:'s|'t|...) vs 's|'t|...
    letter_prefix_any: bool         # [^\r\n\p{L}\p{N}]?\p{L}+ vs ' ?\p{L}+'
    digits_max: int | None          # \p{N}{1,3}: 3; \p{N}: 1; ' ?\p{N}+': None (any, with an optional space)
    newline_runs: bool              # ' ?[^\s\p{L}\p{N}]+[\r\n]*' and '\s*[\r\n]+' (Llama 3, Qwen2) or neither

    def split(self, text: str) -> list[str]:
        """The pieces the pattern's matches cut `text` into (every position matches one alternative,
        so there are no gaps)."""
        known = _KINDS.get
        kinds = [known(c) or _kind(c) for c in text]
        pieces, start, length = [], 0, len(text)
        while start < length:
            end = self._match_at(text, kinds, start, length)
            pieces.append(text[start:end])
            start = end
        return pieces

    def _match_at(self, text: str, kinds: list[str], i: int, n: int) -> int:
        kind = kinds[i]
        # 's|'t|'re|'ve|'m|'ll|'d, first that matches (case-folded per character under (?i:...)).
        if text[i] == "'":
            for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
                end = i + 1 + len(suffix)
                if end <= n:
                    got = text[i + 1:end]
                    if got == suffix or (self.contractions_ignore_case and
                                         all(c.casefold() == s for c, s in zip(got, suffix))):
                        return end
        # Letters, with one optional prefix character: greedy ? takes the prefix when a letter follows it.
        if kind == _LETTER:
            return _run(kinds, i + 1, n, _LETTER)
        if i + 1 < n and kinds[i + 1] == _LETTER and (
                (kind in (_SPACE, _OTHER)) if self.letter_prefix_any else text[i] == " "):
            return _run(kinds, i + 2, n, _LETTER)
        # Numbers.
        if self.digits_max is not None:
            if kind == _NUMBER:
                return min(_run(kinds, i + 1, n, _NUMBER), i + self.digits_max)
        else:
            if kind == _NUMBER:
                return _run(kinds, i + 1, n, _NUMBER)
            if text[i] == " " and i + 1 < n and kinds[i + 1] == _NUMBER:
                return _run(kinds, i + 2, n, _NUMBER)
        # ' ?[^\s\p{L}\p{N}]+', then [\r\n]* for Llama 3 / Qwen2.
        first = i + 1 if text[i] == " " and i + 1 < n and kinds[i + 1] == _OTHER else i
        if kinds[first] == _OTHER:
            end = _run(kinds, first + 1, n, _OTHER)
            return _run(kinds, end, n, _NEWLINE) if self.newline_runs else end
        # Only whitespace is left. e: the end of the maximal whitespace run.
        end = i + 1
        while end < n and kinds[end] in (_SPACE, _NEWLINE):
            end += 1
        # \s*[\r\n]+: \s* backs off to the run's last \r or \n, which [\r\n]+ then takes.
        if self.newline_runs:
            for last in range(end - 1, i - 1, -1):
                if kinds[last] == _NEWLINE:
                    return last + 1
        # \s+(?!\S): the whole run at the end of the text, else all but its last character (if that
        # leaves one); otherwise \s+ takes the single character.
        if end == n or end - i == 1:
            return end
        return end - 1


@dataclass(frozen=True, kw_only=True)
class DigitSplit:
    """The Digits pre-tokenizer (SmolLM2 puts it before GPT-2's split): numbers (char::is_numeric, the
    N* categories) cut out of the text, each on its own (individual) or in runs, the rest kept whole."""
    individual: bool

    def split(self, text: str) -> list[str]:
        known = _KINDS.get
        pieces, start, n = [], 0, len(text)
        while start < n:
            numeric = (known(text[start]) or _kind(text[start])) == _NUMBER
            end = start + 1
            if not (numeric and self.individual):
                while end < n and ((known(text[end]) or _kind(text[end])) == _NUMBER) == numeric:
                    end += 1
            pieces.append(text[start:end])
            start = end
        return pieces


def _run(kinds: list[str], i: int, n: int, kind: str) -> int:
    while i < n and kinds[i] == kind:
        i += 1
    return i


GPT2 = SplitPattern(
    name="gpt2", regex=r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    contractions_ignore_case=False, letter_prefix_any=False, digits_max=None, newline_runs=False)
LLAMA3 = SplitPattern(
    name="llama3",
    regex=(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    contractions_ignore_case=True, letter_prefix_any=True, digits_max=3, newline_runs=True)
QWEN2 = SplitPattern(
    name="qwen2",
    regex=(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    contractions_ignore_case=True, letter_prefix_any=True, digits_max=1, newline_runs=True)
KNOWN_PATTERNS: dict[str, SplitPattern] = {p.regex: p for p in (GPT2, LLAMA3, QWEN2)}


def split_pattern(regex: str) -> SplitPattern:
    """The scanner for a tokenizer.json Split regex, or UnsupportedPattern naming it."""
    found = KNOWN_PATTERNS.get(regex)
    if found is None:
        known = ", ".join(p.name for p in KNOWN_PATTERNS.values())
        message = (f"pre-tokenizer split pattern {regex!r} is not one this tokenizer implements "
                   f"(known: {known}); refusing rather than splitting it differently")
        raise UnsupportedPattern(message)
    return found
