"""Figures a reader understands without the docs (issue 45, item 4): axis labels in words with
units, a scatter's title from what its rows share, r with its p, and point labels inside the axes."""

import pytest

from experiments.reports import plots
from experiments.results.collect import write_csv
from experiments.results.correlation import shared_values

FIT = {"n": 3, "pearson_r": 0.961, "p_value": 0.1789, "r2": 0.9234, "slope": 1.0, "intercept": 0.0}


def test_known_columns_are_labelled_in_words_with_their_unit_and_others_as_named():
    assert plots.axis_label("f1_s") == "probe F1_S: macro-F1 over speech positions (%)"
    assert plots.axis_label("gap_relative") == "E(F, M): relative WER gap (%)\n>0: worse for women"
    assert plots.axis_label("my_column") == "my_column"


def test_the_statistics_give_r_with_its_p_and_the_cluster_line_where_the_fit_has_clusters():
    assert plots.fit_statistics(FIT) == "r = +0.96 (p 0.18), R² = 0.92, n = 3"
    clustered = FIT | {"n_clusters": 3, "cluster_by": "model", "p_permutation": 0.5, "p_permutation_floor": 0.1667, "r_between": 0.99, "r_within": None}
    assert plots.fit_statistics(clustered) == (
        "r = +0.96 (p 0.18), R² = 0.92, n = 3\n3 clusters (model): perm. p = 0.5 (min 0.17), r between = +0.99, within = n/a"
    )
    assert plots.fit_statistics({k: v for k, v in FIT.items() if k != "p_value"}) == "r = +0.96, R² = 0.92, n = 3"
    assert plots.fit_statistics(FIT | {"p_permutation": 1 / 6}) == "r = +0.96 (p 0.18, perm. p 0.17), R² = 0.92, n = 3"


def test_a_title_names_what_every_selected_row_shares(tmp_path):
    table = tmp_path / "t.csv"
    rows = [
        {"model": "wb", "dataset": "rv", "site": "encoder.final", "split": "stratified", "language": "fr"},
        {"model": "wb", "dataset": "rv", "site": "encoder.final", "split": "stratified", "language": "it"},
        {"model": "wb", "dataset": "rv", "site": "encoder.layer.0", "split": "stratified", "language": "fr"},
    ]
    write_csv(rows, ("model", "dataset", "site", "split", "language"), table)
    assert shared_values(table) == {"model": "wb", "dataset": "rv", "split": "stratified"}
    assert shared_values(table, {"site": "encoder.final"}) == {"model": "wb", "dataset": "rv", "site": "encoder.final", "split": "stratified"}
    assert shared_values(table, {"site": "nowhere"}) == {}


@pytest.mark.parametrize("xs", [[17.5, 45.0, 52.9], [52.9, 45.0, 17.5]])
def test_point_labels_stay_inside_the_axes(tmp_path, xs):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    outside = []
    original = pyplot.Figure.savefig

    def check(figure, *args, **kwargs):
        written = original(figure, *args, **kwargs)  # drawn: the texts have their final places
        renderer = figure.canvas.get_renderer()
        axis = figure.axes[0]
        box = axis.get_window_extent(renderer)
        outside.extend(t.get_text() for t in axis.texts if not (box.x0 <= t.get_window_extent(renderer).x0 and t.get_window_extent(renderer).x1 <= box.x1))
        return written

    pyplot.Figure.savefig = check
    try:
        paths = plots.scatter_with_fit(xs, [42.0, -100.0, 17.6], ["a long label", "it", "another long label"], FIT, "x", "y", tmp_path / "s")
    finally:
        pyplot.Figure.savefig = original
    assert [path.suffix for path in paths] == [".png", ".pdf"] and outside == []
