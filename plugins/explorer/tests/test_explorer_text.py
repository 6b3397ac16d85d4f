"""Stored text made safe: highlights on escaped text, markdown without raw HTML, SVG labels escaped."""

from __future__ import annotations

from pps_explorer import svg
from pps_explorer.text import highlight, markdown


def test_highlight_escapes_before_marking():
    out = str(highlight('<img src=x onerror="alert(1)"> snow & Snowfall', "snow onerror"))
    assert "<img" not in out and "&lt;img src=x <mark>onerror</mark>=&#34;alert(1)&#34;&gt;" in out
    assert "<mark>snow</mark> &amp; <mark>Snow</mark>fall" in out
    assert str(highlight("a <b>", "")) == "a &lt;b&gt;"
    assert str(highlight("x", "<mark>")) == "x"  # the query's markup is not a word to mark
    # only the query's content words: "in" and "the" are never marked
    assert str(highlight("Is the cottage in the mouse's way?", "mouse in the cottage")) == \
        "Is the <mark>cottage</mark> in the <mark>mouse</mark>&#39;s way?"


def test_markdown_renders_no_raw_html_and_refuses_script_links():
    out = str(markdown("**bold** <script>alert(1)</script> [x](javascript:alert(2)) ![i](data:text/html,x)"))
    assert "<strong>bold</strong>" in out and "<script>" not in out and "&lt;script&gt;" in out
    assert 'href="javascript:' not in out and "<img" not in out


def test_svg_labels_are_escaped():
    explored = {"entities": [{"uuid": "a", "name": "<script>x</script>", "distance": 0},
                             {"uuid": "b", "name": 'B"onload="x', "distance": 1}],
                "facts": [{"uuid": "f", "subject": "<script>x</script>", "predicate": "<P>", "object": 'B"onload="x',
                           "fact": "<img src=x>", "valid_at": None, "invalid_at": None}]}
    drawn = str(svg.graph(explored, "/ui/lyra/graph?depth=1&entity="))
    assert "<script>" not in drawn and "<img" not in drawn and 'B"onload' not in drawn
    assert "entity=%3Cscript%3Ex%3C%2Fscript%3E" in drawn
    activity = {"channels": {"<b>": 2}, "days": [{"date": "2026-01-01", "turns": {"<b>": 2}, "total": 2, "backlog": 2}]}
    bars, legend = svg.turns_per_day(activity)
    assert "<b>" not in str(bars) and legend == [("<b>", 2, 0)]
