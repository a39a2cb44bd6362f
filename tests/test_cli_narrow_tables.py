"""A terminal table narrower than its values never splits a word or a number over two lines:
text wraps at its spaces, a word wider than its column ends in an ellipsis, and a number keeps
its whole width (CSV and JSON give every value whole)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.cli import output
from tests.conftest import examples

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-:", min_size=1, max_size=40)


@settings(max_examples=examples(30))
# Emoji codes and markup in values are printed as written (rich reads ":a:" in a string as 🅰).
@example(width=50, phrases=[["000:a:000", "[b]x[/b]"]], numbers=[0])
@given(
    width=st.integers(40, 90),
    phrases=st.lists(st.lists(WORDS, min_size=1, max_size=4), min_size=1, max_size=3),
    numbers=st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=3),
)
def test_no_word_or_number_is_split_over_two_lines(width, phrases, numbers, capsys):
    import os

    os.environ["COLUMNS"] = str(width)
    try:
        rows = [
            {
                "note": " ".join(phrases[i % len(phrases)]),
                "other": "x y",
                "n": numbers[i % len(numbers)],
            }
            for i in range(max(len(phrases), len(numbers)))
        ]
        capsys.readouterr()
        output.print_rows(rows, output.TABLE)
        printed = capsys.readouterr().out
    finally:
        del os.environ["COLUMNS"]
    pieces = {piece for line in printed.splitlines() for piece in line.replace("│", " ").split()}
    words = {w for phrase in phrases for w in phrase}
    for piece in pieces - words - {"note", "other", "n", "x", "y"}:
        if piece.lstrip("┃┏┡└━─┳┴┗┛┓┩┬┼┤├┌┐┘╇╈╋═║╔╗╚╝").strip() == "":
            continue
        if piece.endswith("…"):
            assert any(w.startswith(piece[:-1]) for w in words | {"note", "other"}), piece
            continue
        assert piece in {str(n) for n in numbers} | {"…"}, (piece, printed)
    for number in numbers:
        assert str(number) in pieces
