"""Probes of any speaker attribute (issue 32 item 1): labels from the manifest's ``extra``, checked
against the store's manifest sha256; two classes through the binary probes, three or more through
the mean probe; one-vs-one pairs; the gender path unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import probe as probe_cli
from extract.attributes import LabelError, attribute_task, parse_attribute_task, read_attribute
from probing import metrics
from probing.data import ProbeError, attribute_column, make_splits, pair_tasks
from probing.run import ProbeConfig, run_probe
from tests.attribute_corpus import SITE, write_attribute_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three accents of four speakers each (two female, two male), six utterances per speaker."""
    return write_attribute_corpus(tmp_path_factory.mktemp("accent"))


def test_task_spellings():
    assert attribute_task("age") == "attribute:age" and attribute_task("age", ("young", "old")) == "attribute:age:young,old"
    assert parse_attribute_task("attribute:age:young,old") == ("age", ("young", "old")) and parse_attribute_task("female-male") is None
    for bad in (("a:b", ()), ("age", ("young",)), ("age", ("x", "x")), ("age", ("a,b", "c"))):
        with pytest.raises(LabelError):
            attribute_task(*bad)
    with pytest.raises(ProbeError, match="unknown task 'accent'"):
        ProbeConfig(store="s", site=SITE, task="accent")


def test_three_accents_with_the_mean_probe(corpus):
    """Each accent shifts its own dimension by 3 standard deviations: the multinomial mean probe reads all three."""
    manifest, store = corpus
    row = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent")).row
    assert row["config"]["task"] == "attribute:accent" and row["classes"] == ["north", "south", "west"]
    assert row["labels"] == {"attribute": "accent", "manifest": str(manifest), "manifest_sha256": row["subject"]["manifest_sha256"], "unlabelled": 0}
    assert row["f1_macro"] == 100.0 and set(row["recall"]) == {"north", "south", "west"}
    # balanced per class and speaker-disjoint: one test speaker of each accent, six utterances each
    assert row["splits"]["test"] == {"utterances": 18, "speakers": 3, "classes": {"north": 6, "south": 6, "west": 6}}
    assert "labels" not in row["config"]
    stratified = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent", split="stratified")).row
    assert stratified["f1_macro"] == 100.0 and stratified["splits"]["source"] == "speaker-stratified"
    assert "shared_speakers_only" not in stratified  # the fixed split takes this task: sharing speakers was a choice


def test_three_accents_with_the_attention_probe(corpus):
    """The attention probe's K-class softmax head reads the three accents (separable by construction);
    its test probabilities are one row per utterance over the three classes."""
    _, store = corpus
    result = run_probe(ProbeConfig(store=str(store), site=SITE, probe="attention", task="attribute:accent", lr=1e-2, max_epochs=30))
    row = result.row
    assert row["classes"] == ["north", "south", "west"] and set(row["recall"]) == {"north", "south", "west"}
    assert row["f1_macro"] >= 90 and row["splits"]["dev"]["classes"] == {"north": 6, "south": 6, "west": 6}
    probabilities = result.attention["probabilities"]
    assert probabilities.shape == (18, 3) and np.allclose(probabilities.sum(axis=1), 1.0)
    assert len(result.attention["weights"]) == 18


def three_class_sequences(count: int, seed: int, dim: int = 6, strength: float = 2.0):
    """``count`` sequences of 8-16 frames per class (3 classes); class k adds ``strength`` to dimension k."""
    rng = np.random.default_rng(seed)
    sequences, labels = [], []
    for label in range(3):
        for _ in range(count):
            frames = rng.standard_normal((int(rng.integers(8, 17)), dim)).astype(np.float32)
            frames[:, label] += strength
            sequences.append(frames)
            labels.append(label)
    return sequences, np.array(labels)


