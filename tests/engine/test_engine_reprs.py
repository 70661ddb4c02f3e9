"""What collections, lattice values and programs look like in a terminal and in Jupyter."""

from __future__ import annotations

from blooml import Program, bloom, lmap, lmax, lset, table


class Store(Program):
    kv = table(["k"], ["v"])
    seen = lset()

    @bloom
    def rules(self):
        self.seen <= self.kv.map(lambda r: r.k)


def test_repr_shows_first_rows_as_a_table() -> None:
    p = Store()
    assert repr(p.kv) == "<table kv: 0 rows>"
    p.kv.insert([(f"key{i}", i * 10) for i in range(12)])
    p.tick()
    lines = repr(p.kv).splitlines()
    assert lines[0] == "<table kv: 12 rows>"
    assert lines[1] == "  k       v"
    assert lines[2] == "  'key0'  0"
    assert lines[11] == "  'key9'  90"
    assert lines[12] == "  ... 2 more"
    assert len(lines) == 13
    one = Store()
    one.kv.insert([("x" * 50, 1)])
    one.tick()
    assert repr(one.kv).splitlines() == [
        "<table kv: 1 row>",
        "  k" + " " * 31 + "v",
        "  '" + "x" * 26 + "...  1",
    ]


def test_html_of_collections_lattices_and_programs() -> None:
    p = Store()
    p.kv.insert([("a", 1), ("<b>", 2)])
    p.tick()
    h = p.kv._repr_html_()
    assert h.startswith("<table><caption style='text-align:left'>table kv: 2 rows</caption>")
    assert "<th><u>k</u></th><th>v</th>" in h
    assert "<td>&#x27;&lt;b&gt;&#x27;</td><td>2</td>" in h
    s = p.seen._repr_html_()
    assert "<b>lattice seen</b>" in s and "lset: 2 elements" in s
    assert "<td>&#x27;a&#x27;</td>" in s
    whole = p._repr_html_()
    assert "<summary>table kv: 2 rows</summary>" in whole and "lattice seen" in whole
    assert whole.count("<details open>") == 2


def test_html_of_lattice_values_and_limit() -> None:
    m = lmap({f"k{i:03}": lmax(i) for i in range(60)})
    h = m._repr_html_()
    assert "lmap: 60 entries" in h and h.count("<tr>") == 1 + 50 + 1
    assert "… 10 more" in h and "<td>lmax(0)</td>" in h
    assert lmax(3)._repr_html_() == "<code>lmax(3)</code>"
