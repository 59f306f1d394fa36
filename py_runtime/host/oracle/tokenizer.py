"""The tokenizer oracle: the `tokenizers` package (Hugging Face's Rust implementation) on the same
tokenizer.json, a corpus that exercises every branch of the split patterns, and the parity check the
tests, the page's tokenizer suite and the benchmark share. Host only.
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CORPUS", "corpus_strings", "fuzz_strings", "ParityReport", "parity", "reference_tokenizer",
           "verify_tokenizer_report"]

# category -> strings. Each category names what it covers; special tokens are listed per vocabulary.
CORPUS: dict[str, tuple[str, ...]] = {
    "empty": ("",),
    "ascii_prose": (
        "Hello world",
        "The quick brown fox jumps over the lazy dog.",
        "Tokenization splits text into pieces; BPE then merges bytes by rank, lowest rank first.",
        "hello, WORLD! How are you?  I'm fine -- thanks... (really) [yes] {no} <maybe>",
        " leading space", "trailing space ", "  two leading spaces", "a", "A", " ", "x y z",
    ),
    "contractions": (
        "it's we're they've I'm you'll he'd don't", "IT'S WE'RE THEY'VE I'M YOU'LL HE'D DON'T",
        "It'S We'Re", "'s 't 're 've 'm 'll 'd", "'S'T'RE'VE'M'LL'D", "rock'n'roll o'clock ''quoted''",
        "'ſ 'K", "the dog's bone's", "'", "''", "' s", "'x",
    ),
    "accented_latin": (
        "café naïve résumé façade jalapeño Ångström Øresund Straße",
        "Ça va? Où est-ce qu'il habite? Ñandú, ŁÓDŹ, İstanbul, ǅemal",
        "e\u0301 (e + combining acute) vs \u00e9; A\u030a vs \u00c5",          # NFC composes the first of each
        "ﬁ ﬂ ﬀ ligatures, ½ ² ³ fractions, Ⅻ roman",
        "Ελληνικά κείμενα, русский текст, עברית, العربية, हिन्दी",
    ),
    "cjk": (
        "東京は日本の首都です。", "我喜欢自然语言处理和机器学习。", "한국어 텍스트도 있습니다.",
        "中文English混合text测试123数字", "全角スペース\u3000と半角 スペース", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
        "人工智能" * 40,
    ),
    "code": (
        "def encode(self, text: str) -> list[int]:\n    return [self.vocab[t] for t in text.split()]\n",
        "if (x >= 10 && y != 0) {\n\treturn x / y;\n} else {\n\t\treturn -1;\n}\n",
        "    for i in range(10):\n        if i % 2 == 0:\n            print(f\"{i:03d}\")\n",
        "<div class=\"row\">\n  <span id='a'>x</span>\n</div>",
        "SELECT * FROM t WHERE a='b' AND c<>3;", "x+=1;y-=2;z*=3;w/=4;", "#!/usr/bin/env bash\nset -euo pipefail\n",
        "{\"key\": [1, 2.5, -3e10, null, true], \"nested\": {\"a\": \"b\"}}",
        "https://example.com/path?q=1&r=two#frag", "user@example.org", "C:\\Windows\\System32",
    ),
    "whitespace": (
        "a  b   c    d", "a\tb\t\tc", "line1\nline2\n\nline4\n\n\n", "a\r\nb\r\n\r\nc", "\n", "\n\n\n", "   ",
        "x   \n   y", "end with spaces   ", "   \n\n   \t  \n x", "\t\t\n\t", "a \n b", "word\u00a0nbsp\u2009thin\u200bzw",
        "\x0b\x0c\x1c\x1d\x85 odd controls", "para\u2028line\u2029sep", " \n", "! \n\n?", "!!\r\n\r\n",
    ),
    "digits": (
        "1", "12", "123", "1234", "12345", "123456789012", "3.14159265358979", "1,000,000", "2024-12-01",
        "v1.2.3-rc4", "0x1F2E3D", "phone: +1 (555) 123-4567", "٣٤٥ Arabic-Indic, ४५६ Devanagari, ①②③ circled",
        "abc123def456", " 42 is the answer", "1e-5 2E+10",
    ),
    "emoji": (
        "😀", "I love 🍕 and 🎉!", "👨‍👩‍👧‍👦 family (ZWJ)", "👍🏽 skin tone", "🏳️‍🌈 flag", "🇯🇵🇫🇷 regional indicators",
        "❤️ heart with VS16", "😀😃😄😁😆😅", "text😀text", "🧑🏿‍🚀",
    ),
    # One pre-token each, thousands of symbols long: the BPE must not be quadratic in a word's length.
    "long_words": (
        "自然语言处理是人工智能的一个分支" * 150, " " * 3000, "7" * 1000, "QUJDRGVmZ2hpams0NTY3" * 100,
        "supercalifragilisticexpialidocious" * 30, "!?" * 800, "\n" * 500 + "x",
    ),
    "mixed": (
        "Mixing Ünïcödé, 中文, emoji 🤖, and code `x = 1` in one line.",
        "The price is $12.99 (€11.50) — a 15% discount!",
        "“Curly quotes” and ‘single’ and «guillemets» … ellipsis",
        "\u0000 nul and \u007f del", "\ufeffBOM at start", "tab\there",
    ),
}

# Special and added tokens embedded in text, per vocabulary (matched before any splitting).
SPECIAL_TEXT: dict[str, tuple[str, ...]] = {
    "llama3_2": (
        "<|begin_of_text|>Hello<|end_of_text|>",
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>",
        "text<|eot_id|><|eot_id|>more", "<|reserved_special_token_5|> and <|reserved_special_token_247|>",
        "<|not_a_token|> <|begin_of_text", "x <|python_tag|> y",
    ),
    "qwen3": (
        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        "<think>\nreasoning here\n</think>\n\nanswer", "<|endoftext|>", "<|im_start|><|im_end|>",
        "a<tool_call>b</tool_call>c", "<|vision_start|><|image_pad|><|vision_end|>", "<|im_start|", "<think >",
    ),
}


def corpus_strings(vocabulary: str | None = None) -> list[str]:
    """Every corpus string, then the special-token strings of `vocabulary` (all of them when None)."""
    strings = [s for group in CORPUS.values() for s in group]
    names = SPECIAL_TEXT if vocabulary is None else (vocabulary,)
    return strings + [s for name in names for s in SPECIAL_TEXT.get(name, ())]


# Short random strings drawn from the characters where the split patterns branch: letters that case-fold
# to the contraction letters (the long s), White_Space and its look-alikes (U+001C is str.isspace but
# not \s), numbers of every category, combining marks, ZWJ and variation selectors, added tokens.
_FUZZ_ALPHABET = (
    *"aAzZ'sStTrReEvVmMlLdDſ", " ", " ", "  ", "\n", "\r", "\t", "\u00a0", "\u3000", "\x0b", "\x1c", "\x85",
    *"0123456789٣①½", *".,!?-_()[]{}<>/\\\"#$%&*+=:;@^`|~", *"éÅßçñ東京中文한",
    "😀", "👍🏽", "\u200d", "\ufe0f", "🇯🇵", "\u0301", "<|im_start|>", "<|eot_id|>", "<think>",
)


def fuzz_strings(count: int, *, seed: int = 17, longest: int = 40) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_FUZZ_ALPHABET) for _ in range(rng.randint(1, longest))) for _ in range(count)]


def reference_tokenizer(path: Path | str):
    """The `tokenizers` package's tokenizer for the same file."""
    import tokenizers

    return tokenizers.Tokenizer.from_file(str(path))


