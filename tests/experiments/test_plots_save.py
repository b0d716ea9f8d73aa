"""A figure is written whole or not at all: a save that fails halfway leaves the earlier figure and no temporary file."""

from __future__ import annotations

import pytest

from experiments.reports.plots import pyplot, save


def _figure():
    figure, axes = pyplot().subplots()
    axes.plot([0, 1], [1, 0])
    return figure


def test_a_figure_is_saved_as_png_and_pdf(tmp_path):
    paths = save(_figure(), tmp_path / "fig")
    assert [path.name for path in paths] == ["fig.png", "fig.pdf"]
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes().startswith(b"%PDF")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fig.pdf", "fig.png"]


def test_a_save_that_fails_halfway_keeps_the_earlier_figure_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    earlier = save(_figure(), tmp_path / "fig")
    before = {path.name: path.read_bytes() for path in earlier}
    figure = _figure()

    def killed(target, **kwargs):
        with open(target, "wb") as handle:
            handle.write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(figure, "savefig", killed)
    with pytest.raises(KeyboardInterrupt):
        save(figure, tmp_path / "fig")
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
