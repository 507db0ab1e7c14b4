"""The views a scan looks at: disguises undone, ordinary text left alone."""

from __future__ import annotations

import base64

from engram_api.memory.secrets.normalise import clean, decoded_blobs, rejoined, views


def test_full_width_and_zero_width_characters_read_as_the_plain_text() -> None:
    full_width = "".join(chr(ord(c) + 0xFEE0) for c in "sk_live")
    assert clean(full_width) == "sk_live"
    assert clean("gh\u200bp_\u2060ab\ufeffc\u00ad") == "ghp_abc"


def test_chinese_text_is_unchanged_by_cleaning() -> None:
    assert clean("我的密码是 hunter22") == "我的密码是 hunter22"


def test_split_and_spaced_upper_case_keys_are_rejoined() -> None:
    assert rejoined("AKIA IOSF ODNN 7EXA MPLE") == "AKIAIOSFODNN7EXAMPLE"
    assert rejoined('key = "AKIAIOSF" + "ODNN7EXAMPLE"') == 'key = "AKIAIOSFODNN7EXAMPLE"'
    assert rejoined("AKIAIOS\nFODNN7EXAMPLE") == "AKIAIOSFODNN7EXAMPLE"


def test_short_upper_case_words_in_prose_are_not_joined() -> None:
    assert rejoined("The USA and NATO met") == "The USA and NATO met"


def test_base64_that_decodes_to_text_gets_a_second_look() -> None:
    blob = base64.b64encode(b"token=ghp_abcdefghijklmnopqrstuvwxyz0123456789").decode()
    assert decoded_blobs(f"config {blob} done") == [
        "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    ]
    assert decoded_blobs("sha256 " + "ab" * 32) == []


def test_plain_text_has_a_single_view() -> None:
    assert views("User prefers dark mode") == ["User prefers dark mode"]