@dataclass
class ParityReport:
    strings: int = 0
    tokens: int = 0                         # reference ids compared (every encode: with and without specials)
    decoded: int = 0                        # decodes compared (with and without special tokens)
    mismatches: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        verdict = "all equal" if self.equal else f"{len(self.mismatches)} mismatches"
        return f"{self.strings} strings, {self.tokens} ids compared, {self.decoded} decodes: {verdict}"


def parity(ours, reference, strings, *, normal_form: str | None = None, round_trip: bool = True) -> ParityReport:
    """Compare ids (with and without the post-processor's special tokens), decodes of the reference ids
    (with and without skip_special_tokens) and round trips: decode(encode(s)) == s, normalized first
    when the tokenizer normalizes (`normal_form`, e.g. "NFC"). round_trip=False where the tokenizer does
    not preserve text (a prefix space added, whitespace stripped around added tokens)."""
    report = ParityReport()
    for text in strings:
        report.strings += 1
        for add_special in (True, False):
            want = reference.encode(text, add_special_tokens=add_special).ids
            got = ours.encode(text, add_special_tokens=add_special)
            report.tokens += len(want)
            if got != want:
                report.mismatches.append(f"encode({text!r}, add_special_tokens={add_special}): {got} != {want}")
        ids = reference.encode(text, add_special_tokens=False).ids
        for skip in (False, True):
            want_text = reference.decode(ids, skip_special_tokens=skip)
            got_text = ours.decode(ids, skip_special_tokens=skip)
            report.decoded += 1
            if got_text != want_text:
                report.mismatches.append(f"decode({ids}, skip_special_tokens={skip}): {got_text!r} != {want_text!r}")
        expected = unicodedata.normalize(normal_form, text) if normal_form else text
        if round_trip and ours.decode(ours.encode(text, add_special_tokens=False)) != expected:
            report.mismatches.append(f"round trip of {text!r}")
    return report


def verify_tokenizer_report(report: dict, tokenizer_json: dict[str, Path]) -> list[ParityReport]:
    """The tokenizer suite's report (from the page or a native run): its ids and decodes, and its
    rendered chat's ids, against `tokenizers` on the host (tokenizer_json: vocabulary name -> its
    tokenizer.json). Raises AssertionError on any difference."""
    reports = []
    for case in report["cases"]:
        reference = reference_tokenizer(tokenizer_json[case["vocabulary"]])
        checked = ParityReport()
        for text, ids in zip(case["strings"], case["ids"]):
            want = reference.encode(text).ids
            checked.strings += 1
            checked.tokens += len(want)
            if ids != want:
                checked.mismatches.append(f"{case['vocabulary']}: encode({text!r}): {ids} != {want}")
        for ids, text in zip(case["ids"], case["decoded"]):
            checked.decoded += 1
            want_text = reference.decode(ids, skip_special_tokens=True)
            if text != want_text:
                checked.mismatches.append(f"{case['vocabulary']}: decode({ids}): {text!r} != {want_text!r}")
        chat = case["chat"]
        want = reference.encode(chat["text"], add_special_tokens=False).ids
        checked.strings += 1
        checked.tokens += len(want)
        if chat["ids"] != want:
            checked.mismatches.append(f"{case['vocabulary']}: chat {chat['text']!r}: {chat['ids']} != {want}")
        assert checked.equal, "\n".join(checked.mismatches[:20])
        reports.append(checked)
    return reports