def test_three_class_attention_reads_separable_classes_and_shuffled_labels_stay_near_chance():
    """Trained on the true labels the K-class head reads the classes; trained on the same sequences with
    the train and dev labels shuffled (scored on true test labels) it stays near chance (33 for three
    balanced classes)."""
    from probing.train import fit_attention

    train, dev, test = three_class_sequences(30, 0), three_class_sequences(9, 1), three_class_sequences(30, 2)
    options = {"dim": 6, "max_epochs": 20, "lr": 1e-2, "classes": 3}
    true = fit_attention(train, dev, **options).class_probabilities(test[0])[0]
    assert metrics.multiclass_summary(test[1], true.argmax(axis=1), ("a", "b", "c"))["f1_macro"] >= 90
    scores = []
    for seed in range(4):  # one labelling can map the three clusters onto the classes by luck (seen: 11 to 50): their mean is the test
        rng = np.random.default_rng(seed)
        shuffled_train, shuffled_dev = (train[0], uninformative(train[1], rng)), (dev[0], uninformative(dev[1], rng))
        shuffled = fit_attention(shuffled_train, shuffled_dev, **options).class_probabilities(test[0])[0]
        scores.append(metrics.multiclass_summary(test[1], shuffled.argmax(axis=1), ("a", "b", "c"))["f1_macro"])
    assert 20 < np.mean(scores) < 45, scores


def uninformative(labels: np.ndarray, rng) -> np.ndarray:
    """Labels shuffled so that each true class holds every class equally often (as the two-class shuffled
    control keeps half of each class): no agreement with the true ones beyond chance, by construction."""
    shuffled = labels.copy()
    for label in np.unique(labels):
        where = np.flatnonzero(labels == label)
        shuffled[where] = rng.permutation(np.resize(np.unique(labels), len(where)))
    return shuffled


@pytest.mark.parametrize(
    "options",
    [{"probe": "positional"}, {"probe": "sampled"}, {"probe": "max"}, {"probe": "attention", "lr": 1e-2, "max_epochs": 20}, {"probe": "mean", "split": "loso"}],
    ids=["positional", "sampled", "max", "attention", "mean-loso"],
)
def test_two_classes_go_through_the_binary_probes(corpus, options):
    _, store = corpus
    row = run_probe(ProbeConfig(store=str(store), site=SITE, positions=4, task="attribute:accent:north,west", **options)).row
    assert row["classes"] == ["west", "north"] and set(row["recall"]) == {"west", "north"}  # north, named first, is class 1
    assert row["f1_macro"] > 90


def test_a_two_class_attribute_with_its_control(corpus):
    _, store = corpus
    row = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent:north,west", control="shuffled")).row
    assert row["f1_real"] == 100.0 and row["f1_macro"] < 75 and row["classes"] == ["west", "north"]


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ({"probe": "positional"}, "--probe positional tells two classes apart"),
        ({"probe": "sampled"}, "--probe sampled tells two classes apart"),
        ({"probe": "mean", "control": "shuffled"}, "the shuffled control is defined for two classes"),
        ({"probe": "attention", "control": "shuffled"}, "the shuffled control is defined for two classes"),
        ({"probe": "mean", "mdl": True}, "--mdl"),
        ({"probe": "mean", "split": "loso"}, "leave-one-speaker-out pools two classes"),
    ],
)
def test_three_classes_are_refused_where_only_two_work(corpus, options, refused):
    _, store = corpus
    with pytest.raises(ProbeError, match="3 classes \\(north, south, west\\): probe each pair of classes with --pairs") as error:
        run_probe(ProbeConfig(store=str(store), site=SITE, task="attribute:accent", **options))
    assert refused in str(error.value) and "\n" not in str(error.value)


