"""Search's text handling without a database (uocr_core/search/words.py and hits.py): CJK runs
indexed as character pairs and asked for as phrases of them; a query refused with a reason;
the boxes of a page's matches, a phrase in one box, placed by character share."""

from __future__ import annotations

import pytest

from uocr_core.errors import InvalidRequest
from uocr_core.search import hits, words

STOP = {"of", "the", "and", "for"}


def test_cjk_runs_are_indexed_as_overlapping_pairs_then_the_last_character() -> None:
    assert words.indexed_text("档案馆 archive 契") == " 档案 案馆 馆  archive  契 "
    assert words.indexed_text("Deed of gift, 1998") == "Deed of gift, 1998"


def test_a_cjk_run_in_a_query_is_a_phrase_of_its_pairs_quoted_or_not() -> None:
    assert words.parse("捐赠契约 deed").websearch == ' "捐赠 赠契 契约"  deed'
    assert words.parse('"the 捐赠契约 deed"').websearch == '"the  捐赠 赠契 契约  deed"'
    query = words.parse("  deed   of\tgift 契约 契约 ")
    assert query.text == "deed of gift 契约 契约" and query.cjk_runs == ("契约",)
    # An unclosed quote quotes nothing (the run stays a phrase of its own).
    assert words.parse('"捐赠契约').websearch == ' "捐赠 赠契 契约" '


def test_a_lone_cjk_character_is_asked_for_as_a_prefix_of_the_pairs() -> None:
    """Every character of an indexed run starts a pair or is the run's last: "王:*" finds it."""
    query = words.parse("王 contract")
    assert query.cjk_singles == ("王",) and query.prefixes == "王:*"
    assert query.websearch.strip() == "contract" and query.cjk_runs == ("王",)
    assert words.parse("猫 狗").prefixes == "猫:* & 狗:*"


@pytest.mark.parametrize(
    ("q", "says"),
    [
        (None, "q is empty"),
        ("", "q is empty"),
        (" \t ", "q is empty"),
        ("deed\x00", "control character"),
        ("a\x1bb", "control character"),
        ("x" * 501, "at most 500"),
        ("?! -- ...", "only punctuation"),
    ],
)
def test_a_query_that_cannot_be_searched_is_refused_saying_why(q: str | None, says: str) -> None:
    with pytest.raises(InvalidRequest, match=says) as refused:
        words.parse(q)
    assert refused.value.loc == ("query", "q")


def _words(*asked: str) -> hits.Words:
    return hits.Words(asked=lambda w: w in asked, stop=lambda w: w in STOP)


def test_a_phrase_is_one_box_over_its_stop_words_and_far_words_are_boxes_of_their_own() -> None:
    line = hits.Line("the deed of gift for every gift", (100, 10, 410, 30))  # 31 chars, 10 px
    found = hits.find([line], _words("deed", "gift"), ())
    # "deed of gift" (4-16), then "gift" again: "for every" is not all stop words.
    assert found.boxes == [(140, 10, 260, 30), (370, 10, 410, 30)]
    assert found.snippet == line.text


def test_boxes_come_from_every_matching_line_and_cjk_as_written() -> None:
    lines = [
        hits.Line("nothing here", (0, 0, 120, 10)),
        hits.Line("档案馆保存捐赠契约", (0, 20, 90, 30)),
        hits.Line("契约 sealed deed", (0, 40, 140, 50)),
    ]
    found = hits.find(lines, _words("deed"), ("契约",))
    assert found.boxes == [(70, 20, 90, 30), (0, 40, 20, 50), (100, 40, 140, 50)]
    assert found.snippet == "档案馆保存捐赠契约"  # the first line that matches
    assert hits.find(lines, _words("absent"), ()).snippet == "nothing here"


def test_a_long_line_is_cut_around_its_match_for_the_snippet() -> None:
    text = "lorem " * 60 + "deed " + "ipsum " * 60
    found = hits.find([hits.Line(text, (0, 0, 1000, 10))], _words("deed"), ())
    assert "deed" in found.snippet and len(found.snippet) <= hits.SNIPPET_CHARS + 2
    assert found.snippet.startswith("…") and found.snippet.endswith("…")


def test_lexemes_are_read_from_postgres_text_leaving_out_excluded_ones() -> None:
    query = "'deed' <-> 'gift' & !'will' | 'o''brien'"
    assert hits.lexemes(query, positive_only=True) == {"deed", "gift", "o'brien"}
    assert hits.lexemes(query) == {"deed", "gift", "will", "o'brien"}
    assert hits.lexemes("'run':3,4 'archiv':1") == {"run", "archiv"}
