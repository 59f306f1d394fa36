"""The pure-Python tokenizer (py_runtime/text) gives the ids and text of the `tokenizers` package on the
same tokenizer.json: Llama 3.2's and Qwen3's over the oracle's corpus and seeded fuzz strings, and
variants that reach the other supported branches (GPT-2's split, a prefix space, "a b" merges, normalizer
sequences, added-token flags, Digits). The parity check itself is shown to fail when a merge is dropped, and
what the tokenizer does not implement is refused by name.

The parity figures are printed (pytest -s shows them)."""

from __future__ import annotations

import copy
import json

import pytest

from py_runtime.host.oracle.tokenizer import corpus_strings, fuzz_strings, parity
from py_runtime.text import DecodeStream, Tokenizer, TokenizerError, UnsupportedPattern
from py_runtime.text.bytelevel import BYTE_TO_CHAR
from py_runtime.text.pretokenize import LLAMA3

VOCABULARIES = {"llama3_2": None, "qwen3": "NFC"}      # name -> the normal form its normalizer applies


@pytest.mark.parametrize("name", VOCABULARIES)
def test_ids_and_text_match_tokenizers_on_the_corpus(vendored_tokenizers, name):
    report = parity(vendored_tokenizers.ours(name), vendored_tokenizers.reference(name), corpus_strings(name),
                    normal_form=VOCABULARIES[name])
    print(f"\n[parity] {name} corpus: {report.summary()}")
    assert report.equal, "\n".join(report.mismatches[:20])
    assert report.strings > 100 and report.tokens > 5000


@pytest.mark.parametrize("name", VOCABULARIES)
def test_ids_and_text_match_tokenizers_on_fuzz_strings(vendored_tokenizers, name):
    report = parity(vendored_tokenizers.ours(name), vendored_tokenizers.reference(name), fuzz_strings(400),
                    normal_form=VOCABULARIES[name])
    print(f"\n[parity] {name} fuzz: {report.summary()}")
    assert report.equal, "\n".join(report.mismatches[:20])


def test_the_vocabularies_are_the_ones_the_issue_names(vendored_tokenizers):
    llama, qwen = vendored_tokenizers.ours("llama3_2"), vendored_tokenizers.ours("qwen3")
    assert (len(llama.bpe.vocab), len(llama.added_tokens), llama.vocab_size) == (128000, 256, 128256)
    assert (len(qwen.bpe.vocab), len(qwen.added_tokens), qwen.vocab_size) == (151643, 26, 151669)
    assert llama.encode("Hi")[0] == 128000 and llama.encode("Hi", add_special_tokens=False)[0] != 128000
    assert qwen.normal_forms == ("NFC",) and qwen.encode("Hi") == qwen.encode("Hi", add_special_tokens=False)
    assert llama.bpe.ignore_merges and not qwen.bpe.ignore_merges
    assert llama.encode("1234567", add_special_tokens=False) == [llama.token_to_id(t) for t in ("123", "456", "7")]
    assert qwen.decode(qwen.encode("<|im_start|>hi<|im_end|>"), skip_special_tokens=True) == "hi"


def _small_spec(spec: dict, merges: int) -> dict:
    """A consistent cut of a byte-level vocabulary: the 256 byte tokens and the first `merges` merges
    (with what they make), renumbered densely in the original order, the added tokens after them (where
    `tokenizers` puts added tokens the model lacks), no post-processor. Loads in milliseconds, so
    variants are cheap."""
    kept = [list(m) for m in spec["model"]["merges"][:merges]]
    tokens = set(BYTE_TO_CHAR) | {part for m in kept for part in (m[0], m[1], m[0] + m[1])}
    order = sorted((i, t) for t, i in spec["model"]["vocab"].items() if t in tokens)
    small = copy.deepcopy({k: v for k, v in spec.items() if k != "model"})
    small["model"] = {**{k: v for k, v in spec["model"].items() if k not in ("vocab", "merges")},
                      "vocab": {t: new for new, (_, t) in enumerate(order)}, "merges": kept}
    for offset, token in enumerate(small["added_tokens"]):
        token["id"] = len(order) + offset
    small["post_processor"] = None
    return small