def test_a_changed_manifest_is_refused(tmp_path):
    manifest, store = write_attribute_corpus(tmp_path)
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"north"', '"northern"', 1), encoding="utf-8")
    with pytest.raises(ProbeError, match=f"{manifest} changed since store {store} was built from it"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent"))
    other = tmp_path / "copy.jsonl"  # --labels names another file: checked the same way, and said so
    other.write_text(manifest.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ProbeError, match=f"--labels {other} is not the manifest store {store} was built from"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent", labels=str(other)))
    with pytest.raises(ProbeError, match=f"--labels {tmp_path}: not a file; give the manifest store {store} was built from"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent", labels=str(tmp_path)))


def test_labels_names_the_manifest_where_the_recorded_path_is_gone(tmp_path):
    manifest, store = write_attribute_corpus(tmp_path)
    moved = manifest.rename(tmp_path / "moved.jsonl")
    with pytest.raises(ProbeError, match="which is not there .*pass --labels MANIFEST"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent"))
    row = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent", labels=str(moved))).row
    assert row["labels"]["manifest"] == str(moved) and row["config"]["labels"] == str(moved)
    # where the labels were read does not change what the run is
    assert row["run_id"] == ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent").run_id()


def test_an_absent_attribute_lists_those_found(corpus):
    manifest, store = corpus
    with pytest.raises(ProbeError, match=f"no utterance of {manifest} has extra.age; the attributes its utterances have: accent"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:age"))


def test_one_class_only(tmp_path):
    _, store = write_attribute_corpus(tmp_path, {"a-0": "north", "a-1": "north", "a-2": None})
    with pytest.raises(ProbeError, match="every utterance labelled with attribute:accent is north: a probe needs two classes at least"):
        run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent"))
    with pytest.raises(ProbeError, match="pairs need two classes at least"):
        pair_tasks(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent"))


def test_unlabelled_utterances_are_left_out_and_counted(tmp_path):
    speakers = {f"{accent}-{s}": accent for accent in ("north", "south") for s in range(4)} | {"quiet-0": None}
    _, store = write_attribute_corpus(tmp_path, speakers, missing={"north-0-0", "south-3-5"})
    row = run_probe(ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent")).row
    assert row["labels"]["unlabelled"] == 6 + 2 and row["classes"] == ["north", "south"]


def test_odd_characters_in_values(tmp_path):
    odd = "Scots (Glasgow) — ü/é"
    speakers = {f"s{s}": (odd if s % 2 else "RP") for s in range(8)}
    _, store = write_attribute_corpus(tmp_path, speakers)
    config = ProbeConfig(store=str(store), site=SITE, probe="mean", task="attribute:accent")
    assert pair_tasks(config) == [f"attribute:accent:RP,{odd}"]
    row = run_probe(config).row
    assert row["classes"] == ["RP", odd] and set(row["recall"]) == {"RP", odd}


def test_values_that_cannot_be_labels(tmp_path):
    manifest, _ = write_attribute_corpus(tmp_path, {"s0": "a", "s1": "b"})
    from extract.provenance import file_sha256

    lines = manifest.read_text(encoding="utf-8").splitlines()
    for value, problem in ((3.5, "a string or a whole number"), ("a\nb", "control character"), (True, "a string or a whole number")):
        row = json.loads(lines[0]) | {"extra": {"accent": value}}
        manifest.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=f"{manifest}:1: extra.accent is .*{problem}"):
            read_attribute(manifest, "accent", file_sha256(manifest), "a store")
    row = json.loads(lines[0]) | {"extra": {"accent": 7}}  # whole numbers are categories, kept as spelled
    manifest.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n", encoding="utf-8")
    assert read_attribute(manifest, "accent", file_sha256(manifest), "a store").values["s0-0"] == "7"
    with pytest.raises(LabelError, match="records no manifest sha256"):
        read_attribute(manifest, "accent", None, "a store")


def test_splits_number_the_classes_as_named():
    """Hand-made metadata: attribute:age:young,old numbers young 1 and old 0, as female-male numbers female 1."""
    speakers = [f"s{k}" for k in range(6) for _ in range(2)]
    metadata = {
        "gender": ["female"] * 12,
        "speaker": speakers,
        "language": ["en"] * 12,
        "split": [""] * 12,
        "dataset": ["d"] * 12,
        attribute_column("age"): [("young", "old", None)[int(s[1]) % 3] for s in speakers],
    }
    ids = [f"u{k}" for k in range(12)]
    splits = make_splits(metadata, ids, "attribute:age:young,old", seed=0, dev_needed=False)
    assert splits.class_names == ("old", "young")
    for part in (splits.train, splits.test):
        assert all(label == (metadata[attribute_column("age")][ids.index(i)] == "young") for i, label in zip(part.ids, part.labels))
    assert not {"u4", "u5", "u10", "u11"} & set(splits.train.ids + splits.dev.ids + splits.test.ids)  # s2 and s5 have no age


def test_multiclass_summary_by_hand():
    truth, predicted = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 1, 2, 0])
    # F1: class 0 tp1 fp1 fn1 -> 0.5; class 1 tp2 fp1 fn0 -> 0.8; class 2 tp1 fp0 fn1 -> 2/3
    scores = metrics.multiclass_summary(truth, predicted, ("a", "b", "c"))
    assert scores["f1_macro"] == pytest.approx(100 * (0.5 + 0.8 + 2 / 3) / 3) and scores["accuracy"] == pytest.approx(400 / 6)
    assert scores["recall"] == pytest.approx({"a": 50.0, "b": 100.0, "c": 50.0})
    binary_truth, binary_predicted = np.array([0, 1, 1, 0, 1]), np.array([0, 1, 0, 1, 1])
    many, two = metrics.multiclass_summary(binary_truth, binary_predicted, ("m", "f")), metrics.summary(binary_truth, binary_predicted, ("m", "f"))
    assert many["f1_macro"] == pytest.approx(two["f1_macro"]) and many["accuracy"] == pytest.approx(two["accuracy"])
    assert many["recall"] == pytest.approx(two["recall"])


def load_rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_command_runs_each_pair_and_resumes(corpus, tmp_path, capsys):
    _, store = corpus
    out = tmp_path / "probes.jsonl"
    argv = ["--store", str(store), "--site", SITE, "--probe", "mean", "--attribute", "accent", "--pairs", "--out", str(out)]
    assert probe_cli.main(argv) == 0
    rows = load_rows(out)
    assert [row["config"]["task"] for row in rows] == ["attribute:accent:north,south", "attribute:accent:north,west", "attribute:accent:south,west"]
    assert all(row["f1_macro"] == 100.0 and len(row["classes"]) == 2 for row in rows)
    assert probe_cli.main(argv) == 0 and len(load_rows(out)) == 3  # finished runs are skipped
    two = ["--store", str(store), "--site", SITE, "--probe", "mean", "--attribute", "accent", "--groups", "west, north", "--out", str(out)]
    assert probe_cli.main(two) == 0 and load_rows(out)[-1]["config"]["task"] == "attribute:accent:west,north"
    for refused, message in (
        ([*argv[:-2], "--groups", "north,west", "--out", str(out)], "--pairs probes every pair"),
        (["--store", str(store), "--site", SITE, "--pairs", "--out", str(out)], "--pairs pairs the classes of an attribute"),
        (["--store", str(store), "--site", SITE, "--attribute", "a:b", "--out", str(out)], "--attribute a:b: attribute 'a:b'"),
    ):
        with pytest.raises(SystemExit):
            probe_cli.main(refused)
        assert message in capsys.readouterr().err
    assert probe_cli.main(["--store", str(store), "--site", SITE, "--attribute", "age", "--out", str(out)]) == 2
    assert "no utterance of" in capsys.readouterr().err


def test_from_a_tiny_random_whisper_store(tmp_path, monkeypatch):
    """Extraction records the manifest (here by a relative path) and its sha256; the probe reads the attribute through them."""
    import extract.jobs  # noqa: F401  (bound to the real loader before the patch: a first import under it would keep the patch for later tests)
    from experiments import extract as extract_cli
    from extract.families import tiny_extractor
    from extract.manifest import write_manifest
    from tests.corpus import write_corpus

    rng = np.random.default_rng(0)
    utterances = write_corpus(tmp_path, [(0.1 * rng.standard_normal(8000)).astype(np.float32) for _ in range(16)], speakers=8)
    for utterance in utterances:
        utterance.extra = {"accent": "north" if int(utterance.speaker[1:]) < 4 else "south"}
    write_manifest(tmp_path / "m.jsonl", utterances)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("extract.spec.load_extractor", lambda spec, **options: tiny_extractor("whisper"))
    assert extract_cli.main(["--family", "whisper", "--manifest", "m.jsonl", "--sites", "encoder.final", "--out", "store", "--quiet"]) == 0
    out = tmp_path / "probes.jsonl"
    assert probe_cli.main(["--store", "store", "--site", "encoder.final", "--probe", "mean", "--attribute", "accent", "--out", str(out)]) == 0
    (row,) = load_rows(out)
    assert row["config"]["task"] == "attribute:accent" and row["classes"] == ["north", "south"]
    assert row["labels"]["manifest"] == "m.jsonl" and row["labels"]["unlabelled"] == 0 and 0 <= row["f1_macro"] <= 100


def test_the_pages_commands_parse(capsys, monkeypatch):
    """docs/attributes.md's worked example, flag by flag, as tests/cli/test_documented_commands.py checks the papers' pages."""
    import torch

    from experiments.stages import parser_of
    from tests.cli.test_documented_commands import _stage, documented_commands
    from tests.paths import CHECKOUT

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    commands = documented_commands(CHECKOUT / "docs" / "attributes.md")
    assert {argv[0] for _, argv in commands} >= {"experiments.probe", "experiments.asr_gap", "experiments.collect"}
    for line, argv in commands:
        try:
            parser_of(_stage(argv[0])).parse_args(argv[1:])
        except SystemExit as exit:
            pytest.fail(f"docs/attributes.md:{line}: {' '.join(argv)}: {capsys.readouterr().err.strip()} ({exit.code})")


def test_a_grid_names_an_attribute_task(corpus, tmp_path, capsys):
    manifest, store = corpus
    grid = tmp_path / "grid.yaml"
    out = tmp_path / "grid.jsonl"
    grid.write_text(
        f"out: {out}\nstores: [{store}]\nsites: [{SITE}]\nprobes: [mean, positional]\n"
        f"options: {{task: 'attribute:accent:south,west', labels: {manifest}, positions: 4}}\n",
        encoding="utf-8",
    )
    assert probe_cli.main(["--grid", str(grid)]) == 0
    assert "task=attribute:accent:south,west" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        probe_cli.main(["--grid", str(grid), "--attribute", "accent", "--pairs"])
    assert "a grid names its task in options" in capsys.readouterr().err
    rows = load_rows(out)
    assert [row["config"]["probe"] for row in rows] == ["mean", "positional"] and all(row["classes"] == ["west", "south"] for row in rows)


def test_a_manifest_is_read_once_per_version(tmp_path, monkeypatch):
    """A grid's runs share one read of the manifest; a rewritten manifest (new size or time) is read and checked again."""
    from extract import attributes
    from extract.provenance import file_sha256

    manifest, _ = write_attribute_corpus(tmp_path, {"s0": "a", "s1": "b"})
    reads = []
    monkeypatch.setattr(attributes, "_read", lambda path, attribute, read=attributes._read: reads.append(path) or read(path, attribute))
    sha = file_sha256(manifest)
    assert read_attribute(manifest, "accent", sha, "x").values == read_attribute(manifest, "accent", sha, "x").values and len(reads) == 1
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"b"', '"bb"'), encoding="utf-8")
    with pytest.raises(LabelError, match="changed since x was built"):
        read_attribute(manifest, "accent", sha, "x")
    assert len(reads) == 2


def test_the_issue_s_spelling_task_attribute_is_the_attribute_flag(corpus, tmp_path, capsys):
    """``--task attribute:NAME [--pairs]`` and ``--task attribute:NAME:A,B`` (issue 32's spelling) run the
    same probes as ``--attribute NAME [--pairs]`` and ``--attribute NAME --groups A,B``; a gender task
    on --task stays the deprecated spelling of --groups, and anything else is refused in one line."""
    _, store = corpus
    base = ["--store", str(store), "--site", SITE, "--probe", "mean"]
    spelled = {"task": tmp_path / "task.jsonl", "flags": tmp_path / "flags.jsonl"}
    assert probe_cli.main([*base, "--task", "attribute:accent", "--pairs", "--out", str(spelled["task"])]) == 0
    assert probe_cli.main([*base, "--task", "attribute:accent:west,north", "--out", str(spelled["task"])]) == 0
    assert probe_cli.main([*base, "--attribute", "accent", "--pairs", "--out", str(spelled["flags"])]) == 0
    assert probe_cli.main([*base, "--attribute", "accent", "--groups", "west,north", "--out", str(spelled["flags"])]) == 0
    tasks, flags = (load_rows(spelled[name]) for name in ("task", "flags"))
    assert (
        [row["config"]["task"] for row in tasks]
        == [row["config"]["task"] for row in flags]
        == [
            "attribute:accent:north,south",
            "attribute:accent:north,west",
            "attribute:accent:south,west",
            "attribute:accent:west,north",
        ]
    )
    assert [row["f1_macro"] for row in tasks] == [row["f1_macro"] for row in flags]
    with pytest.raises(SystemExit):
        probe_cli.main([*base, "--task", "accent", "--out", str(tmp_path / "x.jsonl")])
    assert "error: argument --task: invalid choice: 'accent' (choose from 'female-male', 'other-male', or attribute:NAME[:A,B])" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--attribute", "accent", "--task", "female-male"], "--task female-male is a gender probe: leave it out"),
        (["--task", "female-male", "--attribute", "accent"], "--task female-male is a gender probe: leave it out"),
        (["--attribute", "age", "--task", "attribute:accent"], "--task attribute:accent names the attribute (and its groups): leave out --attribute"),
        (["--task", "attribute:accent", "--groups", "north,west"], "argument --groups: not allowed with argument --task"),
    ],
)
def test_two_spellings_of_the_task_are_refused_not_one_silently_kept(corpus, tmp_path, capsys, flags, message):
    _, store = corpus
    with pytest.raises(SystemExit) as exited:
        probe_cli.main(["--store", str(store), "--site", SITE, "--probe", "mean", *flags, "--out", str(tmp_path / "p.jsonl")])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--task", "attribute:accent:"], "two different, non-empty classes"),
        (["--task", "attribute:accent:south,"], "two different, non-empty classes, got 'south', ''"),
        (["--attribute", "accent", "--groups", " ,south"], "two different, non-empty classes"),
    ],
)
def test_an_empty_class_name_is_refused(corpus, tmp_path, capsys, flags, message):
    _, store = corpus
    with pytest.raises(SystemExit):
        probe_cli.main(["--store", str(store), "--site", SITE, "--probe", "mean", *flags, "--out", str(tmp_path / "p.jsonl")])
    assert message in capsys.readouterr().err


