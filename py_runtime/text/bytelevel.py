"""GPT-2's byte-level alphabet: every byte as one printable character, so a BPE vocabulary of strings
covers arbitrary bytes with no unknown token.

The 188 bytes that are printable in Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the
other 68 (controls, space, DEL, NBSP, soft hyphen) take U+0100 onwards in byte order, which is why a
space reads 'Ġ' (U+0120) and a newline 'Ċ' (U+010A) in the vocabularies.
"""

from __future__ import annotations

__all__ = ["BYTE_TO_CHAR", "CHAR_TO_BYTE", "to_byte_chars", "token_bytes"]


def _alphabet() -> list[str]:
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    kept = set(printable)
    chars, shifted = [""] * 256, 0
    for byte in range(256):
        if byte in kept:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + shifted)
            shifted += 1
    return chars


BYTE_TO_CHAR: tuple[str, ...] = tuple(_alphabet())
CHAR_TO_BYTE: dict[str, int] = {char: byte for byte, char in enumerate(BYTE_TO_CHAR)}
# Every byte's character at once: str.translate over a latin-1 view of the UTF-8 bytes is ~20x faster
# than a per-byte join in CPython, and pre-tokens are mapped once per encode call.
_TRANSLATION = {byte: char for byte, char in enumerate(BYTE_TO_CHAR)}


def to_byte_chars(text: str) -> str:
    """`text`'s UTF-8 bytes written in the byte-level alphabet (one character per byte)."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1").translate(_TRANSLATION)


def token_bytes(token: str) -> bytes:
    """The bytes a vocabulary token stands for. A token with a character outside the alphabet (an
    added token such as '<|im_start|>' is usually inside it, but not always) stands for its own UTF-8,
    as the `tokenizers` ByteLevel decoder does."""
    try:
        return bytes(CHAR_TO_BYTE[char] for char in token)
    except KeyError:
        return token.encode("utf-8", "surrogatepass")