def _variants(spec: dict) -> dict[str, tuple[dict, bool]]:
    """name -> (tokenizer.json, whether it preserves text so round trips are checked)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    variants = {}
    gpt2 = copy.deepcopy(spec)
    gpt2["pre_tokenizer"] = byte_level
    gpt2["model"]["merges"] = [" ".join(m) for m in gpt2["model"]["merges"]]
    variants["gpt2 split, 'a b' merges"] = (gpt2, True)
    prefixed = copy.deepcopy(spec)
    prefixed["pre_tokenizer"] = {**byte_level, "add_prefix_space": True}
    variants["gpt2 split, prefix space"] = (prefixed, False)
    llama_split = copy.deepcopy(spec)
    llama_split["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = LLAMA3.regex
    llama_split["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True
    variants["llama3 split, prefix space per piece"] = (llama_split, False)
    normalized = copy.deepcopy(spec)
    normalized["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "NFKC"}]}
    variants["NFD then NFKC"] = (normalized, True)
    flags = copy.deepcopy(spec)
    for token in flags["added_tokens"]:
        token["normalized"] = token["content"] == "<think>"
        token["lstrip"] = token["content"] == "<|im_end|>"
        token["rstrip"] = token["content"] == "<|im_start|>"
    variants["added tokens: normalized, lstrip, rstrip"] = (flags, False)
    return variants


def test_variants_reach_every_supported_branch_and_match_tokenizers(vendored_tokenizers):
    import tokenizers

    small = _small_spec(vendored_tokenizers.spec("qwen3"), merges=6000)
    strings = corpus_strings("qwen3") + fuzz_strings(300, seed=5) + [
        " <|im_end|> x", "<|im_start|>  \n y", "a <think> b", "\x1c<|im_end|>\x1c", "<|im_start|>\x1c\u3000x"]
    for name, (spec, preserves_text) in _variants(small).items():
        text = json.dumps(spec)
        normal_form = "NFKC" if name.startswith("NFD") else "NFC"
        report = parity(Tokenizer.from_json(text), tokenizers.Tokenizer.from_str(text), strings,
                        normal_form=normal_form, round_trip=preserves_text)
        print(f"\n[parity] variant {name}: {report.summary()}")
        assert report.equal, f"{name}:\n" + "\n".join(report.mismatches[:20])


def test_digit_splits_match_tokenizers_on_a_vocabulary_with_multi_digit_tokens(vendored_tokenizers):
    """Digits (SmolLM2 runs it before GPT-2's split, one digit at a time) on a cut of Llama 3.2's
    vocabulary, whose merges make multi-digit tokens, so the two Digits modes give different ids."""
    import tokenizers

    small = _small_spec(vendored_tokenizers.spec("llama3_2"), merges=6000)
    strings = corpus_strings("llama3_2") + fuzz_strings(300, seed=7)
    counts = {}
    for individual in (True, False):
        spec = copy.deepcopy(small)
        spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": individual},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
        text = json.dumps(spec)
        report = parity(Tokenizer.from_json(text), tokenizers.Tokenizer.from_str(text), strings)
        print(f"\n[parity] variant digits (individual {individual}) then gpt2 split: {report.summary()}")
        assert report.equal, "\n".join(report.mismatches[:20])
        counts[individual] = report.tokens
    assert counts[True] > counts[False]


def test_the_parity_check_fails_when_a_merge_is_dropped(vendored_tokenizers):
    """Llama 3.2 skips merges for pre-tokens already in the vocabulary (ignore_merges): drop the merges
    that make a piece of a word that is not, and the check must see different ids."""
    spec, reference = vendored_tokenizers.spec("llama3_2"), vendored_tokenizers.reference("llama3_2")
    pieces = reference.encode(" Tokenization", add_special_tokens=False).tokens
    assert len(pieces) >= 2, pieces
    dropped = pieces[-1]
    merges = [m for m in spec["model"]["merges"] if "".join(m) != dropped]
    assert len(merges) < len(spec["model"]["merges"])
    broken = Tokenizer({**spec, "model": {**spec["model"], "merges": merges}})
    report = parity(broken, reference, corpus_strings("llama3_2"))
    print(f"\n[parity] llama3_2 without the merges making {dropped!r}: {report.summary()}")
    assert not report.equal and any("Tokenization" in m for m in report.mismatches)


@pytest.fixture(scope="module")
def small_qwen(vendored_tokenizers) -> dict:
    return _small_spec(vendored_tokenizers.spec("qwen3"), merges=500)


def _changed(spec: dict, path: tuple, value) -> dict:
    spec = copy.deepcopy(spec)
    target = spec
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return spec


def test_an_unknown_split_pattern_is_refused_by_name(small_qwen):
    pattern = r"\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+"
    spec = _changed(small_qwen, ("pre_tokenizer", "pretokenizers", 0, "pattern", "Regex"), pattern)
    with pytest.raises(UnsupportedPattern, match="is not one this tokenizer implements") as error:
        Tokenizer(spec)
    assert pattern in str(error.value) or repr(pattern) in str(error.value)


@pytest.mark.parametrize("path,value,message", [
    (("normalizer",), {"type": "Lowercase"}, "normalizer 'Lowercase' is not supported"),
    (("normalizer",), {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Strip"}]},
     "normalizer 'Strip' is not supported"),
    (("pre_tokenizer",), {"type": "Metaspace"}, "pre_tokenizer 'Metaspace' is not supported"),
    (("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [{"type": "Punctuation"}, {"type": "ByteLevel"}]},
     "pre_tokenizer 'Punctuation' is not supported"),
    (("pre_tokenizer", "pretokenizers", 0, "behavior"), "Removed", "Split with pattern"),
    (("pre_tokenizer",), {"type": "Sequence", "pretokenizers": []}, "no ByteLevel step"),
    (("decoder",), {"type": "WordPiece"}, "decoder 'WordPiece' is not supported"),
    (("post_processor",), {"type": "BertProcessing"}, "post_processor 'BertProcessing' is not supported"),
    (("model", "type"), "WordPiece", "model type 'WordPiece' is not supported"),
    (("model", "merges"), [["Ġ", "Ġ"], ["Ġ", "not-a-token"]], "merge 1 .* 'not-a-token' is not in the vocabulary"),
    (("model", "merges"), ["Ġ Ġ Ġ"], "merge 0 'Ġ Ġ Ġ' is not a pair"),
])
def test_what_is_not_implemented_is_refused_naming_the_field(small_qwen, path, value, message):
    with pytest.raises(ValueError, match=message):
        Tokenizer(_changed(small_qwen, path, value))


def test_decoding_an_id_outside_the_vocabulary_is_an_error(vendored_tokenizers):
    qwen = vendored_tokenizers.ours("qwen3")
    with pytest.raises(TokenizerError, match="id 999999 is not in the vocabulary"):
        qwen.decode([9707, 999999])
    # The first byte of 'é' (0xC3, 'Ã' in the byte-level alphabet) alone is half a character: U+FFFD.
    assert qwen.decode([qwen.token_to_id("Ã"), qwen.token_to_id("x")]) == "\ufffdx"


@pytest.mark.parametrize("name", VOCABULARIES)
def test_a_decode_stream_joins_to_the_decode_and_never_splits_a_character(vendored_tokenizers, name):
    ours = vendored_tokenizers.ours(name)
    for text in corpus_strings(name) + fuzz_strings(100, seed=3):
        ids = ours.encode(text)
        stream = DecodeStream(ours, skip_special_tokens=True)
        chunks = [stream.step(i) for i in ids]
        assert "".join(chunks) + stream.finish() == ours.decode(ids, skip_special_tokens=True), text
        assert not any("\ufffd" in chunk for chunk in chunks), (text, chunks)
    stream = DecodeStream(ours)
    assert [stream.step(ours.token_to_id(t)) for t in ("æ", "Ŀ", "±")] == ["", "", "東"]   # 東 is e6 9d b1
    assert stream.step(ours.token_to_id("æ")) == "" and stream.finish() == "\ufffd"