def test_a_value_of_only_white_space_is_no_label():
    from extract.attributes import attribute_value

    assert attribute_value({"age": "  "}, "age") is None and attribute_value({"age": " young "}, "age") == " young "


def test_pairs_go_on_past_a_pair_that_cannot_be_probed(tmp_path, capsys):
    """Class c has one speaker: its pairs cannot be split by speaker; a,b is still probed and written,
    and the error at the end counts the pairs not probed (a rerun skips a,b)."""
    speakers = {f"a-{n}": "a" for n in range(4)} | {f"b-{n}": "b" for n in range(4)} | {"c-0": "c"}
    _, store = write_attribute_corpus(tmp_path, speakers)
    out = tmp_path / "pairs.jsonl"
    argv = ["--store", str(store), "--site", SITE, "--probe", "mean", "--attribute", "accent", "--pairs", "--out", str(out)]
    assert probe_cli.main(argv) == 2
    captured = capsys.readouterr()
    assert [row["config"]["task"] for row in load_rows(out)] == ["attribute:accent:a,b"]
    assert "2/3 not probed: mean probe on" in captured.out and "task=attribute:accent:a,c" in captured.out
    assert "task=attribute:accent:b,c" in captured.out
    assert captured.err.startswith("error: 2 of 3 runs could not be probed (the others' rows are written; listed above): ") and captured.err.count("\n") == 1
    assert probe_cli.main(argv) == 2 and len(load_rows(out)) == 1
    assert "[probe] 3 runs, 1 already in" in capsys.readouterr().out


@pytest.mark.parametrize(
    "speakers, expected",
    [
        ({f"{value[0]}{s}": value for value in ("a,b", "c") for s in range(3)}, "class 'a,b' holds a comma and cannot be named in a task"),
        ({f"n{s}": "north" for s in range(3)}, "attribute:accent has 1 class (north) in store"),
    ],
)
def test_pairs_that_cannot_be_formed_are_one_line(tmp_path, capsys, speakers, expected):
    """--pairs forms its pairs from the store before running them: a class that cannot be named in a
    task (a comma) or a single class is refused in one line (both were tracebacks)."""
    _, store = write_attribute_corpus(tmp_path / "c", speakers, utterances=2)
    argv = ["--store", str(store), "--site", SITE, "--probe", "mean", "--attribute", "accent", "--pairs", "--out", str(tmp_path / "p.jsonl")]
    assert probe_cli.main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and expected in error and error.count("\n") == 1, error
