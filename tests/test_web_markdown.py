"""Markdown as notes and transcripts show it (orbit/web/markdown.py): what renders, what never
does, and the page's time budget against text made to be slow."""

from __future__ import annotations

from orbit.web import markdown


def test_markdown_renders_and_hostile_markup_stays_text() -> None:
    html = markdown.render(
        "**b** `c`\n\n- x\n\n[ok](https://example.org) [p](/runs/1)\n\n```\n<b>\n```"
    )
    assert "<strong>b</strong>" in html and "<code>c</code>" in html and "<li>x</li>" in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html
    assert '<a href="/runs/1"' in html and "<pre><code>&lt;b&gt;" in html
    hostile = markdown.render(
        "<script>x</script> <img src=x onerror=y> [a](javascript:x) [b](JAVASCRIPT:x) "
        "[c](data:text/html,x) [d](vbscript:x) [e](file:///etc/passwd) [f](//evil.example) "
        "![g](http://evil.example/p.png) <javascript:x>"
    )
    assert "<script" not in hostile and "<img" not in hostile and "<a " not in hostile
    assert "&lt;script&gt;" in hostile and "[image: g http://evil.example/p.png]" in hostile


def test_a_page_stops_rendering_markdown_when_its_time_is_spent() -> None:
    budget = markdown.Budget(seconds=0.05)
    slow = "![" * 15_000  # 30,000 characters: about 0.2 s or more of markdown-it
    assert budget.render(slow).startswith("<p>")
    assert budget.render("**x**") == '<div class="md-plain">**x**</div>'
    big = "**y** " * (markdown.MD_MAX // 5)
    assert markdown.Budget().render(big).startswith('<div class="md-plain">**y**')
