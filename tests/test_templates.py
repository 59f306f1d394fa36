"""The template language: substitution, statements, and errors that name file and line."""

from __future__ import annotations

import pytest

from py_runtime.host.templates import TemplateError, render, uses_template_syntax


def test_substitutes_expressions():
    assert render("a ${N * 2}u; ${OP}(x)\n", {"N": 32, "OP": "exp"}) == "a 64u; exp(x)\n"


def test_if_elif_else_choose_one_branch():
    text = "$if MODE == 'a':\n  A\n$elif MODE == 'b':\n  B\n$else:\n  C\nend\n"
    assert render(text, {"MODE": "a"}) == "A\nend\n"
    assert render(text, {"MODE": "b"}) == "B\nend\n"
    assert render(text, {"MODE": "z"}) == "C\nend\n"


def test_for_repeats_its_block_with_the_loop_variable():
    text = "$for i in range(3):\n  x${i} = ${i * i};\ndone\n"
    assert render(text, {}) == "x0 = 0;\nx1 = 1;\nx2 = 4;\ndone\n"


def test_nested_blocks_keep_relative_indentation():
    text = "fn f() {\n  $if A:\n    $for i in range(2):\n      let v${i} = 1;\n  return;\n}\n"
    assert render(text, {"A": True}) == "fn f() {\n  let v0 = 1;\n  let v1 = 1;\n  return;\n}\n"


@pytest.mark.parametrize("text,line,fragment", [
    ("ok\n${MISSING}\n", 2, "unknown name 'MISSING'"),
    ("ok\n\n$while X:\n  y\n", 3, "unknown statement"),
    ("$if A\n  x\n", 1, "must end with ':'"),
    ("$else:\n  x\n", 1, "without a matching"),
    ("a\n${1 +}\n", 2, "bad expression"),
    ("a $ b\n", 1, "stray '$'"),
    ("$for i in range(2):\n  ${i / 0}\n", 2, "cannot evaluate"),
    ("${__import__('os')}\n", 1, "unsupported expression"),
])
def test_errors_name_the_file_and_line(text, line, fragment):
    with pytest.raises(TemplateError) as caught:
        render(text, {"A": True}, path="shaders/x.wgsl")
    assert caught.value.line == line
    assert fragment in caught.value.message
    assert str(caught.value).startswith(f"shaders/x.wgsl:{line}:")


def test_detects_template_syntax():
    assert uses_template_syntax("plain\ncode\n") is None
    assert uses_template_syntax("plain\nx = ${A}\n") == 2
    assert uses_template_syntax("a\n  $if A:\n") == 2
